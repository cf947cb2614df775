//! The state the user's handles and the background task share: the sending
//! half with the writing pipe, the receiving half with the reading pipe, and
//! (for a child) the supervisor. Each behind its own plain mutex, locked only
//! inside `poll` functions and never across an `.await`, so the two
//! directions never wait for each other. The sending half's lock is not
//! held across the writing pipe's own calls either (see `out_side`): a
//! sender queuing a message never waits for a write in progress.

use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, TryLockError};
use std::task::Waker;
use std::time::Instant;

use childwire_core::{Counters, Framing, Inbound, Outbound, Supervisor, channel};
use crossbeam_utils::CachePadded;

use crate::exit_handle::ExitSlot;
use crate::in_side::InSide;
use crate::out_side::{OutCell, OutGuard, OutSide};
use crate::runtime::{PipeRead, PipeWrite};
use crate::sync::{BgWaker, lock, wake_bg};

pub(crate) struct Link<F: Framing> {
    /// The sending half, on a cache line of its own (see [`OutCell`]).
    pub(crate) out: OutCell<F>,
    /// The receiving half, on its own line for the same reason.
    pub(crate) inn: CachePadded<Mutex<InSide<F>>>,
    /// The child's supervisor; `None` for a channel over a pipe pair. When
    /// both are locked, this one first, then `out` (never `inn` under it).
    /// Its own lock, off the data path: a send or a receive never takes it
    /// (only stdout's EOF, the last handle's drop, stderr, timers and the
    /// exit do), so the per-message rows of `cargo xtask bench --check`
    /// count none of it, and the background task's work on it never waits
    /// for a sender or the receiver.
    pub(crate) supervisor: Option<Mutex<Supervisor>>,
    /// Whether the last handle's drop, without a shutdown, kills the child.
    kill_on_drop: bool,
    /// The background task, woken when it has something to do. A mutex,
    /// not on the per-message path: taken once per batch a sender leaves
    /// to that task (`arm_flush`), once per poll of the task, and when a
    /// write starts the write timeout's clock (173 wake-ups for 65,536
    /// messages in the `send().await` row, counted under callgrind).
    bg: BgWaker,
    /// Mirrors the sending half's `send_ready` as last seen under its lock,
    /// so the `Sink`'s `poll_ready` answers without the lock while there is
    /// room. It may be stale when another sender took the room since: the
    /// `Sink` then queues that one message above the high-water mark, as it
    /// does when another sender takes the room between `poll_ready` and
    /// `start_send` (see `Outbound::send_anyway`). Measured: without it
    /// (the lock in every `poll_ready`), the `Sink` costs 57-58 ns per
    /// 64 B message instead of 47-48 (per_message --quick, two runs each,
    /// at b2c9294); in instructions (`cargo xtask bench`, row `send 200 B:
    /// childwire Sink feed`, least of three runs, at 7a69531) 491.4 per
    /// message instead of 454.4.
    pub(crate) send_ready: AtomicBool,
    /// How many reads brought bytes from the peer: its turns, for the
    /// senders' write-now decision ([`Outbound::writes_now`]). Outside the
    /// receiving half's lock, so a sender reads it without that lock; one
    /// increment per read (64 KiB at most), one load per message sent.
    /// Measured (`cargo xtask bench`, instructions per message, at
    /// 7a69531): `send().await` 426.3 with it, 447.3 with the count read
    /// under the receiving half's lock instead (round trip on Tokio
    /// 2934.8 and 2954.8); the load and the core's `handle_peer_turn` cost
    /// 4 of them (422.3 without any count, which the rule needs).
    pub(crate) peer_turns: AtomicU64,
    /// Live user handles (senders and the receiver); none left: abandoned.
    handles: AtomicUsize,
    /// The child's end: the one record of its report, which `shutdown`,
    /// `kill`, failed sends, exit handles and the receiver all read. Closed
    /// if the driver stops without one.
    pub(crate) exit: ExitSlot,
}

impl<F: Framing> Link<F> {
    pub(crate) fn new(
        outbound: Outbound<F>,
        stdin: Box<dyn PipeWrite>,
        inbound: Inbound<F>,
        stdout: Box<dyn PipeRead>,
        supervisor: Option<(Supervisor, bool)>,
    ) -> Arc<Self> {
        let bg = BgWaker::default();
        let kill_on_drop = supervisor.as_ref().is_some_and(|(_, kill)| *kill);
        Arc::new(Self {
            out: OutCell::new(OutSide::new(outbound, stdin, Arc::clone(&bg))),
            inn: CachePadded::new(Mutex::new(InSide::new(inbound, stdout))),
            supervisor: supervisor.map(|(supervisor, _)| Mutex::new(supervisor)),
            kill_on_drop,
            bg,
            send_ready: AtomicBool::new(true),
            peer_turns: AtomicU64::new(0),
            handles: AtomicUsize::new(0),
            exit: ExitSlot::new(),
        })
    }

    pub(crate) fn is_child(&self) -> bool {
        self.supervisor.is_some()
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
        wake_bg(&self.bg);
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
        let (mut out, written) = self.out.poll_write_all(out, None, now);
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
            let _ = self.out.poll_write_queued(out, None, clock());
        }
    }

    /// Stdout reached EOF: the supervisor's input, given by whoever read it.
    pub(crate) fn stdout_eof(&self, now: Instant) {
        if let Some(supervisor) = &self.supervisor {
            lock(supervisor).handle_stdout_eof(now);
            self.wake_bg();
        }
    }

    pub(crate) fn acquire(&self) {
        self.handles.fetch_add(1, Ordering::AcqRel);
    }

    /// A handle is gone; the last one to go tells the supervisor, which
    /// decides what becomes of a child nobody holds.
    pub(crate) fn release(&self, now: Instant) {
        if self.handles.fetch_sub(1, Ordering::AcqRel) != 1 {
            return;
        }
        if let Some(supervisor) = &self.supervisor {
            lock(supervisor).handle_abandoned(self.kill_on_drop, now);
        }
        self.wake_bg();
    }

    /// Whether every handle is gone (the handles are made before the
    /// background task is spawned).
    pub(crate) fn is_abandoned(&self) -> bool {
        self.handles.load(Ordering::Acquire) == 0
    }

    /// The channel's counters now.
    pub(crate) fn counters(&self) -> Counters {
        let stderr_bytes = self
            .supervisor
            .as_ref()
            .map_or(0, |supervisor| lock(supervisor).stderr_bytes());
        // The one place both halves are locked: `out`, then `inn`. Nothing
        // locks `out` while holding `inn`.
        let out = lock(&self.out);
        let inn = lock(&self.inn);
        let mut counters = channel::counters(&inn.inbound, &out.outbound);
        counters.stderr_bytes = stderr_bytes;
        counters
    }
}
