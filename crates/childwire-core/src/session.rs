//! A transport as one sans-IO state machine: a message channel over a child's
//! stdin and stdout (or over any pipe pair), the child's lifecycle, its
//! stderr, and the exit report.
//!
//! The owner (the async transport, or a test) holds the pipes, moves bytes,
//! time and signals between the OS and a [`Session`], and does what it says.
//! Every decision is made here.

use std::collections::VecDeque;
use std::time::{Duration, Instant};

use bytes::Bytes;

use crate::channel::{Channel, ReadStep, Sent, Wakes};
use crate::config::{ChannelConfig, Config};
use crate::decoding::Decoding;
use crate::ending::{Exit, Signal, Swept};
use crate::frame::PollutionNotice;
use crate::frame::{Frame, Malformed, Message, Oversized};
use crate::framing::Framing;
use crate::inbound::Backlog;
use crate::lifecycle::{Action, Lifecycle, SignalError};
use crate::lines::Lines;
use crate::outbound::{Closed, SendError, WriteResult, WriteRound, WriteStep};
use crate::report::{Counters, ExitReport};
use crate::supervisor::{ReportWait, Supervisor};

/// What the caller receives from the child, in order: its messages, a
/// notice for anything dropped on the way, and last its exit report.
///
/// ```
/// use childwire_core::{Message, Received};
///
/// fn show(item: Received) {
///     match item {
///         Received::Message(m) => println!("{}", String::from_utf8_lossy(&m)),
///         Received::Exited(report) => eprintln!("the child {report}"),
///         // Oversized, malformed or polluting input: dropped, the session goes on.
///         other => eprintln!("{other:?}"),
///     }
/// }
/// show(Received::Message(Message::new(r#"{"jsonrpc":"2.0","id":1,"result":{}}"#)));
/// ```
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub enum Received {
    /// A message.
    Message(Message),
    /// A message over the size limit was dropped; the session goes on.
    Oversized(Oversized),
    /// Bytes that break the wire format were dropped; the session goes on.
    /// Never with line framing.
    Malformed(Malformed),
    /// A line on stdout that is not a JSON message (a banner, a log line,
    /// the other framing), named once per kind, just before it; the session
    /// goes on. See [`ChannelConfig::pollution`](crate::config::ChannelConfig::pollution).
    Pollution(PollutionNotice),
    /// The child's end. Always the last item, after every message it wrote.
    /// Boxed: it is much larger than a message, and items move through
    /// queues.
    Exited(Box<ExitReport>),
}

impl From<Frame> for Received {
    #[inline]
    fn from(frame: Frame) -> Self {
        match frame {
            Frame::Message(m) => Received::Message(m),
            Frame::Oversized(o) => Received::Oversized(o),
            Frame::Malformed(m) => Received::Malformed(m),
            Frame::Pollution(p) => Received::Pollution(p),
        }
    }
}

/// What the receiver does next, from [`Session::poll_receive`].
#[derive(Debug)]
#[must_use = "the receiver's next step must be taken"]
pub enum Receive {
    /// The next item.
    Item(Received),
    /// Read the peer once (the caller holds the reading pipe now), then
    /// report with `handle_read*`.
    Read,
    /// Nothing now: wait for the receiver's wake-up.
    Wait,
    /// The stream is over: nothing more will come.
    End,
}

/// What the background task does next, from [`Session::poll_output`],
/// drained after it is woken (see [`handle_driver_wake`](Session::handle_driver_wake)).
#[derive(Debug)]
#[must_use = "the driver's outputs must be carried out"]
pub enum Output {
    /// Deliver this signal to the child (its group, with one); report a
    /// failure with [`handle_signal_failed`](Session::handle_signal_failed).
    Signal(Signal),
    /// End what the child left behind (see [`Action::Sweep`]); report with
    /// [`handle_swept`](Session::handle_swept), and while it runs (it need not
    /// finish before the driver goes on) with
    /// [`handle_sweep_progress`](Session::handle_sweep_progress).
    Sweep,
    /// A line the child wrote to stderr, to hand on (a callback,
    /// `tracing`); once handed on, call
    /// [`handle_stderr_delivered`](Session::handle_stderr_delivered): the
    /// report waits for it.
    StderrLine(Bytes),
    /// A line the child wrote to stdout that is not a message (a banner, a
    /// log line), taken out of the messages
    /// ([`PollutionPolicy::Divert`](crate::PollutionPolicy::Divert), a
    /// child's default): hand it on where its stderr lines go, marked as
    /// stdout. Under `Content-Length` framing it is a whole body, which
    /// may hold newlines.
    StdoutLine(Bytes),
    /// The first such line of its kind, named: say so once.
    StdoutNotice(PollutionNotice),
    /// The child's end, once: publish it to whoever waits for it (the
    /// receiver gets its own copy after the last message).
    Report(Box<ExitReport>),
    /// Write with this round: what senders left, or the write side's close.
    Write(WriteRound),
    /// Read the child's stdout once: after its exit, so its end is seen.
    Read,
    /// Nothing more until this deadline (`None`: until woken).
    Timeout(Option<Instant>),
    /// The background task's work is over: it may end. From then on, stdout
    /// lines that are not messages are no longer set aside for it (nobody
    /// would take them): they are dropped and counted as dropped.
    Done,
}

