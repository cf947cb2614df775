//! Inbound framing: bytes from the child's stdout in, messages out.
//!
//! [`LineDecoder`] is a pure state machine. It works on any byte stream (a
//! pipe, a socket, an in-memory buffer), so it is usable on its own by
//! transports other than childwire's.

use std::ops::ControlFlow;

use bytes::{Buf, Bytes, BytesMut};

use crate::frame::{DecoderStats, Frame, Message, OVERSIZED_HEAD_LEN, Oversized};
use crate::framing::{FrameDecoder, adopt_input, append_input};
use crate::jsonrpc::IdScanner;

/// The default limit on one inbound or outbound message: 16 MiB.
pub const DEFAULT_MAX_MESSAGE_SIZE: usize = 16 * 1024 * 1024;

/// The initial buffer capacity: one pipe read's worth, so that small lines
/// never cause a reallocation.
const INITIAL_CAPACITY: usize = 64 * 1024;

/// Splits a byte stream into newline-delimited messages.
///
/// # Inputs and outputs
///
/// - [`handle_data`](Self::handle_data): bytes as they arrived, in chunks of
///   any size.
/// - [`handle_eof`](Self::handle_eof): the stream ended.
/// - [`poll_frame`](Self::poll_frame): the next [`Frame`], or `None` when more
///   input is needed.
///
/// Drain `poll_frame` until it returns `None` after every `handle_*` call.
/// The memory bound below holds for callers who do.
///
/// # What a frame is
///
/// - A message is the bytes before a `\n`; one `\r` before the `\n` is
///   removed. Invalid UTF-8 is carried unchanged.
/// - An empty line is skipped and counted in [`DecoderStats::blank_lines`],
///   never delivered.
/// - A line whose message would be longer than `max_message_size` is never
///   held whole: once it is known to be too long, its bytes are scanned and
///   dropped until the next `\n`, and one [`Frame::Oversized`] notice takes
///   its place. Decoding then continues with the next line. While dropped,
///   the line is read as JSON for its top-level JSON-RPC id, which the
///   notice carries ([`Oversized::json_rpc_id`]).
/// - After [`handle_eof`](Self::handle_eof), a final line without `\n` is
///   delivered once, with [`Message::is_terminated`] returning `false`.
///
/// # Memory
///
/// The decoder holds at most `max_message_size + 1` bytes of an incomplete
/// line (the `+ 1` is a `\r` that may yet be followed by `\n`) plus the chunk
/// given to the latest `handle_data`, and [`OVERSIZED_HEAD_LEN`] bytes of an
/// oversized line's head. [`buffered`](Self::buffered) reports it. The id
/// search keeps a fixed state inside the decoder (an
/// [`IdScanner`], under 300 bytes) and allocates
/// nothing.
///
/// # Cost
///
/// Each byte is scanned for `\n` once (with `memchr`), however the input is
/// chunked. [`handle_data`](Self::handle_data) copies each byte at most
/// once, into the buffer its message is split off, when the decoder is
/// polled between chunks: a line spanning chunks is completed in a buffer
/// of its own from its first byte, and once a line is known to be over the
/// limit its further bytes are read where they are, not copied. Messages
/// are split off as [`Bytes`] without copying. The bytes of an oversized
/// line are also read once for its id: string contents are skipped with
/// `memchr`, the rest goes through a small state machine.
///
/// # Example
///
/// ```
/// use childwire_core::{Frame, LineDecoder};
///
/// let mut decoder = LineDecoder::new(16);
/// decoder.handle_data(b"{\"id\":1}\r\n\n{\"id\":2");
/// decoder.handle_data(b"}\nthis line is far too long\nok");
/// decoder.handle_eof();
///
/// let mut seen = Vec::new();
/// while let Some(frame) = decoder.poll_frame() {
///     seen.push(match frame {
///         Frame::Message(m) => format!("message {:?}", m.as_str().unwrap()),
///         Frame::Oversized(o) => format!("oversized, {} bytes", o.len),
///         other => format!("{other:?}"),
///     });
/// }
/// assert_eq!(
///     seen,
///     [
///         r#"message "{\"id\":1}""#,
///         r#"message "{\"id\":2}""#,
///         "oversized, 25 bytes",
///         r#"message "ok""#,
///     ]
/// );
/// assert_eq!(decoder.stats().blank_lines, 1);
/// ```
#[derive(Debug)]
pub struct LineDecoder {
    /// Input not yet framed. Lines that lie wholly inside it are sliced out
    /// of it without copying.
    input: Bytes,
    /// Where [`handle_data`](Self::handle_data) copies chunks to. Its memory
    /// is reused once the frames sliced from it are dropped.
    staging: BytesMut,
    /// The start of a line that began in an earlier chunk (or the line being
    /// discarded): the [`Framer`] completes it. Framed before `input`.
    carry: BytesMut,
    /// The unfinished line the latest chunk ended with, when that chunk also
    /// completed lines: it comes after `input`, and becomes the carry (by a
    /// swap, not a copy) once `carry` and `input` are framed.
    tail: BytesMut,
    /// The stream ended: the rest is a final, unterminated line.
    eof: bool,
    /// The length of the last line completed in `carry`: room for the next
    /// one is reserved at once, so a stream of long lines does not grow
    /// (and move) each one piece by piece when its frames are still held.
    carry_hint: usize,
    /// Bytes copied into `staging`, `carry` and `tail` so far.
    copied: u64,
    /// The notice for an oversized line whose end `handle_data` found: it
    /// comes before anything else.
    dropped: Option<Frame>,
    framer: Framer,
}

