//! A fake [`Runtime`] for driving the async transport deterministically, the
//! way quinn's tests drive a pair of connections and str0m's run
//! discrete-event simulations.
//!
//! - Time is virtual: [`FakeRuntime::now`] only moves when the executor has
//!   nothing left to run, and then jumps straight to the earliest armed
//!   timer. A test of a 4 s shutdown takes microseconds and lands on the
//!   exact instants.
//! - Every task (the transport's background task, the scripted child, the
//!   test's own future) is polled on one thread, one poll at a time, only
//!   when woken. A missed wake-up is therefore not papered over by a spurious
//!   poll: it shows up as a stall.
//! - The order in which woken tasks are polled is FIFO, or picked by a
//!   seeded generator, so a test can explore many interleavings and replay
//!   any one of them from its seed.
//! - `spawn_child` hands out a scripted child: in-memory pipes with a
//!   capacity (the child's stdin is read, or not, by the script; its stdout
//!   and stderr are written by it), and an exit status delivered when the
//!   script says so.
//!
//! - With [`FakeRuntime::preemptive`], other woken tasks may also run
//!   *inside* the background task's poll, at its lock-free calls into the
//!   child (the stderr read, the exit poll), where a multi-threaded runtime
//!   would run them in parallel.
//!
//! What it cannot do: preempt anywhere else (between two instructions of
//! two threads, or inside a lock: the interleavings are at poll boundaries
//! and those few calls), run tasks in parallel (so no data race or lock
//! contention is ever exercised: that stays with the real-child suite),
//! deliver a signal to a fake child (see [`SignalSink`]), or model what the
//! OS does on its own (a pipe's EOF only when every holder closes it, a
//! reap, process groups): the script says when each of those happens.

#![allow(dead_code, unreachable_pub)] // each test binary uses a part of it

use std::cell::RefCell;
use std::collections::VecDeque;
use std::fmt;
use std::future::{Future, poll_fn};
use std::io;
use std::pin::{Pin, pin};
use std::process::ExitStatus;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError, Weak};
use std::task::{Context, Poll, Wake, Waker};
use std::time::{Duration, Instant};

use childwire_async::{NoRuntime, PipeRead, PipeWrite, Runtime, SpawnedChild, StderrMode, Timer};

fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(PoisonError::into_inner)
}

/// The id of the future passed to `block_on`, which lives on the caller's
/// stack rather than in the task table.
const MAIN: usize = usize::MAX;

/// A guard against a livelock (tasks waking each other forever at one
/// instant): no test comes near it.
const MAX_POLLS: u64 = 5_000_000;

thread_local! {
    static CURRENT: RefCell<Option<FakeRuntime>> = const { RefCell::new(None) };
}

/// The fake runtime: a virtual clock, timers, a single-threaded executor,
/// and a queue of scripted children for `spawn_child`.
#[derive(Clone)]
pub struct FakeRuntime {
    shared: Arc<Shared>,
}

struct Shared {
    /// Virtual time zero. Read once from the real clock only because an
    /// `Instant` cannot be made otherwise; nothing else reads it.
    origin: Instant,
    state: Mutex<State>,
}

type Task = Pin<Box<dyn Future<Output = ()> + Send>>;

struct State {
    now: Duration,
    timers: Vec<Weak<TimerCell>>,
    tasks: Vec<Option<Task>>,
    /// Woken tasks, each at most once.
    ready: VecDeque<usize>,
    /// `None`: FIFO. `Some`: a xorshift state picking the next task.
    rng: Option<u64>,
    children: VecDeque<SpawnedChild>,
    /// The programs `spawn_child` was asked to run.
    spawned: Vec<String>,
    polls: u64,
    /// Run other tasks from inside a child's stderr read and exit poll.
    preempt: bool,
}

impl fmt::Debug for FakeRuntime {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("FakeRuntime")
            .field("elapsed", &self.elapsed())
            .finish_non_exhaustive()
    }
}

/// The executor found nothing to run and no timer to wait for: the future
/// can never complete.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Stalled {
    /// The virtual time of the stall.
    pub at: Duration,
}

