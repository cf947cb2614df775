//! Stdout pollution and framing mismatch, named: a line on an NDJSON
//! channel that is not a JSON message, or bytes where a `Content-Length`
//! header belongs that are not one.
//!
//! These are the classic stdio failures: a server prints a banner
//! ("Starting server on stdio…") or its logs to stdout, or speaks the other
//! framing (an LSP server spoken to as NDJSON, or the reverse). A decoder
//! alone delivers such a line as a message, or a stream of malformed-frame
//! notices, and leaves the diagnosis to the caller. [`classify`] names the
//! cause from the bytes; a [`PollutionDetector`] (one per channel) reports
//! each kind once, with the bytes, counts the rest, and can drop the lines
//! ([`PollutionPolicy::Drop`]) or have them set aside, out of the messages,
//! for the owner to hand on with the child's stderr
//! ([`PollutionPolicy::Divert`]).
//!
//! # What counts as a message, and what it costs
//!
//! A line whose first and last bytes, spaces around it left out, are `{`
//! and `}`, or `[` and `]`, looks like a message and is one: it is handed
//! on as it is, and whether the JSON inside is valid is left to the JSON
//! layer that reads it, as for any message. Deciding that reads two bytes
//! (and the spaces around the line, if any), so it costs next to nothing,
//! whatever the line's length: the decoder has already scanned its bytes
//! once, for its `\n`, and none is scanned again.
//!
//! Only a line that does not look like a message is looked at closer: one
//! checker pass that follows the JSON grammar without building a value or
//! allocating (a JSON scalar such as `42` is named as such), then its first
//! [`NOTICE_HEAD_LEN`] bytes to name what it is. The one exception to the
//! two-byte rule is a `[` followed by a letter, as in `[INFO] started
//! [ok]`: such a line is checked whole, and is a message only if it is
//! JSON (`[true]`); log lines start that way, JSON-RPC messages never do.
//!
//! # Example
//!
//! ```
//! use childwire_core::{PollutionDetector, PollutionKind};
//!
//! let mut detector = PollutionDetector::default();
//! let banner = detector.observe(b"Starting server on stdio...");
//! assert!(banner.deliver, "by default the line is still delivered");
//! let notice = banner.notice.expect("the first banner is reported");
//! assert_eq!(notice.kind, PollutionKind::Text);
//! assert_eq!(notice.to_string(),
//!     "stdout line 1 is not a JSON message: text, like a banner or a log line printed \
//!      to stdout; it began: \"Starting server on stdio...\"");
//!
//! assert!(detector.observe(br#"{"jsonrpc":"2.0","id":1,"result":{}}"#).notice.is_none());
//! // A second line of the same kind is counted, not reported again.
//! assert!(detector.observe(b"Ready.").notice.is_none());
//! assert_eq!(detector.counts().polluted, 2);
//! ```

use bytes::Bytes;

use crate::frame::{Malformed, MalformedReason, PollutionKind, PollutionNotice};
use crate::json_shape;
use crate::stderr_level::prefix_level;

/// Most bytes of a line a [`PollutionNotice`] keeps, and looks at to name
/// what a line that is not JSON is.
pub const NOTICE_HEAD_LEN: usize = 256;

/// Whether `line` is one JSON value, as [`check_json`] found it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct JsonCheck {
    /// The line is one JSON value (RFC 8259), whitespace around it allowed.
    pub is_json: bool,
    /// A strict reader (serde_json) gives the same verdict. `false` only
    /// for valid JSON that such readers refuse: nesting deeper than 127,
    /// a number with an exponent or more than 300 integer digits (it may
    /// be out of `f64` range), or a `\u` escape of an unpaired surrogate.
    pub exact: bool,
}

