//! The sending half of a transport: [`Sender`], its `Sink`, and the ways a
//! child is ended from it (shutdown, kill, close).

use std::fmt;
use std::future::poll_fn;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use bytes::Bytes;
use childwire_core::{Closed, ExitReport, Framing, Lines, SendError, SendErrorKind, Sent};
use futures_sink::Sink;

use crate::exit_handle::{ExitHandle, ExitSlot};
use crate::runtime::Runtime;
use crate::shared::{Guard, RoundEnd, Shared};
use crate::tap::Hook;

mod sending;

use sending::Sending;

/// The sending half of a [`Transport`](crate::Transport). Clone it to send
/// from several tasks.
///
/// ```no_run
/// # async fn demo<R: childwire_async::Runtime>(t: childwire_async::Transport<R>) {
/// let (sender, mut receiver) = t.split();
/// let writer = sender.clone();
/// // e.g. in a task of its own:
/// writer.send(r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#).await.unwrap();
/// while let Some(item) = receiver.recv().await { /* ... */ }
/// # }
/// ```
pub struct Sender<R: Runtime, F: Framing = Lines> {
    pub(crate) shared: Arc<Shared<F>>,
    pub(crate) rt: R,
    pub(crate) pid: Option<u32>,
    pub(crate) tap: Hook<R>,
}

/// Why [`Sender::shutdown`] or [`Sender::close`] could not complete.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum ShutdownError {
    /// The background task ended before the child's end was known: its
    /// runtime shut down. The child was killed.
    DriverStopped,
    /// A channel over a pipe pair has no child to shut down; its write side
    /// was closed.
    NoChild,
    /// The peer stopped reading (a write failed) before everything queued
    /// was written; the rest was dropped.
    PeerClosed,
}

impl fmt::Display for ShutdownError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            ShutdownError::DriverStopped => {
                "the task driving the child stopped before the child's end (its runtime shut down); the child was killed"
            }
            ShutdownError::NoChild => {
                "this channel has no child to shut down; its write side was closed"
            }
            ShutdownError::PeerClosed => {
                "the peer stopped reading before everything queued was written; the rest was dropped"
            }
        })
    }
}

impl std::error::Error for ShutdownError {}

impl<R: Runtime, F: Framing> Sender<R, F> {
    pub(crate) fn new(shared: Arc<Shared<F>>, rt: R, pid: Option<u32>) -> Self {
        shared.lock().session.handle_handle_opened();
        Self {
            shared,
            rt,
            pid,
            tap: Hook::none(),
        }
    }

    /// Sends one message: checked, framed and queued whole or not at all,
    /// and written by this task when it is alone in the queue (the pipe
    /// took everything before it) or a pipe's worth is queued; what is left
    /// (behind a full pipe, or a write in progress) is written by the
    /// background task, woken once per batch.
    ///
    /// Waits while the outbound queue is full (backpressure), writing to
    /// the pipe itself meanwhile. Fails, handing the payload back, if the
    /// framing cannot carry it (empty, or with `\n` or `\r` for NDJSON), it
    /// is over the size limit, or sending is over (shutdown, exit, write
    /// timeout).
    ///
    /// Cancel-safe: if the future is dropped before it completes, the
    /// message was not queued, and nothing of it reaches the peer.
    ///
    /// A send refused because the child ended carries its exit report
    /// ([`SendError::exit_report`]), waiting for it when it is coming: when
    /// the child was reaped, at once (within `drain_grace`); when the child
    /// closed its stdin, up to `stdin_grace` plus `drain_grace` (a child
    /// that closes its stdin and keeps running costs the first failed send
    /// that long, once: 3 s by default), and past that for a child that
    /// exited meanwhile, whose report is then sure to come.
    pub fn send<B: AsRef<[u8]>>(
        &self,
        payload: B,
    ) -> impl Future<Output = Result<(), SendError<B>>> {
        Sending::new(self, payload)
    }

