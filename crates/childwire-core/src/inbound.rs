//! The receiving half of a channel: bytes in, frames queued for the caller,
//! with a bound on what the queue may cost.

use std::collections::VecDeque;
use std::mem::size_of;

use bytes::Bytes;

use crate::decoding::{Decoding, LEND_FROM};
use crate::frame::{DecoderStats, Frame, Malformed, MalformedReason, Message, PollutionNotice};
use crate::framing::{FrameDecoder, Framing};
use crate::lines::Lines;
use crate::pollution::{
    DIVERTED_HIGH_WATER, NOTICE_HEAD_LEN, PollutionCounts, PollutionDetector, PollutionPolicy,
};

/// What a queued frame costs beyond its bytes: the frame itself in the
/// queue, and its share of the buffer header its bytes hang from. Counting
/// it is what keeps a flood of tiny messages within the bound.
pub const ITEM_OVERHEAD: usize = size_of::<Frame>() + 32;

/// Decodes what is read from the peer and queues the frames until the
/// caller takes them.
///
/// # Inputs, outputs, drain order
///
/// - [`handle_data`](Self::handle_data) / [`handle_bytes`](Self::handle_bytes):
///   bytes read; every frame they complete is decoded at once and queued.
/// - [`handle_eof`](Self::handle_eof): the peer's end of the stream.
/// - [`poll_received`](Self::poll_received): the next frame for the caller.
/// - [`wants_read`](Self::wants_read): whether to read more now.
///
/// # Memory
///
/// Each queued frame costs its length plus [`ITEM_OVERHEAD`]. Once the queue
/// costs `high_water` or more, [`wants_read`](Self::wants_read) says stop,
/// so a caller that falls behind slows the peer instead of growing memory.
/// Add the decoder's own bound (one message being assembled) and one read.
#[derive(Debug)]
pub(crate) struct Inbound<F: Framing = Lines> {
    /// Boxed: lent and handed back on every read, a pointer moved rather
    /// than the decoder's whole state.
    decoder: Box<F::Decoder>,
    /// While the decoder is lent ([`lend_decoder`](Self::lend_decoder)): its
    /// counters as they were, which are the channel's until it is back.
    lent: Option<DecoderStats>,
    /// Makes the stand-ins ([`decoding`](Self::decoding)).
    framing: F,
    /// Frames the last read that brought bytes completed: whether lending
    /// the decoder pays ([`LEND_FROM`]).
    last_frames: usize,
    queue: VecDeque<Frame>,
    cost: usize,
    high_water: usize,
    eof: bool,
    /// Names lines that are not JSON messages; `None`: off.
    pollution: Option<PollutionDetector>,
    /// The broken header block being dropped now was already looked at,
    /// from its first line: its `Malformed` notice is not looked at again.
    named_early: bool,
    /// What [`PollutionPolicy::Divert`] set aside for the owner.
    diverted: Diverted,
    /// Message lines the pollution check named (not JSON messages), however
    /// they were handled.
    polluted_messages: u64,
}

/// The lines and notices [`PollutionPolicy::Divert`] takes out of the
/// queue, waiting for the owner.
#[derive(Debug, Default)]
struct Diverted {
    /// Lines, oldest first, each a copy: a slice would keep the whole
    /// chunk it was read in alive for as long as it waits.
    lines: VecDeque<Bytes>,
    /// What `lines` cost: their bytes plus [`ITEM_OVERHEAD`] each, at most
    /// [`DIVERTED_HIGH_WATER`].
    cost: usize,
    /// The first notice of each kind (so a handful at most).
    notices: VecDeque<PollutionNotice>,
    /// Nobody takes them any more (the background task is done): lines
    /// are dropped and counted so rather than kept where none would look.
    closed: bool,
}

impl Diverted {
    /// Keeps a copy of `line` if it fits in the bound: whether it did.
    fn keep(&mut self, line: &[u8]) -> bool {
        let cost = line.len() + ITEM_OVERHEAD;
        if self.closed || self.cost + cost > DIVERTED_HIGH_WATER {
            return false;
        }
        self.cost += cost;
        self.lines.push_back(Bytes::copy_from_slice(line));
        true
    }
}

impl<F: Framing> Inbound<F> {
    /// A receiving half decoding with `framing`, delivering messages of up to
    /// `max_message_size` bytes, and asking for no more input while its
    /// queue costs `high_water` bytes or more.
    pub(crate) fn new(framing: &F, max_message_size: usize, high_water: usize) -> Self {
        Self {
            decoder: Box::new(framing.decoder(max_message_size)),
            lent: None,
            framing: framing.clone(),
            last_frames: 0,
            queue: VecDeque::new(),
            cost: 0,
            high_water,
            eof: false,
            pollution: None,
            named_early: false,
            diverted: Diverted::default(),
            polluted_messages: 0,
        }
    }

