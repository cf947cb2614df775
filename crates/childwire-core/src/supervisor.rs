//! The child-process part of a transport: its lifecycle, its stderr tail
//! and the exit report they make, with no channel in it.

use std::time::Instant;

use bytes::Bytes;

use crate::config::Config;
use crate::ending::{Exit, Signal, Swept};
use crate::inbound::Backlog;
use crate::lifecycle::{Action, Lifecycle, SignalError};
use crate::outbound::Closed;
use crate::report::{Counters, ExitReport};
use crate::stderr_tail::StderrTail;

/// Whether a failed send waits for the exit report: see
/// [`Supervisor::report_wait`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ReportWait {
    /// No: the end is not known to be near.
    No,
    /// Until the report comes: the child was reaped.
    Certain,
    /// Until the report comes or this deadline passes.
    Until(Instant),
}

/// Everything a transport decides about the child itself: when to close
/// its stdin and signal it, its stderr lines and tail, and the exit report.
///
/// [`Session`](crate::Session) is this plus a channel on the child's stdin
/// and stdout, for one owner. A transport that drives each pipe from a
/// different task uses the [`Inbound`](crate::Inbound) and
/// [`Outbound`](crate::Outbound) halves on their own and routes their
/// events here, as `Session` does.
///
/// # Inputs
///
/// From the channel: [`handle_stdout_eof`](Self::handle_stdout_eof),
/// [`handle_outbound`](Self::handle_outbound) (whether bytes wait for
/// stdin), [`handle_close_stdin`](Self::handle_close_stdin) (the write
/// timeout gave up), [`handle_stdin_closed`](Self::handle_stdin_closed).
/// From the OS: [`handle_stderr`](Self::handle_stderr),
/// [`handle_stderr_eof`](Self::handle_stderr_eof),
/// [`handle_exit`](Self::handle_exit),
/// [`handle_signal_failed`](Self::handle_signal_failed),
/// [`handle_swept`](Self::handle_swept),
/// [`handle_driver_stopped`](Self::handle_driver_stopped),
/// [`handle_timeout`](Self::handle_timeout). From the caller:
/// [`handle_shutdown`](Self::handle_shutdown).
///
/// # Outputs, drained in this order after every input
///
/// 1. [`poll_action`](Self::poll_action) until `None`.
/// 2. [`poll_stderr_line`](Self::poll_stderr_line) until `None`, then
///    [`handle_stderr_delivered`](Self::handle_stderr_delivered) once the
///    lines were handed on: the report waits for it.
/// 3. [`take_report`](Self::take_report): the report, once, when the end is
///    decided and every stderr line was delivered.
/// 4. [`poll_timeout`](Self::poll_timeout).
///
/// A driver that hands the report to a receiver after frames the receive
/// bound held back (read after the report was taken) hands it on as
/// [`final_report`](Self::final_report) says.
#[derive(Debug)]
pub struct Supervisor {
    lifecycle: Lifecycle,
    stderr: StderrTail,
    /// The end, decided by the lifecycle, not yet taken.
    report: Option<ExitReport>,
    /// The report as [`take_report`](Self::take_report) handed it out.
    taken: Option<ExitReport>,
    /// Stdout and stderr reached EOF, as told.
    stdout_eof: bool,
    stderr_eof: bool,
    /// The caller's backlog was recorded in the report.
    backlog_recorded: bool,
    /// Stderr lines were handed out and their delivery not yet confirmed.
    stderr_unconfirmed: bool,
    /// What the lifecycle was last told: bytes wait for stdin.
    outbound_pending: bool,
    /// The caller's stderr callback panicked: the report says so.
    callback_panicked: bool,
    /// When the child was spawned, and when it last wrote to stderr: for
    /// a start-up verdict ([`Startup`](crate::startup::Startup)) taken by
    /// a task that does not see the stderr pipe.
    spawned_at: Instant,
    last_stderr_at: Option<Instant>,
}

impl Supervisor {
    /// The supervision of a child spawned at `now`; with `process_group`,
    /// it leads its own group (see [`Lifecycle::new`]). Its write queue
    /// starts empty.
    pub fn new(config: &Config, process_group: bool, now: Instant) -> Self {
        let mut lifecycle = Lifecycle::new(config.lifecycle.clone(), process_group, now);
        lifecycle.handle_outbound_drained(now);
        Self {
            lifecycle,
            stderr: StderrTail::new(config.stderr_tail.clone()),
            report: None,
            taken: None,
            stdout_eof: false,
            stderr_eof: false,
            backlog_recorded: false,
            stderr_unconfirmed: false,
            outbound_pending: false,
            callback_panicked: false,
            spawned_at: now,
            last_stderr_at: None,
        }
    }

