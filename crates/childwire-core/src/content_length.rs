//! `Content-Length` framing, as LSP and DAP use it: a header block of
//! `Name: value\r\n` lines ended by an empty line, then a body of exactly
//! `Content-Length` bytes.
//!
//! ```text
//! Content-Length: 17\r\n
//! Content-Type: application/vscode-jsonrpc; charset=utf-8\r\n
//! \r\n
//! {"jsonrpc":"2.0"}
//! ```
//!
//! [`ContentLength`] is the [`Framing`]; [`ContentLengthDecoder`] is its
//! inbound state machine, usable on its own over any byte stream.

use std::ops::Deref;

use bytes::{Buf, Bytes, BytesMut};

use crate::decoder::DEFAULT_MAX_MESSAGE_SIZE;
use crate::encoder::EncodeErrorKind;
use crate::frame::{
    DecoderStats, Frame, Malformed, MalformedReason, Message, OVERSIZED_HEAD_LEN, Oversized,
};
use crate::framing::{FrameDecoder, Framing, adopt_input, append_input};
use crate::jsonrpc::IdScanner;

/// The longest header block accepted, its final `\r\n\r\n` included: 8 KiB.
///
/// LSP and DAP send one or two short headers (under 100 bytes); the bound
/// only exists so that a peer that never ends its header block cannot make
/// the decoder hold its bytes. A longer block is dropped as
/// [`MalformedReason::InvalidHeader`].
pub const MAX_HEADER_LEN: usize = 8 * 1024;

/// What ends a header block: the `\r\n` of its last line and an empty line.
const TERMINATOR: &[u8; 4] = b"\r\n\r\n";

/// The header name that carries the body's length, compared ignoring case.
const CONTENT_LENGTH: &[u8] = b"content-length";

/// The initial capacity of the buffer that chunks are copied to: one pipe
/// read's worth, as for [`LineDecoder`](crate::decoder::LineDecoder).
const INITIAL_CAPACITY: usize = 64 * 1024;

/// `Content-Length` framing (LSP, DAP).
///
/// Inbound, see [`ContentLengthDecoder`] for exactly what is accepted and
/// what becomes a notice. Outbound, a payload is written as
/// `Content-Length: N\r\n\r\n` and its `N` bytes, whatever they are: any
/// non-empty payload within the size limit can be sent.
///
/// ```
/// use bytes::BytesMut;
/// use childwire_core::encoder::EncodeErrorKind;
/// use childwire_core::{ContentLength, Frame, Framing};
///
/// let framing = ContentLength;
/// let payload = b"{\"jsonrpc\":\"2.0\",\"method\":\"exit\"}";
/// framing.check(payload, 1024)?;
/// let mut wire = BytesMut::new();
/// framing.encode(payload, &mut wire);
/// assert_eq!(&wire[..20], b"Content-Length: 33\r\n");
/// assert_eq!(wire.len(), payload.len() + framing.overhead(payload.len()));
/// assert_eq!(framing.check(b"", 1024), Err(EncodeErrorKind::Empty));
///
/// let mut decoder = framing.decoder(1024);
/// decoder.handle_data(&wire);
/// let Some(Frame::Message(message)) = decoder.poll_frame() else {
///     panic!("one message");
/// };
/// assert_eq!(&message[..], payload);
/// # Ok::<(), EncodeErrorKind>(())
/// ```
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ContentLength;

impl ContentLength {
    /// The header line written before every payload, up to its number.
    const PREFIX: &'static [u8] = b"Content-Length: ";
}

impl Framing for ContentLength {
    type Decoder = ContentLengthDecoder;

    fn decoder(&self, max_message_size: usize) -> ContentLengthDecoder {
        ContentLengthDecoder::new(max_message_size)
    }

    #[inline]
    fn check(&self, payload: &[u8], max_message_size: usize) -> Result<(), EncodeErrorKind> {
        // The body is counted, not scanned: any byte may appear in it.
        if payload.is_empty() {
            // The wire could carry it (`Content-Length: 0`), but no peer
            // reads an empty body as a message, and the decoder skips it.
            return Err(EncodeErrorKind::Empty);
        }
        if payload.len() > max_message_size {
            return Err(EncodeErrorKind::TooLarge {
                len: payload.len(),
                max: max_message_size,
            });
        }
        Ok(())
    }