impl FakeRuntime {
    /// A runtime at virtual time zero, polling woken tasks in FIFO order.
    pub fn new() -> Self {
        Self {
            shared: Arc::new(Shared {
                origin: Instant::now(),
                state: Mutex::new(State {
                    now: Duration::ZERO,
                    timers: Vec::new(),
                    tasks: Vec::new(),
                    ready: VecDeque::new(),
                    rng: None,
                    children: VecDeque::new(),
                    spawned: Vec::new(),
                    polls: 0,
                    preempt: false,
                }),
            }),
        }
    }

    /// A runtime that picks which woken task to poll next with a generator
    /// seeded by `seed`: one interleaving per seed, the same every run.
    pub fn seeded(seed: u64) -> Self {
        let rt = Self::new();
        // xorshift needs a non-zero state.
        lock(&rt.shared.state).rng = Some(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1);
        rt
    }

    /// A seeded runtime that also runs other woken tasks *inside* the
    /// background task's poll, at the calls where it holds no lock: its
    /// read of the child's stderr and its poll of the child's exit. A
    /// multi-threaded runtime runs the caller's task there in parallel; a
    /// poll-at-a-time executor never would, so races between "read a value"
    /// and "act on it" in one poll are out of its reach without this.
    pub fn preemptive(seed: u64) -> Self {
        let rt = Self::seeded(seed);
        lock(&rt.shared.state).preempt = true;
        rt
    }

    /// A preemption point (see [`preemptive`](Self::preemptive)): polls a
    /// few woken tasks, as the generator picks. Only tasks in the table
    /// run: never the one being polled, never `block_on`'s future.
    fn preempt(&self) {
        loop {
            let next = {
                let mut state = lock(&self.shared.state);
                if !state.preempt {
                    return;
                }
                let State {
                    rng, ready, tasks, ..
                } = &mut *state;
                let Some(x) = rng.as_mut() else { return };
                *x ^= *x << 13;
                *x ^= *x >> 7;
                *x ^= *x << 17;
                // About half the time, do nothing more.
                if *x % 2 == 0 {
                    return;
                }
                let runnable = ready
                    .iter()
                    .position(|&id| id != MAIN && tasks[id].is_some());
                match runnable {
                    Some(index) => ready.remove(index),
                    None => return,
                }
            };
            if let Some(id) = next {
                self.poll_task(id);
            }
        }
    }

    /// Virtual time since the runtime was made.
    pub fn elapsed(&self) -> Duration {
        lock(&self.shared.state).now
    }

    /// The instant `at` after virtual time zero.
    pub fn instant(&self, at: Duration) -> Instant {
        self.shared.origin + at
    }

    /// How many task polls ran so far.
    pub fn polls(&self) -> u64 {
        lock(&self.shared.state).polls
    }

    /// Tasks spawned and not finished.
    pub fn live_tasks(&self) -> usize {
        lock(&self.shared.state)
            .tasks
            .iter()
            .filter(|task| task.is_some())
            .count()
    }

    /// The programs children were spawned for.
    pub fn spawned(&self) -> Vec<String> {
        lock(&self.shared.state).spawned.clone()
    }

    /// Queues a scripted child for the next `spawn_child`, and returns the
    /// child's side of it for the script.
    pub fn script_child(&self, spec: ChildSpec) -> FakeChild {
        let (stdin_w, stdin_r) = pipe(spec.stdin_capacity);
        let (stdout_w, stdout_r) = pipe(spec.stdout_capacity);
        stdout_r.set_max_read(spec.stdout_max_read);
        let (stderr_w, mut stderr_r) = pipe(spec.stdout_capacity);
        let hook_rt = self.clone();
        stderr_r.before_read = Some(Box::new(move || hook_rt.preempt()));
        let exit = Arc::new(Mutex::new(ExitCell::default()));
        let waiting = Arc::clone(&exit);
        let exit_rt = self.clone();
        let spawned = SpawnedChild {
            pid: spec.pid,
            stdin: Box::new(stdin_w),
            stdout: Box::new(stdout_r),
            stderr: Some(Box::new(stderr_r)),
            // In-memory pipes: nothing in the OS can hold them.
            pipes: childwire_async::PipeIds::default(),
            exit: Box::pin(poll_fn(move |cx| {
                exit_rt.preempt();
                let mut cell = lock(&waiting);
                match cell.status {
                    Some(status) => Poll::Ready(Ok(status)),
                    None => {
                        cell.waker = Some(cx.waker().clone());
                        Poll::Pending
                    }
                }
            })),
        };
        lock(&self.shared.state).children.push_back(spawned);
        FakeChild {
            stdin: stdin_r,
            stdout: stdout_w,
            stderr: stderr_w,
            exit,
        }
    }

