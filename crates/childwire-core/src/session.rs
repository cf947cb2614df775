//! The whole transport as one sans-IO state machine: framing both ways,
//! backpressure, the stderr tail, the lifecycle and the exit report.
//!
//! A runtime adapter owns the child and its pipes, moves bytes, time and
//! signals between the OS and a [`Session`], and does what it says. Every
//! decision lives here.

use std::collections::VecDeque;
use std::fmt;
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;

use crate::command::{Command, StderrMode};
use crate::decoder::{DEFAULT_MAX_MESSAGE_SIZE, LineDecoder};
use crate::encoder::{DEFAULT_HIGH_WATER, EncodeErrorKind, LineEncoder};
use crate::frame::{Frame, Malformed, Message, Oversized};
use crate::lifecycle::{Action, Exit, Lifecycle, LifecycleConfig, Signal, SignalError};
use crate::report::{Counters, ExitReport};
use crate::stderr_tail::{StderrTail, StderrTailConfig};

/// A function that receives each line the child writes to stderr (without
/// its line terminator), in [`StderrMode::Capture`].
pub type StderrCallback = Arc<dyn Fn(&[u8]) + Send + Sync>;

/// Limits, timings and hooks of a transport. Every field has a default that
/// suits an MCP host.
///
/// ```
/// use std::time::Duration;
/// use childwire_core::session::Config;
///
/// let mut config = Config::default();
/// config.stdin_grace = Duration::from_millis(500);
/// config.write_timeout = Some(Duration::from_secs(10));
/// ```
#[derive(Clone)]
#[non_exhaustive]
pub struct Config {
    /// Longest message accepted from the child; longer lines become
    /// [`Received::Oversized`] notices (C02). Default 16 MiB.
    pub max_message_size: usize,
    /// Longest message [`Session::send`] accepts (C06). Default 16 MiB.
    pub max_send_size: usize,
    /// Bytes queued for the child's stdin at which senders wait (C07).
    /// Default 1 MiB.
    pub send_high_water: usize,
    /// Bytes of received messages waiting for the caller at which the
    /// adapter stops reading stdout, so a caller that falls behind slows the
    /// child instead of growing memory. Default 4 MiB.
    pub recv_high_water: usize,
    /// How long queued output may wait without the child reading any of it
    /// before sending fails with [`Closed::Stalled`] and stdin is
    /// closed (C07). Default: no limit.
    pub write_timeout: Option<Duration>,
    /// From the shutdown request until SIGTERM (C12). Default 2 s.
    pub stdin_grace: Duration,
    /// From SIGTERM until SIGKILL (C12). Default 2 s.
    pub term_grace: Duration,
    /// After the child exited, how long to wait for its stdout and stderr to
    /// reach EOF before reporting (C04). Default 1 s.
    pub drain_grace: Duration,
    /// Bounds of the stderr tail kept for the report (C09, C10).
    pub stderr_tail: StderrTailConfig,
    /// Called with each stderr line in [`StderrMode::Capture`], in addition
    /// to `tracing` (target `childwire::stderr`). Keep it short: it runs on
    /// the task that drives the child.
    pub on_stderr_line: Option<StderrCallback>,
}

impl Default for Config {
    fn default() -> Self {
        let lifecycle = LifecycleConfig::default();
        Self {
            max_message_size: DEFAULT_MAX_MESSAGE_SIZE,
            max_send_size: DEFAULT_MAX_MESSAGE_SIZE,
            send_high_water: DEFAULT_HIGH_WATER,
            recv_high_water: 4 * 1024 * 1024,
            write_timeout: None,
            stdin_grace: lifecycle.stdin_grace,
            term_grace: lifecycle.term_grace,
            drain_grace: lifecycle.drain_grace,
            stderr_tail: StderrTailConfig::default(),
            on_stderr_line: None,
        }
    }
}

impl fmt::Debug for Config {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Config")
            .field("max_message_size", &self.max_message_size)
            .field("max_send_size", &self.max_send_size)
            .field("send_high_water", &self.send_high_water)
            .field("recv_high_water", &self.recv_high_water)
            .field("write_timeout", &self.write_timeout)
            .field("stdin_grace", &self.stdin_grace)
            .field("term_grace", &self.term_grace)
            .field("drain_grace", &self.drain_grace)
            .field("stderr_tail", &self.stderr_tail)
            .field(
                "on_stderr_line",
                &self.on_stderr_line.as_ref().map(|_| ".."),
            )
            .finish()
    }
}

