//! One-pass JSON checks, with no parse into a value and no allocation: is a
//! line one JSON value, and the top-level members of a JSON object.
//!
//! Shared by [`pollution`](crate::pollution) (is a stdout line JSON?) and
//! [`stderr_level`](crate::stderr_level) (the level and message of a
//! JSON-lines log record).

/// Nesting the checker follows exactly. Deeper values are accepted
/// structurally (brackets balanced outside strings) and reported as not
/// exact: no JSON reader a child's peer uses goes that deep either
/// (serde_json stops at 128).
const MAX_DEPTH: u32 = 127;

/// A number with more integer digits than this may be out of `f64` range,
/// which readers such as serde_json refuse although the grammar allows it.
const MAX_EXACT_INT_DIGITS: usize = 300;

/// What [`check`] found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Checked {
    /// The bytes are one JSON value (RFC 8259), with optional whitespace
    /// around it.
    pub(crate) is_json: bool,
    /// The verdict is the same as a strict reader's (serde_json's). `false`
    /// when the value is valid JSON that such readers still refuse: nesting
    /// deeper than [`MAX_DEPTH`], a number that may be out of `f64` range,
    /// or a `\u` escape that is an unpaired surrogate.
    pub(crate) exact: bool,
}

/// Whether `bytes` are one JSON value, in one scan.
///
/// Exact for RFC 8259's grammar: strings must be valid UTF-8 without raw
/// control characters and with valid escapes, numbers follow the grammar
/// (no leading zeros, no `NaN`), literals are `true`, `false`, `null`, and
/// nothing but whitespace (space, tab, `\r`, `\n`) may follow the value.
pub(crate) fn check(bytes: &[u8]) -> Checked {
    let mut scan = Scan {
        bytes,
        at: 0,
        exact: true,
    };
    let is_json = scan.document();
    Checked {
        is_json,
        exact: scan.exact,
    }
}

struct Scan<'a> {
    bytes: &'a [u8],
    at: usize,
    exact: bool,
}

