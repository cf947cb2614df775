//! The state the user's handles and the background task share: the sending
//! half with the writing pipe, the receiving half with the reading pipe, and
//! (for a child) the supervisor. Each behind its own plain mutex, locked only
//! inside `poll` functions and never across an `.await`, so the two
//! directions never wait for each other. The sending half's lock is not
//! held across the writing pipe's own calls either (see `out_side`): a
//! sender queuing a message never waits for a write in progress.

use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError, TryLockError};
use std::task::{Context, Poll, Waker};
use std::time::Instant;

use childwire_core::{Closed, Counters, ExitReport, Framing, Inbound, Outbound, Supervisor};
use crossbeam_utils::CachePadded;

use crate::exit_handle::ExitSlot;
use crate::out_side::{OutGuard, OutSide};
use crate::runtime::{PipeRead, PipeWrite};
use crate::wake::{WakeSet, fan_out};

/// One read's worth: what a Linux pipe holds.
pub(crate) const READ_CHUNK: usize = 64 * 1024;

/// Where the background task's waker is kept.
pub(crate) type BgWaker = Arc<Mutex<Option<Waker>>>;

pub(crate) fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    // A panic elsewhere while holding a lock leaves these states consistent
    // (their own methods keep them so); go on with them.
    mutex.lock().unwrap_or_else(PoisonError::into_inner)
}

pub(crate) struct Link<F: Framing> {
    /// The two halves on cache lines of their own: a sender locks its half
    /// once per message on one thread while the receiver reads its own on
    /// another, and sharing a line, each would wait for the other's writes
    /// to it (measured: over a quarter of `poll_recv`'s own samples, on
    /// the check that follows taking its lock).
    pub(crate) out: CachePadded<Mutex<OutSide<F>>>,
    pub(crate) inn: CachePadded<Mutex<InSide<F>>>,
    /// The child's part; `None` for a channel over a pipe pair.
    pub(crate) control: Option<Mutex<ControlSide>>,
    /// The background task, woken when it has something to do. Shared with
    /// the sending half, which wakes it when a write starts the clock of
    /// the write timeout, whose timer that task runs.
    bg: BgWaker,
    /// Mirrors the sending half's `send_ready` as last seen under its lock,
    /// so the `Sink`'s `poll_ready` answers without the lock while there is
    /// room. It may be stale when another sender took the room since: the
    /// `Sink` then queues that one message above the high-water mark, as it
    /// does when another sender takes the room between `poll_ready` and
    /// `start_send` (see `Outbound::send_anyway`). Measured: without it
    /// (the lock in every `poll_ready`), the `Sink` costs 57-58 ns per
    /// 64 B message instead of 47-48 (per_message --quick, two runs each,
    /// at b2c9294).
    pub(crate) send_ready: AtomicBool,
    /// The reading pipe reached EOF and the supervisor was not told yet.
    /// Outside the receiving half's lock, so the background task looks at
    /// it on every round without contending with a receiver that is
    /// reading and decoding under that lock.
    pub(crate) stdout_eof_unreported: AtomicBool,
    /// How many reads brought bytes from the peer: its turns, for the
    /// senders' write-now decision ([`Outbound::writes_now`]). Outside the
    /// receiving half's lock, so a sender reads it without that lock; one
    /// increment per read (64 KiB at most), one load per message sent.
    pub(crate) peer_turns: AtomicU64,
    /// Live user handles (senders and the receiver).
    handles: AtomicUsize,
    /// Every handle is gone.
    abandoned: AtomicBool,
    /// The child's end for [`ExitHandle`](crate::ExitHandle)s and failed
    /// sends: set when the report is made, closed if the driver stops
    /// without one.
    pub(crate) exit: ExitSlot,
}

impl<F: Framing> Link<F> {
    pub(crate) fn new(
        outbound: Outbound<F>,
        stdin: Box<dyn PipeWrite>,
        inbound: Inbound<F>,
        stdout: Box<dyn PipeRead>,
        control: Option<ControlSide>,
    ) -> Arc<Self> {
        let bg = BgWaker::default();
        Arc::new(Self {
            out: CachePadded::new(Mutex::new(OutSide::new(outbound, stdin, Arc::clone(&bg)))),
            inn: CachePadded::new(Mutex::new(InSide::new(inbound, stdout))),
            control: control.map(Mutex::new),
            bg,
            send_ready: AtomicBool::new(true),
            stdout_eof_unreported: AtomicBool::new(false),
            peer_turns: AtomicU64::new(0),
            handles: AtomicUsize::new(0),
            abandoned: AtomicBool::new(false),
            exit: ExitSlot::new(),
        })
    }

    pub(crate) fn is_child(&self) -> bool {
        self.control.is_some()
    }

    /// Where the background task's waker is kept, for wakers of the pipes
    /// it polls.
    pub(crate) fn bg_waker(&self) -> BgWaker {
        Arc::clone(&self.bg)
    }

