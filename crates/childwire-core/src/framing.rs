//! Wire formats: how a byte stream is cut into messages, and how a message
//! is written. The channel and the session are generic over a [`Framing`].
//!
//! Two are built in:
//! - [`Lines`](crate::Lines): newline-delimited messages (NDJSON; MCP, ACP and JSON-RPC
//!   over stdio). The default.
//! - `ContentLength`: a `Content-Length: N` header block, a blank line,
//!   then N bytes (LSP and DAP).
//!
//! Another format is a decoder type implementing [`FrameDecoder`] and a
//! type implementing [`Framing`] that creates it and frames outbound
//! messages.

use std::fmt;

use bytes::{Bytes, BytesMut};

use crate::frame::{DecoderStats, Frame};

/// Inbound framing: a byte stream in, [`Frame`]s out.
///
/// # Inputs and outputs
///
/// - [`handle_data`](Self::handle_data) / [`handle_bytes`](Self::handle_bytes):
///   bytes as they arrived, in chunks of any size.
/// - [`handle_eof`](Self::handle_eof): the stream ended.
/// - [`poll_frame`](Self::poll_frame): the next frame, or `None` when more
///   input is needed. Drain it until `None` after every input.
///
/// # What every implementation guarantees
///
/// - The frames are the same however the input is chunked.
/// - Memory is bounded: a frame over [`max_message_size`](Self::max_message_size)
///   is never held whole; it becomes one [`Frame::Oversized`] notice. Bytes
///   that break the format become [`Frame::Malformed`] notices. Neither
///   ends the stream.
/// - No input makes it panic.
pub trait FrameDecoder: fmt::Debug + Send + 'static {
    /// Takes the next bytes of the stream, copying them once.
    fn handle_data(&mut self, data: &[u8]);

    /// Takes the next bytes of the stream; messages that lie wholly inside
    /// `data` may be slices of it, without a copy.
    fn handle_bytes(&mut self, data: Bytes);

    /// Takes the end of the stream: what is left comes out on the next
    /// [`poll_frame`](Self::poll_frame) calls.
    fn handle_eof(&mut self);

    /// The next message or notice, or `None` when more input is needed (or,
    /// after [`handle_eof`](Self::handle_eof), when the stream is exhausted).
    fn poll_frame(&mut self) -> Option<Frame>;

    /// Hands every frame available now to `each`, in order: the same as
    /// calling [`poll_frame`](Self::poll_frame) until `None`, which is what
    /// this default does. A decoder may do it faster in a batch; the line
    /// decoder does.
    fn drain_frames<E: FnMut(Frame)>(&mut self, mut each: E)
    where
        Self: Sized,
    {
        while let Some(frame) = self.poll_frame() {
            each(frame);
        }
    }

    /// Bytes the decoder holds now.
    fn buffered(&self) -> usize;

    /// Counters of what has been decoded so far.
    fn stats(&self) -> &DecoderStats;

    /// The largest message delivered; longer ones become notices.
    fn max_message_size(&self) -> usize;

    /// The first bytes (up to [`OVERSIZED_HEAD_LEN`](crate::frame::OVERSIZED_HEAD_LEN))
    /// of a broken frame being dropped whose [`Frame::Malformed`] notice is
    /// not given yet, or `None`.
    ///
    /// A `Content-Length` decoder gives the notice only once the next
    /// header (or the end of the stream) shows where the broken part ends;
    /// an NDJSON peer never writes one. This lets an
    /// [`Channel`](crate::Channel) name the mismatch as soon as
    /// the first line is in. The default, for framings that never drop
    /// bytes this way, is `None`.
    fn dropping_head(&self) -> Option<&[u8]> {
        None
    }
}

/// A wire format: creates the [`FrameDecoder`] for inbound bytes, and frames
/// outbound messages.
pub trait Framing: fmt::Debug + Clone + Default + Send + Sync + 'static {
    /// The inbound decoder.
    type Decoder: FrameDecoder;

    /// A decoder that delivers messages of up to `max_message_size` bytes.
    fn decoder(&self, max_message_size: usize) -> Self::Decoder;

    /// Whether `payload` can be sent as one message of at most
    /// `max_message_size` bytes. An empty payload never can: no format here
    /// carries it as a message.
    fn check(&self, payload: &[u8], max_message_size: usize) -> Result<(), EncodeErrorKind>;

    /// Appends `payload`, already checked, with its framing to `dst`.
    fn encode(&self, payload: &[u8], dst: &mut BytesMut);

    /// Bytes of framing [`encode`](Self::encode) adds to a payload of `len`
    /// bytes.
    fn overhead(&self, len: usize) -> usize;
}

/// Appends `data` to a decoder's unframed `input`, copying once into
/// `staging`, whose memory is reused once the frames sliced from it are
/// dropped. Shared by every decoder here. Returns how many bytes it copied:
/// more than `data` when `input` was not empty.
pub(crate) fn append_input(input: &mut Bytes, staging: &mut BytesMut, data: &[u8]) -> usize {
    let rest = std::mem::take(input);
    let copied = rest.len() + data.len();
    if rest.is_empty() {
        // Even empty, it holds a reference to the staging memory: let go of
        // it so that memory can be reused instead of reallocated.
        drop(rest);
        staging.reserve(data.len());
    } else {
        // Only when a caller gives two chunks without polling between.
        staging.reserve(rest.len() + data.len());
        staging.extend_from_slice(&rest);
    }
    staging.extend_from_slice(data);
    *input = staging.split().freeze();
    copied
}

/// Takes `data` as a decoder's unframed `input` without a copy when nothing
/// is left of the previous chunk; appends it otherwise. Returns how many
/// bytes it copied.
pub(crate) fn adopt_input(input: &mut Bytes, staging: &mut BytesMut, data: Bytes) -> usize {
    if input.is_empty() {
        *input = data;
        0
    } else {
        append_input(input, staging, &data)
    }
}

/// Why a message was refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum EncodeErrorKind {
    /// The payload is empty. On the wire it would be a blank line, which
    /// is not a message (JSON-RPC peers answer it with a parse error).
    Empty,
    /// The payload contains a `\n` at byte `at`; it would split into two
    /// messages on the wire.
    Newline {
        /// Byte offset of the first `\n`.
        at: usize,
    },
    /// The payload contains a `\r` at byte `at`; the child could take it for
    /// part of a line terminator.
    CarriageReturn {
        /// Byte offset of the first `\r`.
        at: usize,
    },
    /// The payload is longer than the outbound message limit.
    TooLarge {
        /// The payload's length.
        len: usize,
        /// The limit.
        max: usize,
    },
    /// The queue is at its high-water mark: the child is not reading fast
    /// enough. Try again once it has drained.
    Full {
        /// Bytes queued.
        queued: usize,
        /// The high-water mark.
        high_water: usize,
    },
}

impl fmt::Display for EncodeErrorKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match *self {
            Self::Empty => f.write_str("message is empty; a blank line is not a message"),
            Self::Newline { at } => write!(
                f,
                "message contains a newline at byte {at}; newline-delimited messages must be single-line (serialize JSON compactly)"
            ),
            Self::CarriageReturn { at } => write!(
                f,
                "message contains a carriage return at byte {at}; newline-delimited messages must be single-line"
            ),
            Self::TooLarge { len, max } => {
                write!(f, "message is {len} bytes, over the {max}-byte limit")
            }
            Self::Full { queued, high_water } => write!(
                f,
                "outbound queue is full ({queued} bytes queued, high-water mark {high_water}): the child is not reading its stdin"
            ),
        }
    }
}

impl std::error::Error for EncodeErrorKind {}