    // ---- inputs ----

    /// The child's stdout reached EOF.
    pub fn handle_stdout_eof(&mut self, now: Instant) {
        self.stdout_eof = true;
        self.lifecycle.handle_stdout_eof(now);
        self.advance();
    }

    /// Bytes read from the child's stderr.
    pub fn handle_stderr(&mut self, data: &[u8], now: Instant) {
        if !data.is_empty() {
            self.last_stderr_at = Some(now);
        }
        self.stderr.handle_data(data);
        self.lifecycle.handle_timeout(now);
        self.advance();
    }

    /// The child's stderr reached EOF, or it has no stderr pipe (then call
    /// this at spawn).
    pub fn handle_stderr_eof(&mut self, now: Instant) {
        self.stderr_eof = true;
        self.stderr.handle_eof();
        self.lifecycle.handle_stderr_eof(now);
        self.advance();
    }

    /// Whether bytes wait to be written to stdin; a shutdown flushes them
    /// before closing it. Repeating the same value is cheap.
    pub fn handle_outbound(&mut self, pending: bool, now: Instant) {
        if pending != self.outbound_pending {
            self.outbound_pending = pending;
            if pending {
                self.lifecycle.handle_outbound_pending(now);
            } else {
                self.lifecycle.handle_outbound_drained(now);
            }
            self.advance();
        }
    }

    /// The channel gave up on stdin (its write timeout ran out): stdin is
    /// closed through [`Action::CloseStdin`], and the end counts as after
    /// stdin was closed.
    pub fn handle_close_stdin(&mut self, now: Instant) {
        self.lifecycle.handle_close_stdin(now);
        self.advance();
    }

    /// Stdin was closed: as asked, or broken by the child.
    pub fn handle_stdin_closed(&mut self, now: Instant) {
        self.lifecycle.handle_stdin_closed(now);
        self.advance();
    }

    /// The child was reaped with `exit`.
    pub fn handle_exit(&mut self, exit: Exit, now: Instant) {
        self.lifecycle.handle_exit(exit, now);
        self.advance();
    }

    /// Delivering `signal` failed with `err`.
    pub fn handle_signal_failed(&mut self, signal: Signal, err: SignalError, now: Instant) {
        self.lifecycle.handle_signal_failed(signal, err, now);
        self.advance();
    }

    /// The [`Action::Sweep`] was carried out and found `swept`.
    pub fn handle_swept(&mut self, swept: Swept, now: Instant) {
        self.lifecycle.handle_swept(swept, now);
        self.advance();
    }

    /// The driver stops for good: kill and sweep now, and report the end
    /// as soon as the exit is known (see
    /// [`Lifecycle::handle_driver_stopped`]).
    pub fn handle_driver_stopped(&mut self, now: Instant) {
        self.lifecycle.handle_driver_stopped(now);
        self.advance();
    }

    /// The caller's stderr callback panicked while a line was handed on:
    /// the report says so.
    pub fn handle_stderr_callback_panicked(&mut self) {
        self.callback_panicked = true;
    }

    /// Every handle on the transport was dropped without a shutdown: kill
    /// the child with `kill_on_drop`, else leave it running with its stdin
    /// closed (see [`Lifecycle::handle_abandoned`]).
    pub fn handle_abandoned(&mut self, kill_on_drop: bool, now: Instant) {
        self.lifecycle.handle_abandoned(kill_on_drop, now);
        self.advance();
    }

    /// Time passed.
    pub fn handle_timeout(&mut self, now: Instant) {
        self.lifecycle.handle_timeout(now);
        self.advance();
    }

    /// The caller asked for the graceful shutdown.
    pub fn handle_shutdown(&mut self, now: Instant) {
        self.lifecycle.handle_shutdown(now);
        self.advance();
    }

    /// The caller asked to kill the child now (see
    /// [`Lifecycle::handle_kill`]).
    pub fn handle_kill(&mut self, now: Instant) {
        self.lifecycle.handle_kill(now);
        self.advance();
    }