    /// Runs a task (a child's script, a second caller) on the executor.
    pub fn spawn_task(&self, task: impl Future<Output = ()> + Send + 'static) {
        Runtime::spawn(self, Box::pin(task));
    }

    /// Runs `task` on the executor, its output to be awaited through the
    /// handle: for a caller that must be a task of its own (preemption
    /// only reaches tasks in the table, see [`preemptive`](Self::preemptive)).
    pub fn spawn_joinable<T: Send + 'static>(
        &self,
        task: impl Future<Output = T> + Send + 'static,
    ) -> JoinHandle<T> {
        let slot = Arc::new(Mutex::new((None, None::<Waker>)));
        let filled = Arc::clone(&slot);
        self.spawn_task(async move {
            let value = task.await;
            let waker = {
                let mut slot = lock(&filled);
                slot.0 = Some(value);
                slot.1.take()
            };
            if let Some(waker) = waker {
                waker.wake();
            }
        });
        JoinHandle { slot }
    }

    /// Waits `duration` of virtual time.
    pub fn sleep(&self, duration: Duration) -> impl Future<Output = ()> + Send + 'static {
        let deadline = self.now() + duration;
        self.sleep_until(deadline)
    }

    /// Waits until the virtual instant `deadline`.
    pub fn sleep_until(&self, deadline: Instant) -> impl Future<Output = ()> + Send + 'static {
        let mut timer = self.timer(deadline);
        poll_fn(move |cx| timer.as_mut().poll(cx))
    }

    /// Runs `main` and every task it starts until `main` completes; panics
    /// if it never can (a stall).
    pub fn block_on<T>(&self, main: impl Future<Output = T>) -> T {
        match self.run(main) {
            Ok(value) => value,
            Err(Stalled { at }) => panic!("stalled at {at:?}: nothing to run and no timer armed"),
        }
    }

    /// Runs `main` as [`block_on`](Self::block_on) does, or returns where
    /// everything stopped: for a test whose subject legitimately waits
    /// forever (a child that never exits once signals are spent).
    pub fn run<T>(&self, main: impl Future<Output = T>) -> Result<T, Stalled> {
        let _current = CurrentGuard::enter(self);
        let mut main = pin!(main);
        let main_waker = Waker::from(Arc::new(TaskWaker {
            shared: Arc::downgrade(&self.shared),
            id: MAIN,
        }));
        lock(&self.shared.state).ready.push_back(MAIN);
        loop {
            let next = {
                let mut state = lock(&self.shared.state);
                state.polls += 1;
                assert!(state.polls < MAX_POLLS, "livelock: {MAX_POLLS} polls");
                state.pick()
            };
            match next {
                Some(MAIN) => {
                    if let Poll::Ready(value) =
                        main.as_mut().poll(&mut Context::from_waker(&main_waker))
                    {
                        return Ok(value);
                    }
                }
                Some(id) => self.poll_task(id),
                None => {
                    if !self.advance_to_next_timer() {
                        return Err(Stalled { at: self.elapsed() });
                    }
                }
            }
        }
    }

    fn poll_task(&self, id: usize) {
        // Out of the table while it runs: it may spawn, read the clock, or
        // arm timers, all of which take the state's lock.
        let Some(mut task) = lock(&self.shared.state).tasks[id].take() else {
            return;
        };
        let waker = Waker::from(Arc::new(TaskWaker {
            shared: Arc::downgrade(&self.shared),
            id,
        }));
        if task
            .as_mut()
            .poll(&mut Context::from_waker(&waker))
            .is_pending()
        {
            lock(&self.shared.state).tasks[id] = Some(task);
        }
        // A finished task is dropped here, outside the lock.
    }

    /// Moves the clock to the earliest deadline a task waits for, and
    /// wakes those tasks. `false` if no task waits for any.
    fn advance_to_next_timer(&self) -> bool {
        let mut state = lock(&self.shared.state);
        let now = self.shared.origin + state.now;
        state.timers.retain(|cell| cell.strong_count() > 0);
        let next = state
            .timers
            .iter()
            .filter_map(Weak::upgrade)
            .filter_map(|cell| {
                let slot = lock(&cell.slot);
                slot.waker.is_some().then_some(slot.deadline)
            })
            .min();
        let Some(deadline) = next else {
            return false;
        };
        if deadline > now {
            state.now = deadline - self.shared.origin;
        }
        let now = self.shared.origin + state.now;
        let cells: Vec<_> = state.timers.iter().filter_map(Weak::upgrade).collect();
        drop(state);
        for cell in cells {
            let waker = {
                let mut slot = lock(&cell.slot);
                if slot.deadline <= now {
                    slot.waker.take()
                } else {
                    None
                }
            };
            if let Some(waker) = waker {
                waker.wake();
            }
        }
        true
    }
}

