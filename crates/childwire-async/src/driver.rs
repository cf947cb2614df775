//! The background task of a transport: what must happen while no caller is
//! there. It hands the session what the OS says of the child (stderr, the
//! exit, time) and carries out what the session decides (signals, the sweep,
//! stderr lines, writing what senders left, reading stdout after the exit,
//! publishing the report), until the session says it is done. For a channel
//! over a pipe pair it only writes what senders left.

use std::future::Future;
use std::io;
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::pin::Pin;
use std::process::ExitStatus;
use std::sync::Arc;
use std::task::{Context, Poll, Waker};
use std::time::Instant;

use bytes::Bytes;
use childwire_core::stderr_level::{Level, level_of};
use childwire_core::{Action, Framing, Lifecycle, Output};

use crate::StderrCallback;
use crate::job_thread::{Job, JobThread};
use crate::os;
use crate::runtime::{PipeRead, Runtime};
use crate::shared::{Guard, RoundEnd, Shared};
use crate::sync::Deadline;
use crate::wake::Readiness;

/// Stderr is for diagnostics: smaller reads keep an idle child's footprint
/// small, and a flood only takes more rounds.
const STDERR_CHUNK: usize = 8 * 1024;

/// What a line the child wrote to stdout, not a message, starts with where
/// its stderr lines go.
const STDOUT_MARK: &[u8] = b"(stdout) ";

/// Rounds per poll before yielding, so a child that floods its pipes cannot
/// starve the runtime's other tasks.
const ROUNDS_PER_POLL: usize = 32;

type ExitFuture = Pin<Box<dyn Future<Output = io::Result<ExitStatus>> + Send>>;

pub(crate) struct Driver<R: Runtime, F: Framing> {
    shared: Arc<Shared<F>>,
    rt: R,
    timer: Deadline,
    /// The child's side; `None` for a channel over a pipe pair.
    child: Option<ChildIo>,
    /// The session said it is done.
    done: bool,
    /// The report is out: the ended stderr pipe may close.
    reported: bool,
}

/// What the OS gives of the child, and what is done with its stderr.
pub(crate) struct Child {
    /// The child as the OS knows it: signals, the sweep, the drop path's wait.
    pub(crate) tracking: os::Tracking,
    pub(crate) program: String,
    /// This child's span: its events carry its pid and program.
    pub(crate) span: crate::log::Span,
    pub(crate) exit: Option<ExitFuture>,
    pub(crate) stderr: Option<Box<dyn PipeRead>>,
    pub(crate) on_stderr_line: Option<StderrCallback>,
}

/// The child's stderr pipe, read only when its waker said it may have
/// something (on `async-io`, a read that finds nothing is a system call and
/// a registration with the reactor).
struct ChildIo {
    child: Child,
    stderr_ready: Arc<Readiness>,
    stderr_waker: Waker,
    stderr_buf: Box<[u8]>,
    /// The callback panicked once; it is not called again.
    callback_panicked: bool,
    /// The sweep under way, if one is: read every round until it is done.
    sweeping: Option<os::Sweeping>,
    /// The stderr pipe once it has ended, until the report is out: its
    /// deregistration and close come after the wake-up the report brings,
    /// not on the way to it. What it pays for: two system calls fewer
    /// between a graceful shutdown's child exit and its report, where the
    /// child's stderr ends in the round before the one that reports
    /// (docs/performance.md).
    stderr_ended: Option<Box<dyn PipeRead>>,
}

/// What the OS said in one round, read without the lock.
#[derive(Default)]
struct Events {
    stderr: Option<io::Result<usize>>,
    exit: Option<io::Result<ExitStatus>>,
    sweep: Option<os::SweepState>,
}

impl<R: Runtime, F: Framing> Driver<R, F> {
    pub(crate) fn new(shared: Arc<Shared<F>>, rt: R, child: Option<Child>) -> Self {
        Self {
            child: child.map(|child| ChildIo::new(child, &shared)),
            shared,
            rt,
            timer: Deadline::default(),
            done: false,
            reported: false,
        }
    }
}

impl<R: Runtime, F: Framing> Future for Driver<R, F> {
    type Output = ();

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        let this = self.get_mut();
        let span = this.child.as_ref().map(|io| io.child.span.clone());
        let _entered = span.as_ref().map(crate::log::Span::enter);
        this.shared.set_driver_waker(cx.waker());
        let mut io = this.child.take();
        let result = this.rounds(io.as_mut(), cx);
        this.child = io;
        result
    }
}