/// The receiver's end of the stream.
#[derive(Debug)]
enum End {
    Open,
    /// The report is the receiver's last item, once reading is over.
    Due(Box<ExitReport>),
    Over,
}

/// The whole stdio transport of one child, without I/O: a [`Channel`] on
/// its stdin and stdout, its lifecycle (close stdin, SIGTERM, SIGKILL, the
/// sweep), its stderr lines and tail, and the exit report; or, made with
/// [`over_pipes`](Self::over_pipes), a channel over any pipe pair with the
/// same handles' logic and no process.
///
/// One owner holds it behind one lock. Every question a handle asks has one
/// answer here: whether a sender writes now ([`send`](Self::send)), what a
/// writer does next ([`poll_write`](Self::poll_write)), what the receiver
/// does next ([`poll_receive`](Self::poll_receive)), whether a flush worked
/// ([`flushed`](Self::flushed)), what the background task does next
/// ([`poll_output`](Self::poll_output)), and whom to wake after any of them
/// ([`take_wakes`](Self::take_wakes)).
///
/// # Inputs
///
/// Every input takes `now`, which must not go backwards.
///
/// - Reading stdout: [`handle_read`](Self::handle_read) /
///   [`handle_read_bytes`](Self::handle_read_bytes),
///   [`handle_read_eof`](Self::handle_read_eof),
///   [`handle_read_blocked`](Self::handle_read_blocked).
/// - Writing stdin: [`handle_write`](Self::handle_write).
/// - The child: [`handle_stderr`](Self::handle_stderr) /
///   [`handle_stderr_eof`](Self::handle_stderr_eof),
///   [`handle_exit`](Self::handle_exit),
///   [`handle_signal_failed`](Self::handle_signal_failed),
///   [`handle_swept`](Self::handle_swept).
/// - The owner: [`handle_handle_opened`](Self::handle_handle_opened) /
///   [`handle_handle_closed`](Self::handle_handle_closed) (the last one gone:
///   the child is killed, or left running with kill-on-drop off),
///   [`handle_driver_wake`](Self::handle_driver_wake) (fires the deadlines
///   `now` reached; early or repeated calls are harmless),
///   [`handle_driver_stopped`](Self::handle_driver_stopped),
///   [`handle_stderr_delivered`](Self::handle_stderr_delivered).
///
/// # Caller requests
///
/// [`send`](Self::send), [`handle_shutdown`](Self::handle_shutdown),
/// [`handle_kill`](Self::handle_kill), [`close`](Self::close).
///
/// # Outputs
///
/// - For the receiver: [`poll_receive`](Self::poll_receive) (or
///   [`poll_received`](Self::poll_received) for items alone).
/// - For a writer: [`poll_write`](Self::poll_write).
/// - For the background task, drained in this order until it says
///   [`Output::Timeout`] or [`Output::Done`]: the child's signals and the
///   sweep, stderr lines, stdout lines that are not messages, a write
///   round, a read of stdout (after the exit), the report
///   ([`poll_output`](Self::poll_output)).
/// - After any call: [`take_wakes`](Self::take_wakes).
///
/// # Example: a child that answers once and exits
///
/// ```
/// use std::time::{Duration, Instant};
/// use childwire_core::{
///     Config, EndedBy, Exit, Output, Received, Receive, Sent, Session, Swept, WriteOp,
///     WriteResult, WriteStep,
/// };
///
/// let start = Instant::now();
/// let mut session = Session::new(&Config::default(), true, start);
/// session.handle_stderr_eof(start); // stderr not captured in this sketch
///
/// // The first message: its sender writes it.
/// let Ok(Sent::Write(round)) = session.send(r#"{"jsonrpc":"2.0","id":1,"method":"ping"}"#) else { panic!() };
/// let WriteStep::Io(WriteOp::Write(bytes)) = session.poll_write(&round, start) else { panic!() };
/// session.handle_write(WriteResult::Written(bytes.len()), start);
///
/// // The receiver reads and gets the answer.
/// assert!(matches!(session.poll_receive(), Receive::Read));
/// session.handle_read(b"{\"jsonrpc\":\"2.0\",\"id\":1,\"result\":{}}\n", start);
/// assert!(matches!(session.poll_receive(), Receive::Item(Received::Message(_))));
///
/// // Shutdown: the background task closes stdin; the child exits on EOF.
/// let later = start + Duration::from_millis(5);
/// session.handle_shutdown(later);
/// session.handle_driver_wake(later);
/// let Output::Write(round) = session.poll_output() else { panic!() };
/// assert_eq!(session.poll_write(&round, later), WriteStep::Drop); // drop stdin
/// session.handle_read_eof(later);
/// session.handle_exit(Exit::Code(0), later);
/// assert!(matches!(session.poll_output(), Output::Sweep));
/// session.handle_swept(Swept::default(), later); // nothing was left behind
/// let Output::Report(report) = session.poll_output() else { panic!() };
/// assert_eq!(report.ended_by, EndedBy::StdinClose);
/// assert_eq!(report.counters.messages_out, 1);
/// assert!(matches!(session.poll_output(), Output::Done));
/// // The receiver's last item is the same report.
/// assert!(matches!(session.poll_receive(), Receive::Item(Received::Exited(_))));
/// assert!(matches!(session.poll_receive(), Receive::End));
/// ```
#[derive(Debug)]
pub struct Session<F: Framing = Lines> {
    channel: Channel<F>,
    /// The child; `None` for a channel over a pipe pair.
    child: Option<Supervisor>,
    end: End,
    /// Live handles on the transport (see [`handle_handle_opened`](Self::handle_handle_opened)).
    handles: usize,
    /// A write round and a read were offered to the background task since
    /// it was last woken.
    offered_write: bool,
    offered_read: bool,
    /// Messages the receiver took out in a batch and has not handed to
    /// its caller yet, and their bytes (see
    /// [`handle_receiver_holds`](Self::handle_receiver_holds)).
    receiver_holds: (u64, u64),
}