impl Default for FakeRuntime {
    fn default() -> Self {
        Self::new()
    }
}

impl State {
    fn pick(&mut self) -> Option<usize> {
        if self.ready.is_empty() {
            return None;
        }
        let index = match &mut self.rng {
            None => 0,
            Some(x) => {
                *x ^= *x << 13;
                *x ^= *x >> 7;
                *x ^= *x << 17;
                (*x % self.ready.len() as u64) as usize
            }
        };
        self.ready.remove(index)
    }
}

/// Gives way once: the task is woken at once and polled again after the
/// other woken tasks the executor picks. (A zero-length sleep does not
/// give way: its deadline has already passed.)
pub async fn yield_now() {
    let mut yielded = false;
    poll_fn(|cx| {
        if yielded {
            return Poll::Ready(());
        }
        yielded = true;
        cx.waker().wake_by_ref();
        Poll::Pending
    })
    .await;
}

/// The output of a task from [`FakeRuntime::spawn_joinable`].
pub struct JoinHandle<T> {
    slot: Arc<Mutex<(Option<T>, Option<Waker>)>>,
}

impl<T> Future for JoinHandle<T> {
    type Output = T;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<T> {
        let mut slot = lock(&self.slot);
        match slot.0.take() {
            Some(value) => Poll::Ready(value),
            None => {
                slot.1 = Some(cx.waker().clone());
                Poll::Pending
            }
        }
    }
}

struct TaskWaker {
    shared: Weak<Shared>,
    id: usize,
}

impl Wake for TaskWaker {
    fn wake(self: Arc<Self>) {
        self.wake_by_ref();
    }

    fn wake_by_ref(self: &Arc<Self>) {
        if let Some(shared) = self.shared.upgrade() {
            let mut state = lock(&shared.state);
            if !state.ready.contains(&self.id) {
                state.ready.push_back(self.id);
            }
        }
    }
}

struct CurrentGuard(Option<FakeRuntime>);

impl CurrentGuard {
    fn enter(rt: &FakeRuntime) -> Self {
        Self(CURRENT.with(|current| current.replace(Some(rt.clone()))))
    }
}

impl Drop for CurrentGuard {
    fn drop(&mut self) {
        let previous = self.0.take();
        CURRENT.with(|current| *current.borrow_mut() = previous);
    }
}

impl Runtime for FakeRuntime {
    fn current() -> Result<Self, NoRuntime> {
        CURRENT
            .with(|current| current.borrow().clone())
            .ok_or(NoRuntime("the fake runtime (FakeRuntime::block_on)"))
    }

    fn now(&self) -> Instant {
        self.shared.origin + lock(&self.shared.state).now
    }

    fn timer(&self, deadline: Instant) -> Pin<Box<dyn Timer>> {
        let cell = Arc::new(TimerCell {
            slot: Mutex::new(TimerSlot {
                deadline,
                waker: None,
            }),
        });
        lock(&self.shared.state).timers.push(Arc::downgrade(&cell));
        Box::pin(FakeTimer {
            cell,
            rt: self.clone(),
        })
    }

    fn spawn(&self, task: Pin<Box<dyn Future<Output = ()> + Send + 'static>>) {
        let mut state = lock(&self.shared.state);
        let id = state.tasks.len();
        state.tasks.push(Some(task));
        state.ready.push_back(id);
    }

