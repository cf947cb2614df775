//! What a decoder yields, whatever the wire format: messages, and notices
//! for what could not be delivered as one.

use std::fmt;
use std::ops::Deref;
use std::str::Utf8Error;

use bytes::Bytes;

/// How many bytes of a dropped frame are kept in [`Oversized::head`] and
/// [`Malformed::head`]: enough to see what it was.
pub const OVERSIZED_HEAD_LEN: usize = 1024;

/// Counters kept by a decoder.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct DecoderStats {
    /// Messages delivered.
    pub messages: u64,
    /// Bytes of the delivered messages (framing excluded).
    pub bytes: u64,
    /// Empty lines skipped (line framing only).
    pub blank_lines: u64,
    /// Frames over the size limit that were dropped.
    pub oversized: u64,
    /// Frames that broke the wire format and were dropped.
    pub malformed: u64,
}

/// What a decoder yields.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum Frame {
    /// A complete message.
    Message(Message),
    /// A frame over the size limit was dropped; the stream goes on.
    Oversized(Oversized),
    /// Bytes that break the wire format were dropped; the stream goes on
    /// from the next frame the decoder can find. Line framing never yields
    /// this: every byte sequence is made of lines.
    Malformed(Malformed),
    /// A line on stdout that is not a JSON message (a banner, a log line,
    /// the other framing), named once per kind, just before that line (or
    /// before the [`Malformed`] notice of a `Content-Length` header block
    /// it broke). Only from an [`Channel`](crate::Channel) with
    /// pollution detection on (see
    /// [`ChannelConfig::pollution`](crate::config::ChannelConfig::pollution));
    /// a decoder never yields it.
    Pollution(PollutionNotice),
}

/// One message: the bytes of a frame, without its framing.
///
/// The bytes are delivered as they came, valid UTF-8 or not;
/// [`as_str`](Self::as_str) is the checked text view.
#[derive(Clone, PartialEq, Eq)]
pub struct Message {
    bytes: Bytes,
    terminated: bool,
}

impl Message {
    /// A terminated message holding `bytes` (for tests and other transports).
    pub fn new(bytes: impl Into<Bytes>) -> Self {
        Self {
            bytes: bytes.into(),
            terminated: true,
        }
    }

    /// A message that the stream ended before its terminator.
    #[inline]
    pub(crate) fn unterminated(bytes: Bytes) -> Self {
        Self {
            bytes,
            terminated: false,
        }
    }

    /// The message's bytes.
    pub fn bytes(&self) -> &Bytes {
        &self.bytes
    }

    /// The message's bytes, without copying.
    pub fn into_bytes(self) -> Bytes {
        self.bytes
    }

    /// The message as text, if it is valid UTF-8.
    pub fn as_str(&self) -> Result<&str, Utf8Error> {
        std::str::from_utf8(&self.bytes)
    }

    /// `false` for a final line that the stream ended without a `\n`.
    pub fn is_terminated(&self) -> bool {
        self.terminated
    }
}

impl Deref for Message {
    type Target = [u8];

    fn deref(&self) -> &[u8] {
        &self.bytes
    }
}

impl AsRef<[u8]> for Message {
    fn as_ref(&self) -> &[u8] {
        &self.bytes
    }
}

impl From<Message> for Bytes {
    fn from(message: Message) -> Bytes {
        message.bytes
    }
}

impl fmt::Debug for Message {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut s = f.debug_struct("Message");
        match self.as_str() {
            Ok(text) => s.field("text", &text),
            Err(_) => s.field("bytes", &self.bytes),
        };
        if !self.terminated {
            s.field("terminated", &false);
        }
        s.finish()
    }
}

/// Notice that a frame over the size limit was dropped.
///
/// Not an error: the stream continues with the next frame. A JSON-RPC peer
/// is still waiting for what the frame carried, though: when it was a JSON
/// object with a top-level `id`, [`json_rpc_id`](Self::json_rpc_id) names
/// it, so the host can fail that request (or answer the child, with
/// [`oversized_error`](crate::jsonrpc::oversized_error)) instead of
/// letting it hang.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct Oversized {
    /// The dropped message's length, its framing excluded.
    pub len: u64,
    /// The message's first bytes, at most [`OVERSIZED_HEAD_LEN`], to show
    /// what it was. To find its JSON-RPC id, use
    /// [`json_rpc_id`](Self::json_rpc_id): the id may come after the head,
    /// and the head may hold nested `"id"` members that are not it.
    pub head: Bytes,
    /// The top-level JSON-RPC id, found while the message was dropped.
    id: Option<Bytes>,
}

