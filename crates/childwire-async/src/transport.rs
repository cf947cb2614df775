//! The user's handles: [`Transport`], and its halves [`Sender`] and
//! [`Receiver`].

use std::collections::VecDeque;
use std::fmt;
use std::future::poll_fn;
use std::marker::PhantomData;
use std::pin::Pin;
use std::sync::{Mutex, MutexGuard, PoisonError};
use std::task::{Context, Poll};
use std::time::Instant;

use bytes::Bytes;
use childwire_core::LineEncoder;
use childwire_core::{
    Closed, Command, Config, Counters, ExitReport, Received, SendError, SendErrorKind, Session,
    SpawnError,
};
use futures_core::Stream;
use futures_sink::Sink;

use crate::driver::Driver;
use crate::runtime::{ChildProcess, Runtime};
use crate::shared::{Shared, SharedRef, State};

/// A child process and the newline-delimited message channel to it.
///
/// Created by [`Transport::spawn`]. [`send`](Self::send) writes a message to
/// the child's stdin, [`recv`](Self::recv) yields what it writes to stdout,
/// [`shutdown`](Self::shutdown) ends it the MCP way. A background task owns
/// the child and always drains its pipes, so a child is never blocked by a
/// caller that is busy elsewhere.
///
/// Dropping the transport (every half, after [`split`](Self::split))
/// without a shutdown kills the child and its process group with SIGKILL:
/// the non-graceful path (C14). The child is reaped in the background.
pub struct Transport<R: Runtime> {
    sender: Sender<R>,
    receiver: Receiver<R>,
}

impl<R: Runtime> Transport<R> {
    /// Spawns `command` and starts the task that drives it.
    ///
    /// Fails with a [`SpawnError`] that names the program and the OS reason
    /// (C11); nothing is left behind then.
    pub fn spawn(command: &Command, config: Config) -> Result<Self, SpawnError> {
        let child = R::spawn_child(command).map_err(|err| SpawnError::new(command, err))?;
        let pid = child.id();
        let shared = Shared::new(Session::new(&config, command, Instant::now()));
        let driver = Driver::<R>::new(shared.clone(), child, command, config.on_stderr_line);
        R::spawn_task(Box::pin(driver));
        Ok(Self {
            sender: Sender::new(shared.clone(), pid),
            receiver: Receiver::new(shared, pid),
        })
    }

    /// Sends one message: `payload` followed by `\n` (C06–C08).
    ///
    /// Waits while the outbound queue is full (backpressure). Fails, handing
    /// the payload back, if it contains `\n` or `\r`, is over the size limit,
    /// or sending is over (shutdown, exit, write timeout).
    ///
    /// Cancel-safe: if the future is dropped before it completes, the
    /// message was not queued, and nothing of it reaches the child.
    pub async fn send(&self, payload: impl Into<Bytes>) -> Result<(), SendError<Bytes>> {
        self.sender.send(payload).await
    }

    /// The next message, notice or, last, the exit report; `None` after the
    /// report (C04).
    ///
    /// Cancel-safe: dropping the future (e.g. when another branch of a
    /// `select!` wins) loses no message and no partial line (C05).
    pub async fn recv(&mut self) -> Option<Received> {
        self.receiver.recv().await
    }

    /// Shuts the child down the MCP way and returns how it ended (C12, C15):
    /// flush what is queued, close stdin, wait `stdin_grace`, SIGTERM (to the
    /// group), wait `term_grace`, SIGKILL, reap. A child that exits on EOF is
    /// done as soon as it exits.
    ///
    /// Messages the child wrote before it exited stay receivable with
    /// [`recv`](Self::recv).
    pub async fn shutdown(&self) -> Result<ExitReport, DriverStopped> {
        self.sender.shutdown().await
    }

    /// The child's process ID (its process group's too, by default).
    pub fn id(&self) -> Option<u32> {
        self.sender.pid
    }

    /// Traffic counters so far.
    pub fn counters(&self) -> Counters {
        self.sender.shared.lock().session.counters()
    }