impl Scan<'_> {
    fn peek(&self) -> Option<u8> {
        self.bytes.get(self.at).copied()
    }

    fn skip_ws(&mut self) {
        while let Some(b' ' | b'\t' | b'\n' | b'\r') = self.peek() {
            self.at += 1;
        }
    }

    fn eat(&mut self, byte: u8) -> bool {
        if self.peek() == Some(byte) {
            self.at += 1;
            true
        } else {
            false
        }
    }

    /// A whole document: whitespace, one value, whitespace, the end.
    fn document(&mut self) -> bool {
        // Containers open so far, innermost in bit 0: 1 for an object.
        let mut kinds: u128 = 0;
        let mut depth: u32 = 0;
        self.skip_ws();
        'value: loop {
            // A value starts here.
            match self.peek() {
                Some(open @ (b'{' | b'[')) => {
                    self.at += 1;
                    if depth == MAX_DEPTH {
                        self.exact = false;
                        return self.skip_deep(depth + 1);
                    }
                    depth += 1;
                    kinds = (kinds << 1) | u128::from(open == b'{');
                    self.skip_ws();
                    let close = if open == b'{' { b'}' } else { b']' };
                    if self.eat(close) {
                        depth -= 1;
                        kinds >>= 1;
                    } else {
                        if open == b'{' && !self.key() {
                            return false;
                        }
                        continue 'value;
                    }
                }
                Some(b'"') => {
                    self.at += 1;
                    if !self.string() {
                        return false;
                    }
                }
                Some(b'-' | b'0'..=b'9') => {
                    if !self.number() {
                        return false;
                    }
                }
                Some(b't') => {
                    if !self.literal(b"true") {
                        return false;
                    }
                }
                Some(b'f') => {
                    if !self.literal(b"false") {
                        return false;
                    }
                }
                Some(b'n') => {
                    if !self.literal(b"null") {
                        return false;
                    }
                }
                _ => return false,
            }
            // A value ended: close containers, or go on to the next member.
            loop {
                self.skip_ws();
                if depth == 0 {
                    return self.at == self.bytes.len();
                }
                let in_object = kinds & 1 == 1;
                match self.peek() {
                    Some(b',') => {
                        self.at += 1;
                        self.skip_ws();
                        if in_object && !self.key() {
                            return false;
                        }
                        continue 'value;
                    }
                    Some(b'}') if in_object => {}
                    Some(b']') if !in_object => {}
                    _ => return false,
                }
                self.at += 1;
                depth -= 1;
                kinds >>= 1;
            }
        }
    }

    /// `"key"`, whitespace, `:`, whitespace: what precedes a member's value.
    fn key(&mut self) -> bool {
        if !self.eat(b'"') || !self.string() {
            return false;
        }
        self.skip_ws();
        if !self.eat(b':') {
            return false;
        }
        self.skip_ws();
        true
    }

    /// A string's contents and closing quote, the opening quote consumed.
    fn string(&mut self) -> bool {
        let start = self.at;
        let mut ascii = true;
        // A `\u` high surrogate that the next escape must pair.
        let mut high_surrogate = false;
        loop {
            let (plain, high) = plain_run(&self.bytes[self.at..]);
            if plain > 0 {
                self.at += plain;
                ascii &= !high;
                if high_surrogate {
                    self.exact = false;
                    high_surrogate = false;
                }
            }
            let Some(byte) = self.peek() else {
                return false;
            };
            self.at += 1;
            match byte {
                b'"' => {
                    if high_surrogate {
                        self.exact = false;
                    }
                    // Raw non-ASCII bytes must be UTF-8; escapes are ASCII,
                    // so checking the raw contents is enough.
                    return ascii || std::str::from_utf8(&self.bytes[start..self.at - 1]).is_ok();
                }
                b'\\' => {
                    let Some(escape) = self.peek() else {
                        return false;
                    };
                    self.at += 1;
                    match escape {
                        b'"' | b'\\' | b'/' | b'b' | b'f' | b'n' | b'r' | b't' => {
                            if high_surrogate {
                                self.exact = false;
                                high_surrogate = false;
                            }
                        }
                        b'u' => {
                            let Some(unit) = self.hex4() else {
                                return false;
                            };
                            match unit {
                                0xD800..=0xDBFF => {
                                    if high_surrogate {
                                        self.exact = false;
                                    }
                                    high_surrogate = true;
                                }
                                0xDC00..=0xDFFF => {
                                    if !high_surrogate {
                                        self.exact = false;
                                    }
                                    high_surrogate = false;
                                }
                                _ => {
                                    if high_surrogate {
                                        self.exact = false;
                                    }
                                    high_surrogate = false;
                                }
                            }
                        }
                        _ => return false,
                    }
                }
                // `plain_run` stops only at a quote, a backslash, a
                // control character or the end.
                _ => return false,
            }
        }
    }

    fn hex4(&mut self) -> Option<u16> {
        let digits = self.bytes.get(self.at..self.at + 4)?;
        let mut unit = 0u16;
        for &digit in digits {
            let value = match digit {
                b'0'..=b'9' => digit - b'0',
                b'a'..=b'f' => digit - b'a' + 10,
                b'A'..=b'F' => digit - b'A' + 10,
                _ => return None,
            };
            unit = (unit << 4) | u16::from(value);
        }
        self.at += 4;
        Some(unit)
    }

    /// `-? (0 | [1-9][0-9]*) (. [0-9]+)? ([eE] [+-]? [0-9]+)?`
    fn number(&mut self) -> bool {
        self.eat(b'-');
        let int_start = self.at;
        match self.peek() {
            Some(b'0') => self.at += 1,
            Some(b'1'..=b'9') => self.digits(),
            _ => return false,
        }
        if self.at - int_start > MAX_EXACT_INT_DIGITS {
            self.exact = false;
        }
        if self.eat(b'.') {
            if !matches!(self.peek(), Some(b'0'..=b'9')) {
                return false;
            }
            self.digits();
        }
        if let Some(b'e' | b'E') = self.peek() {
            self.at += 1;
            if let Some(b'+' | b'-') = self.peek() {
                self.at += 1;
            }
            if !matches!(self.peek(), Some(b'0'..=b'9')) {
                return false;
            }
            self.digits();
            // The value may overflow `f64`: valid JSON, refused by some.
            self.exact = false;
        }
        true
    }

    fn digits(&mut self) {
        while let Some(b'0'..=b'9') = self.peek() {
            self.at += 1;
        }
    }

    fn literal(&mut self, word: &[u8]) -> bool {
        if self.bytes[self.at..].starts_with(word) {
            self.at += word.len();
            true
        } else {
            false
        }
    }

    /// Past [`MAX_DEPTH`], with `open` containers open (the one just
    /// entered included): checks only that brackets balance outside
    /// strings, then that nothing but whitespace follows.
    fn skip_deep(&mut self, open: u32) -> bool {
        let mut depth = u64::from(open);
        while let Some(byte) = self.peek() {
            self.at += 1;
            match byte {
                b'{' | b'[' => depth += 1,
                b'}' | b']' => {
                    depth -= 1;
                    if depth == 0 {
                        break;
                    }
                }
                b'"' if !self.string() => return false,
                _ => {}
            }
        }
        self.skip_ws();
        depth == 0 && self.at == self.bytes.len()
    }
}

