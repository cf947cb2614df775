//! JSON-RPC over the framing: the `id` of a message too long to deliver,
//! and the error response that answers it.
//!
//! A line over the size limit is dropped (see
//! [`LineDecoder`](crate::decoder::LineDecoder)), but a JSON-RPC peer is
//! waiting for what it carried: a response that never arrives leaves a
//! request hanging, a request that is never answered leaves the child
//! waiting. While the line's bytes are dropped, an [`IdScanner`] follows its
//! top-level object and keeps the `id` member's value, so the notice can
//! name it ([`Oversized::json_rpc_id`]) and the host can fail that request,
//! or answer the child with [`oversized_error`].
//!
//! The first bytes of the line are not enough: serializers write members in
//! any order (the TypeScript MCP SDK writes `{"result":…,"jsonrpc":"2.0","id":7}`),
//! and a `result` or `params` may hold `"id"` members of its own. The
//! scanner reads the whole line, knows which members are top-level, and
//! reads keys as JSON does (`"\u0069d"` is `id`).
//!
//! [`Oversized::json_rpc_id`]: crate::frame::Oversized::json_rpc_id

use std::fmt;
use std::io::Write as _;

use bytes::Bytes;

/// The longest id an [`IdScanner`] keeps, in bytes of JSON text (quotes and
/// escapes of a string included). A longer id is reported as no id: ids are
/// counters or short strings (UUIDs are 38 bytes with their quotes), and the
/// scanner keeps the id in a fixed buffer of this size instead of
/// allocating.
pub const MAX_ID_LEN: usize = 256;

/// The error code [`oversized_error`] answers with.
///
/// JSON-RPC 2.0 leaves -32000 to -32099 to implementations ("server
/// error"). The codes there that MCP software already gives a meaning are
/// avoided: -32000 (connection closed) and -32001 (request timeout) in the
/// MCP SDKs, -32002 (resource not found) and -32042 (URL elicitation
/// required) in the MCP specification. -32013 is free, and echoes HTTP's
/// 413 Content Too Large, so a host can tell "your message was too large"
/// apart from other failures by its code alone.
pub const OVERSIZED_ERROR_CODE: i32 = -32013;

/// The `message` of the error [`oversized_error`] builds.
pub const OVERSIZED_ERROR_MESSAGE: &str = "message over the size limit was dropped";

/// Open objects and arrays the scanner follows, the top-level object
/// included: as many as serde_json's default recursion limit allows, so a
/// line that serde_json would refuse for its depth gives no id either. The
/// state that tracks them is one `u128`.
const MAX_DEPTH: u8 = 127;

/// `key_pos` when the current string is not a top-level key that may still
/// be `id`.
const NO_MATCH: u8 = u8::MAX;

/// `key_cands` bits: the top-level keys the scanner recognises.
const KEY_ID: u8 = 1;
const KEY_METHOD: u8 = 2;

/// `true`, `false`, `null`, indexed by `lit`.
const LITERALS: [&[u8]; 3] = [b"true", b"false", b"null"];

