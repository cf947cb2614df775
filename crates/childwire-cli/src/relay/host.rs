//! The host's side of the relay: lines in from the relay's stdin, a long
//! one handed on in pieces as it comes, and bytes out to its stdout as
//! given.
//!
//! The relay needs a line whole only for its own decisions on it: the
//! log's record, `--restart`'s handshake and request tracking, the drop of
//! a line over `--max-message-size` or holding a `\r`. Held whole until
//! its end, a long line costs the relay itself, and a child that echoes it
//! as it reads (`cat`) makes the relay hold the echo too, which is read
//! whole: two lines at once. So, without `--log` and `--restart`, a line
//! longer than [`LONG`] goes to the child as it comes, and costs the relay
//! a few pieces, whatever its length.
//!
//! Such a line is still held to the limit and to the `\r` rule, but by
//! the time it is known to break one, part of it has reached the child. No
//! more of it does: the child's line is ended there (a `\n`), the rest of
//! the host's line is read and dropped, and at its end the relay does what
//! it does for a line dropped whole, the same notice on stderr and, for a
//! line over the limit, the same error for its id to the host, saying
//! what the child got. The child never gets a `\r` nor more than the
//! limit in one line, but it gets the start of the line, as a line of its
//! own (a JSON-RPC peer may answer that with a parse error, id `null`,
//! which reaches the host). Lines up to [`LONG`] are framed as before, by
//! [`LineDecoder`], and dropped whole.
//!
//! The decoder hands the pump a long line through the receiver's queue,
//! in order with the other lines, as messages that no line can be:
//! [`HostItem`] says what each message is.

use std::collections::VecDeque;

use bytes::{BufMut, Bytes, BytesMut};
use childwire_core::{
    DecoderStats, EncodeErrorKind, Frame, FrameDecoder, Framing, IdScanner, LineDecoder, Message,
};

use super::verbatim::Verbatim;

/// Lines longer than this (1 MiB) go to the child as they come, when the
/// relay streams. Far above an MCP request in the usual course (a tool
/// call's arguments), which is held whole as before, and small enough that
/// a line just under it, held whole and echoed, costs the relay 2 MiB.
pub(super) const LONG: usize = 1 << 20;

/// How many first bytes of a long line that was dropped are kept, for what
/// the relay says of it: what its notice shows.
const HEAD: usize = 80;

/// The host side's framing: lines in, a line longer than `long` in pieces
/// as it comes (see the module's docs), bytes out as given ([`Verbatim`]).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(super) struct HostLines {
    /// `None` (the default): every line whole, as [`Verbatim`] frames them.
    long: Option<usize>,
}

impl HostLines {
    /// Lines longer than `long` bytes in pieces.
    pub(super) fn streaming(long: usize) -> Self {
        Self { long: Some(long) }
    }
}

impl Framing for HostLines {
    type Decoder = HostDecoder;

    fn decoder(&self, max_message_size: usize) -> HostDecoder {
        // Under a limit as low as `long`, every long line is over it: the
        // line decoder drops it whole, never held.
        HostDecoder::new(
            max_message_size,
            self.long.filter(|&long| long < max_message_size),
        )
    }

    fn check(&self, payload: &[u8], max_message_size: usize) -> Result<(), EncodeErrorKind> {
        Verbatim.check(payload, max_message_size)
    }

    fn encode(&self, payload: &[u8], dst: &mut BytesMut) {
        Verbatim.encode(payload, dst);
    }

    fn overhead(&self, len: usize) -> usize {
        Verbatim.overhead(len)
    }
}

/// What a message from the host's side is: a line, or part of a long one.
///
/// The decoder marks a long line with messages that start with a `\n`,
/// which a line never holds; the messages between its start and its end
/// or cut are its pieces.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum HostItem {
    /// A whole line, as the line decoder frames it.
    Line(Bytes),
    /// A long line begins: its pieces follow.
    Start,
    /// The next bytes of the long line, for the child.
    Piece(Bytes),
    /// The long line ended whole: the child's line ends too.
    End,
    /// The long line breaks a rule (the limit, or a `\r` in it): the child's
    /// line ends here, and the rest of it is dropped. [`Dropped`] follows,
    /// at its end.
    Cut,
    /// The long line that was cut ended.
    Dropped(Dropped),
}