impl Oversized {
    /// A notice for a dropped message of `len` bytes that began with
    /// `head`, with no JSON-RPC id.
    pub fn new(len: u64, head: Bytes) -> Self {
        Self {
            len,
            head,
            id: None,
        }
    }

    /// The same notice, naming the message's JSON-RPC id.
    pub(crate) fn with_json_rpc_id(mut self, id: Option<Bytes>) -> Self {
        self.id = id;
        self
    }

    /// The dropped message's top-level JSON-RPC `id`, as raw JSON text: a
    /// number (`7`), a string with its quotes (`"abc"`), or `null`.
    ///
    /// The decoder reads the whole message for it while dropping it,
    /// whatever the order of its members, so it is the id even when it
    /// comes last, after a `result` with `"id"` members of its own. It is
    /// `None` when the message was not one JSON object, had no top-level
    /// `id` (a notification), had an id that is not a number, string or
    /// `null`, or had one longer than
    /// [`MAX_ID_LEN`](crate::jsonrpc::MAX_ID_LEN) bytes; see
    /// [`IdScanner`](crate::jsonrpc::IdScanner) for the exact rules.
    ///
    /// ```
    /// use childwire_core::{Frame, LineDecoder};
    ///
    /// let mut decoder = LineDecoder::new(16);
    /// for chunk in [&br#"{"result":{"id":"nested","#[..], br#""data":"......"},"id":42}"#, b"\n"] {
    ///     decoder.handle_data(chunk);
    /// }
    /// let Some(Frame::Oversized(notice)) = decoder.poll_frame() else { panic!() };
    /// assert_eq!(notice.json_rpc_id().map(|id| &id[..]), Some(&b"42"[..]));
    /// ```
    pub fn json_rpc_id(&self) -> Option<&Bytes> {
        self.id.as_ref()
    }
}

impl fmt::Display for Oversized {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "dropped a {}-byte message over the size limit", self.len)?;
        if let Some(id) = &self.id {
            write!(f, " (JSON-RPC id {})", String::from_utf8_lossy(id))?;
        }
        write!(
            f,
            "; it began: {:?}",
            String::from_utf8_lossy(&self.head[..self.head.len().min(80)])
        )
    }
}

/// Notice that bytes breaking the wire format were dropped.
///
/// Not an error: the decoder goes on with the next frame it can find.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct Malformed {
    /// What was wrong.
    pub reason: MalformedReason,
    /// The first bytes of what was dropped, at most [`OVERSIZED_HEAD_LEN`].
    pub head: Bytes,
}

impl Malformed {
    /// A notice that bytes beginning with `head` were dropped for `reason`.
    pub fn new(reason: MalformedReason, head: Bytes) -> Self {
        Self { reason, head }
    }
}

/// Why bytes were dropped as [`Malformed`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum MalformedReason {
    /// A header block without a `Content-Length` header.
    MissingLength,
    /// A `Content-Length` value that is not a decimal number of bytes (a
    /// negative one included), or two that disagree.
    InvalidLength,
    /// A header line that is not `Name: value`, or a header block longer
    /// than the decoder accepts.
    InvalidHeader,
    /// The stream ended in the middle of a frame.
    Truncated {
        /// Body bytes the header announced (0 if the header block itself
        /// was cut).
        expected: u64,
        /// Body bytes that arrived.
        got: u64,
    },
}

impl fmt::Display for MalformedReason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::MissingLength => f.write_str("a header block without Content-Length"),
            Self::InvalidLength => f.write_str("a Content-Length that is not a byte count"),
            Self::InvalidHeader => f.write_str("a header line that is not `Name: value`"),
            Self::Truncated { expected, got } => write!(
                f,
                "the stream ended inside a frame ({got} of {expected} body bytes)"
            ),
        }
    }
}

impl fmt::Display for Malformed {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "dropped bytes that break the framing: {}; they began: {:?}",
            self.reason,
            String::from_utf8_lossy(&self.head[..self.head.len().min(80)])
        )
    }
}