    /// Serializes `value` as compact JSON (one line, as NDJSON wants) and
    /// sends it. See [`send`](Self::send).
    #[cfg(feature = "serde")]
    #[cfg_attr(docsrs, doc(cfg(feature = "serde")))]
    pub async fn send_json<T: serde::Serialize + ?Sized>(
        &self,
        value: &T,
    ) -> Result<(), crate::SendJsonError> {
        let bytes = serde_json::to_vec(value).map_err(crate::SendJsonError::Serialize)?;
        self.send(bytes).await.map_err(crate::SendJsonError::Send)
    }

    /// One attempt to queue `item`: the result, or the payload back to wait
    /// for room. `refused_full`: it was refused for want of room before; it
    /// is not offered again (its bytes checked again) until there is room.
    #[inline(always)]
    fn poll_send<B: AsRef<[u8]>>(
        &self,
        cx: &mut Context<'_>,
        item: B,
        refused_full: &mut bool,
    ) -> Result<Result<(), SendError<B>>, B> {
        let mut state = self.shared.lock();
        loop {
            if *refused_full && !state.session.send_ready() {
                let end;
                (state, end) = self.write_drain(state, cx);
                if end != RoundEnd::Done && !state.session.send_ready() {
                    self.shared.unlock(state);
                    return Err(item);
                }
            }
            // Offered by reference, so that the tap sees it once queued.
            match state.session.send(&item) {
                Ok(sent) => {
                    state = self.sent(state, sent);
                    self.shared.unlock(state);
                    self.tap.sent_one(item.as_ref());
                    return Ok(Ok(()));
                }
                Err(err) if err.kind() == SendErrorKind::Full => *refused_full = true,
                Err(err) => {
                    self.shared.unlock(state);
                    return Ok(Err(SendError::new(err.kind(), item)));
                }
            }
        }
    }

    /// A message was queued: the sender writes it if the session says so.
    #[inline(always)]
    fn sent<'a>(&'a self, state: Guard<'a, F>, sent: Sent) -> Guard<'a, F> {
        match sent {
            Sent::Queued => state,
            Sent::Write(round) => {
                self.shared
                    .write_round(state, &round, None, self.rt.now())
                    .0
            }
        }
    }

