//! A child that is restarted when it ends unexpectedly (DESIGN C36, C37):
//! the MCP specification (2026-07-28, stdio, "Unexpected termination")
//! asks a client to restart a server that dies.
//!
//! [`Supervised`] drives the core's machines: the
//! [`RestartPolicy`] decides whether and when to restart, and the
//! [`PendingRequests`](childwire_core::PendingRequests) tracker (opt-in)
//! answers the requests a dead child will never answer. It uses only the
//! public [`Transport`] API: each generation is a transport of its own.

use std::collections::VecDeque;
use std::fmt;
use std::future::poll_fn;
use std::sync::Arc;
use std::task::Poll;
use std::time::Instant;

use childwire_core::pending::EndCause;
use childwire_core::restart::MAX_HISTORY;
use childwire_core::{
    Command, ExitReport, Framing, Generation, GiveUpReason, Lines, Received, RestartPolicy,
    RestartVerdict, SendError, SpawnError,
};

use crate::runtime::Runtime;
use crate::transport::{Config, Receiver, ShutdownError, Transport};

mod config;
mod event;
mod slot;

pub use config::{DEFAULT_SEED, Supervision, WhileDown};
pub use event::{GaveUp, ReinitError, ReinitFuture, SupervisedEvent};
use slot::Shared;
pub use slot::SupervisedSender;

type Reinit<R, F> =
    Box<dyn for<'a> FnMut(&'a mut Transport<R, F>) -> ReinitFuture<'a> + Send + 'static>;

/// Where the supervision is.
enum Phase<R: Runtime, F: Framing> {
    /// A generation runs: its items come from here.
    Running(Receiver<R, F>),
    /// The child is down; the next spawn is due at this instant.
    Waiting(Instant),
    /// No generation will come.
    Over,
}

/// A child process that is restarted when it ends unexpectedly, following
/// a [`RestartPolicy`], with a re-initialization step run on each new
/// generation before traffic resumes.
///
/// - [`recv`](Self::recv) hands out the running generation's messages and
///   notices, each generation's exit report, an event per restart, the
///   error responses to requests left unanswered (with
///   [`Supervision::track_requests`]), and last the verdict if the policy
///   gives up.
/// - [`send`](Self::send) (or a [`SupervisedSender`] from
///   [`sender`](Self::sender)) goes to whichever generation runs.
/// - [`shutdown`](Self::shutdown) and [`close`](Self::close) end the
///   supervision: that end is not restarted.
///
/// Restarts are made in `recv`, in the caller's task like all of
/// childwire's I/O: keep receiving (a sender waiting for the next
/// generation waits for `recv` to make it). `recv` is cancel-safe, except
/// that dropping it during a re-initialization abandons that generation
/// (the child is killed) and the next `recv` spawns a fresh one. The
/// re-initialization step bounds its own waits (a child that never
/// answers it holds `recv` as long as the step waits).
///
/// Dropping it ends the supervision: the running child is killed, as for
/// a dropped [`Transport`], and [`SupervisedSender`]s fail.
///
/// ```no_run
/// # async fn demo<R: childwire_async::Runtime>() -> Result<(), Box<dyn std::error::Error>> {
/// use childwire_async::{
///     Command, Config, Message, Received, StartupConfig, Supervised, SupervisedEvent, Supervision,
/// };
///
/// const INIT: &str = r#"{"jsonrpc":"2.0","id":0,"method":"initialize","params":{}}"#;
/// /// The answer to `INIT`: a response (no `method`) with id 0.
/// fn answers_init(message: &Message) -> bool {
///     let mut scanner = childwire_core::IdScanner::new();
///     scanner.feed(message.bytes());
///     !scanner.has_method() && scanner.id().as_deref() == Some(&b"0"[..])
/// }
/// let mut server = Supervised::<R>::spawn(
///     &Command::new("my-mcp-server"),
///     Config::default(),
///     Supervision::default(),
///     // Run on every new generation before traffic resumes.
///     |t| Box::pin(async move {
///         t.send(INIT).await?;
///         // Exited before it answered, or silent for 60 s: this generation failed.
///         let verdict = t.started_with(StartupConfig::default(), answers_init).await;
///         if !verdict.is_ready() {
///             return Err(verdict.to_string().into());
///         }
///         // Up to the answer (a log notification may come first).
///         while let Some(Received::Message(m)) = t.recv().await {
///             if answers_init(&m) {
///                 break;
///             }
///         }
///         t.send(r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#).await?;
///         Ok(())
///     }),
/// )?;
/// while let Some(event) = server.recv().await {
///     match event {
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
    policy: RestartPolicy,
    reinit: Reinit<R, F>,
    /// Events decided and not yet handed out.
    queue: VecDeque<SupervisedEvent>,
    /// The newest generations' reports, as many as the policy's history.
    reports: VecDeque<ExitReport>,
    /// The running generation's re-initialization failed: its end is
    /// unexpected whatever its report says.
    reinit_failed: bool,
    /// That generation's report from its shutdown: the step may have
    /// received the receiver's copy already.
    reinit_end: Option<ExitReport>,
    rt: R,
}