/// Whether `line` is one JSON value, in one scan without building it.
///
/// It follows RFC 8259 exactly: strings are valid UTF-8 with valid escapes
/// and no raw control characters, numbers follow the grammar, literals are
/// `true`, `false` and `null`, and only whitespace (space, tab, `\r`, `\n`)
/// may surround the value. See [`JsonCheck::exact`] for where a strict
/// reader may still refuse it.
///
/// ```
/// use childwire_core::pollution::check_json;
///
/// assert!(check_json(br#" {"a":[1,-2.5,"x\u00e9",null]} "#).is_json);
/// assert!(!check_json(br#"{"a":1,}"#).is_json);
/// assert!(!check_json(b"Starting server").is_json);
/// ```
#[must_use]
pub fn check_json(line: &[u8]) -> JsonCheck {
    let checked = json_shape::check(line);
    JsonCheck {
        is_json: checked.is_json,
        exact: checked.exact,
    }
}

/// What a line on an NDJSON channel is: `None` for a line that looks like
/// a message (`{...}` or `[...]`, spaces around it left out; see the
/// module's rule), else what it looks like.
///
/// ```
/// use childwire_core::PollutionKind;
/// use childwire_core::pollution::classify;
///
/// assert_eq!(classify(br#"{"jsonrpc":"2.0","method":"ping"}"#), None);
/// assert_eq!(classify(b"Starting server on stdio"), Some(PollutionKind::Text));
/// assert_eq!(classify(b"Content-Length: 52"), Some(PollutionKind::ContentLengthHeader));
/// assert_eq!(classify(b"[INFO] listening"), Some(PollutionKind::LogLine));
/// assert_eq!(classify(b"{"), Some(PollutionKind::BrokenJson));
/// // Bad JSON between the braces is the JSON layer's to report.
/// assert_eq!(classify(br#"{"id":1,}"#), None);
/// ```
#[must_use]
#[inline]
pub fn classify(line: &[u8]) -> Option<PollutionKind> {
    match shape(line) {
        Shape::Message => None,
        Shape::Other => Some(name_line(line)),
    }
}

/// What [`shape`] makes of a line.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Shape {
    /// A message: `{...}` or `[...]`, or a `[` and a letter that is JSON.
    Message,
    /// Anything else: to be named by [`name_line`].
    Other,
}

/// Space, tab, `\r`, `\n`: what JSON allows around a value.
#[inline]
fn is_json_space(b: u8) -> bool {
    matches!(b, b' ' | b'\t' | b'\r' | b'\n')
}

/// Whether `line` looks like a message, from its first and last bytes.
///
/// The message path: a line with no space around it costs two loads and
/// two comparisons. Spaces around it, and a `[` followed by a letter, go
/// out of line.
#[inline]
fn shape(line: &[u8]) -> Shape {
    match line {
        [b'{', .., b'}'] => Shape::Message,
        [b'[', second, .., b']'] if !second.is_ascii_alphabetic() => Shape::Message,
        _ => shape_unusual(line),
    }
}

/// Whether `line` looks like a message, from its first and last bytes:
/// what [`PollutionDetector::passes`] answers, without counting it.
#[inline]
pub(crate) fn looks_like_message(line: &[u8]) -> bool {
    shape(line) == Shape::Message
}

/// [`shape`] for the rest: spaces around the line, a `[` followed by a
/// letter (checked whole), and lines that are no message.
#[cold]
#[inline(never)]
fn shape_unusual(line: &[u8]) -> Shape {
    let start = line.iter().position(|&b| !is_json_space(b));
    let end = line.iter().rposition(|&b| !is_json_space(b));
    let (Some(start), Some(end)) = (start, end) else {
        return Shape::Other;
    };
    let trimmed = &line[start..=end];
    match (trimmed[0], trimmed[trimmed.len() - 1]) {
        (b'{', b'}') if trimmed.len() >= 2 => Shape::Message,
        (b'[', b']') if trimmed.len() >= 2 => {
            if trimmed[1].is_ascii_alphabetic() && !json_shape::check(trimmed).is_json {
                Shape::Other
            } else {
                Shape::Message
            }
        }
        _ => Shape::Other,
    }
}

/// What a line that does not look like a message is.
#[cold]
fn name_line(line: &[u8]) -> PollutionKind {
    if json_shape::check(line).is_json {
        // JSON that is not `{...}` or `[...]`: a number, a string, a literal.
        return PollutionKind::JsonScalar;
    }
    let head = &line[..line.len().min(NOTICE_HEAD_LEN)];
    name_text(head.trim_ascii_start(), head.len() < line.len())
}

