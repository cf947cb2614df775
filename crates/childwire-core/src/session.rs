//! A child transport as one sans-IO state machine: a message channel over
//! the child's stdin and stdout, plus its lifecycle, its stderr tail and the
//! exit report.
//!
//! A runtime adapter owns the child and its pipes, moves bytes, time and
//! signals between the OS and a [`Session`], and does what it says. Every
//! decision lives here or in the parts it is made of.

use std::collections::VecDeque;
use std::time::Instant;

use bytes::Bytes;

use crate::channel::counters;
use crate::config::Config;
use crate::ending::{Exit, Signal, Swept};
use crate::frame::PollutionNotice;
use crate::frame::{Frame, Malformed, Message, Oversized};
use crate::framing::Framing;
use crate::inbound::Inbound;
use crate::joint;
use crate::lifecycle::{Action, Lifecycle, SignalError};
use crate::lines::Lines;
use crate::outbound::{Closed, Outbound, SendError};
use crate::report::{Counters, ExitReport};
use crate::supervisor::Supervisor;

/// What the caller receives from the child, in order.
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

/// The whole stdio transport of one child, without I/O: an [`Inbound`] half
/// on its stdout, an [`Outbound`] half on its stdin, and a [`Supervisor`]
/// (lifecycle, stderr tail, exit report), with the events between them
/// routed.
///
/// # Inputs
///
/// Every input takes `now`, which must not go backwards.
///
/// - [`handle_stdout`](Self::handle_stdout) /
///   [`handle_stdout_eof`](Self::handle_stdout_eof): bytes read from the
///   child's stdout, and its end.
/// - [`handle_stderr`](Self::handle_stderr) /
///   [`handle_stderr_eof`](Self::handle_stderr_eof): the same for stderr.
///   Without a captured stderr, call `handle_stderr_eof` at once.
/// - [`handle_written`](Self::handle_written): bytes of
///   [`poll_transmit`](Self::poll_transmit) written to stdin.
/// - [`handle_stdin_closed`](Self::handle_stdin_closed): stdin was closed
///   after [`Action::CloseStdin`], or a write failed (the child closed it).
/// - [`handle_exit`](Self::handle_exit): the child was reaped.
/// - [`handle_signal_failed`](Self::handle_signal_failed): a signal from an
///   [`Action`] could not be delivered.
/// - [`handle_timeout`](Self::handle_timeout): the deadline from
///   [`poll_timeout`](Self::poll_timeout) passed. Early or repeated calls
///   are harmless.
///
/// # Caller requests
///
/// - [`send`](Self::send): queue a message for stdin.
/// - [`shutdown`](Self::shutdown): begin the graceful shutdown.
/// - [`poll_received`](Self::poll_received): the next item for the caller.
///
/// # Outputs, in the order an adapter drains them after every input
///
/// 1. [`poll_action`](Self::poll_action) until `None`: close stdin, signal.
///    The lifecycle alone decides when stdin closes: at shutdown once the
///    queue is written, at the stdin deadline, or when the write timeout
///    gives up on the child.
/// 2. [`poll_transmit`](Self::poll_transmit): bytes to write to stdin, or
///    `None` (then flush).
/// 3. [`poll_stderr_line`](Self::poll_stderr_line) until `None`: stderr
///    lines for the caller and `tracing`. Then
///    [`handle_stderr_delivered`](Self::handle_stderr_delivered) once they
///    were handed on: until then the exit report is held back, so every
///    line is seen before the end.
/// 4. [`wants_stdout`](Self::wants_stdout): whether to read stdout now.
/// 5. [`poll_timeout`](Self::poll_timeout): when to call
///    [`handle_timeout`](Self::handle_timeout) next.
///
/// Received items wait until the caller takes them with
/// [`poll_received`](Self::poll_received). The session is over when
/// [`is_finished`](Self::is_finished): the exit report was received.
///
/// # Example: a child that answers once and exits
///
/// ```
/// use std::time::{Duration, Instant};
/// use childwire_core::{Action, Config, EndedBy, Exit, Received, Session, Swept};
///
/// let start = Instant::now();
/// let mut session = Session::new(&Config::default(), true, start);
/// session.handle_stderr_eof(start); // stderr not captured in this sketch
///
/// session.send(r#"{"jsonrpc":"2.0","id":1,"method":"ping"}"#).unwrap();
/// let bytes = session.poll_transmit(start).unwrap();
/// session.handle_written(bytes.len(), start);
///
/// session.handle_stdout(b"{\"jsonrpc\":\"2.0\",\"id\":1,\"result\":{}}\n", start);
/// assert!(matches!(session.poll_received(), Some(Received::Message(_))));
///
/// let later = start + Duration::from_millis(5);
/// session.shutdown(later);
/// assert_eq!(session.poll_action(), Some(Action::CloseStdin));
/// session.handle_stdin_closed(later);
/// session.handle_stdout_eof(later);
/// session.handle_exit(Exit::Code(0), later);
/// assert_eq!(session.poll_action(), Some(Action::Sweep));
/// session.handle_swept(Swept::default(), later); // nothing was left behind
/// let Some(Received::Exited(report)) = session.poll_received() else { panic!() };
/// assert_eq!(report.ended_by, EndedBy::StdinClose);
/// assert_eq!(report.counters.messages_out, 1);
/// ```
#[derive(Debug)]
pub struct Session<F: Framing = Lines> {
    inbound: Inbound<F>,
    outbound: Outbound<F>,
    supervisor: Supervisor,
    finished: bool,
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
        let channel = &config.channel;
        Self {
            inbound: Inbound::new(&framing, channel.max_message_size, channel.recv_high_water)
                .with_pollution(channel.pollution),
            outbound: Outbound::new(
                framing,
                channel.max_send_size,
                channel.send_high_water,
                channel.write_timeout,
            ),
            supervisor: Supervisor::new(config, process_group, now),
            finished: false,
        }
    }

    // ---- inputs ----

    /// Bytes read from the child's stdout.
    pub fn handle_stdout(&mut self, data: &[u8], now: Instant) {
        self.inbound.handle_data(data);
        self.advance(now);
    }

    /// Bytes read from the child's stdout, handed over without a copy.
    pub fn handle_stdout_bytes(&mut self, data: Bytes, now: Instant) {
        self.inbound.handle_bytes(data);
        self.advance(now);
    }

    /// The parts, for a driver that drives each pipe from its own task: the
    /// receiving half, the sending half and the supervisor, joined by the
    /// functions of [`crate::joint`], called where this session
    /// calls them.
    pub fn into_parts(self) -> (Inbound<F>, Outbound<F>, Supervisor) {
        (self.inbound, self.outbound, self.supervisor)
    }

    /// The child's stdout reached EOF. A final line without `\n` is
    /// delivered, marked unterminated.
    pub fn handle_stdout_eof(&mut self, now: Instant) {
        self.inbound.handle_eof();
        self.supervisor.handle_stdout_eof(now);
        self.advance(now);
    }

    /// Bytes read from the child's stderr.
    pub fn handle_stderr(&mut self, data: &[u8], now: Instant) {
        self.supervisor.handle_stderr(data, now);
        self.record_backlog();
    }

    /// The child's stderr reached EOF (or it has none).
    pub fn handle_stderr_eof(&mut self, now: Instant) {
        self.supervisor.handle_stderr_eof(now);
        self.record_backlog();
    }

    /// The first `n` bytes of [`poll_transmit`](Self::poll_transmit) were
    /// written to the child's stdin.
    pub fn handle_written(&mut self, n: usize, now: Instant) {
        self.outbound.handle_written(n, now);
        self.advance(now);
    }

    /// The child's stdin is closed: as asked by [`Action::CloseStdin`], or
    /// because a write failed (the child closed its end). What was still
    /// queued is dropped; sending fails from now on.
    pub fn handle_stdin_closed(&mut self, now: Instant) {
        joint::stdin_closed(
            &mut self.outbound,
            &mut self.supervisor,
            Closed::PeerClosed,
            now,
        );
        self.advance(now);
    }

    /// The child was reaped with `exit`.
    pub fn handle_exit(&mut self, exit: Exit, now: Instant) {
        joint::exited(&mut self.outbound, &mut self.supervisor, exit, now);
        self.advance(now);
    }

    /// Delivering `signal` failed with `err`.
    pub fn handle_signal_failed(&mut self, signal: Signal, err: SignalError, now: Instant) {
        self.supervisor.handle_signal_failed(signal, err, now);
        self.record_backlog();
    }

    /// The [`Action::Sweep`] was carried out and found `swept`.
    pub fn handle_swept(&mut self, swept: Swept, now: Instant) {
        self.supervisor.handle_swept(swept, now);
        self.advance(now);
    }

    /// Every handle on the transport was dropped without a shutdown: with
    /// `kill_on_drop` the child is killed ([`Action::Signal`] SIGKILL, then
    /// the sweep; the end counts as SIGKILL), else it is left running with
    /// its stdin closed ([`Action::CloseStdin`]). See
    /// [`Lifecycle::handle_abandoned`].
    pub fn handle_abandoned(&mut self, kill_on_drop: bool, now: Instant) {
        self.supervisor.handle_abandoned(kill_on_drop, now);
        self.advance(now);
    }

    /// Time passed: `now` is at or after [`poll_timeout`](Self::poll_timeout).
    pub fn handle_timeout(&mut self, now: Instant) {
        self.outbound.handle_timeout(now);
        self.supervisor.handle_timeout(now);
        self.advance(now);
    }

    // ---- caller requests ----

    /// Queues `payload` for the child's stdin, or hands it back with the
    /// reason. A message is queued whole or not at all.
    ///
    /// It takes no time: the write timeout starts when the adapter takes the
    /// bytes ([`poll_transmit`](Self::poll_transmit)).
    pub fn send<B: AsRef<[u8]>>(&mut self, payload: B) -> Result<(), SendError<B>> {
        self.outbound.send(payload)
    }

    /// Begins the graceful shutdown: flush what is queued, close stdin, wait
    /// `stdin_grace`, SIGTERM, wait `term_grace`, SIGKILL. Sending fails
    /// from now on. Asking again changes nothing.
    pub fn shutdown(&mut self, now: Instant) {
        self.outbound.refuse(Closed::Closing);
        // Sends do not tell the supervisor (it would cost every message a
        // call): it learns now whether there is anything to flush first.
        self.advance(now);
        self.supervisor.handle_shutdown(now);
        self.record_backlog();
    }

    /// The next item for the caller: messages and notices in the order the
    /// child wrote them, then the exit report.
    #[must_use = "received items are lost unless handled"]
    pub fn poll_received(&mut self) -> Option<Received> {
        if let Some(frame) = self.inbound.poll_received() {
            return Some(frame.into());
        }
        let report = self.supervisor.take_report(self.channel_counters())?;
        self.finished = true;
        Some(Received::Exited(Box::new(report)))
    }

    /// Moves every item available now to the back of `into`, in order.
    /// Returns how many were moved.
    pub fn drain_received(&mut self, into: &mut VecDeque<Received>) -> usize {
        let before = into.len();
        into.extend(std::iter::from_fn(|| self.poll_received()));
        into.len() - before
    }

    // ---- outputs ----

    /// The next thing the adapter must do to the child.
    #[must_use = "actions must be carried out"]
    pub fn poll_action(&mut self) -> Option<Action> {
        let action = self.supervisor.poll_action()?;
        if action == Action::CloseStdin {
            // At the stdin deadline, whatever was not flushed is dropped.
            self.outbound.abort(Closed::Closing);
            let _ = self.outbound.poll_close();
        }
        Some(action)
    }

    /// The bytes to write to the child's stdin next, or `None` when nothing
    /// is queued (the moment to flush). A cheap handle: write it outside any
    /// lock, then report with [`handle_written`](Self::handle_written).
    #[must_use = "queued bytes only reach the child if written"]
    pub fn poll_transmit(&mut self, now: Instant) -> Option<Bytes> {
        let transmit = self.outbound.poll_transmit(now);
        self.advance(now);
        transmit
    }

    /// The next complete stderr line.
    #[must_use = "stderr lines are dropped unless polled"]
    pub fn poll_stderr_line(&mut self) -> Option<Bytes> {
        self.supervisor.poll_stderr_line()
    }

    /// The lines from [`poll_stderr_line`](Self::poll_stderr_line) were
    /// handed on. Releases the exit report.
    pub fn handle_stderr_delivered(&mut self) {
        self.supervisor.handle_stderr_delivered();
    }

    /// Whether the adapter should read stdout now: not while the caller has
    /// `recv_high_water` worth of items waiting, before or after the exit.
    pub fn wants_stdout(&self) -> bool {
        self.inbound.wants_read()
    }

    /// When [`handle_timeout`](Self::handle_timeout) must be called next.
    #[must_use]
    pub fn poll_timeout(&self) -> Option<Instant> {
        match (self.supervisor.poll_timeout(), self.outbound.poll_timeout()) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        }
    }

    /// What a drop without shutdown must do: SIGKILL to the child (its
    /// group, with one) unless it was already reaped. The non-graceful path.
    #[must_use]
    pub fn drop_action(&self) -> Option<Action> {
        self.supervisor.drop_action()
    }

    // ---- getters ----

    /// Whether an item is waiting for [`poll_received`](Self::poll_received).
    pub fn has_received(&self) -> bool {
        self.inbound.has_received() || self.supervisor.report_ready()
    }

    /// Whether the end is decided and every stderr line was delivered: the
    /// report comes after the frames still queued.
    pub fn report_ready(&self) -> bool {
        self.supervisor.report_ready()
    }

    /// Whether the caller has received the exit report.
    pub fn is_finished(&self) -> bool {
        self.finished
    }

    /// Whether the child's exit was observed.
    pub fn has_exited(&self) -> bool {
        self.supervisor.lifecycle().exit().is_some()
    }

    /// Why sending is no longer possible, if it is not.
    pub fn send_closed(&self) -> Option<Closed> {
        self.outbound.closed()
    }

    /// Whether [`send`](Self::send) would not wait now.
    pub fn send_ready(&self) -> bool {
        self.outbound.send_ready()
    }

    /// Bytes accepted by [`send`](Self::send) and not yet written.
    pub fn queued(&self) -> usize {
        self.outbound.queued()
    }

    /// The lifecycle state machine, for its phase and settings.
    pub fn lifecycle(&self) -> &Lifecycle {
        self.supervisor.lifecycle()
    }

    /// Traffic counters so far.
    pub fn counters(&self) -> Counters {
        Counters {
            stderr_bytes: self.supervisor.stderr_bytes(),
            ..self.channel_counters()
        }
    }

    // ---- internals ----

    fn channel_counters(&self) -> Counters {
        counters(&self.inbound, &self.outbound)
    }

    /// Routes what the outbound half decided to the supervisor.
    fn advance(&mut self, now: Instant) {
        // The lifecycle closes stdin (never the outbound half itself).
        let _ = self.outbound.poll_close();
        joint::route_outbound(&self.outbound, &mut self.supervisor, now);
        self.record_backlog();
    }

    /// Tells the supervisor what the caller has not received, for the
    /// report, after every input that may decide the end.
    fn record_backlog(&mut self) {
        self.supervisor.handle_backlog(self.inbound.backlog());
    }
}
