//! A message channel with no process in it: framing both ways, queues,
//! backpressure, the write timeout, who holds each pipe, and whom to wake,
//! over any byte stream.

use std::fmt;
use std::time::Instant;

use bytes::Bytes;

use crate::config::ChannelConfig;
use crate::decoding::Decoding;
use crate::frame::{Frame, PollutionNotice};
use crate::framing::Framing;
use crate::inbound::{Backlog, Inbound};
use crate::lines::Lines;
use crate::outbound::{Closed, Outbound, Queued, SendError, WriteResult, WriteRound, WriteStep};
use crate::pollution::PollutionCounts;
use crate::report::Counters;

/// A message channel to a peer over a byte stream (a socket, a pipe pair,
/// the process's own stdio), as one sans-IO state machine.
///
/// It decides everything but the I/O: how messages are framed and decoded,
/// what the queues may cost, who writes and who reads (one writer holds the
/// writing pipe at a time, one reader the reading pipe), when the write
/// side closes, and which waiting tasks to wake. The owner holds the pipes
/// and does what it is told, outside its lock.
///
/// # Inputs
///
/// - [`handle_read`](Self::handle_read) /
///   [`handle_read_bytes`](Self::handle_read_bytes) /
///   [`handle_read_eof`](Self::handle_read_eof): what a read brought (bytes,
///   or the end of the peer's stream); [`handle_read_blocked`](Self::handle_read_blocked):
///   it brought nothing yet.
/// - [`handle_write`](Self::handle_write): what came of a
///   [`WriteOp`](crate::WriteOp).
/// - [`handle_timeout`](Self::handle_timeout): the deadline from
///   [`poll_timeout`](Self::poll_timeout) passed; early calls are harmless.
///
/// # Caller requests
///
/// - [`send`](Self::send): queue a message; it says whether the caller
///   writes it now ([`Sent::Write`]).
/// - [`close`](Self::close): stop sending; the write side closes once the
///   queue is written.
/// - [`poll_received`](Self::poll_received): the next frame from the peer.
///
/// # Outputs
///
/// - [`poll_write`](Self::poll_write): what a writer does with the writing
///   pipe next, within a [`WriteRound`] (from [`drain_round`](Self::drain_round)
///   or [`queued_round`](Self::queued_round)).
/// - [`poll_read`](Self::poll_read): whether to read now.
/// - [`take_wakes`](Self::take_wakes): which waiting tasks to wake, after
///   any call.
/// - [`poll_timeout`](Self::poll_timeout): when to call
///   [`handle_timeout`](Self::handle_timeout).
///
/// The channel is over when [`is_finished`](Self::is_finished): the peer's
/// stream ended and every frame was taken.
///
/// # Example: an NDJSON peer over any byte stream
///
/// ```
/// use std::time::Instant;
/// use childwire_core::{Channel, ChannelConfig, Frame, Lines, Sent, WriteOp, WriteResult, WriteStep};
///
/// let now = Instant::now();
/// let mut peer = Channel::new(Lines, &ChannelConfig::default());
///
/// // The first message of a turn: its sender writes it now.
/// let Ok(Sent::Write(round)) = peer.send(r#"{"jsonrpc":"2.0","id":1,"method":"ping"}"#) else { panic!() };
/// let WriteStep::Io(WriteOp::Write(wire)) = peer.poll_write(&round, now) else { panic!() };
/// // ... write `wire` to the socket; it took all of it:
/// peer.handle_write(WriteResult::Written(wire.len()), now);
///
/// peer.handle_read(b"{\"jsonrpc\":\"2.0\",\"id\":1,\"result\":{}}\n", now);
/// let Some(Frame::Message(reply)) = peer.poll_received() else { panic!() };
/// assert_eq!(&reply[..], br#"{"jsonrpc":"2.0","id":1,"result":{}}"#);
///
/// peer.close();
/// let round = peer.drain_round();
/// assert_eq!(peer.poll_write(&round, now), WriteStep::Io(WriteOp::Shutdown));
/// peer.handle_write(WriteResult::Done, now);
/// assert_eq!(peer.poll_write(&round, now), WriteStep::Drop); // drop the socket's write half
/// peer.handle_read_eof(now);
/// assert!(peer.is_finished());
/// ```
///
/// The same with `Content-Length` framing, as an LSP or DAP peer speaks it:
///
/// ```
/// use std::time::Instant;
/// use childwire_core::{Channel, ChannelConfig, ContentLength, Frame, WriteOp, WriteStep};
///
/// let now = Instant::now();
/// let mut peer = Channel::new(ContentLength, &ChannelConfig::default());
///
/// peer.send(r#"{"jsonrpc":"2.0","id":1,"method":"initialize"}"#).unwrap();
/// let WriteStep::Io(WriteOp::Write(wire)) = peer.poll_write(&peer.drain_round(), now) else { panic!() };
/// assert!(wire.starts_with(b"Content-Length: 46\r\n\r\n{"));
///
/// // The answer arrives in two pieces, split inside its header.
/// peer.handle_read(b"Content-Length: 3", now);
/// peer.handle_read(b"6\r\nContent-Type: application/vscode-jsonrpc\r\n\r\n{\"jsonrpc\":\"2.0\",\"id\":1,\"result\":{}}", now);
/// let Some(Frame::Message(reply)) = peer.poll_received() else { panic!() };
/// assert_eq!(&reply[..], br#"{"jsonrpc":"2.0","id":1,"result":{}}"#);
/// ```
#[derive(Debug)]
pub struct Channel<F: Framing = Lines> {
    pub(crate) inbound: Inbound<F>,
    pub(crate) outbound: Outbound<F>,
    read: ReadPipe,
    /// Reads that brought bytes: the peer's turns, for the rule of who
    /// writes.
    turns: u64,
    wakes: Wakes,
}