    fn spawn_child(
        &self,
        command: std::process::Command,
        stderr: StderrMode,
    ) -> io::Result<SpawnedChild> {
        let mut state = lock(&self.shared.state);
        let mut child = state
            .children
            .pop_front()
            .ok_or_else(|| io::Error::new(io::ErrorKind::NotFound, "no scripted child queued"))?;
        state
            .spawned
            .push(command.get_program().to_string_lossy().into_owned());
        if !matches!(stderr, StderrMode::Show | StderrMode::Capture) {
            // Not piped: the script's stderr writes go nowhere.
            child.stderr = None;
        }
        Ok(child)
    }
}

struct TimerCell {
    slot: Mutex<TimerSlot>,
}

struct TimerSlot {
    deadline: Instant,
    /// Set while a task waits for this timer.
    waker: Option<Waker>,
}

struct FakeTimer {
    cell: Arc<TimerCell>,
    rt: FakeRuntime,
}

impl Timer for FakeTimer {
    fn reset(self: Pin<&mut Self>, deadline: Instant) {
        lock(&self.cell.slot).deadline = deadline;
    }

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        let now = self.rt.now();
        let mut slot = lock(&self.cell.slot);
        if slot.deadline <= now {
            slot.waker = None;
            return Poll::Ready(());
        }
        slot.waker = Some(cx.waker().clone());
        Poll::Pending
    }
}

/// How a scripted child's pipes are made.
#[derive(Debug, Clone, Copy)]
pub struct ChildSpec {
    /// Bytes the child's stdin holds unread before writes wait.
    pub stdin_capacity: usize,
    /// Bytes its stdout (and stderr) hold unread before the child's writes
    /// wait.
    pub stdout_capacity: usize,
    /// The most one read of stdout returns (a real pipe returns what it
    /// holds, up to the buffer; smaller makes the receive bound observable
    /// one small read at a time).
    pub stdout_max_read: usize,
    /// The PID the transport is told. `None`: signals fail as ESRCH would.
    pub pid: Option<u32>,
}

impl Default for ChildSpec {
    fn default() -> Self {
        // A Linux pipe's default capacity.
        Self {
            stdin_capacity: 64 * 1024,
            stdout_capacity: 64 * 1024,
            stdout_max_read: usize::MAX,
            pid: None,
        }
    }
}

#[derive(Default)]
struct ExitCell {
    status: Option<ExitStatus>,
    waker: Option<Waker>,
}

/// The child's side of a scripted child: its stdin to read (or not), its
/// stdout and stderr to write, and its exit.
pub struct FakeChild {
    /// What the transport writes; the script reads it.
    pub stdin: PipeReader,
    /// What the script writes; the transport reads it.
    pub stdout: PipeWriter,
    /// What the script writes to stderr.
    pub stderr: PipeWriter,
    exit: Arc<Mutex<ExitCell>>,
}

impl FakeChild {
    /// Exits with `code`: its pipes close (as a process's do when it ends
    /// and nothing it started holds them), then the exit is reported.
    pub fn exit(self, code: i32) {
        self.exit_with(exit_code(code));
    }

    /// Exits with `code` while something it started keeps its stdout open
    /// (a launcher's grandchild): the returned end, to write or drop.
    pub fn exit_leaving_stdout(self, code: i32) -> PipeWriter {
        let Self {
            stdin,
            stdout,
            stderr,
            exit,
        } = self;
        drop((stdin, stderr));
        Self::report_exit(&exit, exit_code(code));
        stdout
    }

    /// Exits with `status`, closing its pipes.
    pub fn exit_with(self, status: ExitStatus) {
        let Self {
            stdin,
            stdout,
            stderr,
            exit,
        } = self;
        drop((stdin, stdout, stderr));
        Self::report_exit(&exit, status);
    }

    fn report_exit(exit: &Mutex<ExitCell>, status: ExitStatus) {
        let waker = {
            let mut cell = lock(exit);
            cell.status = Some(status);
            cell.waker.take()
        };
        if let Some(waker) = waker {
            waker.wake();
        }
    }
}

/// The status of an exit with `code`.
pub fn exit_code(code: i32) -> ExitStatus {
    use std::os::unix::process::ExitStatusExt;
    ExitStatus::from_raw((code & 0xff) << 8)
}