    /// What the caller has not received yet
    /// ([`Inbound::backlog`](crate::Inbound::backlog)). Recorded in the report once, by the first call
    /// after the end is decided, so the report tells how far behind the
    /// caller was when it was made; other calls change nothing. Call it
    /// after every input that may decide the end.
    pub fn handle_backlog(&mut self, backlog: Backlog) {
        if self.backlog_recorded {
            return;
        }
        if let Some(report) = self.report.as_mut() {
            self.backlog_recorded = true;
            report.unreceived_messages = backlog.messages;
            report.unreceived_bytes = backlog.bytes;
            report.stdout_held_back = backlog.held_back;
        }
    }

    // ---- outputs ----

    /// The next thing to do to the child.
    #[must_use = "actions must be carried out"]
    pub fn poll_action(&mut self) -> Option<Action> {
        self.lifecycle.poll_action()
    }

    /// The next complete stderr line.
    #[must_use = "stderr lines are dropped unless polled"]
    pub fn poll_stderr_line(&mut self) -> Option<Bytes> {
        let line = self.stderr.poll_line()?;
        self.stderr_unconfirmed = true;
        Some(line)
    }

    /// The lines from [`poll_stderr_line`](Self::poll_stderr_line) were
    /// handed on. Releases the exit report.
    pub fn handle_stderr_delivered(&mut self) {
        self.stderr_unconfirmed = false;
    }

    /// The exit report, once: when the end is decided and every stderr line
    /// was delivered. `channel` are the channel's counters at that moment.
    #[must_use = "the exit report is handed out once"]
    pub fn take_report(&mut self, channel: Counters) -> Option<ExitReport> {
        if self.stderr_unconfirmed {
            return None;
        }
        let mut report = self.report.take()?;
        report.counters = Counters {
            stderr_bytes: self.stderr.bytes_seen(),
            ..channel
        };
        report.stderr_callback_panicked = self.callback_panicked;
        self.taken = Some(report.clone());
        Some(report)
    }

    /// The report as the receiver gets it, after the frames read since
    /// [`take_report`](Self::take_report) handed it out (the receive bound
    /// held them back in stdout): the same end and stderr, with `channel`'s
    /// counters now, and, if stdout was held back by that bound when the
    /// end was decided, its pipes drained once both reached EOF (late
    /// because of the caller, not held by anything the child started).
    /// `None` before the report was taken.
    #[must_use]
    pub fn final_report(&self, channel: Counters) -> Option<ExitReport> {
        let mut report = self.taken.clone()?;
        report.counters = Counters {
            stderr_bytes: report.counters.stderr_bytes,
            ..channel
        };
        report.pipes_drained |= report.stdout_held_back && self.stdout_eof && self.stderr_eof;
        Some(report)
    }

    /// When [`handle_timeout`](Self::handle_timeout) must be called next.
    #[must_use]
    pub fn poll_timeout(&self) -> Option<Instant> {
        self.lifecycle.poll_timeout()
    }