/// Finds the top-level `"id"` of a JSON object fed to it in pieces, keeping
/// a bounded state whatever the object's size.
///
/// Feed the message's bytes with [`feed`](Self::feed), chunk by chunk; then
/// [`id`](Self::id) says what the object's top-level `id` was. The answer is
/// the same however the bytes were chunked.
///
/// # What counts as the id
///
/// [`id`](Self::id) is the value of the top-level member whose key is `id`,
/// as raw JSON text exactly as it appeared: a number (`7`, `-1.5e3`,
/// `123456789012345678901234567890`), a string with its quotes and escapes
/// (`"req-\u00e9"`), or `null`. It is `None` when:
///
/// - the object has no top-level `id` (a notification), or its value is not
///   a number, string or `null` (not a JSON-RPC id);
/// - the id is longer than [`MAX_ID_LEN`] bytes;
/// - the bytes are not one JSON object, optionally surrounded by
///   whitespace: not an object, cut short, or broken anywhere in their
///   structure. What the scanner cannot read for certain it does not guess.
///
/// `null` is reported as `Some("null")`, verbatim: JSON-RPC uses it for a
/// response whose request could not be identified, so there is no request
/// to fail, but it is what the message said, and a host may want to know
/// that the message was a response.
///
/// Keys are compared as JSON strings, after their escapes are decoded:
/// `"\u0069d"` is `id`. When the key appears more than once, the last one
/// wins, as in `serde_json::Value` (and JavaScript's `JSON.parse`).
///
/// # How strict it is
///
/// Outside strings the whole grammar is checked: brackets match, members
/// are `key: value` separated by commas, numbers and `true`/`false`/`null`
/// are well formed, and nothing but whitespace follows the object. More
/// than 127 levels of nesting (the top-level object included) is refused,
/// as serde_json refuses it. Inside a string, only what decides where it
/// ends is looked at (a `"` after an even run of backslashes): raw control
/// characters, invalid UTF-8, unknown escapes such as `\x` and unpaired
/// surrogates do not change what is top-level, so they do not stop the id
/// from being found. The strings that matter are read in full: top-level
/// keys are decoded to compare them with `id`, and the id itself is
/// checked strictly, so that when it is returned it is valid JSON text
/// (known escapes, valid UTF-8, no raw control characters, surrogate
/// escapes in pairs), safe to copy into a response.
///
/// # Cost
///
/// The state is a few dozen bytes plus the [`MAX_ID_LEN`]-byte id buffer,
/// all inline: the scanner never allocates, whatever it is fed. String
/// contents, most of a large message, are skipped with `memchr` from one
/// `"` to the next; other bytes go through a small state machine one at a
/// time (runs of digits in a tight loop), so a message made mostly of
/// numbers is read several times slower than one made mostly of strings.
/// Once the bytes are known not to be a JSON object, the rest is not looked
/// at.
///
/// # Example
///
/// ```
/// use childwire_core::jsonrpc::IdScanner;
///
/// // The id comes last, after a result that holds ids of its own.
/// let line = br#"{"result":{"items":[{"id":1},{"id":2}]},"jsonrpc":"2.0","id":"req-7"}"#;
/// let mut scanner = IdScanner::new();
/// for chunk in line.chunks(5) {
///     scanner.feed(chunk);
/// }
/// assert_eq!(scanner.id().as_deref(), Some(&br#""req-7""#[..]));
///
/// // A notification has no id, whatever its params hold.
/// let mut notification = IdScanner::new();
/// notification.feed(br#"{"jsonrpc":"2.0","method":"notifications/progress","params":{"id":3}}"#);
/// assert_eq!(notification.id(), None);
/// ```
#[derive(Clone)]
pub struct IdScanner {
    state: State,
    /// Open objects and arrays: 0 outside the top-level object, 1 inside it.
    depth: u8,
    /// Bit `d` is set when the container at depth `d + 1` is an array.
    arrays: u128,
    /// The current string is a key (it is followed by `:`).
    in_key: bool,
    /// Characters the current top-level key has matched so far of `id` or
    /// `method`, or [`NO_MATCH`].
    key_pos: u8,
    /// Which of `id` (`KEY_ID`) and `method` (`KEY_METHOD`) the current
    /// top-level key still matches.
    key_cands: u8,
    /// A top-level `method` member was read: the message is a request or a
    /// notification, not a response.
    method: bool,
    /// A top-level `id` member was read, whether its value is usable or not.
    id_member: bool,
    /// The top-level key just read is `id`: the next value is the id.
    id_key: bool,
    /// Hex digits still expected in a `\u` escape, and their value so far.
    hex_left: u8,
    hex: u16,
    /// The literal being read (index into [`LITERALS`]) and how much of it.
    lit: u8,
    lit_pos: u8,
    id: Id,
    id_len: u16,
    id_buf: [u8; MAX_ID_LEN],
}

/// Where the scanner is in the grammar.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum State {
    /// Before the top-level `{`.
    Start,
    /// After `{`: a key or `}`.
    KeyOrEnd,
    /// After `,` in an object: a key.
    Key,
    /// After a key: `:`.
    Colon,
    /// After `[`: a value or `]`.
    ValueOrEnd,
    /// After `:`, or `,` in an array: a value.
    Value,
    /// After a value: `,` or the container's closing bracket.
    AfterValue,
    /// After the top-level `}`: only whitespace may follow.
    Done,
    /// Not one JSON object: nothing more is read.
    Failed,
    /// Inside a string (a key when `in_key`).
    Str,
    /// After `\` in a string.
    Escape,
    /// Inside the four hex digits of a `\u` escape.
    Hex,
    /// Inside `true`, `false` or `null`.
    Lit,
    /// Inside a number.
    Num(Num),
}