/// What `start` (a line's head, leading whitespace removed, known not to be
/// JSON) looks like. `cut`: the head is shorter than the line.
fn name_text(start: &[u8], cut: bool) -> PollutionKind {
    if is_binary(start, cut) {
        return PollutionKind::Binary;
    }
    if starts_with_header(start) {
        return PollutionKind::ContentLengthHeader;
    }
    if prefix_level(start).is_some() {
        return PollutionKind::LogLine;
    }
    match start {
        // A line of pretty-printed JSON: `{`, `"key": value,`, `},`.
        [b'{' | b'"' | b'}' | b']', ..] => PollutionKind::BrokenJson,
        // `[server] ready` is text; `[1,` or `[{` is JSON begun.
        [b'[', next, ..] if !next.is_ascii_alphabetic() => PollutionKind::BrokenJson,
        [b'['] => PollutionKind::BrokenJson,
        _ => PollutionKind::Text,
    }
}

/// `Content-Length:` or `Content-Type:`, ignoring case and spaces before
/// the colon.
fn starts_with_header(bytes: &[u8]) -> bool {
    [&b"content-length"[..], b"content-type"]
        .iter()
        .any(|name| {
            bytes.len() > name.len()
                && bytes[..name.len()].eq_ignore_ascii_case(name)
                && bytes[name.len()..].trim_ascii_start().first() == Some(&b':')
        })
}

/// Control characters other than tab, `\r` and ESC (colour codes are
/// text), or bytes that are not UTF-8 (a character cut at the end of a
/// `cut` head excepted).
fn is_binary(head: &[u8], cut: bool) -> bool {
    if head
        .iter()
        .any(|&b| b < 0x20 && !matches!(b, b'\t' | b'\r' | b'\n' | 0x1B) || b == 0x7F)
    {
        return true;
    }
    match std::str::from_utf8(head) {
        Ok(_) => false,
        // `error_len() == None`: the bytes end inside a character.
        Err(err) => !(cut && err.error_len().is_none()),
    }
}

/// What the bytes where a `Content-Length` header block should start are,
/// when they cannot start one: `None` when they may (a header line, or too
/// little to tell).
///
/// For a decoder: call it with the first line at a header position (or
/// its first [`NOTICE_HEAD_LEN`] bytes) to name a mismatch as soon as that
/// line is complete, instead of waiting for a `\r\n\r\n` that an NDJSON
/// peer never sends.
///
/// ```
/// use childwire_core::PollutionKind;
/// use childwire_core::pollution::header_mismatch;
///
/// assert_eq!(header_mismatch(b"Content-Length: 17\r\n"), None);
/// assert_eq!(header_mismatch(br#"{"jsonrpc":"2.0","id":0,"result":{}}"#),
///     Some(PollutionKind::JsonOnContentLength));
/// assert_eq!(header_mismatch(b"Starting server\n"), Some(PollutionKind::Text));
/// ```
#[must_use]
pub fn header_mismatch(bytes: &[u8]) -> Option<PollutionKind> {
    let head = &bytes[..bytes.len().min(NOTICE_HEAD_LEN)];
    let start = head.trim_ascii_start();
    let line_end = memchr::memchr(b'\n', start).unwrap_or(start.len());
    let line = &start[..line_end];
    let line = line.strip_suffix(b"\r").unwrap_or(line);
    if line.is_empty() {
        return None;
    }
    if matches!(line[0], b'{' | b'[')
        && !(line[0] == b'[' && line.get(1).is_some_and(u8::is_ascii_alphabetic))
    {
        return Some(PollutionKind::JsonOnContentLength);
    }
    // A header line is `Name: value`, the name a token.
    if let Some(colon) = memchr::memchr(b':', line) {
        let name = &line[..colon];
        if !name.is_empty()
            && name
                .iter()
                .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b' ' | b'\t'))
            && prefix_level(line).is_none()
        {
            return None;
        }
    }
    let cut = line_end == start.len() && head.len() < bytes.len();
    Some(name_text(line, cut))
}

