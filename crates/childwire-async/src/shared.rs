//! What every handle of a transport and its background task share: one lock
//! over the core's [`Session`] with the pipes beside it, the tasks waiting,
//! and the exit report.
//!
//! A handle locks, makes one core call, does the I/O the core hands it with
//! the lock released (the pipe taken out of its slot: the core lets one
//! writer and one reader hold a pipe at a time), locks again to hand the
//! result in, and wakes whoever the core names once the lock is released.
//! Nothing here decides anything.

use std::io;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::task::{Context, Poll, Waker};
use std::time::Instant;

use childwire_core::{
    Decoding, Framing, Session, Wakes, WriteOp, WriteResult, WriteRound, WriteStep,
};

use crate::exit_handle::ExitSlot;
use crate::os::{SignalTarget, StdinWatch};
use crate::runtime::{PipeRead, PipeWrite};
use crate::sync::{BgWaker, CachePadded, lock, wake_bg};
use crate::wake::{WakeSet, fan_out};

/// One read's worth: what a Linux pipe holds.
const READ_CHUNK: usize = 64 * 1024;

pub(crate) struct Shared<F: Framing> {
    /// The session and the pipes, on a cache line of their own (the waker
    /// sets next to it are written by other threads).
    state: CachePadded<Mutex<State<F>>>,
    /// Tasks waiting to send, flush or close; the writing pipe wakes them.
    senders: Arc<WakeSet>,
    stdin_waker: Waker,
    /// The task waiting to receive (and a background read); the reading
    /// pipe wakes them.
    receiver: Arc<WakeSet>,
    stdout_waker: Waker,
    /// The background task.
    driver: BgWaker,
    /// Mirrors the session's `send_ready` as last seen under the lock, so
    /// the `Sink`'s `poll_ready` answers without the lock while there is
    /// room. It may be stale when another sender took the room since: the
    /// `Sink` then queues that one message above the high-water mark, as it
    /// does when another sender takes the room between `poll_ready` and
    /// `start_send` (`Session::send_anyway`). Measured before this layer
    /// held one lock (`cargo xtask bench`, row `send 200 B: childwire Sink
    /// feed`, least of three runs, at 7a69531): 454.4 instructions per
    /// message with it, 491.4 with the lock in every `poll_ready`.
    send_ready: AtomicBool,
    /// The child's end, as published by the background task: what
    /// `shutdown`, `kill`, failed sends and exit handles read.
    pub(crate) exit: ExitSlot,
    /// What the receiver took out in a batch and has not handed out yet.
    pub(crate) holds: CachePadded<Holds>,
}

/// Messages the receiver took out of the session in a batch (under one
/// lock) and has not handed to its caller yet, and their bytes: the
/// background task hands them to the session, whose exit report counts them
/// as not yet received.
///
/// An atomic because the receiver hands its messages out without the lock;
/// on its own cache line, which only the receiver writes. One word, the
/// messages in its top 16 bits and their bytes below, so that a message
/// handed out costs one atomic step. What it pays for is the batch,
/// measured there (`take_batch` in receiver.rs).
#[derive(Debug, Default)]
pub(crate) struct Holds(AtomicU64);

/// Where [`Holds`] keeps its messages: a batch holds 64 at most, and its
/// bytes stay far below 2^48.
const HELD_MESSAGE: u64 = 1 << 48;

impl Holds {
    /// The receiver took `messages` more, of `bytes` bytes.
    pub(crate) fn add(&self, messages: u64, bytes: u64) {
        self.0
            .fetch_add(messages * HELD_MESSAGE + bytes, Ordering::Relaxed);
    }

    /// The receiver handed out one of `bytes` bytes.
    pub(crate) fn handed_out(&self, bytes: u64) {
        self.handed_out_many(1, bytes);
    }

    /// The receiver handed out `messages` at once, of `bytes` bytes.
    pub(crate) fn handed_out_many(&self, messages: u64, bytes: u64) {
        self.0
            .fetch_sub(messages * HELD_MESSAGE + bytes, Ordering::Relaxed);
    }