/// Where the scanner is inside a number.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Num {
    /// After `-`.
    Minus,
    /// After a leading `0` (no other digit may follow).
    Zero,
    /// In the integer digits.
    Int,
    /// After `.`.
    FracStart,
    /// In the fraction digits.
    Frac,
    /// After `e` or `E`.
    ExpStart,
    /// After the exponent's sign.
    ExpSign,
    /// In the exponent digits.
    Exp,
}

impl Num {
    /// The state after `b`, or `None` if `b` ends the number (or breaks it).
    #[inline]
    fn next(self, b: u8) -> Option<Num> {
        use Num::*;
        Some(match (self, b) {
            (Minus, b'0') => Zero,
            (Minus | Int, b'1'..=b'9') | (Int, b'0') => Int,
            (Zero | Int, b'.') => FracStart,
            (FracStart | Frac, b'0'..=b'9') => Frac,
            (Zero | Int | Frac, b'e' | b'E') => ExpStart,
            (ExpStart, b'+' | b'-') => ExpSign,
            (ExpStart | ExpSign | Exp, b'0'..=b'9') => Exp,
            _ => return None,
        })
    }

    /// The state after a number's first byte, if `b` can start one.
    #[inline]
    fn start(b: u8) -> Option<Num> {
        match b {
            b'-' => Some(Num::Minus),
            b'0' => Some(Num::Zero),
            b'1'..=b'9' => Some(Num::Int),
            _ => None,
        }
    }

    /// Whether a number may end here.
    #[inline]
    fn is_complete(self) -> bool {
        matches!(self, Num::Zero | Num::Int | Num::Frac | Num::Exp)
    }
}

/// What is known of the last top-level id.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Id {
    /// No top-level `id` member yet.
    Absent,
    /// Its value is being read into `id_buf`.
    Reading,
    /// Its value is in `id_buf`.
    Read,
    /// Its value is not a usable id: not a number, string or `null`, or
    /// longer than [`MAX_ID_LEN`].
    Unusable,
}

impl Default for IdScanner {
    fn default() -> Self {
        Self::new()
    }
}

impl fmt::Debug for IdScanner {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("IdScanner")
            .field("state", &self.state)
            .field("depth", &self.depth)
            .field("id", &self.id)
            .field(
                "id_bytes",
                &String::from_utf8_lossy(&self.id_buf[..usize::from(self.id_len)]),
            )
            .finish_non_exhaustive()
    }
}

impl IdScanner {
    /// A scanner at the start of a message.
    pub const fn new() -> Self {
        Self {
            state: State::Start,
            depth: 0,
            arrays: 0,
            in_key: false,
            key_pos: NO_MATCH,
            key_cands: 0,
            method: false,
            id_member: false,
            id_key: false,
            hex_left: 0,
            hex: 0,
            lit: 0,
            lit_pos: 0,
            id: Id::Absent,
            id_len: 0,
            id_buf: [0; MAX_ID_LEN],
        }
    }

    /// Takes the message's next bytes.
    pub fn feed(&mut self, data: &[u8]) {
        let mut i = 0;
        while let Some(&byte) = data.get(i) {
            match self.state {
                State::Failed => return,
                // The common case in a large message: the contents of a
                // string that is neither the id nor a top-level key. Only
                // which `"` ends it matters: one after an even run of
                // backslashes.
                State::Str | State::Escape
                    if self.id != Id::Reading && self.key_pos == NO_MATCH =>
                {
                    if self.state == State::Escape {
                        // The byte after a `\`, whatever it is.
                        i += 1;
                        self.state = State::Str;
                        continue;
                    }
                    match skip_string(&data[i..]) {
                        Ok(quote) => {
                            i += quote + 1;
                            self.end_string();
                        }
                        Err(escaping) => {
                            if escaping {
                                self.state = State::Escape;
                            }
                            return;
                        }
                    }
                }
                // A number that is not the id: read in a tight loop, and
                // so are the numbers that follow it in an array (`1,2,3`).
                State::Num(mut num) if self.id != Id::Reading => loop {
                    while let Some(next) = data.get(i).and_then(|&b| num.next(b)) {
                        num = next;
                        i += 1;
                    }
                    let Some(&end) = data.get(i) else {
                        self.state = State::Num(num);
                        return;
                    };
                    i += 1;
                    if end == b',' && num.is_complete() && self.in_array() {
                        // In an array, `id_key` is never set and `keep`
                        // keeps nothing: the next number needs no more
                        // than its first byte.
                        if let Some(first) = data.get(i).and_then(|&b| Num::start(b)) {
                            num = first;
                            i += 1;
                            continue;
                        }
                        self.state = State::Value;
                    } else {
                        // It ends the number (or breaks it).
                        self.state = State::Num(num);
                        self.step(end);
                    }
                    break;
                },
                _ => {
                    i += 1;
                    self.step(byte);
                }
            }
        }
    }

