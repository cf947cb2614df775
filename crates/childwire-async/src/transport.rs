//! The user's handles: [`Transport`], and its halves [`Sender`] and
//! [`Receiver`]. The caller's task does the I/O: `recv` reads and decodes,
//! `send` frames and writes; a background task does only what must happen
//! while no caller is there.

use std::fmt;
use std::future::poll_fn;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::task::{Context, Poll};

use bytes::Bytes;
use childwire_core::{
    Channel, ChannelConfig, Closed, Command, Counters, ExitReport, Framing, Lines, Received,
    SendError, SendErrorKind, Session, SpawnError, WRITE_BATCH,
};
use futures_core::Stream;
use futures_sink::Sink;

// Also named from here by the supervised transport.
pub(crate) use crate::config::Config;
use crate::control::{Control, ControlParts};
use crate::exit_handle::{ExitHandle, ExitSlot};
use crate::flusher::Flusher;
use crate::in_side::{ReadOutcome, StreamEnd};
use crate::link::Link;
use crate::out_side::write_all;
use crate::runtime::{PipeRead, PipeWrite, Runtime};
use crate::stderr_lines;
use crate::sync::lock;
use crate::tap::{Hook, Tap, TapSlot};
use crate::{os, spawn, spawner};

mod kill;
mod sending;
mod startup;

use sending::Sending;

/// A message channel: to a child process over its stdin and stdout, or to a
/// peer over any pipe pair (a socket, the process's own stdio).
///
/// [`send`](Self::send) frames a message and writes it, [`recv`](Self::recv)
/// reads and decodes the next one, both in the caller's task.
/// [`shutdown`](Self::shutdown) ends a child the MCP way. A background task
/// does what must happen while no caller is there: it drains the child's
/// stderr, watches its exit, runs the shutdown timers, and writes what was
/// queued when its sender moved on.
///
/// Dropping the transport (every half, after [`split`](Self::split))
/// without a shutdown kills the child and its process group with SIGKILL:
/// the non-graceful path. The child is reaped in the background.
///
/// ```no_run
/// # async fn demo<R: childwire_async::Runtime>() -> Result<(), Box<dyn std::error::Error>> {
/// use childwire_async::{Command, Config, Received, Transport};
///
/// let mut server = Transport::<R>::spawn(&Command::new("cat"), Config::default())?;
/// server.send(r#"{"jsonrpc":"2.0","id":1,"method":"ping"}"#).await?;
/// if let Some(Received::Message(reply)) = server.recv().await {
///     println!("{}", String::from_utf8_lossy(&reply));
/// }
/// println!("{}", server.shutdown().await?);
/// # Ok(()) }
/// ```
pub struct Transport<R: Runtime, F: Framing = Lines> {
    sender: Sender<R, F>,
    receiver: Receiver<R, F>,
}

impl<R: Runtime> Transport<R, Lines> {
    /// Spawns `command` and talks NDJSON with it.
    ///
    /// Fails with a [`SpawnError`] that names the program and the reason,
    /// before anything is started if the config makes no sense or there is
    /// no runtime to run on; nothing is left behind.
    pub fn spawn(command: &Command, config: impl Into<Config>) -> Result<Self, SpawnError> {
        Self::spawn_with(Lines, command, config)
    }

    /// A channel talking NDJSON over `reader` and `writer` (a socket, a TCP
    /// stream, the process's own stdin and stdout): the same handles, with
    /// no process. The stream ends at the reader's EOF.
    pub fn from_pipes(
        reader: impl PipeRead,
        writer: impl PipeWrite,
        config: &ChannelConfig,
    ) -> Result<Self, crate::NoRuntime> {
        Self::from_pipes_with(Lines, reader, writer, config)
    }
}

impl<R: Runtime, F: Framing> Transport<R, F> {
    /// [`spawn`](Transport::spawn) with another framing, e.g. `Content-Length`
    /// for LSP and DAP servers.
    pub fn spawn_with(
        framing: F,
        command: &Command,
        config: impl Into<Config>,
    ) -> Result<Self, SpawnError> {
        Self::spawn_prepared(framing, command, spawn::to_std(command), config.into())
    }