impl Default for LineDecoder {
    /// A decoder with the default limit, [`DEFAULT_MAX_MESSAGE_SIZE`].
    fn default() -> Self {
        Self::new(DEFAULT_MAX_MESSAGE_SIZE)
    }
}

impl LineDecoder {
    /// A decoder that delivers messages of up to `max_message_size` bytes and
    /// turns longer lines into [`Frame::Oversized`] notices.
    pub fn new(max_message_size: usize) -> Self {
        Self {
            input: Bytes::new(),
            staging: BytesMut::with_capacity(INITIAL_CAPACITY),
            carry: BytesMut::new(),
            tail: BytesMut::new(),
            eof: false,
            carry_hint: 0,
            copied: 0,
            dropped: None,
            framer: Framer::new(max_message_size),
        }
    }

    /// The largest message this decoder delivers.
    pub fn max_message_size(&self) -> usize {
        self.framer.max_message_size
    }

    /// Takes the next bytes of the stream, copying them once.
    ///
    /// Bytes given after [`handle_eof`](Self::handle_eof) start a new stream;
    /// poll the old one's final line first.
    pub fn handle_data(&mut self, mut data: &[u8]) {
        self.eof = false;
        let unpolled = !self.input.is_empty() || !self.tail.is_empty() || self.dropped.is_some();
        if self.framer.is_discarding() && !unpolled {
            // Dropping an oversized line: its bytes are read where they are,
            // never copied, up to its `\n`; what follows is taken as usual.
            let (used, notice) = self.framer.discard_from(data, false);
            data = &data[used..];
            self.dropped = notice;
            if data.is_empty() {
                return;
            }
        } else if self.framer.is_discarding() || unpolled {
            // A caller giving chunks without polling between: in order,
            // through `input`.
            self.fold_tail();
            self.copied += append_input(&mut self.input, &mut self.staging, data) as u64;
            return;
        }
        if !self.carry.is_empty() && self.carry.last() != Some(&b'\n') {
            // A line that began in an earlier chunk goes on: its bytes go
            // straight to it, up to its `\n`, not through `input` first:
            // copied once, however many chunks it spans.
            let newline = memchr::memchr(b'\n', data);
            let end = newline.map_or(data.len(), |i| i + 1);
            self.carry.extend_from_slice(&data[..end]);
            self.copied += end as u64;
            // Scanned: the framer looks no further than the `\n` found.
            self.framer.next_index = self.carry.len() - usize::from(newline.is_some());
            data = &data[end..];
            if data.is_empty() {
                return;
            }
        }
        // `data` starts a line. Its whole lines are framed from `input`; the
        // line it ends with, if unfinished, goes straight to the buffer it
        // will be completed in, so its start is copied once too.
        let lines_end = memchr::memrchr(b'\n', data).map_or(0, |i| i + 1);
        let (lines, tail) = data.split_at(lines_end);
        if !lines.is_empty() {
            self.copied += append_input(&mut self.input, &mut self.staging, lines) as u64;
        }
        if !tail.is_empty() {
            start_line(&mut self.tail, self.carry_hint, tail);
            self.copied += tail.len() as u64;
        }
    }