    /// Messages and bytes held now.
    pub(crate) fn get(&self) -> (u64, u64) {
        let held = self.0.load(Ordering::Relaxed);
        (held / HELD_MESSAGE, held % HELD_MESSAGE)
    }
}

pub(crate) struct State<F: Framing> {
    pub(crate) session: Session<F>,
    stdin: Option<Stdin>,
    /// Boxed: taken out and put back on every read, a pointer moved.
    stdout: Option<Box<Reader<F>>>,
    /// The reading pipe once it has ended, until the background task lets
    /// it go after the wake-ups of its round (see
    /// [`Shared::unlock_then_close`]).
    ended: Option<Box<Reader<F>>>,
    /// Where the last handle's drop sends the kill the session decides.
    signal_to: Option<SignalTarget>,
}

/// The writing pipe (a child's stdin), and the sweep's watch on it, told
/// when the pipe closes: the watch holds a copy of this end until then,
/// which must not outlive it while the child may still read, or the child
/// would never see its EOF. Dropped without [`close`](Stdin::close) (a
/// panic, the session dropped), it takes the child to be still reading.
struct Stdin {
    pipe: Box<dyn PipeWrite>,
    watch: Option<StdinWatch>,
}

impl Stdin {
    /// Closes the pipe; `child_exited`: the child can read it no more.
    fn close(mut self, child_exited: bool) {
        if let Some(watch) = self.watch.take() {
            watch.host_closed(child_exited);
        }
    }
}

impl Drop for Stdin {
    fn drop(&mut self) {
        if let Some(watch) = self.watch.take() {
            watch.host_closed(false);
        }
    }
}

/// The reading pipe, its buffer, and where the session's decoder goes
/// while the reader has it: taken out together by the one reader.
struct Reader<F: Framing> {
    pipe: Box<dyn PipeRead>,
    buf: Box<[u8]>,
    decoding: Decoding<F>,
}

pub(crate) type Guard<'a, F> = MutexGuard<'a, State<F>>;

/// How a write round ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum RoundEnd {
    /// Everything it was to write is written (or nothing can be).
    Done,
    /// The pipe is full or held by another writer; the waiter is woken
    /// when that changes.
    Blocked,
    /// It stopped to let others run; the waiter was woken to come back.
    Yielded,
}

impl<F: Framing> Shared<F> {
    pub(crate) fn new(
        session: Session<F>,
        stdin: Box<dyn PipeWrite>,
        stdout: Box<dyn PipeRead>,
        signal_to: Option<SignalTarget>,
        stdin_watch: Option<StdinWatch>,
    ) -> Arc<Self> {
        let senders = WakeSet::new();
        let receiver = WakeSet::new();
        let decoding = session.decoding();
        Arc::new(Self {
            state: CachePadded::new(Mutex::new(State {
                session,
                stdin: Some(Stdin {
                    pipe: stdin,
                    watch: stdin_watch,
                }),
                stdout: Some(Box::new(Reader {
                    pipe: stdout,
                    buf: vec![0; READ_CHUNK].into_boxed_slice(),
                    decoding,
                })),
                ended: None,
                signal_to,
            })),
            stdin_waker: fan_out(&senders),
            senders,
            stdout_waker: fan_out(&receiver),
            receiver,
            driver: BgWaker::default(),
            send_ready: AtomicBool::new(true),
            exit: ExitSlot::new(),
            holds: CachePadded::new(Holds::default()),
        })
    }