/// What the caller receives from the child, in order.
#[derive(Debug, Clone, PartialEq)]
pub enum Received {
    /// A message.
    Message(Message),
    /// A line over the size limit was dropped; the session goes on (C02).
    Oversized(Oversized),
    /// Bytes that break the wire format were dropped; the session goes on.
    Malformed(Malformed),
    /// The child's end. Always the last item, after every message it wrote
    /// (C04). Boxed: it is much larger than a message, and every item moves
    /// through a queue.
    Exited(Box<ExitReport>),
}

impl Received {
    /// Bytes this item holds, for the receive backpressure.
    fn weight(&self) -> usize {
        match self {
            Received::Message(m) => m.len(),
            Received::Oversized(o) => o.head.len(),
            Received::Malformed(m) => m.head.len(),
            Received::Exited(report) => report.stderr_tail.len(),
        }
    }
}

/// The whole stdio transport of one child, without I/O.
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
///   Without [`StderrMode::Capture`] there is no stderr pipe, and the session
///   treats stderr as ended from the start.
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
/// - [`send`](Self::send): queue a message for stdin (C06–C08).
/// - [`shutdown`](Self::shutdown): begin the graceful shutdown (C12).
/// - [`poll_received`](Self::poll_received): the next item for the caller.
///
/// # Outputs, in the order an adapter drains them after every input
///
/// 1. [`poll_action`](Self::poll_action) until `None`: close stdin, signal.
/// 2. [`poll_transmit`](Self::poll_transmit): bytes to write to stdin, or
///    `None` (then flush).
/// 3. [`poll_stderr_line`](Self::poll_stderr_line) until `None`: stderr
///    lines for the callback and `tracing`. Then
///    [`handle_stderr_delivered`](Self::handle_stderr_delivered) once they
///    were handed on: until then the exit report is held back, so a callback
///    sees every line before anyone sees the end.
/// 4. [`wants_stdout`](Self::wants_stdout): whether to keep reading stdout.
/// 5. [`poll_timeout`](Self::poll_timeout): when to call
///    [`handle_timeout`](Self::handle_timeout) next.
///
/// Received items wait in the session until the caller takes them with
/// [`poll_received`](Self::poll_received); wake the caller when an input
/// made one available. The session is over when
/// [`is_finished`](Self::is_finished): the exit report was received.
#[derive(Debug)]
pub struct Session {
    decoder: LineDecoder,
    encoder: LineEncoder,
    lifecycle: Lifecycle,
    stderr: StderrTail,
    received: VecDeque<Received>,
    received_bytes: usize,
    recv_high_water: usize,
    /// Why sending is no longer possible, once it is not.
    send_closed: Option<Closed>,
    /// Stdin must be closed although no shutdown was asked (a stalled write).
    close_stdin: bool,
    write_timeout: Option<Duration>,
    /// Since when queued bytes have been waiting for the child to read them:
    /// set when a batch is handed out, moved on by every write. The write
    /// timeout counts from here.
    write_waiting_since: Option<Instant>,
    /// What the lifecycle was last told: the write queue holds bytes.
    outbound_pending: bool,
    report: Option<ExitReport>,
    /// Stderr lines were handed out and their delivery not yet confirmed.
    stderr_unconfirmed: bool,
    finished: bool,
}

impl Session {
    /// The session of a child just spawned from `command`.
    pub fn new(config: &Config, command: &Command, now: Instant) -> Self {
        let lifecycle_config = LifecycleConfig {
            stdin_grace: config.stdin_grace,
            term_grace: config.term_grace,
            process_group: command.get_process_group(),
            drain_grace: config.drain_grace,
        };
        let mut session = Self {
            decoder: LineDecoder::new(config.max_message_size),
            encoder: LineEncoder::new(config.max_send_size, config.send_high_water),
            lifecycle: Lifecycle::new(lifecycle_config, now),
            stderr: StderrTail::new(config.stderr_tail.clone()),
            received: VecDeque::new(),
            received_bytes: 0,
            recv_high_water: config.recv_high_water,
            send_closed: None,
            close_stdin: false,
            write_timeout: config.write_timeout,
            write_waiting_since: None,
            outbound_pending: false,
            report: None,
            stderr_unconfirmed: false,
            finished: false,
        };
        session.lifecycle.handle_outbound_drained(now);
        if command.get_stderr() != StderrMode::Capture {
            session.lifecycle.handle_stderr_eof(now);
        }
        session
    }