    /// Takes the next bytes of the stream without copying them: messages
    /// that lie wholly inside `data` are slices of it.
    pub fn handle_bytes(&mut self, data: Bytes) {
        self.fold_tail();
        self.copied += adopt_input(&mut self.input, &mut self.staging, data) as u64;
        self.eof = false;
    }

    /// Moves an unfinished line not yet made the carry to the end of
    /// `input`, where bytes given before polling again must follow it.
    fn fold_tail(&mut self) {
        if !self.tail.is_empty() {
            self.copied += append_input(&mut self.input, &mut self.staging, &self.tail) as u64;
            self.tail.clear();
        }
    }

    /// Takes the end of the stream: the next [`poll_frame`](Self::poll_frame)
    /// calls deliver what is left, including a final line without `\n`.
    pub fn handle_eof(&mut self) {
        self.eof = true;
    }

    /// Bytes the decoder holds now: the incomplete line, input not yet framed,
    /// and an oversized line's head. See the memory bound on the type.
    pub fn buffered(&self) -> usize {
        self.input.len() + self.carry.len() + self.tail.len() + self.framer.held()
    }

    /// Counters of what has been decoded so far.
    pub fn stats(&self) -> &DecoderStats {
        &self.framer.stats
    }

    /// Bytes copied into the decoder's own buffers so far: what
    /// [`handle_data`](Self::handle_data) was given, once, when it is
    /// polled between chunks, and more only when chunks are given without
    /// polling between. For tests of that rule. An oversized line's head,
    /// kept for its notice, is not counted.
    #[cfg(feature = "testing")]
    #[cfg_attr(docsrs, doc(cfg(feature = "testing")))]
    pub fn bytes_copied(&self) -> u64 {
        self.copied
    }

    /// The next message or notice, or `None` when more input is needed (or,
    /// after [`handle_eof`](Self::handle_eof), when the stream is exhausted).
    #[must_use = "frames are lost unless polled until `None`"]
    pub fn poll_frame(&mut self) -> Option<Frame> {
        if let Some(notice) = self.dropped.take() {
            return Some(notice);
        }
        loop {
            if self.carry.is_empty() && self.input.is_empty() && !self.tail.is_empty() {
                // Everything before the unfinished last line is framed: it
                // is the line being completed now. It holds no `\n`.
                std::mem::swap(&mut self.carry, &mut self.tail);
                self.framer.next_index = self.carry.len();
            }
            if self.framer.is_discarding() {
                // Dropping an oversized line: its bytes are read where they
                // are, up to its `\n`. (The carry is empty: dropping began
                // with its contents.)
                let (used, frame) = self.framer.discard_from(&self.input, self.eof);
                self.input.advance(used);
                if frame.is_some() || self.input.is_empty() {
                    return frame;
                }
                continue;
            }
            if !self.carry.is_empty() {
                // Complete the carried line with input up to its `\n`,
                // unless `handle_data` already did.
                if self.carry.last() != Some(&b'\n') {
                    let end =
                        memchr::memchr(b'\n', &self.input).map_or(self.input.len(), |i| i + 1);
                    self.carry.extend_from_slice(&self.input.split_to(end));
                    self.copied += end as u64;
                }
                let eof = self.eof && self.input.is_empty() && self.tail.is_empty();
                let carried = self.carry.len();
                if let Some(frame) = self.framer.next_frame(&mut self.carry, eof) {
                    // The carry held this line alone (and its `\n`).
                    self.carry_hint = carried;
                    return Some(frame);
                }
                // A blank line, or the carried line goes on: on to the
                // input, or to the unfinished line after it.
                if !self.input.is_empty() || (self.carry.is_empty() && !self.tail.is_empty()) {
                    continue;
                }
                return None;
            }
            let mut taken = None;
            self.frame_whole_lines(|frame| {
                taken = Some(frame);
                ControlFlow::Break(())
            });
            if taken.is_some() {
                return taken;
            }
            if self.input.is_empty() {
                if !self.tail.is_empty() {
                    // The input ended in blank lines: the unfinished line
                    // after it is next (made the carry above).
                    continue;
                }
            } else {
                // A line that goes on in the next chunk, in input given
                // whole (`handle_bytes`): carry it, and let the framer know
                // its bytes hold no `\n`.
                start_line(&mut self.carry, self.carry_hint, &self.input);
                self.copied += self.input.len() as u64;
                self.input = Bytes::new();
                self.framer.next_index = self.carry.len();
            }
            return self.framer.next_frame(&mut self.carry, self.eof);
        }
    }
}

