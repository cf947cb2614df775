//! The task that owns the child: it moves bytes, time and signals between
//! the OS and the [`Session`](childwire_core::Session), and does what the
//! session decides. It decides nothing itself.

use std::future::Future;
use std::io;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Instant;

use bytes::Bytes;
use childwire_core::session::StderrCallback;
use childwire_core::{Action, Command, StderrMode};

use crate::os;
use crate::runtime::{ChildProcess, Runtime};
use crate::shared::{SharedRef, State};

/// One pipe read's worth: what a Linux pipe holds.
const READ_CHUNK: usize = 64 * 1024;

/// Rounds of I/O per poll before yielding, so that a child that floods its
/// pipes cannot starve the other tasks of the runtime.
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
    buf: Box<[u8]>,
    /// Stderr lines read under the lock, delivered after it is released.
    stderr_lines: Vec<Bytes>,
}

impl<R: Runtime> Driver<R> {
    pub(crate) fn new(
        shared: SharedRef,
        child: R::Child,
        command: &Command,
        on_stderr_line: Option<StderrCallback>,
    ) -> Self {
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
            stderr_open: command.get_stderr() == StderrMode::Capture,
            exited: false,
            killed_on_abandon: false,
            sleep: None,
            buf: vec![0; READ_CHUNK].into_boxed_slice(),
            stderr_lines: Vec::new(),
        }
    }

    /// One round: every input that is ready, fed to the session, and every
    /// output carried out. Returns whether anything happened.
    fn round(&mut self, state: &mut State, cx: &mut Context<'_>) -> bool {
        let now = Instant::now();
        let mut progress = false;

        if state.abandoned && !self.killed_on_abandon {
            self.killed_on_abandon = true;
            if let Some(action) = state.session.drop_action() {
                self.carry_out(state, action, now);
            }
        }
        // Check the clock ourselves: a runtime may poll an elapsed timer late.
        if state.session.poll_timeout().is_some_and(|at| at <= now) {
            state.session.handle_timeout(now);
            progress = true;
        }
        while let Some(action) = state.session.poll_action() {
            self.carry_out(state, action, now);
            progress = true;
        }
        progress |= self.write_stdin(state, cx, now);
        progress |= self.read_stdout(state, cx, now);
        progress |= self.read_stderr(state, cx, now);
        if !self.exited {
            if let Poll::Ready(status) = self.child.poll_wait(cx) {
                self.exited = true;
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
                progress = true;
            }
        }
        // What these inputs decided (a sweep after the exit, a close after
        // the last write) is carried out before the driver may end.
        while let Some(action) = state.session.poll_action() {
            self.carry_out(state, action, now);
            progress = true;
        }
        progress
    }

    fn carry_out(&mut self, state: &mut State, action: Action, now: Instant) {
        match action {
            Action::CloseStdin => {
                self.child.close_stdin();
                self.stdin_open = false;
                state.session.handle_stdin_closed(now);
            }
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

    fn write_stdin(&mut self, state: &mut State, cx: &mut Context<'_>, now: Instant) -> bool {
        if !self.stdin_open {
            return false;
        }
        let result = match state.session.poll_transmit() {
            Some(bytes) => match self.child.poll_write_stdin(cx, bytes) {
                Poll::Ready(Ok(n)) => {
                    self.unflushed = true;
                    state.session.handle_written(n, now);
                    return true;
                }
                Poll::Ready(Err(err)) => err,
                Poll::Pending => return false,
            },
            None if self.unflushed => match self.child.poll_flush_stdin(cx) {
                Poll::Ready(Ok(())) => {
                    self.unflushed = false;
                    return true;
                }
                Poll::Ready(Err(err)) => err,
                Poll::Pending => return false,
            },
            None => return false,
        };
        // EPIPE and friends: the child closed its stdin (or died).
        if result.kind() != io::ErrorKind::BrokenPipe {
            tracing::debug!(program = %self.program, "writing to the child's stdin failed: {result}");
        }
        self.child.close_stdin();
        self.stdin_open = false;
        state.session.handle_stdin_closed(now);
        true
    }

    fn read_stdout(&mut self, state: &mut State, cx: &mut Context<'_>, now: Instant) -> bool {
        if !self.stdout_open || !state.session.wants_stdout() {
            return false;
        }
        match self.child.poll_read_stdout(cx, &mut self.buf) {
            Poll::Ready(Ok(n)) if n > 0 => state.session.handle_stdout(&self.buf[..n], now),
            Poll::Ready(result) => {
                if let Err(err) = result {
                    tracing::warn!(program = %self.program, "reading the child's stdout failed: {err}");
                }
                self.stdout_open = false;
                state.session.handle_stdout_eof(now);
            }
            Poll::Pending => return false,
        }
        true
    }

    fn read_stderr(&mut self, state: &mut State, cx: &mut Context<'_>, now: Instant) -> bool {
        if !self.stderr_open {
            return false;
        }
        match self.child.poll_read_stderr(cx, &mut self.buf) {
            Poll::Ready(Ok(n)) if n > 0 => state.session.handle_stderr(&self.buf[..n], now),
            Poll::Ready(result) => {
                if let Err(err) = result {
                    tracing::warn!(program = %self.program, "reading the child's stderr failed: {err}");
                }
                self.stderr_open = false;
                state.session.handle_stderr_eof(now);
            }
            Poll::Pending => return false,
        }
        self.stderr_lines
            .extend(std::iter::from_fn(|| state.session.poll_stderr_line()));
        true
    }

    /// Hands stderr lines to `tracing` and the callback.
    fn deliver_stderr_lines(&mut self) {
        for line in self.stderr_lines.drain(..) {
            tracing::debug!(target: "childwire::stderr", program = %self.program, "{}", String::from_utf8_lossy(&line));
            if let Some(callback) = &self.on_stderr_line {
                callback(&line);
            }
        }
    }

    /// Arms the timer for the session's next deadline; `true` if it already
    /// passed.
    fn poll_timer(&mut self, state: &State, cx: &mut Context<'_>) -> bool {
        let Some(deadline) = state.session.poll_timeout() else {
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
        loop {
            let poll = this.poll_locked(cx);
            if this.stderr_lines.is_empty() {
                return poll;
            }
            // Outside the lock: a callback may call back into the transport.
            this.deliver_stderr_lines();
            let mut state = this.shared.lock();
            state.session.handle_stderr_delivered();
            state.wake_users();
            // The session may have held its report back for these lines:
            // go round again so it can be released and the driver end.
        }
    }
}

impl<R: Runtime> Driver<R> {
    fn poll_locked(&mut self, cx: &mut Context<'_>) -> Poll<()> {
        let shared = self.shared.clone();
        let mut state = shared.lock();
        if !state
            .driver_waker
            .as_ref()
            .is_some_and(|w| w.will_wake(cx.waker()))
        {
            state.driver_waker = Some(cx.waker().clone());
        }
        for _ in 0..ROUNDS_PER_POLL {
            let progress = self.round(&mut state, cx);
            state.wake_users();
            if state.session.report().is_some() {
                // The end is known and every action carried out: what is
                // left in the receive queue is the handles' to take.
                return Poll::Ready(());
            }
            if !progress {
                if self.poll_timer(&state, cx) {
                    continue;
                }
                return Poll::Pending;
            }
        }
        // Still busy: yield to the runtime's other tasks, then go on.
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
