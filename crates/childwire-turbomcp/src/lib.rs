#![forbid(unsafe_code)]
#![cfg_attr(docsrs, feature(doc_cfg))]
//! A [TurboMCP] transport over [childwire]: run an MCP server as a child
//! process with childwire's bounded framing, backpressure, graceful
//! shutdown and exit report.
//!
//! [`ChildwireTransport`] implements TurboMCP's [`Transport`] trait and is
//! built from the same [`ChildProcessConfig`] as TurboMCP's own
//! `ChildProcessTransport`, so switching is one line:
//!
//! ```no_run
//! use childwire_turbomcp::ChildProcessConfig; // TurboMCP's own, re-exported
//! use childwire_turbomcp::Transport as _;
//!
//! # async fn run() -> Result<(), Box<dyn std::error::Error>> {
//! let config = ChildProcessConfig {
//!     command: "uvx".into(),
//!     args: vec!["mcp-server-time".into()],
//!     ..ChildProcessConfig::default()
//! };
//! // Was: let transport = turbomcp_transport::ChildProcessTransport::new(config);
//! let transport = childwire_turbomcp::ChildwireTransport::new(config);
//! let exit = transport.exit_handle();
//! // let client = turbomcp_client::Client::new(transport); client.initialize().await?; ...
//! # transport.connect().await?;
//! transport.disconnect().await?; // the graceful shutdown (`Client::shutdown` calls it)
//! println!("server {}", exit.get().expect("the server's end is known"));
//! # Ok(()) }
//! ```
//!
//! What it adds over `ChildProcessTransport`:
//!
//! - **Disconnecting is graceful** and ends in an [`ExitReport`]: flush,
//!   close the server's stdin, wait `shutdown_timeout`, SIGTERM, wait
//!   `sigterm_grace`, SIGKILL, on the server's whole process group (so
//!   `npx`/`uvx` launchers leave nothing behind). Dropping the transport
//!   without disconnecting kills the group.
//! - **A dead server explains itself.** When it exits, every request still
//!   waiting fails with a JSON-RPC error (code
//!   [`SERVER_EXITED_ERROR_CODE`]) that says how it ended ("the child
//!   process exited with code 3 before it answered; its stderr says: cannot
//!   open database"), the exit report lists their ids, and `receive` then
//!   fails with `ConnectionLost` with the whole report.
//! - **An over-long response fails its request** at once with childwire's
//!   `oversized_error`, instead of the request waiting for its timeout; it
//!   is dropped without being buffered whole.
//! - **The server's stderr is shown and kept.** Where TurboMCP's transport
//!   logs it at `debug` (nothing shows without a subscriber at that level),
//!   each line is written to this process's stderr, marked with the
//!   program's name (`[sh] cannot open database`), as rmcp and the
//!   TypeScript and Python SDKs show it. Its tail is also kept for the exit
//!   report, and each line still goes to `tracing` (target
//!   `childwire::stderr`, level `debug`). For quiet,
//!   `command.stderr(StderrMode::Capture)` with
//!   [`ChildwireTransport::from_command`].
//!
//! For more control (environment policy, process group, stderr mode, a
//! stderr callback), build it from childwire's own [`Command`] and
//! [`Config`] with [`ChildwireTransport::from_command`].
//!
//! [TurboMCP]: https://docs.rs/turbomcp
//! [childwire]: https://docs.rs/childwire

use std::collections::VecDeque;
use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Mutex, MutexGuard, PoisonError};

use bytes::Bytes;
use childwire::core::pending::{EndCause, Outgoing, OversizedAction, PendingRequests};
use childwire::tokio::{
    Oversized, Received, Receiver, SendErrorKind, Sender, ShutdownError, Transport as Wire,
};
use turbomcp_protocol::MessageId;
use turbomcp_transport::core::{
    TransportCapabilities, TransportError, TransportMessage, TransportMetrics, TransportResult,
    TransportState, TransportType,
};

pub use childwire::ExitHandle;
/// The JSON-RPC error code of the responses made up for requests the
/// server will never answer because it ended: -32000, which the MCP SDKs
/// use for "connection closed".
pub use childwire::core::pending::UNANSWERED_ERROR_CODE as SERVER_EXITED_ERROR_CODE;
pub use childwire::tokio::{ChannelConfig, Command, Config, ExitReport, SpawnError, StderrMode};
/// TurboMCP's child process configuration, which [`ChildwireTransport::new`]
/// takes.
pub use turbomcp_transport::ChildProcessConfig;
/// TurboMCP's transport trait, which [`ChildwireTransport`] implements.
pub use turbomcp_transport::core::Transport;

