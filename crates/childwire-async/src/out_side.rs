//! The sending half and the writing pipe, and how the pipe is written:
//! its calls are made outside the sending half's lock, so a sender queuing
//! a message never waits behind a write of a pipe's worth.

use std::io;
use std::ops::Deref;
use std::sync::{Arc, Mutex, MutexGuard};
use std::task::{Context, Poll, Waker};
use std::time::Instant;

use bytes::Bytes;
use childwire_core::{Closed, Framing, Outbound};
use crossbeam_utils::CachePadded;

use crate::runtime::PipeWrite;
use crate::sync::{BgWaker, lock, wake_bg};
use crate::wake::{WakeSet, fan_out};

/// [`OutCell::poll_write_all`] on the guard `$out`, which is handed back into
/// it: the outcome, as an expression.
macro_rules! write_all {
    ($link:expr, $out:ident, $waiter:expr, $now:expr) => {{
        let (guard, outcome) = $link.out.poll_write_all($out, $waiter, $now);
        $out = guard;
        outcome
    }};
}
pub(crate) use write_all;

/// The sending half, locked.
pub(crate) type OutGuard<'a, F> = MutexGuard<'a, OutSide<F>>;

/// The sending half behind its lock, on a cache line of its own: a sender
/// locks it once per message on one thread while the receiver reads its
/// own half on another, and sharing a line, each would wait for the
/// other's writes to it (measured: over a quarter of `poll_recv`'s own
/// samples, on the check that follows taking its lock).
pub(crate) struct OutCell<F: Framing>(CachePadded<Mutex<OutSide<F>>>);

impl<F: Framing> OutCell<F> {
    pub(crate) fn new(out: OutSide<F>) -> Self {
        Self(CachePadded::new(Mutex::new(out)))
    }
}

impl<F: Framing> Deref for OutCell<F> {
    type Target = Mutex<OutSide<F>>;

    fn deref(&self) -> &Mutex<OutSide<F>> {
        &self.0
    }
}

/// The sending half and the writing pipe.
pub(crate) struct OutSide<F: Framing> {
    pub(crate) outbound: Outbound<F>,
    pipe: PipeSlot,
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
    /// Someone found the pipe out with another writer and waits: woken
    /// when it comes back.
    contended: bool,
    /// Tasks waiting for room, for the queue to drain, or for the pipe.
    waiters: Arc<WakeSet>,
    pipe_waker: Waker,
    /// The background task, woken when a write starts the clock of the
    /// write timeout, whose timer that task runs.
    bg: BgWaker,
}

/// How far a call to [`OutCell::poll_write_all`] or
/// [`OutCell::poll_write_queued`] writes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Upto {
    /// Until nothing is queued, what is queued meanwhile included.
    Drained,
    /// What is queued when the call begins.
    QueuedNow,
}

/// Where the writing pipe is.
enum PipeSlot {
    /// Here, for whoever holds the lock.
    Here(Box<dyn PipeWrite>),
    /// A writer has it outside the lock for one call.
    Out,
    /// Out, and closed meanwhile: dropped when it comes back.
    OutClosed,
    /// Closed: the peer reads EOF.
    Gone,
}

/// One call on the pipe, made outside the lock.
enum PipeCall {
    Write(Bytes),
    Flush,
    Shutdown,
}

/// What the writer does next.
enum Next {
    /// Nothing (`Ready`), or nothing now (`Pending`, a waker registered).
    Done(Poll<()>),
    /// This call, with the pipe taken out of the slot for it.
    Call(Box<dyn PipeWrite>, PipeCall),
}

