#![forbid(unsafe_code)]
#![cfg_attr(docsrs, feature(doc_cfg))]
//! [rmcp] transports over [childwire]: run an MCP server as a child process,
//! or serve over this process's own stdio, with childwire's bounded framing,
//! backpressure, graceful shutdown and exit report.
//!
//! [`ChildwireTransport`] implements rmcp's [`Transport`] trait, so it goes
//! wherever rmcp's `TokioChildProcess` goes:
//!
//! ```no_run
//! use childwire_rmcp::{ChildwireTransport, Command, Config};
//! use rmcp::ServiceExt;
//!
//! # async fn run() -> Result<(), Box<dyn std::error::Error>> {
//! let transport = ChildwireTransport::spawn(&Command::new("uvx").arg("mcp-server-time"), Config::default())?;
//! let exit = transport.exit_handle();
//! let client = ().serve(transport).await?; // the handshake
//! for tool in client.list_all_tools().await? {
//!     println!("{}", tool.name);
//! }
//! client.cancel().await?; // closes the transport: the graceful shutdown
//! println!("server {}", exit.wait().await.expect("the server's end is known"));
//! # Ok(()) }
//! ```
//!
//! What it adds to a plain child process transport:
//!
//! - **Closing is graceful.** rmcp closes the transport when the service
//!   ends; that runs childwire's shutdown: flush, close the server's stdin,
//!   wait, SIGTERM, wait, SIGKILL, on the server's whole process group. The
//!   [`ExitReport`] then comes out of [`ExitHandle`]. Dropping the transport
//!   without closing it kills the group (the non-graceful path).
//! - **A dead server explains itself.** When the server exits, every
//!   request still waiting for its answer fails with a JSON-RPC error (code
//!   [`SERVER_EXITED_ERROR_CODE`]) that says how it ended: "the child
//!   process exited with code 3 before it answered; its stderr says: cannot
//!   open database", and the exit report lists their ids. During the
//!   handshake that is the error `serve` returns, instead of "connection
//!   closed". Sending after the end fails with [`Error::Exited`], carrying
//!   the report.
//! - **An over-long response fails its request.** A response over
//!   `max_message_size` is dropped without being buffered whole, and its
//!   request gets a JSON-RPC error (childwire's `oversized_error`) right away
//!   instead of waiting forever. An over-long *request* from the server is
//!   answered with the same error, so the server is not left waiting either.
//! - **The server's stderr is shown and kept.** As with rmcp's own
//!   `TokioChildProcess`, which lets the server write to your stderr, you
//!   see what the server says: each line is written to this process's
//!   stderr, marked with the program's name (`[sh] cannot open database`).
//!   Its tail is also kept for the exit report, and each line goes to
//!   `tracing` (target `childwire::stderr`, level `debug`) and to
//!   [`Config::on_stderr_line`]'s callback. For quiet,
//!   `command.stderr(StderrMode::Capture)`; to drop it,
//!   [`StderrMode::Discard`].
//!
//! The server role (feature `server`) runs over this process's own stdin and
//! stdout: [`ChildwireTransport::stdio`][stdio].
//!
//! [rmcp]: https://docs.rs/rmcp
//! [childwire]: https://docs.rs/childwire
// Links to what only the `server` feature builds: to the item when it is
// built, else to its page on docs.rs (which builds every feature).
#![cfg_attr(feature = "server", doc = "[stdio]: ChildwireTransport::stdio")]
#![cfg_attr(
    not(feature = "server"),
    doc = "[stdio]: https://docs.rs/childwire-rmcp/latest/childwire_rmcp/struct.ChildwireTransport.html#method.stdio"
)]

mod error;

use std::borrow::Cow;
use std::collections::VecDeque;
use std::fmt;
use std::future::Future;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use bytes::Bytes;
use childwire::tokio::{Oversized, Received, Receiver, Sender, ShutdownError, Transport as Wire};
use rmcp::service::{RxJsonRpcMessage, ServiceRole, TxJsonRpcMessage};
use rmcp::transport::Transport;