use childwire::ExitSlot;

type BoxFuture<'a, T> = Pin<Box<dyn Future<Output = T> + Send + 'a>>;

/// A TurboMCP [`Transport`] to an MCP server run as a child process through
/// childwire. The child starts at [`connect`](Transport::connect), as with
/// TurboMCP's `ChildProcessTransport`.
pub struct ChildwireTransport {
    /// What to spawn at `connect`; taken then.
    launch: Mutex<Option<(Command, Config)>>,
    sender: Mutex<Option<Sender>>,
    /// The receiving side, locked across `receive`'s wait (cancel-safe).
    inbound: tokio::sync::Mutex<Inbound>,
    state: Mutex<TransportState>,
    /// Requests sent and not answered yet (the core's tracker).
    pending: Mutex<PendingRequests>,
    /// The child's end was read from the stream and its unanswered
    /// requests failed: the report's list of them is final. Read and
    /// written under `pending`'s lock.
    settled: AtomicBool,
    limit: usize,
    capabilities: TransportCapabilities,
    /// The child's end, once known; [`ExitHandle`]s see it.
    exit: ExitSlot,
    messages_sent: AtomicU64,
    bytes_sent: AtomicU64,
    messages_received: AtomicU64,
    bytes_received: AtomicU64,
    next_id: AtomicU64,
}

#[derive(Default)]
struct Inbound {
    receiver: Option<Receiver>,
    /// Messages to hand out before reading more: the child's, and the
    /// errors made up for requests that will get no answer.
    ready: VecDeque<Bytes>,
    /// The receiver ended: nothing more will come.
    ended: bool,
}

fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(PoisonError::into_inner)
}

impl ChildwireTransport {
    /// A transport for the server `config` describes, started at
    /// `connect`: the drop-in for TurboMCP's `ChildProcessTransport::new`.
    ///
    /// `shutdown_timeout` is the wait after closing the server's stdin,
    /// `sigterm_grace` the wait after SIGTERM, `max_message_size` the limit
    /// both ways. `startup_timeout` and `buffer_size` have no counterpart
    /// (spawning does not wait; childwire sizes its own reads), and the
    /// child's process group is always killed on drop, whatever
    /// `kill_on_drop` says.
    pub fn new(config: ChildProcessConfig) -> Self {
        let mut command = Command::new(&config.command);
        command.args(&config.args);
        if let Some(dir) = &config.working_directory {
            command.current_dir(dir);
        }
        if let Some(vars) = &config.environment {
            command.envs(vars.iter().map(|(key, value)| (key, value)));
        }
        let mut childwire = Config::default();
        childwire
            .stdin_grace(config.shutdown_timeout)
            .term_grace(config.sigterm_grace)
            .max_message_size(config.max_message_size)
            .max_send_size(config.max_message_size);
        Self::from_command(command, childwire)
    }

    /// A transport that spawns `command` with childwire's `config` at
    /// `connect`.
    ///
    /// ```no_run
    /// use childwire_turbomcp::{ChildwireTransport, Command, Config, StderrMode};
    ///
    /// let mut config = Config::default();
    /// config.on_stderr_line(|line| eprintln!("server: {}", String::from_utf8_lossy(line)));
    /// let transport = ChildwireTransport::from_command(
    ///     Command::new("npx")
    ///         .args(["-y", "@modelcontextprotocol/server-everything"])
    ///         // The callback shows the lines: not shown a second time.
    ///         .stderr(StderrMode::Capture)
    ///         .clone(),
    ///     config,
    /// );
    /// ```
    pub fn from_command(command: Command, config: Config) -> Self {
        let limit = config.channel.max_message_size;
        let capabilities = TransportCapabilities {
            max_message_size: Some(config.channel.max_send_size),
            supports_bidirectional: true,
            ..TransportCapabilities::default()
        };
        Self {
            launch: Mutex::new(Some((command, config))),
            sender: Mutex::new(None),
            inbound: tokio::sync::Mutex::new(Inbound::default()),
            state: Mutex::new(TransportState::Disconnected),
            pending: Mutex::new(PendingRequests::default()),
            settled: AtomicBool::new(false),
            limit,
            capabilities,
            exit: ExitSlot::new(),
            messages_sent: AtomicU64::new(0),
            bytes_sent: AtomicU64::new(0),
            messages_received: AtomicU64::new(0),
            bytes_received: AtomicU64::new(0),
            next_id: AtomicU64::new(0),
        }
    }