impl Session<Lines> {
    /// The session of a child just spawned, talking NDJSON. With
    /// `process_group`, the child leads its own process group (see
    /// [`Lifecycle::new`]).
    pub fn new(config: &Config, process_group: bool, now: Instant) -> Self {
        Self::with_framing(Lines, config, process_group, now)
    }
}

impl<F: Framing> Session<F> {
    /// The session of a child just spawned, talking `framing`.
    pub fn with_framing(framing: F, config: &Config, process_group: bool, now: Instant) -> Self {
        Self {
            channel: Channel::new(framing, &config.channel),
            child: Some(Supervisor::new(config, process_group, now)),
            end: End::Open,
            handles: 0,
            offered_write: false,
            offered_read: false,
            receiver_holds: (0, 0),
        }
    }

    /// A channel over a pipe pair (a socket, the process's own stdio),
    /// driven like a child's session, with no process: the stream ends at
    /// the peer's EOF, and the background task only writes what senders
    /// left.
    pub fn over_pipes(framing: F, config: &ChannelConfig) -> Self {
        Self {
            channel: Channel::new(framing, config),
            child: None,
            end: End::Open,
            handles: 0,
            offered_write: false,
            offered_read: false,
            receiver_holds: (0, 0),
        }
    }

    /// Whether every handle's drop, without a shutdown, kills the child
    /// (the default), or leaves it running with its stdin closed.
    #[must_use]
    pub fn with_kill_on_drop(mut self, kill: bool) -> Self {
        if let Some(sup) = &mut self.child {
            sup.kill_on_drop = kill;
        }
        self
    }

    // ---- sending ----

    /// Queues `payload` for the peer, all or nothing, and says whether the
    /// caller writes it now ([`Sent::Write`]: run the round with
    /// [`poll_write`](Self::poll_write)); or hands it back with the reason
    /// ([`SendErrorKind::Full`](crate::SendErrorKind::Full): wait for the
    /// senders' wake-up, writing meanwhile with [`drain_round`](Self::drain_round)).
    #[inline(always)]
    pub fn send<B: AsRef<[u8]>>(&mut self, payload: B) -> Result<Sent, SendError<B>> {
        self.channel.send(payload)
    }

    /// [`send`](Self::send) above the high-water mark too, by this message
    /// at most: for a `Sink`, whose readiness was checked before.
    #[inline(always)]
    pub fn send_anyway<B: AsRef<[u8]>>(&mut self, payload: B) -> Result<Sent, SendError<B>> {
        self.channel.send_anyway(payload)
    }

    /// A round that writes until nothing is queued.
    pub fn drain_round(&self) -> WriteRound {
        self.channel.drain_round()
    }

    /// What the writer of `round` does next with the writing pipe.
    pub fn poll_write(&mut self, round: &WriteRound, now: Instant) -> WriteStep {
        let step = self.channel.poll_write(round, now);
        if step == WriteStep::Drop {
            if let Some(sup) = &mut self.child {
                sup.handle_stdin_closed(now);
                self.channel.wake(Wakes::DRIVER);
            }
        }
        step
    }

    /// What came of the writer's [`WriteOp`](crate::WriteOp); the pipe is
    /// handed back.
    pub fn handle_write(&mut self, result: WriteResult, now: Instant) {
        self.channel.handle_write(result, now);
        let Some(sup) = &mut self.child else {
            return;
        };
        if self.channel.outbound.take_write_failed() {
            // The child closed its stdin (or died): the lifecycle's input.
            sup.handle_stdin_closed(now);
            self.channel.wake(Wakes::DRIVER);
        } else if sup.is_flushing() && self.channel.outbound.is_drained() && sup.farewell.is_done()
        {
            // A shutdown waits for the queue (and its goodbye) before
            // closing stdin.
            sup.handle_outbound(true, now);
            self.channel.wake(Wakes::DRIVER);
        }
    }