impl<R: Runtime, F: Framing> Driver<R, F> {
    fn rounds(&mut self, mut io: Option<&mut ChildIo>, cx: &mut Context<'_>) -> Poll<()> {
        for _ in 0..ROUNDS_PER_POLL {
            let now = self.rt.now();
            let events = io
                .as_deref_mut()
                .map(|io| io.poll_events(cx))
                .unwrap_or_default();
            let mut progress = events.stderr.is_some()
                || events.exit.is_some()
                || matches!(events.sweep, Some(os::SweepState::Done(_)));
            let mut state = self.shared.lock();
            state.session.handle_driver_wake(now);
            let (messages, bytes) = self.shared.holds.get();
            state.session.handle_receiver_holds(messages, bytes);
            if let Some(io) = io.as_deref_mut() {
                io.hand_in(&mut state, events, now);
            }
            let mut lines = Vec::new();
            let mut stdout = Vec::new();
            let deadline = loop {
                match state.session.poll_output() {
                    Output::Signal(signal) => {
                        if let Some(io) = io.as_deref() {
                            if let Err(err) = io.child.tracking.signal(Action::Signal(signal)) {
                                state.session.handle_signal_failed(signal, err, now);
                            }
                        }
                        progress = true;
                    }
                    Output::Sweep => {
                        // Started without the lock; a scan goes on without
                        // the driver, which reads it every round.
                        let reaped = state
                            .session
                            .lifecycle()
                            .and_then(Lifecycle::exit)
                            .is_some();
                        drop(state);
                        let sweep = io
                            .as_deref_mut()
                            .map(|io| io.start_sweep(reaped, cx.waker()));
                        state = self.shared.lock();
                        match sweep {
                            Some(os::SweepState::Running { so_far, passed }) => {
                                state.session.handle_sweep_progress(so_far, passed, now);
                            }
                            Some(os::SweepState::Done(swept)) => {
                                state.session.handle_swept(swept, now);
                            }
                            None => state.session.handle_swept(Default::default(), now),
                        }
                        progress = true;
                    }
                    Output::StderrLine(line) => lines.push(line),
                    Output::StdoutLine(line) => stdout.push(line),
                    Output::StdoutNotice(notice) => {
                        // The first of its kind: said once, as a warning.
                        crate::log::warn!(target: "childwire::stdout", "{notice}");
                    }
                    Output::Report(report) => {
                        // Under the lock: a sender that finds the report
                        // handed out finds it published.
                        self.shared.exit.set(*report);
                        self.reported = true;
                        progress = true;
                    }
                    Output::Write(round) => {
                        let end;
                        (state, end) =
                            self.shared
                                .write_round(state, &round, Some(cx.waker()), now);
                        progress |= end != RoundEnd::Blocked;
                    }
                    Output::Read => {
                        let blocked;
                        (state, blocked) = self.shared.read_once(state, cx.waker(), || now);
                        progress |= !blocked;
                    }
                    Output::Timeout(at) => break at,
                    Output::Done => {
                        self.done = true;
                        break None;
                    }
                }
            };
            self.shared.unlock_then_close(state);
            progress |= !stdout.is_empty();
            match io.as_deref_mut() {
                Some(io) => {
                    if self.reported {
                        drop(io.stderr_ended.take());
                    }
                    io.deliver_stdout(stdout);
                    if !lines.is_empty() {
                        progress = true;
                        io.deliver(&self.shared, lines);
                    }
                }
                None => {
                    for line in stdout {
                        crate::log::debug!(target: "childwire::stdout", "{}", String::from_utf8_lossy(&line));
                    }
                }
            }
            if self.done {
                return Poll::Ready(());
            }
            if !progress && !self.timer.poll(&self.rt, deadline, cx) {
                return Poll::Pending;
            }
        }
        cx.waker().wake_by_ref();
        Poll::Pending
    }
}

impl ChildIo {
    fn new<F: Framing>(child: Child, shared: &Shared<F>) -> Self {
        let stderr_ready = Readiness::new(Arc::clone(shared.driver_waker()));
        let chunk = child.stderr.as_ref().map_or(0, |_| STDERR_CHUNK);
        Self {
            stderr_waker: Waker::from(Arc::clone(&stderr_ready)),
            stderr_ready,
            stderr_buf: vec![0; chunk].into_boxed_slice(),
            child,
            callback_panicked: false,
            sweeping: None,
            stderr_ended: None,
        }
    }