    /// A handle to the child's [`ExitReport`], there once the child ended
    /// (after `disconnect`, or once `receive` met its end). Take it before
    /// handing the transport to a client.
    pub fn exit_handle(&self) -> ExitHandle {
        self.exit.handle()
    }

    /// The child's process ID (its process group's too), once connected.
    pub fn id(&self) -> Option<u32> {
        lock(&self.sender).as_ref().and_then(Sender::id)
    }

    fn set_state(&self, state: TransportState) {
        *lock(&self.state) = state;
    }

    async fn start(&self) -> TransportResult<()> {
        if matches!(*lock(&self.state), TransportState::Connected) {
            return Ok(());
        }
        let Some((command, config)) = lock(&self.launch).take() else {
            return Err(TransportError::ConnectionFailed(
                "this transport's server was already started once; make a new transport".into(),
            ));
        };
        self.set_state(TransportState::Connecting);
        let wire = match Wire::spawn(&command, config) {
            Ok(wire) => wire,
            Err(err) => {
                self.set_state(TransportState::Failed {
                    reason: err.to_string(),
                });
                return Err(TransportError::ConnectionFailed(err.to_string()));
            }
        };
        let (sender, receiver) = wire.split();
        *lock(&self.sender) = Some(sender);
        self.inbound.lock().await.receiver = Some(receiver);
        self.set_state(TransportState::Connected);
        Ok(())
    }

    async fn stop(&self) -> TransportResult<()> {
        let Some(sender) = lock(&self.sender).clone() else {
            return Ok(());
        };
        self.set_state(TransportState::Disconnecting);
        match sender.shutdown().await {
            Ok(mut report) => {
                {
                    let pending = lock(&self.pending);
                    if !self.settled.load(Ordering::Relaxed) {
                        // Not read to its end yet: the requests still
                        // waiting (a later `receive` that reads the end
                        // makes the list final).
                        report.unanswered_ids = pending.ids();
                        self.exit.set_unanswered_ids(report.unanswered_ids.clone());
                    }
                }
                if !report.success() {
                    tracing::info!("the MCP server {report}");
                }
                self.exit.set(report);
                self.set_state(TransportState::Disconnected);
                Ok(())
            }
            Err(ShutdownError::NoChild) => {
                self.set_state(TransportState::Disconnected);
                Ok(())
            }
            Err(err) => {
                self.set_state(TransportState::Failed {
                    reason: err.to_string(),
                });
                Err(TransportError::Internal(err.to_string()))
            }
        }
    }

    async fn send_message(&self, message: TransportMessage) -> TransportResult<()> {
        if let Some(report) = self.exit.get() {
            return Err(TransportError::ConnectionLost(format!(
                "the MCP server {report}"
            )));
        }
        let Some(sender) = lock(&self.sender).clone() else {
            return Err(TransportError::ConnectionFailed(
                "not connected: call connect first".into(),
            ));
        };
        // Tracked before it is sent: the answer may come before `send`
        // returns.
        let payload = message.payload;
        let tracked = lock(&self.pending).handle_outgoing(&payload) == Outgoing::Tracked;
        let len = payload.len() as u64;
        match sender.send(payload.clone()).await {
            Ok(()) => {
                self.messages_sent.fetch_add(1, Ordering::Relaxed);
                self.bytes_sent.fetch_add(len, Ordering::Relaxed);
                Ok(())
            }
            Err(err) => {
                if tracked {
                    lock(&self.pending).handle_unsent(&payload);
                }
                Err(match self.exit.get() {
                    Some(report) => {
                        TransportError::ConnectionLost(format!("{err}; the MCP server {report}"))
                    }
                    None if matches!(err.kind(), SendErrorKind::Closed(_)) => {
                        TransportError::ConnectionLost(err.to_string())
                    }
                    None => TransportError::SendFailed(err.to_string()),
                })
            }
        }
    }

    async fn receive_message(&self) -> TransportResult<Option<TransportMessage>> {
        let mut inbound = self.inbound.lock().await;
        loop {
            if let Some(payload) = inbound.ready.pop_front() {
                self.messages_received.fetch_add(1, Ordering::Relaxed);
                self.bytes_received
                    .fetch_add(payload.len() as u64, Ordering::Relaxed);
                let id = MessageId::Number(self.next_id.fetch_add(1, Ordering::Relaxed) as i64);
                return Ok(Some(TransportMessage::new(id, payload)));
            }
            if inbound.ended {
                return Err(TransportError::ConnectionLost(match self.exit.get() {
                    Some(report) => format!("the MCP server {report}"),
                    None => "the MCP server closed its output".into(),
                }));
            }
            let Some(receiver) = inbound.receiver.as_mut() else {
                // Not connected yet: as TurboMCP's own transports do.
                return Ok(None);
            };
            // Cancel-safe: `recv` loses nothing when dropped, and the rest
            // is synchronous.
            match receiver.recv().await {
                Some(item) => self.handle(&mut inbound, item),
                None => inbound.ended = true,
            }
        }
    }