    /// Whether everything accepted up to `target` (a
    /// [`queue_end`](Self::queue_end) taken when the flush began) reached
    /// the peer: `Some(Ok(()))`, `Some(Err(reason))` when some of it was
    /// dropped or can no longer be written, `None` while it may still go.
    /// The one answer for every flush (a sender's, a `Sink`'s, a close's).
    pub fn flushed(&self, target: u64) -> Option<Result<(), Closed>> {
        self.channel.flushed(target)
    }

    /// Whether the close asked at `target` ([`close`](Self::close) or
    /// [`handle_shutdown`](Self::handle_shutdown), then this) is done: what
    /// was queued is written and the write side is closed (`Some(Ok)`), or
    /// some of it could not be written (`Some(Err)`); `None` meanwhile.
    pub fn closed(&self, target: u64) -> Option<Result<(), Closed>> {
        match self.channel.flushed(target) {
            Some(Ok(())) if !self.channel.outbound.is_pipe_gone() => None,
            done => done,
        }
    }

    /// Where the stream of framed bytes accepted so far ends.
    pub fn queue_end(&self) -> u64 {
        self.channel.queue_end()
    }

    /// Stops sending: what is queued is written, then the write side is
    /// closed. For a child this begins the graceful shutdown (its stdin is
    /// the write side).
    pub fn close(&mut self, now: Instant) {
        if self.child.is_some() {
            self.handle_shutdown(now);
        } else {
            self.channel.close();
        }
    }

    // ---- receiving ----

    /// The receiver's next step: an item, a read, a wait, or the end.
    #[inline(always)]
    pub fn poll_receive(&mut self) -> Receive {
        if let Some(item) = self.poll_received() {
            return Receive::Item(item);
        }
        self.poll_wait()
    }

    /// The receiver's next step when it takes nothing (a start-up watch):
    /// [`poll_receive`](Self::poll_receive) without its items.
    pub fn poll_wait(&mut self) -> Receive {
        if matches!(self.end, End::Over) {
            return Receive::End;
        }
        match self.channel.poll_read() {
            ReadStep::Read => Receive::Read,
            ReadStep::Wait => Receive::Wait,
            ReadStep::Done if self.child.is_none() && !self.channel.has_received() => {
                self.end = End::Over;
                Receive::End
            }
            // The report comes (or the items queued are to be taken).
            ReadStep::Done => Receive::Wait,
        }
    }

    /// The next item for the caller: messages and notices in the order the
    /// child wrote them, then the exit report once nothing more can be read.
    #[must_use = "received items are lost unless handled"]
    #[inline]
    pub fn poll_received(&mut self) -> Option<Received> {
        let full = !self.channel.inbound.wants_read();
        if let Some(frame) = self.channel.poll_received() {
            if full {
                self.made_room();
            }
            return Some(frame.into());
        }
        if !matches!(self.end, End::Due(_)) || !self.channel.is_read_done() {
            return None;
        }
        match std::mem::replace(&mut self.end, End::Over) {
            End::Due(report) => Some(Received::Exited(report)),
            _ => None,
        }
    }

    /// Moves the messages ready now, in order, up to `max_messages` of
    /// them and until `max_bytes` is reached, to the back of `into`: what
    /// [`poll_received`](Self::poll_received) would give one by one, taken
    /// at once, up to the first item that is no message (a notice, the
    /// report), which stays. Returns how many and their bytes. A receiver
    /// that holds them before handing them out says so with
    /// [`handle_receiver_holds`](Self::handle_receiver_holds).
    #[inline]
    pub fn take_messages(
        &mut self,
        into: &mut VecDeque<Message>,
        max_messages: usize,
        max_bytes: usize,
    ) -> (usize, usize) {
        let full = !self.channel.inbound.wants_read();
        let taken = self
            .channel
            .inbound
            .take_messages(into, max_messages, max_bytes);
        if full && taken.0 > 0 {
            self.made_room();
        }
        taken
    }

    /// Takes the response to the request with id `id` (raw JSON text) out of
    /// the items waiting, wherever it is among them (the others stay in
    /// order): the message, or the notice of it dropped for its size.
    pub fn take_response(&mut self, id: &[u8]) -> Option<Received> {
        let full = !self.channel.inbound.wants_read();
        let frame = self.channel.inbound.take_first(|frame| match frame {
            Frame::Message(message) => crate::jsonrpc::is_response_to(message, id),
            Frame::Oversized(notice) => notice
                .json_rpc_id()
                .is_some_and(|got| crate::jsonrpc::same_id(got, id)),
            _ => false,
        })?;
        if full {
            self.made_room();
        }
        Some(frame.into())
    }