/// Where the reading pipe is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum ReadPipe {
    Here,
    /// A reader holds it for one call: the background task (`true`: what it
    /// reads is news for the receiver), or the receiver itself.
    Out {
        background: bool,
    },
    /// Its end was read, or reading stopped: nothing more comes from it.
    Done,
}

/// What [`Channel::send`] decided for the sender of a queued message.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[must_use = "a message the sender is to write is only written if it does"]
pub enum Sent {
    /// Queued: another writer, or the background task, takes it.
    Queued,
    /// Queued: write it now, from the sender's own task, with this round.
    Write(WriteRound),
}

/// What a reader does next, from [`Channel::poll_read`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ReadStep {
    /// Take the reading pipe (one reader at a time), read once outside any
    /// lock, then report with `handle_read*`.
    Read,
    /// Not now: another reader holds the pipe, or the caller has the
    /// receive bound's worth waiting. Wait for the receiver's wake-up.
    Wait,
    /// Nothing more will be read: the peer's stream ended, or reading
    /// stopped.
    Done,
}

/// Which waiting tasks an input concerns: wake them once the lock is
/// released. From [`Channel::take_wakes`] and
/// [`Session::take_wakes`](crate::Session::take_wakes).
#[derive(Clone, Copy, Default, PartialEq, Eq)]
pub struct Wakes(u8);

impl Wakes {
    /// Nobody.
    pub const NONE: Wakes = Wakes(0);
    /// Tasks waiting to send, flush or close: room was made, bytes moved,
    /// the writing pipe is free again, or sending ended.
    pub const SENDERS: Wakes = Wakes(1);
    /// The task waiting to receive: an item, the end, or the reading pipe.
    pub const RECEIVER: Wakes = Wakes(2);
    /// The background task: it has work (a flush left to it, a shutdown, a
    /// deadline sooner than the one it waits for, room to read into).
    pub const DRIVER: Wakes = Wakes(4);

    /// Whether any of `other` is in `self`.
    #[inline]
    #[must_use]
    pub fn contains(self, other: Wakes) -> bool {
        self.0 & other.0 != 0
    }

    /// Whether nobody is to be woken.
    #[inline]
    #[must_use]
    pub fn is_empty(self) -> bool {
        self.0 == 0
    }
}

impl std::ops::BitOr for Wakes {
    type Output = Wakes;

    #[inline]
    fn bitor(self, other: Wakes) -> Wakes {
        Wakes(self.0 | other.0)
    }
}

impl std::ops::BitOrAssign for Wakes {
    #[inline]
    fn bitor_assign(&mut self, other: Wakes) {
        self.0 |= other.0;
    }
}

impl fmt::Debug for Wakes {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let names = [
            (Wakes::SENDERS, "SENDERS"),
            (Wakes::RECEIVER, "RECEIVER"),
            (Wakes::DRIVER, "DRIVER"),
        ];
        let mut set = f.debug_set();
        for (wake, name) in names {
            if self.contains(wake) {
                set.entry(&format_args!("{name}"));
            }
        }
        set.finish()
    }
}

