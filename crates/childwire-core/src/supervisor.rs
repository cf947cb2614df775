//! The child-process part of a [`Session`](crate::Session): its lifecycle,
//! its stderr tail and lines, and the exit report they make.

use std::time::Instant;

use bytes::Bytes;

use crate::config::Config;
use crate::ending::{EndedBy, Exit, Signal, Swept};
use crate::goodbye::Farewell;
use crate::inbound::Backlog;
use crate::lifecycle::{Action, Lifecycle, Phase, SignalError};
use crate::outbound::Closed;
use crate::report::{Counters, ExitReport};
use crate::stderr_tail::StderrTail;

/// Whether a failed send waits for the exit report: see
/// [`Session::report_wait`](crate::Session::report_wait).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ReportWait {
    /// No: the end is not known to be near.
    No,
    /// Until the report comes: the child was reaped.
    Certain,
    /// Until the report comes or this deadline passes.
    Until(Instant),
}

/// The child itself: when to close its stdin and signal it, its stderr,
/// and the report of its end.
#[derive(Debug)]
pub(crate) struct Supervisor {
    pub(crate) lifecycle: Lifecycle,
    stderr: StderrTail,
    /// The end, decided by the lifecycle, not yet handed out.
    ended: Option<ExitReport>,
    /// The report was handed out (it is built once).
    reported: bool,
    /// When stdin was first seen closed: the start of the wait for the end
    /// that a send refused by a closed stdin is given.
    stdin_closed_at: Option<Instant>,
    /// Stderr lines were handed out and their delivery not yet confirmed:
    /// the report waits for them.
    stderr_unconfirmed: bool,
    callback_panicked: bool,
    /// When the child was spawned, and when it last wrote to stderr.
    pub(crate) spawned_at: Instant,
    pub(crate) last_stderr_at: Option<Instant>,
    /// Whether every handle's drop (without a shutdown) kills the child.
    pub(crate) kill_on_drop: bool,
    /// What a shutdown says before closing stdin (nothing, without a
    /// goodbye configured).
    pub(crate) farewell: Farewell,
}

impl Supervisor {
    pub(crate) fn new(config: &Config, process_group: bool, now: Instant) -> Self {
        let mut lifecycle = Lifecycle::new(config.lifecycle.clone(), process_group, now);
        lifecycle.handle_outbound_drained(now);
        Self {
            lifecycle,
            stderr: StderrTail::new(config.stderr_tail.clone()),
            ended: None,
            reported: false,
            stdin_closed_at: None,
            stderr_unconfirmed: false,
            callback_panicked: false,
            spawned_at: now,
            last_stderr_at: None,
            kill_on_drop: true,
            farewell: Farewell::new(config.goodbye.clone().unwrap_or_default()),
        }
    }

    pub(crate) fn handle_stderr(&mut self, data: &[u8], now: Instant) {
        if !data.is_empty() {
            self.last_stderr_at = Some(now);
        }
        self.stderr.handle_data(data);
        self.lifecycle.handle_timeout(now);
        self.advance();
    }

    pub(crate) fn handle_stderr_eof(&mut self, now: Instant) {
        self.stderr.handle_eof();
        self.lifecycle.handle_stderr_eof(now);
        self.advance();
    }

    pub(crate) fn handle_stdout_eof(&mut self, now: Instant) {
        self.lifecycle.handle_stdout_eof(now);
        self.advance();
    }

    /// Whether the queue for stdin is written out (a shutdown waits for it
    /// before closing stdin). Told only while that matters.
    pub(crate) fn handle_outbound(&mut self, drained: bool, now: Instant) {
        if drained {
            self.lifecycle.handle_outbound_drained(now);
        } else {
            self.lifecycle.handle_outbound_pending(now);
        }
        self.advance();
    }

    pub(crate) fn handle_close_stdin(&mut self, now: Instant) {
        self.farewell.handle_stop();
        self.lifecycle.handle_close_stdin(now);
        self.advance();
    }

    pub(crate) fn handle_stdin_closed(&mut self, now: Instant) {
        self.stdin_closed_at.get_or_insert(now);
        self.farewell.handle_stop();
        self.lifecycle.handle_stdin_closed(now);
        self.advance();
    }

    pub(crate) fn handle_exit(&mut self, exit: Exit, now: Instant) {
        self.farewell.handle_stop();
        self.lifecycle.handle_exit(exit, now);
        self.advance();
    }

    pub(crate) fn handle_signal_failed(&mut self, signal: Signal, err: SignalError, now: Instant) {
        self.lifecycle.handle_signal_failed(signal, err, now);
        self.advance();
    }

    pub(crate) fn handle_swept(&mut self, swept: Swept, now: Instant) {
        self.lifecycle.handle_swept(swept, now);
        self.advance();
    }

    pub(crate) fn handle_sweep_progress(&mut self, so_far: Swept, passed: bool, now: Instant) {
        self.lifecycle.handle_sweep_progress(so_far, passed, now);
        self.advance();
    }

    pub(crate) fn handle_driver_stopped(&mut self, now: Instant) {
        self.farewell.handle_stop();
        self.lifecycle.handle_driver_stopped(now);
        self.advance();
    }