    #[inline]
    fn encode(&self, payload: &[u8], dst: &mut BytesMut) {
        dst.reserve(payload.len() + self.overhead(payload.len()));
        dst.extend_from_slice(Self::PREFIX);
        // Digits by hand: `write!` through `fmt` costs more than the rest
        // of the framing of a small message.
        let mut digits = [0u8; 20];
        let mut at = digits.len();
        let mut n = payload.len();
        loop {
            at -= 1;
            digits[at] = b'0' + (n % 10) as u8;
            n /= 10;
            if n == 0 {
                break;
            }
        }
        dst.extend_from_slice(&digits[at..]);
        dst.extend_from_slice(TERMINATOR);
        dst.extend_from_slice(payload);
    }

    #[inline]
    fn overhead(&self, len: usize) -> usize {
        Self::PREFIX.len() + decimal_digits(len) + TERMINATOR.len()
    }
}

/// How many decimal digits `n` is written with.
#[inline]
fn decimal_digits(mut n: usize) -> usize {
    let mut digits = 1;
    while n >= 10 {
        n /= 10;
        digits += 1;
    }
    digits
}

/// Splits a byte stream into `Content-Length` framed messages (LSP, DAP).
///
/// # Inputs and outputs
///
/// - [`handle_data`](Self::handle_data) / [`handle_bytes`](Self::handle_bytes):
///   bytes as they arrived, in chunks of any size.
/// - [`handle_eof`](Self::handle_eof): the stream ended.
/// - [`poll_frame`](Self::poll_frame): the next [`Frame`], or `None` when more
///   input is needed.
///
/// Drain `poll_frame` until it returns `None` after every `handle_*` call.
/// The memory bound below holds for callers who do.
///
/// # What a frame is
///
/// - A header block is the bytes up to and including the first `\r\n\r\n`.
///   Its lines (split on `\r\n`) are `Name: value`: the name is compared
///   ignoring ASCII case, spaces and tabs around name and value are ignored,
///   and headers other than `Content-Length` (such as `Content-Type`) are
///   accepted and ignored. An empty line is ignored too, so one stray
///   `\r\n` before a header block does no harm.
/// - `Content-Length` is a decimal byte count (digits only; leading zeros
///   allowed). It may repeat if every value agrees.
/// - The body is the next `Content-Length` bytes, delivered as a
///   [`Frame::Message`] whatever they contain (newlines, invalid UTF-8).
/// - A body of zero bytes is skipped and counted in
///   [`DecoderStats::blank_lines`], as an empty line is by line framing: no
///   peer means it as a message, and [`ContentLength`] never sends one.
///
/// # Notices
///
/// Nothing in the input ends the stream or panics; what cannot be
/// delivered becomes one notice, and decoding goes on:
///
/// - A body longer than `max_message_size` is never held: its bytes are
///   dropped as they stream past, keeping its first [`OVERSIZED_HEAD_LEN`]
///   bytes, and once the whole body has passed, one [`Frame::Oversized`]
///   notice takes its place.
/// - A header block that cannot be used becomes a [`Frame::Malformed`]
///   notice: [`MissingLength`](MalformedReason::MissingLength) without a
///   `Content-Length` header; [`InvalidLength`](MalformedReason::InvalidLength)
///   for a value that is not a byte count (`-1`, `12abc`, one over
///   `u64::MAX`) or two values that disagree;
///   [`InvalidHeader`](MalformedReason::InvalidHeader) for a non-empty line
///   without `:`. When a block has several problems, its first line with
///   one decides the reason.
/// - A header block longer than [`MAX_HEADER_LEN`] bytes (its `\r\n\r\n`
///   included) is an [`InvalidHeader`](MalformedReason::InvalidHeader)
///   notice as soon as its first `MAX_HEADER_LEN` bytes have arrived
///   without an end.
/// - When the stream ends inside a header block or a body, one
///   [`Truncated`](MalformedReason::Truncated) notice says how much of the
///   body had arrived (`expected: 0, got: 0` for a header block).
///
/// A notice's `head` is the first bytes (up to [`OVERSIZED_HEAD_LEN`]) of
/// what it dropped: the body for [`Frame::Oversized`] and a truncated body,
/// the header block otherwise.
///
/// # Resynchronisation
///
/// A header block is always consumed through its `\r\n\r\n`, usable or not.
/// After a malformed block, the bytes that follow its `\r\n\r\n` are read as
/// the next header block: the body a broken header announced cannot be
/// measured, so it is not skipped. If one was sent, it is read as header
/// lines up to the next `\r\n\r\n`, which is usually the end of the next
/// real header block: one more malformed notice, which takes that frame's
/// header with it (its body then meets the same rule). Decoding is back in
/// step at the first header block that starts right after a `\r\n\r\n`.
/// A block over [`MAX_HEADER_LEN`] is dropped through its `\r\n\r\n`,
/// however far that is, holding none of its bytes. The rule is the same
/// however the input is chunked.
///
/// # Memory
///
/// Besides the chunk given to the latest `handle_*` call, the decoder holds
/// at most one of:
///
/// - a body that straddles chunks, in a buffer of the body's length (so at
///   most `max_message_size`), allocated when its first bytes arrive; the
///   OS commits its pages only as they are written. With a limit raised
///   past [`DEFAULT_MAX_MESSAGE_SIZE`], a body over that size gets a buffer
///   that doubles as bytes arrive instead (the old one freed once copied),
///   so a header claiming more than memory holds costs nothing until the
///   bytes come;
/// - a header block that straddles chunks ([`MAX_HEADER_LEN`]);
/// - an oversized body's head ([`OVERSIZED_HEAD_LEN`]).
///
/// So it never holds more than `max_message_size + MAX_HEADER_LEN +
/// OVERSIZED_HEAD_LEN` bytes plus one chunk, whatever the peer sends.
/// [`buffered`](Self::buffered) reports it.
///
/// # Cost
///
/// Header bytes are scanned once for `\r\n\r\n` (with `memchr`; a block
/// over the bound excepted), and the usual one-line block
/// `Content-Length: N\r\n\r\n` is read without a scan;
/// body bytes are counted, never scanned. A body that lies wholly inside a
/// chunk given to [`handle_bytes`](Self::handle_bytes) (or inside the copy
/// [`handle_data`](Self::handle_data) makes) is split off as [`Bytes`]
/// without copying.
///
/// # Example
///
/// ```
/// use childwire_core::content_length::ContentLengthDecoder;
/// use childwire_core::Frame;
///
/// let mut decoder = ContentLengthDecoder::new(16);
/// decoder.handle_data(b"Content-Length: 8\r\nContent-Type: x\r\n\r\n{\"id\":1}");
/// decoder.handle_data(b"content-length:30\r\n\r\n{\"id\":2,\"note\":\"far too long\"}");
/// decoder.handle_data(b"Content-Type: x\r\n\r\nContent-Length: 2\r\n\r\nok");
/// decoder.handle_data(b"Content-Length: 10\r\n\r\ncut");
/// decoder.handle_eof();
///
/// let mut seen = Vec::new();
/// while let Some(frame) = decoder.poll_frame() {
///     seen.push(match frame {
///         Frame::Message(m) => format!("message {}", m.as_str().unwrap()),
///         Frame::Oversized(o) => format!("oversized, {} bytes", o.len),
///         Frame::Malformed(m) => format!("malformed: {:?}", m.reason),
///         other => format!("{other:?}"),
///     });
/// }
/// assert_eq!(
///     seen,
///     [
///         r#"message {"id":1}"#,
///         "oversized, 30 bytes",
///         "malformed: MissingLength",
///         "message ok",
///         "malformed: Truncated { expected: 10, got: 3 }",
///     ]
/// );
/// assert_eq!(decoder.stats().malformed, 2);
/// assert_eq!(decoder.poll_frame(), None);
/// ```
#[derive(Debug)]
pub struct ContentLengthDecoder {
    /// Input not yet framed. Bodies that lie wholly inside it are split off
    /// it without copying.
    input: Bytes,
    /// Where [`handle_data`](Self::handle_data) copies chunks to. Its memory
    /// is reused once the messages split from it are dropped.
    staging: BytesMut,
    /// The stream ended: what is left is cut short.
    eof: bool,
    parser: Parser,
}