impl<F: Framing> OutSide<F> {
    pub(crate) fn new(outbound: Outbound<F>, pipe: Box<dyn PipeWrite>, bg: BgWaker) -> Self {
        let waiters = WakeSet::new();
        Self {
            outbound,
            pipe: PipeSlot::Here(pipe),
            unflushed: false,
            closing: false,
            flush_armed: false,
            write_failed: false,
            broken: false,
            contended: false,
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

    /// What to do next with the pipe, under the lock.
    fn next(&mut self, now: Instant) -> Next {
        if !self.closing && self.outbound.poll_close() {
            self.closing = true;
        }
        match self.pipe {
            PipeSlot::Here(_) => {}
            PipeSlot::Out => {
                // Another writer is at it: it wakes us when the pipe is back.
                self.contended = true;
                return Next::Done(Poll::Pending);
            }
            PipeSlot::OutClosed | PipeSlot::Gone => return Next::Done(Poll::Ready(())),
        }
        let call = if self.closing {
            // A writer that buffers (stdout through a blocking thread, a
            // TLS stream) loses what it holds if dropped unflushed: on a
            // graceful close the peer must get everything before its EOF
            // (shutting down implies a flush). Not after a stall: the peer
            // reads nothing, so that flush would never end, and the pipe is
            // dropped at once.
            if matches!(self.outbound.closed(), Some(Closed::Stalled { .. })) {
                self.unflushed = false;
                self.close_pipe();
                return Next::Done(Poll::Ready(()));
            }
            PipeCall::Shutdown
        } else {
            match self.outbound.poll_transmit(now) {
                Some(bytes) => PipeCall::Write(bytes),
                None if self.unflushed => PipeCall::Flush,
                None => return Next::Done(Poll::Ready(())),
            }
        };
        match std::mem::replace(&mut self.pipe, PipeSlot::Out) {
            PipeSlot::Here(pipe) => Next::Call(pipe, call),
            // Checked above.
            other => {
                self.pipe = other;
                Next::Done(Poll::Ready(()))
            }
        }
    }

    /// Takes the pipe back and what its call did, under the lock again:
    /// `Some` ends the round (`Ready`: nothing more to do, `Pending`: the
    /// pipe is full). `progress` is set when bytes moved or the pipe broke.
    fn finish(
        &mut self,
        pipe: Box<dyn PipeWrite>,
        call: PipeCall,
        result: Poll<io::Result<usize>>,
        now: Instant,
        progress: &mut bool,
    ) -> Option<Poll<()>> {
        let closed_meanwhile = match std::mem::replace(&mut self.pipe, PipeSlot::Gone) {
            PipeSlot::Out => {
                self.pipe = PipeSlot::Here(pipe);
                false
            }
            // Closed while out (sending ended: the child exited, a stall,
            // a close): it stays closed, and is dropped here.
            _ => true,
        };
        match (call, result) {
            (_, Poll::Pending) => Some(Poll::Pending),
            // Whatever the call did not get through is moot: the pipe was
            // closed on purpose, and why is already recorded.
            (_, Poll::Ready(Err(_))) if closed_meanwhile => Some(Poll::Ready(())),
            (PipeCall::Write(_), Poll::Ready(Ok(n))) if n > 0 => {
                self.outbound.handle_written(n, now);
                self.unflushed = true;
                *progress = true;
                None
            }
            (PipeCall::Flush, Poll::Ready(Ok(_))) => {
                self.unflushed = false;
                None
            }
            (PipeCall::Write(_) | PipeCall::Flush, Poll::Ready(result)) => {
                if let Err(err) = result {
                    if err.kind() != io::ErrorKind::BrokenPipe {
                        tracing::debug!("writing to the peer failed: {err}");
                    }
                }
                self.fail();
                *progress = true;
                None
            }
            (PipeCall::Shutdown, Poll::Ready(_)) => {
                self.unflushed = false;
                self.close_pipe();
                Some(Poll::Ready(()))
            }
        }
    }

    /// The peer closed its end: drop what is queued, refuse from now on.
    fn fail(&mut self) {
        self.outbound.handle_write_failed();
        let _ = self.outbound.poll_close();
        self.pipe = PipeSlot::Gone;
        self.write_failed = true;
        self.broken = true;
    }

    /// Closes the writing pipe (the peer reads EOF); if a writer has it out,
    /// once it comes back.
    pub(crate) fn close_pipe(&mut self) {
        self.pipe = match self.pipe {
            PipeSlot::Out | PipeSlot::OutClosed => PipeSlot::OutClosed,
            PipeSlot::Here(_) | PipeSlot::Gone => PipeSlot::Gone,
        };
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
        self.unflushed && self.is_pipe_open()
    }

    pub(crate) fn is_pipe_open(&self) -> bool {
        matches!(self.pipe, PipeSlot::Here(_) | PipeSlot::Out)
    }
}

impl<F: Framing> OutCell<F> {
    /// Writes and flushes everything queued. `Ready` when nothing is left
    /// to write (or nothing can be: the pipe is closed); `Pending` when the
    /// pipe is full or another writer has it, with `waiter` (and everyone
    /// registered) woken when it takes more or comes back.
    ///
    /// The pipe's own calls are made with the lock released (the guard is
    /// handed back): a write of a pipe's worth takes a while, and senders
    /// queuing meanwhile must not sleep on the lock for it. The pipe is
    /// taken out of its slot for the call, so there is one writer at a
    /// time; what others queue meanwhile goes out in its next round.
    pub(crate) fn poll_write_all<'a>(
        &'a self,
        out: OutGuard<'a, F>,
        waiter: Option<&Waker>,
        now: Instant,
    ) -> (OutGuard<'a, F>, Poll<()>) {
        self.poll_write(out, waiter, now, Upto::Drained)
    }

    /// Writes what is queued when called, for senders that left it (the
    /// background flush, a receiver about to wait), and stops there:
    /// `Pending` with bytes left that senders queued meanwhile, `waiter`
    /// woken at once (bytes moved) to come back for them. Otherwise as
    /// [`poll_write_all`](Self::poll_write_all).
    ///
    /// Writing until drained, a writer on one thread chases a sender
    /// queuing on another: every write takes the few messages queued during
    /// the one before, hundreds of bytes, and wakes the peer for a read as
    /// small, so the whole pipeline falls to small reads and writes (tens
    /// of thousands of writes per 32 MiB of 64-byte messages instead of
    /// hundreds). Coming back after a round of the runtime, it finds a
    /// batch; the sender, meanwhile, writes its own once it has one.
    pub(crate) fn poll_write_queued<'a>(
        &'a self,
        out: OutGuard<'a, F>,
        waiter: Option<&Waker>,
        now: Instant,
    ) -> (OutGuard<'a, F>, Poll<()>) {
        self.poll_write(out, waiter, now, Upto::QueuedNow)
    }