    /// Polls stderr (when its waker said so) and the exit, without the lock.
    fn poll_events(&mut self, cx: &mut Context<'_>) -> Events {
        let mut events = Events::default();
        if let Some(pipe) = self
            .child
            .stderr
            .as_mut()
            .filter(|_| self.stderr_ready.take())
        {
            let mut stderr_cx = Context::from_waker(&self.stderr_waker);
            if let Poll::Ready(result) = pipe.poll_read(&mut stderr_cx, &mut self.stderr_buf) {
                self.stderr_ready.mark();
                events.stderr = Some(result);
            }
        }
        if let Some(exit) = self.child.exit.as_mut() {
            if let Poll::Ready(status) = exit.as_mut().poll(cx) {
                self.child.exit = None;
                events.exit = Some(status);
            }
        }
        if let Some(sweeping) = &self.sweeping {
            let state = sweeping.state();
            if let os::SweepState::Done(swept) = state {
                self.sweeping = None;
                self.log_swept(swept);
            }
            events.sweep = Some(state);
        }
        events
    }

    /// Hands the session what the OS said.
    fn hand_in<F: Framing>(&mut self, state: &mut Guard<'_, F>, events: Events, now: Instant) {
        match events.stderr {
            Some(Ok(n)) if n > 0 => state.session.handle_stderr(&self.stderr_buf[..n], now),
            Some(result) => {
                if let Err(err) = result {
                    crate::log::warn!(program = %self.child.program, "reading the child's stderr failed: {err}");
                }
                self.stderr_ended = self.child.stderr.take();
                state.session.handle_stderr_eof(now);
            }
            None => {}
        }
        if let Some(status) = events.exit {
            let exit = match status {
                Ok(status) => os::exit_of(status),
                Err(err) => {
                    // Only possible if something else reaped our child.
                    crate::log::warn!(program = %self.child.program, "waiting for the child failed: {err}");
                    childwire_core::Exit::Code(-1)
                }
            };
            state.session.handle_exit(exit, now);
        }
        match events.sweep {
            Some(os::SweepState::Done(swept)) => state.session.handle_swept(swept, now),
            Some(os::SweepState::Running { so_far, passed }) => {
                state.session.handle_sweep_progress(so_far, passed, now);
            }
            None => {}
        }
    }

    /// Starts the sweep the session asked for: done at once when nothing
    /// was left behind, else under way, and read every round from then on
    /// (`waker` is woken after each pass of its scan and when it is done).
    fn start_sweep(&mut self, reaped: bool, waker: &Waker) -> os::SweepState {
        let sweeping = self.child.tracking.start_sweep(reaped, waker);
        let state = sweeping.state();
        match state {
            os::SweepState::Done(swept) => self.log_swept(swept),
            os::SweepState::Running { .. } => self.sweeping = Some(sweeping),
        }
        state
    }

    fn log_swept(&self, swept: childwire_core::Swept) {
        if swept.ended > 0 {
            crate::log::warn!(program = %self.child.program, "ended {} process(es) the child left behind", swept.ended);
        }
    }

    /// Hands the child's stdout lines that are not messages on where its
    /// stderr lines go, marked as stdout: `tracing` and the callback (which
    /// shows them, by default), outside every lock.
    fn deliver_stdout(&mut self, lines: Vec<Bytes>) {
        for line in lines {
            crate::log::debug!(
                target: "childwire::stdout",
                program = %self.child.program,
                "{}",
                String::from_utf8_lossy(&line)
            );
            if let (Some(callback), false) = (&self.child.on_stderr_line, self.callback_panicked) {
                let mut marked = Vec::with_capacity(STDOUT_MARK.len() + line.len());
                marked.extend_from_slice(STDOUT_MARK);
                marked.extend_from_slice(&line);
                if catch_unwind(AssertUnwindSafe(|| callback(&marked))).is_err() {
                    crate::log::error!(program = %self.child.program, "the stderr callback panicked; it is not called again");
                    self.callback_panicked = true;
                }
            }
        }
    }

    /// Hands stderr lines to `tracing` and the callback, outside every
    /// lock (a callback may call back into the transport), then tells the
    /// session. A panicking callback is caught: the transport goes on, the
    /// report says so.
    fn deliver<F: Framing>(&mut self, shared: &Shared<F>, lines: Vec<Bytes>) {
        for line in lines {
            // The level the line names is read only if the event is enabled.
            crate::log::debug!(
                target: "childwire::stderr",
                program = %self.child.program,
                child_level = level_of(&line).map_or("none", Level::as_str),
                "{}",
                String::from_utf8_lossy(&line)
            );
            if let (Some(callback), false) = (&self.child.on_stderr_line, self.callback_panicked) {
                if catch_unwind(AssertUnwindSafe(|| callback(&line))).is_err() {
                    crate::log::error!(program = %self.child.program, "the stderr callback panicked; it is not called again");
                    self.callback_panicked = true;
                }
            }
        }
        let mut state = shared.lock();
        if self.callback_panicked {
            state.session.handle_stderr_callback_panicked();
        }
        state.session.handle_stderr_delivered();
        shared.unlock(state);
    }