    /// Moves every item available now to the back of `into`, in order.
    /// Returns how many were moved.
    pub fn drain_received(&mut self, into: &mut VecDeque<Received>) -> usize {
        let before = into.len();
        into.extend(std::iter::from_fn(|| self.poll_received()));
        into.len() - before
    }

    /// The receiver holds `messages` messages of `bytes` bytes that it took
    /// out (with [`poll_received`](Self::poll_received)) in a batch and has
    /// not handed to its caller yet: the exit report counts them as not yet
    /// received. Said again whenever it changes; the last word counts.
    pub fn handle_receiver_holds(&mut self, messages: u64, bytes: u64) {
        self.receiver_holds = (messages, bytes);
    }

    /// The caller took an item below the receive bound: the background task
    /// reading the child's stdout after its exit may go on.
    #[cold]
    fn made_room(&mut self) {
        if self.channel.inbound.wants_read()
            && self
                .child
                .as_ref()
                .is_some_and(|sup| sup.exited() && !sup.end_decided())
        {
            self.channel.wake(Wakes::DRIVER);
        }
    }

    /// Bytes read from the peer (the child's stdout).
    #[inline]
    pub fn handle_read(&mut self, data: &[u8], now: Instant) {
        self.channel.handle_read(data, now);
        if self.awaits_goodbye_answer() {
            self.look_for_goodbye_answer(now);
        }
    }

    /// A place for the decoder to go with the reader: see
    /// [`Channel::decoding`].
    pub fn decoding(&self) -> Decoding<F> {
        self.channel.decoding()
    }

    /// Lends the decoder, in `to`, to the reader holding the read lease, to
    /// decode what it reads without the lock the session is kept behind:
    /// see [`Channel::lend_decoder`].
    #[inline]
    pub fn lend_decoder(&mut self, to: &mut Decoding<F>) -> bool {
        self.channel.lend_decoder(to)
    }

    /// The lent decoder back from `from`, with what it decoded: what
    /// [`handle_read`](Self::handle_read) does with the same bytes (see
    /// [`Channel::handle_decoded`]).
    #[inline]
    pub fn handle_decoded(&mut self, from: &mut Decoding<F>, now: Instant) {
        self.channel.handle_decoded(from, now);
        if self.awaits_goodbye_answer() {
            self.look_for_goodbye_answer(now);
        }
    }

    /// Bytes read from the peer, handed over without a copy.
    pub fn handle_read_bytes(&mut self, data: Bytes, now: Instant) {
        self.channel.handle_read_bytes(data, now);
        if self.awaits_goodbye_answer() {
            self.look_for_goodbye_answer(now);
        }
    }

    #[inline]
    fn awaits_goodbye_answer(&self) -> bool {
        self.child
            .as_ref()
            .is_some_and(|sup| sup.farewell.is_awaiting())
    }

    /// Takes the answer the goodbye awaits out of the items received, if it
    /// came (it is the goodbye's, not the caller's), and lets the goodbye go
    /// on.
    #[cold]
    fn look_for_goodbye_answer(&mut self, now: Instant) {
        let Some(sup) = &mut self.child else {
            return;
        };
        let full = !self.channel.inbound.wants_read();
        let farewell = &sup.farewell;
        let answer = self.channel.inbound.take_first(|frame| match frame {
            Frame::Message(message) => farewell.is_answer(message),
            _ => false,
        });
        let Some(Frame::Message(answer)) = answer else {
            return;
        };
        sup.farewell.handle_message(&answer);
        if full {
            self.made_room();
        }
        self.say_goodbye(now);
    }

    /// Queues the goodbye's messages that may go now, and tells the
    /// lifecycle whether the way to closing stdin is clear (the queue
    /// written and the goodbye done).
    fn say_goodbye(&mut self, now: Instant) {
        let Some(sup) = &mut self.child else {
            return;
        };
        while let Some(message) = sup.farewell.poll_message(now) {
            if !self.channel.outbound.queue_own(&message) {
                sup.farewell.handle_stop();
            }
        }
        let drained = self.channel.outbound.is_drained();
        if !drained {
            self.channel.outbound.arm_flush();
        }
        sup.handle_outbound(drained && sup.farewell.is_done(), now);
        self.channel.wake(Wakes::DRIVER);
    }

    /// The peer's stream ended (or reading it failed).
    pub fn handle_read_eof(&mut self, now: Instant) {
        self.channel.handle_read_eof(now);
        if let Some(sup) = &mut self.child {
            sup.handle_stdout_eof(now);
            self.channel.wake(Wakes::DRIVER);
        }
    }

    /// A read brought nothing yet; the reading pipe is handed back. After
    /// the child's end is decided, a quiet pipe (something the child started
    /// may hold it) is not read any more: the report follows what was read.
    pub fn handle_read_blocked(&mut self) {
        self.channel.handle_read_blocked();
        if !matches!(self.end, End::Open) {
            self.channel.stop_reading();
        }
    }

    // ---- the child's end ----