    fn poll_write<'a>(
        &'a self,
        mut out: OutGuard<'a, F>,
        waiter: Option<&Waker>,
        now: Instant,
        upto: Upto,
    ) -> (OutGuard<'a, F>, Poll<()>) {
        if let Some(waker) = waiter {
            out.waiters.register(waker);
        }
        let queued_now = out.outbound.queue_end();
        let pipe_waker = out.pipe_waker.clone();
        let deadline_before = out.outbound.poll_timeout();
        let mut progress = false;
        let mut wrote_outside = false;
        let outcome = loop {
            if upto == Upto::QueuedNow
                && out.outbound.written_to() >= queued_now
                && !out.outbound.is_drained()
                && !out.closing
            {
                // Bytes moved, so `waiter` is woken below with everyone
                // registered: it comes back for the rest.
                break Poll::Pending;
            }
            let (mut pipe, call) = match out.next(now) {
                Next::Done(outcome) => break outcome,
                Next::Call(pipe, call) => (pipe, call),
            };
            drop(out);
            let mut cx = Context::from_waker(&pipe_waker);
            let result = match &call {
                PipeCall::Write(bytes) => pipe.poll_write(&mut cx, bytes),
                PipeCall::Flush => pipe.poll_flush(&mut cx).map_ok(|()| 0),
                PipeCall::Shutdown => pipe.poll_shutdown(&mut cx).map_ok(|()| 0),
            };
            out = lock(self);
            wrote_outside = true;
            if let Some(outcome) = out.finish(pipe, call, result, now, &mut progress) {
                break outcome;
            }
        };
        if outcome.is_ready() && out.flush_armed && out.outbound.is_drained() {
            // Nothing left for the background flush, or for a receiver
            // about to wait.
            out.flush_armed = false;
        }
        if progress {
            // The pipe took bytes: a sender may try again after a batch.
            out.outbound.handle_write_attempt();
        }
        if progress || (wrote_outside && std::mem::take(&mut out.contended)) {
            out.waiters.wake_all();
        }
        let deadline = out.outbound.poll_timeout();
        if deadline.is_some() && (deadline_before.is_none() || deadline < deadline_before) {
            // The write timeout's clock started here, sooner than the
            // background task, which runs its timer, last saw. It is not
            // always woken otherwise: with the queue written out but a
            // buffering pipe's flush pending (a Windows child's stdin
            // behind a blocking thread), the flush stays armed, so the
            // next write into the stuck pipe arms nothing, and a sender
            // waiting for room would wait forever.
            wake_bg(&out.bg);
        }
        (out, outcome)
    }
}