    // ---- inputs ----

    /// Bytes read from the child's stdout.
    pub fn handle_stdout(&mut self, data: &[u8], now: Instant) {
        self.decoder.handle_data(data);
        self.collect_frames();
        self.advance(now);
    }

    /// The child's stdout reached EOF. A final line without `\n` is
    /// delivered, marked unterminated (C04).
    pub fn handle_stdout_eof(&mut self, now: Instant) {
        self.decoder.handle_eof();
        self.collect_frames();
        self.lifecycle.handle_stdout_eof(now);
        self.advance(now);
    }

    /// Bytes read from the child's stderr.
    pub fn handle_stderr(&mut self, data: &[u8], now: Instant) {
        self.stderr.handle_data(data);
        self.advance(now);
    }

    /// The child's stderr reached EOF.
    pub fn handle_stderr_eof(&mut self, now: Instant) {
        self.stderr.handle_eof();
        self.lifecycle.handle_stderr_eof(now);
        self.advance(now);
    }

    /// The first `n` bytes of [`poll_transmit`](Self::poll_transmit) were
    /// written to the child's stdin.
    pub fn handle_written(&mut self, n: usize, now: Instant) {
        self.encoder.handle_written(n);
        if n > 0 {
            self.write_waiting_since = (self.encoder.queued() > 0).then_some(now);
        }
        self.sync_outbound(now);
        self.advance(now);
    }

    /// The child's stdin is closed: as asked by [`Action::CloseStdin`], or
    /// because a write failed (the child closed its end). What was still
    /// queued is dropped; sending fails from now on.
    pub fn handle_stdin_closed(&mut self, now: Instant) {
        self.encoder.clear();
        self.send_closed.get_or_insert(Closed::StdinClosedByChild);
        self.lifecycle.handle_stdin_closed(now);
        self.advance(now);
    }

    /// The child was reaped with `exit`.
    pub fn handle_exit(&mut self, exit: Exit, now: Instant) {
        self.encoder.clear();
        self.send_closed.get_or_insert(Closed::Exited);
        self.lifecycle.handle_exit(exit, now);
        self.advance(now);
    }

    /// Delivering `signal` failed with `err`.
    pub fn handle_signal_failed(&mut self, signal: Signal, err: SignalError, now: Instant) {
        self.lifecycle.handle_signal_failed(signal, err, now);
        self.advance(now);
    }

    /// Time passed: `now` is at or after [`poll_timeout`](Self::poll_timeout).
    pub fn handle_timeout(&mut self, now: Instant) {
        if self
            .write_deadline()
            .is_some_and(|deadline| now >= deadline)
        {
            let since = self.write_waiting_since.unwrap_or(now);
            let after = now.saturating_duration_since(since);
            self.encoder.clear();
            self.send_closed.get_or_insert(Closed::Stalled { after });
            self.close_stdin = true;
        }
        self.lifecycle.handle_timeout(now);
        self.advance(now);
    }

    // ---- caller requests ----

    /// Queues `payload` for the child's stdin, or hands it back with the
    /// reason (C06, C08). A message is queued whole or not at all.
    ///
    /// [`SendErrorKind::Full`] means "wait": the queue is at its high-water
    /// mark (C07). Async adapters wait for room and retry; their users never
    /// see it.
    ///
    /// It takes no time: the write timeout starts when the adapter takes the
    /// bytes ([`poll_transmit`](Self::poll_transmit)), which spares senders a
    /// clock read per message.
    pub fn send<B: AsRef<[u8]>>(&mut self, payload: B) -> Result<(), SendError<B>> {
        if let Some(closed) = self.send_closed {
            return Err(SendError {
                kind: SendErrorKind::Closed(closed),
                payload,
            });
        }
        self.encoder.encode(payload).map_err(|err| {
            let (kind, payload) = err.into_parts();
            SendError {
                kind: kind.into(),
                payload,
            }
        })
    }