impl Default for ContentLengthDecoder {
    /// A decoder with the default limit, [`DEFAULT_MAX_MESSAGE_SIZE`].
    fn default() -> Self {
        Self::new(DEFAULT_MAX_MESSAGE_SIZE)
    }
}

impl ContentLengthDecoder {
    /// A decoder that delivers bodies of up to `max_message_size` bytes and
    /// turns longer ones into [`Frame::Oversized`] notices.
    pub fn new(max_message_size: usize) -> Self {
        Self {
            input: Bytes::new(),
            staging: BytesMut::with_capacity(INITIAL_CAPACITY),
            eof: false,
            parser: Parser::new(max_message_size),
        }
    }

    /// The largest message this decoder delivers.
    pub fn max_message_size(&self) -> usize {
        self.parser.max_message_size
    }

    /// Takes the next bytes of the stream, copying them once.
    ///
    /// Bytes given after [`handle_eof`](Self::handle_eof) start a new stream;
    /// poll the old one's last frames first.
    pub fn handle_data(&mut self, data: &[u8]) {
        let _ = append_input(&mut self.input, &mut self.staging, data);
        self.eof = false;
    }

    /// Takes the next bytes of the stream without copying them: bodies that
    /// lie wholly inside `data` are slices of it.
    pub fn handle_bytes(&mut self, data: Bytes) {
        let _ = adopt_input(&mut self.input, &mut self.staging, data);
        self.eof = false;
    }