impl<F: Framing> Channel<F> {
    /// A channel framing both directions with `framing`, within `config`.
    pub fn new(framing: F, config: &ChannelConfig) -> Self {
        Self {
            inbound: Inbound::new(&framing, config.max_message_size, config.recv_high_water)
                .with_pollution(config.pollution),
            outbound: Outbound::new(
                framing,
                config.max_send_size,
                config.send_high_water,
                config.write_timeout,
            ),
            read: ReadPipe::Here,
            turns: 0,
            wakes: Wakes::NONE,
        }
    }

    // ---- sending ----

    /// Queues `payload`, all or nothing, and says whether the caller writes
    /// it now; or hands it back with the reason. [`SendErrorKind::Full`](crate::SendErrorKind::Full)
    /// means "wait for the senders' wake-up and retry" (write meanwhile:
    /// [`drain_round`](Self::drain_round)). It takes no time: the write
    /// timeout starts when a writer takes the bytes.
    ///
    /// Who writes: the first message since the peer was last read from,
    /// alone in the queue, is written by its sender at once (a request
    /// after an answer reaches the peer with no hand-off); one right behind
    /// another in the same turn is left to the background task, so a burst
    /// goes out in batches; a sender that gets a pipe's worth
    /// ([`WRITE_BATCH`](crate::WRITE_BATCH)) ahead writes it.
    #[inline(always)]
    pub fn send<B: AsRef<[u8]>>(&mut self, payload: B) -> Result<Sent, SendError<B>> {
        let queued = self.outbound.send(payload, false, self.turns)?;
        Ok(self.sent(queued))
    }

    /// [`send`](Self::send) even above the high-water mark, by at most this
    /// message: for a `Sink`, whose readiness was checked before. Still
    /// refused when sending is over or the payload cannot be carried.
    #[inline(always)]
    pub fn send_anyway<B: AsRef<[u8]>>(&mut self, payload: B) -> Result<Sent, SendError<B>> {
        let queued = self.outbound.send(payload, true, self.turns)?;
        Ok(self.sent(queued))
    }

    #[inline(always)]
    fn sent(&mut self, queued: Queued) -> Sent {
        match queued {
            Queued::WriteNow => Sent::Write(self.outbound.sender_round()),
            Queued::ArmedFlush => {
                self.wakes |= Wakes::DRIVER;
                Sent::Queued
            }
            Queued::Left => Sent::Queued,
        }
    }

    /// Stops sending: new messages are refused, the write side is shut down
    /// once what is queued was written. Asking again changes nothing.
    pub fn close(&mut self) {
        self.outbound.close();
        self.wakes |= Wakes::DRIVER | Wakes::SENDERS;
    }

    /// Drops what is queued and the write side now (sending fails with
    /// `reason` from now on, unless it failed before).
    pub(crate) fn abort_sending(&mut self, reason: Closed) {
        self.outbound.abort(reason);
        self.wakes |= Wakes::DRIVER | Wakes::SENDERS;
    }

    /// Refuses new messages with `reason` from now on; what is queued still
    /// goes out.
    pub(crate) fn refuse_sending(&mut self, reason: Closed) {
        self.outbound.refuse(reason);
        self.wakes |= Wakes::SENDERS;
    }

    // ---- writing ----

    /// A round that writes until nothing is queued: a sender's, or a flush's.
    pub fn drain_round(&self) -> WriteRound {
        self.outbound.drain_round()
    }

    /// A round that writes what is queued now and stops there, yielding to
    /// the senders what they queue meanwhile: the background task's.
    pub fn queued_round(&self) -> WriteRound {
        self.outbound.queued_round()
    }

    /// What the writer of `round` does next with the writing pipe.
    pub fn poll_write(&mut self, round: &WriteRound, now: Instant) -> WriteStep {
        let armed = self.outbound.flush_armed();
        let step = self.outbound.poll_write(round, now, self.turns);
        match step {
            WriteStep::Drop => self.wakes |= Wakes::SENDERS,
            WriteStep::Busy | WriteStep::Yield if !armed && self.outbound.flush_armed() => {
                self.wakes |= Wakes::DRIVER;
            }
            _ => {}
        }
        step
    }