    /// Spawns a `std::process::Command` built by the caller (for `pre_exec`,
    /// uid/gid, a sandbox wrapper, process-wrap...), talking `framing`.
    /// childwire sets what it needs on it: stdin and stdout piped, stderr
    /// captured, the child leading its own process group (Unix; on Windows
    /// its console process group and its job object, through creation flags
    /// that replace any the caller set); the rest (program, arguments,
    /// environment, working directory, hooks) is the caller's, unchanged
    /// (on Windows the program is found by `std`'s rules, without
    /// `PATHEXT`).
    ///
    /// ```no_run
    /// # async fn demo<R: childwire_async::Runtime>() -> Result<(), Box<dyn std::error::Error>> {
    /// use childwire_async::{Config, Lines, Transport};
    ///
    /// let mut std = std::process::Command::new("uvx");
    /// std.arg("mcp-server-time").env_remove("AWS_SECRET_ACCESS_KEY");
    /// let server = Transport::<R>::spawn_std(Lines, std, Config::default())?;
    /// # Ok(()) }
    /// ```
    pub fn spawn_std(
        framing: F,
        mut std: std::process::Command,
        config: impl Into<Config>,
    ) -> Result<Self, SpawnError> {
        let mut command = Command::new(std.get_program());
        command.args(std.get_args());
        if let Some(dir) = std.get_current_dir() {
            command.current_dir(dir);
        }
        spawn::adopt(&mut std, &command);
        Self::spawn_prepared(framing, &command, std, config.into())
    }

    /// Spawns `std`, which carries out `command`, and starts the background
    /// task.
    fn spawn_prepared(
        framing: F,
        command: &Command,
        mut std: std::process::Command,
        config: Config,
    ) -> Result<Self, SpawnError> {
        config
            .validate()
            .map_err(|err| SpawnError::invalid_config(command, err))?;
        let rt = R::current().map_err(|err| SpawnError::no_runtime(command, err.0))?;
        let prepared = os::Prepared::new(command, &mut std)
            .map_err(|err| SpawnError::containment_unavailable(command, err))?;
        let stderr = command.get_stderr();
        let child = if command.get_kill_on_parent_death() {
            // Forked from a thread that lives as long as the process: the
            // parent-death signal fires when the forking thread exits.
            let spawner_rt = rt.clone();
            spawner::run(move || spawner_rt.spawn_child(std, stderr)).and_then(|spawned| spawned)
        } else {
            rt.spawn_child(std, stderr)
        }
        .map_err(|err| spawn::spawn_error(command, err))?;
        // On Windows this starts the child, created suspended, in its job.
        let tracking = os::Tracking::new(
            child.pid,
            command.get_process_group(),
            child.pipes,
            prepared,
        )
        .map_err(|err| SpawnError::new(command, err))?;
        let now = rt.now();
        let session = Session::with_framing(framing, &config, command.get_process_group(), now);
        let (inbound, outbound, mut supervisor) = session.into_parts();
        if child.stderr.is_none() {
            supervisor.handle_stderr_eof(now);
        }
        let link = Link::new(
            outbound,
            child.stdin,
            inbound,
            child.stdout,
            Some((supervisor, command.get_kill_on_drop())),
        );
        let tap = Hook::new(config.tap.as_ref(), &rt, link.exit.handle());
        let program = command.get_program().to_string_lossy().into_owned();
        // Every event of this child's background task is in its span.
        let span = tracing::debug_span!("childwire", pid = child.pid, program = %program);
        let control = Control::new(
            Arc::clone(&link),
            rt.clone(),
            ControlParts {
                tracking,
                program,
                span,
                exit: child.exit,
                stderr: child.stderr,
                on_stderr_line: tap.with_stderr(stderr_lines::with_shown(
                    command,
                    config.on_stderr_line.clone(),
                )),
            },
        );
        // The handles first: the background task finds them there.
        let transport = Self::from_link(link, rt.clone(), child.pid).with_hook(tap);
        rt.spawn(Box::pin(control));
        Ok(transport)
    }