    /// The same half, naming stdout pollution and framing mismatch with
    /// `policy` (`None`: off, as [`new`](Self::new) makes it): each kind of
    /// line that is not a JSON message is announced once by a
    /// [`Frame::Pollution`] notice queued just before it.
    ///
    /// ```
    /// use std::time::Instant;
    /// use childwire_core::{Channel, ChannelConfig, Frame, Lines, PollutionPolicy};
    ///
    /// let mut config = ChannelConfig::default();
    /// config.pollution = Some(PollutionPolicy::Deliver);
    /// let mut inbound = Channel::new(Lines, &config);
    /// inbound.handle_read(b"Starting server on stdio\n{\"id\":1}\n", Instant::now());
    /// let Some(Frame::Pollution(notice)) = inbound.poll_received() else { panic!() };
    /// assert!(notice.to_string().contains("banner"));
    /// assert!(matches!(inbound.poll_received(), Some(Frame::Message(m)) if &m[..] == b"Starting server on stdio"));
    /// assert!(matches!(inbound.poll_received(), Some(Frame::Message(_))));
    /// ```
    #[must_use]
    pub(crate) fn with_pollution(mut self, policy: Option<PollutionPolicy>) -> Self {
        self.pollution = policy.map(PollutionDetector::new);
        self
    }

    /// The pollution counters, with detection on.
    pub(crate) fn pollution_counts(&self) -> Option<&PollutionCounts> {
        self.pollution.as_ref().map(PollutionDetector::counts)
    }

    /// The next line [`PollutionPolicy::Divert`] set aside: see
    /// [`Channel::poll_diverted`](crate::Channel::poll_diverted).
    #[must_use = "a diverted line is lost unless handed on"]
    pub(crate) fn poll_diverted(&mut self) -> Option<Bytes> {
        let line = self.diverted.lines.pop_front()?;
        self.diverted.cost -= line.len() + ITEM_OVERHEAD;
        Some(line)
    }

    /// The next notice [`PollutionPolicy::Divert`] kept: see
    /// [`Channel::poll_diverted_notice`](crate::Channel::poll_diverted_notice).
    #[must_use = "a notice is lost unless handed on"]
    pub(crate) fn poll_diverted_notice(&mut self) -> Option<PollutionNotice> {
        self.diverted.notices.pop_front()
    }

    /// Bytes read from the peer.
    pub(crate) fn handle_data(&mut self, data: &[u8]) {
        let before = self.queue.len();
        self.decoder.handle_data(data);
        self.collect();
        self.last_frames = self.queue.len() - before;
    }

    /// Bytes read from the peer, handed over without a copy.
    pub(crate) fn handle_bytes(&mut self, data: Bytes) {
        let before = self.queue.len();
        self.decoder.handle_bytes(data);
        self.collect();
        self.last_frames = self.queue.len() - before;
    }

    /// The peer's end of the stream: what the decoder held comes out (a final
    /// line without `\n`, or a notice for a frame cut short).
    pub(crate) fn handle_eof(&mut self) {
        self.eof = true;
        self.decoder.handle_eof();
        self.collect();
    }

    /// The next frame, in the order the peer wrote them.
    #[must_use = "received frames are lost unless handled"]
    pub(crate) fn poll_received(&mut self) -> Option<Frame> {
        let frame = self.queue.pop_front()?;
        self.cost -= cost(&frame);
        Some(frame)
    }

    /// Moves the messages at the front, up to `max_messages` of them and
    /// until `max_bytes` is reached, to the back of `into`, stopping at the
    /// first frame that is no message. Returns how many and their bytes.
    #[inline]
    pub(crate) fn take_messages(
        &mut self,
        into: &mut VecDeque<Message>,
        max_messages: usize,
        max_bytes: usize,
    ) -> (usize, usize) {
        let (mut messages, mut bytes) = (0, 0);
        while messages < max_messages && bytes < max_bytes {
            let Some(Frame::Message(_)) = self.queue.front() else {
                break;
            };
            let Some(Frame::Message(message)) = self.queue.pop_front() else {
                break;
            };
            messages += 1;
            bytes += message.len();
            into.push_back(message);
        }
        self.cost -= bytes + messages * ITEM_OVERHEAD;
        (messages, bytes)
    }

    /// Takes the first queued frame `pred` accepts, out of its place: the
    /// others stay queued in order.
    pub(crate) fn take_first(&mut self, mut pred: impl FnMut(&Frame) -> bool) -> Option<Frame> {
        let at = self.queue.iter().position(&mut pred)?;
        let frame = self.queue.remove(at)?;
        self.cost -= cost(&frame);
        Some(frame)
    }