    /// The top-level id of the bytes fed so far, read as a whole message:
    /// raw JSON text, or `None` (see [the type's docs](Self) for when).
    ///
    /// It is `None` until the bytes fed form a complete object; feeding
    /// more bytes afterwards is allowed (whitespace keeps the answer, any
    /// other byte makes it `None`).
    pub fn id(&self) -> Option<Bytes> {
        if self.state != State::Done || self.id != Id::Read {
            return None;
        }
        let raw = &self.id_buf[..usize::from(self.id_len)];
        if raw.first() == Some(&b'"') && !is_valid_string(raw) {
            return None;
        }
        Some(Bytes::copy_from_slice(raw))
    }

    /// Whether the bytes fed so far form one complete JSON object with a
    /// top-level `method` member (whatever its value): a JSON-RPC request
    /// or notification, not a response. Keys are compared as for `id`.
    ///
    /// ```
    /// use childwire_core::jsonrpc::IdScanner;
    ///
    /// let mut request = IdScanner::new();
    /// request.feed(br#"{"id":1,"params":{},"\u006dethod":"tools/list","jsonrpc":"2.0"}"#);
    /// assert!(request.has_method());
    ///
    /// // A response whose result holds a `method` of its own.
    /// let mut response = IdScanner::new();
    /// response.feed(br#"{"id":1,"result":{"method":"x"},"jsonrpc":"2.0"}"#);
    /// assert!(!response.has_method());
    /// ```
    pub fn has_method(&self) -> bool {
        self.state == State::Done && self.method
    }

    /// Whether the bytes fed so far form one complete JSON object with a
    /// top-level `id` member, whether or not [`id`](Self::id) can return
    /// it (it may be too long, or an object). With [`has_method`](Self::has_method)
    /// it tells a request whose id cannot be kept from a notification.
    pub fn has_id_member(&self) -> bool {
        self.state == State::Done && self.id_member
    }

    /// Whether the bytes fed so far are known not to be one JSON object, so
    /// [`id`](Self::id) is `None` whatever follows.
    pub fn has_failed(&self) -> bool {
        self.state == State::Failed
    }

