#![forbid(unsafe_code)]
#![cfg_attr(docsrs, feature(doc_cfg))]
//! One stdio MCP server shared by many clients.
//!
//! A [`SharedServer`] owns one server (a [`Transport`], or a child that is
//! restarted when it crashes, under a [`Supervision`]'s restart policy) and
//! hands out [`Client`] handles. Each client sends and receives as if it had the server alone:
//!
//! - its request ids (and progress tokens) are rewritten on the way in and
//!   restored on the way out, so every client can count from 1;
//! - answers reach the client that asked; the server's notifications reach
//!   every client, or the one whose request or token they name; a request
//!   from the server (sampling, roots, elicitation) reaches one client, by
//!   the rule [`childwire_core::share`] documents;
//! - the server is initialized once: the first client's `initialize` goes
//!   to it, a later client's is answered from what it said;
//! - a client's cancellation reaches the server for its own requests only,
//!   and a client that leaves has its requests cancelled there;
//! - what waits for a client is bounded: a client that stops reading is
//!   disconnected ([`Client::recv`] ends, [`Client::disconnected`] says
//!   why) and the others go on;
//! - when the last client has left and the linger has passed, the server is
//!   shut down the MCP way ([`Transport::shutdown`]);
//! - with [`SharedServer::spawn_supervised`], a crash answers every
//!   client's requests in flight with an error, and the server is restarted
//!   once for all and re-initialized with the first client's `initialize`.
//!
//! Every decision is made by [`childwire_core::share::Share`]; this crate
//! moves the bytes. The server's output is read by a task of its own, so
//! a client that does not read cannot stall the others; a client's
//! [`send`](Client::send) writes to the server in the client's task and
//! waits while the server does not read.
//!
//! ```no_run
//! # async fn demo<R: childwire_async::Runtime>() -> Result<(), Box<dyn std::error::Error>> {
//! use childwire_async::{Command, Config};
//! use childwire_share::{ShareConfig, SharedServer};
//!
//! let server = SharedServer::<R>::spawn(
//!     &Command::new("my-mcp-server"),
//!     Config::default(),
//!     ShareConfig::default(),
//! )?;
//! let mut a = server.connect()?;
//! let mut b = server.connect()?;
//! // Both use id 1: each gets its own answer, with id 1.
//! a.send(r#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"a","version":"1"}}}"#).await?;
//! b.send(r#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"b","version":"1"}}}"#).await?;
//! let answer_a = a.recv().await;
//! let answer_b = b.recv().await;
//! // The last one out stops the server.
//! drop((a, b));
//! let report = server.stopped().await;
//! # Ok(()) }
//! ```

use std::collections::HashMap;
use std::fmt;
use std::future::poll_fn;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::task::{Poll, Waker};

use bytes::Bytes;
use childwire_async::{
    Command, Config, ExitReport, Framing, Lines, Received, Receiver, Runtime, Sender, SpawnError,
    Supervision, Transport,
};
use childwire_core::pending::EndCause;
pub use childwire_core::share::{ClientId, Disconnect, JoinError, ShareConfig, ShareCounters};
use childwire_core::share::{Event, ReinitStep, Share};
use childwire_core::{RestartPolicy, RestartVerdict};

/// One server shared by many clients. See [the crate](crate).
///
/// Cloning it gives another handle to the same share. The server ends
/// when the last [`Client`] has left and the linger has passed
/// ([`ShareConfig::linger`]), on [`shutdown`](Self::shutdown), or when the
/// last handle is dropped with no client connected (no one could join any
/// more). Until a first client joins, it waits.
pub struct SharedServer<R: Runtime, F: Framing = Lines> {
    inner: Arc<Inner<R, F>>,
}

impl<R: Runtime, F: Framing> Clone for SharedServer<R, F> {
    fn clone(&self) -> Self {
        self.inner.handles.fetch_add(1, Ordering::Relaxed);
        Self {
            inner: Arc::clone(&self.inner),
        }
    }
}

impl<R: Runtime, F: Framing> Drop for SharedServer<R, F> {
    /// The last handle gone with no client connected: no one can join any
    /// more, so the server is shut down (the MCP way) now.
    fn drop(&mut self) {
        if self.inner.handles.fetch_sub(1, Ordering::AcqRel) == 1
            && lock(&self.inner.state).share.clients() == 0
        {
            self.inner.start_shutdown();
        }
    }
}