/// How many bytes at the start of `bytes` a string may hold as they are
/// (anything but `"`, `\` and control characters), and whether any of
/// them is non-ASCII. Eight bytes at a time: string contents are most of
/// a message's bytes.
fn plain_run(bytes: &[u8]) -> (usize, bool) {
    const ONES: u64 = 0x0101_0101_0101_0101;
    const HIGH: u64 = 0x8080_8080_8080_8080;
    // The high bit of each byte of `word` that is zero (exact for the
    // lowest one: a borrow only reaches bytes above a zero byte).
    let zero = |word: u64| word.wrapping_sub(ONES) & !word & HIGH;
    let mut high = 0;
    let mut at = 0;
    while let Some(chunk) = bytes.get(at..at + 8) {
        let word = u64::from_le_bytes(chunk.try_into().unwrap_or([0; 8]));
        let special = zero(word ^ (ONES * u64::from(b'"')))
            | zero(word ^ (ONES * u64::from(b'\\')))
            // Bytes under 0x20 (high bytes excluded by `!word`).
            | (word.wrapping_sub(ONES * 0x20) & !word & HIGH);
        if special != 0 {
            let len = (special.trailing_zeros() / 8) as usize;
            high |= word & HIGH & ((1u64 << (len * 8)) - 1);
            return (at + len, high != 0);
        }
        high |= word & HIGH;
        at += 8;
    }
    let len = bytes[at..]
        .iter()
        .position(|&b| b == b'"' || b == b'\\' || b < 0x20)
        .unwrap_or(bytes.len() - at);
    let tail_high = bytes[at..at + len].iter().any(|&b| b >= 0x80);
    (at + len, high != 0 || tail_high)
}

/// Where the value that starts at `at` ends (exclusive), checking only
/// structure: strings closed with their escapes skipped, brackets balanced
/// outside strings, scalars up to the next delimiter. `None` if it does not
/// end within `bytes`.
pub(crate) fn skip_value(bytes: &[u8], at: usize) -> Option<usize> {
    match *bytes.get(at)? {
        b'"' => string_end(bytes, at + 1),
        b'{' | b'[' => {
            let mut depth: u64 = 0;
            let mut i = at;
            while i < bytes.len() {
                match bytes[i] {
                    b'{' | b'[' => depth += 1,
                    b'}' | b']' => {
                        depth -= 1;
                        if depth == 0 {
                            return Some(i + 1);
                        }
                    }
                    b'"' => {
                        i = string_end(bytes, i + 1)?;
                        continue;
                    }
                    _ => {}
                }
                i += 1;
            }
            None
        }
        _ => {
            let len = bytes[at..]
                .iter()
                .position(|b| matches!(b, b',' | b'}' | b']' | b' ' | b'\t' | b'\r' | b'\n'))
                .unwrap_or(bytes.len() - at);
            (len > 0).then_some(at + len)
        }
    }
}

/// Where a string whose contents start at `at` ends, past its closing
/// quote.
fn string_end(bytes: &[u8], mut at: usize) -> Option<usize> {
    loop {
        let i = at + memchr::memchr2(b'"', b'\\', bytes.get(at..)?)?;
        if bytes[i] == b'"' {
            return Some(i + 1);
        }
        at = i + 2;
    }
}