    /// One byte outside the fast path.
    fn step(&mut self, b: u8) {
        match self.state {
            State::Start => match b {
                b'{' => self.open(false),
                _ if is_whitespace(b) => {}
                _ => self.fail(),
            },
            State::KeyOrEnd => match b {
                b'"' => self.begin_key(),
                b'}' => self.close(false),
                _ if is_whitespace(b) => {}
                _ => self.fail(),
            },
            State::Key => match b {
                b'"' => self.begin_key(),
                _ if is_whitespace(b) => {}
                _ => self.fail(),
            },
            State::Colon => match b {
                b':' => self.state = State::Value,
                _ if is_whitespace(b) => {}
                _ => self.fail(),
            },
            State::ValueOrEnd => match b {
                b']' => self.close(true),
                _ if is_whitespace(b) => {}
                _ => self.begin_value(b),
            },
            State::Value => {
                if !is_whitespace(b) {
                    self.begin_value(b);
                }
            }
            State::AfterValue => match b {
                b',' if self.in_array() => self.state = State::Value,
                b',' => self.state = State::Key,
                b'}' => self.close(false),
                b']' => self.close(true),
                _ if is_whitespace(b) => {}
                _ => self.fail(),
            },
            State::Done => {
                if !is_whitespace(b) {
                    self.fail();
                }
            }
            State::Failed => {}
            State::Str => {
                self.keep(b);
                match b {
                    b'"' => self.end_string(),
                    b'\\' => self.state = State::Escape,
                    // A byte >= 0x80 is part of a character that is not
                    // `i` or `d`: a mismatch, as wanted.
                    _ => self.match_key(u32::from(b)),
                }
            }
            State::Escape => {
                self.keep(b);
                let decoded = match b {
                    b'"' | b'\\' | b'/' => b,
                    b'b' => 0x08,
                    b'f' => 0x0c,
                    b'n' => b'\n',
                    b'r' => b'\r',
                    b't' => b'\t',
                    b'u' => {
                        self.hex_left = 4;
                        self.hex = 0;
                        self.state = State::Hex;
                        return;
                    }
                    _ => return self.fail(),
                };
                self.match_key(u32::from(decoded));
                self.state = State::Str;
            }
            State::Hex => {
                let Some(digit) = hex_value(b) else {
                    return self.fail();
                };
                self.keep(b);
                self.hex = self.hex << 4 | digit;
                self.hex_left -= 1;
                if self.hex_left == 0 {
                    // A surrogate is never `i` or `d`: a mismatch, as wanted.
                    self.match_key(u32::from(self.hex));
                    self.state = State::Str;
                }
            }
            State::Lit => {
                let literal = LITERALS[usize::from(self.lit)];
                if literal.get(usize::from(self.lit_pos)) != Some(&b) {
                    return self.fail();
                }
                self.keep(b);
                self.lit_pos += 1;
                if usize::from(self.lit_pos) == literal.len() {
                    self.end_value();
                }
            }
            State::Num(num) => match num.next(b) {
                Some(next) => {
                    self.keep(b);
                    self.state = State::Num(next);
                }
                None if num.is_complete() => {
                    // `b` is not part of the number: it comes after it.
                    self.end_value();
                    self.step(b);
                }
                None => self.fail(),
            },
        }
    }

    #[inline]
    fn fail(&mut self) {
        self.state = State::Failed;
    }

    /// Keeps a byte of the id, while one is being read.
    #[inline]
    fn keep(&mut self, b: u8) {
        if self.id == Id::Reading {
            match self.id_buf.get_mut(usize::from(self.id_len)) {
                Some(slot) => {
                    *slot = b;
                    self.id_len += 1;
                }
                None => self.id = Id::Unusable,
            }
        }
    }

    /// Takes one decoded character of the current string.
    #[inline]
    fn match_key(&mut self, c: u32) {
        if self.key_pos != NO_MATCH {
            let pos = usize::from(self.key_pos);
            let matches = |key: &[u8]| key.get(pos).is_some_and(|&b| u32::from(b) == c);
            let mut alive = 0;
            if self.key_cands & KEY_ID != 0 && matches(b"id") {
                alive |= KEY_ID;
            }
            if self.key_cands & KEY_METHOD != 0 && matches(b"method") {
                alive |= KEY_METHOD;
            }
            if alive == 0 {
                self.key_pos = NO_MATCH;
            } else {
                self.key_cands = alive;
                self.key_pos += 1;
            }
        }
    }

    fn begin_key(&mut self) {
        self.in_key = true;
        self.key_pos = if self.depth == 1 { 0 } else { NO_MATCH };
        self.key_cands = KEY_ID | KEY_METHOD;
        self.state = State::Str;
    }

    fn end_string(&mut self) {
        if self.in_key {
            self.in_key = false;
            if self.depth == 1 {
                self.id_key = self.key_cands & KEY_ID != 0 && self.key_pos == 2;
                if self.key_cands & KEY_METHOD != 0 && self.key_pos == 6 {
                    self.method = true;
                }
            }
            self.key_pos = NO_MATCH;
            self.state = State::Colon;
        } else {
            self.end_value();
        }
    }