    /// What came of the writer's [`WriteOp`](crate::WriteOp); the pipe is
    /// handed back. A failed write means the peer stopped reading: what is
    /// queued is dropped, sending fails with [`Closed::PeerClosed`].
    pub fn handle_write(&mut self, result: WriteResult, now: Instant) {
        let armed = self.outbound.flush_armed();
        let deadline = self.outbound.poll_timeout();
        if self.outbound.handle_write(result, now) {
            self.wakes |= Wakes::SENDERS;
        }
        if self.outbound.take_wake_background() || (!armed && self.outbound.flush_armed()) {
            // Bytes left behind a full pipe: the background task waits for
            // the pipe to take more.
            self.wakes |= Wakes::DRIVER;
        }
        let later = self.outbound.poll_timeout();
        if later.is_some() && (deadline.is_none() || later < deadline) {
            // The write timeout's clock started (or restarted sooner) here:
            // the background task runs its timer.
            self.wakes |= Wakes::DRIVER;
        }
    }

    /// Whether the background task has writing to do now (bytes left to
    /// it, or a close to carry out) and the pipe is free.
    pub fn wants_background_write(&self) -> bool {
        self.outbound.wants_background_write()
    }

    /// Whether everything accepted up to `target` (a
    /// [`queue_end`](Self::queue_end) taken earlier) reached the peer:
    /// `Some(Ok(()))` once written (and flushed), `Some(Err(reason))` when
    /// some of it was dropped or can no longer be written, `None` while it
    /// may still go. The one answer to "did the flush work?".
    pub fn flushed(&self, target: u64) -> Option<Result<(), Closed>> {
        self.outbound.flushed(target)
    }

    /// Where the stream of framed bytes accepted so far ends: the target of
    /// a flush.
    pub fn queue_end(&self) -> u64 {
        self.outbound.queue_end()
    }

    // ---- reading ----

    /// Whether the receiver reads now: one reader holds the pipe at a time.
    pub fn poll_read(&mut self) -> ReadStep {
        self.take_read(false)
    }

    /// [`poll_read`](Self::poll_read) for a reader other than the receiver
    /// (a background task): what it reads wakes the receiver.
    pub fn poll_read_background(&mut self) -> ReadStep {
        self.take_read(true)
    }

    fn take_read(&mut self, background: bool) -> ReadStep {
        match self.read {
            ReadPipe::Done => ReadStep::Done,
            ReadPipe::Out { .. } => ReadStep::Wait,
            ReadPipe::Here if self.inbound.is_eof() => {
                self.read = ReadPipe::Done;
                ReadStep::Done
            }
            ReadPipe::Here if !self.inbound.wants_read() => ReadStep::Wait,
            ReadPipe::Here => {
                self.read = ReadPipe::Out { background };
                ReadStep::Read
            }
        }
    }

    /// Bytes read from the peer; every frame they complete is decoded now.
    #[inline]
    pub fn handle_read(&mut self, data: &[u8], _now: Instant) {
        self.read_back();
        if !data.is_empty() {
            self.turns += 1;
            self.inbound.handle_data(data);
            self.note_diverted();
        }
    }

    /// A place for the decoder to go with the reader (see [`Decoding`]):
    /// made once, kept with the reading pipe.
    pub fn decoding(&self) -> Decoding<F> {
        self.inbound.decoding()
    }

    /// Lends the decoder, in `to`, to the reader that holds the read lease
    /// (after [`ReadStep::Read`]), so that it decodes what it reads on its
    /// own, away from the lock an owner keeps the channel behind. `false`
    /// when no reader holds the lease, the decoder is lent already, or the
    /// last read completed fewer than [`LEND_FROM`](crate::LEND_FROM) frames
    /// (one answer is decoded in place for less): read with
    /// [`handle_read`](Self::handle_read) then. Until
    /// [`handle_decoded`](Self::handle_decoded) hands it back, the counters
    /// stay as they were.
    #[inline]
    pub fn lend_decoder(&mut self, to: &mut Decoding<F>) -> bool {
        matches!(self.read, ReadPipe::Out { .. }) && self.inbound.lend_decoder(to)
    }

    /// The lent decoder back from `from`, with what it decoded: what
    /// [`handle_read`](Self::handle_read) does with the same bytes, the
    /// reading pipe handed back if anything was read. A read that brought
    /// nothing is then told as without lending: blocked
    /// ([`handle_read_blocked`](Self::handle_read_blocked)) or the end
    /// ([`handle_read_eof`](Self::handle_read_eof)). Nothing happens if
    /// `from` holds no lent decoder.
    #[inline]
    pub fn handle_decoded(&mut self, from: &mut Decoding<F>, _now: Instant) {
        if self.inbound.return_decoder(from) {
            self.read_back();
            self.turns += 1;
            self.note_diverted();
        }
    }