/// A client of a [`SharedServer`]: sends and receives as if it had the
/// server alone. Dropping it (or [`leave`](Self::leave)) leaves the share:
/// its requests in flight are cancelled at the server.
pub struct Client<R: Runtime, F: Framing = Lines> {
    inner: Arc<Inner<R, F>>,
    id: ClientId,
}

/// Why [`Client::send`] failed.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum ClientError {
    /// The share disconnected this client; the message was not sent.
    Disconnected(Disconnect),
    /// The client left, or the share is over; the message was not sent.
    Closed,
}

impl fmt::Display for ClientError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ClientError::Disconnected(why) => write!(f, "disconnected from the share: {why}"),
            ClientError::Closed => f.write_str("the client is no longer in the share"),
        }
    }
}

impl std::error::Error for ClientError {}

/// The running server's sending half; `None` while a supervised server
/// is down.
struct Link<R: Runtime, F: Framing> {
    /// Shared, not cloned, per send: a `Sender`'s clone and drop cost a
    /// lock, and a dropped one may leave its bytes to a background flush.
    current: Mutex<Option<Arc<Sender<R, F>>>>,
}

impl<R: Runtime, F: Framing> Link<R, F> {
    fn new(sender: Sender<R, F>) -> Self {
        Self {
            current: Mutex::new(Some(Arc::new(sender))),
        }
    }

    fn sender(&self) -> Option<Arc<Sender<R, F>>> {
        self.current
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }

    fn set(&self, sender: Option<Sender<R, F>>) {
        *self.current.lock().unwrap_or_else(PoisonError::into_inner) = sender.map(Arc::new);
    }

    /// Sends `message`; on failure, it back with the reason.
    async fn send(&self, message: Bytes) -> Result<(), (Bytes, String)> {
        let Some(sender) = self.sender() else {
            return Err((message, "the server is down, being restarted".to_owned()));
        };
        sender.send(message).await.map_err(|err| {
            let why = err.to_string();
            (err.into_payload(), why)
        })
    }

    async fn shutdown(&self) {
        if let Some(sender) = self.sender() {
            // How it ended comes through the server's stream.
            let _ = sender.shutdown().await;
        }
    }
}

struct Inner<R: Runtime, F: Framing> {
    rt: R,
    state: Mutex<State>,
    /// Held while messages taken from the share are written to the
    /// server, so they reach it in the order the share made them.
    writer: futures_util::lock::Mutex<()>,
    link: Link<R, F>,
    /// The transport's message size limit, named in the error that answers
    /// a request whose answer was over it.
    max_message_size: usize,
    /// `SharedServer` handles alive: without one, no client can join.
    handles: AtomicUsize,
}

struct State {
    share: Share,
    /// Clients waiting in `recv`.
    wakers: HashMap<ClientId, Waker>,
    /// Clients the share disconnected, and why, until they are dropped.
    disconnected: HashMap<ClientId, Disconnect>,
    /// The server's output is over: nothing more will come.
    over: bool,
    /// Its last exit report.
    report: Option<ExitReport>,
    /// Restarts seen (a supervised server).
    restarts: u32,
    /// Tasks waiting for the end.
    end_wakers: Vec<Waker>,
    /// A shutdown was started.
    stopping: bool,
    /// The linger deadline a timer task runs for.
    linger_armed: Option<std::time::Instant>,
    /// The server's reader, waiting for a client to read.
    pump_waker: Option<Waker>,
}

fn lock(state: &Mutex<State>) -> MutexGuard<'_, State> {
    state.lock().unwrap_or_else(PoisonError::into_inner)
}

impl<R: Runtime> SharedServer<R, Lines> {
    /// Spawns `command` (NDJSON) and shares it.
    pub fn spawn(
        command: &Command,
        config: impl Into<Config>,
        share: ShareConfig,
    ) -> Result<Self, SpawnError> {
        let config = config.into();
        let limit = config.channel.max_message_size;
        Self::share(Transport::spawn(command, config)?, share, limit, command)
    }