    /// Splits into a [`Sender`], which can be cloned, and a [`Receiver`], to
    /// use from different tasks (C17).
    pub fn split(self) -> (Sender<R>, Receiver<R>) {
        (self.sender, self.receiver)
    }
}

impl<R: Runtime> fmt::Debug for Transport<R> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Transport")
            .field("pid", &self.sender.pid)
            .finish_non_exhaustive()
    }
}

/// How many bytes a [`Sink`] frames before handing them to the session
/// without being flushed: a pipe's worth.
const SINK_BATCH: usize = 64 * 1024;

/// The sending half of a [`Transport`]. Clone it to send from several tasks.
pub struct Sender<R: Runtime> {
    shared: SharedRef,
    pid: Option<u32>,
    /// Messages the [`Sink`] accepted: checked and framed here, without the
    /// lock, and handed to the session a batch at a time (as `FramedWrite`
    /// buffers), on `poll_flush` or when the batch is full.
    ///
    /// Behind its own mutex (never contended: only this handle uses it) so
    /// that `send(&self)` can hand it over first and keep the order.
    sink_batch: Mutex<LineEncoder>,
    _runtime: PhantomData<fn() -> R>,
}

impl<R: Runtime> Sender<R> {
    fn new(shared: SharedRef, pid: Option<u32>) -> Self {
        let max_send_size = {
            let mut state = shared.lock();
            state.handles += 1;
            state.session.max_send_size()
        };
        Self {
            shared,
            pid,
            sink_batch: Mutex::new(LineEncoder::new(max_send_size, usize::MAX)),
            _runtime: PhantomData,
        }
    }

    /// Sends one message. See [`Transport::send`].
    pub async fn send(&self, payload: impl Into<Bytes>) -> Result<(), SendError<Bytes>> {
        let mut payload = Some(payload.into());
        poll_fn(|cx| {
            let item = payload.take().expect("polled after completion");
            // What the Sink accepted earlier goes first.
            match self.poll_hand_over(cx) {
                Poll::Ready(Ok(())) => {}
                Poll::Ready(Err(err)) => return Poll::Ready(Err(SendError::new(err.kind(), item))),
                Poll::Pending => {
                    payload = Some(item);
                    return Poll::Pending;
                }
            }
            match self.try_queue(cx, item) {
                Queued::Done(result) => Poll::Ready(result),
                Queued::Wait(item) => {
                    payload = Some(item);
                    Poll::Pending
                }
            }
        })
        .await
    }

    /// Queues `item`, or hands it back to wait for room.
    fn try_queue(&self, cx: &mut Context<'_>, item: Bytes) -> Queued {
        let mut state = self.shared.lock();
        if state.driver_stopped {
            return Queued::Done(Err(SendError::new(
                SendErrorKind::Closed(Closed::Exited),
                item,
            )));
        }
        let was_idle = state.session.queued() == 0;
        match state.session.send(item) {
            Ok(()) => {
                // With bytes already queued the driver is writing, or waits
                // for the pipe to take more: it needs no wake-up.
                if was_idle {
                    state.wake_driver();
                }
                Queued::Done(Ok(()))
            }
            Err(err) if err.kind() == SendErrorKind::Full => {
                State::register(&mut state.send_wakers, cx.waker());
                Queued::Wait(err.into_payload())
            }
            Err(err) => Queued::Done(Err(err)),
        }
    }

    /// Shuts the child down. See [`Transport::shutdown`].
    pub async fn shutdown(&self) -> Result<ExitReport, DriverStopped> {
        {
            let mut batch = self.sink_batch();
            let mut state = self.shared.lock();
            // Messages the Sink accepted are flushed with the rest.
            let _ = state.session.send_batch_now(&mut batch);
            state.session.shutdown(Instant::now());
            state.wake_driver();
        }
        poll_fn(|cx| {
            let mut state = self.shared.lock();
            if let Some(report) = state.session.report() {
                return Poll::Ready(Ok(report.clone()));
            }
            if state.driver_stopped {
                return Poll::Ready(Err(DriverStopped));
            }
            State::register(&mut state.done_wakers, cx.waker());
            Poll::Pending
        })
        .await
    }