    /// Bytes read from the peer, handed over without a copy.
    pub fn handle_read_bytes(&mut self, data: Bytes, _now: Instant) {
        self.read_back();
        if !data.is_empty() {
            self.turns += 1;
            self.inbound.handle_bytes(data);
            self.note_diverted();
        }
    }

    /// The peer's stream ended (or reading it failed): a final line without
    /// `\n` is delivered, marked unterminated.
    pub fn handle_read_eof(&mut self, _now: Instant) {
        self.read = ReadPipe::Done;
        self.inbound.handle_eof();
        self.wakes |= Wakes::RECEIVER;
        self.note_diverted();
    }

    /// Lines were set aside for the owner: the background task hands them on.
    #[inline]
    fn note_diverted(&mut self) {
        if self.inbound.has_diverted() {
            self.wakes |= Wakes::DRIVER;
        }
    }

    /// The next line [`PollutionPolicy::Divert`](crate::PollutionPolicy::Divert)
    /// took out of the messages (a banner, a log line on stdout), oldest
    /// first: its bytes, without the `\n`, for the owner to hand on with the
    /// peer's diagnostics. `None` when none waits (always, under another
    /// policy). The lines wait within
    /// [`DIVERTED_HIGH_WATER`](crate::pollution::DIVERTED_HIGH_WATER); one
    /// that finds no room is dropped and counted. Reading never waits for
    /// them.
    ///
    /// ```
    /// use std::time::Instant;
    /// use childwire_core::{Channel, ChannelConfig, Frame, Lines, PollutionKind, PollutionPolicy};
    ///
    /// let mut config = ChannelConfig::default();
    /// config.pollution = Some(PollutionPolicy::Divert);
    /// let mut peer = Channel::new(Lines, &config);
    /// peer.handle_read(b"Starting server on stdio\n{\"id\":1}\nReady.\n", Instant::now());
    /// // The caller gets the message, and only the message.
    /// assert!(matches!(peer.poll_received(), Some(Frame::Message(m)) if &m[..] == b"{\"id\":1}"));
    /// assert!(peer.poll_received().is_none());
    /// // The owner gets the banner's lines, and one notice for the kind.
    /// assert_eq!(peer.poll_diverted().as_deref(), Some(&b"Starting server on stdio"[..]));
    /// assert_eq!(peer.poll_diverted().as_deref(), Some(&b"Ready."[..]));
    /// assert_eq!(peer.poll_diverted(), None);
    /// let notice = peer.poll_diverted_notice().expect("the first banner line is named");
    /// assert_eq!((notice.kind, notice.line, notice.diverted), (PollutionKind::Text, 1, true));
    /// assert!(peer.poll_diverted_notice().is_none());
    /// assert_eq!(peer.counters().polluted_diverted, 2);
    /// ```
    #[must_use = "a diverted line is lost unless handed on"]
    pub fn poll_diverted(&mut self) -> Option<Bytes> {
        self.inbound.poll_diverted()
    }

    /// The next notice [`PollutionPolicy::Divert`](crate::PollutionPolicy::Divert)
    /// kept instead of queueing it as an item: the first line of each kind,
    /// named, oldest first (one per kind at most).
    #[must_use = "a notice is lost unless handed on"]
    pub fn poll_diverted_notice(&mut self) -> Option<PollutionNotice> {
        self.inbound.poll_diverted_notice()
    }

    /// Nothing set aside will be taken any more: see
    /// [`Output::Done`](crate::Output::Done).
    pub(crate) fn stop_diverting(&mut self) {
        self.inbound.stop_diverting();
    }

    /// A read brought nothing yet; the pipe is handed back. No one is woken:
    /// nothing is new, and the pipe itself wakes the receiver's waiters (a
    /// background task reading is one of them) when it has more.
    pub fn handle_read_blocked(&mut self) {
        self.hand_back();
    }

    /// Reading stops for good without the stream's end (something else may
    /// hold the pipe open): the owner drops its reading pipe.
    pub(crate) fn stop_reading(&mut self) {
        self.read = ReadPipe::Done;
        self.wakes |= Wakes::RECEIVER;
    }

    /// The reading pipe is handed back; what another reader read is news
    /// for the receiver.
    #[inline]
    fn read_back(&mut self) {
        if self.hand_back() {
            self.wakes |= Wakes::RECEIVER;
        }
    }