/// What a line that is not a JSON message looks like.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum PollutionKind {
    /// Text that is not JSON: a banner, a progress message, a `print`.
    Text,
    /// A log line (`INFO: …`, `[warn] …`, `WARNING:root:…`) on stdout:
    /// logs belong on stderr.
    LogLine,
    /// A `Content-Length:` (or `Content-Type:`) header on an NDJSON
    /// channel: the child speaks LSP-style framing.
    ContentLengthHeader,
    /// A line that starts like JSON but is not one complete value: JSON
    /// pretty-printed over several lines, or a line cut short.
    BrokenJson,
    /// A JSON value that is not an object or an array (`42`, `"ready"`,
    /// `true`): never a JSON-RPC message.
    JsonScalar,
    /// Bytes that are not text: invalid UTF-8 or control characters.
    Binary,
    /// A JSON line where a `Content-Length` header belongs: the child
    /// speaks newline-delimited JSON, not LSP-style framing.
    JsonOnContentLength,
}

impl PollutionKind {
    /// Every kind, in declaration order.
    pub const ALL: [PollutionKind; 7] = [
        PollutionKind::Text,
        PollutionKind::LogLine,
        PollutionKind::ContentLengthHeader,
        PollutionKind::BrokenJson,
        PollutionKind::JsonScalar,
        PollutionKind::Binary,
        PollutionKind::JsonOnContentLength,
    ];

    pub(crate) fn index(self) -> usize {
        self as usize
    }

    /// What the kind says about the child, in a few words.
    #[must_use]
    pub fn describe(self) -> &'static str {
        match self {
            PollutionKind::Text => "text, like a banner or a log line printed to stdout",
            PollutionKind::LogLine => "a log line on stdout (logs belong on stderr)",
            PollutionKind::ContentLengthHeader => {
                "a `Content-Length:` header: the server speaks LSP-style framing"
            }
            PollutionKind::BrokenJson => {
                "JSON that is not one complete value on its line (pretty-printed, or cut short)"
            }
            PollutionKind::JsonScalar => "a JSON value that is not an object or array",
            PollutionKind::Binary => "bytes that are not text",
            PollutionKind::JsonOnContentLength => {
                "JSON where a `Content-Length` header belongs: the server speaks newline-delimited JSON"
            }
        }
    }
}

impl fmt::Display for PollutionKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.describe())
    }
}

/// Notice that a line on stdout is not a JSON message (or, on a
/// `Content-Length` channel, that a header block was not one), naming what
/// it looks like. Each kind is reported once per channel.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct PollutionNotice {
    /// What the line looks like.
    pub kind: PollutionKind,
    /// Which line of the stream it was, from 1, counting the lines given
    /// to [`PollutionDetector::observe`](crate::PollutionDetector::observe) (on a `Content-Length` channel:
    /// the frames and dropped header blocks).
    pub line: u64,
    /// Its length in bytes.
    pub len: usize,
    /// Its first [`NOTICE_HEAD_LEN`](crate::pollution::NOTICE_HEAD_LEN) bytes.
    pub head: Bytes,
    /// It was dropped ([`PollutionPolicy::Drop`](crate::PollutionPolicy::Drop), or a header block a
    /// `Content-Length` decoder already dropped, or a line set aside that
    /// found no room); else delivered or set aside.
    pub dropped: bool,
    /// It was taken out of the messages and set aside for the owner
    /// ([`PollutionPolicy::Divert`](crate::PollutionPolicy::Divert)).
    pub diverted: bool,
}

impl fmt::Display for PollutionNotice {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.kind {
            // The kind says it all: the line was not meant as a message.
            PollutionKind::JsonOnContentLength => write!(f, "stdout line {}: ", self.line)?,
            _ => write!(f, "stdout line {} is not a JSON message: ", self.line)?,
        }
        write!(f, "{}; it began: ", self.kind)?;
        let shown = &self.head[..self.head.len().min(80)];
        write!(f, "{:?}", String::from_utf8_lossy(shown))?;
        if self.dropped {
            f.write_str(" (dropped)")?;
        } else if self.diverted {
            f.write_str(" (kept apart from the messages)")?;
        }
        Ok(())
    }
}