    pub(crate) fn handle_stderr_callback_panicked(&mut self) {
        self.callback_panicked = true;
    }

    pub(crate) fn handle_abandoned(&mut self, now: Instant) {
        self.farewell.handle_stop();
        self.lifecycle.handle_abandoned(self.kill_on_drop, now);
        self.advance();
    }

    pub(crate) fn handle_timeout(&mut self, now: Instant) {
        self.farewell.handle_timeout(now);
        self.lifecycle.handle_timeout(now);
        self.advance();
    }

    /// A shutdown was asked: its goodbye begins if the child may still
    /// hear it (running, stdin open). Before [`handle_shutdown`](Self::handle_shutdown),
    /// so that the goodbye is queued before stdin may close.
    pub(crate) fn begin_goodbye(&mut self) {
        if self.lifecycle.phase() == Phase::Running && !self.lifecycle.is_stdin_closed() {
            self.farewell.handle_begin();
        }
    }

    pub(crate) fn handle_shutdown(&mut self, now: Instant) {
        self.lifecycle.handle_shutdown(now);
        self.advance();
    }

    pub(crate) fn handle_kill(&mut self, now: Instant) {
        self.farewell.handle_stop();
        self.lifecycle.handle_kill(now);
        self.advance();
    }

    pub(crate) fn poll_action(&mut self) -> Option<Action> {
        self.lifecycle.poll_action()
    }

    pub(crate) fn poll_signal(&mut self) -> Option<Signal> {
        self.lifecycle.poll_signal()
    }

    pub(crate) fn poll_stderr_line(&mut self) -> Option<Bytes> {
        let line = self.stderr.poll_line()?;
        self.stderr_unconfirmed = true;
        Some(line)
    }

    pub(crate) fn handle_stderr_delivered(&mut self) {
        self.stderr_unconfirmed = false;
    }

    /// The exit report, once: when the end is decided and every stderr line
    /// was delivered, completed with `counters` and `backlog` as they are
    /// now.
    pub(crate) fn take_report(
        &mut self,
        counters: Counters,
        backlog: Backlog,
    ) -> Option<ExitReport> {
        if self.stderr_unconfirmed {
            return None;
        }
        let mut report = self.ended.take()?;
        self.reported = true;
        report.counters = Counters {
            stderr_bytes: self.stderr.bytes_seen(),
            ..counters
        };
        report.stderr_callback_panicked = self.callback_panicked;
        report.unreceived_messages = backlog.messages;
        report.unreceived_bytes = backlog.bytes;
        report.stdout_held_back = backlog.held_back;
        Some(report)
    }

    /// Whether the report was handed out.
    pub(crate) fn reported(&self) -> bool {
        self.reported
    }

    /// Whether the end is decided (the report may wait for stderr lines).
    pub(crate) fn end_decided(&self) -> bool {
        self.ended.is_some() || self.reported
    }

    pub(crate) fn has_stderr_unconfirmed(&self) -> bool {
        self.stderr_unconfirmed
    }

    pub(crate) fn poll_timeout(&self) -> Option<Instant> {
        match (self.lifecycle.poll_timeout(), self.farewell.poll_timeout()) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        }
    }

    pub(crate) fn exited(&self) -> bool {
        self.lifecycle.exit().is_some()
    }

    pub(crate) fn is_flushing(&self) -> bool {
        self.lifecycle.phase() == Phase::Flushing
    }

    pub(crate) fn stderr_bytes(&self) -> u64 {
        self.stderr.bytes_seen()
    }

    /// See [`Session::report_wait`](crate::Session::report_wait).
    pub(crate) fn report_wait(&self, closed: Closed, now: Instant) -> ReportWait {
        if self.reported {
            return ReportWait::No;
        }
        if self.ended.is_some() {
            return ReportWait::Certain;
        }
        let config = self.lifecycle.config();
        match closed {
            Closed::Exited | Closed::DriverStopped => ReportWait::Certain,
            Closed::PeerClosed if self.exited() => ReportWait::Certain,
            Closed::PeerClosed => {
                // From when stdin was seen closed, so that asking again
                // gives the same deadline, and the answer once it passed.
                // Graces too long to count (`Duration::MAX`): no end is
                // near.
                let since = self.stdin_closed_at.unwrap_or(now);
                let deadline = config
                    .stdin_grace
                    .checked_add(config.drain_grace)
                    .and_then(|grace| since.checked_add(grace));
                match deadline {
                    Some(deadline) if now < deadline => ReportWait::Until(deadline),
                    _ => ReportWait::No,
                }
            }
            _ => ReportWait::No,
        }
    }

    fn advance(&mut self) {
        if let Some(mut report) = self.lifecycle.poll_end() {
            // A child that ends before any signal, once its goodbye was
            // said, ended by the goodbye (its stdin may have closed right
            // after the last message).
            if self.farewell.has_said()
                && matches!(report.ended_by, EndedBy::OnItsOwn | EndedBy::StdinClose)
            {
                report.ended_by = EndedBy::Goodbye;
            }
            report.stderr_tail = self.stderr.tail();
            self.ended = Some(report);
        }
    }
}