    /// [`from_pipes`](Transport::from_pipes) with another framing.
    pub fn from_pipes_with(
        framing: F,
        reader: impl PipeRead,
        writer: impl PipeWrite,
        config: &ChannelConfig,
    ) -> Result<Self, crate::NoRuntime> {
        let rt = R::current()?;
        let (inbound, outbound) = Channel::new(framing, config).into_parts();
        let link = Link::new(outbound, Box::new(writer), inbound, Box::new(reader), None);
        let flusher = Flusher::new(Arc::clone(&link), rt.clone());
        let transport = Self::from_link(link, rt.clone(), None);
        rt.spawn(Box::pin(flusher));
        Ok(transport)
    }

    fn from_link(link: Arc<Link<F>>, rt: R, pid: Option<u32>) -> Self {
        Self {
            sender: Sender::new(Arc::clone(&link), rt.clone(), pid),
            receiver: Receiver::new(link, rt, pid),
        }
    }

    /// Shows `tap` the messages both ways and the notices from now on (see
    /// [`tap`](crate::tap)): how a channel over a pipe pair is tapped, its
    /// [`ChannelConfig`] having no tap. A child transport is tapped with
    /// [`Config::tap`], which sees its stderr lines too.
    ///
    /// ```no_run
    /// # async fn demo<R: childwire_async::Runtime>(
    /// #     reader: impl childwire_async::PipeRead,
    /// #     writer: impl childwire_async::PipeWrite,
    /// # ) -> Result<(), Box<dyn std::error::Error>> {
    /// use childwire_async::tap::{self, TapEvent};
    /// use childwire_async::{ChannelConfig, Transport};
    ///
    /// let peer = Transport::<R>::from_pipes(reader, writer, &ChannelConfig::default())?
    ///     .with_tap(tap::from_fn(|at, event| {
    ///         if let TapEvent::Received(message) = event {
    ///             eprintln!("{at:?} <- {}", String::from_utf8_lossy(message));
    ///         }
    ///     }));
    /// # Ok(()) }
    /// ```
    #[must_use]
    pub fn with_tap(self, tap: impl Tap) -> Self {
        let hook = Hook::new(
            Some(&TapSlot::new(tap)),
            &self.sender.rt,
            self.exit_handle(),
        );
        self.with_hook(hook)
    }

    fn with_hook(mut self, hook: Hook<R>) -> Self {
        self.sender.tap = hook.clone();
        self.receiver.tap = hook;
        self
    }

    /// Sends one message: its bytes with their framing (for NDJSON, `\n`).
    /// See [`Sender::send`].
    pub fn send<B: AsRef<[u8]>>(
        &self,
        payload: B,
    ) -> impl Future<Output = Result<(), SendError<B>>> {
        self.sender.send(payload)
    }

    /// Sends every message of `payloads` in order, in one pass over the
    /// queue. See [`Sender::send_many`].
    pub async fn send_many<B: AsRef<[u8]>>(
        &self,
        payloads: impl IntoIterator<Item = B>,
    ) -> Result<(), SendError<B>> {
        self.sender.send_many(payloads).await
    }

    /// The next message, notice or, last, the exit report; `None` after the
    /// report (for a channel: after the peer's EOF).
    ///
    /// Cancel-safe: dropping the future (e.g. when another branch of a
    /// `select!` wins) loses no message and no partial line.
    pub async fn recv(&mut self) -> Option<Received> {
        self.receiver.recv().await
    }

    /// Moves every item available now (waiting for the first one) into
    /// `into`, up to `limit`. See [`Receiver::recv_many`].
    pub async fn recv_many(&mut self, into: &mut Vec<Received>, limit: usize) -> usize {
        self.receiver.recv_many(into, limit).await
    }

    /// Shuts the child down the MCP way and returns how it ended. See
    /// [`Sender::shutdown`].
    pub async fn shutdown(&self) -> Result<ExitReport, ShutdownError> {
        self.sender.shutdown().await
    }

    /// Waits until everything queued was written. See [`Sender::flush`].
    pub async fn flush(&self) -> Result<(), SendError<Bytes>> {
        self.sender.flush().await
    }

    /// Stops sending: what is queued is written, then the write side is
    /// closed. See [`Sender::close`].
    pub async fn close(&self) -> Result<(), ShutdownError> {
        self.sender.close().await
    }