/// Whether lines that are not JSON messages reach the caller.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum PollutionPolicy {
    /// Deliver them as messages, as a channel does without a detector.
    #[default]
    Deliver,
    /// Drop them (still reported once per kind and counted).
    Drop,
    /// Take them out of the messages and keep them apart, for the owner to
    /// hand on with the child's stderr lines: a [`Channel`](crate::Channel)
    /// queues neither the line nor a notice as an item; it keeps the line's
    /// bytes, oldest first and within [`DIVERTED_HIGH_WATER`], for
    /// [`Channel::poll_diverted`](crate::Channel::poll_diverted), and the
    /// first notice of each kind for
    /// [`Channel::poll_diverted_notice`](crate::Channel::poll_diverted_notice).
    /// Lines past that bound are counted and dropped. So a banner never
    /// becomes the first thing the caller receives.
    Divert,
}

/// What the lines set aside by [`PollutionPolicy::Divert`] may cost while
/// they wait for the owner: 64 KiB, each line counting its length plus
/// [`ITEM_OVERHEAD`](crate::inbound::ITEM_OVERHEAD). A line that does not
/// fit is dropped and counted in [`PollutionCounts::dropped`].
pub const DIVERTED_HIGH_WATER: usize = 64 * 1024;

/// Counters of a [`PollutionDetector`].
#[derive(Debug, Clone, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct PollutionCounts {
    /// Lines (or frames) observed.
    pub lines: u64,
    /// Of them, lines that were not JSON messages, plus header blocks named
    /// by [`PollutionDetector::observe_malformed`].
    pub polluted: u64,
    /// Of the polluted lines, those whose bytes nobody gets: every one under
    /// [`PollutionPolicy::Drop`]; under [`PollutionPolicy::Divert`], those
    /// that found the set-aside lines at [`DIVERTED_HIGH_WATER`].
    pub dropped: u64,
    /// Of the polluted lines, those set aside under
    /// [`PollutionPolicy::Divert`] for the owner
    /// ([`Channel::poll_diverted`](crate::Channel::poll_diverted)). Under
    /// `Divert`, `diverted + dropped` is every polluted line.
    pub diverted: u64,
    by_kind: [u64; PollutionKind::ALL.len()],
}

impl PollutionCounts {
    /// How many lines of `kind` were seen.
    #[must_use]
    pub fn of(&self, kind: PollutionKind) -> u64 {
        self.by_kind[kind.index()]
    }
}

/// What to do with a line, from [`PollutionDetector::observe`].
#[derive(Debug, Clone, PartialEq, Eq)]
#[must_use = "a line must be dropped when `deliver` is false"]
pub struct Observed {
    /// Deliver the line as a message (always, for a JSON message). When
    /// `false`, the policy says what becomes of it: dropped, or set aside
    /// ([`PollutionPolicy::Divert`]; the caller keeps it and reports
    /// whether it could with [`PollutionDetector::diverted`]).
    pub deliver: bool,
    /// The first line of its kind on this channel: tell the user.
    pub notice: Option<PollutionNotice>,
}

/// One channel's pollution reporter: reports each [`PollutionKind`] once,
/// with its bytes, and counts every line.
///
/// Once a framing mismatch is named
/// ([`ContentLengthHeader`](PollutionKind::ContentLengthHeader) or
/// [`JsonOnContentLength`](PollutionKind::JsonOnContentLength)), later
/// lines of other kinds are only counted: they are what the other framing
/// looks like through this one (an LSP body glued to the next header reads
/// as broken JSON), and one notice names the cause.
///
/// Call [`observe`](Self::observe) with each message the decoder delivers,
/// before handing it on, and [`observe_malformed`](Self::observe_malformed)
/// with each [`Malformed`] notice of a `Content-Length` decoder.
#[derive(Debug, Clone, Default)]
pub struct PollutionDetector {
    policy: PollutionPolicy,
    reported: [bool; PollutionKind::ALL.len()],
    /// A framing mismatch was named: no more notices.
    mismatch_named: bool,
    counts: PollutionCounts,
}

