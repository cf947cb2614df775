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
use crate::frame::{
    DecoderStats, Frame, Malformed, MalformedReason, Message, OVERSIZED_HEAD_LEN, Oversized,
};
use crate::framing::{EncodeErrorKind, FrameDecoder, Framing, adopt_input, append_input};
use crate::jsonrpc::IdScanner;

mod header;

use header::{Block, Found, Resync, Scan};

/// The longest header block accepted, its final empty line included: 8 KiB.
///
/// LSP and DAP send one or two short headers (under 100 bytes); the bound
/// only exists so that a peer that never ends its header block is told
/// about. A longer block breaks at its byte past the bound, as
/// [`MalformedReason::InvalidHeader`]; none of its bytes are held.
pub const MAX_HEADER_LEN: usize = 8 * 1024;

/// What the encoder writes after the length, and what ends the usual
/// header block: the `\r\n` of its one line and an empty line.
const TERMINATOR: &[u8; 4] = b"\r\n\r\n";

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
/// use childwire_core::EncodeErrorKind;
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
/// - A header block is a run of `Name: value` lines ended by an empty line.
///   A line ends with `\r\n` or with `\n` alone: LSP and DAP say `\r\n`,
///   but a sloppy server that writes `\n` is read the same way, frame by
///   frame, and a well-formed block ends at the same byte either way.
/// - A name is made of token characters (letters, digits, `-`, `_` and the
///   like); spaces and tabs may surround it and the value. Names are
///   compared ignoring ASCII case, and headers other than `Content-Length`
///   (such as `Content-Type`) are accepted and ignored.
/// - Blank lines between frames are skipped.
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
///   notice, named after the first byte that shows it:
///   [`InvalidHeader`](MalformedReason::InvalidHeader) for a line that is
///   not `Name: value`, or a block still going on at its
///   [`MAX_HEADER_LEN`]th byte; [`InvalidLength`](MalformedReason::InvalidLength)
///   for a value that is not a byte count (`-1`, `12abc`, one over
///   `u64::MAX`) or one that disagrees with an earlier one;
///   [`MissingLength`](MalformedReason::MissingLength) for a block that
///   ends without a `Content-Length`.
/// - When the stream ends inside a header block or a body, one
///   [`Truncated`](MalformedReason::Truncated) notice says how much of the
///   body had arrived (`expected: 0, got: 0` for a header block).
///
/// A notice's `head` is the first bytes (up to [`OVERSIZED_HEAD_LEN`]) of
/// what it dropped: the body for [`Frame::Oversized`] and a truncated body;
/// otherwise the broken block and what was dropped after it.
///
/// # Resynchronisation: what a lying or broken frame costs
///
/// A peer can lie about a length, cut a frame short, or write something
/// else between frames. The decoder then loses that frame and the bytes up
/// to the next header, never more, and says so in one notice:
///
/// - From the byte that breaks a block (or the end of a block without a
///   length), everything up to the next `Content-Length` name is dropped,
///   and a header block is read from there. The name is looked for
///   wherever it begins, not only after a line break: a body does not end
///   with one, so the leftover of a frame that claimed too few bytes runs
///   straight into the next header. For the same reason, a
///   `Content-Length` inside a longer name or another header's value
///   (`abcContent-Length: 5`, `"}Content-Length: 5`) is taken as the next
///   header, the bytes before it as the leftover.
/// - A header claiming fewer bytes than its body has: its message is the
///   bytes claimed (nothing tells them from a message), the rest of its
///   body is one notice, and the next frame arrives.
/// - A header claiming more: its message takes the start of what follows,
///   and the frames it ran into are lost up to the next header after it.
/// - The body of a broken header block is dropped with the block: it
///   cannot be measured. The notice counts the block and the body as one.
/// - A block over [`MAX_HEADER_LEN`] breaks at its byte past the bound,
///   holding none of its bytes but a notice's head; a `Content-Length`
///   line after that point is read as the next header.
///
/// A JSON body never holds a raw line break, so the search cannot read a
/// header block inside one: at worst the words `Content-Length` in a
/// string cost one more notice. A body that holds a whole header block
/// (`Content-Length: 5\r\n\r\n`) is a frame to any decoder.
///
/// The rules are the same however the input is chunked.
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
/// - the first [`OVERSIZED_HEAD_LEN`] bytes of a header block that
///   straddles chunks, of the bytes dropped after a broken frame, or of an
///   oversized body.
///
/// So it never holds more than the larger of `max_message_size` and
/// [`OVERSIZED_HEAD_LEN`] bytes plus one chunk, whatever the peer sends.
/// [`buffered`](Self::buffered) reports it.
///
/// # Cost
///
/// The usual one-line block `Content-Length: N\r\n\r\n` is read without a
/// scan. Any other block is read once, a byte at a time (the values of
/// headers other than `Content-Length` skipped with `memchr`), after the
/// few bytes the usual form was checked against. The bytes dropped after a
/// broken frame are read once, with `memchr` for the name's first letter.
/// Body bytes are counted, never scanned. A body that lies wholly inside a
/// chunk given to [`handle_bytes`](Self::handle_bytes) (or inside the copy
/// [`handle_data`](Self::handle_data) makes) is split off as [`Bytes`]
/// without copying.
///
/// # Example
///
/// ```
/// use childwire_core::ContentLengthDecoder;
/// use childwire_core::Frame;
///
/// let mut decoder = ContentLengthDecoder::new(16);
/// decoder.handle_data(b"Content-Length: 8\r\nContent-Type: x\r\n\r\n{\"id\":1}");
/// decoder.handle_data(b"content-length:30\r\n\r\n{\"id\":2,\"note\":\"far too long\"}");
/// decoder.handle_data(b"Content-Type: x\r\n\r\nContent-Length: 2\r\n\r\nok");
/// // A length shorter than its body, then headers ended by `\n` alone.
/// decoder.handle_data(b"Content-Length: 2\r\n\r\n[1,2]Content-Length: 2\n\nlf");
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
///         "message [1",
///         "malformed: InvalidHeader",
///         "message lf",
///         "malformed: Truncated { expected: 10, got: 3 }",
///     ]
/// );
/// assert_eq!(decoder.stats().malformed, 3);
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

    fn dropping_head(&self) -> Option<&[u8]> {
        self.parser.dropping_head()
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
/// block's first bytes into the block, a body into `body`, an oversized
/// body's head or a dropped span's head into the state), so the source
/// never needs to be kept contiguous by the caller.
#[derive(Debug)]
pub(crate) struct Parser {
    state: State,
    /// The start of a body that began in an earlier chunk; its capacity
    /// never exceeds the body's length (see `reserve_body`).
    body: BytesMut,
    max_message_size: usize,
    pub(crate) stats: DecoderStats,
}

#[derive(Debug)]
enum State {
    /// Reading a header block.
    Header(Block),
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
    /// Dropping the bytes after a broken frame, up to the next
    /// `Content-Length` name.
    Resync(Resync),
}

impl Parser {
    pub(crate) fn new(max_message_size: usize) -> Self {
        Self {
            state: State::Header(Block::new()),
            body: BytesMut::new(),
            max_message_size,
            stats: DecoderStats::default(),
        }
    }

    /// The bytes dropped after a broken header block, while its notice
    /// is not given yet.
    pub(crate) fn dropping_head(&self) -> Option<&[u8]> {
        match &self.state {
            State::Resync(resync) => resync.pending_head(),
            _ => None,
        }
    }

    /// Bytes held outside the source: see the memory bound on
    /// [`ContentLengthDecoder`].
    pub(crate) fn held(&self) -> usize {
        let state = match &self.state {
            State::Header(block) => block.held.capacity(),
            State::Oversized { head, .. } => head.capacity(),
            State::Resync(resync) => resync.held(),
            State::Body { .. } => 0,
        };
        state + self.body.capacity()
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
                State::Header(_) => self.read_header(src),
                State::Body { len } => self.read_body(src, len),
                State::Oversized { .. } => self.drop_oversized(src),
                State::Resync(_) => self.resync(src),
            };
            if frame.is_some() {
                return frame;
            }
        }
    }

    /// Reads the current header block on in `src`.
    fn read_header<S: Source>(&mut self, src: &mut S) -> Option<Frame> {
        let State::Header(block) = &mut self.state else {
            return None;
        };
        // Nested, not a let-chain: those need Rust 1.88, the crates 1.85.
        if block.is_fresh() {
            if let Some((len, end)) = canonical_header(src) {
                // The usual frame: the usual header and a body within the
                // limit, wholly in this chunk. Delivered without leaving
                // the fresh block's state: building the body state and a
                // new block for each message cost some 40 instructions of
                // a 64 B message's 440 (`cargo xtask bench --check`).
                let body = usize::try_from(len)
                    .ok()
                    .filter(|&n| n != 0 && n <= self.max_message_size && src.len() - end >= n);
                if let Some(len) = body {
                    src.skip(end);
                    return Some(self.deliver(src.take(len)));
                }
                src.skip(end);
                return self.after_header(len);
            }
        }
        let (start, scan) = block.scan(src);
        match scan {
            Scan::More => {
                block.hold(&src[start..]);
                src.skip(src.len());
                None
            }
            Scan::Done { end, len } => {
                src.skip(end);
                self.after_header(len)
            }
            Scan::Broken {
                at,
                reason,
                span,
                next_header,
            } => {
                // The dropped bytes begin with the block's: those held from
                // earlier chunks, then this chunk's.
                let want = span.min(OVERSIZED_HEAD_LEN);
                let mut head = BytesMut::with_capacity(OVERSIZED_HEAD_LEN);
                head.extend_from_slice(&block.held[..block.held.len().min(want)]);
                let more = want - head.len();
                head.extend_from_slice(&src[start..start + more]);
                if next_header {
                    // The bytes through `at` complete the next header's
                    // name: the span ends before it.
                    let name = *block.name_match();
                    src.skip(at + 1);
                    self.state = State::Header(Block::starting_with(&name));
                    self.stats.malformed += 1;
                    return Some(Frame::Malformed(Malformed::new(reason, head.freeze())));
                }
                src.skip(at);
                self.state = State::Resync(Resync::new(reason, head));
                None
            }
        }
    }

    /// Drops bytes up to the next `Content-Length` name.
    fn resync<S: Source>(&mut self, src: &mut S) -> Option<Frame> {
        let State::Resync(resync) = &mut self.state else {
            return None;
        };
        match resync.scan(src) {
            Found::Nothing => {
                src.skip(src.len());
                None
            }
            Found::Notice { read } => {
                src.skip(read);
                let notice = Malformed::new(resync.reason, resync.take_head());
                self.stats.malformed += 1;
                Some(Frame::Malformed(notice))
            }
            Found::Header { read, name } => {
                src.skip(read);
                let notice = resync
                    .is_pending()
                    .then(|| Malformed::new(resync.reason, resync.take_head()));
                self.state = State::Header(Block::starting_with(&name));
                let notice = notice?;
                self.stats.malformed += 1;
                Some(Frame::Malformed(notice))
            }
        }
    }

    /// A usable header block announced a body of `len` bytes: the state
    /// that reads (or drops) it.
    fn after_header(&mut self, len: u64) -> Option<Frame> {
        self.state = match usize::try_from(len) {
            Ok(0) => {
                self.stats.blank_lines += 1;
                State::Header(Block::new())
            }
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
        self.state = State::Header(Block::new());
        Some(self.deliver(message))
    }

    /// A whole body, counted and handed out.
    #[inline]
    fn deliver(&mut self, body: Bytes) -> Frame {
        self.stats.messages += 1;
        self.stats.bytes += body.len() as u64;
        Frame::Message(Message::new(body))
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
        self.state = State::Header(Block::new());
        self.stats.oversized += 1;
        Some(Frame::Oversized(notice))
    }

    /// The stream ended with `src` drained: a frame in progress is cut
    /// short, and the parser starts over.
    fn finish(&mut self) -> Option<Frame> {
        let state = std::mem::replace(&mut self.state, State::Header(Block::new()));
        let (reason, head) = match state {
            State::Header(block) if block.len == 0 => return None,
            State::Header(block) => (
                MalformedReason::Truncated {
                    expected: 0,
                    got: 0,
                },
                block.held.freeze(),
            ),
            State::Body { len } => {
                let body = std::mem::take(&mut self.body);
                let truncated = MalformedReason::Truncated {
                    expected: len as u64,
                    got: body.len() as u64,
                };
                (truncated, head_of(&body))
            }
            State::Oversized {
                len,
                remaining,
                head,
                ..
            } => (
                MalformedReason::Truncated {
                    expected: len,
                    got: len - remaining,
                },
                head.freeze(),
            ),
            // Its notice was given when its head filled.
            State::Resync(resync) if !resync.is_pending() => return None,
            State::Resync(mut resync) => (resync.reason, resync.take_head_at_eof()),
        };
        self.stats.malformed += 1;
        Some(Frame::Malformed(Malformed::new(reason, head)))
    }
}

/// The first [`OVERSIZED_HEAD_LEN`] bytes of `dropped`, copied.
fn head_of(dropped: &[u8]) -> Bytes {
    Bytes::copy_from_slice(&dropped[..dropped.len().min(OVERSIZED_HEAD_LEN)])
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
    fn overhead_counts_every_framing_byte() {
        for len in [1, 9, 10, 99, 100, 12345, usize::MAX] {
            assert_eq!(
                ContentLength.overhead(len),
                format!("Content-Length: {len}\r\n\r\n").len()
            );
        }
    }
}