    /// Whether to read from the peer now: not after EOF, and not while the
    /// queue is at its high-water mark.
    pub(crate) fn wants_read(&self) -> bool {
        !self.eof && self.cost < self.high_water
    }

    /// Whether a frame is waiting.
    pub(crate) fn has_received(&self) -> bool {
        !self.queue.is_empty()
    }

    /// Whether the peer's stream ended.
    pub(crate) fn is_eof(&self) -> bool {
        self.eof
    }

    /// Whether the stream ended and every frame was taken.
    pub(crate) fn is_finished(&self) -> bool {
        self.eof && self.queue.is_empty()
    }

    /// The queued frames, oldest first, left in the queue: to look at what
    /// came (a start-up's readiness) without taking it from the caller.
    pub(crate) fn queued(&self) -> impl ExactSizeIterator<Item = &Frame> {
        self.queue.iter()
    }

    /// What the caller has not received yet, and whether reading is held
    /// back for it.
    pub(crate) fn backlog(&self) -> Backlog {
        let messages = self.queue.len();
        Backlog {
            messages: messages as u64,
            bytes: (self.cost - messages * ITEM_OVERHEAD) as u64,
            held_back: !self.eof && self.cost >= self.high_water,
        }
    }

    /// Nobody will take what is set aside from now on (the owner's
    /// background task is done): lines that would be are dropped and
    /// counted as dropped, so that none is counted as handed on and left
    /// waiting.
    pub(crate) fn stop_diverting(&mut self) {
        self.diverted.closed = true;
    }

    /// Whether lines or notices were set aside for the owner.
    pub(crate) fn has_diverted(&self) -> bool {
        !self.diverted.lines.is_empty() || !self.diverted.notices.is_empty()
    }

    /// Decoded messages that are JSON messages (or all of them, with the
    /// pollution check off): what a start-up counts as the first message.
    pub(crate) fn json_messages(&self) -> u64 {
        self.stats().messages - self.polluted_messages
    }

    /// Counters of what was decoded (and handed back, while the decoder is
    /// lent).
    pub(crate) fn stats(&self) -> &DecoderStats {
        match &self.lent {
            Some(stats) => stats,
            None => self.decoder.stats(),
        }
    }

    /// A place for the decoder to go with the reader, holding an empty
    /// one to stand in for it meanwhile.
    pub(crate) fn decoding(&self) -> Decoding<F> {
        Decoding::new(self.framing.decoder(self.decoder.max_message_size()))
    }

    /// Lends the decoder to the reader holding the read lease, in `to`,
    /// the empty one there standing in for it: only the lease holder
    /// decodes, so nothing reaches the stand-in. `false` if it is lent
    /// already (to `to` or elsewhere), or if the last read completed fewer
    /// than [`LEND_FROM`] frames.
    pub(crate) fn lend_decoder(&mut self, to: &mut Decoding<F>) -> bool {
        if self.lent.is_some() || to.lent || self.last_frames < LEND_FROM {
            return false;
        }
        self.lent = Some(*self.decoder.stats());
        std::mem::swap(&mut self.decoder, &mut to.decoder);
        to.lent = true;
        to.read = false;
        to.shape_check = self.pollution.is_some();
        to.plain = 0;
        to.plain_bytes = 0;
        true
    }

    /// The lent decoder back from `from`, with the frames it decoded,
    /// queued as [`handle_data`](Self::handle_data) queues them. Whether it
    /// brought bytes; nothing happens if `from` holds no lent decoder.
    pub(crate) fn return_decoder(&mut self, from: &mut Decoding<F>) -> bool {
        if !from.lent || self.lent.is_none() {
            return false;
        }
        std::mem::swap(&mut self.decoder, &mut from.decoder);
        from.lent = false;
        self.lent = None;
        if from.read {
            self.last_frames = from.frames.len();
        }
        // The messages found plain, at once: what `collect` does with each.
        // The reader reads once the queue is empty, so they are usually
        // all there is: then the two queues trade places.
        let plain = from.plain.min(from.frames.len());
        if plain > 0 {
            if let Some(detector) = self.pollution.as_mut() {
                detector.count_passed(plain as u64);
            }
            self.cost += from.plain_bytes + plain * ITEM_OVERHEAD;
            if plain == from.frames.len() && self.queue.is_empty() {
                std::mem::swap(&mut self.queue, &mut from.frames);
            } else {
                self.queue.extend(from.frames.drain(..plain));
            }
        }
        if from.frames.is_empty() {
            self.name_dropped_head();
        } else {
            self.collect_from(Some(&mut from.frames));
        }
        std::mem::take(&mut from.read)
    }

    fn collect(&mut self) {
        self.collect_from(None);
    }

