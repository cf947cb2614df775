//! The background task of a child transport: what must happen while no
//! caller is there. It drains stderr, watches the exit, runs the shutdown
//! timers and signals, flushes what senders queued and left, and after the
//! exit reads the rest of stdout within the receive bound. Every decision is
//! the supervisor's; this task only carries events and actions.

use childwire_core::stderr_level::{Level, level_of};
use std::future::Future;
use std::io;
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::pin::Pin;
use std::process::ExitStatus;
use std::sync::Arc;
use std::task::{Context, Poll, Waker};
use std::time::Instant;

use bytes::Bytes;
use childwire_core::{Action, Closed, Framing, Supervisor, joint};

use crate::StderrCallback;
use crate::in_side::{ReadOutcome, StreamEnd};
use crate::link::Link;
use crate::os;
use crate::runtime::{PipeRead, Runtime};
use crate::sync::{Deadline, lock};
use crate::wake::Readiness;

/// Stderr is for diagnostics: smaller reads keep an idle child's footprint
/// small, and a flood only takes more rounds.
const STDERR_CHUNK: usize = 8 * 1024;

/// Rounds per poll before yielding, so a child that floods its pipes cannot
/// starve the runtime's other tasks.
const ROUNDS_PER_POLL: usize = 32;

pub(crate) struct Control<R: Runtime, F: Framing> {
    link: Arc<Link<F>>,
    rt: R,
    /// The child as the OS knows it: signals, the sweep, the drop path's wait.
    tracking: os::Tracking,
    program: String,
    exit: Option<Pin<Box<dyn Future<Output = io::Result<ExitStatus>> + Send>>>,
    stderr: Option<Box<dyn PipeRead>>,
    /// Whether stderr may have something, and the waker that says so.
    stderr_ready: Arc<Readiness>,
    stderr_waker: Waker,
    stderr_buf: Box<[u8]>,
    on_stderr_line: Option<StderrCallback>,
    /// Lines taken from the supervisor, delivered outside every lock.
    stderr_lines: Vec<Bytes>,
    /// The callback panicked once; it is not called again.
    callback_panicked: bool,
    timer: Deadline,
    /// This child's span: its events carry its pid and program.
    span: tracing::Span,
}

pub(crate) struct ControlParts {
    pub(crate) tracking: os::Tracking,
    pub(crate) program: String,
    pub(crate) span: tracing::Span,
    pub(crate) exit: Pin<Box<dyn Future<Output = io::Result<ExitStatus>> + Send>>,
    pub(crate) stderr: Option<Box<dyn PipeRead>>,
    pub(crate) on_stderr_line: Option<StderrCallback>,
}

impl<R: Runtime, F: Framing> Control<R, F> {
    pub(crate) fn new(link: Arc<Link<F>>, rt: R, parts: ControlParts) -> Self {
        let chunk = parts.stderr.as_ref().map_or(0, |_| STDERR_CHUNK);
        let stderr_ready = Readiness::new(link.bg_waker());
        Self {
            stderr_waker: Waker::from(Arc::clone(&stderr_ready)),
            stderr_ready,
            link,
            rt,
            tracking: parts.tracking,
            program: parts.program,
            span: parts.span,
            exit: Some(parts.exit),
            stderr: parts.stderr,
            stderr_buf: vec![0; chunk].into_boxed_slice(),
            on_stderr_line: parts.on_stderr_line,
            stderr_lines: Vec::new(),
            callback_panicked: false,
            timer: Deadline::default(),
        }
    }