    /// The child's process ID (its process group's too, by default); `None`
    /// for a channel over a pipe pair.
    pub fn id(&self) -> Option<u32> {
        self.sender.pid
    }

    /// Traffic counters so far.
    pub fn counters(&self) -> Counters {
        self.sender.link.counters()
    }

    /// A handle to the child's exit report, which outlives the transport.
    /// See [`Sender::exit_handle`].
    pub fn exit_handle(&self) -> ExitHandle {
        self.sender.exit_handle()
    }

    /// The sending half, borrowed.
    pub fn sender(&self) -> &Sender<R, F> {
        &self.sender
    }

    /// The receiving half, borrowed.
    pub fn receiver_mut(&mut self) -> &mut Receiver<R, F> {
        &mut self.receiver
    }

    /// Splits into a [`Sender`], which can be cloned, and a [`Receiver`], to
    /// use from different tasks.
    pub fn split(self) -> (Sender<R, F>, Receiver<R, F>) {
        (self.sender, self.receiver)
    }
}

impl<R: Runtime, F: Framing> fmt::Debug for Transport<R, F> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Transport")
            .field("pid", &self.sender.pid)
            .finish_non_exhaustive()
    }
}

/// The sending half of a [`Transport`]. Clone it to send from several tasks.
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
    link: Arc<Link<F>>,
    rt: R,
    pid: Option<u32>,
    tap: Hook<R>,
}

impl<R: Runtime, F: Framing> Sender<R, F> {
    fn new(link: Arc<Link<F>>, rt: R, pid: Option<u32>) -> Self {
        link.acquire();
        let tap = Hook::none();
        Self { link, rt, pid, tap }
    }

    /// Sends one message: checked, framed and queued whole or not at all,
    /// and written by this task when it is alone in the queue (the pipe
    /// took everything before it) or a pipe's worth is queued; what is left
    /// (behind a full pipe, or a write in progress) is written by the
    /// background task, or by the next `recv` on this transport, whichever
    /// comes first.
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
    /// ([`SendError::exit_report`]): when the child was reaped, or closed
    /// its stdin and exits within `stdin_grace`, the failure waits for it.
    pub fn send<B: AsRef<[u8]>>(
        &self,
        payload: B,
    ) -> impl Future<Output = Result<(), SendError<B>>> {
        Sending::new(self, payload)
    }

    /// A handle to the child's exit report: set when the child's end is
    /// known, whichever way it was learnt, and kept after the transport is
    /// dropped. For a transport dropped without a shutdown, or a channel
    /// over a pipe pair, it may never come: [`ExitHandle::wait`] then
    /// returns `None` once that is certain.
    pub fn exit_handle(&self) -> ExitHandle {
        self.link.exit.handle()
    }

    /// A slot on this transport's exit report, for an adapter that records
    /// the end itself too (the first report recorded stays). Its drop does
    /// not close the record: the transport fills it.
    pub fn exit_slot(&self) -> ExitSlot {
        self.link.exit.follower()
    }

