//! The task that owns the child: it moves bytes, time and signals between
//! the OS and the [`Session`](childwire_core::Session), and does what the
//! session decides. It decides nothing itself.
//!
//! Each round has two phases. Under the session lock it feeds in what the
//! last I/O brought, carries out the session's actions and takes the next
//! bytes to write. Without the lock it writes, reads and polls the exit, so
//! senders and the receiver never wait for a system call.

use std::future::Future;
use std::io;
use std::pin::Pin;
use std::process::ExitStatus;
use std::task::{Context, Poll};
use std::time::Instant;

use bytes::Bytes;
use childwire_core::session::StderrCallback;
use childwire_core::{Action, Command, StderrMode};

use crate::os;
use crate::runtime::{ChildProcess, Runtime};
use crate::shared::{SharedRef, State};

/// One stdout read's worth: what a Linux pipe holds.
const STDOUT_CHUNK: usize = 64 * 1024;

/// Stderr is for diagnostics: smaller reads keep an idle child's footprint
/// small, and a flood only takes more rounds.
const STDERR_CHUNK: usize = 8 * 1024;

/// Rounds per poll before yielding, so that a child that floods its pipes
/// cannot starve the other tasks of the runtime.
const ROUNDS_PER_POLL: usize = 32;

pub(crate) struct Driver<R: Runtime> {
    shared: SharedRef,
    child: R::Child,
    pid: Option<u32>,
    group: bool,
    program: String,
    on_stderr_line: Option<StderrCallback>,
    stdin_open: bool,
    /// Bytes were written since the last flush.
    unflushed: bool,
    stdout_open: bool,
    stderr_open: bool,
    exited: bool,
    /// The kill of an abandoned child was carried out.
    killed_on_abandon: bool,
    sleep: Option<(Instant, Pin<Box<R::Sleep>>)>,
    stdout_buf: Box<[u8]>,
    stderr_buf: Box<[u8]>,
    /// What the last I/O phase brought, for the next locked phase.
    done: IoDone,
    /// Stderr lines taken under the lock, delivered after it is released.
    stderr_lines: Vec<Bytes>,
}

/// Results of one I/O phase, fed to the session in the next locked phase.
#[derive(Default)]
struct IoDone {
    written: Option<io::Result<usize>>,
    stdout: Option<io::Result<usize>>,
    stderr: Option<io::Result<usize>>,
    exit: Option<io::Result<ExitStatus>>,
    stderr_delivered: bool,
}

/// A finished read of a pipe.
enum Read {
    Bytes(usize),
    End,
}

/// What the locked phase decided the I/O phase should do.
struct Plan {
    transmit: Option<Bytes>,
    read_stdout: bool,
}

impl<R: Runtime> Driver<R> {
    pub(crate) fn new(
        shared: SharedRef,
        child: R::Child,
        command: &Command,
        on_stderr_line: Option<StderrCallback>,
    ) -> Self {
        let stderr_open = command.get_stderr() == StderrMode::Capture;
        Self {
            shared,
            pid: child.id(),
            child,
            group: command.get_process_group(),
            program: command.get_program().to_string_lossy().into_owned(),
            on_stderr_line,
            stdin_open: true,
            unflushed: false,
            stdout_open: true,
            stderr_open,
            exited: false,
            killed_on_abandon: false,
            sleep: None,
            stdout_buf: vec![0; STDOUT_CHUNK].into_boxed_slice(),
            stderr_buf: vec![0; if stderr_open { STDERR_CHUNK } else { 0 }].into_boxed_slice(),
            done: IoDone::default(),
            stderr_lines: Vec::new(),
        }
    }