    /// One round: carries every event in, every action out. Returns whether
    /// anything happened, and the next deadline; `None` once the report is
    /// out and nothing is left to do.
    fn round(&mut self, cx: &mut Context<'_>) -> Option<(bool, Option<Instant>)> {
        let now = self.rt.now();
        let link = Arc::clone(&self.link);
        let mut progress = self.deliver_stderr_lines();

        // What the sending half did: flush for the senders, and its clock.
        let (write_failed, out_deadline) = {
            let mut out = lock(&link.out);
            if out.flush_armed {
                out = link.out.poll_write_queued(out, Some(cx.waker()), now).0;
            }
            out.outbound.handle_timeout(now);
            (
                std::mem::take(&mut out.write_failed),
                out.outbound.poll_timeout(),
            )
        };

        // The OS's events, without any lock.
        let mut stderr_read = None;
        if let Some(pipe) = self.stderr.as_mut().filter(|_| self.stderr_ready.take()) {
            let mut stderr_cx = Context::from_waker(&self.stderr_waker);
            if let Poll::Ready(result) = pipe.poll_read(&mut stderr_cx, &mut self.stderr_buf) {
                self.stderr_ready.mark();
                stderr_read = Some(result);
                progress = true;
            }
        }
        let mut exited = None;
        if let Some(exit) = self.exit.as_mut() {
            if let Poll::Ready(status) = exit.as_mut().poll(cx) {
                self.exit = None;
                exited = Some(status);
                progress = true;
            }
        }

        // Every event to the core, routed by the core (the order is always
        // supervisor, then out).
        let mut sup = lock(link.supervisor.as_ref()?);
        {
            let mut out = lock(&link.out);
            if write_failed {
                joint::stdin_closed(&mut out.outbound, &mut sup, Closed::PeerClosed, now);
            }
            if let Some(status) = exited {
                let exit = match status {
                    Ok(status) => os::exit_of(status),
                    Err(err) => {
                        // Only possible if something else reaped our child.
                        tracing::warn!(program = %self.program, "waiting for the child failed: {err}");
                        childwire_core::Exit::Code(-1)
                    }
                };
                joint::exited(&mut out.outbound, &mut sup, exit, now);
                out.close_pipe();
            }
            joint::route_outbound(&out.outbound, &mut sup, now);
        }
        match stderr_read {
            Some(Ok(n)) if n > 0 => sup.handle_stderr(&self.stderr_buf[..n], now),
            Some(result) => {
                if let Err(err) = result {
                    tracing::warn!(program = %self.program, "reading the child's stderr failed: {err}");
                }
                self.stderr = None;
                sup.handle_stderr_eof(now);
            }
            None => {}
        }
        if sup.poll_timeout().is_some_and(|at| at <= now) {
            sup.handle_timeout(now);
        }
        while let Some(action) = sup.poll_action() {
            progress = true;
            self.carry_out(&mut sup, action, now, false);
        }
        self.stderr_lines
            .extend(std::iter::from_fn(|| sup.poll_stderr_line()));
        let (ready, taken) = (sup.report_ready(), sup.report_taken());
        let reads_stdout = sup.driver_reads_stdout();
        let deadline = earliest(sup.poll_timeout(), out_deadline);
        drop(sup);
        if ready && !taken {
            self.publish_report();
            return Some((true, None));
        }
        if taken {
            // `shutdown()` has the report; the receiver gets it after what
            // the receive bound held back in stdout, read as the caller
            // makes room (the receiver wakes us). Stopping at the report
            // would drop those lines. Nothing more to read now, or nobody
            // left to read it: the report follows.
            return match self.read_held_back(cx) {
                Some(read) if !self.link.is_abandoned() => Some((progress || read, None)),
                _ => {
                    self.hand_over();
                    None
                }
            };
        }

        // The core's decision: after the exit, read the rest of stdout here
        // (within the receive bound) so its EOF is seen and the report made.
        if reads_stdout {
            let mut inn = lock(&link.inn);
            let read = inn.read_once(cx.waker(), &link.peer_turns);
            if !matches!(read, ReadOutcome::Pending | ReadOutcome::Stopped) {
                progress = true;
                inn.wake_waiters();
            }
            drop(inn);
            if matches!(read, ReadOutcome::Eof) {
                link.stdout_eof(now);
            }
        }
        Some((progress, deadline))
    }