/// The status of a death by signal `signo`.
pub fn killed_by(signo: i32) -> ExitStatus {
    use std::os::unix::process::ExitStatusExt;
    ExitStatus::from_raw(signo & 0x7f)
}

struct PipeState {
    buf: VecDeque<u8>,
    capacity: usize,
    max_read: usize,
    writer_open: bool,
    reader_open: bool,
    reader_waker: Option<Waker>,
    writer_waker: Option<Waker>,
    /// Bytes taken by the reader so far.
    read_total: u64,
    /// The reader's polls so far, those that found nothing included.
    reader_polls: u64,
}

type PipeCell = Arc<Mutex<PipeState>>;

/// An in-memory pipe holding at most `capacity` unread bytes: writes wait
/// when it is full, reads wait when it is empty, EOF once the writer is
/// dropped, `BrokenPipe` once the reader is.
pub fn pipe(capacity: usize) -> (PipeWriter, PipeReader) {
    assert!(capacity > 0, "a pipe holds at least one byte");
    let cell = Arc::new(Mutex::new(PipeState {
        buf: VecDeque::new(),
        capacity,
        max_read: usize::MAX,
        writer_open: true,
        reader_open: true,
        reader_waker: None,
        writer_waker: None,
        read_total: 0,
        reader_polls: 0,
    }));
    (
        PipeWriter(Arc::clone(&cell)),
        PipeReader {
            cell,
            before_read: None,
        },
    )
}

/// The writing end of a [`pipe`].
pub struct PipeWriter(PipeCell);

/// The reading end of a [`pipe`].
pub struct PipeReader {
    cell: PipeCell,
    /// Called before each read, outside every lock: a preemption point.
    before_read: Option<Box<dyn Fn() + Send + Sync>>,
}

/// A view of a pipe's unread bytes that outlives both its ends, for a
/// test to look at after the child is gone.
pub struct PipeProbe(PipeCell);

impl PipeProbe {
    /// Bytes written and not yet read.
    pub fn unread(&self) -> usize {
        lock(&self.0).buf.len()
    }

    /// How many times the reading end was polled, those that found
    /// nothing included.
    pub fn reader_polls(&self) -> u64 {
        lock(&self.0).reader_polls
    }
}

impl PipeWriter {
    /// A probe of this pipe.
    pub fn probe(&self) -> PipeProbe {
        PipeProbe(Arc::clone(&self.0))
    }

    /// Bytes written and not yet read.
    pub fn unread(&self) -> usize {
        lock(&self.0).buf.len()
    }

    /// How many times the reading end was polled, those that found
    /// nothing included.
    pub fn reader_polls(&self) -> u64 {
        lock(&self.0).reader_polls
    }

    /// Whether the reading end was dropped.
    pub fn is_reader_closed(&self) -> bool {
        !lock(&self.0).reader_open
    }

    /// Writes all of `data`, waiting for room; `BrokenPipe` if the reader
    /// goes away first.
    pub async fn write_all(&mut self, mut data: &[u8]) -> io::Result<()> {
        while !data.is_empty() {
            let n = poll_fn(|cx| PipeWrite::poll_write(self, cx, data)).await?;
            data = &data[n..];
        }
        Ok(())
    }
}

impl PipeWrite for PipeWriter {
    fn poll_write(&mut self, cx: &mut Context<'_>, data: &[u8]) -> Poll<io::Result<usize>> {
        let mut state = lock(&self.0);
        if !state.reader_open {
            return Poll::Ready(Err(io::ErrorKind::BrokenPipe.into()));
        }
        let room = state.capacity - state.buf.len();
        if room == 0 {
            state.writer_waker = Some(cx.waker().clone());
            return Poll::Pending;
        }
        let n = room.min(data.len());
        state.buf.extend(&data[..n]);
        let waker = state.reader_waker.take();
        drop(state);
        if let Some(waker) = waker {
            waker.wake();
        }
        Poll::Ready(Ok(n))
    }

    fn poll_flush(&mut self, _cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Poll::Ready(Ok(()))
    }
}

impl Drop for PipeWriter {
    fn drop(&mut self) {
        let waker = {
            let mut state = lock(&self.0);
            state.writer_open = false;
            state.reader_waker.take()
        };
        if let Some(waker) = waker {
            waker.wake();
        }
    }
}