/// A long line dropped after it began to go to the child.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Dropped {
    pub(super) why: Why,
    /// Its length, its newline (and a `\r` before it) excluded.
    pub(super) len: u64,
    /// Its top-level JSON-RPC id, as raw JSON text.
    pub(super) id: Option<Bytes>,
    /// Its first bytes, at most [`HEAD`].
    pub(super) head: Bytes,
}

/// Which rule a long line broke.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Why {
    /// Longer than the limit (whether or not it also holds a `\r`).
    Oversized,
    /// Holds a `\r` other than one just before its `\n`.
    CarriageReturn,
}

// The marks: a `\n`, then a tag.
const START: &[u8] = b"\nS";
const END: &[u8] = b"\nE";
const CUT: &[u8] = b"\nC";
/// Then the reason (`o`, `r`), the length (8 bytes, big-endian), the id's
/// length (2 bytes; 0: none), the id, and the head.
const DROPPED: &[u8] = b"\nD";

impl HostItem {
    /// What `message` is; `in_long`: a long line began and was not ended
    /// or cut yet.
    pub(super) fn read(message: Bytes, in_long: bool) -> Option<Self> {
        if message.first() != Some(&b'\n') {
            return Some(if in_long {
                Self::Piece(message)
            } else {
                Self::Line(message)
            });
        }
        match message.get(..2)? {
            START => Some(Self::Start),
            END => Some(Self::End),
            CUT => Some(Self::Cut),
            DROPPED => Dropped::read(&message[2..]).map(Self::Dropped),
            _ => None,
        }
    }
}

impl Dropped {
    fn write(&self) -> Bytes {
        // An id the scanner keeps is at most `MAX_ID_LEN` (256) bytes.
        let id = self
            .id
            .as_deref()
            .filter(|id| id.len() <= usize::from(u16::MAX))
            .unwrap_or_default();
        let mut out = BytesMut::with_capacity(DROPPED.len() + 11 + id.len() + self.head.len());
        out.extend_from_slice(DROPPED);
        out.put_u8(match self.why {
            Why::Oversized => b'o',
            Why::CarriageReturn => b'r',
        });
        out.put_u64(self.len);
        out.put_u16(id.len() as u16);
        out.extend_from_slice(id);
        out.extend_from_slice(&self.head);
        out.freeze()
    }

    fn read(bytes: &[u8]) -> Option<Self> {
        let (&why, rest) = bytes.split_first()?;
        let why = match why {
            b'o' => Why::Oversized,
            b'r' => Why::CarriageReturn,
            _ => return None,
        };
        let (len, rest) = rest.split_first_chunk::<8>()?;
        let (id_len, rest) = rest.split_first_chunk::<2>()?;
        let (id, head) = rest.split_at_checked(usize::from(u16::from_be_bytes(*id_len)))?;
        Some(Self {
            why,
            len: u64::from_be_bytes(*len),
            id: (!id.is_empty()).then(|| Bytes::copy_from_slice(id)),
            head: Bytes::copy_from_slice(head),
        })
    }
}

fn mark(tag: &'static [u8]) -> Frame {
    Frame::Message(Message::new(Bytes::from_static(tag)))
}

/// The host side's decoder: [`LineDecoder`]'s frames for lines up to
/// `long` bytes, a longer line in pieces as it comes (see [`HostItem`]).
#[derive(Debug)]
pub(super) struct HostDecoder {
    /// Frames every line when `long` is `None`, else the lines up to it,
    /// each given whole.
    lines: LineDecoder,
    long: Option<usize>,
    max_message_size: usize,
    /// The line being read while it may still be short (at most `long + 1`
    /// bytes, no `\n`): it goes to `lines` once its `\n` comes, or begins
    /// the pieces once it is known to be long.
    start: BytesMut,
    /// The long line being read.
    streaming: Option<Streaming>,
    /// Frames in stream order, for the receiver's queue, which takes them
    /// after each input.
    ready: VecDeque<Frame>,
    /// The line decoder's counters plus the long lines'.
    stats: DecoderStats,
    longs: DecoderStats,
}

/// What is known of the long line being read.
#[derive(Debug)]
struct Streaming {
    /// Bytes of the line so far.
    len: u64,
    /// The last byte so far was a `\r`: held back, it ends the line if a
    /// `\n` (or the end of the stream) follows, else it is inside it.
    last_cr: bool,
    /// The child's line was ended: the rest is dropped.
    cut: bool,
    id: IdScanner,
    head: BytesMut,
}