    /// Spawns `command` (NDJSON) and shares it, restarting it when it ends
    /// unexpectedly as `supervision`'s restart policy says: a crash answers
    /// every client's requests in flight with an error, and the server is
    /// restarted once for all and re-initialized with the first client's
    /// `initialize` (its answer is the share's; the clients had theirs).
    /// While it is down, requests are answered with an error at once.
    /// (`supervision.track_requests` and `while_down` are not used: the
    /// share answers for the requests itself.)
    pub fn spawn_supervised(
        command: &Command,
        config: impl Into<Config>,
        supervision: Supervision,
        share: ShareConfig,
    ) -> Result<Self, SpawnError> {
        let config = config.into();
        let rt = R::current().map_err(|err| SpawnError::no_runtime(command, err.0))?;
        let limit = config.channel.max_message_size;
        let mut policy = RestartPolicy::new(supervision.restart, supervision.seed);
        let transport = Transport::spawn(command, config.clone())?;
        policy.handle_started(rt.now());
        let (sender, receiver) = transport.split();
        let inner = Inner::new(rt.clone(), share, Link::new(sender), limit);
        let pump = Arc::clone(&inner);
        let restart = Restart {
            framing: Lines,
            command: command.clone(),
            config,
            policy,
        };
        rt.spawn(Box::pin(async move {
            pump.pump(receiver, Some(restart)).await;
        }));
        Ok(Self { inner })
    }
}

/// What a supervised share restarts its server with.
struct Restart<F> {
    framing: F,
    command: Command,
    config: Config,
    policy: RestartPolicy,
}

impl<R: Runtime, F: Framing> SharedServer<R, F> {
    /// Shares a transport made by the caller (any framing, a child or a
    /// pipe pair) whose config allows messages of `max_message_size` bytes
    /// (the limit the error answering an over-long answer names).
    pub fn from_transport(
        transport: Transport<R, F>,
        max_message_size: usize,
        share: ShareConfig,
    ) -> Result<Self, SpawnError> {
        Self::share(
            transport,
            share,
            max_message_size,
            &Command::new("childwire-share"),
        )
    }

    fn share(
        transport: Transport<R, F>,
        share: ShareConfig,
        max_message_size: usize,
        command: &Command,
    ) -> Result<Self, SpawnError> {
        let rt = R::current().map_err(|err| SpawnError::no_runtime(command, err.0))?;
        let (sender, receiver) = transport.split();
        let inner = Inner::new(rt.clone(), share, Link::new(sender), max_message_size);
        let pump = Arc::clone(&inner);
        rt.spawn(Box::pin(async move {
            pump.pump(receiver, None).await;
        }));
        Ok(Self { inner })
    }

    /// A new client. Fails when the share has its
    /// [`max_clients`](ShareConfig::max_clients), or the server is stopping.
    pub fn connect(&self) -> Result<Client<R, F>, JoinError> {
        let now = self.inner.rt.now();
        let id = lock(&self.inner.state).share.join(now)?;
        Ok(Client {
            inner: Arc::clone(&self.inner),
            id,
        })
    }

    /// The running server's process ID; `None` while a supervised server
    /// is down, or for a server over a pipe pair.
    pub fn id(&self) -> Option<u32> {
        self.inner.link.sender().and_then(|sender| sender.id())
    }

    /// Clients connected.
    pub fn clients(&self) -> usize {
        lock(&self.inner.state).share.clients()
    }

    /// Client requests waiting for the server.
    pub fn in_flight(&self) -> usize {
        lock(&self.inner.state).share.in_flight()
    }

    /// Restarts of a supervised server so far.
    pub fn restarts(&self) -> u32 {
        lock(&self.inner.state).restarts
    }

    /// Messages the share refused or dropped, and clients it disconnected.
    pub fn counters(&self) -> ShareCounters {
        lock(&self.inner.state).share.counters()
    }

    /// Shuts the server down the MCP way now, whoever is connected: their
    /// requests in flight are answered with an error. Returns once it
    /// ended, with its report (`None` for a server over a pipe pair).
    pub async fn shutdown(&self) -> Option<ExitReport> {
        self.inner.start_shutdown();
        self.stopped().await
    }

