//! A child that is restarted when it ends unexpectedly: the MCP
//! specification (2026-07-28, stdio, "Unexpected termination") asks a client
//! to restart a server that dies.
//!
//! [`Supervised`] drives the core's [`Generations`]: when to restart, which
//! requests each generation owes and who answers them. Each generation is a
//! [`Transport`] of its own.

use std::fmt;
use std::future::poll_fn;
use std::sync::Arc;
use std::task::Poll;

use childwire_core::liveness::LivenessConfig;
use childwire_core::{
    Command, ExitReport, Framing, GenerationEvent, Generations, Lines, Received, SendError,
    SpawnError,
};

use crate::runtime::Runtime;
use crate::transport::{Config, Receiver, ShutdownError, Transport};

mod config;
mod event;
mod slot;
mod watch;

pub use config::{DEFAULT_SEED, Supervision};
pub use event::{ReinitError, ReinitFuture, SupervisedEvent};
use slot::Shared;
pub use slot::SupervisedSender;
use watch::Watch;

type Reinit<R, F> =
    Box<dyn for<'a> FnMut(&'a mut Transport<R, F>) -> ReinitFuture<'a> + Send + 'static>;

/// Where the receiving side is.
enum Phase<R: Runtime, F: Framing> {
    /// A generation was spawned; its initialization runs at the next `recv`.
    Starting(Transport<R, F>),
    /// A generation runs: its items come from here.
    Running(Receiver<R, F>),
    /// The child is down; the next spawn is due when the core says.
    Down,
    /// No generation will come.
    Over,
}

/// A child process that is restarted when it ends unexpectedly, following
/// a [`RestartPolicy`](childwire_core::RestartPolicy), with the caller's
/// initialization run on every generation (the first one included) before
/// traffic flows.
///
/// - [`recv`](Self::recv) runs each generation's initialization, then hands
///   out its messages and notices, its exit report, the error responses to
///   the requests it left unanswered (with [`Supervision::track_requests`]),
///   an event when it is started or restarted, and last the verdict if the
///   policy gives up.
/// - [`send`](Self::send) (or a [`SupervisedSender`] from
///   [`sender`](Self::sender)) goes to whichever generation runs, once it is
///   initialized; while none is, it waits or fails, as
///   [`Supervision::while_down`] says.
/// - [`shutdown`](Self::shutdown) and [`close`](Self::close) end the
///   supervision: that end is not restarted.
///
/// Initializations and restarts are made in `recv`, in the caller's task
/// like all of childwire's I/O: keep receiving (the first `recv` returns
/// [`SupervisedEvent::Started`] once the first generation is initialized; a
/// send before it waits for it). `recv` is cancel-safe, except that
/// dropping it during an initialization abandons that generation (the child
/// is killed) and the next `recv` spawns a fresh one. The initialization
/// bounds its own waits (a child that never answers holds `recv` as long as
/// the step waits).
///
/// With request tracking on, every request is answered exactly once: by the
/// child, or by the error response that says it died first, never both and
/// never neither, however sends, deaths and restarts interleave (a send
/// that failed on a dying child before its end was known is sent again to
/// the next generation).
///
/// Dropping it ends the supervision: the running child is killed, as for
/// a dropped [`Transport`], and [`SupervisedSender`]s fail.
///
/// ```no_run
/// # async fn demo<R: childwire_async::Runtime>() -> Result<(), Box<dyn std::error::Error>> {
/// use childwire_async::{Command, Config, Received, Supervised, SupervisedEvent, Supervision};
///
/// const INIT: &str = r#"{"jsonrpc":"2.0","id":0,"method":"initialize","params":{}}"#;
/// let mut server = Supervised::<R>::spawn(
///     &Command::new("my-mcp-server"),
///     Config::default(),
///     Supervision::default(),
///     // Run on every generation, the first one included, before traffic flows.
///     |t| Box::pin(async move {
///         // The answer to `initialize` (messages before it stay queued).
///         let answer = t.request(INIT).await?;
///         eprintln!("server: {}", String::from_utf8_lossy(&answer));
///         t.send(r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#).await?;
///         Ok(())
///     }),
/// )?;
/// while let Some(event) = server.recv().await {
///     match event {
///         SupervisedEvent::Started { .. } => {
///             server.send(r#"{"jsonrpc":"2.0","id":1,"method":"tools/list"}"#).await?;
///         }
///         SupervisedEvent::Received(Received::Message(m)) => println!("{}", String::from_utf8_lossy(&m)),
///         SupervisedEvent::Received(Received::Exited(report)) => eprintln!("server {report}"),
///         SupervisedEvent::Restarted { generation } => eprintln!("restarted (#{generation})"),
///         SupervisedEvent::GaveUp(verdict) => eprintln!("{verdict}"),
///         other => eprintln!("{other:?}"),
///     }
/// }
/// # Ok(()) }
/// ```
pub struct Supervised<R: Runtime, F: Framing = Lines> {
    shared: Arc<Shared<R, F>>,
    sender: SupervisedSender<R, F>,
    phase: Phase<R, F>,
    framing: F,
    command: Command,
    config: Config,
    reinit: Reinit<R, F>,
    /// A generation's report from its shutdown after a failed
    /// initialization: the step may have received the receiver's copy.
    reinit_end: Option<ExitReport>,
    /// How a running generation is watched for hanging, if it is.
    liveness: Option<LivenessConfig>,
    /// The running generation's watch.
    watch: Option<Watch<R, F>>,
    rt: R,
}