    /// Begins the graceful shutdown: flush what is queued, say the goodbye
    /// if one is configured ([`Config::goodbye`]: its messages, each answer
    /// awaited), close stdin, wait out what is left of `stdin_grace`,
    /// SIGTERM, wait `term_grace`, SIGKILL. Sending fails
    /// from now on. Asking again changes nothing. For a channel over a pipe
    /// pair: [`close`](Self::close).
    pub fn handle_shutdown(&mut self, now: Instant) {
        let Some(sup) = &mut self.child else {
            self.channel.close();
            return;
        };
        self.channel.refuse_sending(Closed::Closing);
        sup.begin_goodbye();
        self.say_goodbye(now);
        if let Some(sup) = &mut self.child {
            sup.handle_shutdown(now);
        }
    }

    /// Kills the child now (see [`Lifecycle::handle_kill`]): SIGKILL, then
    /// the sweep; the end counts as asked for. Sending fails from now on.
    pub fn handle_kill(&mut self, now: Instant) {
        if let Some(sup) = &mut self.child {
            self.channel.refuse_sending(Closed::Closing);
            sup.handle_kill(now);
            self.channel.wake(Wakes::DRIVER);
        }
    }

    /// A handle on the transport was made (a sender, the receiver).
    pub fn handle_handle_opened(&mut self) {
        self.handles += 1;
    }

    /// A handle on the transport was dropped. What it queued is left to the
    /// background task. When the last one goes without a shutdown, the child
    /// is killed (with kill-on-drop, the default; the end counts as SIGKILL)
    /// or left running with its stdin closed; a channel's write side is
    /// closed once what was queued is written.
    pub fn handle_handle_closed(&mut self, now: Instant) {
        self.handles = self.handles.saturating_sub(1);
        if !self.channel.outbound.is_drained() {
            self.channel.outbound.arm_flush();
            self.channel.wake(Wakes::DRIVER);
        }
        if self.handles > 0 {
            return;
        }
        match &mut self.child {
            Some(sup) => sup.handle_abandoned(now),
            None => self.channel.close(),
        }
        self.channel.wake(Wakes::DRIVER);
    }

    /// Bytes read from the child's stderr.
    pub fn handle_stderr(&mut self, data: &[u8], now: Instant) {
        if let Some(sup) = &mut self.child {
            sup.handle_stderr(data, now);
        }
    }

    /// The child's stderr reached EOF (or it has none: call this at spawn).
    pub fn handle_stderr_eof(&mut self, now: Instant) {
        if let Some(sup) = &mut self.child {
            sup.handle_stderr_eof(now);
        }
    }

    /// The lines from [`Output::StderrLine`] were handed on: the report
    /// may follow.
    pub fn handle_stderr_delivered(&mut self) {
        if let Some(sup) = &mut self.child {
            sup.handle_stderr_delivered();
        }
    }

    /// The caller's stderr callback panicked while a line was handed on: the
    /// report says so.
    pub fn handle_stderr_callback_panicked(&mut self) {
        if let Some(sup) = &mut self.child {
            sup.handle_stderr_callback_panicked();
        }
    }

    /// The child was reaped with `exit`: sending ends (what was queued is
    /// dropped), and the end is decided once its pipes drain (or
    /// `drain_grace` passes).
    pub fn handle_exit(&mut self, exit: Exit, now: Instant) {
        if let Some(sup) = &mut self.child {
            self.channel.abort_sending(Closed::Exited);
            sup.handle_exit(exit, now);
        }
    }

    /// Delivering `signal` failed with `err`.
    pub fn handle_signal_failed(&mut self, signal: Signal, err: SignalError, now: Instant) {
        if let Some(sup) = &mut self.child {
            sup.handle_signal_failed(signal, err, now);
        }
    }

    /// The [`Output::Sweep`] was carried out and found `swept`. Only the
    /// first result counts, and none once the sweep's deadline passed.
    pub fn handle_swept(&mut self, swept: Swept, now: Instant) {
        if let Some(sup) = &mut self.child {
            sup.handle_swept(swept, now);
        }
    }

    /// The [`Output::Sweep`] is still running and has found `so_far`;
    /// `passed` says whether it has been through the processes once. The
    /// exit report waits for the sweep's result [`SWEEP_WAIT`](crate::SWEEP_WAIT)
    /// after it was asked, or [`SWEEP_FIRST_END_WAIT`](crate::SWEEP_FIRST_END_WAIT)
    /// longer while it has not ended anything in a pass; then it counts what
    /// was last handed in here. [`poll_output`](Self::poll_output) says when
    /// with its [`Output::Timeout`].
    pub fn handle_sweep_progress(&mut self, so_far: Swept, passed: bool, now: Instant) {
        if let Some(sup) = &mut self.child {
            sup.handle_sweep_progress(so_far, passed, now);
        }
    }