#[cfg(test)]
mod tests {
    use std::sync::{Mutex, OnceLock, Weak};

    use childwire_core::{Channel, ChannelConfig, Lines};

    use super::*;

    /// A pipe that closes sending (as the child's exit does) while a write
    /// is in progress outside the lock, then fails that write as a pipe
    /// whose reader is gone does.
    struct ClosedDuringWrite {
        link: Arc<OnceLock<Weak<OutCell<Lines>>>>,
        dropped: Arc<std::sync::atomic::AtomicBool>,
    }

    impl PipeWrite for ClosedDuringWrite {
        fn poll_write(&mut self, _: &mut Context<'_>, _: &[u8]) -> Poll<io::Result<usize>> {
            let link = self
                .link
                .get()
                .and_then(Weak::upgrade)
                .expect("the sending half");
            // The lock is free: the write happens outside it.
            lock(&link).abort(Closed::Exited);
            Poll::Ready(Err(io::ErrorKind::BrokenPipe.into()))
        }

        fn poll_flush(&mut self, _: &mut Context<'_>) -> Poll<io::Result<()>> {
            Poll::Ready(Ok(()))
        }
    }

    impl Drop for ClosedDuringWrite {
        fn drop(&mut self) {
            self.dropped
                .store(true, std::sync::atomic::Ordering::SeqCst);
        }
    }

    /// A pipe that takes every write whole and records it, while a sender
    /// queues one more message during each of its first `queue_during`
    /// writes (the lock is free then), as a sender on another thread does.
    struct SenderQueuesMeanwhile {
        link: Arc<OnceLock<Weak<OutCell<Lines>>>>,
        queue_during: usize,
        writes: Writes,
    }

    /// What a test pipe was handed, one entry per write.
    type Writes = Arc<Mutex<Vec<Vec<u8>>>>;

    impl PipeWrite for SenderQueuesMeanwhile {
        fn poll_write(&mut self, _: &mut Context<'_>, buf: &[u8]) -> Poll<io::Result<usize>> {
            if self.queue_during > 0 {
                self.queue_during -= 1;
                let link = self
                    .link
                    .get()
                    .and_then(Weak::upgrade)
                    .expect("the sending half");
                lock(&link).outbound.send("meanwhile").expect("queued");
            }
            lock(&self.writes).push(buf.to_vec());
            Poll::Ready(Ok(buf.len()))
        }

        fn poll_flush(&mut self, _: &mut Context<'_>) -> Poll<io::Result<()>> {
            Poll::Ready(Ok(()))
        }
    }