    /// Sends every message of `payloads` in order: one lock and at most one
    /// write per pipe's worth, for callers with many messages at hand. The
    /// first refused message ends it, handed back with the reason; the ones
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
        let mut payloads = payloads.into_iter().peekable();
        let mut pending: Option<B> = None;
        let sent = poll_fn(|cx| {
            let mut out = lock(&self.link.out);
            let now = self.rt.now();
            // A message refused for want of room is not offered again (its
            // bytes checked again) until there is room: see `poll_send`.
            if pending.is_some()
                && !out.outbound.send_ready()
                && write_all!(self.link, out, Some(cx.waker()), now).is_pending()
                && !out.outbound.send_ready()
            {
                return Poll::Pending;
            }
            while let Some(item) = pending.take().or_else(|| payloads.next()) {
                match out.outbound.send(item) {
                    Ok(()) => {
                        if out.outbound.queued() >= WRITE_BATCH {
                            out = self.link.write_or_arm(out, now);
                        }
                    }
                    Err(err) if err.kind() == SendErrorKind::Full => {
                        pending = Some(err.into_payload());
                        if write_all!(self.link, out, Some(cx.waker()), now).is_pending() {
                            return Poll::Pending;
                        }
                    }
                    Err(err) => return Poll::Ready(Err(err)),
                }
            }
            if !out.outbound.is_drained() {
                self.link.arm_flush(&mut out);
            }
            Poll::Ready(Ok(()))
        })
        .await;
        match sent {
            Ok(()) => Ok(()),
            Err(err) => Err(self.with_end(err).await),
        }
    }

    /// One attempt: the result, or the payload back to wait for room.
    /// `refused_full` says the payload was already refused for want of
    /// room; it is then not offered again until there is room.
    fn poll_send<B: AsRef<[u8]>>(
        &self,
        cx: &mut Context<'_>,
        item: B,
        refused_full: &mut bool,
    ) -> Result<Result<(), SendError<B>>, B> {
        let mut out = lock(&self.link.out);
        loop {
            // Offering the payload checks all of its bytes (no `\n`, no
            // `\r`) before the room: a 1 MiB message waiting behind a full
            // queue was scanned again at every wake-up, once per 64 KiB the
            // pipe took. Once refused, wait for room first.
            if *refused_full && !out.outbound.send_ready() {
                let now = self.rt.now();
                if write_all!(self.link, out, Some(cx.waker()), now).is_pending()
                    && !out.outbound.send_ready()
                {
                    return Err(item);
                }
            }
            // Offered by reference, so that the tap sees it once queued
            // (a copy made for it beforehand cost every untapped send 22
            // instructions: callgrind, the `send().await` row).
            match out.outbound.send(&item) {
                Ok(()) => {
                    drop(self.link.queued_one(out, || self.rt.now()));
                    self.tap.sent_one(item.as_ref());
                    return Ok(Ok(()));
                }
                Err(err) if err.kind() == SendErrorKind::Full => {
                    // The caller does the I/O while it waits for room.
                    *refused_full = true;
                    let now = self.rt.now();
                    if write_all!(self.link, out, Some(cx.waker()), now).is_pending()
                        && !out.outbound.send_ready()
                    {
                        return Err(item);
                    }
                }
                Err(err) => return Ok(Err(SendError::new(err.kind(), item))),
            }
        }
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
        if !self.link.is_child() {
            self.close().await?;
            return Err(ShutdownError::NoChild);
        }
        self.begin_shutdown();
        self.wait_report().await
    }

    /// Waits for the child's report; fails if the background task stopped
    /// without one.
    async fn wait_report(&self) -> Result<ExitReport, ShutdownError> {
        poll_fn(|cx| self.link.exit.poll_report(cx.waker()))
            .await
            .ok_or(ShutdownError::DriverStopped)
    }

    /// Stops sending: what is queued is written, then the write side is
    /// closed (for a child: its stdin, which begins the graceful shutdown;
    /// its end comes through the receiver). Returns once the write side is
    /// closed; fails with [`ShutdownError::PeerClosed`] if the peer stopped
    /// reading first, so what was queued could not all be written.
    pub async fn close(&self) -> Result<(), ShutdownError> {
        if self.link.is_child() {
            self.begin_shutdown();
        } else {
            lock(&self.link.out).outbound.close();
        }
        poll_fn(|cx| {
            let stopped = self.link.exit.is_closed();
            let mut out = lock(&self.link.out);
            let _ = write_all!(self.link, out, Some(cx.waker()), self.rt.now());
            if out.broken {
                return Poll::Ready(Err(ShutdownError::PeerClosed));
            }
            if !out.is_pipe_open() {
                return Poll::Ready(Ok(()));
            }
            if stopped {
                return Poll::Ready(Err(ShutdownError::DriverStopped));
            }
            out.wait(cx.waker());
            Poll::Pending
        })
        .await
    }

    /// Waits until everything queued so far was written to the peer, writing
    /// it from this task. Fails if the peer stopped reading first (what was
    /// queued was dropped) or sending ended.
    ///
    /// Before [`shutdown`](Self::shutdown), it keeps a large last message
    /// out of `stdin_grace`, which otherwise covers the flush too.
    pub async fn flush(&self) -> Result<(), SendError<Bytes>> {
        poll_fn(|cx| {
            let mut out = lock(&self.link.out);
            let written = write_all!(self.link, out, Some(cx.waker()), self.rt.now());
            if out.outbound.is_drained() && !out.is_unflushed() && !out.broken {
                return Poll::Ready(Ok(()));
            }
            if written.is_ready() {
                // Nothing more can be written: the pipe is gone.
                let closed = if out.broken {
                    Closed::PeerClosed
                } else {
                    out.outbound.closed().unwrap_or(Closed::PeerClosed)
                };
                return Poll::Ready(Err(SendError::new(
                    SendErrorKind::Closed(closed),
                    Bytes::new(),
                )));
            }
            Poll::Pending
        })
        .await
    }

    /// The `Sink`'s `start_send` with a tap, which sees the message once it
    /// is queued. Apart: in `start_send`, the reference the tap needs made
    /// every message cost 14 instructions more untapped (callgrind, the
    /// `Sink feed` row).
    #[cold]
    #[inline(never)]
    fn start_send_tapped(&self, item: Bytes) -> Result<(), SendError<Bytes>> {
        let mut out = lock(&self.link.out);
        out.outbound
            .send_anyway(&item)
            .map_err(|err| err.map_payload(Bytes::clone))?;
        let out = self.link.queued_one(out, || self.rt.now());
        self.link.note_send_ready(out.outbound.send_ready());
        drop(out);
        self.tap.sent_one(&item);
        Ok(())
    }

    /// Tells the supervisor, once, that shutdown was asked.
    fn begin_shutdown(&self) {
        let Some(supervisor) = &self.link.supervisor else {
            return;
        };
        let now = self.rt.now();
        let pending = {
            let mut out = lock(&self.link.out);
            out.outbound.refuse(Closed::Closing);
            self.link.arm_flush(&mut out);
            !out.outbound.is_drained()
        };
        let mut sup = lock(supervisor);
        // Asking again changes nothing.
        sup.handle_outbound(pending, now);
        sup.handle_shutdown(now);
        drop(sup);
        self.link.wake_bg();
    }

    /// Whether the write side is still open: sending may succeed.
    pub fn is_open(&self) -> bool {
        lock(&self.link.out).outbound.closed().is_none()
    }

    /// The child's process ID.
    pub fn id(&self) -> Option<u32> {
        self.pid
    }
}