    /// Reads stdout once after the end was decided: `Some(progress)` while
    /// bytes held back by the receive bound may be left, `None` once
    /// nothing more can be read now (EOF, or a quiet pipe something the
    /// child started still holds: the drain grace is over).
    fn read_held_back(&mut self, cx: &mut Context<'_>) -> Option<bool> {
        let mut inn = lock(&self.link.inn);
        match inn.read_once(cx.waker(), &self.link.peer_turns) {
            ReadOutcome::Progress => {
                inn.wake_waiters();
                Some(true)
            }
            ReadOutcome::Stopped if inn.is_held_back() => Some(false),
            _ => None,
        }
    }

    /// Takes the report from the supervisor, with the counters and the
    /// caller's backlog as the end is decided, into the link's exit slot:
    /// `shutdown()`, `kill()`, failed sends and exit handles have it. The
    /// receiver's turn follows with [`hand_over`](Self::hand_over).
    fn publish_report(&mut self) {
        let counters = self.link.counters();
        let backlog = lock(&self.link.inn).inbound.backlog();
        let Some(supervisor) = self.link.supervisor.as_ref() else {
            return;
        };
        let mut sup = lock(supervisor);
        sup.handle_backlog(backlog);
        if let Some(report) = sup.take_report(counters) {
            // Under the same lock as the supervisor's "taken": a sender that
            // finds the report taken finds it in the slot.
            self.link.exit.set(report);
        }
    }

    /// The report is the receiver's next item, after every frame read so
    /// far: the core completes it with the counters and the pipes' state
    /// as they are now ([`Supervisor::final_report`]).
    fn hand_over(&mut self) {
        let counters = self.link.counters();
        let mut inn = lock(&self.link.inn);
        let stdout_eof = inn.inbound.is_eof();
        // The pipe may still be held by something the child started: stop.
        inn.stop_reading();
        drop(inn);
        if let Some(supervisor) = &self.link.supervisor {
            let mut sup = lock(supervisor);
            if stdout_eof {
                // Seen by a receiver that has not told the supervisor yet.
                sup.handle_stdout_eof(self.rt.now());
            }
            if let Some(report) = sup.final_report(counters) {
                self.link.exit.complete(report);
            }
        }
        let mut inn = lock(&self.link.inn);
        inn.end = StreamEnd::ReportDue;
        inn.wake_waiters();
        drop(inn);
        lock(&self.link.out).wake_waiters();
    }

    /// Hands stderr lines to `tracing` and the callback, outside every
    /// lock (a callback may call back into the transport). A panicking
    /// callback is caught: the transport goes on, the report says so.
    fn deliver_stderr_lines(&mut self) -> bool {
        if self.stderr_lines.is_empty() {
            return false;
        }
        for line in self.stderr_lines.drain(..) {
            // The level the line names is read only if the event is enabled.
            tracing::debug!(
                target: "childwire::stderr",
                program = %self.program,
                child_level = level_of(&line).map_or("none", Level::as_str),
                "{}",
                String::from_utf8_lossy(&line)
            );
            if let (Some(callback), false) = (&self.on_stderr_line, self.callback_panicked) {
                if catch_unwind(AssertUnwindSafe(|| callback(&line))).is_err() {
                    tracing::error!(program = %self.program, "the stderr callback panicked; it is not called again");
                    self.callback_panicked = true;
                }
            }
        }
        if let Some(supervisor) = &self.link.supervisor {
            let mut sup = lock(supervisor);
            if self.callback_panicked {
                sup.handle_stderr_callback_panicked();
            }
            sup.handle_stderr_delivered();
        }
        true
    }
}

fn earliest(a: Option<Instant>, b: Option<Instant>) -> Option<Instant> {
    match (a, b) {
        (Some(a), Some(b)) => Some(a.min(b)),
        (a, b) => a.or(b),
    }
}

impl<R: Runtime, F: Framing> Future for Control<R, F> {
    type Output = ();

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        let this = self.get_mut();
        let span = this.span.clone();
        let _entered = span.enter();
        this.link.set_bg_waker(cx.waker());
        for _ in 0..ROUNDS_PER_POLL {
            let Some((progress, deadline)) = this.round(cx) else {
                // Lines taken in the last round still reach the callback.
                this.deliver_stderr_lines();
                return Poll::Ready(());
            };
            if !progress && !this.timer.poll(&this.rt, deadline, cx) {
                return Poll::Pending;
            }
        }
        cx.waker().wake_by_ref();
        Poll::Pending
    }
}