    /// Takes the end of the stream: the next [`poll_frame`](Self::poll_frame)
    /// calls deliver what is left, and a frame cut short becomes a
    /// [`MalformedReason::Truncated`] notice.
    pub fn handle_eof(&mut self) {
        self.eof = true;
    }

    /// Bytes the decoder holds now: input not yet framed, and a header
    /// block, body or oversized body's head begun in an earlier chunk. See
    /// the memory bound on the type.
    pub fn buffered(&self) -> usize {
        self.input.len() + self.parser.held()
    }

    /// Counters of what has been decoded so far.
    pub fn stats(&self) -> &DecoderStats {
        &self.parser.stats
    }

    /// The next message or notice, or `None` when more input is needed (or,
    /// after [`handle_eof`](Self::handle_eof), when the stream is exhausted).
    #[must_use = "frames are lost unless polled until `None`"]
    pub fn poll_frame(&mut self) -> Option<Frame> {
        self.parser.next_frame(&mut self.input, self.eof)
    }
}

impl FrameDecoder for ContentLengthDecoder {
    fn handle_data(&mut self, data: &[u8]) {
        ContentLengthDecoder::handle_data(self, data);
    }

    fn handle_bytes(&mut self, data: Bytes) {
        ContentLengthDecoder::handle_bytes(self, data);
    }

    fn handle_eof(&mut self) {
        ContentLengthDecoder::handle_eof(self);
    }

    fn poll_frame(&mut self) -> Option<Frame> {
        ContentLengthDecoder::poll_frame(self)
    }

    fn buffered(&self) -> usize {
        ContentLengthDecoder::buffered(self)
    }

    fn stats(&self) -> &DecoderStats {
        ContentLengthDecoder::stats(self)
    }

    fn max_message_size(&self) -> usize {
        ContentLengthDecoder::max_message_size(self)
    }
}

/// Bytes the [`Parser`] reads from: the decoder's frozen input, or the
/// `tokio-util` codec's read buffer. Either way, a body found whole in it is
/// split off without copying.
pub(crate) trait Source: Deref<Target = [u8]> {
    /// Splits off the first `n` bytes.
    fn take(&mut self, n: usize) -> Bytes;
    /// Drops the first `n` bytes.
    fn skip(&mut self, n: usize);
}

impl Source for Bytes {
    fn take(&mut self, n: usize) -> Bytes {
        self.split_to(n)
    }

    fn skip(&mut self, n: usize) {
        self.advance(n);
    }
}

impl Source for BytesMut {
    fn take(&mut self, n: usize) -> Bytes {
        self.split_to(n).freeze()
    }

    fn skip(&mut self, n: usize) {
        self.advance(n);
    }
}

/// The framing algorithm, shared by [`ContentLengthDecoder`] and the
/// `tokio-util` codec.
///
/// It consumes its source completely before asking for more: what belongs
/// to a frame that is not complete yet moves into the parser (a header
/// block into `header`, a body into `body`, an oversized body's head into
/// the state), so the source never needs to be kept contiguous by the
/// caller.
#[derive(Debug)]
pub(crate) struct Parser {
    state: State,
    /// The start of a header block that began in an earlier chunk; never
    /// longer than [`MAX_HEADER_LEN`], allocated only while it holds bytes.
    header: BytesMut,
    /// The start of a body that began in an earlier chunk; its capacity
    /// never exceeds the body's length (see `reserve_body`).
    body: BytesMut,
    max_message_size: usize,
    pub(crate) stats: DecoderStats,
}

#[derive(Debug)]
enum State {
    /// Reading a header block (its start, if any, is in `header`).
    Header,
    /// Collecting a body of `len` bytes, within the limit (its start, if
    /// any, is in `body`).
    Body { len: usize },
    /// Dropping a body over the limit, reading it for its JSON-RPC id.
    Oversized {
        len: u64,
        remaining: u64,
        head: BytesMut,
        /// Boxed: it is a few hundred bytes, the other states a few words.
        id: Box<IdScanner>,
    },
    /// Dropping a header block over [`MAX_HEADER_LEN`] through its
    /// `\r\n\r\n`; `tail` holds its last bytes (up to three), so a
    /// terminator split between chunks is still found.
    SkipHeader { tail: [u8; 3], tail_len: u8 },
}

impl Parser {
    pub(crate) fn new(max_message_size: usize) -> Self {
        Self {
            state: State::Header,
            header: BytesMut::new(),
            body: BytesMut::new(),
            max_message_size,
            stats: DecoderStats::default(),
        }
    }