impl LineDecoder {
    /// Hands every frame available now to `each`, in order: the same frames
    /// as calling [`poll_frame`](Self::poll_frame) until `None`.
    ///
    /// Faster for short lines: the lines lying whole in the input are framed
    /// in one tight loop, each frame handed on where it was made, instead
    /// of being returned through `poll_frame`'s every case. Its own queue
    /// ([`Channel`](crate::Channel)) takes frames this way.
    ///
    /// ```
    /// use childwire_core::LineDecoder;
    ///
    /// let mut decoder = LineDecoder::default();
    /// decoder.handle_data(b"{\"id\":1}\n{\"id\":2}\n{\"id\"");
    /// let mut frames = Vec::new();
    /// decoder.drain_frames(|frame| frames.push(frame));
    /// assert_eq!(frames.len(), 2);
    /// ```
    pub fn drain_frames(&mut self, mut each: impl FnMut(Frame)) {
        loop {
            if self.carry.is_empty() && !self.framer.is_discarding() && self.dropped.is_none() {
                self.frame_whole_lines(|frame| {
                    each(frame);
                    ControlFlow::Continue(())
                });
            }
            match self.poll_frame() {
                Some(frame) => each(frame),
                None => return,
            }
        }
    }

    /// Frames the lines lying whole in the input, in order, handing each
    /// frame to `each` until it breaks; blank lines are skipped. Only when
    /// nothing is carried, dropped or pending.
    ///
    /// The loop every short message goes through, so it is lean: the
    /// line's end (one `\r` off) is found on the bytes before its handle
    /// is made, the handle is made once, with one reference count update,
    /// and blank and oversized lines are left to a cold path. (`slice`
    /// rather than `split_to`: it is generic, so it is inlined here.)
    /// Frames are handed to a closure rather than returned: returned, each
    /// went through memory once more, and 100 B lines took half again as
    /// long.
    #[inline]
    fn frame_whole_lines(&mut self, mut each: impl FnMut(Frame) -> ControlFlow<()>) {
        while let Some(newline) = memchr::memchr(b'\n', &self.input) {
            let end = newline - usize::from(newline > 0 && self.input[newline - 1] == b'\r');
            let line = self.input.slice(..end);
            self.input.advance(newline + 1);
            if end == 0 || end > self.framer.max_message_size {
                if let Some(notice) = self.framer.frame_unusual(line) {
                    if each(notice).is_break() {
                        return;
                    }
                }
                continue;
            }
            self.framer.count_message(end);
            if each(Frame::Message(Message::new(line))).is_break() {
                return;
            }
        }
    }
}

/// Starts an unfinished line in `buf`, which is empty: at the beginning of
/// its memory (once the frames split off it are dropped), with room for a
/// line of `hint` bytes, so a long line grows into it instead of being
/// moved to make room.
fn start_line(buf: &mut BytesMut, hint: usize, bytes: &[u8]) {
    debug_assert!(buf.is_empty());
    // Asking for more than is left makes it take the memory back from its
    // start, if nothing else holds it.
    let _ = buf.try_reclaim(buf.capacity() + 1);
    buf.reserve(hint.max(bytes.len()));
    buf.extend_from_slice(bytes);
}

/// The framing algorithm over a caller-owned buffer, shared by
/// [`LineDecoder`] and the `tokio-util` codec.
///
/// While not discarding, `buf` starts at the first byte of the current line.
#[derive(Debug)]
pub(crate) struct Framer {
    /// How far `buf` has been scanned without finding `\n`, so each byte is
    /// scanned once.
    pub(crate) next_index: usize,
    /// Set while dropping the rest of an oversized line.
    discarding: Option<Discard>,
    max_message_size: usize,
    pub(crate) stats: DecoderStats,
}