    /// Queues every message of `batch` at once (they were checked by its own
    /// [`LineEncoder::encode`]), or leaves it as it is with the reason:
    /// [`SendErrorKind::Full`] (wait) or [`SendErrorKind::Closed`].
    ///
    /// For adapters that frame messages without holding their lock, as a
    /// `Sink` does, and hand them over a batch at a time.
    pub fn send_batch(&mut self, batch: &mut LineEncoder) -> Result<(), SendErrorKind> {
        if let Some(closed) = self.send_closed {
            return Err(SendErrorKind::Closed(closed));
        }
        if !self.encoder.has_room() {
            return Err(SendErrorKind::Full);
        }
        self.encoder.append(batch);
        Ok(())
    }

    /// Like [`send_batch`](Self::send_batch) but above the high-water mark
    /// too: for a writer going away with one last batch it accepted, which
    /// must not be lost. Fails only when sending is over.
    pub fn send_batch_now(&mut self, batch: &mut LineEncoder) -> Result<(), SendErrorKind> {
        if let Some(closed) = self.send_closed {
            return Err(SendErrorKind::Closed(closed));
        }
        self.encoder.append(batch);
        Ok(())
    }

    /// The largest message [`send`](Self::send) accepts.
    pub fn max_send_size(&self) -> usize {
        self.encoder.max_message_size()
    }

    /// Bytes accepted by [`send`](Self::send) and not yet written.
    pub fn queued(&self) -> usize {
        self.encoder.queued()
    }

    /// Whether [`send`](Self::send) would queue a valid message now, or fail
    /// for good: `false` only while the queue is full.
    pub fn send_ready(&self) -> bool {
        self.send_closed.is_some() || self.encoder.has_room()
    }

    /// Begins the graceful shutdown (C12): flush what is queued, close stdin,
    /// wait `stdin_grace`, SIGTERM, wait `term_grace`, SIGKILL. Sending fails
    /// from now on. Asking again changes nothing.
    pub fn shutdown(&mut self, now: Instant) {
        self.send_closed.get_or_insert(Closed::ShuttingDown);
        self.sync_outbound(now);
        self.lifecycle.handle_shutdown(now);
        self.advance(now);
    }

    /// The next item for the caller: messages and notices in the order the
    /// child wrote them, then the exit report.
    #[must_use = "received items are lost unless handled"]
    pub fn poll_received(&mut self) -> Option<Received> {
        if self.stderr_unconfirmed && matches!(self.received.front(), Some(Received::Exited(_))) {
            return None;
        }
        let item = self.received.pop_front()?;
        self.received_bytes -= item.weight();
        if matches!(item, Received::Exited(_)) {
            self.finished = true;
        }
        Some(item)
    }

    /// Moves every item available now to the back of `into`, in order: one
    /// call where a consumer under a lock would otherwise take one item per
    /// lock. Returns how many were moved.
    pub fn drain_received(&mut self, into: &mut VecDeque<Received>) -> usize {
        let before = into.len();
        if !self.stderr_unconfirmed || !matches!(self.received.back(), Some(Received::Exited(_))) {
            into.append(&mut self.received);
            self.received_bytes = 0;
            self.finished |= matches!(into.back(), Some(Received::Exited(_)));
        } else {
            while let Some(item) = self.poll_received() {
                into.push_back(item);
            }
        }
        into.len() - before
    }

    // ---- outputs ----

    /// The next thing the adapter must do to the child.
    #[must_use = "actions must be carried out"]
    pub fn poll_action(&mut self) -> Option<Action> {
        if std::mem::take(&mut self.close_stdin) {
            return Some(Action::CloseStdin);
        }
        let action = self.lifecycle.poll_action()?;
        if action == Action::CloseStdin {
            // At the stdin deadline, whatever was not flushed is dropped.
            self.encoder.clear();
        }
        Some(action)
    }

    /// The bytes to write to the child's stdin next, or `None` when nothing
    /// is queued (the moment to flush). A cheap handle: write it outside any
    /// lock, then report with [`handle_written`](Self::handle_written).
    #[must_use = "queued bytes only reach the child if written"]
    pub fn poll_transmit(&mut self, now: Instant) -> Option<Bytes> {
        let transmit = self.encoder.poll_transmit();
        if transmit.is_some() && self.write_waiting_since.is_none() {
            self.write_waiting_since = Some(now);
        }
        self.sync_outbound(now);
        transmit
    }