    fn handle(&self, inbound: &mut Inbound, item: Received) {
        match item {
            Received::Message(message) => {
                let payload = message.into_bytes();
                lock(&self.pending).handle_incoming(&payload);
                inbound.ready.push_back(payload);
            }
            Received::Oversized(notice) => self.oversized(inbound, &notice),
            // A banner or the other framing on stdout, named once (with
            // `ChannelConfig::pollution` on); the line itself follows.
            Received::Pollution(notice) => tracing::warn!("the MCP server: {notice}"),
            Received::Exited(mut report) => {
                let unanswered = {
                    let mut pending = lock(&self.pending);
                    let unanswered = pending.fail_all(&EndCause {
                        exit: Some(report.exit),
                        stderr: report.stderr_summary(),
                        restarting: false,
                    });
                    report.unanswered_ids = unanswered.ids().cloned().collect();
                    // The handles' report lists them, whichever path
                    // recorded it first (`disconnect` may have).
                    self.exit.set_unanswered_ids(report.unanswered_ids.clone());
                    self.settled.store(true, Ordering::Relaxed);
                    unanswered
                };
                if report.unexpected() {
                    tracing::warn!("the MCP server {report}");
                    self.set_state(TransportState::Failed {
                        reason: format!("the MCP server {report}"),
                    });
                } else {
                    tracing::debug!("the MCP server {report}");
                    self.set_state(TransportState::Disconnected);
                }
                inbound.ready.extend(
                    unanswered
                        .requests
                        .into_iter()
                        .map(|request| request.response),
                );
                self.exit.set(*report);
            }
            other => tracing::warn!("{other:?}"),
        }
    }

    /// A message over the limit was dropped: fail our request it answered,
    /// or answer the server's request it was.
    fn oversized(&self, inbound: &mut Inbound, notice: &Oversized) {
        let action = lock(&self.pending).handle_oversized(notice, self.limit);
        match action {
            OversizedAction::FailRequest(error) => {
                tracing::warn!("{notice}; its request fails with an error");
                inbound.ready.push_back(error);
            }
            OversizedAction::AnswerPeer(error) => {
                tracing::warn!("{notice}; answering the server's request with an error");
                if let Some(sender) = lock(&self.sender).clone() {
                    tokio::spawn(async move {
                        if let Err(err) = sender.send(error).await {
                            tracing::debug!("could not answer the over-long request: {err}");
                        }
                    });
                }
            }
            _ => tracing::warn!("{notice}; no request of ours waits for it"),
        }
    }
}

impl Transport for ChildwireTransport {
    fn transport_type(&self) -> TransportType {
        TransportType::ChildProcess
    }

    fn capabilities(&self) -> &TransportCapabilities {
        &self.capabilities
    }

    fn state(&self) -> BoxFuture<'_, TransportState> {
        let state = lock(&self.state).clone();
        Box::pin(async move { state })
    }

    fn connect(&self) -> BoxFuture<'_, TransportResult<()>> {
        Box::pin(self.start())
    }

    fn disconnect(&self) -> BoxFuture<'_, TransportResult<()>> {
        Box::pin(self.stop())
    }

    fn send(&self, message: TransportMessage) -> BoxFuture<'_, TransportResult<()>> {
        Box::pin(self.send_message(message))
    }

    fn receive(&self) -> BoxFuture<'_, TransportResult<Option<TransportMessage>>> {
        Box::pin(self.receive_message())
    }

    fn metrics(&self) -> BoxFuture<'_, TransportMetrics> {
        let metrics = TransportMetrics {
            bytes_sent: self.bytes_sent.load(Ordering::Relaxed),
            bytes_received: self.bytes_received.load(Ordering::Relaxed),
            messages_sent: self.messages_sent.load(Ordering::Relaxed),
            messages_received: self.messages_received.load(Ordering::Relaxed),
            ..TransportMetrics::default()
        };
        Box::pin(async move { metrics })
    }
}

impl fmt::Debug for ChildwireTransport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ChildwireTransport")
            .field("pid", &self.id())
            .field("state", &*lock(&self.state))
            .finish_non_exhaustive()
    }
}