    /// Bytes held outside the source: see the memory bound on
    /// [`ContentLengthDecoder`].
    pub(crate) fn held(&self) -> usize {
        let head = match &self.state {
            State::Oversized { head, .. } => head.capacity(),
            _ => 0,
        };
        self.header.capacity() + self.body.capacity() + head
    }

    /// The next frame. Returns `None` only once `src` is empty: everything
    /// it held is framed or kept in the parser. At `eof`, a frame cut short
    /// becomes a notice and the parser starts over.
    pub(crate) fn next_frame<S: Source>(&mut self, src: &mut S, eof: bool) -> Option<Frame> {
        loop {
            if src.is_empty() {
                return if eof { self.finish() } else { None };
            }
            let frame = match self.state {
                State::Header => self.read_header(src),
                State::Body { len } => self.read_body(src, len),
                State::Oversized { .. } => self.drop_oversized(src),
                State::SkipHeader { .. } => {
                    self.skip_header(src);
                    None
                }
            };
            if frame.is_some() {
                return frame;
            }
        }
    }

    /// Looks for the end of the current header block in `src`.
    fn read_header<S: Source>(&mut self, src: &mut S) -> Option<Frame> {
        let held = self.header.len();
        // Nested, not a let-chain: those need Rust 1.88, the crates 1.85.
        if held == 0 {
            if let Some((len, end)) = canonical_header(src) {
                src.skip(end);
                return self.after_header(Ok(len), &[]);
            }
        }
        // Only a terminator that ends within the bound counts here.
        let window = &src[..src.len().min(MAX_HEADER_LEN - held)];
        let Some(end) = self.terminator_end(window) else {
            if held + src.len() < MAX_HEADER_LEN {
                if self.header.capacity() == 0 {
                    self.header = BytesMut::with_capacity(MAX_HEADER_LEN);
                }
                self.header.extend_from_slice(src);
                src.skip(src.len());
                return None;
            }
            return Some(self.header_too_long(src));
        };
        if held == 0 {
            // The common case: the block lies in this chunk; read it there.
            let parsed = parse_header(&src[..end - TERMINATOR.len()]);
            let frame = self.after_header(parsed, &src[..end]);
            src.skip(end);
            frame
        } else {
            self.header.extend_from_slice(&src[..end]);
            src.skip(end);
            // Taken, not cleared: the block's memory is freed, so an idle
            // decoder holds nothing.
            let block = std::mem::take(&mut self.header);
            self.after_header(
                parse_header(&block[..block.len() - TERMINATOR.len()]),
                &block,
            )
        }
    }

    /// Acts on a parsed header block: a notice for a bad one, else the
    /// state that reads (or drops) its body.
    fn after_header(
        &mut self,
        parsed: Result<u64, MalformedReason>,
        block: &[u8],
    ) -> Option<Frame> {
        match parsed {
            Err(reason) => Some(self.malformed(reason, block)),
            Ok(0) => {
                self.stats.blank_lines += 1;
                None
            }
            Ok(len) => {
                self.state = match usize::try_from(len) {
                    Ok(len) if len <= self.max_message_size => State::Body { len },
                    _ => State::Oversized {
                        len,
                        remaining: len,
                        head: BytesMut::with_capacity(
                            OVERSIZED_HEAD_LEN.min(usize::try_from(len).unwrap_or(usize::MAX)),
                        ),
                        id: Box::new(IdScanner::new()),
                    },
                };
                None
            }
        }
    }

    /// The end (exclusive, in `data`) of the first `\r\n\r\n` that ends in
    /// `data`, counting the header bytes already held before it.
    fn terminator_end(&self, data: &[u8]) -> Option<usize> {
        let held = &self.header[self.header.len().saturating_sub(3)..];
        joint_terminator_end(held, data).or_else(|| terminator_end(data))
    }

    /// The header block has reached [`MAX_HEADER_LEN`] without an end: one
    /// notice, then drop it through its `\r\n\r\n`.
    fn header_too_long<S: Source>(&mut self, src: &mut S) -> Frame {
        let mut head = BytesMut::with_capacity(OVERSIZED_HEAD_LEN);
        head.extend_from_slice(&self.header[..self.header.len().min(OVERSIZED_HEAD_LEN)]);
        let room = OVERSIZED_HEAD_LEN - head.len();
        head.extend_from_slice(&src[..src.len().min(room)]);
        // The first terminator anywhere, now that it is known to end past
        // the bound.
        match self.terminator_end(src) {
            Some(end) => {
                src.skip(end);
                self.state = State::Header;
            }
            None => {
                let mut tail = [0u8; 3];
                let tail_len = last_three(&self.header, src, &mut tail);
                src.skip(src.len());
                self.state = State::SkipHeader { tail, tail_len };
            }
        }
        self.header = BytesMut::new();
        self.stats.malformed += 1;
        Frame::Malformed(Malformed::new(
            MalformedReason::InvalidHeader,
            head.freeze(),
        ))
    }