    /// Writes until nothing is queued, or the pipe blocks (this task is then
    /// woken when it takes more).
    fn write_drain<'a>(
        &'a self,
        state: Guard<'a, F>,
        cx: &mut Context<'_>,
    ) -> (Guard<'a, F>, RoundEnd) {
        let round = state.session.drain_round();
        self.shared
            .write_round(state, &round, Some(cx.waker()), self.rt.now())
    }

    /// Sends every message of `payloads` in order, under one lock while
    /// there is room, for callers with many messages at hand. The first
    /// refused message ends it, handed back with the reason; the ones
    /// before it were sent.
    pub async fn send_many<B: AsRef<[u8]>>(
        &self,
        payloads: impl IntoIterator<Item = B>,
    ) -> Result<(), SendError<B>> {
        if self.tap.is_set() {
            // One by one, so that the tap sees each as it is accepted.
            for payload in payloads {
                Box::pin(self.send(payload)).await?;
            }
            return Ok(());
        }
        let mut payloads = payloads.into_iter();
        let mut pending: Option<B> = None;
        let sent = poll_fn(|cx| {
            let mut state = self.shared.lock();
            // A message refused for want of room is not offered again (its
            // bytes checked again) until there is room: see `poll_send`.
            if pending.is_some() && !state.session.send_ready() {
                let end;
                (state, end) = self.write_drain(state, cx);
                if end != RoundEnd::Done && !state.session.send_ready() {
                    self.shared.unlock(state);
                    return Poll::Pending;
                }
            }
            while let Some(item) = pending.take().or_else(|| payloads.next()) {
                match state.session.send(item) {
                    Ok(sent) => state = self.sent(state, sent),
                    Err(err) if err.kind() == SendErrorKind::Full => {
                        pending = Some(err.into_payload());
                        let end;
                        (state, end) = self.write_drain(state, cx);
                        if end != RoundEnd::Done && !state.session.send_ready() {
                            self.shared.unlock(state);
                            return Poll::Pending;
                        }
                    }
                    Err(err) => {
                        self.shared.unlock(state);
                        return Poll::Ready(Err(err));
                    }
                }
            }
            self.shared.unlock(state);
            Poll::Ready(Ok(()))
        })
        .await;
        match sent {
            Ok(()) => Ok(()),
            Err(err) => Err(self.with_end(err).await),
        }
    }

    /// Waits until everything queued so far was written to the peer, writing
    /// it from this task. Fails if some of it can no longer be written (the
    /// peer stopped reading, the child exited, sending was aborted): what was
    /// queued then was dropped.
    ///
    /// Before [`shutdown`](Self::shutdown), it keeps a large last message
    /// out of `stdin_grace`, which otherwise covers the flush too.
    pub async fn flush(&self) -> Result<(), SendError<Bytes>> {
        let target = self.shared.lock().session.queue_end();
        poll_fn(|cx| self.poll_flushed(cx, target)).await
    }

    /// Writes towards `target` and says whether it was reached: the
    /// session's one answer, for `flush` and the `Sink`.
    fn poll_flushed(
        &self,
        cx: &mut Context<'_>,
        target: u64,
    ) -> Poll<Result<(), SendError<Bytes>>> {
        let (state, _) = self.write_drain(self.shared.lock(), cx);
        let flushed = state.session.flushed(target);
        self.shared.unlock(state);
        match flushed {
            Some(Ok(())) => Poll::Ready(Ok(())),
            Some(Err(closed)) => Poll::Ready(Err(SendError::new(
                SendErrorKind::Closed(closed),
                Bytes::new(),
            ))),
            None => Poll::Pending,
        }
    }

    /// Stops sending: what is queued is written, then the write side is
    /// closed (for a child: its stdin, which begins the graceful shutdown;
    /// its end comes through the receiver). Returns once the write side is
    /// closed; fails with [`ShutdownError::PeerClosed`] if some of what was
    /// queued could not be written (the same answer as
    /// [`flush`](Self::flush)).
    pub async fn close(&self) -> Result<(), ShutdownError> {
        let target = {
            let mut state = self.shared.lock();
            state.session.close(self.rt.now());
            let target = state.session.queue_end();
            self.shared.unlock(state);
            target
        };
        poll_fn(|cx| {
            let (state, _) = self.write_drain(self.shared.lock(), cx);
            let closed = state.session.closed(target);
            self.shared.unlock(state);
            match closed {
                None => Poll::Pending,
                Some(Ok(())) => Poll::Ready(Ok(())),
                Some(Err(Closed::DriverStopped)) => Poll::Ready(Err(ShutdownError::DriverStopped)),
                Some(Err(_)) => Poll::Ready(Err(ShutdownError::PeerClosed)),
            }
        })
        .await
    }

    /// Shuts the child down the MCP way and returns how it ended: flush
    /// what is queued, close stdin, wait `stdin_grace`, SIGTERM (to the
    /// group), wait `term_grace`, SIGKILL, reap. A child that exits on EOF
    /// is done as soon as it exits.
    ///
    /// Messages the child wrote before it exited stay receivable. For a
    /// channel over a pipe pair there is no child: it closes the write side
    /// like [`close`](Self::close) and fails with
    /// [`ShutdownError::NoChild`].
    pub async fn shutdown(&self) -> Result<ExitReport, ShutdownError> {
        if !self.begin_shutdown() {
            self.close().await?;
            return Err(ShutdownError::NoChild);
        }
        self.wait_report().await
    }

    /// Begins the child's graceful shutdown; `false` without a child.
    pub(crate) fn begin_shutdown(&self) -> bool {
        let mut state = self.shared.lock();
        if !state.session.has_child() {
            return false;
        }
        state.session.handle_shutdown(self.rt.now());
        self.shared.unlock(state);
        true
    }

    /// Kills the child now, and returns how it ended: SIGKILL to it (to
    /// its whole process group, by default; on Windows its job is
    /// terminated), without closing stdin or SIGTERM first. A graceful
    /// shutdown under way is cut short. Once the child has ended, it
    /// returns the report as it is.
    ///
    /// Sending fails from the call on. Messages the child wrote before it
    /// died stay receivable, then the receiver gets the same report. The
    /// report says [`EndedBy::Sigkill`](childwire_core::EndedBy::Sigkill)
    /// and that the end was asked for.
    ///
    /// For a channel over a pipe pair there is no child: it fails with
    /// [`ShutdownError::NoChild`] and changes nothing.
    ///
    /// ```no_run
    /// # async fn demo<R: childwire_async::Runtime>(server: childwire_async::Transport<R>) -> Result<(), Box<dyn std::error::Error>> {
    /// let report = server.kill().await?;
    /// eprintln!("server {report}"); // "killed by SIGKILL, 3 ms after shutdown"
    /// # Ok(()) }
    /// ```
    pub async fn kill(&self) -> Result<ExitReport, ShutdownError> {
        self.start_kill()?;
        self.wait_report().await
    }

    /// [`kill`](Self::kill) without waiting: SIGKILL is on its way when it
    /// returns (the background task sends it). The end comes through
    /// [`try_wait`](Self::try_wait), the receiver, or `kill` itself.
    ///
    /// # Errors
    ///
    /// [`ShutdownError::NoChild`] for a channel over a pipe pair.
    pub fn start_kill(&self) -> Result<(), ShutdownError> {
        let mut state = self.shared.lock();
        if !state.session.has_child() {
            return Err(ShutdownError::NoChild);
        }
        state.session.handle_kill(self.rt.now());
        self.shared.unlock(state);
        Ok(())
    }

    /// How the child ended, if that is known yet; never waits. `None`
    /// while it runs, and for a channel over a pipe pair. The report is
    /// known once the child was reaped and its pipes drained (or the drain
    /// grace passed): the same moment [`shutdown`](Self::shutdown) returns.
    pub fn try_wait(&self) -> Option<ExitReport> {
        self.shared.exit.get()
    }

    /// Waits for the child's report; fails if the background task stopped
    /// without one.
    async fn wait_report(&self) -> Result<ExitReport, ShutdownError> {
        poll_fn(|cx| self.shared.exit.poll_report(cx.waker()))
            .await
            .ok_or(ShutdownError::DriverStopped)
    }

    /// A handle to the child's exit report: set when the child's end is
    /// known, and kept after the transport is dropped. For a transport
    /// dropped without a shutdown, or a channel over a pipe pair, it may
    /// never come: [`ExitHandle::wait`] then returns `None` once that is
    /// certain.
    pub fn exit_handle(&self) -> ExitHandle {
        self.shared.exit.handle()
    }

    /// A slot on this transport's exit report, for an adapter that records
    /// the end itself too (the first report recorded stays). Its drop does
    /// not close the record: the transport fills it.
    pub fn exit_slot(&self) -> ExitSlot {
        self.shared.exit.follower()
    }

    /// Whether the write side is still open: sending may succeed.
    pub fn is_open(&self) -> bool {
        self.shared.lock().session.send_closed().is_none()
    }

    /// The child's process ID.
    pub fn id(&self) -> Option<u32> {
        self.pid
    }
}

