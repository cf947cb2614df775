//! The user's handles: [`Transport`], and its halves [`Sender`] and
//! [`Receiver`]. The caller's task does the I/O: `recv` reads and decodes,
//! `send` frames and writes; a background task does only what must happen
//! while no caller is there.

use std::fmt;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use bytes::Bytes;
use childwire_core::{
    ChannelConfig, Command, Counters, ExitReport, Framing, Lines, Received, SendError, Session,
    SpawnError,
};
use futures_core::Stream;
use futures_sink::Sink;

// Also named from here by the supervised transport.
pub(crate) use crate::config::Config;
use crate::driver::{Child, Driver};
use crate::exit_handle::ExitHandle;
pub use crate::receiver::Receiver;
use crate::runtime::{PipeRead, PipeWrite, Runtime};
pub use crate::sender::{Sender, ShutdownError};
use crate::shared::Shared;
use crate::stderr_lines;
use crate::tap::{Hook, Tap, TapSlot};
use crate::{os, spawn, spawner};

mod request;
mod startup;

pub use request::RequestError;

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
/// the non-graceful path. On Unix the signal is sent by the drop itself, as
/// `tokio::process` sends its kill-on-drop, so the child dies even if the
/// runtime never runs the background task again; the child is reaped in the
/// background.
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
        // The host's end of stdin tells the sweep's watch when it closes.
        let stdin_watch = child.pipes.stdin_watch();
        // On Windows this starts the child, created suspended, in its job.
        let tracking = os::Tracking::new(
            child.pid,
            command.get_process_group(),
            child.pipes,
            prepared,
        )
        .map_err(|err| SpawnError::new(command, err))?;
        let now = rt.now();
        let mut session = Session::with_framing(framing, &config, command.get_process_group(), now)
            .with_kill_on_drop(command.get_kill_on_drop());
        if child.stderr.is_none() {
            session.handle_stderr_eof(now);
        }
        let shared = Shared::new(
            session,
            child.stdin,
            child.stdout,
            tracking.signal_target(),
            stdin_watch,
        );
        let tap = Hook::new(config.tap.as_ref(), &rt, shared.exit.handle());
        let program = command.get_program().to_string_lossy().into_owned();
        // Every event of this child's background task is in its span.
        let span = crate::log::debug_span!("childwire", pid = child.pid, program = %program);
        let driver = Driver::new(
            Arc::clone(&shared),
            rt.clone(),
            Some(Child {
                tracking,
                program,
                span,
                exit: Some(child.exit),
                stderr: child.stderr,
                on_stderr_line: tap.with_stderr(stderr_lines::with_shown(
                    command,
                    config.on_stderr_line.clone(),
                )),
            }),
        );
        // The handles first: the background task finds them counted.
        let transport = Self::from_shared(shared, rt.clone(), child.pid).with_hook(tap);
        rt.spawn(Box::pin(driver));
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
        let session = Session::over_pipes(framing, config);
        let shared = Shared::new(session, Box::new(writer), Box::new(reader), None, None);
        let driver = Driver::new(Arc::clone(&shared), rt.clone(), None);
        let transport = Self::from_shared(shared, rt.clone(), None);
        rt.spawn(Box::pin(driver));
        Ok(transport)
    }

    fn from_shared(shared: Arc<Shared<F>>, rt: R, pid: Option<u32>) -> Self {
        Self {
            sender: Sender::new(Arc::clone(&shared), rt.clone(), pid),
            receiver: Receiver::new(shared, rt, pid),
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

    /// See [`Sender::send_json`].
    ///
    /// ```no_run
    /// # async fn demo<R: childwire_async::Runtime>(mut server: childwire_async::Transport<R>) {
    /// use serde_json::{Value, json};
    ///
    /// server.send_json(&json!({"jsonrpc": "2.0", "id": 1, "method": "ping"})).await.unwrap();
    /// let reply: Value = server.recv_json().await.unwrap().unwrap();
    /// # }
    /// ```
    #[cfg(feature = "serde")]
    #[cfg_attr(docsrs, doc(cfg(feature = "serde")))]
    pub async fn send_json<T: serde::Serialize + ?Sized>(
        &self,
        value: &T,
    ) -> Result<(), crate::SendJsonError> {
        self.sender.send_json(value).await
    }

    /// See [`Receiver::recv_json`].
    #[cfg(feature = "serde")]
    #[cfg_attr(docsrs, doc(cfg(feature = "serde")))]
    pub async fn recv_json<T: serde::de::DeserializeOwned>(
        &mut self,
    ) -> Option<Result<T, crate::RecvJsonError>> {
        self.receiver.recv_json().await
    }

    /// Shuts the child down the MCP way and returns how it ended. See
    /// [`Sender::shutdown`].
    pub async fn shutdown(&self) -> Result<ExitReport, ShutdownError> {
        self.sender.shutdown().await
    }

    /// Kills the child now, and returns how it ended. See [`Sender::kill`].
    pub async fn kill(&self) -> Result<ExitReport, ShutdownError> {
        self.sender.kill().await
    }

    /// Kills the child without waiting. See [`Sender::start_kill`].
    pub fn start_kill(&self) -> Result<(), ShutdownError> {
        self.sender.start_kill()
    }

    /// How the child ended, if known yet; never waits. See
    /// [`Sender::try_wait`].
    pub fn try_wait(&self) -> Option<ExitReport> {
        self.sender.try_wait()
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
        self.sender.shared.lock().session.counters()
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