    pub(crate) fn lock(&self) -> Guard<'_, F> {
        lock(&self.state)
    }

    /// Releases the lock and wakes whoever the calls made under it concern.
    #[inline]
    pub(crate) fn unlock(&self, mut state: Guard<'_, F>) {
        let wakes = state.session.take_wakes();
        drop(state);
        if !wakes.is_empty() {
            self.wake(wakes);
        }
    }

    /// [`unlock`](Self::unlock), then the reading pipe's close if it has
    /// ended: the background task's way out of a round, so that the
    /// pipe's deregistration and `close` come after the wake-ups its end
    /// brings (the receiver's last item, the report) instead of before
    /// them. What it pays for: two system calls fewer between a graceful
    /// shutdown's child exit and its report (docs/performance.md).
    pub(crate) fn unlock_then_close(&self, mut state: Guard<'_, F>) {
        let ended = state.ended.take();
        self.unlock(state);
        drop(ended);
    }

    /// A handle (a sender, the receiver) was dropped. When it was the last
    /// one and the session ends the child for it (kill-on-drop), the kill
    /// goes out here, at once, as `tokio::process` sends its kill-on-drop,
    /// and not whenever the background task next runs, which a busy or
    /// blocked runtime puts off: in the scale bench's drop of 500
    /// transports (`cargo bench -p childwire-bench --bench scale`), the
    /// background tasks sent the last kills 25-30 ms after the drop, the
    /// children already dying having taken their CPU (docs/performance.md).
    pub(crate) fn close_handle(&self, now: Instant) {
        let mut state = self.lock();
        state.session.handle_handle_closed(now);
        if let Some(target) = state.signal_to {
            while let Some(signal) = state.session.poll_signal() {
                if let Err(err) = target.send(signal) {
                    state.session.handle_signal_failed(signal, err, now);
                }
            }
        }
        self.unlock(state);
    }

    #[cold]
    fn wake(&self, wakes: Wakes) {
        if wakes.contains(Wakes::SENDERS) {
            self.senders.wake_all();
        }
        if wakes.contains(Wakes::RECEIVER) {
            self.receiver.wake_all();
        }
        if wakes.contains(Wakes::DRIVER) {
            wake_bg(&self.driver);
        }
    }

    /// Registers a task waiting to receive.
    pub(crate) fn wait_to_receive(&self, waker: &Waker) {
        self.receiver.register(waker);
    }

    /// Where the background task's waker is kept.
    pub(crate) fn driver_waker(&self) -> &BgWaker {
        &self.driver
    }

    pub(crate) fn set_driver_waker(&self, waker: &Waker) {
        let mut slot = lock(&self.driver);
        if !slot.as_ref().is_some_and(|w| w.will_wake(waker)) {
            *slot = Some(waker.clone());
        }
    }

    /// Whether a send would not wait, as last seen (see the field).
    #[inline]
    pub(crate) fn send_ready(&self) -> bool {
        self.send_ready.load(Ordering::Acquire)
    }

    /// Records whether a send would not wait; stored only on a change.
    #[inline]
    pub(crate) fn note_send_ready(&self, ready: bool) {
        if self.send_ready.load(Ordering::Relaxed) != ready {
            self.send_ready.store(ready, Ordering::Release);
        }
    }

    /// Writes as the session says, within `round`: each call on the pipe is
    /// made with the lock released. `waiter` is woken when a blocked round
    /// can go on (none: a sender that leaves the rest to the background).
    pub(crate) fn write_round<'a>(
        &'a self,
        mut state: Guard<'a, F>,
        round: &WriteRound,
        waiter: Option<&Waker>,
        now: Instant,
    ) -> (Guard<'a, F>, RoundEnd) {
        if let Some(waker) = waiter {
            self.senders.register(waker);
        }
        loop {
            let op = match state.session.poll_write(round, now) {
                WriteStep::Io(op) => op,
                WriteStep::Drop => {
                    if let Some(stdin) = state.stdin.take() {
                        stdin.close(state.session.has_exited());
                    }
                    continue;
                }
                WriteStep::Done => return (state, RoundEnd::Done),
                WriteStep::Busy => return (state, RoundEnd::Blocked),
                WriteStep::Yield => {
                    if let Some(waker) = waiter {
                        waker.wake_by_ref();
                    }
                    return (state, RoundEnd::Yielded);
                }
            };
            let Some(mut stdin) = state.stdin.take() else {
                // Dropped already: nothing can be written.
                state.session.handle_write(WriteResult::Failed, now);
                continue;
            };
            drop(state);
            let mut cx = Context::from_waker(&self.stdin_waker);
            let pipe = &mut stdin.pipe;
            let result = match &op {
                WriteOp::Write(bytes) => pipe.poll_write(&mut cx, bytes),
                WriteOp::Flush => pipe.poll_flush(&mut cx).map_ok(|()| 0),
                WriteOp::Shutdown => pipe.poll_shutdown(&mut cx).map_ok(|()| 0),
            };
            state = self.lock();
            state.stdin = Some(stdin);
            let result = match (result, &op) {
                (Poll::Pending, _) => WriteResult::WouldBlock,
                (Poll::Ready(Ok(n)), WriteOp::Write(_)) => WriteResult::Written(n),
                (Poll::Ready(Ok(_)), _) => WriteResult::Done,
                (Poll::Ready(Err(err)), _) => {
                    if err.kind() != io::ErrorKind::BrokenPipe {
                        crate::log::debug!("writing to the peer failed: {err}");
                    }
                    WriteResult::Failed
                }
            };
            state.session.handle_write(result, now);
            if result == WriteResult::WouldBlock {
                // Unless this was the background task's round, the session
                // named that task to wait for the pipe (woken on unlock).
                return (state, RoundEnd::Blocked);
            }
        }
    }

    /// Reads once (the session said so: the caller holds the reading pipe)
    /// and decodes what came, both with the lock released, then hands the
    /// frames in. Returns whether the read brought nothing yet: `waiter` is
    /// woken when it can.
    ///
    /// `waiter` is registered only when the read waits. A read that brings
    /// something leaves no registration behind, whose later wake-up would
    /// rouse a task busy elsewhere: a graceful shutdown's caller, which had
    /// read its last message itself, was woken for nothing when the
    /// background task drained the child's last line, a futex wake-up on
    /// the way to the report.
    ///
    /// The decoder goes with the pipe (`Session::lend_decoder`): decoding a
    /// whole read under the lock held every sender up behind it. Measured
    /// (`benches/users-shape.sh`, a `cat` child, writer task
    /// `send().await`, reader `recv()`, 400,000 lines of 200 B): the writer
    /// slept on this lock about once per read, and childwire's median
    /// throughput fell from 748-861 MiB/s (6a80c2d, which read and decoded
    /// under a lock of the receiving side alone) to 519-555 MiB/s; see
    /// docs/performance.md for what it is now.
    pub(crate) fn read_once<'a>(
        &'a self,
        state: Guard<'a, F>,
        waiter: &Waker,
        clock: impl Fn() -> Instant,
    ) -> (Guard<'a, F>, bool) {
        let mut state = state;
        let Some(mut reader) = state.stdout.take() else {
            state.session.handle_read_eof(clock());
            return (state, false);
        };
        let lent = state.session.lend_decoder(&mut reader.decoding);
        drop(state);
        let mut cx = Context::from_waker(&self.stdout_waker);
        let result = reader.pipe.poll_read(&mut cx, &mut reader.buf);
        if let (true, Poll::Ready(Ok(n))) = (lent, &result) {
            reader.decoding.handle_data(&reader.buf[..*n]);
        }
        let mut state = self.lock();
        if lent {
            state.session.handle_decoded(&mut reader.decoding, clock());
        }
        let blocked = match result {
            Poll::Ready(Ok(n)) if n > 0 => {
                if !lent {
                    state.session.handle_read(&reader.buf[..n], clock());
                }
                false
            }
            Poll::Ready(result) => {
                if let Err(err) = result {
                    crate::log::warn!("reading from the peer failed: {err}");
                }
                state.session.handle_read_eof(clock());
                state.ended = Some(reader);
                return (state, false);
            }
            Poll::Pending => {
                state.session.handle_read_blocked();
                // The pipe's wake-up may have come since the read, before
                // anyone was registered: then the waiter reads again.
                if self.receiver.register_after_wait(waiter) {
                    waiter.wake_by_ref();
                }
                true
            }
        };
        // Not read any more (the end was decided on a quiet pipe): dropped.
        if !state.session.channel().is_read_done() {
            state.stdout = Some(reader);
        }
        (state, blocked)
    }
}