impl<R: Runtime, F: Framing> Clone for Sender<R, F> {
    fn clone(&self) -> Self {
        let mut sender = Self::new(Arc::clone(&self.link), self.rt.clone(), self.pid);
        sender.tap = self.tap.clone();
        sender
    }
}

impl<R: Runtime, F: Framing> Drop for Sender<R, F> {
    fn drop(&mut self) {
        // What is still queued is left to the background flush, armed if
        // it is not already: this sender may be the last that would have
        // written these bytes.
        {
            let mut out = lock(&self.link.out);
            if !out.outbound.is_drained() {
                self.link.arm_flush(&mut out);
            }
        }
        self.link.release(self.rt.now());
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
/// peer, `poll_close` flushes and closes the write side (for a child, it
/// begins the graceful shutdown; use [`Sender::shutdown`] for the report).
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
        // While there is room, one lock per message (`start_send`'s), as
        // for `send`.
        if self.link.send_ready.load(Ordering::Acquire) {
            return Poll::Ready(Ok(()));
        }
        let mut out = lock(&self.link.out);
        loop {
            if out.outbound.send_ready() {
                self.link.note_send_ready(true);
                return Poll::Ready(Ok(()));
            }
            if write_all!(self.link, out, Some(cx.waker()), self.rt.now()).is_pending()
                && !out.outbound.send_ready()
            {
                return Poll::Pending;
            }
        }
    }