impl HostDecoder {
    fn new(max_message_size: usize, long: Option<usize>) -> Self {
        Self {
            lines: LineDecoder::new(max_message_size),
            long,
            max_message_size,
            start: BytesMut::new(),
            streaming: None,
            ready: VecDeque::new(),
            stats: DecoderStats::default(),
            longs: DecoderStats::default(),
        }
    }

    /// Takes `data`, with lines longer than `long` handed on in pieces.
    fn take(&mut self, mut data: &[u8], long: usize) {
        if self.streaming.is_none() && self.start.len() + data.len() <= long {
            // No line here can be long: its whole lines go to the line
            // decoder at once.
            match memchr::memrchr(b'\n', data) {
                Some(end) => {
                    let (whole, rest) = data.split_at(end + 1);
                    self.give_lines(whole);
                    self.start.extend_from_slice(rest);
                }
                None => self.start.extend_from_slice(data),
            }
            return;
        }
        while !data.is_empty() {
            let newline = memchr::memchr(b'\n', data);
            let (part, rest) = match newline {
                Some(at) => (&data[..at], &data[at + 1..]),
                None => (data, &[][..]),
            };
            if self.streaming.is_none() {
                let len = self.start.len() + part.len();
                let last = part.last().or(self.start.last());
                // Its bytes so far, less a `\r` that may end it.
                if len - usize::from(last == Some(&b'\r')) <= long {
                    match newline {
                        Some(at) => self.give_lines(&data[..=at]),
                        None => self.start.extend_from_slice(part),
                    }
                    data = rest;
                    continue;
                }
                self.begin();
            }
            self.stream(part);
            if newline.is_some() {
                self.end();
            }
            data = rest;
        }
    }

    /// Whole lines, after what `start` holds of the first, to the line
    /// decoder; its frames to `ready`.
    fn give_lines(&mut self, whole: &[u8]) {
        if self.start.is_empty() {
            self.lines.handle_data(whole);
        } else {
            self.start.extend_from_slice(whole);
            self.lines.handle_data(&self.start);
            self.start.clear();
        }
        self.drain_lines();
    }

    fn drain_lines(&mut self) {
        let ready = &mut self.ready;
        self.lines.drain_frames(|frame| ready.push_back(frame));
        self.count();
    }

    fn count(&mut self) {
        let (lines, longs) = (self.lines.stats(), &self.longs);
        self.stats = *lines;
        self.stats.messages += longs.messages;
        self.stats.bytes += longs.bytes;
        self.stats.oversized += longs.oversized;
    }

    /// The line `start` holds is long: it goes on in pieces.
    fn begin(&mut self) {
        self.ready.push_back(mark(START));
        self.streaming = Some(Streaming {
            len: 0,
            last_cr: false,
            cut: false,
            id: IdScanner::new(),
            head: BytesMut::with_capacity(HEAD),
        });
        let start = std::mem::take(&mut self.start);
        self.stream(&start);
        // Its memory, for the next line.
        self.start = start;
        self.start.clear();
    }

    /// The next bytes of the long line (no `\n`): as much as may go to the
    /// child goes as a piece; the rest is counted and scanned.
    fn stream(&mut self, part: &[u8]) {
        let (Some(line), ready) = (self.streaming.as_mut(), &mut self.ready) else {
            return;
        };
        if part.is_empty() {
            return;
        }
        if !line.cut {
            let cut = if line.last_cr {
                // The `\r` held back is inside the line.
                true
            } else {
                // All of the line so far went to the child: `len` of it.
                let room = self.max_message_size.saturating_sub(line.len as usize);
                let cr = memchr::memchr(b'\r', part);
                let plain = cr.unwrap_or(part.len());
                let piece = plain.min(room);
                if piece > 0 {
                    let piece = Bytes::copy_from_slice(&part[..piece]);
                    ready.push_back(Frame::Message(Message::new(piece)));
                }
                // Over the limit, or a `\r` with more of the line after it.
                piece < plain || cr.is_some_and(|at| at + 1 < part.len())
            };
            if cut {
                line.cut = true;
                ready.push_back(mark(CUT));
            }
        }
        let room = HEAD.saturating_sub(line.head.len());
        line.head.extend_from_slice(&part[..room.min(part.len())]);
        line.id.feed(part);
        line.len += part.len() as u64;
        line.last_cr = part.last() == Some(&b'\r');
    }