/// What is known of an oversized line while it is being dropped.
#[derive(Debug)]
struct Discard {
    /// Bytes of the line seen so far (its `\n` excluded).
    len: u64,
    /// The line's first bytes, up to [`OVERSIZED_HEAD_LEN`], filled as they
    /// arrive so the notice is the same however the input was chunked.
    head: BytesMut,
    /// The last byte seen was `\r`: part of the terminator if `\n` follows.
    last_cr: bool,
    /// Follows the line as JSON for its top-level id. It sees that `\r`
    /// too, harmlessly: after a JSON value it is whitespace, and a line
    /// that is not complete JSON before it has no id either way.
    id: IdScanner,
}

impl Discard {
    /// Takes the next dropped bytes of the line.
    fn extend(&mut self, dropped: &[u8]) {
        let room = OVERSIZED_HEAD_LEN.saturating_sub(self.head.len());
        self.head
            .extend_from_slice(&dropped[..room.min(dropped.len())]);
        self.len += dropped.len() as u64;
        self.id.feed(dropped);
        if let Some(&last) = dropped.last() {
            self.last_cr = last == b'\r';
        }
    }

    /// The notice for the whole line, its terminator excluded.
    fn finish(mut self) -> Oversized {
        if self.last_cr {
            self.len -= 1;
            self.head.truncate(self.head.len().min(self.len as usize));
        }
        Oversized::new(self.len, self.head.freeze()).with_json_rpc_id(self.id.id())
    }
}

impl Framer {
    pub(crate) fn new(max_message_size: usize) -> Self {
        Self {
            next_index: 0,
            discarding: None,
            max_message_size,
            stats: DecoderStats::default(),
        }
    }

    /// Whether the rest of an oversized line is being dropped.
    pub(crate) fn is_discarding(&self) -> bool {
        self.discarding.is_some()
    }

    /// Bytes held outside the caller's buffer: an oversized line's head.
    pub(crate) fn held(&self) -> usize {
        self.discarding.as_ref().map_or(0, |d| d.head.capacity())
    }

    /// The next frame in `buf`, splitting it off; at `eof`, the rest of `buf`
    /// is a final line.
    pub(crate) fn next_frame(&mut self, buf: &mut BytesMut, eof: bool) -> Option<Frame> {
        loop {
            if self.discarding.is_some() {
                return self.next_discarded(buf, eof);
            }
            let scanned = self.next_index.min(buf.len());
            match memchr::memchr(b'\n', &buf[scanned..]) {
                Some(offset) => {
                    self.next_index = 0;
                    if let Some(frame) = self.take_line(buf, scanned + offset) {
                        return Some(frame);
                    }
                    // A blank line: skipped, go on to the next one.
                }
                None if self.line_is_too_long(buf) => self.start_discarding(buf),
                None if eof => return self.take_final_line(buf),
                None => {
                    self.next_index = buf.len();
                    return None;
                }
            }
        }
    }

    /// Splits off the line ending at `buf[newline]` and frames it; `None` for
    /// a blank line.
    fn take_line(&mut self, buf: &mut BytesMut, newline: usize) -> Option<Frame> {
        let mut line = buf.split_to(newline + 1).freeze();
        line.truncate(newline);
        self.frame_line(line, true)
    }

    /// Frames one line (its `\n` removed): strips one `\r`, skips it if
    /// blank, turns it into a notice if over the limit.
    ///
    /// Inlined, as it runs once per message; the rare over-limit case is
    /// kept out of line.
    #[inline]
    pub(crate) fn frame_line(&mut self, mut line: Bytes, terminated: bool) -> Option<Frame> {
        if line.last() == Some(&b'\r') {
            line.truncate(line.len() - 1);
        }
        if line.is_empty() || line.len() > self.max_message_size {
            return self.frame_unusual(line);
        }
        self.count_message(line.len());
        Some(Frame::Message(if terminated {
            Message::new(line)
        } else {
            Message::unterminated(line)
        }))
    }

    /// Counts a message of `len` bytes.
    #[inline]
    fn count_message(&mut self, len: usize) {
        self.stats.messages += 1;
        self.stats.bytes += len as u64;
    }