    /// The child's process ID.
    pub fn id(&self) -> Option<u32> {
        self.pid
    }

    fn sink_batch(&self) -> MutexGuard<'_, LineEncoder> {
        self.sink_batch
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
    }

    /// Hands the Sink's batch to the session, waiting for room.
    fn poll_hand_over(&self, cx: &mut Context<'_>) -> Poll<Result<(), SendError<Bytes>>> {
        let mut batch = self.sink_batch();
        if batch.queued() == 0 {
            return Poll::Ready(Ok(()));
        }
        let mut state = self.shared.lock();
        let was_idle = state.session.queued() == 0;
        match state.session.send_batch(&mut batch) {
            Ok(()) => {
                if was_idle {
                    state.wake_driver();
                }
                Poll::Ready(Ok(()))
            }
            Err(SendErrorKind::Full) if !state.driver_stopped => {
                State::register(&mut state.send_wakers, cx.waker());
                Poll::Pending
            }
            Err(kind) => {
                // The batch cannot go out any more: hand its lines back.
                let lines = batch.poll_transmit().unwrap_or_default();
                batch.clear();
                let kind = match kind {
                    SendErrorKind::Full => SendErrorKind::Closed(Closed::Exited),
                    kind => kind,
                };
                Poll::Ready(Err(SendError::new(kind, lines)))
            }
        }
    }
}

/// The outcome of one attempt to queue a message.
enum Queued {
    /// Queued, or refused for good.
    Done(Result<(), SendError<Bytes>>),
    /// The queue is full: the payload, to try again when woken.
    Wait(Bytes),
}

impl<R: Runtime> Clone for Sender<R> {
    fn clone(&self) -> Self {
        Self::new(self.shared.clone(), self.pid)
    }
}

impl<R: Runtime> Drop for Sender<R> {
    fn drop(&mut self) {
        let mut batch = self.sink_batch();
        if batch.queued() > 0 {
            // Messages the Sink accepted are not lost with it: they go to
            // the session even above its high-water mark (one batch at most).
            let mut state = self.shared.lock();
            let was_idle = state.session.queued() == 0;
            if state.session.send_batch_now(&mut batch).is_ok() && was_idle {
                state.wake_driver();
            }
        }
        release(&self.shared);
    }
}

impl<R: Runtime> fmt::Debug for Sender<R> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Sender")
            .field("pid", &self.pid)
            .finish_non_exhaustive()
    }
}

/// Queues messages for the child (C17), batched like `FramedWrite`:
/// `start_send` checks and frames a message without touching the shared
/// state, and the batch goes to the child on `poll_flush` or once it holds
/// 64 KiB (`poll_ready` then waits for room: backpressure). A refused
/// message (newline, size) fails `start_send` and is handed back.
/// `poll_flush` waits until the child has been handed every byte;
/// `poll_close` flushes, then begins the graceful shutdown (it does not wait
/// for the exit: use [`Sender::shutdown`] for the report).
impl<R: Runtime, B: Into<Bytes>> Sink<B> for Sender<R> {
    type Error = SendError<Bytes>;

    fn poll_ready(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        let this = self.get_mut();
        if this.sink_batch().queued() >= SINK_BATCH {
            return this.poll_hand_over(cx);
        }
        Poll::Ready(Ok(()))
    }

    fn start_send(self: Pin<&mut Self>, item: B) -> Result<(), Self::Error> {
        let this = self.get_mut();
        this.sink_batch().encode(item.into()).map_err(|err| {
            let (kind, payload) = err.into_parts();
            SendError::new(kind.into(), payload)
        })
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        let this = self.get_mut();
        if this.poll_hand_over(cx)?.is_pending() {
            return Poll::Pending;
        }
        let mut state = this.shared.lock();
        if state.session.queued() == 0 || state.driver_stopped {
            return Poll::Ready(Ok(()));
        }
        State::register(&mut state.send_wakers, cx.waker());
        Poll::Pending
    }

    fn poll_close(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        let this = self.get_mut();
        if Sink::<B>::poll_flush(Pin::new(&mut *this), cx)?.is_pending() {
            return Poll::Pending;
        }
        let mut state = this.shared.lock();
        state.session.shutdown(Instant::now());
        state.wake_driver();
        Poll::Ready(Ok(()))
    }
}