    /// The first byte of a value.
    fn begin_value(&mut self, b: u8) {
        if self.id_key {
            // A top-level `id`: it replaces any earlier one.
            self.id_key = false;
            self.id_member = true;
            self.id_len = 0;
            self.id = match b {
                b'"' | b'-' | b'0'..=b'9' | b'n' => Id::Reading,
                _ => Id::Unusable,
            };
        }
        match b {
            b'"' => {
                self.keep(b);
                self.in_key = false;
                self.key_pos = NO_MATCH;
                self.state = State::Str;
            }
            b'{' => self.open(false),
            b'[' => self.open(true),
            b't' | b'f' | b'n' => {
                self.keep(b);
                self.lit = match b {
                    b't' => 0,
                    b'f' => 1,
                    _ => 2,
                };
                self.lit_pos = 1;
                self.state = State::Lit;
            }
            _ => match Num::start(b) {
                Some(num) => {
                    self.keep(b);
                    self.state = State::Num(num);
                }
                None => self.fail(),
            },
        }
    }

    #[inline]
    fn end_value(&mut self) {
        if self.id == Id::Reading {
            self.id = Id::Read;
        }
        self.state = if self.depth == 0 {
            State::Done
        } else {
            State::AfterValue
        };
    }

    fn open(&mut self, array: bool) {
        if self.depth >= MAX_DEPTH {
            return self.fail();
        }
        let bit = 1u128 << self.depth;
        if array {
            self.arrays |= bit;
        } else {
            self.arrays &= !bit;
        }
        self.depth += 1;
        self.state = if array {
            State::ValueOrEnd
        } else {
            State::KeyOrEnd
        };
    }

    fn close(&mut self, array: bool) {
        if self.depth == 0 || self.in_array() != array {
            return self.fail();
        }
        self.depth -= 1;
        self.end_value();
    }

    #[inline]
    fn in_array(&self) -> bool {
        self.depth > 0 && (self.arrays >> (self.depth - 1)) & 1 == 1
    }
}

/// Where the `"` that ends a string is in `data`, which starts inside the
/// string (not after a `\`): the first `"` after an even run of
/// backslashes. Without one, whether `data` ends in an odd run, which
/// escapes the next chunk's first byte.
fn skip_string(data: &[u8]) -> Result<usize, bool> {
    let backslashes_before = |end: usize, from: usize| {
        data[from..end]
            .iter()
            .rev()
            .take_while(|&&b| b == b'\\')
            .count()
    };
    let mut from = 0;
    while let Some(at) = memchr::memchr(b'"', &data[from..]) {
        let quote = from + at;
        // `from` follows a quote or starts the string: the run cannot
        // reach back past it.
        if backslashes_before(quote, from) % 2 == 0 {
            return Ok(quote);
        }
        from = quote + 1;
    }
    Err(backslashes_before(data.len(), from) % 2 == 1)
}

#[inline]
fn is_whitespace(b: u8) -> bool {
    matches!(b, b' ' | b'\t' | b'\n' | b'\r')
}

fn hex_value(b: u8) -> Option<u16> {
    char::from(b).to_digit(16).map(|d| d as u16)
}

/// Whether `raw`, a string the scanner read (quotes included, escapes
/// already checked), is valid JSON text: UTF-8, no raw control characters,
/// and `\u` surrogates in high-low pairs.
fn is_valid_string(raw: &[u8]) -> bool {
    let Some(inner) = raw.get(1..raw.len().saturating_sub(1)) else {
        return false;
    };
    if std::str::from_utf8(inner).is_err() || inner.iter().any(|&b| b < 0x20) {
        return false;
    }
    let mut rest = inner;
    // The previous character was a high surrogate escape: a low one must
    // follow at once.
    let mut high = false;
    while let Some(&b) = rest.first() {
        let (unit, len) = match (b, rest.get(1)) {
            (b'\\', Some(b'u')) => {
                let unit = rest
                    .get(2..6)
                    .and_then(|hex| std::str::from_utf8(hex).ok())
                    .and_then(|hex| u16::from_str_radix(hex, 16).ok());
                match unit {
                    Some(unit) => (unit, 6),
                    None => return false,
                }
            }
            (b'\\', _) => (0, 2),
            _ => (0, 1),
        };
        let is_high = (0xd800..0xdc00).contains(&unit);
        let is_low = (0xdc00..0xe000).contains(&unit);
        if high != is_low {
            return false;
        }
        high = is_high;
        rest = &rest[len.min(rest.len())..];
    }
    !high
}