    /// The reading pipe, if out, is here again; answers whether the
    /// background task was the one reading.
    #[inline]
    fn hand_back(&mut self) -> bool {
        match self.read {
            ReadPipe::Out { background } => {
                self.read = ReadPipe::Here;
                background
            }
            _ => false,
        }
    }

    /// The next frame, in the order the peer wrote them.
    #[must_use = "received frames are lost unless handled"]
    #[inline]
    pub fn poll_received(&mut self) -> Option<Frame> {
        self.inbound.poll_received()
    }

    // ---- time ----

    /// Time passed: the write timeout may have run out (sending fails with
    /// [`Closed::Stalled`] and the write side is dropped).
    pub fn handle_timeout(&mut self, now: Instant) {
        let open = self.outbound.closed().is_none();
        self.outbound.handle_timeout(now);
        if open && self.outbound.closed().is_some() {
            self.wakes |= Wakes::SENDERS | Wakes::DRIVER;
        }
    }

    /// When to call [`handle_timeout`](Self::handle_timeout) next.
    #[must_use]
    pub fn poll_timeout(&self) -> Option<Instant> {
        self.outbound.poll_timeout()
    }

    /// Which waiting tasks the calls since the last one concern; wake them
    /// once the lock over this channel is released.
    #[inline]
    #[must_use = "tasks that are not woken wait forever"]
    pub fn take_wakes(&mut self) -> Wakes {
        std::mem::take(&mut self.wakes)
    }

    pub(crate) fn wake(&mut self, wakes: Wakes) {
        self.wakes |= wakes;
    }

    // ---- getters ----

    /// Whether the peer's stream ended and every frame was taken.
    pub fn is_finished(&self) -> bool {
        self.inbound.is_finished()
    }

    /// Whether the peer's stream ended or reading stopped.
    pub fn is_read_done(&self) -> bool {
        self.read == ReadPipe::Done || self.inbound.is_eof()
    }

    /// Whether a frame is waiting.
    pub fn has_received(&self) -> bool {
        self.inbound.has_received()
    }

    /// Whether reading is held back by the receive bound (the caller has
    /// that much waiting): the pipe may hold more.
    pub fn is_held_back(&self) -> bool {
        self.read != ReadPipe::Done && !self.inbound.is_eof() && !self.inbound.wants_read()
    }

    /// What the caller has not received yet.
    pub fn backlog(&self) -> Backlog {
        self.inbound.backlog()
    }

    /// How many reads brought bytes so far.
    pub fn turns(&self) -> u64 {
        self.turns
    }

    /// Messages decoded so far (received or waiting).
    pub fn messages_in(&self) -> u64 {
        self.inbound.stats().messages
    }

    /// Of them, those that are JSON messages: lines the stdout pollution
    /// check named (a banner) left out; all of them with the check off.
    pub fn json_messages_in(&self) -> u64 {
        self.inbound.json_messages()
    }

    /// Why sending stopped, once it has.
    pub fn send_closed(&self) -> Option<Closed> {
        self.outbound.closed()
    }

    /// Whether [`send`](Self::send) would not wait now.
    pub fn send_ready(&self) -> bool {
        self.outbound.send_ready()
    }

    /// Bytes accepted and not yet written.
    pub fn queued(&self) -> usize {
        self.outbound.queued()
    }

    /// Whether the write side is closed, or its close decided.
    pub fn is_write_closed(&self) -> bool {
        self.outbound.is_pipe_closed()
    }

    /// The frames waiting for the caller, oldest first, left in place: to
    /// look at what came (a start-up's readiness) without taking it.
    pub fn queued_frames(&self) -> impl ExactSizeIterator<Item = &Frame> {
        self.inbound.queued()
    }

    /// What the stdout pollution check counted, with it on.
    pub fn pollution_counts(&self) -> Option<&PollutionCounts> {
        self.inbound.pollution_counts()
    }

    /// Traffic counters so far.
    pub fn counters(&self) -> Counters {
        let stats = self.inbound.stats();
        let pollution = self.inbound.pollution_counts();
        Counters {
            messages_in: stats.messages,
            bytes_in: stats.bytes,
            messages_out: self.outbound.messages_written(),
            bytes_out: self.outbound.bytes_written(),
            oversized: stats.oversized,
            malformed: stats.malformed,
            blank_lines: stats.blank_lines,
            stderr_bytes: 0,
            polluted: pollution.map_or(0, |counts| counts.polluted),
            polluted_dropped: pollution.map_or(0, |counts| counts.dropped),
            polluted_diverted: pollution.map_or(0, |counts| counts.diverted),
        }
    }
}