    /// Waits until the server has ended (the last client left and the
    /// linger passed, or a shutdown) and every client's answer is queued;
    /// its exit report (`None` for a server over a pipe pair).
    pub async fn stopped(&self) -> Option<ExitReport> {
        poll_fn(|cx| {
            let mut state = lock(&self.inner.state);
            if state.over {
                return Poll::Ready(state.report.clone());
            }
            state.end_wakers.push(cx.waker().clone());
            Poll::Pending
        })
        .await
    }
}

impl<R: Runtime, F: Framing> fmt::Debug for SharedServer<R, F> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let state = lock(&self.inner.state);
        f.debug_struct("SharedServer")
            .field("clients", &state.share.clients())
            .field("in_flight", &state.share.in_flight())
            .field("over", &state.over)
            .finish_non_exhaustive()
    }
}

impl<R: Runtime, F: Framing> Client<R, F> {
    /// This client's number in the share.
    pub fn id(&self) -> ClientId {
        self.id
    }

    /// Sends one message (its body, without framing) as if to the server
    /// alone: forwarded with its id rewritten, answered by the share (a
    /// later `initialize`, a refused message), or dropped (a cancellation
    /// of a request not its own); see [`childwire_core::share`]. Returns
    /// once what it made for the server is written or queued there; waits
    /// while the server does not read.
    ///
    /// Cancel-safe in the sense that nothing is lost: a request whose send
    /// is dropped before it reached the server is answered with an error.
    pub async fn send(&self, message: impl AsRef<[u8]>) -> Result<(), ClientError> {
        let _writing = self.inner.writer.lock().await;
        {
            let mut state = lock(&self.inner.state);
            if let Some(why) = state.disconnected.get(&self.id) {
                return Err(ClientError::Disconnected(why.clone()));
            }
            if !state.share.is_joined(self.id) {
                return Err(ClientError::Closed);
            }
            let now = self.inner.rt.now();
            state.share.handle_client(now, self.id, message.as_ref());
            self.inner.dispatch(&mut state);
        }
        self.inner.write_out().await;
        Ok(())
    }

    /// The next message for this client: an answer (with its own id), a
    /// notification, a request from the server. `None` once the client was
    /// disconnected ([`disconnected`](Self::disconnected) says why) or the
    /// server ended for good and everything for this client was read.
    pub async fn recv(&self) -> Option<Bytes> {
        poll_fn(|cx| {
            let mut state = lock(&self.inner.state);
            let now = self.inner.rt.now();
            if let Some(message) = state.share.poll_client(now, self.id) {
                // The server's reader may wait for this client to read.
                if let Some(waker) = state.pump_waker.take() {
                    waker.wake();
                }
                return Poll::Ready(Some(message));
            }
            if state.over || !state.share.is_joined(self.id) {
                return Poll::Ready(None);
            }
            state.wakers.insert(self.id, cx.waker().clone());
            Poll::Pending
        })
        .await
    }

    /// Why the share disconnected this client, if it did.
    pub fn disconnected(&self) -> Option<Disconnect> {
        lock(&self.inner.state).disconnected.get(&self.id).cloned()
    }

    /// Bytes queued for this client (with the share's per-message
    /// overhead), within [`ShareConfig::client_queue_bytes`].
    pub fn queued(&self) -> usize {
        lock(&self.inner.state).share.queued(self.id)
    }

    /// Leaves the share (as dropping it does).
    pub fn leave(self) {}
}

impl<R: Runtime, F: Framing> Drop for Client<R, F> {
    fn drop(&mut self) {
        let mut state = lock(&self.inner.state);
        state.disconnected.remove(&self.id);
        state.wakers.remove(&self.id);
        let now = self.inner.rt.now();
        state.share.leave(self.id, now);
        self.inner.dispatch(&mut state);
        drop(state);
        self.inner.spawn_write_out();
    }
}

impl<R: Runtime, F: Framing> fmt::Debug for Client<R, F> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Client")
            .field("id", &self.id)
            .finish_non_exhaustive()
    }
}