impl<R: Runtime> Supervised<R, Lines> {
    /// Spawns `command`, talking NDJSON, under `supervision`; `reinit` runs
    /// on every generation, the first one included, in `recv`, before
    /// traffic flows.
    pub fn spawn<I>(
        command: &Command,
        config: impl Into<Config>,
        supervision: Supervision,
        reinit: I,
    ) -> Result<Self, SpawnError>
    where
        I: for<'a> FnMut(&'a mut Transport<R, Lines>) -> ReinitFuture<'a> + Send + 'static,
    {
        Self::spawn_with(Lines, command, config, supervision, reinit)
    }
}

impl<R: Runtime, F: Framing> Supervised<R, F> {
    /// [`spawn`](Supervised::spawn) with another framing.
    pub fn spawn_with<I>(
        framing: F,
        command: &Command,
        config: impl Into<Config>,
        supervision: Supervision,
        reinit: I,
    ) -> Result<Self, SpawnError>
    where
        I: for<'a> FnMut(&'a mut Transport<R, F>) -> ReinitFuture<'a> + Send + 'static,
    {
        let config = config.into();
        let rt = R::current().map_err(|err| SpawnError::no_runtime(command, err.0))?;
        let first = Transport::spawn_with(framing.clone(), command, config.clone())?;
        let now = rt.now();
        let mut core = Generations::new(supervision.generations(config.channel.write_timeout), now);
        core.handle_spawned(now);
        let shared = Shared::new(core, framing.clone(), config.channel.max_send_size);
        Ok(Self {
            sender: SupervisedSender {
                shared: Arc::clone(&shared),
                rt: rt.clone(),
            },
            shared,
            phase: Phase::Starting(first),
            framing,
            command: command.clone(),
            config,
            reinit: Box::new(reinit),
            reinit_end: None,
            liveness: supervision.restart_when_hung.clone(),
            watch: None,
            rt,
        })
    }

    /// Sends one message to the running generation. See
    /// [`SupervisedSender::send`].
    pub async fn send<B: AsRef<[u8]>>(&self, payload: B) -> Result<(), SendError<B>> {
        self.sender.send(payload).await
    }

    /// A sender to the running generation, to send from other tasks.
    pub fn sender(&self) -> SupervisedSender<R, F> {
        self.sender.clone()
    }

    /// Ends the supervision and shuts the child down. See
    /// [`SupervisedSender::shutdown`].
    pub async fn shutdown(&self) -> Result<ExitReport, ShutdownError> {
        self.sender.shutdown().await
    }

    /// Ends the supervision and closes the child's stdin. See
    /// [`SupervisedSender::close`].
    pub async fn close(&self) -> Result<(), ShutdownError> {
        self.sender.close().await
    }

    /// The running generation's process ID; `None` while the child is
    /// down (or not yet initialized).
    pub fn id(&self) -> Option<u32> {
        self.shared.running_sender().and_then(|sender| sender.id())
    }

    /// The generations started so far (the running one included).
    pub fn generation(&self) -> u32 {
        self.shared.lock().core.generations()
    }

    /// The next event; `None` once the supervision is over (after a
    /// shutdown's report, or the [`SupervisedEvent::GaveUp`] verdict).
    pub async fn recv(&mut self) -> Option<SupervisedEvent> {
        loop {
            if let Some(event) = self.shared.poll_event() {
                return Some(event);
            }
            match &mut self.phase {
                Phase::Over => return None,
                Phase::Starting(_) => {
                    if let Some(event) = self.initialize().await {
                        return Some(event);
                    }
                }
                Phase::Running(rx) => {
                    match next_or_idle(rx, &self.shared, &self.rt, self.watch.as_mut()).await {
                        Next::Idle => self.stop_idle(),
                        Next::Item(Some(Received::Exited(report))) => {
                            self.reinit_end = None;
                            self.ended(*report);
                        }
                        Next::Item(Some(item)) => {
                            self.shared
                                .lock()
                                .core
                                .handle_received(&item, self.rt.now());
                            return Some(SupervisedEvent::Received(item));
                        }
                        // A child's stream ends with its report, unless a failed
                        // initialization received it; without one the driver is
                        // gone: nothing more will come.
                        Next::Item(None) => match self.reinit_end.take() {
                            Some(report) => self.ended(report),
                            None => self.finish(),
                        },
                    }
                }
                Phase::Down => {
                    if self.wait_for_restart().await {
                        self.respawn();
                    } else {
                        self.finish();
                    }
                }
            }
        }
    }

    /// A generation ended with `report`: the core answers its requests and
    /// decides what comes next.
    fn ended(&mut self, report: ExitReport) {
        let now = self.rt.now();
        self.watch = None;
        let mut state = self.shared.lock();
        state.sender = None;
        state.core.handle_ended(report, now);
        self.phase = if state.core.is_over() {
            Phase::Over
        } else {
            Phase::Down
        };
        state.wake_all();
    }

    /// The core found the running generation idle: it is shut down the
    /// graceful way (its end, read as usual, is not restarted until a send
    /// asks for it); new sends wait for the next one.
    fn stop_idle(&mut self) {
        self.watch = None;
        let sender = self.shared.lock().sender.take();
        if let Some(sender) = sender {
            sender.begin_shutdown();
        }
    }

    /// Nothing more will come: senders stop waiting.
    fn finish(&mut self) {
        self.phase = Phase::Over;
        let mut state = self.shared.lock();
        state.core.handle_stop();
        state.wake_all();
    }

    /// Waits until the core says the next generation is due: true, or false
    /// if the caller ended the supervision meanwhile. A timer that fires
    /// only sends the question back to the core.
    async fn wait_for_restart(&self) -> bool {
        let mut timer = None;
        poll_fn(|cx| {
            loop {
                let mut state = self.shared.lock();
                if state.core.is_stopped() || state.core.is_over() {
                    return Poll::Ready(false);
                }
                if state.core.restart_due(self.rt.now()) {
                    return Poll::Ready(true);
                }
                state.register(cx.waker());
                let at = state.core.poll_timeout();
                drop(state);
                let Some(at) = at else {
                    return Poll::Pending;
                };
                let timer = timer.get_or_insert_with(|| self.rt.timer(at));
                timer.as_mut().reset(at);
                if timer.as_mut().poll(cx).is_pending() {
                    return Poll::Pending;
                }
            }
        })
        .await
    }

    /// Spawns the next generation; its initialization runs next.
    fn respawn(&mut self) {
        let spawned =
            Transport::spawn_with(self.framing.clone(), &self.command, self.config.clone());
        let now = self.rt.now();
        let mut state = self.shared.lock();
        match spawned {
            Ok(transport) => {
                state.core.handle_spawned(now);
                self.phase = Phase::Starting(transport);
            }
            Err(err) => {
                state.core.handle_spawn_failed(now);
                state.push_event(SupervisedEvent::SpawnFailed(err));
                if state.core.is_over() {
                    self.phase = Phase::Over;
                    state.wake_all();
                }
            }
        }
    }

    /// Runs the caller's initialization on the generation just spawned, and
    /// publishes it: `Started` or `Restarted`, or `ReinitFailed` (it is then
    /// shut down, and its end read as a crash).
    async fn initialize(&mut self) -> Option<SupervisedEvent> {
        let Phase::Starting(mut transport) = std::mem::replace(&mut self.phase, Phase::Down) else {
            return None;
        };
        let generation = self.shared.lock().core.generations();
        let reinit = (self.reinit)(&mut transport).await;
        let (tx, rx) = transport.split();
        let tx = Arc::new(tx);
        self.phase = Phase::Running(rx);
        if let Err(error) = reinit {
            self.shared.lock().core.handle_init_failed();
            // Its end comes through the receiver (or from here, if the
            // step took the receiver's copy), counted as unexpected.
            self.reinit_end = tx.shutdown().await.ok();
            return Some(SupervisedEvent::ReinitFailed { generation, error });
        }
        let stopped = {
            let mut state = self.shared.lock();
            if !state.core.is_stopped() {
                let now = self.rt.now();
                state.core.handle_initialized(now);
                state.sender = Some(Arc::clone(&tx));
                self.watch = self
                    .liveness
                    .clone()
                    .map(|config| Watch::new(config, Arc::clone(&tx), now));
                state.wake_all();
            }
            state.core.is_stopped()
        };
        if stopped {
            // Shut down meanwhile: this generation ends too, through the
            // receiver, and is not restarted.
            let _ = tx.shutdown().await;
            return None;
        }
        Some(if generation <= 1 {
            SupervisedEvent::Started { generation }
        } else {
            SupervisedEvent::Restarted { generation }
        })
    }
}