    pub(crate) fn set_bg_waker(&self, waker: &Waker) {
        let mut slot = lock(&self.bg);
        if !slot.as_ref().is_some_and(|w| w.will_wake(waker)) {
            *slot = Some(waker.clone());
        }
    }

    pub(crate) fn wake_bg(&self) {
        if let Some(waker) = lock(&self.bg).as_ref() {
            waker.wake_by_ref();
        }
    }

    /// Records whether the sending half would take a message now (see
    /// [`Link::send_ready`]); stored only on a change, so the receiver
    /// reading the atomics next to it is not slowed by a store per
    /// message.
    pub(crate) fn note_send_ready(&self, ready: bool) {
        if self.send_ready.load(Ordering::Relaxed) != ready {
            self.send_ready.store(ready, Ordering::Release);
        }
    }

    /// Asks the background task to write what is queued, once per batch.
    pub(crate) fn arm_flush(&self, out: &mut OutSide<F>) {
        if !out.flush_armed {
            out.flush_armed = true;
            self.wake_bg();
        }
    }

    /// Writes what `out` holds from the caller's task; if the pipe is full
    /// (or another writer has it), leaves the rest to the background task.
    pub(crate) fn write_or_arm<'a>(
        &'a self,
        out: OutGuard<'a, F>,
        now: Instant,
    ) -> OutGuard<'a, F> {
        let (mut out, written) = self.poll_write_all(out, None, now);
        if written.is_pending() {
            self.arm_flush(&mut out);
        }
        out
    }

    /// After a sender queued a message: writes from the caller's task if
    /// the core says so ([`Outbound::writes_now`]), else leaves it to the
    /// background flush, armed.
    pub(crate) fn queued_one<'a>(
        &'a self,
        mut out: OutGuard<'a, F>,
        clock: impl Fn() -> Instant,
    ) -> OutGuard<'a, F> {
        let turn = self.peer_turns.load(Ordering::Relaxed);
        out.outbound.handle_peer_turn(turn);
        if !out.outbound.writes_now() {
            self.arm_flush(&mut out);
            return out;
        }
        let mut out = self.write_or_arm(out, clock());
        out.outbound.handle_write_attempt();
        out
    }

    /// Writes what is queued if the background flush was armed: a caller
    /// about to wait for an answer sends its request itself, with no
    /// hand-off to another task.
    ///
    /// Only if the sending half is free: armed, the bytes are the
    /// background task's to write anyway, and whoever holds the lock now
    /// (a sender running ahead, that task writing) is at work on them;
    /// waiting for it would put this thread to sleep on every batch. No
    /// mirror of the flag outside the lock: measured, the `try_lock` per
    /// receive that waits costs nothing the per-message bench can see
    /// (recv 64 B 56-59 ns with or without it, --quick, at b2c9294), and a
    /// mirror can go stale.
    pub(crate) fn flush_if_armed(&self, clock: impl FnOnce() -> Instant) {
        let out = match self.out.try_lock() {
            Ok(out) => out,
            Err(TryLockError::Poisoned(poisoned)) => poisoned.into_inner(),
            Err(TryLockError::WouldBlock) => return,
        };
        if out.flush_armed {
            // What senders queue meanwhile is the background task's
            // (armed): this caller is about to read.
            let _ = self.poll_write_queued(out, None, clock());
        }
    }

    /// Takes "stdout reached EOF" for the supervisor, once.
    pub(crate) fn take_stdout_eof(&self) -> bool {
        self.stdout_eof_unreported.swap(false, Ordering::AcqRel)
    }

    pub(crate) fn acquire(&self) {
        self.handles.fetch_add(1, Ordering::AcqRel);
    }

    /// A handle is gone; `true` if it was the last one.
    pub(crate) fn release(&self) -> bool {
        let last = self.handles.fetch_sub(1, Ordering::AcqRel) == 1;
        if last {
            self.abandoned.store(true, Ordering::Release);
        }
        last
    }

    /// Whether every handle is gone.
    pub(crate) fn is_abandoned(&self) -> bool {
        self.abandoned.load(Ordering::Acquire)
    }

    /// The channel's counters now.
    pub(crate) fn counters(&self) -> Counters {
        // One lock at a time: no order to keep.
        let stderr_bytes = self
            .control
            .as_ref()
            .map_or(0, |control| lock(control).supervisor.stderr_bytes());
        let (messages_out, bytes_out) = {
            let out = lock(&self.out);
            (
                out.outbound.messages_written(),
                out.outbound.bytes_written(),
            )
        };
        let inn = lock(&self.inn);
        let stats = inn.inbound.stats();
        let mut counters = Counters::default();
        counters.messages_in = stats.messages;
        counters.bytes_in = stats.bytes;
        counters.messages_out = messages_out;
        counters.bytes_out = bytes_out;
        counters.oversized = stats.oversized;
        counters.malformed = stats.malformed;
        counters.blank_lines = stats.blank_lines;
        counters.stderr_bytes = stderr_bytes;
        if let Some(pollution) = inn.inbound.pollution_counts() {
            counters.polluted = pollution.polluted;
            counters.polluted_dropped = pollution.dropped;
        }
        counters
    }
}