    /// The long line ended (its `\n`, or the end of the stream).
    fn end(&mut self) {
        let Some(mut line) = self.streaming.take() else {
            return;
        };
        if line.last_cr {
            // It ends the line: not part of it.
            line.len -= 1;
            line.head.truncate(line.head.len().min(line.len as usize));
        }
        let why = if line.len > self.max_message_size as u64 {
            self.longs.oversized += 1;
            Why::Oversized
        } else if line.cut {
            Why::CarriageReturn
        } else {
            self.longs.messages += 1;
            self.longs.bytes += line.len;
            self.ready.push_back(mark(END));
            self.count();
            return;
        };
        let dropped = Dropped {
            why,
            len: line.len,
            id: line.id.id(),
            head: line.head.freeze(),
        };
        self.ready
            .push_back(Frame::Message(Message::new(dropped.write())));
        self.count();
    }
}

impl FrameDecoder for HostDecoder {
    fn handle_data(&mut self, data: &[u8]) {
        match self.long {
            Some(long) => self.take(data, long),
            None => self.lines.handle_data(data),
        }
    }

    fn handle_bytes(&mut self, data: Bytes) {
        match self.long {
            Some(long) => self.take(&data, long),
            None => self.lines.handle_bytes(data),
        }
    }

    fn handle_eof(&mut self) {
        if self.long.is_some() {
            if self.streaming.is_some() {
                self.end();
            } else if !self.start.is_empty() {
                // A last line without its `\n`: the line decoder's, as any
                // other short line.
                let start = self.start.split();
                self.lines.handle_data(&start);
            }
        }
        self.lines.handle_eof();
        if self.long.is_some() {
            self.drain_lines();
        }
    }

    fn poll_frame(&mut self) -> Option<Frame> {
        match self.long {
            Some(_) => self.ready.pop_front(),
            None => self.lines.poll_frame(),
        }
    }

    fn drain_frames<E: FnMut(Frame)>(&mut self, mut each: E) {
        if self.long.is_none() {
            return self.lines.drain_frames(each);
        }
        while let Some(frame) = self.ready.pop_front() {
            each(frame);
        }
    }

    fn buffered(&self) -> usize {
        let ready: usize = self
            .ready
            .iter()
            .map(|frame| match frame {
                Frame::Message(message) => message.len(),
                _ => 0,
            })
            .sum();
        let head = self.streaming.as_ref().map_or(0, |line| line.head.len());
        self.lines.buffered() + self.start.len() + ready + head
    }

    fn stats(&self) -> &DecoderStats {
        match self.long {
            Some(_) => &self.stats,
            None => self.lines.stats(),
        }
    }