    /// The rest of a stopped driver's work, once the child is dead or
    /// `dead_by` (`None`: it has exited already) has passed: the exit handed
    /// in, the child reaped, its last stderr lines delivered, the report
    /// made or its absence said.
    fn after_stop<F: Framing, R: Runtime>(
        mut self,
        shared: &Shared<F>,
        rt: &R,
        mut lines: Vec<Bytes>,
        dead_by: Option<Instant>,
    ) {
        // Waited for without the lock: a caller on another runtime may take it.
        let exit = dead_by.and_then(|dead_by| {
            let limit = dead_by.saturating_duration_since(Instant::now());
            self.child.tracking.wait_exited(limit)
        });
        let mut state = shared.lock();
        if let Some(exit) = exit {
            if !state.session.has_exited() {
                let now = rt.now();
                state.session.handle_exit(exit, now);
                state = finish(shared, state, &self, &mut lines, now);
            }
        }
        // The runtime's child type reaps an exited child when dropped.
        drop(self.child.exit.take());
        shared.unlock(state);
        if !lines.is_empty() {
            // Its lines still reach the callback; then the report may come.
            self.deliver(shared, lines);
            let state = finish(shared, shared.lock(), &self, &mut Vec::new(), rt.now());
            shared.unlock(state);
        }
        let mut state = shared.lock();
        if !state.session.has_ended() {
            state.session.handle_driver_gone();
            shared.exit.close();
        }
        shared.unlock(state);
    }
}

impl<R: Runtime, F: Framing> Drop for Driver<R, F> {
    /// The task was dropped before the session was done (its runtime shut
    /// down): the child is killed and what it left swept, and whoever waits
    /// gets the report, or else learns that none will come. The drop never
    /// waits for the death: a child that has not died yet is left to the
    /// late reaper's thread, which waits for it there (as long as the
    /// session's `reap_wait` says), reaps it (it is not left a zombie for a runtime
    /// that may never run again) and then makes the report.
    fn drop(&mut self) {
        let Some(io) = self.child.take() else {
            return;
        };
        if self.done {
            return;
        }
        let now = self.rt.now();
        let mut state = self.shared.lock();
        let (messages, bytes) = self.shared.holds.get();
        state.session.handle_receiver_holds(messages, bytes);
        state.session.handle_driver_stopped(now);
        let mut lines = Vec::new();
        state = finish(&self.shared, state, &io, &mut lines, now);
        let reap_wait = state.session.reap_wait();
        self.shared.unlock(state);
        let shared = Arc::clone(&self.shared);
        let rt = self.rt.clone();
        let exited = reap_wait.is_none();
        let dead_by = reap_wait.map(|wait| Instant::now() + wait);
        let rest = move || io.after_stop(&shared, &rt, lines, dead_by);
        if exited {
            rest();
            return;
        }
        let slot = Arc::clone(&self.shared);
        let job: Job = Box::new(move || {
            // No panic may end the thread: other children wait behind this
            // one. Whoever waits for this child's report then learns that
            // none will come.
            if catch_unwind(AssertUnwindSafe(rest)).is_err() {
                crate::log::error!("the late reaper panicked ending a child");
                slot.exit.close();
            }
        });
        // Where the thread cannot run, the wait happens here.
        if let Err(job) = LATE_REAPER.submit(job) {
            job();
        }
    }
}

/// Where a driver dropped before its child died leaves the wait for that
/// death, so that the drop (a runtime's shutdown) never waits for it.
static LATE_REAPER: JobThread = JobThread::new("childwire-late-reaper");

/// The outputs of a driver that stops, carried out now: no timer will run
/// them later, and no task will wait for a pipe (a sweep never waits for a
/// scan either: it is handed to the sweeper thread).
fn finish<'a, F: Framing>(
    shared: &'a Shared<F>,
    mut state: Guard<'a, F>,
    io: &ChildIo,
    lines: &mut Vec<Bytes>,
    now: Instant,
) -> Guard<'a, F> {
    let waker = Waker::noop();
    loop {
        match state.session.poll_output() {
            Output::Signal(signal) => {
                if let Err(err) = io.child.tracking.signal(Action::Signal(signal)) {
                    state.session.handle_signal_failed(signal, err, now);
                }
            }
            Output::Sweep => {
                let swept = io.child.tracking.sweep_stopping();
                state.session.handle_swept(swept, now);
            }
            Output::StderrLine(line) => lines.push(line),
            Output::StdoutLine(_) | Output::StdoutNotice(_) => {}
            Output::Report(report) => shared.exit.set(*report),
            Output::Write(round) => {
                state = shared.write_round(state, &round, None, now).0;
            }
            Output::Read => state = shared.read_once(state, waker, || now).0,
            Output::Timeout(_) | Output::Done => return state,
        }
    }
}