impl<R: Runtime, F: Framing> Drop for Control<R, F> {
    /// The task was dropped before the child's end (its runtime shut down):
    /// kill the child and sweep what it left, wait briefly for it to die so
    /// that it is reaped now (not left a zombie for a runtime that may never
    /// run again), and hand whoever waits the report, or else an error
    /// naming the cause.
    fn drop(&mut self) {
        let link = Arc::clone(&self.link);
        let Some(supervisor) = &link.supervisor else {
            return;
        };
        let mut sup = lock(supervisor);
        if sup.report_taken() {
            drop(sup);
            // Not handed to the receiver yet (lines held back for it).
            if lock(&link.inn).end == StreamEnd::Open {
                self.hand_over();
            }
            return;
        }
        let now = self.rt.now();
        sup.handle_driver_stopped(now);
        self.carry_out_final_actions(&mut sup, now);
        if sup.lifecycle().exit().is_none() {
            if let Some(exit) = self.tracking.wait_exited(DROP_REAP_WAIT) {
                let mut out = lock(&link.out);
                joint::exited(&mut out.outbound, &mut sup, exit, self.rt.now());
                out.close_pipe();
                drop(out);
                self.carry_out_final_actions(&mut sup, now);
            }
        }
        // The runtime's child type reaps an exited child when dropped.
        drop(self.exit.take());
        self.stderr_lines
            .extend(std::iter::from_fn(|| sup.poll_stderr_line()));
        let report_ready = sup.report_ready() || !self.stderr_lines.is_empty();
        drop(sup);
        if report_ready {
            // Its lines still reach the callback, then the report is out.
            self.deliver_stderr_lines();
            self.publish_report();
            if lock(supervisor).report_taken() {
                // No task is left to wait for the receiver: it gets the
                // report now, after what was read.
                self.hand_over();
                return;
            }
        }
        link.exit.close();
        let mut inn = lock(&link.inn);
        inn.end = StreamEnd::Over;
        inn.wake_waiters();
        drop(inn);
        let mut out = lock(&link.out);
        out.abort(Closed::DriverStopped);
        out.wake_waiters();
    }
}

/// How long a dropped driver waits for the child it just sent SIGKILL to
/// die, so that it can be reaped on the spot. SIGKILL takes effect within
/// milliseconds unless the child is stuck in the kernel; past this, the
/// runtime's child type is left to reap it.
const DROP_REAP_WAIT: std::time::Duration = std::time::Duration::from_secs(2);

impl<R: Runtime, F: Framing> Control<R, F> {
    /// The actions of a driver that stops: no timer will run them later.
    fn carry_out_final_actions(&self, sup: &mut Supervisor, now: Instant) {
        while let Some(action) = sup.poll_action() {
            self.carry_out(sup, action, now, true);
        }
    }

    /// Carries out one of the supervisor's actions, and reports back.
    /// `stopping`: the driver is being dropped with its runtime.
    fn carry_out(&self, sup: &mut Supervisor, action: Action, now: Instant, stopping: bool) {
        match action {
            Action::CloseStdin => {
                let mut out = lock(&self.link.out);
                joint::stdin_closed(&mut out.outbound, sup, Closed::Closing, now);
                out.close_pipe();
            }
            Action::Signal(signal) => {
                if let Err(err) = self.tracking.signal(action) {
                    sup.handle_signal_failed(signal, err, now);
                }
            }
            Action::Sweep => {
                // A stopping driver never waits for a scan: it hands the
                // search for escapees to the sweeper thread.
                let swept = if stopping {
                    self.tracking.sweep_stopping()
                } else {
                    self.tracking.sweep()
                };
                if swept.ended > 0 {
                    tracing::warn!(program = %self.program, "ended {} process(es) the child left behind", swept.ended);
                }
                sup.handle_swept(swept, now);
            }
        }
    }
}