    /// Queues what the decoder gives, or (`lent`) the frames it gave while
    /// lent, which drained it.
    fn collect_from(&mut self, lent: Option<&mut VecDeque<Frame>>) {
        let (queue, cost_sum) = (&mut self.queue, &mut self.cost);
        let mut push = |frame: Frame| {
            *cost_sum += cost(&frame);
            queue.push_back(frame);
        };
        let Some(detector) = self.pollution.as_mut() else {
            drain(&mut *self.decoder, lent, push);
            return;
        };
        let mut aside = Aside {
            detector,
            diverted: &mut self.diverted,
            named_early: &mut self.named_early,
            polluted_messages: &mut self.polluted_messages,
        };
        let each = |frame: Frame| {
            // The message path: two bytes of the line looked at, inline.
            if let Frame::Message(message) = &frame {
                if aside.detector.passes(message) {
                    push(frame);
                    return;
                }
            }
            aside.take(frame, &mut push);
        };
        drain(&mut *self.decoder, lent, each);
        self.name_dropped_head();
    }

    /// A `Content-Length` decoder drops a broken header block up to the
    /// next header, which an NDJSON peer never writes: name it from its
    /// first line, not when the stream ends.
    #[inline]
    fn name_dropped_head(&mut self) {
        if self.named_early || self.pollution.is_none() {
            return;
        }
        let Some(head) = self.decoder.dropping_head() else {
            return;
        };
        if memchr::memchr(b'\n', head).is_none() && head.len() < NOTICE_HEAD_LEN {
            return;
        }
        self.named_early = true;
        let block = Malformed::new(MalformedReason::InvalidHeader, Bytes::copy_from_slice(head));
        let Some(detector) = self.pollution.as_mut() else {
            return;
        };
        if let Some(notice) = detector.observe_malformed(&block) {
            if detector.policy() == PollutionPolicy::Divert {
                self.diverted.notices.push_back(notice);
            } else {
                let frame = Frame::Pollution(notice);
                self.cost += cost(&frame);
                self.queue.push_back(frame);
            }
        }
    }
}

/// Gives `each` the frames `lent` holds, or else those `decoder` gives.
#[inline(always)]
fn drain<D: FrameDecoder>(
    decoder: &mut D,
    lent: Option<&mut VecDeque<Frame>>,
    each: impl FnMut(Frame),
) {
    match lent {
        Some(lent) => lent.drain(..).for_each(each),
        None => decoder.drain_frames(each),
    }
}

/// What [`Inbound::collect`] needs for the frames that are not messages,
/// out of the message path's way.
struct Aside<'a> {
    detector: &'a mut PollutionDetector,
    diverted: &'a mut Diverted,
    named_early: &'a mut bool,
    polluted_messages: &'a mut u64,
}

impl Aside<'_> {
    /// A frame that is not a message `passes` let through: a polluted line
    /// (counted already), or a notice of the decoder's.
    #[inline(never)]
    fn take(&mut self, frame: Frame, push: &mut impl FnMut(Frame)) {
        // Under `Divert`, notices go to the owner, not into the queue.
        let divert = self.detector.policy() == PollutionPolicy::Divert;
        match &frame {
            Frame::Message(message) => {
                *self.polluted_messages += 1;
                let observed = self.detector.observe_polluted(message);
                if divert {
                    let kept = self.diverted.keep(message);
                    self.detector.diverted(kept);
                    if let Some(mut notice) = observed.notice {
                        notice.dropped = !kept;
                        if !self.diverted.closed {
                            self.diverted.notices.push_back(notice);
                        }
                    }
                    return;
                }
                if let Some(notice) = observed.notice {
                    push(Frame::Pollution(notice));
                }
                if observed.deliver {
                    push(frame);
                }
            }
            Frame::Malformed(malformed) => {
                if !std::mem::take(self.named_early) {
                    if let Some(notice) = self.detector.observe_malformed(malformed) {
                        if divert {
                            self.diverted.notices.push_back(notice);
                        } else {
                            push(Frame::Pollution(notice));
                        }
                    }
                }
                push(frame);
            }
            _ => push(frame),
        }
    }
}

/// What a receiving half holds for a caller that has not taken it: see
/// [`Channel::backlog`](crate::Channel::backlog) and the exit report's `unreceived_*` fields.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct Backlog {
    /// Frames queued for the caller.
    pub messages: u64,
    /// Their bytes (of a notice: the part of it kept).
    pub bytes: u64,
    /// Reading is stopped by the receive bound: the peer's stream may hold
    /// more, not yet read.
    pub held_back: bool,
}

#[inline]
fn cost(frame: &Frame) -> usize {
    ITEM_OVERHEAD
        + match frame {
            Frame::Message(m) => m.len(),
            Frame::Oversized(o) => o.head.len() + o.json_rpc_id().map_or(0, |id| id.len()),
            Frame::Malformed(m) => m.head.len(),
            Frame::Pollution(p) => p.head.len(),
        }
}