/// One top-level member of a JSON object: its key as written between the
/// quotes (escapes left as they are) and its value's raw text.
pub(crate) type Member<'a> = (&'a [u8], &'a [u8]);

/// The top-level members of the JSON object `bytes` holds (whitespace
/// around it allowed), at most `max` of them, in order. `None` if `bytes`
/// is not structurally one object; see [`skip_value`] for how far values
/// are checked. One scan; nested values are skipped, not read.
pub(crate) fn members(bytes: &[u8], max: usize) -> Option<Vec<Member<'_>>> {
    let ws = |i: &mut usize| {
        while let Some(b' ' | b'\t' | b'\r' | b'\n') = bytes.get(*i) {
            *i += 1;
        }
    };
    let mut i = 0;
    ws(&mut i);
    if bytes.get(i) != Some(&b'{') {
        return None;
    }
    i += 1;
    let mut found = Vec::new();
    ws(&mut i);
    if bytes.get(i) == Some(&b'}') {
        i += 1;
    } else {
        loop {
            if bytes.get(i) != Some(&b'"') {
                return None;
            }
            let key_end = string_end(bytes, i + 1)?;
            let key = &bytes[i + 1..key_end - 1];
            i = key_end;
            ws(&mut i);
            if bytes.get(i) != Some(&b':') {
                return None;
            }
            i += 1;
            ws(&mut i);
            let value_end = skip_value(bytes, i)?;
            if found.len() < max {
                found.push((key, &bytes[i..value_end]));
            }
            i = value_end;
            ws(&mut i);
            match bytes.get(i) {
                Some(b',') => {
                    i += 1;
                    ws(&mut i);
                }
                Some(b'}') => {
                    i += 1;
                    break;
                }
                _ => return None,
            }
        }
    }
    ws(&mut i);
    (i == bytes.len()).then_some(found)
}

/// The text of a JSON string's contents (between its quotes), escapes
/// decoded; invalid UTF-8 and unpaired surrogates become U+FFFD.
pub(crate) fn unescape(raw: &[u8]) -> std::borrow::Cow<'_, str> {
    if memchr::memchr(b'\\', raw).is_none() {
        return String::from_utf8_lossy(raw);
    }
    let mut out = Vec::with_capacity(raw.len());
    let mut i = 0;
    while i < raw.len() {
        let byte = raw[i];
        i += 1;
        if byte != b'\\' {
            out.push(byte);
            continue;
        }
        let Some(&escape) = raw.get(i) else {
            break;
        };
        i += 1;
        let simple = match escape {
            b'n' => Some(b'\n'),
            b't' => Some(b'\t'),
            b'r' => Some(b'\r'),
            b'b' => Some(0x08),
            b'f' => Some(0x0C),
            b'u' => None,
            other => Some(other),
        };
        if let Some(byte) = simple {
            out.push(byte);
            continue;
        }
        let mut units = Vec::new();
        let read_unit = |i: &mut usize| -> Option<u16> {
            let hex = std::str::from_utf8(raw.get(*i..*i + 4)?).ok()?;
            let unit = u16::from_str_radix(hex, 16).ok()?;
            *i += 4;
            Some(unit)
        };
        let Some(unit) = read_unit(&mut i) else {
            out.extend_from_slice("\u{FFFD}".as_bytes());
            continue;
        };
        units.push(unit);
        if (0xD800..=0xDBFF).contains(&unit) && raw.get(i..i + 2) == Some(b"\\u") {
            let mut next = i + 2;
            if let Some(low) = read_unit(&mut next) {
                if (0xDC00..=0xDFFF).contains(&low) {
                    units.push(low);
                    i = next;
                }
            }
        }
        for c in char::decode_utf16(units) {
            let mut buf = [0; 4];
            out.extend_from_slice(
                c.unwrap_or(char::REPLACEMENT_CHARACTER)
                    .encode_utf8(&mut buf)
                    .as_bytes(),
            );
        }
    }
    match String::from_utf8(out) {
        Ok(text) => text.into(),
        Err(err) => String::from_utf8_lossy(err.as_bytes()).into_owned().into(),
    }
}