    /// The background task was woken at `now` (or polled for the first
    /// time): the deadlines `now` reached fire, and the steps it may take
    /// are offered again by [`poll_output`](Self::poll_output).
    pub fn handle_driver_wake(&mut self, now: Instant) {
        self.offered_write = false;
        self.offered_read = false;
        self.channel.handle_timeout(now);
        if let Some(sup) = &mut self.child {
            if self
                .channel
                .send_closed()
                .is_some_and(|c| matches!(c, Closed::Stalled { .. }))
            {
                // The write timeout gave up on the child: close its stdin
                // (the end then counts as after stdin was closed).
                sup.handle_close_stdin(now);
            }
            let in_goodbye = !sup.farewell.is_done();
            sup.handle_timeout(now);
            if in_goodbye {
                // An answer given up on lets the next messages go.
                self.say_goodbye(now);
            }
        }
    }

    /// The background task stops for good (its runtime is going away): the
    /// child is killed and what it left swept at once (drain
    /// [`poll_output`](Self::poll_output) now: no timer will run), and its
    /// end reported as soon as its exit is known, drained or not. New
    /// messages are refused from now on ([`Closed::DriverStopped`]), since
    /// nothing will write them; a refused send waits for the report
    /// ([`report_wait`](Self::report_wait)), which comes once the adapter
    /// has seen the exit, or [`handle_driver_gone`](Self::handle_driver_gone)
    /// says it never will.
    pub fn handle_driver_stopped(&mut self, now: Instant) {
        if let Some(sup) = &mut self.child {
            sup.handle_driver_stopped(now);
            self.channel.refuse_sending(Closed::DriverStopped);
        }
    }

    /// After [`handle_driver_stopped`](Self::handle_driver_stopped): how long
    /// to wait for the child to die before giving up on reaping it (the
    /// runtime's child type reaps it then), or `None` if it exited already.
    /// The wait is the adapter's, on a thread of its own: a dropped task
    /// cannot wait on its runtime's clock.
    pub fn reap_wait(&self) -> Option<Duration> {
        (!self.has_exited()).then_some(crate::lifecycle::REAP_AFTER_STOP_WAIT)
    }

    /// The background task is gone (after
    /// [`handle_driver_stopped`](Self::handle_driver_stopped) and its last
    /// outputs): without a report by now, none will come. Sending fails, and
    /// the receiver's stream ends after what was read.
    pub fn handle_driver_gone(&mut self) {
        if self.child.is_none() || !matches!(self.end, End::Open) {
            return;
        }
        self.end = End::Over;
        self.channel.abort_sending(Closed::DriverStopped);
        self.channel.stop_reading();
    }

    /// A signal for the child that is due now, for whoever holds the
    /// session and can deliver it at once: the handle whose drop just
    /// decided the kill, so that the SIGKILL goes out in the drop (as
    /// `tokio::process` sends its kill-on-drop) rather than whenever the
    /// background task next runs. It is what [`poll_output`](Self::poll_output)
    /// would hand out next, since the child's signals, its stdin's closing
    /// and its sweep come first there; `None`, taking nothing, when the next
    /// of those is not a signal. Report a failed delivery with
    /// [`handle_signal_failed`](Self::handle_signal_failed).
    #[must_use]
    pub fn poll_signal(&mut self) -> Option<Signal> {
        self.child.as_mut()?.poll_signal()
    }

    /// The background task's next step. Drain it after every wake-up until
    /// it says [`Output::Timeout`] or [`Output::Done`]; carry each output out
    /// (outside the lock), then ask again.
    pub fn poll_output(&mut self) -> Output {
        if let Some(sup) = &mut self.child {
            while let Some(action) = sup.poll_action() {
                match action {
                    // The write side drops stdin, now if no writer holds it
                    // (what was not written by now is dropped).
                    Action::CloseStdin => {
                        self.channel.abort_sending(Closed::Closing);
                        if self.channel.wants_background_write() {
                            self.offered_write = true;
                            return Output::Write(self.channel.queued_round());
                        }
                    }
                    Action::Signal(signal) => return Output::Signal(signal),
                    Action::Sweep => return Output::Sweep,
                }
            }
            if let Some(line) = sup.poll_stderr_line() {
                return Output::StderrLine(line);
            }
        }
        if let Some(notice) = self.channel.poll_diverted_notice() {
            return Output::StdoutNotice(notice);
        }
        if let Some(line) = self.channel.poll_diverted() {
            return Output::StdoutLine(line);
        }
        if !self.offered_write && self.channel.wants_background_write() {
            self.offered_write = true;
            return Output::Write(self.channel.queued_round());
        }
        if let Some(sup) = &mut self.child {
            // Stdout is read here after the exit (to its end), and while a
            // goodbye awaits its answer (no receiver may be reading).
            let read = (sup.exited() && !sup.end_decided()) || sup.farewell.is_awaiting();
            if !self.offered_read && read {
                self.offered_read = true;
                if self.channel.poll_read_background() == ReadStep::Read {
                    return Output::Read;
                }
            }
            let backlog = backlog(&self.channel, self.receiver_holds);
            if let Some(report) = sup.take_report(self.channel.counters(), backlog) {
                let report = Box::new(report);
                self.end = End::Due(report.clone());
                self.channel.wake(Wakes::RECEIVER | Wakes::SENDERS);
                return Output::Report(report);
            }
            if sup.reported() && !sup.has_stderr_unconfirmed() {
                self.channel.stop_diverting();
                return Output::Done;
            }
        } else if self.channel.outbound.is_pipe_gone() {
            self.channel.stop_diverting();
            return Output::Done;
        }
        Output::Timeout(self.poll_timeout())
    }