/// The receiving half of a [`Transport`].
pub struct Receiver<R: Runtime> {
    shared: SharedRef,
    pid: Option<u32>,
    /// Items taken from the session in one batch, handed out one by one
    /// without the lock. They belong to the receiver, not to a `recv` call,
    /// which keeps receiving cancel-safe.
    batch: VecDeque<Received>,
    _runtime: PhantomData<fn() -> R>,
}

impl<R: Runtime> Receiver<R> {
    fn new(shared: SharedRef, pid: Option<u32>) -> Self {
        shared.lock().handles += 1;
        Self {
            shared,
            pid,
            batch: VecDeque::new(),
            _runtime: PhantomData,
        }
    }

    /// The next item. See [`Transport::recv`]; cancel-safe (C05).
    pub async fn recv(&mut self) -> Option<Received> {
        poll_fn(|cx| self.poll_recv(cx)).await
    }

    /// Polls for the next item: messages and notices in the order the child
    /// wrote them, then the exit report, then `None`.
    ///
    /// Items are taken from the shared queue in batches into the receiver
    /// itself, and out of it only in the call that returns one: a dropped
    /// `recv` future loses nothing, which is what makes receiving
    /// cancel-safe.
    pub fn poll_recv(&mut self, cx: &mut Context<'_>) -> Poll<Option<Received>> {
        if let Some(item) = self.batch.pop_front() {
            return Poll::Ready(Some(item));
        }
        let mut state = self.shared.lock();
        let was_paused = !state.session.wants_stdout();
        if state.session.drain_received(&mut self.batch) > 0 {
            if was_paused && state.session.wants_stdout() {
                state.wake_driver();
            }
            return Poll::Ready(self.batch.pop_front());
        }
        if state.session.is_finished() || state.driver_stopped {
            return Poll::Ready(None);
        }
        state.recv_waker = Some(cx.waker().clone());
        Poll::Pending
    }

    /// The child's process ID.
    pub fn id(&self) -> Option<u32> {
        self.pid
    }
}

impl<R: Runtime> Drop for Receiver<R> {
    fn drop(&mut self) {
        release(&self.shared);
    }
}

impl<R: Runtime> fmt::Debug for Receiver<R> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Receiver")
            .field("pid", &self.pid)
            .finish_non_exhaustive()
    }
}

impl<R: Runtime> Stream for Receiver<R> {
    type Item = Received;

    fn poll_next(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Received>> {
        self.get_mut().poll_recv(cx)
    }
}

impl<R: Runtime> Stream for Transport<R> {
    type Item = Received;

    fn poll_next(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Received>> {
        self.get_mut().receiver.poll_recv(cx)
    }
}

impl<R: Runtime, B: Into<Bytes>> Sink<B> for Transport<R> {
    type Error = SendError<Bytes>;

    fn poll_ready(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        Sink::<B>::poll_ready(Pin::new(&mut self.get_mut().sender), cx)
    }

    fn start_send(self: Pin<&mut Self>, item: B) -> Result<(), Self::Error> {
        Pin::new(&mut self.get_mut().sender).start_send(item)
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        Sink::<B>::poll_flush(Pin::new(&mut self.get_mut().sender), cx)
    }

    fn poll_close(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        Sink::<B>::poll_close(Pin::new(&mut self.get_mut().sender), cx)
    }
}

/// A handle is gone; the last one to go abandons a child that was never
/// asked to shut down, which the driver then kills (C14).
fn release(shared: &Shared) {
    let mut state = shared.lock();
    state.handles -= 1;
    if state.handles == 0 && !state.session.lifecycle().shutdown_requested() {
        state.abandoned = true;
        state.wake_driver();
    }
}

/// The task driving the child ended before the child's end was known: its
/// runtime shut down. The child was killed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DriverStopped;

impl fmt::Display for DriverStopped {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("the task driving the child stopped before the child's end (its runtime shut down); the child was killed")
    }
}

impl std::error::Error for DriverStopped {}
