//! The state the user's handles and the background task share: the sending
//! half with the writing pipe, the receiving half with the reading pipe, and
//! (for a child) the supervisor. Each behind its own plain mutex, locked only
//! inside `poll` functions and never across an `.await`, so the two
//! directions never wait for each other.

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError, TryLockError};
use std::task::{Context, Poll, Waker};
use std::time::{Duration, Instant};

use childwire_core::{Closed, Counters, ExitReport, Framing, Inbound, Outbound, Supervisor};

use crate::runtime::{PipeRead, PipeWrite};
use crate::wake::{WakeSet, fan_out};

/// One read's worth: what a Linux pipe holds.
pub(crate) const READ_CHUNK: usize = 64 * 1024;

/// Queued bytes at which a sender writes them itself instead of leaving
/// them to the background flush: a pipe's worth, one write.
pub(crate) const WRITE_BATCH: usize = 64 * 1024;

/// A message queued alone this long or longer after the queue was last
/// written out is written at once by its sender: nothing sent right behind
/// it would share the write,
/// and leaving it to the background flush costs a wake-up of another task
/// (another thread) per message, the better part of a round trip to a
/// child that answers at once. Shorter than any such round trip; longer
/// than what a sender running a loop takes per message.
pub(crate) const SEND_PAUSE: Duration = Duration::from_micros(5);

/// Where the background task's waker is kept.
type BgWaker = Arc<Mutex<Option<Waker>>>;

pub(crate) fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    // A panic elsewhere while holding a lock leaves these states consistent
    // (their own methods keep them so); go on with them.
    mutex.lock().unwrap_or_else(PoisonError::into_inner)
}