impl<R: Runtime, F: Framing> Inner<R, F> {
    fn new(rt: R, config: ShareConfig, link: Link<R, F>, max_message_size: usize) -> Arc<Self> {
        let share = Share::new(config, rt.now());
        Arc::new(Self {
            rt,
            state: Mutex::new(State {
                share,
                wakers: HashMap::new(),
                disconnected: HashMap::new(),
                over: false,
                report: None,
                restarts: 0,
                end_wakers: Vec::new(),
                stopping: false,
                linger_armed: None,
                pump_waker: None,
            }),
            writer: futures_util::lock::Mutex::new(()),
            link,
            max_message_size,
            handles: AtomicUsize::new(1),
        })
    }

    /// Hands out what the share decided: wakes the clients with messages,
    /// records disconnections, starts the shutdown.
    fn dispatch(self: &Arc<Self>, state: &mut State) {
        let mut stop = false;
        while let Some(event) = state.share.poll_event() {
            match event {
                Event::Readable(client) => {
                    if let Some(waker) = state.wakers.remove(&client) {
                        waker.wake();
                    }
                }
                Event::Disconnected { client, reason } => {
                    state.disconnected.insert(client, reason);
                    if let Some(waker) = state.wakers.remove(&client) {
                        waker.wake();
                    }
                }
                Event::StopServer => stop = true,
                _ => {}
            }
        }
        if stop && !state.stopping {
            state.stopping = true;
            let inner = Arc::clone(self);
            self.rt.spawn(Box::pin(async move {
                inner.link.shutdown().await;
            }));
        }
        self.arm_linger(state);
    }

    /// A timer for the linger, when one runs.
    fn arm_linger(self: &Arc<Self>, state: &mut State) {
        let Some(deadline) = state.share.poll_timeout() else {
            return;
        };
        if state.linger_armed == Some(deadline) {
            return;
        }
        state.linger_armed = Some(deadline);
        let inner = Arc::clone(self);
        let mut timer = self.rt.timer(deadline);
        self.rt.spawn(Box::pin(async move {
            poll_fn(|cx| timer.as_mut().poll(cx)).await;
            let mut state = lock(&inner.state);
            state.linger_armed = None;
            let now = inner.rt.now();
            state.share.handle_timeout(now);
            // Stops the server if the linger is over; arms the next timer
            // if a client came and went meanwhile.
            inner.dispatch(&mut state);
        }));
    }

    /// Writes what the share has for the server, in order.
    async fn write_out(self: &Arc<Self>) {
        loop {
            let Some(message) = lock(&self.state).share.poll_server() else {
                return;
            };
            let mut unsent = Unsent {
                inner: self,
                message: Some(message.clone()),
            };
            let result = self.link.send(message).await;
            unsent.message = None;
            if let Err((message, why)) = result {
                let mut state = lock(&self.state);
                let now = self.rt.now();
                state.share.handle_unsent(now, &message, &why);
                self.dispatch(&mut state);
            }
        }
    }

    /// [`write_out`](Self::write_out) from a task of its own, for what the
    /// share made outside a client's send (cancellations of a client that
    /// left, answers to the server's pings).
    fn spawn_write_out(self: &Arc<Self>) {
        let inner = Arc::clone(self);
        self.rt.spawn(Box::pin(async move {
            let _writing = inner.writer.lock().await;
            inner.write_out().await;
        }));
    }