impl PollutionDetector {
    /// A detector that applies `policy` to lines that are not JSON messages.
    #[must_use]
    pub fn new(policy: PollutionPolicy) -> Self {
        Self {
            policy,
            ..Self::default()
        }
    }

    /// Its policy.
    #[must_use]
    pub fn policy(&self) -> PollutionPolicy {
        self.policy
    }

    /// Takes a message as delivered by the decoder (a line without its
    /// `\n`, or a `Content-Length` body): whether to deliver it, and a
    /// notice if it is the first of its kind.
    #[inline]
    pub fn observe(&mut self, line: &[u8]) -> Observed {
        if self.passes(line) {
            return Observed {
                deliver: true,
                notice: None,
            };
        }
        self.observe_polluted(line)
    }

    /// Counts `line` and says whether it is a message, from its first and
    /// last bytes: the whole of [`observe`](Self::observe) on the message
    /// path. When `false`, [`observe_polluted`](Self::observe_polluted)
    /// says what to do with it.
    #[inline]
    pub(crate) fn passes(&mut self, line: &[u8]) -> bool {
        self.count_passed(1);
        looks_like_message(line)
    }

    /// Counts `n` lines found to be messages elsewhere ([`looks_like_message`]):
    /// what [`passes`](Self::passes) would have counted for each.
    pub(crate) fn count_passed(&mut self, n: u64) {
        self.counts.lines += n;
    }

    /// [`observe`](Self::observe) for a line [`passes`](Self::passes)
    /// counted and found not to be a message.
    #[cold]
    pub(crate) fn observe_polluted(&mut self, line: &[u8]) -> Observed {
        let kind = name_line(line);
        let dropped = self.policy == PollutionPolicy::Drop;
        if dropped {
            self.counts.dropped += 1;
        }
        let mut notice = self.count(kind, line, dropped);
        let diverted = self.policy == PollutionPolicy::Divert;
        if let Some(notice) = notice.as_mut() {
            notice.diverted = diverted;
        }
        Observed {
            deliver: self.policy == PollutionPolicy::Deliver,
            notice,
        }
    }

    /// Under [`PollutionPolicy::Divert`], what became of a line
    /// [`observe`](Self::observe) did not deliver: `kept` when it was set
    /// aside for the owner (counted in [`PollutionCounts::diverted`]), else
    /// dropped for want of room (in [`PollutionCounts::dropped`]).
    pub fn diverted(&mut self, kept: bool) {
        if kept {
            self.counts.diverted += 1;
        } else {
            self.counts.dropped += 1;
        }
    }

    /// Takes a [`Malformed`] notice of a `Content-Length` decoder (already
    /// dropped): a notice naming the mismatch if its header block was
    /// JSON, text or a log line rather than a bad header, and the first of
    /// its kind. Truncated bodies are not looked at: their head is a body.
    pub fn observe_malformed(&mut self, malformed: &Malformed) -> Option<PollutionNotice> {
        if matches!(malformed.reason, MalformedReason::Truncated { expected, .. } if expected > 0) {
            return None;
        }
        self.counts.lines += 1;
        let kind = header_mismatch(&malformed.head)?;
        self.count(kind, &malformed.head, true)
    }

    /// The counters so far.
    #[must_use]
    pub fn counts(&self) -> &PollutionCounts {
        &self.counts
    }

    fn count(
        &mut self,
        kind: PollutionKind,
        line: &[u8],
        dropped: bool,
    ) -> Option<PollutionNotice> {
        self.counts.polluted += 1;
        self.counts.by_kind[kind.index()] += 1;
        let reported = &mut self.reported[kind.index()];
        if *reported || self.mismatch_named {
            return None;
        }
        *reported = true;
        self.mismatch_named = matches!(
            kind,
            PollutionKind::ContentLengthHeader | PollutionKind::JsonOnContentLength
        );
        Some(PollutionNotice {
            kind,
            line: self.counts.lines,
            len: line.len(),
            head: Bytes::copy_from_slice(&line[..line.len().min(NOTICE_HEAD_LEN)]),
            dropped,
            diverted: false,
        })
    }
}