pub use childwire::ExitHandle;
/// The JSON-RPC error code of the responses made up for requests the
/// server will never answer because it ended: -32000, which the MCP SDKs
/// use for "connection closed".
pub use childwire::core::pending::UNANSWERED_ERROR_CODE as SERVER_EXITED_ERROR_CODE;
pub use childwire::tokio::{
    ChannelConfig, Command, Config, ExitReport, NoRuntime, SendError, SpawnError, StderrMode,
};
pub use error::Error;

use childwire::ExitSlot;
use childwire::core::pending::{EndCause, Outgoing, OversizedAction, PendingRequests};

/// An rmcp [`Transport`] over a childwire transport: a child process (the
/// client role, [`spawn`](ChildwireTransport::spawn)) or this process's
/// stdio (the server role, [`stdio`][stdio]).
///
/// `R` is rmcp's role: [`rmcp::RoleClient`] for a host talking to a
/// server it runs, [`rmcp::RoleServer`][role-server] for a server.
///
#[cfg_attr(feature = "server", doc = "[stdio]: ChildwireTransport::stdio")]
#[cfg_attr(feature = "server", doc = "[role-server]: rmcp::RoleServer")]
#[cfg_attr(
    not(feature = "server"),
    doc = "[stdio]: https://docs.rs/childwire-rmcp/latest/childwire_rmcp/struct.ChildwireTransport.html#method.stdio"
)]
#[cfg_attr(
    not(feature = "server"),
    doc = "[role-server]: https://docs.rs/rmcp/latest/rmcp/service/struct.RoleServer.html"
)]
pub struct ChildwireTransport<R: ServiceRole> {
    sender: Sender,
    receiver: Receiver,
    /// Requests sent and not answered yet (the core's tracker), shared
    /// with the send futures.
    pending: Arc<Mutex<PendingRequests>>,
    /// Messages made up by the transport (errors for dropped or never
    /// coming responses), delivered before the next read.
    ready: VecDeque<RxJsonRpcMessage<R>>,
    /// `max_message_size`, for the size in the oversized errors.
    limit: usize,
    /// The child's end, once known; [`ExitHandle`]s see it.
    exit: ExitSlot,
    /// The receiver ended (`None`): only `ready` is left.
    ended: bool,
    /// The child's end was read from the stream and its unanswered requests
    /// failed: the report's list of them is final.
    settled: bool,
}

#[cfg(feature = "client")]
#[cfg_attr(docsrs, doc(cfg(feature = "client")))]
impl ChildwireTransport<rmcp::RoleClient> {
    /// Spawns `command` (an MCP server) and talks to it as a client.
    ///
    /// Must be called within a Tokio runtime. Fails with a [`SpawnError`]
    /// that names the program and the reason (not found on `PATH`,
    /// permission denied, ...); nothing is left behind.
    ///
    /// ```no_run
    /// use childwire_rmcp::{ChildwireTransport, Command, Config};
    ///
    /// # async fn run() -> Result<(), Box<dyn std::error::Error>> {
    /// let mut config = Config::default();
    /// config.stdin_grace(std::time::Duration::from_secs(5));
    /// let transport = ChildwireTransport::spawn(
    ///     Command::new("npx").args(["-y", "@modelcontextprotocol/server-everything"]),
    ///     config,
    /// )?;
    /// # Ok(()) }
    /// ```
    pub fn spawn(command: &Command, config: impl Into<Config>) -> Result<Self, SpawnError> {
        let config = config.into();
        let limit = config.channel.max_message_size;
        Ok(Self::new(Wire::spawn(command, config)?, limit))
    }
}