impl<R: Runtime, F: Framing> Drop for Supervised<R, F> {
    /// Without its receiving side nothing restarts the child or reads it:
    /// senders stop waiting and sending, and the running child, once no
    /// send holds it, is killed like a dropped [`Transport`].
    fn drop(&mut self) {
        let mut state = self.shared.lock();
        state.core.handle_stop();
        state.sender = None;
        state.wake_all();
    }
}

impl<R: Runtime, F: Framing> fmt::Debug for Supervised<R, F> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Supervised")
            .field("generation", &self.generation())
            .finish_non_exhaustive()
    }
}

/// What the running generation's receive loop met first.
enum Next {
    /// An item (or the stream's end).
    Item(Option<Received>),
    /// The core decided to stop the generation, idle.
    Idle,
}

/// The running generation's next item, or the core's idle stop if its
/// deadline comes first (checked again whenever the timer fires: traffic
/// meanwhile moves it). With a `watch`, the pings it writes are answered
/// here, out of sight, and a child it finds hung is killed (its end comes
/// as an item, marked in the core).
async fn next_or_idle<R: Runtime, F: Framing>(
    rx: &mut Receiver<R, F>,
    shared: &Shared<R, F>,
    rt: &R,
    mut watch: Option<&mut Watch<R, F>>,
) -> Next {
    let mut timer: Option<std::pin::Pin<Box<dyn crate::runtime::Timer>>> = None;
    poll_fn(|cx| {
        while let Poll::Ready(item) = rx.poll_recv(cx) {
            let taken = match (&mut watch, &item) {
                (Some(watch), Some(item)) => watch.handle_item(item, rt.now()),
                _ => false,
            };
            if !taken {
                return Poll::Ready(Next::Item(item));
            }
        }
        loop {
            let now = rt.now();
            let watched = match &mut watch {
                Some(watch) => {
                    if watch.poll(cx, now) {
                        shared.lock().core.handle_hung();
                    }
                    watch.poll_timeout()
                }
                None => None,
            };
            let at = {
                let mut state = shared.lock();
                state.core.handle_timeout(now);
                if state.core.poll_idle_stop().is_some() {
                    return Poll::Ready(Next::Idle);
                }
                state.core.poll_timeout()
            };
            let Some(at) = at.into_iter().chain(watched).min() else {
                return Poll::Pending;
            };
            let timer = timer.get_or_insert_with(|| rt.timer(at));
            timer.as_mut().reset(at);
            if timer.as_mut().poll(cx).is_pending() {
                return Poll::Pending;
            }
        }
    })
    .await
}

/// The core's event, as `recv` hands it out.
fn event_of(event: GenerationEvent) -> SupervisedEvent {
    match event {
        GenerationEvent::Exited(report) => SupervisedEvent::Received(Received::Exited(report)),
        GenerationEvent::Unanswered(request) => SupervisedEvent::Unanswered(request),
        GenerationEvent::Untracked(id) => SupervisedEvent::Untracked(id),
        GenerationEvent::GaveUp(verdict) => SupervisedEvent::GaveUp(verdict),
    }
}