impl<R: Runtime, F: Framing> Clone for Sender<R, F> {
    fn clone(&self) -> Self {
        let mut sender = Self::new(Arc::clone(&self.shared), self.rt.clone(), self.pid);
        sender.tap = self.tap.clone();
        sender
    }
}

impl<R: Runtime, F: Framing> Drop for Sender<R, F> {
    fn drop(&mut self) {
        self.shared.close_handle(self.rt.now());
    }
}

impl<R: Runtime, F: Framing> fmt::Debug for Sender<R, F> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Sender")
            .field("pid", &self.pid)
            .finish_non_exhaustive()
    }
}

/// Queues messages like [`Sender::send`], batched like `FramedWrite`:
/// `poll_ready` waits for room (writing meanwhile), `start_send` checks,
/// frames and queues a message (a refused one fails `start_send` and is
/// handed back), `poll_flush` writes until everything queued reached the
/// peer and says so as [`Sender::flush`] does, `poll_close` flushes and
/// closes the write side (for a child, it begins the graceful shutdown; use
/// [`Sender::shutdown`] for the report).
///
/// With clones of a sender sending at once, a message fed right after
/// another one took the last room is still queued, past the high-water
/// mark by that message; the next `poll_ready` waits for room.
///
/// The item type is [`Bytes`] alone, so `SinkExt` methods need no
/// turbofish; [`Sender::send`] takes any byte slice.
impl<R: Runtime, F: Framing> Sink<Bytes> for Sender<R, F> {
    type Error = SendError<Bytes>;