#[cfg(feature = "server")]
#[cfg_attr(docsrs, doc(cfg(feature = "server")))]
impl ChildwireTransport<rmcp::RoleServer> {
    /// The server role over this process's own stdin and stdout, with the
    /// default limits. The session ends at stdin's EOF.
    ///
    /// ```no_run
    /// use rmcp::{ServerHandler, ServiceExt};
    ///
    /// #[derive(Clone)]
    /// struct Server;
    /// impl ServerHandler for Server {}
    ///
    /// # async fn serve() -> Result<(), Box<dyn std::error::Error>> {
    /// let service = Server.serve(childwire_rmcp::ChildwireTransport::stdio()?).await?;
    /// service.waiting().await?;
    /// # Ok(()) }
    /// ```
    pub fn stdio() -> Result<Self, NoRuntime> {
        Self::stdio_with(&ChannelConfig::default())
    }

    /// [`stdio`](Self::stdio) with the given limits.
    pub fn stdio_with(config: &ChannelConfig) -> Result<Self, NoRuntime> {
        Ok(Self::new(
            childwire::tokio::stdio(config)?,
            config.max_message_size,
        ))
    }
}

impl<R: ServiceRole> ChildwireTransport<R> {
    /// Wraps a childwire transport made some other way (e.g. over a socket
    /// with `Transport::from_pipes`, or spawned with another framing setup).
    /// `max_message_size` is its inbound limit, quoted in the errors made up
    /// for over-long responses.
    pub fn from_transport(transport: Wire, max_message_size: usize) -> Self {
        Self::new(transport, max_message_size)
    }

    fn new(transport: Wire, limit: usize) -> Self {
        let (sender, receiver) = transport.split();
        // The transport fills it too: a report learnt by any path (a
        // failed send, the drop) reaches the handles.
        let exit = sender.exit_slot();
        Self {
            sender,
            receiver,
            pending: Arc::default(),
            ready: VecDeque::new(),
            limit,
            exit,
            ended: false,
            settled: false,
        }
    }

    /// A handle to the child's [`ExitReport`], to keep before handing the
    /// transport to rmcp: the report is there once the child ended (the
    /// service closed the transport, or the child exited on its own).
    pub fn exit_handle(&self) -> ExitHandle {
        self.exit.handle()
    }

    /// The child's process ID (its process group's too); `None` over stdio.
    pub fn id(&self) -> Option<u32> {
        self.sender.id()
    }

    /// Turns what childwire received into messages for rmcp, in `ready`.
    fn handle(&mut self, item: Received) {
        match item {
            Received::Message(message) => {
                match serde_json::from_slice::<RxJsonRpcMessage<R>>(message.bytes()) {
                    Ok(parsed) => {
                        // A response clears its request; one that is not
                        // MCP JSON-RPC is dropped, and its request answered
                        // at the end.
                        lock(&self.pending).handle_incoming(message.bytes());
                        self.ready.push_back(parsed);
                    }
                    Err(err) => tracing::warn!(
                        "dropped a message that is not MCP JSON-RPC ({err}): {:?}",
                        String::from_utf8_lossy(&message.bytes()[..message.bytes().len().min(200)])
                    ),
                }
            }
            Received::Oversized(notice) => self.oversized(&notice),
            Received::Exited(report) => self.exited(*report),
            // A banner or the other framing on stdout, named once (with
            // `ChannelConfig::pollution` on); the line itself follows.
            Received::Pollution(notice) => tracing::warn!("the MCP server: {notice}"),
            other => tracing::warn!("{other:?}"),
        }
    }

    /// A message over the limit was dropped: fail our request it answered,
    /// or answer the peer's request it was.
    fn oversized(&mut self, notice: &Oversized) {
        let action = lock(&self.pending).handle_oversized(notice, self.limit);
        match action {
            OversizedAction::FailRequest(error) => {
                tracing::warn!("{notice}; its request fails with an error");
                self.deliver(&error);
            }
            OversizedAction::AnswerPeer(error) => {
                tracing::warn!("{notice}; answering the peer's request with an error");
                let sender = self.sender.clone();
                tokio::spawn(async move {
                    if let Err(err) = sender.send(error).await {
                        tracing::debug!("could not answer the over-long request: {err}");
                    }
                });
            }
            _ => tracing::warn!("{notice}; no request of ours waits for it"),
        }
    }