    /// When the background task must be woken next.
    #[must_use]
    pub fn poll_timeout(&self) -> Option<Instant> {
        let channel = self.channel.poll_timeout();
        match self.child.as_ref().and_then(Supervisor::poll_timeout) {
            Some(at) => Some(channel.map_or(at, |c| c.min(at))),
            None => channel,
        }
    }

    /// Which waiting tasks the calls since the last one concern: wake them
    /// once the lock over this session is released.
    #[inline]
    #[must_use = "tasks that are not woken wait forever"]
    pub fn take_wakes(&mut self) -> Wakes {
        self.channel.take_wakes()
    }

    // ---- getters ----

    /// Whether a send refused for `closed` at `now` waits for the exit
    /// report, so that its failure says how the child ended.
    ///
    /// - The child was reaped ([`Closed::Exited`]): its report is certain
    ///   (within `drain_grace`): [`ReportWait::Certain`].
    /// - The child closed its stdin ([`Closed::PeerClosed`]), as a child
    ///   that exits does first: its end is waited for as long as a shutdown
    ///   gives a child whose stdin closed (`stdin_grace`), and its report
    ///   for `drain_grace` more, both counted from when the closed stdin
    ///   was seen: asked again later, the deadline is the same, and once
    ///   it passed the answer is [`ReportWait::No`]. A child that runs on
    ///   with its stdin closed costs the failing sends that long, once.
    /// - The end is decided, the report not handed out yet: certain too.
    /// - The background task stopped ([`Closed::DriverStopped`]): certain
    ///   as well; it ends with the report, or with
    ///   [`handle_driver_gone`](Self::handle_driver_gone) when none comes.
    /// - Otherwise (the caller closed, the child stalled, the report is
    ///   out, a channel over a pipe pair): [`ReportWait::No`].
    #[must_use]
    pub fn report_wait(&self, closed: Closed, now: Instant) -> ReportWait {
        self.child
            .as_ref()
            .map_or(ReportWait::No, |sup| sup.report_wait(closed, now))
    }

    /// Whether this session runs a child (not a channel over a pipe pair).
    pub fn has_child(&self) -> bool {
        self.child.is_some()
    }

    /// Whether the receiver's stream is over.
    pub fn is_finished(&self) -> bool {
        matches!(self.end, End::Over)
    }

    /// Whether the child's exit was observed.
    pub fn has_exited(&self) -> bool {
        self.child.as_ref().is_some_and(Supervisor::exited)
    }

    /// Whether the child's end is known (its report made or coming).
    pub fn has_ended(&self) -> bool {
        !matches!(self.end, End::Open)
    }

    /// Why sending is no longer possible, if it is not.
    pub fn send_closed(&self) -> Option<Closed> {
        self.channel.send_closed()
    }

    /// Whether [`send`](Self::send) would not wait now.
    #[inline]
    pub fn send_ready(&self) -> bool {
        self.channel.send_ready()
    }

    /// Bytes accepted by [`send`](Self::send) and not yet written.
    pub fn queued(&self) -> usize {
        self.channel.queued()
    }

    /// The channel, for what it says of the stream (frames queued, turns,
    /// whether reading is held back).
    pub fn channel(&self) -> &Channel<F> {
        &self.channel
    }

    /// The lifecycle state machine, for its phase and settings; `None` for a
    /// channel over a pipe pair.
    pub fn lifecycle(&self) -> Option<&Lifecycle> {
        self.child.as_ref().map(|sup| &sup.lifecycle)
    }

    /// When the child was spawned, and when it last wrote to stderr.
    pub fn spawned_at(&self) -> Option<Instant> {
        self.child.as_ref().map(|sup| sup.spawned_at)
    }

    /// When the child last wrote to stderr; `None` before its first output.
    pub fn last_stderr_at(&self) -> Option<Instant> {
        self.child.as_ref().and_then(|sup| sup.last_stderr_at)
    }

    /// Traffic counters so far.
    pub fn counters(&self) -> Counters {
        Counters {
            stderr_bytes: self.child.as_ref().map_or(0, Supervisor::stderr_bytes),
            ..self.channel.counters()
        }
    }
}

/// What the caller has not received yet: what waits in `channel`, and what
/// the receiver holds (`holds`: messages and bytes).
fn backlog<F: Framing>(channel: &Channel<F>, holds: (u64, u64)) -> Backlog {
    let mut backlog = channel.backlog();
    backlog.messages += holds.0;
    backlog.bytes += holds.1;
    backlog
}