    fn start_send(self: Pin<&mut Self>, item: Bytes) -> Result<(), Self::Error> {
        if self.tap.is_set() {
            return self.start_send_tapped(item);
        }
        let mut out = lock(&self.link.out);
        out.outbound.send_anyway(item)?;
        // Written once a batch is queued, else left to the background flush
        // (armed): nothing fed waits for a flush that may never be asked.
        let out = self.link.queued_one(out, || self.rt.now());
        self.link.note_send_ready(out.outbound.send_ready());
        Ok(())
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        let mut out = lock(&self.link.out);
        match write_all!(self.link, out, Some(cx.waker()), self.rt.now()) {
            Poll::Ready(()) if out.outbound.is_drained() => Poll::Ready(Ok(())),
            Poll::Ready(()) => {
                // Queued but the pipe is gone: say why.
                let closed = out.outbound.closed().unwrap_or(Closed::PeerClosed);
                Poll::Ready(Err(SendError::new(
                    SendErrorKind::Closed(closed),
                    Bytes::new(),
                )))
            }
            Poll::Pending => Poll::Pending,
        }
    }

    fn poll_close(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        if Sink::poll_flush(self.as_mut(), cx)?.is_pending() {
            return Poll::Pending;
        }
        if self.link.is_child() {
            self.begin_shutdown();
        } else {
            let mut out = lock(&self.link.out);
            out.outbound.close();
            let _ = self
                .link
                .out
                .poll_write_all(out, Some(cx.waker()), self.rt.now());
        }
        Poll::Ready(Ok(()))
    }
}

/// The receiving half of a [`Transport`]: messages and notices in the order
/// the peer wrote them, then (for a child) the exit report, then `None`. A
/// `futures::Stream` too.
///
/// ```no_run
/// # async fn demo<R: childwire_async::Runtime>(t: childwire_async::Transport<R>) {
/// use childwire_async::Received;
///
/// let (_sender, mut receiver) = t.split();
/// let mut batch = Vec::new();
/// // Many messages per call: one lock for all that are ready.
/// while receiver.recv_many(&mut batch, 256).await > 0 {
///     for item in batch.drain(..) {
///         match item {
///             Received::Message(message) => println!("{}", String::from_utf8_lossy(&message)),
///             Received::Oversized(notice) => eprintln!("dropped, id {:?}", notice.json_rpc_id()),
///             Received::Exited(report) => eprintln!("server {report}"),
///             other => eprintln!("{other:?}"),
///         }
///     }
/// }
/// # }
/// ```
pub struct Receiver<R: Runtime, F: Framing = Lines> {
    link: Arc<Link<F>>,
    rt: R,
    pid: Option<u32>,
    tap: Hook<R>,
}

impl<R: Runtime, F: Framing> Receiver<R, F> {
    fn new(link: Arc<Link<F>>, rt: R, pid: Option<u32>) -> Self {
        link.acquire();
        let tap = Hook::none();
        Self { link, rt, pid, tap }
    }

    /// The next item. See [`Transport::recv`]; cancel-safe.
    pub async fn recv(&mut self) -> Option<Received> {
        poll_fn(|cx| self.poll_recv(cx)).await
    }

    /// Waits for the next item, then moves it and every other item
    /// available now into `into`, up to `limit` in all: one lock for many
    /// messages. Returns how many were moved; 0 only at the end of the
    /// stream (or for a `limit` of 0).
    pub async fn recv_many(&mut self, into: &mut Vec<Received>, limit: usize) -> usize {
        if limit == 0 {
            return 0;
        }
        let Some(first) = self.recv().await else {
            return 0;
        };
        into.push(first);
        let tapped_from = into.len();
        let mut moved = 1;
        let mut inn = lock(&self.link.inn);
        let mut made_room = false;
        while moved < limit {
            let (frame, room) = inn.take_frame();
            made_room |= room;
            let Some(frame) = frame else {
                break;
            };
            into.push(frame.into());
            moved += 1;
        }
        drop(inn);
        if made_room {
            self.link.wake_bg();
        }
        self.tap.received_all(&into[tapped_from..]);
        moved
    }

    /// Polls for the next item: messages and notices in the order the peer
    /// wrote them, then (for a child) the exit report, then `None`.
    ///
    /// Reads and decodes in the calling task when nothing is queued. Frames
    /// belong to the transport until returned, so a dropped `recv` future
    /// loses nothing: receiving is cancel-safe.
    pub fn poll_recv(&mut self, cx: &mut Context<'_>) -> Poll<Option<Received>> {
        if self.tap.is_set() {
            return self.poll_tapped(cx);
        }
        self.poll_item(cx)
    }