pub(crate) struct Link<F: Framing> {
    pub(crate) out: Mutex<OutSide<F>>,
    pub(crate) inn: Mutex<InSide<F>>,
    /// The child's part; `None` for a channel over a pipe pair.
    pub(crate) control: Option<Mutex<ControlSide>>,
    /// The background task, woken when it has something to do. Shared with
    /// the sending half, which wakes it when a write starts the clock of
    /// the write timeout, whose timer that task runs.
    bg: BgWaker,
    /// Mirrors "bytes wait for the background flush", so a receiver can
    /// look without taking the sending half's lock.
    pub(crate) flush_armed: AtomicBool,
    /// The reading pipe reached EOF and the supervisor was not told yet.
    /// Outside the receiving half's lock, so the background task looks at
    /// it on every round without contending with a receiver that is
    /// reading and decoding under that lock.
    pub(crate) stdout_eof_unreported: AtomicBool,
    /// Live user handles (senders and the receiver).
    handles: AtomicUsize,
    /// Every handle is gone.
    abandoned: AtomicBool,
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
            out: Mutex::new(OutSide::new(outbound, stdin, Arc::clone(&bg))),
            inn: Mutex::new(InSide::new(inbound, stdout)),
            control: control.map(Mutex::new),
            bg,
            flush_armed: AtomicBool::new(false),
            stdout_eof_unreported: AtomicBool::new(false),
            handles: AtomicUsize::new(0),
            abandoned: AtomicBool::new(false),
        })
    }

    pub(crate) fn is_child(&self) -> bool {
        self.control.is_some()
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

    /// Asks the background task to write what is queued, once per batch.
    pub(crate) fn arm_flush(&self, out: &mut OutSide<F>) {
        if !out.flush_armed {
            out.flush_armed = true;
            self.flush_armed.store(true, Ordering::Release);
            self.wake_bg();
        }
    }

    /// Writes what `out` holds from the caller's task; if the pipe is full,
    /// leaves the rest to the background task.
    pub(crate) fn write_or_arm(&self, out: &mut OutSide<F>, now: Instant) {
        if out.poll_write_all(None, now).is_pending() {
            self.arm_flush(out);
        }
    }

    /// After a sender queued a message: writes from the caller's task once
    /// another batch is queued since the last attempt, or when the message
    /// is alone in the queue [`SEND_PAUSE`] or more after it was last
    /// written out; else leaves it
    /// to the background flush, armed. A sender running ahead of a full
    /// pipe thus tries the pipe once per batch, not once per message, and
    /// messages sent back to back go out together; a lone message (a
    /// request) is written at once, with no wake-up of another task.
    pub(crate) fn queued_one(&self, out: &mut OutSide<F>, clock: impl Fn() -> Instant) {
        // The clock is read only for a message alone in the queue: once
        // per batch in a burst, not once per message.
        let now = if out.outbound.queued() >= out.write_at {
            clock()
        } else if out.outbound.queued_messages() == 1 {
            let now = clock();
            let after_pause = out
                .drained_at
                .is_none_or(|at| now.saturating_duration_since(at) >= SEND_PAUSE);
            if !after_pause {
                self.arm_flush(out);
                return;
            }
            now
        } else {
            self.arm_flush(out);
            return;
        };
        self.write_or_arm(out, now);
        out.write_at = out.outbound.queued() + WRITE_BATCH;
        if out.outbound.is_drained() {
            // The pause is counted from the end of this write: a write that
            // takes longer than the pause (waking the reader) must not make
            // the next message of a burst look like one after a pause.
            out.drained_at = Some(clock());
        }
    }

    /// Writes what is queued if the background flush was armed: a caller
    /// about to wait for an answer sends its request itself, with no
    /// hand-off to another task.
    ///
    /// Only if the sending half is free: armed, the bytes are the
    /// background task's to write anyway, and whoever holds the lock now
    /// (a sender running ahead, that task writing) is at work on them;
    /// waiting for it would put this thread to sleep on every batch.
    pub(crate) fn flush_if_armed(&self, now: Instant) {
        if self.flush_armed.load(Ordering::Acquire) {
            let mut out = match self.out.try_lock() {
                Ok(out) => out,
                Err(TryLockError::Poisoned(poisoned)) => poisoned.into_inner(),
                Err(TryLockError::WouldBlock) => return,
            };
            let _ = out.poll_write_all(None, now);
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
        counters
    }
}

/// The sending half and the writing pipe.
pub(crate) struct OutSide<F: Framing> {
    pub(crate) outbound: Outbound<F>,
    pipe: Option<Box<dyn PipeWrite>>,
    /// Bytes were written since the last flush.
    unflushed: bool,
    /// The outbound asked to close the write side (it hands that out
    /// once); the pipe is flushed and shut down first, then dropped.
    closing: bool,
    /// The background task is asked to flush.
    pub(crate) flush_armed: bool,
    /// A write failed: the peer closed its end. For the supervisor, which
    /// takes it.
    pub(crate) write_failed: bool,
    /// A write failed, ever: what was queued then was dropped.
    pub(crate) broken: bool,
    /// Queued bytes at which a sender next writes itself (see
    /// [`Link::queued_one`]).
    pub(crate) write_at: usize,
    /// When the queue was last written out whole (see
    /// [`Link::queued_one`]).
    drained_at: Option<Instant>,
    /// Tasks waiting for room, for the queue to drain, or for the pipe.
    waiters: Arc<WakeSet>,
    pipe_waker: Waker,
    /// The background task (see [`Link`]'s field of that name).
    bg: BgWaker,
}

impl<F: Framing> OutSide<F> {
    fn new(outbound: Outbound<F>, pipe: Box<dyn PipeWrite>, bg: BgWaker) -> Self {
        let waiters = WakeSet::new();
        Self {
            outbound,
            pipe: Some(pipe),
            unflushed: false,
            closing: false,
            flush_armed: false,
            write_failed: false,
            broken: false,
            write_at: WRITE_BATCH,
            drained_at: None,
            pipe_waker: fan_out(&waiters),
            waiters,
            bg,
        }
    }

    /// Registers a task to wake on progress (room, drain, the pipe).
    pub(crate) fn wait(&self, waker: &Waker) {
        self.waiters.register(waker);
    }

    pub(crate) fn wake_waiters(&self) {
        self.waiters.wake_all();
    }

    /// Writes and flushes everything queued. `Ready` when nothing is left
    /// to write (or nothing can be: the pipe is closed); `Pending` when the
    /// pipe is full, with `waiter` (and everyone registered) woken when it
    /// takes more.
    pub(crate) fn poll_write_all(&mut self, waiter: Option<&Waker>, now: Instant) -> Poll<()> {
        if let Some(waker) = waiter {
            self.waiters.register(waker);
        }
        let pipe_waker = self.pipe_waker.clone();
        let mut cx = Context::from_waker(&pipe_waker);
        let mut progress = false;
        let deadline_before = self.outbound.poll_timeout();
        let outcome = loop {
            if !self.closing && self.outbound.poll_close() {
                self.closing = true;
            }
            let Some(pipe) = self.pipe.as_mut() else {
                break Poll::Ready(());
            };
            if self.closing {
                // A writer that buffers (stdout through a blocking thread,
                // a TLS stream) loses what it holds if dropped unflushed:
                // on a graceful close the peer must get everything before
                // its EOF (shutting down implies a flush). Not after a
                // stall: the peer reads nothing, so that flush would never
                // end, and the pipe is dropped at once.
                let stalled = matches!(self.outbound.closed(), Some(Closed::Stalled { .. }));
                if !stalled && pipe.poll_shutdown(&mut cx).is_pending() {
                    break Poll::Pending;
                }
                self.unflushed = false;
                self.close_pipe();
                break Poll::Ready(());
            }
            match self.outbound.poll_transmit(now) {
                Some(bytes) => match pipe.poll_write(&mut cx, &bytes) {
                    Poll::Ready(Ok(n)) if n > 0 => {
                        self.outbound.handle_written(n, now);
                        self.unflushed = true;
                        progress = true;
                    }
                    Poll::Ready(result) => {
                        if let Err(err) = result {
                            if err.kind() != std::io::ErrorKind::BrokenPipe {
                                tracing::debug!("writing to the peer failed: {err}");
                            }
                        }
                        self.fail();
                        progress = true;
                    }
                    Poll::Pending => break Poll::Pending,
                },
                None if self.unflushed => match pipe.poll_flush(&mut cx) {
                    Poll::Ready(Ok(())) => self.unflushed = false,
                    Poll::Ready(Err(_)) => {
                        self.fail();
                        progress = true;
                    }
                    Poll::Pending => break Poll::Pending,
                },
                None => break Poll::Ready(()),
            }
        };
        if outcome.is_ready() && self.flush_armed && self.outbound.is_drained() {
            // Nothing left for the background flush.
            self.flush_armed = false;
        }
        if progress {
            if self.outbound.is_drained() {
                self.drained_at = Some(now);
            }
            // The pipe took bytes: a sender may try again after a batch.
            self.write_at = self.outbound.queued() + WRITE_BATCH;
            self.waiters.wake_all();
        }
        let deadline = self.outbound.poll_timeout();
        if deadline.is_some() && (deadline_before.is_none() || deadline < deadline_before) {
            // The write timeout's clock started here, sooner than the
            // background task, which runs its timer, last saw. It is not
            // always woken otherwise: with the queue written out but a
            // buffering pipe's flush pending (a Windows child's stdin
            // behind a blocking thread), the flush stays armed, so the
            // next write into the stuck pipe arms nothing, and a sender
            // waiting for room would wait forever.
            if let Some(waker) = lock(&self.bg).as_ref() {
                waker.wake_by_ref();
            }
        }
        outcome
    }

    /// The peer closed its end: drop what is queued, refuse from now on.
    fn fail(&mut self) {
        self.outbound.handle_write_failed();
        let _ = self.outbound.poll_close();
        self.pipe = None;
        self.write_failed = true;
        self.broken = true;
    }

    /// Closes the writing pipe (the peer reads EOF).
    pub(crate) fn close_pipe(&mut self) {
        self.pipe = None;
        self.waiters.wake_all();
    }

    /// Ends sending for `reason`: drop what is queued and close the pipe.
    pub(crate) fn abort(&mut self, reason: Closed) {
        self.outbound.abort(reason);
        let _ = self.outbound.poll_close();
        self.close_pipe();
    }

    /// Bytes were handed to the pipe that a buffering writer may still
    /// hold: they reached the peer only once flushed.
    pub(crate) fn is_unflushed(&self) -> bool {
        self.unflushed && self.pipe.is_some()
    }

    pub(crate) fn is_pipe_open(&self) -> bool {
        self.pipe.is_some()
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
    pub(crate) fn read_once(&mut self, waiter: &Waker, eof_unreported: &AtomicBool) -> ReadOutcome {
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
    /// Shutdown was asked.
    pub(crate) shutdown: bool,
    /// Every handle was dropped without a shutdown: the child is to be
    /// killed.
    pub(crate) abandoned: bool,
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
            shutdown: false,
            abandoned: false,
            report: None,
            stopped: false,
            done_waiters: WakeSet::new(),
        }
    }
}