    /// Drops the rest of a header block over the bound.
    fn skip_header<S: Source>(&mut self, src: &mut S) {
        let State::SkipHeader { tail, tail_len } = &mut self.state else {
            return;
        };
        let before = &tail[..usize::from(*tail_len)];
        match joint_terminator_end(before, src).or_else(|| terminator_end(src)) {
            Some(end) => {
                src.skip(end);
                self.state = State::Header;
            }
            None => {
                let mut next = [0u8; 3];
                *tail_len = last_three(before, src, &mut next);
                *tail = next;
                src.skip(src.len());
            }
        }
    }

    /// Collects a body of `len` bytes.
    fn read_body<S: Source>(&mut self, src: &mut S, len: usize) -> Option<Frame> {
        let message = if self.body.is_empty() && src.len() >= len {
            // The common case: the whole body is in this chunk.
            src.take(len)
        } else {
            let n = (len - self.body.len()).min(src.len());
            self.reserve_body(len, n);
            self.body.extend_from_slice(&src[..n]);
            src.skip(n);
            if self.body.len() < len {
                return None;
            }
            std::mem::take(&mut self.body).freeze()
        };
        self.state = State::Header;
        self.stats.messages += 1;
        self.stats.bytes += len as u64;
        Some(Frame::Message(Message::new(message)))
    }

    /// Makes room in `body` for `incoming` more bytes of a body of `len`,
    /// never past `len`: the memory bound counts capacity, and `BytesMut`'s
    /// own growth could double it.
    fn reserve_body(&mut self, len: usize, incoming: usize) {
        let needed = self.body.len() + incoming;
        if needed <= self.body.capacity() {
            return;
        }
        // Up to the default limit, the whole body at once: one allocation,
        // and pages the OS commits only as bytes arrive. Past it (a limit
        // raised that far), grow by doubling, so that a header claiming
        // more than memory holds costs nothing until the bytes come.
        let capacity = if len <= DEFAULT_MAX_MESSAGE_SIZE {
            len
        } else {
            needed
                .max(self.body.capacity().saturating_mul(2))
                .max(DEFAULT_MAX_MESSAGE_SIZE)
                .min(len)
        };
        let mut grown = BytesMut::with_capacity(capacity);
        grown.extend_from_slice(&self.body);
        self.body = grown;
    }

    /// Drops the next bytes of an oversized body, keeping its head.
    fn drop_oversized<S: Source>(&mut self, src: &mut S) -> Option<Frame> {
        let State::Oversized {
            len,
            remaining,
            head,
            id,
        } = &mut self.state
        else {
            return None;
        };
        let n = usize::try_from(*remaining).map_or(src.len(), |r| r.min(src.len()));
        let room = OVERSIZED_HEAD_LEN.saturating_sub(head.len()).min(n);
        head.extend_from_slice(&src[..room]);
        id.feed(&src[..n]);
        src.skip(n);
        *remaining -= n as u64;
        if *remaining > 0 {
            return None;
        }
        let notice = Oversized::new(*len, std::mem::take(head).freeze()).with_json_rpc_id(id.id());
        self.state = State::Header;
        self.stats.oversized += 1;
        Some(Frame::Oversized(notice))
    }

    /// The stream ended with `src` drained: a frame in progress is cut
    /// short, and the parser starts over.
    fn finish(&mut self) -> Option<Frame> {
        let state = std::mem::replace(&mut self.state, State::Header);
        let (expected, got, head) = match state {
            State::Header if self.header.is_empty() => return None,
            State::Header => {
                let header = std::mem::take(&mut self.header);
                (0, 0, head_of(&header))
            }
            State::Body { len } => {
                let body = std::mem::take(&mut self.body);
                (len as u64, body.len() as u64, head_of(&body))
            }
            State::Oversized {
                len,
                remaining,
                head,
                ..
            } => (len, len - remaining, head.freeze()),
            // Its notice was given when it passed the bound.
            State::SkipHeader { .. } => return None,
        };
        self.stats.malformed += 1;
        Some(Frame::Malformed(Malformed::new(
            MalformedReason::Truncated { expected, got },
            head,
        )))
    }

    fn malformed(&mut self, reason: MalformedReason, dropped: &[u8]) -> Frame {
        self.stats.malformed += 1;
        Frame::Malformed(Malformed::new(reason, head_of(dropped)))
    }
}