    /// [`poll_recv`](Self::poll_recv) with a tap, which sees the item.
    #[cold]
    #[inline(never)]
    fn poll_tapped(&mut self, cx: &mut Context<'_>) -> Poll<Option<Received>> {
        let item = self.poll_item(cx);
        self.tap.received(item)
    }

    /// [`poll_recv`](Self::poll_recv), untapped. Always inlined, as it was
    /// before the tap's path called it too (measured: called, `recv()`
    /// took 15 instructions more per message; handing its item on to the
    /// tap's check, 10 more).
    #[inline(always)]
    fn poll_item(&mut self, cx: &mut Context<'_>) -> Poll<Option<Received>> {
        let mut flushed = false;
        let mut inn = lock(&self.link.inn);
        loop {
            let (frame, made_room) = inn.take_frame();
            if made_room {
                // The background task may wait for this room to read
                // what the child left in stdout when it exited.
                self.link.wake_bg();
            }
            if let Some(frame) = frame {
                return Poll::Ready(Some(frame.into()));
            }
            match inn.end {
                StreamEnd::Open => {}
                StreamEnd::ReportDue => {
                    inn.end = StreamEnd::Over;
                    let report = self.link.exit.get();
                    return Poll::Ready(report.map(|r| Received::Exited(Box::new(r))));
                }
                StreamEnd::Over => return Poll::Ready(None),
            }
            if inn.inbound.is_eof() {
                if !self.link.is_child() {
                    inn.end = StreamEnd::Over;
                    return Poll::Ready(None);
                }
                // The report follows once the supervisor decides the end.
                inn.wait(cx.waker());
                return Poll::Pending;
            }
            if !flushed {
                // About to wait for the peer: send what this transport
                // queued first, from this task (never holding both halves'
                // locks).
                flushed = true;
                drop(inn);
                self.link.flush_if_armed(|| self.rt.now());
                inn = lock(&self.link.inn);
                continue;
            }
            match inn.read_once(cx.waker(), &self.link.peer_turns) {
                ReadOutcome::Progress => {}
                ReadOutcome::Eof => {
                    // The supervisor's input (never under this lock).
                    drop(inn);
                    self.link.stdout_eof(self.rt.now());
                    inn = lock(&self.link.inn);
                }
                ReadOutcome::Pending => return Poll::Pending,
                ReadOutcome::Stopped => {
                    // Nothing queued, nothing to read: the report (or the
                    // driver's end) will wake us.
                    inn.wait(cx.waker());
                    return Poll::Pending;
                }
            }
        }
    }

    /// The child's process ID.
    pub fn id(&self) -> Option<u32> {
        self.pid
    }
}

impl<R: Runtime, F: Framing> Drop for Receiver<R, F> {
    fn drop(&mut self) {
        self.link.release(self.rt.now());
    }
}

impl<R: Runtime, F: Framing> fmt::Debug for Receiver<R, F> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Receiver")
            .field("pid", &self.pid)
            .finish_non_exhaustive()
    }
}

impl<R: Runtime, F: Framing> Stream for Receiver<R, F> {
    type Item = Received;

    fn poll_next(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Received>> {
        self.get_mut().poll_recv(cx)
    }
}

impl<R: Runtime, F: Framing> Stream for Transport<R, F> {
    type Item = Received;

    fn poll_next(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Received>> {
        self.get_mut().receiver.poll_recv(cx)
    }
}

impl<R: Runtime, F: Framing> Sink<Bytes> for Transport<R, F> {
    type Error = SendError<Bytes>;

    fn poll_ready(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        Pin::new(&mut self.get_mut().sender).poll_ready(cx)
    }

    fn start_send(self: Pin<&mut Self>, item: Bytes) -> Result<(), Self::Error> {
        Pin::new(&mut self.get_mut().sender).start_send(item)
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        Pin::new(&mut self.get_mut().sender).poll_flush(cx)
    }

    fn poll_close(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        Pin::new(&mut self.get_mut().sender).poll_close(cx)
    }
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