    /// The child ended: every request still waiting fails with its report.
    fn exited(&mut self, mut report: ExitReport) {
        let unanswered = lock(&self.pending).fail_all(&EndCause {
            exit: Some(report.exit),
            stderr: report.stderr_summary(),
            restarting: false,
        });
        report.unanswered_ids = unanswered.ids().cloned().collect();
        if report.unexpected() {
            tracing::warn!("the MCP server {report}");
        } else {
            tracing::debug!("the MCP server {report}");
        }
        for request in &unanswered.requests {
            self.deliver(&request.response);
        }
        // The handles' report lists them too, whichever path recorded it
        // first (the transport does, as soon as it learns the end).
        self.exit.set_unanswered_ids(report.unanswered_ids.clone());
        self.settled = true;
        self.exit.set(report);
    }

    /// Queues a made-up JSON-RPC message for rmcp.
    fn deliver(&mut self, json: &Bytes) {
        match serde_json::from_slice(json) {
            Ok(message) => self.ready.push_back(message),
            Err(err) => tracing::error!("could not build the error response ({err}): {json:?}"),
        }
    }
}

impl<R: ServiceRole> Transport<R> for ChildwireTransport<R> {
    type Error = Error;

    fn name() -> Cow<'static, str> {
        Cow::Borrowed("childwire")
    }

    fn send(
        &mut self,
        item: TxJsonRpcMessage<R>,
    ) -> impl Future<Output = Result<(), Error>> + Send + 'static {
        let prepared = match self.exit.get() {
            Some(report) => Err(Error::Exited(Box::new(report))),
            None => serde_json::to_vec(&item).map_err(Error::Serialize),
        };
        // Tracked before it is sent: the answer may come before `send`
        // returns.
        let tracked = prepared
            .as_ref()
            .is_ok_and(|body| lock(&self.pending).handle_outgoing(body) == Outgoing::Tracked);
        let sender = self.sender.clone();
        let pending = Arc::clone(&self.pending);
        let exit = self.exit.handle();
        async move {
            match sender.send(prepared?).await {
                Ok(()) => Ok(()),
                Err(source) => {
                    let source = source.map_payload(|body| {
                        if tracked {
                            lock(&pending).handle_unsent(&body);
                        }
                        body
                    });
                    let exit = exit.get().map(Box::new);
                    Err(Error::Send { source, exit })
                }
            }
        }
    }

    async fn receive(&mut self) -> Option<RxJsonRpcMessage<R>> {
        loop {
            if let Some(message) = self.ready.pop_front() {
                return Some(message);
            }
            if self.ended {
                return None;
            }
            // Cancel-safe: `recv` loses nothing when dropped, and the rest
            // is synchronous.
            match self.receiver.recv().await {
                Some(item) => self.handle(item),
                None => self.ended = true,
            }
        }
    }

    async fn close(&mut self) -> Result<(), Error> {
        match self.sender.shutdown().await {
            Ok(mut report) => {
                if !self.settled {
                    // Not read to its end yet: the requests still waiting
                    // (a later `receive` that reads the end makes the
                    // list final).
                    report.unanswered_ids = lock(&self.pending).ids();
                    self.exit.set_unanswered_ids(report.unanswered_ids.clone());
                }
                if !report.success() {
                    tracing::info!("the MCP server {report}");
                }
                self.exit.set(report);
                Ok(())
            }
            // Over stdio: the write side is closed, there is no child.
            Err(ShutdownError::NoChild) => Ok(()),
            Err(err) => Err(Error::Shutdown(err)),
        }
    }
}

impl<R: ServiceRole> fmt::Debug for ChildwireTransport<R> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ChildwireTransport")
            .field("pid", &self.sender.id())
            .field("ended", &self.ended)
            .finish_non_exhaustive()
    }
}

fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    // The tracker stays consistent if a panic interrupted a holder.
    mutex.lock().unwrap_or_else(PoisonError::into_inner)
}