    /// The locked phase: feeds in what the I/O phase brought, carries out
    /// the session's actions and plans the next I/O; `None` once the end is
    /// reported.
    fn locked_phase(&mut self, state: &mut State, cx: &Context<'_>) -> Option<Plan> {
        if !state
            .driver_waker
            .as_ref()
            .is_some_and(|w| w.will_wake(cx.waker()))
        {
            state.driver_waker = Some(cx.waker().clone());
        }
        let now = Instant::now();
        self.feed(state, now);
        if state.abandoned && !self.killed_on_abandon {
            self.killed_on_abandon = true;
            if let Some(action) = state.session.drop_action() {
                self.carry_out(state, action, now);
            }
        }
        // Check the clock ourselves: a runtime may poll an elapsed timer late.
        if state.session.poll_timeout().is_some_and(|at| at <= now) {
            state.session.handle_timeout(now);
        }
        while let Some(action) = state.session.poll_action() {
            self.carry_out(state, action, now);
        }
        self.stderr_lines
            .extend(std::iter::from_fn(|| state.session.poll_stderr_line()));
        state.wake_users();
        if state.session.report().is_some() {
            // The end is known and every action carried out: what is left
            // in the receive queue is the handles' to take.
            return None;
        }
        let transmit = if self.stdin_open {
            state.session.poll_transmit(now)
        } else {
            None
        };
        Some(Plan {
            transmit,
            read_stdout: self.stdout_open && state.session.wants_stdout(),
        })
    }

    /// Hands the last I/O phase's results to the session.
    fn feed(&mut self, state: &mut State, now: Instant) {
        let done = std::mem::take(&mut self.done);
        if done.stderr_delivered {
            state.session.handle_stderr_delivered();
        }
        match done.written {
            Some(Ok(n)) => state.session.handle_written(n, now),
            Some(Err(err)) => {
                // EPIPE and friends: the child closed its stdin (or died).
                if err.kind() != io::ErrorKind::BrokenPipe {
                    tracing::debug!(program = %self.program, "writing to the child's stdin failed: {err}");
                }
                self.close_stdin(state, now);
            }
            None => {}
        }
        match self.read_done(done.stdout, "stdout") {
            Some(Read::Bytes(n)) => state.session.handle_stdout(&self.stdout_buf[..n], now),
            Some(Read::End) => {
                self.stdout_open = false;
                state.session.handle_stdout_eof(now);
            }
            None => {}
        }
        match self.read_done(done.stderr, "stderr") {
            Some(Read::Bytes(n)) => state.session.handle_stderr(&self.stderr_buf[..n], now),
            Some(Read::End) => {
                self.stderr_open = false;
                state.session.handle_stderr_eof(now);
            }
            None => {}
        }
        if let Some(status) = done.exit {
            let exit = match status {
                Ok(status) => os::exit_of(status),
                Err(err) => {
                    // Only possible if something else reaped our child;
                    // there is no status to report.
                    tracing::warn!(program = %self.program, "waiting for the child failed: {err}");
                    childwire_core::Exit::Code(-1)
                }
            };
            state.session.handle_exit(exit, now);
        }
    }

    /// What a finished read brought; a read error ends the pipe like EOF
    /// (and is logged).
    fn read_done(&self, result: Option<io::Result<usize>>, pipe: &str) -> Option<Read> {
        Some(match result? {
            Ok(0) => Read::End,
            Ok(n) => Read::Bytes(n),
            Err(err) => {
                tracing::warn!(program = %self.program, "reading the child's {pipe} failed: {err}");
                Read::End
            }
        })
    }

    fn close_stdin(&mut self, state: &mut State, now: Instant) {
        self.child.close_stdin();
        self.stdin_open = false;
        state.session.handle_stdin_closed(now);
    }

    fn carry_out(&mut self, state: &mut State, action: Action, now: Instant) {
        match action {
            Action::CloseStdin => self.close_stdin(state, now),
            Action::Signal(signal) => {
                if let Err(err) = os::deliver(action, self.pid, self.group) {
                    state.session.handle_signal_failed(signal, err, now);
                }
            }
            Action::SweepGroup => {
                // ESRCH is the usual answer: nothing was left behind.
                let _ = os::deliver(action, self.pid, self.group);
            }
        }
    }