/// A JSON-RPC 2.0 error response answering a message of `len` bytes that
/// was dropped for being over `limit` bytes: compact JSON, no newline.
///
/// `id` is the dropped message's id as raw JSON text, as
/// [`Oversized::json_rpc_id`](crate::frame::Oversized::json_rpc_id)
/// returns it; it is copied verbatim, so it must be valid JSON (an empty
/// `id` is written as `null`). The error's code is
/// [`OVERSIZED_ERROR_CODE`], its message [`OVERSIZED_ERROR_MESSAGE`], and
/// its data the sizes: `{"size":len,"limit":limit}`.
///
/// A host uses it both ways: to answer the child when the dropped message
/// was a request (write it with a newline), and to fail its own pending
/// request when the dropped message was the response (hand it to the
/// JSON-RPC layer as if the child had sent it).
///
/// ```
/// use childwire_core::{Frame, LineDecoder};
/// use childwire_core::jsonrpc::oversized_error;
///
/// let mut decoder = LineDecoder::new(32);
/// decoder.handle_data(br#"{"result":{"text":"far too long for the limit"},"id":9}"#);
/// decoder.handle_data(b"\n");
/// let Some(Frame::Oversized(notice)) = decoder.poll_frame() else { panic!() };
/// let id = notice.json_rpc_id().expect("the id was found");
///
/// assert_eq!(
///     oversized_error(id, notice.len, decoder.max_message_size()),
///     &br#"{"jsonrpc":"2.0","id":9,"error":{"code":-32013,"message":"message over the size limit was dropped","data":{"size":55,"limit":32}}}"#[..]
/// );
/// ```
pub fn oversized_error(id: &[u8], len: u64, limit: usize) -> Bytes {
    let id = if id.is_empty() { &b"null"[..] } else { id };
    let mut out = Vec::with_capacity(160 + id.len());
    out.extend_from_slice(br#"{"jsonrpc":"2.0","id":"#);
    out.extend_from_slice(id);
    // Writing to a Vec cannot fail.
    let _ = write!(
        out,
        r#","error":{{"code":{OVERSIZED_ERROR_CODE},"message":"{OVERSIZED_ERROR_MESSAGE}","data":{{"size":{len},"limit":{limit}}}}}}}"#
    );
    Bytes::from(out)
}

/// Whether `message` is the response (no `method`) to the request whose id
/// is `id` (raw JSON text), ids compared as JSON values (`1` and `1.0` are
/// the same id).
///
/// ```
/// use childwire_core::jsonrpc::is_response_to;
///
/// assert!(is_response_to(br#"{"result":{},"id":1.0,"jsonrpc":"2.0"}"#, b"1"));
/// assert!(!is_response_to(br#"{"jsonrpc":"2.0","id":1,"method":"ping"}"#, b"1"));
/// assert!(!is_response_to(br#"{"jsonrpc":"2.0","id":2,"result":{}}"#, b"1"));
/// ```
#[must_use]
pub fn is_response_to(message: &[u8], id: &[u8]) -> bool {
    let mut scanner = IdScanner::new();
    scanner.feed(message);
    !scanner.has_method() && scanner.id().is_some_and(|got| same_id(&got, id))
}

/// Whether two ids (raw JSON text) are the same JSON value.
#[must_use]
pub fn same_id(a: &[u8], b: &[u8]) -> bool {
    match (crate::pending::key(a), crate::pending::key(b)) {
        (Some(a), Some(b)) => a == b,
        _ => false,
    }
}

/// `text` as a JSON string, quotes included.
pub(crate) fn json_string(out: &mut Vec<u8>, text: &str) {
    use std::io::Write as _;
    out.push(b'"');
    for c in text.chars() {
        match c {
            '"' => out.extend_from_slice(br#"\""#),
            '\\' => out.extend_from_slice(br"\\"),
            '\n' => out.extend_from_slice(br"\n"),
            '\r' => out.extend_from_slice(br"\r"),
            '\t' => out.extend_from_slice(br"\t"),
            c if u32::from(c) < 0x20 => {
                let _ = write!(out, "\\u{:04x}", u32::from(c));
            }
            c => {
                let mut buf = [0; 4];
                out.extend_from_slice(c.encode_utf8(&mut buf).as_bytes());
            }
        }
    }
    out.push(b'"');
}