    /// Frames a line (its `\r` stripped) that is blank or over the limit:
    /// out of line, as neither is the usual case.
    #[cold]
    fn frame_unusual(&mut self, line: Bytes) -> Option<Frame> {
        if line.is_empty() {
            self.stats.blank_lines += 1;
            return None;
        }
        Some(self.oversized_line(line))
    }

    /// The notice for a line over the limit that arrived in one piece: the
    /// same as for a line dropped piecewise.
    #[cold]
    fn oversized_line(&mut self, mut line: Bytes) -> Frame {
        let len = line.len() as u64;
        let mut id = IdScanner::new();
        id.feed(&line);
        line.truncate(OVERSIZED_HEAD_LEN);
        let notice = Oversized::new(len, line).with_json_rpc_id(id.id());
        self.oversized(notice)
    }

    /// At EOF, the rest of the buffer is the final line.
    fn take_final_line(&mut self, buf: &mut BytesMut) -> Option<Frame> {
        self.next_index = 0;
        if buf.is_empty() {
            return None;
        }
        self.frame_line(buf.split().freeze(), false)
    }

    /// Whether `buf`, an incomplete line (no `\n` yet), is already known to
    /// exceed the limit. A last byte `\r` may still be followed by `\n` and
    /// then does not count.
    fn line_is_too_long(&self, buf: &[u8]) -> bool {
        let max = self.max_message_size.saturating_add(1);
        buf.len() > max || (buf.len() == max && buf.last() != Some(&b'\r'))
    }

    /// Drops the current line so far, keeping its head, and switches to
    /// dropping bytes until the next `\n`.
    fn start_discarding(&mut self, buf: &mut BytesMut) {
        let mut discard = Discard {
            len: 0,
            head: BytesMut::with_capacity(OVERSIZED_HEAD_LEN),
            last_cr: false,
            id: IdScanner::new(),
        };
        discard.extend(buf);
        self.discarding = Some(discard);
        buf.clear();
        self.next_index = 0;
    }

    fn next_discarded(&mut self, buf: &mut BytesMut, eof: bool) -> Option<Frame> {
        let (used, frame) = self.discard_from(buf, eof);
        buf.advance(used);
        frame
    }

    /// Drops the oversized line's bytes from `data`, up to its `\n`: how
    /// many bytes of `data` that used, and the notice once the line ended
    /// (at its `\n`, or at `eof` when `data` holds none). Reads `data` in
    /// place: dropped bytes are scanned, never copied.
    pub(crate) fn discard_from(&mut self, data: &[u8], eof: bool) -> (usize, Option<Frame>) {
        let Some(discard) = self.discarding.as_mut() else {
            return (0, None);
        };
        let newline = memchr::memchr(b'\n', data);
        let dropped = newline.unwrap_or(data.len());
        discard.extend(&data[..dropped]);
        let used = newline.map_or(dropped, |n| n + 1);
        if newline.is_none() && !eof {
            return (used, None);
        }
        let frame = self
            .discarding
            .take()
            .map(|discard| self.oversized(discard.finish()));
        (used, frame)
    }

    fn oversized(&mut self, notice: Oversized) -> Frame {
        self.stats.oversized += 1;
        Frame::Oversized(notice)
    }
}

impl FrameDecoder for LineDecoder {
    fn handle_data(&mut self, data: &[u8]) {
        LineDecoder::handle_data(self, data);
    }

    fn handle_bytes(&mut self, data: Bytes) {
        LineDecoder::handle_bytes(self, data);
    }

    fn handle_eof(&mut self) {
        LineDecoder::handle_eof(self);
    }

    fn poll_frame(&mut self) -> Option<Frame> {
        LineDecoder::poll_frame(self)
    }

    fn drain_frames<E: FnMut(Frame)>(&mut self, each: E) {
        LineDecoder::drain_frames(self, each);
    }

    fn buffered(&self) -> usize {
        LineDecoder::buffered(self)
    }

    fn stats(&self) -> &DecoderStats {
        LineDecoder::stats(self)
    }

    fn max_message_size(&self) -> usize {
        LineDecoder::max_message_size(self)
    }
}