impl PipeReader {
    fn set_max_read(&self, max: usize) {
        lock(&self.cell).max_read = max;
    }

    /// Bytes written and not yet read.
    pub fn unread(&self) -> usize {
        lock(&self.cell).buf.len()
    }

    /// Bytes read so far.
    pub fn read_total(&self) -> u64 {
        lock(&self.cell).read_total
    }

    /// Whether the writing end was dropped (what is unread is still there).
    pub fn is_writer_closed(&self) -> bool {
        !lock(&self.cell).writer_open
    }

    /// Takes what is there now, without waiting.
    pub fn take_available(&mut self) -> Vec<u8> {
        let (data, waker) = {
            let mut state = lock(&self.cell);
            let data: Vec<u8> = state.buf.drain(..).collect();
            state.read_total += data.len() as u64;
            (data, state.writer_waker.take())
        };
        if let Some(waker) = waker {
            waker.wake();
        }
        data
    }

    /// Reads until EOF.
    pub async fn read_to_end(&mut self) -> Vec<u8> {
        let mut all = Vec::new();
        let mut buf = vec![0; 4096];
        loop {
            match poll_fn(|cx| PipeRead::poll_read(self, cx, &mut buf)).await {
                Ok(0) | Err(_) => return all,
                Ok(n) => all.extend_from_slice(&buf[..n]),
            }
        }
    }

    /// Waits, reading nothing, until the writer closes its end: a child
    /// that never reads its stdin still sees it close.
    pub async fn writer_closed(&self) {
        poll_fn(|cx| {
            let mut state = lock(&self.cell);
            if state.writer_open {
                state.reader_waker = Some(cx.waker().clone());
                Poll::Pending
            } else {
                Poll::Ready(())
            }
        })
        .await;
    }
}

impl PipeRead for PipeReader {
    fn poll_read(&mut self, cx: &mut Context<'_>, out: &mut [u8]) -> Poll<io::Result<usize>> {
        if let Some(hook) = &self.before_read {
            hook();
        }
        let mut state = lock(&self.cell);
        state.reader_polls += 1;
        if state.buf.is_empty() {
            if !state.writer_open || out.is_empty() {
                return Poll::Ready(Ok(0));
            }
            state.reader_waker = Some(cx.waker().clone());
            return Poll::Pending;
        }
        let n = out.len().min(state.buf.len()).min(state.max_read);
        for (slot, byte) in out.iter_mut().zip(state.buf.drain(..n)) {
            *slot = byte;
        }
        state.read_total += n as u64;
        let waker = state.writer_waker.take();
        drop(state);
        if let Some(waker) = waker {
            waker.wake();
        }
        Poll::Ready(Ok(n))
    }
}

impl Drop for PipeReader {
    fn drop(&mut self) {
        let waker = {
            let mut state = lock(&self.cell);
            state.reader_open = false;
            state.buf.clear();
            state.writer_waker.take()
        };
        if let Some(waker) = waker {
            waker.wake();
        }
    }
}

/// A real PID that signals can be sent to, harmlessly: a process of our
/// own that has exited and is kept unreaped (a zombie). `kill` and
/// `killpg` on it succeed and do nothing, and its PID cannot be reused
/// while it is unreaped, so the transport's signals to a fake child are
/// "delivered" (the lifecycle counts them as sent, as it does for a real
/// child that ignores them) without reaching anything.
pub struct SignalSink {
    child: std::process::Child,
}

impl SignalSink {
    pub fn new() -> Self {
        use std::os::unix::process::CommandExt;
        let child = std::process::Command::new("true")
            .process_group(0)
            .spawn()
            .expect("spawn `true` as a signal sink");
        let pid = rustix::process::Pid::from_child(&child);
        // Wait for it to exit without reaping it.
        rustix::process::waitid(
            rustix::process::WaitId::Pid(pid),
            rustix::process::WaitIdOptions::EXITED | rustix::process::WaitIdOptions::NOWAIT,
        )
        .expect("waitid on the signal sink");
        Self { child }
    }

    /// Its PID (and process group).
    pub fn pid(&self) -> u32 {
        self.child.id()
    }
}

impl Drop for SignalSink {
    fn drop(&mut self) {
        let _ = self.child.wait();
    }
}