impl<R: Runtime> Supervised<R, Lines> {
    /// Spawns `command`, talking NDJSON, under `supervision`; `reinit` runs
    /// on each restarted generation before traffic resumes (not on the
    /// first: the caller starts that session itself).
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
        let (tx, rx) = Transport::spawn_with(framing.clone(), command, config.clone())?.split();
        let mut policy = RestartPolicy::new(supervision.restart, supervision.seed);
        policy.handle_started(rt.now());
        let shared = Shared::new(
            Arc::new(tx),
            supervision.while_down,
            config.channel.write_timeout,
            supervision.track_requests,
        );
        Ok(Self {
            sender: SupervisedSender {
                shared: Arc::clone(&shared),
                rt: rt.clone(),
            },
            shared,
            phase: Phase::Running(rx),
            framing,
            command: command.clone(),
            config,
            policy,
            reinit: Box::new(reinit),
            queue: VecDeque::new(),
            reports: VecDeque::new(),
            reinit_failed: false,
            reinit_end: None,
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
    /// down.
    pub fn id(&self) -> Option<u32> {
        self.shared
            .lock()
            .sender
            .as_ref()
            .and_then(|sender| sender.id())
    }

    /// The generations started so far (the running one included).
    pub fn generation(&self) -> u32 {
        self.policy.generations()
    }

    /// The next event; `None` once the supervision is over (after a
    /// shutdown's report, or the [`SupervisedEvent::GaveUp`] verdict).
    pub async fn recv(&mut self) -> Option<SupervisedEvent> {
        loop {
            if let Some(event) = self.queue.pop_front() {
                return Some(event);
            }
            match &mut self.phase {
                Phase::Over => return None,
                Phase::Running(rx) => match rx.recv().await {
                    Some(Received::Exited(report)) => {
                        self.reinit_end = None;
                        self.ended(*report);
                    }
                    Some(item) => {
                        self.note_received(&item);
                        return Some(SupervisedEvent::Received(item));
                    }
                    // A child's stream ends with its report, unless a
                    // failed re-initialization step received it; without
                    // one the driver is gone: nothing more will come.
                    None => match self.reinit_end.take() {
                        Some(report) => self.ended(report),
                        None => self.finish(),
                    },
                },
                Phase::Waiting(at) => {
                    let at = *at;
                    if self.wait_until(at).await {
                        self.respawn().await;
                    } else {
                        self.policy.handle_stop();
                        self.finish();
                    }
                }
            }
        }
    }

    /// A response clears its request.
    fn note_received(&self, item: &Received) {
        let mut slot = self.shared.lock();
        let Some(pending) = slot.pending.as_mut() else {
            return;
        };
        match item {
            Received::Message(message) => {
                pending.handle_incoming(message);
            }
            Received::Oversized(notice) => {
                if let Some(id) = notice.json_rpc_id() {
                    pending.handle_answered(id);
                }
            }
            _ => {}
        }
    }

    /// A generation ended with `report`: queue the report, the error
    /// responses to its unanswered requests, and what the policy decides.
    fn ended(&mut self, mut report: ExitReport) {
        let now = self.rt.now();
        let shared = Arc::clone(&self.shared);
        let mut slot = shared.lock();
        slot.sender = None;
        if slot.stopped {
            self.policy.handle_stop();
        }
        let unexpected = self.reinit_failed || report.unexpected();
        self.reinit_failed = false;
        let verdict = self.policy.handle_exit(now, unexpected);
        let unanswered = slot.pending.as_mut().map(|pending| {
            pending.fail_all(&EndCause {
                exit: Some(report.exit),
                stderr: report.stderr_summary(),
                restarting: matches!(verdict, RestartVerdict::Restart { .. }),
            })
        });
        if let Some(unanswered) = &unanswered {
            report.unanswered_ids = unanswered.ids().cloned().collect();
        }
        slot.last_report = Some(report.clone());
        self.keep_report(report.clone());
        self.queue
            .push_back(SupervisedEvent::Received(Received::Exited(Box::new(
                report,
            ))));
        for request in unanswered.into_iter().flat_map(|u| u.requests) {
            self.queue.push_back(SupervisedEvent::Unanswered(request));
        }
        match verdict {
            RestartVerdict::Restart { at, .. } => self.phase = Phase::Waiting(at),
            verdict => {
                if let RestartVerdict::GiveUp { reason, history } = verdict {
                    self.queue.push_back(self.gave_up(reason, history));
                }
                slot.over = true;
                self.phase = Phase::Over;
            }
        }
        slot.wake_all();
    }

    fn gave_up(&self, reason: GiveUpReason, history: Vec<Generation>) -> SupervisedEvent {
        let skip = self.reports.len().saturating_sub(history.len());
        let reports = self.reports.iter().skip(skip).cloned().collect();
        SupervisedEvent::GaveUp(Box::new(GaveUp {
            reason,
            history,
            reports,
        }))
    }

    fn keep_report(&mut self, report: ExitReport) {
        let config = self.policy.config();
        let keep = usize::try_from(config.budget.max(config.max_in_window))
            .unwrap_or(usize::MAX)
            .saturating_add(1)
            .min(MAX_HISTORY);
        while self.reports.len() >= keep {
            self.reports.pop_front();
        }
        self.reports.push_back(report);
    }

    /// Nothing more will come: senders stop waiting.
    fn finish(&mut self) {
        self.phase = Phase::Over;
        let mut slot = self.shared.lock();
        slot.over = true;
        slot.wake_all();
    }

    /// Waits for the restart instant: true, or false if the caller ended
    /// the supervision meanwhile.
    async fn wait_until(&self, at: Instant) -> bool {
        let mut timer = self.rt.timer(at);
        poll_fn(|cx| {
            let mut slot = self.shared.lock();
            if slot.stopped {
                return Poll::Ready(false);
            }
            slot.register(cx.waker());
            drop(slot);
            timer.as_mut().poll(cx).map(|()| true)
        })
        .await
    }

    /// Spawns the next generation, re-initializes it and publishes it.
    async fn respawn(&mut self) {
        let spawned =
            Transport::spawn_with(self.framing.clone(), &self.command, self.config.clone());
        let now = self.rt.now();
        let mut transport = match spawned {
            Ok(transport) => transport,
            Err(err) => {
                self.queue.push_back(SupervisedEvent::SpawnFailed(err));
                match self.policy.handle_spawn_failed(now) {
                    RestartVerdict::Restart { at, .. } => self.phase = Phase::Waiting(at),
                    RestartVerdict::GiveUp { reason, history } => {
                        self.queue.push_back(self.gave_up(reason, history));
                        self.finish();
                    }
                    RestartVerdict::Stop => self.finish(),
                }
                return;
            }
        };
        self.policy.handle_started(now);
        let generation = self.policy.generations();
        let reinit = (self.reinit)(&mut transport).await;
        let (tx, rx) = transport.split();
        let tx = Arc::new(tx);
        self.phase = Phase::Running(rx);
        if let Err(error) = reinit {
            self.reinit_failed = true;
            self.queue
                .push_back(SupervisedEvent::ReinitFailed { generation, error });
            // Its end comes through the receiver (or from here, if the
            // step took the receiver's copy), counted as unexpected.
            self.reinit_end = tx.shutdown().await.ok();
            return;
        }
        let stopped = {
            let mut slot = self.shared.lock();
            if !slot.stopped {
                slot.sender = Some(Arc::clone(&tx));
                slot.generation = slot.generation.wrapping_add(1);
                slot.wake_all();
            }
            slot.stopped
        };
        if stopped {
            // Shut down meanwhile: this generation ends too, through the
            // receiver, and is not restarted.
            let _ = tx.shutdown().await;
        } else {
            self.queue
                .push_back(SupervisedEvent::Restarted { generation });
        }
    }
}

impl<R: Runtime, F: Framing> Drop for Supervised<R, F> {
    /// Without its receiving side nothing restarts the child or reads it:
    /// senders stop waiting and sending, and the running child, once no
    /// send holds it, is killed like a dropped [`Transport`].
    fn drop(&mut self) {
        let mut slot = self.shared.lock();
        slot.stopped = true;
        slot.over = true;
        slot.sender = None;
        slot.wake_all();
    }
}

impl<R: Runtime, F: Framing> fmt::Debug for Supervised<R, F> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Supervised")
            .field("generation", &self.policy.generations())
            .finish_non_exhaustive()
    }
}