    /// Reads the server's output into the share until it ends; with
    /// `restart`, spawns and re-initializes the next generation while the
    /// policy says so.
    async fn pump(self: Arc<Self>, mut receiver: Receiver<R, F>, mut restart: Option<Restart<F>>) {
        let mut batch = Vec::new();
        'generations: loop {
            let mut report = None;
            loop {
                batch.clear();
                if receiver.recv_many(&mut batch, 64).await == 0 {
                    break;
                }
                for item in batch.drain(..) {
                    let behind = match item {
                        Received::Exited(exit) => {
                            report = Some(*exit);
                            false
                        }
                        item => self.server_item(item),
                    };
                    // The next message waits while a client that reads is
                    // behind, so none is pushed past its bound by a batch.
                    if behind {
                        self.read_pause().await;
                    }
                }
            }
            let Some(report) = report else {
                // A pipe pair's EOF: no child, no restart.
                break;
            };
            let now = self.rt.now();
            let stopping = lock(&self.state).stopping;
            let verdict = match restart.as_mut() {
                Some(restart) if !stopping => {
                    Some(restart.policy.handle_exit(now, report.unexpected()))
                }
                _ => None,
            };
            let mut at = match verdict {
                Some(RestartVerdict::Restart { at, .. }) => at,
                _ => {
                    self.server_ended(report, false);
                    break;
                }
            };
            self.link.set(None);
            self.server_ended(report, true);
            let Some(restart) = restart.as_mut() else {
                break;
            };
            // The next generation, as many tries as the policy allows.
            loop {
                let mut timer = self.rt.timer(at);
                poll_fn(|cx| timer.as_mut().poll(cx)).await;
                if lock(&self.state).stopping {
                    break 'generations;
                }
                let spawned = Transport::spawn_with(
                    restart.framing.clone(),
                    &restart.command,
                    restart.config.clone(),
                );
                let now = self.rt.now();
                let failed = match spawned {
                    Ok(mut transport) => {
                        restart.policy.handle_started(now);
                        match self.reinitialize(&mut transport).await {
                            Ok(()) => {
                                let (sender, next) = transport.split();
                                self.link.set(Some(sender));
                                lock(&self.state).restarts += 1;
                                receiver = next;
                                continue 'generations;
                            }
                            Err(_why) => {
                                // This generation failed: the policy decides
                                // whether another comes.
                                let now = self.rt.now();
                                restart.policy.handle_exit(now, true);
                                restart.policy.poll_timeout()
                            }
                        }
                    }
                    Err(_) => match restart.policy.handle_spawn_failed(now) {
                        RestartVerdict::Restart { at, .. } => Some(at),
                        _ => None,
                    },
                };
                match failed {
                    Some(next) => at = next,
                    None => break 'generations,
                }
            }
        }
        self.finish();
    }

    /// Waits while the share holds off reading the server (a client that
    /// reads is behind): backpressure, bounded by the share's read grace.
    async fn read_pause(&self) {
        let mut timer: Option<std::pin::Pin<Box<dyn childwire_async::Timer>>> = None;
        poll_fn(|cx| {
            let mut state = lock(&self.state);
            let Some(until) = state.share.poll_read_pause(self.rt.now()) else {
                state.pump_waker = None;
                return Poll::Ready(());
            };
            state.pump_waker = Some(cx.waker().clone());
            drop(state);
            let timer = timer.get_or_insert_with(|| self.rt.timer(until));
            timer.as_mut().reset(until);
            let _ = timer.as_mut().poll(cx);
            Poll::Pending
        })
        .await;
    }

    /// Runs a new generation through the first client's `initialize` (if
    /// a client initialized the share), swallowing the answer, then
    /// `notifications/initialized`. What else the server says meanwhile
    /// goes to the share. The share decides when it is over: answered,
    /// ended, or out of time; the timer only asks it again.
    async fn reinitialize(self: &Arc<Self>, transport: &mut Transport<R, F>) -> Result<(), String> {
        let initialize = lock(&self.state).share.handle_reinit_start(self.rt.now());
        let Some(initialize) = initialize else {
            return Ok(());
        };
        let mut timer: Option<std::pin::Pin<Box<dyn childwire_async::Timer>>> = None;
        let mut step = std::pin::pin!(self.reinitialize_now(transport, initialize));
        poll_fn(|cx| {
            loop {
                if let Poll::Ready(done) = step.as_mut().poll(cx) {
                    return Poll::Ready(done);
                }
                let now = self.rt.now();
                let until = match lock(&self.state).share.poll_reinit(now) {
                    Some(ReinitStep::Wait(Some(until))) => until,
                    Some(ReinitStep::Failed(why)) => return Poll::Ready(Err(why)),
                    // No end to wait for; or the step took the answer (it
                    // asks right after each item) and sends
                    // `notifications/initialized` next.
                    Some(ReinitStep::Wait(None) | ReinitStep::Answered(_)) | None => {
                        return Poll::Pending;
                    }
                };
                let timer = timer.get_or_insert_with(|| self.rt.timer(until));
                timer.as_mut().reset(until);
                if timer.as_mut().poll(cx).is_pending() {
                    return Poll::Pending;
                }
            }
        })
        .await
    }

    /// Sends `initialize`, hands what the server writes to the share until
    /// the share says the re-initialization is over, and, answered, sends
    /// `notifications/initialized`.
    async fn reinitialize_now(
        self: &Arc<Self>,
        transport: &mut Transport<R, F>,
        initialize: Bytes,
    ) -> Result<(), String> {
        transport
            .send(initialize)
            .await
            .map_err(|err| err.to_string())?;
        loop {
            match transport.recv().await {
                Some(Received::Exited(report)) => {
                    lock(&self.state)
                        .share
                        .handle_reinit_ended(&report.to_string());
                }
                Some(item) => {
                    let _ = self.server_item(item);
                }
                None => {
                    lock(&self.state)
                        .share
                        .handle_reinit_ended("its output ended");
                }
            }
            let now = self.rt.now();
            let step = lock(&self.state).share.poll_reinit(now);
            match step {
                Some(ReinitStep::Wait(_)) => {}
                Some(ReinitStep::Answered(initialized)) => {
                    return transport
                        .send(initialized)
                        .await
                        .map_err(|err| err.to_string());
                }
                Some(ReinitStep::Failed(why)) => return Err(why),
                None => return Err("the re-initialization was called off".into()),
            }
        }
    }

    /// One item from the server, not its end; whether the share holds off
    /// reading the next one (a client that reads is behind).
    fn server_item(self: &Arc<Self>, item: Received) -> bool {
        let mut state = lock(&self.state);
        let now = self.rt.now();
        match item {
            Received::Message(message) => state.share.handle_server(now, &message),
            Received::Oversized(notice) => {
                state
                    .share
                    .handle_server_oversized(now, &notice, self.max_message_size);
            }
            // Pollution and broken frames are the transport's notices;
            // nothing reaches a client.
            _ => {}
        }
        let behind = state.share.poll_read_pause(now).is_some();
        self.after_server_input(state);
        behind
    }

    /// The server ended with `report`; a new generation follows when
    /// `restarting`.
    fn server_ended(self: &Arc<Self>, report: ExitReport, restarting: bool) {
        let mut state = lock(&self.state);
        let now = self.rt.now();
        let cause = EndCause {
            exit: Some(report.exit),
            stderr: report.stderr_summary(),
            restarting,
        };
        state.share.handle_server_ended(now, &cause, restarting);
        state.report = Some(report);
        self.after_server_input(state);
    }

    fn after_server_input(self: &Arc<Self>, mut state: MutexGuard<'_, State>) {
        self.dispatch(&mut state);
        let pending = state.share.server_pending() > 0;
        drop(state);
        if pending {
            self.spawn_write_out();
        }
    }

    /// The server's output is over: the share ends, every client's last
    /// answers are queued, and whoever waits is woken.
    fn finish(self: &Arc<Self>) {
        let mut state = lock(&self.state);
        let now = self.rt.now();
        if !state.share.is_ended() {
            state
                .share
                .handle_server_ended(now, &EndCause::default(), false);
        }
        state.over = true;
        self.dispatch(&mut state);
        for (_, waker) in state.wakers.drain() {
            waker.wake();
        }
        for waker in state.end_wakers.drain(..) {
            waker.wake();
        }
    }

    fn start_shutdown(self: &Arc<Self>) {
        let mut state = lock(&self.state);
        if state.stopping {
            return;
        }
        state.stopping = true;
        drop(state);
        let inner = Arc::clone(self);
        self.rt.spawn(Box::pin(async move {
            inner.link.shutdown().await;
        }));
    }
}

/// A message taken from the share for the server whose send was dropped
/// before it completed: the request is answered with an error.
struct Unsent<'a, R: Runtime, F: Framing> {
    inner: &'a Arc<Inner<R, F>>,
    message: Option<Bytes>,
}

impl<R: Runtime, F: Framing> Drop for Unsent<'_, R, F> {
    fn drop(&mut self) {
        if let Some(message) = self.message.take() {
            let mut state = lock(&self.inner.state);
            let now = self.inner.rt.now();
            state
                .share
                .handle_unsent(now, &message, "its send was cancelled");
            self.inner.dispatch(&mut state);
        }
    }
}