    /// Whether an item is waiting for [`poll_received`](Self::poll_received).
    pub fn has_received(&self) -> bool {
        match self.received.front() {
            Some(Received::Exited(_)) => !self.stderr_unconfirmed,
            Some(_) => true,
            None => false,
        }
    }

    /// The next complete stderr line (captured stderr only).
    #[must_use = "stderr lines are dropped unless polled"]
    pub fn poll_stderr_line(&mut self) -> Option<Bytes> {
        let line = self.stderr.poll_line()?;
        self.stderr_unconfirmed = true;
        Some(line)
    }

    /// The lines from [`poll_stderr_line`](Self::poll_stderr_line) were
    /// handed on (an adapter may do that outside its lock, where a callback
    /// can safely call back into the transport). Releases the exit report.
    pub fn handle_stderr_delivered(&mut self) {
        self.stderr_unconfirmed = false;
    }

    /// Whether the adapter should read stdout now. `false` while the caller
    /// has `recv_high_water` bytes or more waiting, until the child exits:
    /// then what is left in the pipe is read regardless, so nothing the child
    /// wrote is lost (C04).
    pub fn wants_stdout(&self) -> bool {
        self.received_bytes < self.recv_high_water || self.lifecycle.exit().is_some()
    }

    /// When [`handle_timeout`](Self::handle_timeout) must be called next.
    #[must_use]
    pub fn poll_timeout(&self) -> Option<Instant> {
        match (self.lifecycle.poll_timeout(), self.write_deadline()) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        }
    }

    /// What a drop without shutdown must do (C14): SIGKILL to the child (its
    /// group, with one) unless it was already reaped. The non-graceful path.
    #[must_use]
    pub fn drop_action(&self) -> Option<Action> {
        self.lifecycle
            .exit()
            .is_none()
            .then_some(Action::Signal(Signal::Kill))
    }

    // ---- getters ----

    /// The exit report, once the child's end was decided and every stderr
    /// line was delivered (it may still be waiting in the receive queue).
    pub fn report(&self) -> Option<&ExitReport> {
        self.report.as_ref().filter(|_| !self.stderr_unconfirmed)
    }

    /// Whether the caller has received the exit report: nothing more will
    /// happen.
    pub fn is_finished(&self) -> bool {
        self.finished
    }

    /// Whether the child's exit was observed.
    pub fn has_exited(&self) -> bool {
        self.lifecycle.exit().is_some()
    }

    /// Why sending is no longer possible, if it is not.
    pub fn send_closed(&self) -> Option<Closed> {
        self.send_closed
    }

    /// The lifecycle state machine, for its phase and settings.
    pub fn lifecycle(&self) -> &Lifecycle {
        &self.lifecycle
    }

    /// Traffic counters so far.
    pub fn counters(&self) -> Counters {
        let stats = self.decoder.stats();
        Counters {
            messages_in: stats.messages,
            bytes_in: stats.bytes,
            messages_out: self.encoder.messages_written(),
            bytes_out: self.encoder.bytes_written(),
            oversized: stats.oversized,
            blank_lines: stats.blank_lines,
            stderr_bytes: self.stderr.bytes_seen(),
        }
    }

    // ---- internals ----

    fn collect_frames(&mut self) {
        while let Some(frame) = self.decoder.poll_frame() {
            self.push(match frame {
                Frame::Message(m) => Received::Message(m),
                Frame::Oversized(o) => Received::Oversized(o),
                Frame::Malformed(m) => Received::Malformed(m),
            });
        }
    }

    fn push(&mut self, item: Received) {
        self.received_bytes += item.weight();
        self.received.push_back(item);
    }

    /// Turns the lifecycle's ending into the report, after every message.
    fn advance(&mut self, _now: Instant) {
        if let Some(ending) = self.lifecycle.poll_end() {
            let report = ExitReport::new(&ending, self.stderr.tail(), self.counters());
            self.report = Some(report.clone());
            self.push(Received::Exited(Box::new(report)));
        }
    }

    fn write_deadline(&self) -> Option<Instant> {
        let timeout = self.write_timeout?;
        if self.encoder.queued() == 0 || self.send_closed.is_some() {
            return None;
        }
        self.write_waiting_since?.checked_add(timeout)
    }

    /// Tells the lifecycle whether the write queue is empty, when that
    /// changed: a shutdown waits for it to drain before closing stdin.
    fn sync_outbound(&mut self, now: Instant) {
        let pending = self.encoder.queued() > 0;
        if pending != self.outbound_pending {
            self.outbound_pending = pending;
            if pending {
                self.lifecycle.handle_outbound_pending(now);
            } else {
                self.lifecycle.handle_outbound_drained(now);
            }
        }
    }
}