    fn poll_ready(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        if self.shared.send_ready() {
            return Poll::Ready(Ok(()));
        }
        let mut state = self.shared.lock();
        loop {
            if state.session.send_ready() {
                self.shared.note_send_ready(true);
                self.shared.unlock(state);
                return Poll::Ready(Ok(()));
            }
            let end;
            (state, end) = self.write_drain(state, cx);
            if end != RoundEnd::Done && !state.session.send_ready() {
                self.shared.unlock(state);
                return Poll::Pending;
            }
        }
    }

    fn start_send(self: Pin<&mut Self>, item: Bytes) -> Result<(), Self::Error> {
        if self.tap.is_set() {
            return self.start_send_tapped(item);
        }
        let mut state = self.shared.lock();
        let sent = state.session.send_anyway(item);
        let result = match sent {
            Ok(sent) => {
                state = self.sent(state, sent);
                Ok(())
            }
            Err(err) => Err(err),
        };
        self.shared.note_send_ready(state.session.send_ready());
        self.shared.unlock(state);
        result
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        let target = self.shared.lock().session.queue_end();
        self.poll_flushed(cx, target)
    }

    fn poll_close(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        std::task::ready!(Sink::poll_flush(self.as_mut(), cx))?;
        let mut state = self.shared.lock();
        state.session.close(self.rt.now());
        if !state.session.has_child() {
            // The write side's shutdown, from this task.
            let round = state.session.drain_round();
            state = self
                .shared
                .write_round(state, &round, Some(cx.waker()), self.rt.now())
                .0;
        }
        self.shared.unlock(state);
        Poll::Ready(Ok(()))
    }
}

impl<R: Runtime, F: Framing> Sender<R, F> {
    /// The `Sink`'s `start_send` with a tap, which sees the message once it
    /// is queued. Apart: in `start_send`, the reference the tap needs made
    /// every message cost 14 instructions more untapped (callgrind, the
    /// `Sink feed` row).
    #[cold]
    #[inline(never)]
    fn start_send_tapped(&self, item: Bytes) -> Result<(), SendError<Bytes>> {
        let mut state = self.shared.lock();
        match state.session.send_anyway(&item) {
            Ok(sent) => state = self.sent(state, sent),
            Err(err) => {
                self.shared.unlock(state);
                return Err(err.map_payload(Bytes::clone));
            }
        }
        self.shared.note_send_ready(state.session.send_ready());
        self.shared.unlock(state);
        self.tap.sent_one(&item);
        Ok(())
    }
}