    /// The I/O phase, without the lock: every pipe that is ready, and the
    /// exit. Returns whether anything happened.
    fn io_phase(&mut self, plan: Plan, cx: &mut Context<'_>) -> bool {
        let mut progress = self.deliver_stderr_lines();
        if let Some(bytes) = &plan.transmit {
            if let Poll::Ready(result) = self.child.poll_write_stdin(cx, bytes) {
                self.unflushed = true;
                self.done.written = Some(result);
                progress = true;
            }
        } else if self.stdin_open && self.unflushed {
            match self.child.poll_flush_stdin(cx) {
                Poll::Ready(Ok(())) => {
                    self.unflushed = false;
                    progress = true;
                }
                Poll::Ready(Err(err)) => {
                    self.done.written = Some(Err(err));
                    progress = true;
                }
                Poll::Pending => {}
            }
        }
        if plan.read_stdout {
            if let Poll::Ready(result) = self.child.poll_read_stdout(cx, &mut self.stdout_buf) {
                self.done.stdout = Some(result);
                progress = true;
            }
        }
        if self.stderr_open {
            if let Poll::Ready(result) = self.child.poll_read_stderr(cx, &mut self.stderr_buf) {
                self.done.stderr = Some(result);
                progress = true;
            }
        }
        if !self.exited {
            if let Poll::Ready(status) = self.child.poll_wait(cx) {
                self.exited = true;
                self.done.exit = Some(status);
                progress = true;
            }
        }
        progress
    }

    /// Hands stderr lines to `tracing` and the callback, outside the lock (a
    /// callback may call back into the transport). The next locked phase
    /// confirms it, which releases an exit report held back for them.
    fn deliver_stderr_lines(&mut self) -> bool {
        if self.stderr_lines.is_empty() {
            return false;
        }
        for line in self.stderr_lines.drain(..) {
            tracing::debug!(target: "childwire::stderr", program = %self.program, "{}", String::from_utf8_lossy(&line));
            if let Some(callback) = &self.on_stderr_line {
                callback(&line);
            }
        }
        self.done.stderr_delivered = true;
        true
    }

    /// Arms the timer for the session's next deadline; `true` if it already
    /// passed.
    fn poll_timer(&mut self, deadline: Option<Instant>, cx: &mut Context<'_>) -> bool {
        let Some(deadline) = deadline else {
            self.sleep = None;
            return false;
        };
        if self.sleep.as_ref().is_none_or(|(at, _)| *at != deadline) {
            self.sleep = Some((deadline, Box::pin(R::sleep_until(deadline))));
        }
        let (_, sleep) = self.sleep.as_mut().expect("armed above");
        sleep.as_mut().poll(cx).is_ready()
    }
}

impl<R: Runtime> Future for Driver<R> {
    type Output = ();

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        let this = self.get_mut();
        let shared = this.shared.clone();
        for _ in 0..ROUNDS_PER_POLL {
            let (plan, deadline) = {
                let mut state = shared.lock();
                match this.locked_phase(&mut state, cx) {
                    Some(plan) => (plan, state.session.poll_timeout()),
                    None => return Poll::Ready(()),
                }
            };
            if !this.io_phase(plan, cx) && !this.poll_timer(deadline, cx) {
                return Poll::Pending;
            }
        }
        // Still busy: yield to the runtime's other tasks, then go on (what
        // the last I/O phase brought is fed in first).
        cx.waker().wake_by_ref();
        Poll::Pending
    }
}

impl<R: Runtime> Drop for Driver<R> {
    /// The task was dropped before the child's end (its runtime shut down):
    /// kill the child (C14) and release whoever waits.
    fn drop(&mut self) {
        let mut state = self.shared.lock();
        if state.session.report().is_some() {
            return;
        }
        if let Some(action) = state.session.drop_action() {
            let _ = os::deliver(action, self.pid, self.group);
        }
        state.driver_stopped = true;
        state.wake_users();
    }
}