    /// A sending half whose pipe is [`SenderQueuesMeanwhile`], with "first" queued,
    /// and the pipe's record of writes.
    fn link_with_a_busy_sender(queue_during: usize) -> (Arc<OutCell<Lines>>, Writes) {
        let writes = Writes::default();
        let link = link_over(|link| SenderQueuesMeanwhile {
            link,
            queue_during,
            writes: Arc::clone(&writes),
        });
        lock(&link).outbound.send("first").expect("queued");
        (link, writes)
    }

    /// A sending half over the writing pipe `make` builds; the pipe is
    /// handed the half (set once it exists), to act on it during its calls.
    fn link_over<P: PipeWrite>(
        make: impl FnOnce(Arc<OnceLock<Weak<OutCell<Lines>>>>) -> P,
    ) -> Arc<OutCell<Lines>> {
        let slot = Arc::new(OnceLock::new());
        let mut config = ChannelConfig::default();
        config.max_message_size = 1024;
        config.max_send_size = 1024;
        config.send_high_water = 1 << 20;
        config.recv_high_water = 1 << 20;
        config.write_timeout = None;
        let (inbound, outbound) = Channel::new(Lines, &config).into_parts();
        drop(inbound);
        let link = Arc::new(OutCell::new(OutSide::new(
            outbound,
            Box::new(make(Arc::clone(&slot))),
            BgWaker::default(),
        )));
        slot.set(Arc::downgrade(&link)).ok();
        link
    }

    #[test]
    fn writing_what_is_queued_leaves_what_a_sender_queues_meanwhile_and_comes_back() {
        let (link, writes) = link_with_a_busy_sender(3);
        let counting = Arc::new(crate::wake::Counting::default());
        let waker = Waker::from(Arc::clone(&counting));

        let (out, written) = link.poll_write_queued(lock(&link), Some(&waker), Instant::now());

        assert!(written.is_pending(), "bytes are left");
        assert_eq!(*lock(&writes), [b"first\n".to_vec()], "one write, no chase");
        assert_eq!(
            out.outbound.queued(),
            b"meanwhile\n".len(),
            "kept, not lost"
        );
        assert_eq!(counting.count(), 1, "woken to come back for the rest");
    }

    #[test]
    fn writing_all_follows_a_sender_until_nothing_is_queued() {
        let (link, writes) = link_with_a_busy_sender(2);

        let (out, written) = link.poll_write_all(lock(&link), None, Instant::now());

        assert!(written.is_ready());
        assert!(out.outbound.is_drained());
        assert_eq!(
            *lock(&writes),
            [
                b"first\n".to_vec(),
                b"meanwhile\n".to_vec(),
                b"meanwhile\n".to_vec()
            ]
        );
    }

    #[test]
    fn a_sender_that_writes_out_an_armed_queue_disarms_the_background_flush() {
        let (link, _writes) = link_with_a_busy_sender(0);
        let mut out = lock(&link);
        out.flush_armed = true;

        let (out, written) = link.poll_write_all(out, None, Instant::now());

        assert!(written.is_ready() && out.outbound.is_drained());
        assert!(!out.flush_armed, "nothing is left for the background flush");
    }

    #[test]
    fn c12_a_close_during_a_write_outside_the_lock_wins_over_that_writes_failure() {
        let dropped = Arc::new(std::sync::atomic::AtomicBool::new(false));
        let link = link_over(|link| ClosedDuringWrite {
            link,
            dropped: Arc::clone(&dropped),
        });
        let mut out = lock(&link);
        out.outbound.send("hello").expect("queued");
        let (out, written) = link.poll_write_all(out, None, Instant::now());

        assert!(written.is_ready(), "nothing more can be written");
        assert_eq!(
            out.outbound.closed(),
            Some(Closed::Exited),
            "the close's reason stays"
        );
        assert!(
            !out.broken && !out.write_failed,
            "not a peer that stopped reading"
        );
        assert!(!out.is_pipe_open());
        assert!(
            dropped.load(std::sync::atomic::Ordering::SeqCst),
            "the pipe was dropped on its return"
        );
    }
}