/// The first [`OVERSIZED_HEAD_LEN`] bytes of `dropped`, copied.
fn head_of(dropped: &[u8]) -> Bytes {
    Bytes::copy_from_slice(&dropped[..dropped.len().min(OVERSIZED_HEAD_LEN)])
}

/// The end (exclusive, in `data`) of a `\r\n\r\n` that begins in `before`
/// (the bytes just before `data`) and ends in `data`.
fn joint_terminator_end(before: &[u8], data: &[u8]) -> Option<usize> {
    let before = &before[before.len().saturating_sub(3)..];
    if before.is_empty() {
        return None;
    }
    let mut joint = [0u8; 6];
    let from_data = data.len().min(3);
    joint[..before.len()].copy_from_slice(before);
    joint[before.len()..before.len() + from_data].copy_from_slice(&data[..from_data]);
    // A match here starts in `before`: four bytes never fit in the three
    // taken from `data`. So it is the first terminator ending in `data`.
    joint[..before.len() + from_data]
        .windows(TERMINATOR.len())
        .position(|window| window == TERMINATOR)
        .map(|start| start + TERMINATOR.len() - before.len())
}

/// The end (exclusive) of the first `\r\n\r\n` in `data`.
///
/// Header blocks are a few dozen bytes: finding each `\n` with `memchr` and
/// looking back costs less than setting up a substring search per block.
fn terminator_end(data: &[u8]) -> Option<usize> {
    memchr::memchr_iter(b'\n', data)
        .find(|&i| i >= 3 && data[i - 3..=i] == *TERMINATOR)
        .map(|i| i + 1)
}

/// Splits `rest` at its first `\r\n`: the line before it and what follows.
/// A `\n` without `\r` belongs to the line.
fn next_line(rest: &[u8]) -> (&[u8], &[u8]) {
    let mut from = 0;
    while let Some(i) = memchr::memchr(b'\n', &rest[from..]).map(|i| i + from) {
        if i > 0 && rest[i - 1] == b'\r' {
            return (&rest[..i - 1], &rest[i + 1..]);
        }
        from = i + 1;
    }
    (rest, &[])
}

/// Writes the last (up to) three bytes of `a` followed by `b` to `out`,
/// returning how many.
fn last_three(a: &[u8], b: &[u8], out: &mut [u8; 3]) -> u8 {
    let from_b = b.len().min(3);
    let from_a = (3 - from_b).min(a.len());
    out[..from_a].copy_from_slice(&a[a.len() - from_a..]);
    out[from_a..from_a + from_b].copy_from_slice(&b[b.len() - from_b..]);
    (from_a + from_b) as u8
}

/// Reads the header block nearly every LSP and DAP peer sends,
/// `Content-Length: N\r\n\r\n` and nothing else, without scanning for its
/// end: the body length and the block's length. `None` for any other
/// block (more headers, white space, a value that is not a byte count, a
/// block not complete yet), which the general path then reads with the
/// same rules.
fn canonical_header(data: &[u8]) -> Option<(u64, usize)> {
    const PREFIX: &[u8] = b"content-length: ";
    let rest = data.get(PREFIX.len()..)?;
    if !data[..PREFIX.len()].eq_ignore_ascii_case(PREFIX) {
        return None;
    }
    // `u64::MAX` has 20 digits; a longer run is left to the general path.
    let digits = rest
        .iter()
        .take(20)
        .take_while(|b| b.is_ascii_digit())
        .count();
    if rest.get(digits..digits + TERMINATOR.len())? != TERMINATOR {
        return None;
    }
    let len = parse_decimal(&rest[..digits])?;
    Some((len, PREFIX.len() + digits + TERMINATOR.len()))
}

/// Reads a header block (its final `\r\n\r\n` removed): the body length, or
/// why the block cannot be used. The first line with a problem decides it.
fn parse_header(block: &[u8]) -> Result<u64, MalformedReason> {
    let mut length = None;
    let mut rest = block;
    while !rest.is_empty() {
        let (line, next) = next_line(rest);
        rest = next;
        if line.is_empty() {
            continue;
        }
        let Some(colon) = memchr::memchr(b':', line) else {
            return Err(MalformedReason::InvalidHeader);
        };
        if !trim_ows(&line[..colon]).eq_ignore_ascii_case(CONTENT_LENGTH) {
            continue;
        }
        let value =
            parse_decimal(trim_ows(&line[colon + 1..])).ok_or(MalformedReason::InvalidLength)?;
        if length.is_some_and(|seen| seen != value) {
            return Err(MalformedReason::InvalidLength);
        }
        length = Some(value);
    }
    length.ok_or(MalformedReason::MissingLength)
}