/// The receiving half, the reading pipe, and the end of the stream.
pub(crate) struct InSide<F: Framing> {
    pub(crate) inbound: Inbound<F>,
    pipe: Option<Box<dyn PipeRead>>,
    buf: Box<[u8]>,
    /// The child's end, delivered after the last frame.
    pub(crate) report: Option<ExitReport>,
    /// Why the stream ended without a report (the task driving it stopped).
    pub(crate) broken: Option<Closed>,
    /// The report (or the end of a channel's stream) was delivered.
    pub(crate) finished: bool,
    /// Tasks waiting for frames, the report, or the pipe.
    waiters: Arc<WakeSet>,
    pipe_waker: Waker,
}

/// What one attempt to read brought.
pub(crate) enum ReadOutcome {
    /// Frames may be waiting.
    Progress,
    /// Nothing to read now; the waiter is registered.
    Pending,
    /// No more reading: EOF seen, the pipe gone, or the queue at its bound.
    Stopped,
}

impl<F: Framing> InSide<F> {
    fn new(inbound: Inbound<F>, pipe: Box<dyn PipeRead>) -> Self {
        let waiters = WakeSet::new();
        Self {
            inbound,
            pipe: Some(pipe),
            buf: vec![0; READ_CHUNK].into_boxed_slice(),
            report: None,
            broken: None,
            finished: false,
            pipe_waker: fan_out(&waiters),
            waiters,
        }
    }

    pub(crate) fn wait(&self, waker: &Waker) {
        self.waiters.register(waker);
    }

    pub(crate) fn wake_waiters(&self) {
        self.waiters.wake_all();
    }

    /// Reads once and decodes what came, within the receive bound. At EOF,
    /// sets `eof_unreported` (the link's flag for the supervisor).
    pub(crate) fn read_once(
        &mut self,
        waiter: &Waker,
        eof_unreported: &AtomicBool,
        turns: &AtomicU64,
    ) -> ReadOutcome {
        if !self.inbound.wants_read() {
            return ReadOutcome::Stopped;
        }
        let Some(pipe) = self.pipe.as_mut() else {
            return ReadOutcome::Stopped;
        };
        self.waiters.register(waiter);
        let pipe_waker = self.pipe_waker.clone();
        let mut cx = Context::from_waker(&pipe_waker);
        match pipe.poll_read(&mut cx, &mut self.buf) {
            Poll::Ready(Ok(n)) if n > 0 => {
                turns.fetch_add(1, Ordering::Relaxed);
                self.inbound.handle_data(&self.buf[..n]);
                ReadOutcome::Progress
            }
            Poll::Ready(result) => {
                if let Err(err) = result {
                    tracing::warn!("reading from the peer failed: {err}");
                }
                self.pipe = None;
                self.inbound.handle_eof();
                eof_unreported.store(true, Ordering::Release);
                ReadOutcome::Progress
            }
            Poll::Pending => ReadOutcome::Pending,
        }
    }

    /// Reading is stopped by the receive bound alone: the pipe may hold
    /// more, to read once the caller makes room.
    pub(crate) fn is_held_back(&self) -> bool {
        self.pipe.is_some() && !self.inbound.wants_read() && !self.inbound.is_eof()
    }

    /// The next frame for the caller, and whether taking it made room
    /// below the receive bound.
    pub(crate) fn take_frame(&mut self) -> (Option<childwire_core::Frame>, bool) {
        let held_back = self.is_held_back();
        let frame = self.inbound.poll_received();
        (frame, held_back && self.inbound.wants_read())
    }

    /// Stops reading: the pipe is dropped (a grandchild may still hold it).
    pub(crate) fn stop_reading(&mut self) {
        self.pipe = None;
    }
}

/// The child's part, driven by the background task.
pub(crate) struct ControlSide {
    pub(crate) supervisor: Supervisor,
    /// Whether a drop without a shutdown kills the child.
    pub(crate) kill_on_drop: bool,
    /// A copy of the report for `shutdown()` callers.
    pub(crate) report: Option<ExitReport>,
    /// The background task ended before the end (its runtime shut down).
    pub(crate) stopped: bool,
    /// `shutdown()` calls waiting for the report.
    pub(crate) done_waiters: Arc<WakeSet>,
}

impl ControlSide {
    pub(crate) fn new(supervisor: Supervisor, kill_on_drop: bool) -> Self {
        Self {
            supervisor,
            kill_on_drop,
            report: None,
            stopped: false,
            done_waiters: WakeSet::new(),
        }
    }
}