/// Why sending is no longer possible.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum Closed {
    /// Shutdown was asked.
    ShuttingDown,
    /// The child closed its stdin (a write failed).
    StdinClosedByChild,
    /// The child exited.
    Exited,
    /// The child did not read for the write timeout; stdin was closed.
    Stalled {
        /// How long the child read nothing.
        after: Duration,
    },
}

impl fmt::Display for Closed {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Closed::ShuttingDown => f.write_str("the transport is shutting down"),
            Closed::StdinClosedByChild => f.write_str("the child closed its stdin"),
            Closed::Exited => f.write_str("the child has exited"),
            Closed::Stalled { after } => write!(
                f,
                "the child read nothing from its stdin for {:.1} s (write timeout); stdin was closed",
                after.as_secs_f64()
            ),
        }
    }
}

/// Why a message was not sent.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum SendErrorKind {
    /// The payload is empty: a blank line is not a message.
    Empty,
    /// The payload contains `\n` at byte `at` (C06).
    Newline {
        /// Byte offset of the first `\n`.
        at: usize,
    },
    /// The payload contains `\r` at byte `at` (C06).
    CarriageReturn {
        /// Byte offset of the first `\r`.
        at: usize,
    },
    /// The payload is over the send limit (C06).
    TooLarge {
        /// The payload's length.
        len: usize,
        /// The limit.
        max: usize,
    },
    /// The queue is full: wait and retry. Async adapters do this themselves.
    Full,
    /// Sending is over (C07, C12).
    Closed(Closed),
}

impl From<EncodeErrorKind> for SendErrorKind {
    fn from(kind: EncodeErrorKind) -> Self {
        match kind {
            EncodeErrorKind::Empty => SendErrorKind::Empty,
            EncodeErrorKind::Newline { at } => SendErrorKind::Newline { at },
            EncodeErrorKind::CarriageReturn { at } => SendErrorKind::CarriageReturn { at },
            EncodeErrorKind::TooLarge { len, max } => SendErrorKind::TooLarge { len, max },
            _ => SendErrorKind::Full,
        }
    }
}

impl fmt::Display for SendErrorKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match *self {
            SendErrorKind::Empty => EncodeErrorKind::Empty.fmt(f),
            SendErrorKind::Newline { at } => EncodeErrorKind::Newline { at }.fmt(f),
            SendErrorKind::CarriageReturn { at } => EncodeErrorKind::CarriageReturn { at }.fmt(f),
            SendErrorKind::TooLarge { len, max } => EncodeErrorKind::TooLarge { len, max }.fmt(f),
            SendErrorKind::Full => f.write_str("the child's stdin queue is full"),
            SendErrorKind::Closed(closed) => write!(f, "cannot send: {closed}"),
        }
    }
}

/// A message that was not sent, with the reason and the payload handed back.
pub struct SendError<B> {
    kind: SendErrorKind,
    payload: B,
}

impl<B> SendError<B> {
    /// An error of `kind` for `payload`.
    pub fn new(kind: SendErrorKind, payload: B) -> Self {
        Self { kind, payload }
    }

    /// Why the message was not sent.
    pub fn kind(&self) -> SendErrorKind {
        self.kind
    }

    /// The payload, unchanged.
    pub fn into_payload(self) -> B {
        self.payload
    }

    /// The payload converted, e.g. to `Bytes`.
    pub fn map_payload<C>(self, f: impl FnOnce(B) -> C) -> SendError<C> {
        SendError {
            kind: self.kind,
            payload: f(self.payload),
        }
    }
}

impl<B: AsRef<[u8]>> fmt::Debug for SendError<B> {
    // The payload may be megabytes: show its length, not its bytes.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SendError")
            .field("kind", &self.kind)
            .field("payload_len", &self.payload.as_ref().len())
            .finish()
    }
}

impl<B> fmt::Display for SendError<B> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.kind.fmt(f)
    }
}

impl<B: AsRef<[u8]>> std::error::Error for SendError<B> {}