/// `bytes` without the spaces and tabs around it (HTTP's optional white
/// space).
fn trim_ows(bytes: &[u8]) -> &[u8] {
    let is_ows = |b: &u8| *b == b' ' || *b == b'\t';
    let start = bytes.iter().position(|b| !is_ows(b)).unwrap_or(bytes.len());
    let end = bytes
        .iter()
        .rposition(|b| !is_ows(b))
        .map_or(start, |i| i + 1);
    &bytes[start..end]
}

/// A non-empty run of ASCII digits as a `u64`; `None` for anything else,
/// including a sign or a value over `u64::MAX`.
fn parse_decimal(digits: &[u8]) -> Option<u64> {
    if digits.is_empty() {
        return None;
    }
    digits.iter().try_fold(0u64, |n, &b| {
        if !b.is_ascii_digit() {
            return None;
        }
        n.checked_mul(10)?.checked_add(u64::from(b - b'0'))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn joint_terminator_is_found_across_the_boundary() {
        assert_eq!(joint_terminator_end(b"x\r\n", b"\r\nbody"), Some(2));
        assert_eq!(joint_terminator_end(b"\r\n\r", b"\nbody"), Some(1));
        assert_eq!(joint_terminator_end(b"\r", b"\n\r\n"), Some(3));
        assert_eq!(joint_terminator_end(b"\r\n", b"\r"), None);
        assert_eq!(joint_terminator_end(b"", b"\r\n\r\n"), None);
        assert_eq!(joint_terminator_end(b"\r\n\r", b"x\r\n\r\n"), None);
    }

    #[test]
    fn last_three_joins_both_sides() {
        let mut out = [0; 3];
        assert_eq!(last_three(b"abcd", b"e", &mut out), 3);
        assert_eq!(&out, b"cde");
        assert_eq!(last_three(b"a", b"", &mut out), 1);
        assert_eq!(&out[..1], b"a");
        assert_eq!(last_three(b"", b"wxyz", &mut out), 3);
        assert_eq!(&out, b"xyz");
    }

    #[test]
    fn canonical_header_is_only_the_exact_form() {
        assert_eq!(
            canonical_header(b"Content-Length: 12\r\n\r\n{"),
            Some((12, 22))
        );
        assert_eq!(
            canonical_header(b"content-LENGTH: 0\r\n\r\n"),
            Some((0, 21))
        );
        for other in [
            &b"Content-Length: 12\r\n\r"[..],
            b"Content-Length: 12 \r\n\r\n",
            b"Content-Length:12\r\n\r\n",
            b"Content-Length: \r\n\r\n",
            b"Content-Length: 12\r\nContent-Type: x\r\n\r\n",
            b"Content-Length: 123456789012345678901\r\n\r\n",
            b"Content-Length: 99999999999999999999\r\n\r\n",
        ] {
            assert_eq!(canonical_header(other), None, "{other:?}");
        }
    }

    #[test]
    fn header_values_parse_strictly() {
        assert_eq!(parse_header(b"Content-Length: 12"), Ok(12));
        assert_eq!(parse_header(b"\r\nCONTENT-LENGTH:\t007 "), Ok(7));
        assert_eq!(
            parse_header(b"Content-Length: 18446744073709551615"),
            Ok(u64::MAX)
        );
        for bad in [
            &b"Content-Length: -1"[..],
            b"Content-Length: +1",
            b"Content-Length: 1 2",
            b"Content-Length: ",
            b"Content-Length: 18446744073709551616",
            b"Content-Length: 1\r\ncontent-length: 2",
        ] {
            assert_eq!(
                parse_header(bad),
                Err(MalformedReason::InvalidLength),
                "{bad:?}"
            );
        }
        assert_eq!(
            parse_header(b"Content-Length: 1\r\ncontent-length: 1"),
            Ok(1)
        );
        assert_eq!(
            parse_header(b"Content-Type: x"),
            Err(MalformedReason::MissingLength)
        );
        assert_eq!(
            parse_header(b"no colon\r\nContent-Length: x"),
            Err(MalformedReason::InvalidHeader)
        );
        assert_eq!(
            parse_header(b"Content-Length: x\r\nno colon"),
            Err(MalformedReason::InvalidLength)
        );
    }

    #[test]
    fn overhead_counts_every_framing_byte() {
        for len in [1, 9, 10, 99, 100, 12345, usize::MAX] {
            assert_eq!(
                ContentLength.overhead(len),
                format!("Content-Length: {len}\r\n\r\n").len()
            );
        }
    }
}