    fn max_message_size(&self) -> usize {
        self.max_message_size
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// What the pump makes of everything the decoder gives for `input`, cut
    /// into chunks of the sizes `chunks` cycles through; a long line's
    /// pieces joined.
    fn decode(input: &[u8], long: usize, max: usize, chunks: &[usize], owned: bool) -> Vec<Item> {
        let mut decoder = HostLines::streaming(long).decoder(max);
        let mut frames = Vec::new();
        let mut rest = input;
        for &size in chunks.iter().cycle() {
            if rest.is_empty() {
                break;
            }
            let (chunk, after) = rest.split_at(size.clamp(1, rest.len()));
            if owned {
                decoder.handle_bytes(Bytes::copy_from_slice(chunk));
            } else {
                decoder.handle_data(chunk);
            }
            rest = after;
            decoder.drain_frames(|frame| frames.push(frame));
            // What it holds once drained: the start of a line that may
            // still be short, the head of a long one, what the line
            // decoder keeps for its next chunk.
            assert!(
                decoder.buffered() <= long + 1 + HEAD + 64 * 1024,
                "{}",
                decoder.buffered()
            );
        }
        decoder.handle_eof();
        decoder.drain_frames(|frame| frames.push(frame));
        let mut items = Vec::new();
        let mut in_long = false;
        for frame in frames {
            let message = match frame {
                Frame::Message(message) => message.into_bytes(),
                Frame::Oversized(notice) => {
                    items.push(Item::Oversized(notice.len));
                    continue;
                }
                other => panic!("{other:?}"),
            };
            let item = HostItem::read(message, in_long).expect("a mark the pump reads");
            match item {
                HostItem::Line(line) => items.push(Item::Line(line.to_vec())),
                HostItem::Start => {
                    in_long = true;
                    items.push(Item::Long(Vec::new()));
                }
                HostItem::Piece(piece) => {
                    assert!(!piece.is_empty());
                    let Some(Item::Long(sent)) = items.last_mut() else {
                        panic!("a piece outside a long line");
                    };
                    sent.extend_from_slice(&piece);
                }
                HostItem::End => {
                    in_long = false;
                    items.push(Item::End);
                }
                HostItem::Cut => {
                    in_long = false;
                    items.push(Item::Cut);
                }
                HostItem::Dropped(dropped) => items.push(Item::Dropped(dropped)),
            }
        }
        items
    }

    #[derive(Debug, PartialEq, Eq)]
    enum Item {
        Line(Vec<u8>),
        Oversized(u64),
        /// A long line began; what of it went to the child.
        Long(Vec<u8>),
        End,
        Cut,
        Dropped(Dropped),
    }

    /// What the decoder must give for `input`, line by line: the rules in
    /// the module's docs, written plainly.
    fn expected(input: &[u8], long: usize, max: usize) -> Vec<Item> {
        let mut items = Vec::new();
        let mut lines: Vec<&[u8]> = input.split(|&b| b == b'\n').collect();
        if lines.last() == Some(&&b""[..]) {
            lines.pop();
        }
        for line in lines {
            let line = line.strip_suffix(b"\r").unwrap_or(line);
            if line.is_empty() {
                continue;
            }
            if line.len() <= long {
                items.push(Item::Line(line.to_vec()));
                continue;
            }
            let cr = line.iter().position(|&b| b == b'\r');
            let sent = cr.unwrap_or(line.len()).min(max);
            items.push(Item::Long(line[..sent].to_vec()));
            if cr.is_none() && line.len() <= max {
                items.push(Item::End);
                continue;
            }
            items.push(Item::Cut);
            let mut id = IdScanner::new();
            id.feed(line);
            items.push(Item::Dropped(Dropped {
                why: if line.len() > max {
                    Why::Oversized
                } else {
                    Why::CarriageReturn
                },
                len: line.len() as u64,
                id: id.id(),
                head: Bytes::copy_from_slice(&line[..line.len().min(HEAD)]),
            }));
        }
        items
    }

    /// A small deterministic generator: the same cases every run.
    struct Rng(u64);

    impl Rng {
        fn below(&mut self, n: usize) -> usize {
            self.0 = self
                .0
                .wrapping_mul(6_364_136_223_846_793_005)
                .wrapping_add(1_442_695_040_888_963_407);
            ((self.0 >> 33) % n as u64) as usize
        }
    }

    /// Lines of every kind around the two bounds (`long`, 100; `max`,
    /// 300): short, long, over the limit, with `\r` here and there,
    /// blank, the last one unterminated or not, with ids.
    fn input(rng: &mut Rng) -> Vec<u8> {
        let mut input = Vec::new();
        for _ in 0..rng.below(12) {
            let len = match rng.below(4) {
                0 => rng.below(8),
                1 => 95 + rng.below(10),
                2 => 295 + rng.below(10),
                _ => rng.below(700),
            };
            let mut line = format!("{{\"id\":{},\"p\":\"", rng.below(1000)).into_bytes();
            line.resize(len.max(line.len()), b'a');
            line.truncate(len);
            for _ in 0..rng.below(3) {
                if rng.below(4) == 0 && !line.is_empty() {
                    let at = rng.below(line.len());
                    line[at] = b'\r';
                }
            }
            if rng.below(3) == 0 {
                line.push(b'\r');
            }
            input.extend_from_slice(&line);
            input.push(b'\n');
        }
        if rng.below(2) == 0 {
            input.pop();
        }
        input
    }

    #[test]
    fn any_input_however_chunked_gives_what_the_rules_say() {
        let (long, max) = (100, 300);
        let mut rng = Rng(37);
        for case in 0..400 {
            let input = input(&mut rng);
            let expected = expected(&input, long, max);
            for chunks in [
                vec![input.len().max(1)],
                vec![1],
                vec![7, 64, 3],
                vec![1 + rng.below(40), 1 + rng.below(400)],
            ] {
                let got = decode(&input, long, max, &chunks, case % 2 == 0);
                assert_eq!(
                    got,
                    expected,
                    "case {case}, chunks {chunks:?}: {:?}",
                    String::from_utf8_lossy(&input)
                );
            }
        }
    }

    #[test]
    fn short_lines_are_the_line_decoders_frames() {
        let input = b"{\"id\":1}\r\n\n{\"id\":2}\nnot json\r\n\r\n{\"id\":3}";
        let mut lines = LineDecoder::new(300);
        lines.handle_data(input);
        lines.handle_eof();
        let mut reference = Vec::new();
        lines.drain_frames(|frame| reference.push(frame));
        for size in 1..input.len() {
            let mut decoder = HostLines::streaming(100).decoder(300);
            let mut frames = Vec::new();
            for chunk in input.chunks(size) {
                decoder.handle_data(chunk);
                decoder.drain_frames(|frame| frames.push(frame));
            }
            decoder.handle_eof();
            decoder.drain_frames(|frame| frames.push(frame));
            assert_eq!(frames, reference, "chunks of {size}");
            assert_eq!(decoder.stats(), lines.stats());
        }
    }

    #[test]
    fn a_long_line_goes_in_pieces_and_ends_whole() {
        let mut line = b"{\"id\":1,\"p\":\"".to_vec();
        line.resize(250, b'a');
        line.extend_from_slice(b"\"}\r\n{\"id\":2}\n");
        let items = decode(&line, 100, 300, &[64], false);
        assert_eq!(
            items,
            [
                Item::Long(line[..252].to_vec()),
                Item::End,
                Item::Line(b"{\"id\":2}".to_vec())
            ]
        );
    }

    #[test]
    fn a_long_line_over_the_limit_is_cut_at_it_and_dropped_with_its_id() {
        let mut line = b"{\"p\":\"".to_vec();
        line.resize(500, b'a');
        line.extend_from_slice(b"\",\"id\":\"x\"}\n{\"id\":2}\n");
        let items = decode(&line, 100, 300, &[64], false);
        assert_eq!(items[0], Item::Long(line[..300].to_vec()));
        assert_eq!(items[1], Item::Cut);
        let Item::Dropped(dropped) = &items[2] else {
            panic!("{items:?}");
        };
        assert_eq!(dropped.why, Why::Oversized);
        assert_eq!(dropped.len, 511);
        assert_eq!(dropped.id.as_deref(), Some(&b"\"x\""[..]));
        assert_eq!(dropped.head, line[..HEAD]);
        assert_eq!(items[3], Item::Line(b"{\"id\":2}".to_vec()));
    }

    #[test]
    fn a_long_line_holding_a_carriage_return_is_cut_before_it() {
        let mut line = vec![b'a'; 200];
        line[150] = b'\r';
        line.push(b'\n');
        let items = decode(&line, 100, 300, &[150], false);
        assert_eq!(items[0], Item::Long(vec![b'a'; 150]));
        assert_eq!(items[1], Item::Cut);
        assert!(
            matches!(&items[2], Item::Dropped(d) if d.why == Why::CarriageReturn && d.len == 200),
            "{items:?}"
        );
    }

    #[test]
    fn without_streaming_a_long_line_comes_whole() {
        let line = [b'a'; 500];
        let mut decoder = HostLines::default().decoder(1000);
        decoder.handle_data(&line);
        decoder.handle_data(b"\n");
        assert!(
            matches!(decoder.poll_frame(), Some(Frame::Message(m)) if m[..] == line[..]),
            "one message"
        );
        // A limit no higher than `long`: nothing is long but too long.
        let mut decoder = HostLines::streaming(1000).decoder(1000);
        decoder.handle_data(&[b'a'; 1500]);
        decoder.handle_data(b"\n");
        assert!(matches!(decoder.poll_frame(), Some(Frame::Oversized(o)) if o.len == 1500));
    }

    #[test]
    fn the_mark_of_a_dropped_line_reads_back() {
        for id in [None, Some(&b"7"[..]), Some(&[b'9'; 256][..])] {
            let dropped = Dropped {
                why: Why::Oversized,
                len: u64::MAX - 1,
                id: id.map(Bytes::copy_from_slice),
                head: Bytes::from_static(b"{\"p\":\"\r\x00"),
            };
            assert_eq!(
                HostItem::read(dropped.write(), true),
                Some(HostItem::Dropped(dropped))
            );
        }
        // Cut short, or unknown: nothing the pump acts on.
        for mark in [&b"\nD"[..], b"\nDo1234", b"\nX", b"\n"] {
            assert_eq!(HostItem::read(Bytes::copy_from_slice(mark), false), None);
        }
    }
}