    /// What a drop without shutdown must do: SIGKILL to the child (its
    /// group, with one) unless it was already reaped.
    #[must_use]
    pub fn drop_action(&self) -> Option<Action> {
        self.lifecycle
            .exit()
            .is_none()
            .then_some(Action::Signal(Signal::Kill))
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
    ///   for `drain_grace` more. A child that runs on with its stdin closed
    ///   costs the failing send that long, once.
    /// - The end is decided, the report not taken yet: certain too.
    /// - Otherwise (the caller closed, the child stalled, the report was
    ///   already taken): [`ReportWait::No`].
    #[must_use]
    pub fn report_wait(&self, closed: Closed, now: Instant) -> ReportWait {
        if self.taken.is_some() {
            // Known: whoever took it recorded it for the sender to find.
            return ReportWait::No;
        }
        if self.report.is_some() {
            // Decided, and handed out once its stderr lines are delivered.
            return ReportWait::Certain;
        }
        let config = self.lifecycle.config();
        match closed {
            Closed::Exited => ReportWait::Certain,
            Closed::PeerClosed if self.lifecycle.exit().is_some() => ReportWait::Certain,
            Closed::PeerClosed => ReportWait::Until(now + config.stdin_grace + config.drain_grace),
            _ => ReportWait::No,
        }
    }

    /// Whether a driver that leaves stdout to its caller (who reads it in
    /// `recv`) reads it itself now: after the exit, until the report is
    /// taken. Nobody may be receiving then, and the end waits for stdout's
    /// EOF (or `drain_grace`); what is read stays within the receive bound.
    #[must_use]
    pub fn driver_reads_stdout(&self) -> bool {
        self.lifecycle.exit().is_some() && self.taken.is_none()
    }

    /// Whether the end is decided and the report can be taken now.
    pub fn report_ready(&self) -> bool {
        self.report.is_some() && !self.stderr_unconfirmed
    }

    /// Whether the report was taken.
    pub fn report_taken(&self) -> bool {
        self.taken.is_some()
    }

    /// The lifecycle, for its phase and settings.
    pub fn lifecycle(&self) -> &Lifecycle {
        &self.lifecycle
    }

    /// Bytes the child wrote to stderr so far.
    pub fn stderr_bytes(&self) -> u64 {
        self.stderr.bytes_seen()
    }

    /// When the child was spawned (the `now` given to [`new`](Self::new)).
    #[must_use]
    pub fn spawned_at(&self) -> Instant {
        self.spawned_at
    }

    /// When the child last wrote to stderr (the `now` of the latest
    /// [`handle_stderr`](Self::handle_stderr) with bytes); `None` before
    /// its first stderr output.
    #[must_use]
    pub fn last_stderr_at(&self) -> Option<Instant> {
        self.last_stderr_at
    }

    fn advance(&mut self) {
        if let Some(mut report) = self.lifecycle.poll_end() {
            report.stderr_tail = self.stderr.tail();
            self.report = Some(report);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Carries out the actions with nothing found by the sweep.
    fn carry_out(sup: &mut Supervisor, now: Instant) {
        while let Some(action) = sup.poll_action() {
            if action == Action::Sweep {
                sup.handle_swept(Swept::default(), now);
            }
        }
    }

    #[test]
    fn the_final_report_is_the_taken_one_with_the_counters_and_the_pipes_as_they_are_now() {
        let now = Instant::now();
        let config = Config::default();
        let mut sup = Supervisor::new(&config, true, now);
        sup.handle_stderr(b"cannot open database\n", now);
        sup.handle_stderr_eof(now);
        sup.handle_exit(Exit::Code(3), now);
        carry_out(&mut sup, now);
        while sup.poll_stderr_line().is_some() {}
        sup.handle_stderr_delivered();
        assert!(
            sup.final_report(Counters::default()).is_none(),
            "nothing taken yet"
        );

        // Stdout held back by the receive bound: the end is decided at the
        // drain grace, without its EOF.
        let later = now + config.lifecycle.drain_grace;
        sup.handle_timeout(later);
        carry_out(&mut sup, later);
        sup.handle_backlog(Backlog {
            messages: 2,
            bytes: 2,
            held_back: true,
        });
        let at_the_end = Counters {
            messages_in: 2,
            ..Counters::default()
        };
        let taken = sup.take_report(at_the_end).expect("decided");
        assert!(!taken.pipes_drained);

        // The receiver drained stdout since: three more messages, and EOF.
        sup.handle_stdout_eof(later);
        let now_counted = Counters {
            messages_in: 5,
            ..Counters::default()
        };
        let last = sup.final_report(now_counted).expect("taken");
        assert_eq!(last.counters.messages_in, 5);
        assert_eq!(last.counters.stderr_bytes, taken.counters.stderr_bytes);
        assert!(last.pipes_drained, "both pipes reached EOF after all");
        assert_eq!(
            (last.exit, last.ended_by, &last.stderr_tail),
            (taken.exit, taken.ended_by, &taken.stderr_tail)
        );
    }

    #[test]
    fn a_late_eof_drains_the_pipes_in_the_final_report_only_if_the_caller_held_stdout_back() {
        let now = Instant::now();
        let config = Config::default();
        let mut sup = Supervisor::new(&config, true, now);
        sup.handle_exit(Exit::Code(0), now);
        let later = now + config.lifecycle.drain_grace;
        // Something the child started held the pipes: the grace ran out.
        sup.handle_timeout(later);
        carry_out(&mut sup, later);
        let taken = sup.take_report(Counters::default()).expect("decided");
        assert!(!taken.pipes_drained && !taken.stdout_held_back);

        // The sweep ended the holder: EOF on both, after the end.
        sup.handle_stdout_eof(later);
        sup.handle_stderr_eof(later);
        let last = sup.final_report(Counters::default()).expect("taken");
        assert!(!last.pipes_drained, "held at the exit, as reported");
    }
}
