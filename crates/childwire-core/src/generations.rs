//! A supervised child's generations as one sans-IO machine: when the next
//! one starts, which requests each one owes, and who answers them, so that
//! every request is answered exactly once, by the child or by the tracker's
//! error, whatever the order of sends, deaths and restarts.

use std::collections::VecDeque;
use std::time::{Duration, Instant};

use bytes::Bytes;

use crate::outbound::Closed;
use crate::pending::{
    DEFAULT_MAX_TRACKED, EndCause, Outgoing, PendingRequests, SendOutcome, Ticket,
    UnansweredRequest,
};
use crate::report::ExitReport;
use crate::restart::{
    Generation, GiveUpReason, MAX_HISTORY, RestartConfig, RestartPolicy, RestartVerdict,
};
use crate::session::Received;

/// What a send does while the child is down (between a death and the end
/// of the next generation's initialization).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[non_exhaustive]
pub enum WhileDown {
    /// Wait for the next generation, up to the wait limit.
    #[default]
    Wait,
    /// Fail at once, with the last generation's exit report.
    Fail,
}

/// The settings of [`Generations`].
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub struct GenerationsConfig {
    /// When to restart and when to give up.
    pub restart: RestartConfig,
    /// The seed of the restart delays' jitter.
    pub seed: u64,
    /// Track the JSON-RPC requests sent, and answer those a dead generation
    /// leaves unanswered with an error.
    pub track_requests: bool,
    /// The most requests tracked at a time; a request beyond is named by a
    /// [`GenerationEvent::Untracked`] and counted in the report.
    pub max_tracked: usize,
    /// What a send does while the child is down.
    pub while_down: WhileDown,
    /// How long a send waits for the next generation (`None`: as long as
    /// it takes).
    pub wait_limit: Option<Duration>,
    /// Stop the running generation once nothing went either way for this
    /// long and no request waits for its answer; the next send starts a new
    /// one (its initialization first). `None` (the default): never. A
    /// request being answered keeps the child running, so it needs
    /// `track_requests` (the owner turns it on with this).
    pub idle_stop: Option<Duration>,
}

impl Default for GenerationsConfig {
    fn default() -> Self {
        Self {
            restart: RestartConfig::default(),
            seed: 0,
            track_requests: false,
            max_tracked: DEFAULT_MAX_TRACKED,
            while_down: WhileDown::Wait,
            wait_limit: None,
            idle_stop: None,
        }
    }
}

/// What a send does, from [`Generations::handle_send`].
#[derive(Debug)]
#[must_use = "a send must follow what it was told"]
pub enum SendStep {
    /// Send it to generation `generation`, then hand the outcome in with
    /// [`Generations::handle_sent`] and this ticket.
    Send {
        /// The running generation.
        generation: u32,
        /// The request's place in the tracker (none when not tracked).
        ticket: Option<Ticket>,
    },
    /// The child is down: wait for the next generation, then ask again.
    /// Ask again at `until` too, if set: the send's wait ends there, and
    /// the answer is then [`SendStep::Refuse`] with the last report.
    Wait {
        /// The generation it waits to be followed.
        after: u32,
        /// The end of this send's wait, counted from when it began.
        until: Option<Instant>,
    },
    /// Fail: sending is over (`Closed::Closing` after the caller ended the
    /// supervision, `Closed::Exited` when no generation will come or while
    /// down with [`WhileDown::Fail`]), with the last report if there is one.
    Refuse(Closed, Option<Box<ExitReport>>),
}

/// What a send that ended comes to, from [`Generations::handle_sent`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[must_use = "a send must follow what it was told"]
pub enum AfterSend {
    /// Done: it went through, or its request was already answered by the
    /// tracker's error (the generation it went to died meanwhile). Return
    /// `Ok`.
    Done,
    /// It did not go through and nothing answered it: send it again to the
    /// next generation (ask [`Generations::handle_send`] again).
    Retry,
    /// It did not go through: return the error.
    Fail,
}

/// What happened to the generations, for the caller's receive loop, from
/// [`Generations::poll_event`], in order.
#[derive(Debug)]
pub enum GenerationEvent {
    /// A generation ended: its report, listing the requests it never
    /// answered.
    Exited(Box<ExitReport>),
    /// An error response to a request the dead generation never answered.
    Unanswered(UnansweredRequest),
    /// A request was sent untracked (the tracker was full): if the child
    /// dies, nothing answers it. Its id as raw JSON text.
    Untracked(Bytes),
    /// No generation will come: the policy gave up.
    GaveUp(Box<GaveUp>),
}

/// The verdict of a supervision that gave up restarting, with what led to
/// it.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub struct GaveUp {
    /// Why it gave up.
    pub reason: GiveUpReason,
    /// The last generations, oldest first.
    pub history: Vec<Generation>,
    /// Their exit reports, oldest first (as many as are kept).
    pub reports: Vec<ExitReport>,
}

impl std::fmt::Display for GaveUp {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "gave up restarting the child: {}", self.reason)?;
        if let Some(last) = self.reports.last() {
            write!(f, "; last {last}")?;
        }
        Ok(())
    }
}

/// Where the supervision is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Phase {
    /// A generation was spawned; its initialization runs. Sends wait.
    Starting(u32),
    /// A generation runs: sends go to it.
    Running(u32),
    /// The child is down; the next spawn is due at this instant.
    Down(Instant),
    /// The running generation is being stopped, idle. Sends wait.
    Stopping(u32),
    /// Stopped when idle: the next send starts a generation.
    Idle,
    /// No generation will come.
    Over,
}

/// A supervised child's generations: restart, request tracking and
/// re-sending after a restart, as one machine.
///
/// # How to drive it
///
/// - The owner spawns a generation, then calls
///   [`handle_spawned`](Self::handle_spawned) (or
///   [`handle_spawn_failed`](Self::handle_spawn_failed)); runs the caller's
///   initialization, then [`handle_initialized`](Self::handle_initialized)
///   (a failure: [`handle_init_failed`](Self::handle_init_failed), and
///   the generation is ended).
/// - A send asks [`handle_send`](Self::handle_send) first, sends as told,
///   and hands the outcome to [`handle_sent`](Self::handle_sent). Told to
///   wait, it asks again when a generation starts, the supervision ends, or
///   its `until` comes: the answer to the last is the refusal.
/// - The receive loop hands every item to
///   [`handle_received`](Self::handle_received), and a generation's exit
///   report to [`handle_ended`](Self::handle_ended).
/// - [`handle_stop`](Self::handle_stop) when the caller ends the
///   supervision (shutdown, close, drop).
/// - Outputs: [`poll_event`](Self::poll_event) until `None`;
///   [`poll_timeout`](Self::poll_timeout): when the next spawn is due
///   ([`restart_due`](Self::restart_due)).
///
/// # Exactly once
///
/// A tracked request is recorded, tagged with the generation it goes to,
/// before its send. When that generation ends, every request it owes is
/// answered by an error response ([`GenerationEvent::Unanswered`]), sent or
/// still being sent. A send that then fails learns that its request was
/// answered ([`AfterSend::Done`]) and is not sent again; a send that failed
/// before (the generation was not known to be over yet) is forgotten by the
/// tracker and sent again to the next generation ([`AfterSend::Retry`]). So no
/// request gets both an error and an answer, and none gets neither.
///
/// ```
/// use std::time::{Duration, Instant};
/// use childwire_core::{
///     Closed, EndedBy, Exit, ExitReport, GenerationEvent, Generations, GenerationsConfig,
///     SendStep, AfterSend,
/// };
///
/// let now = Instant::now();
/// let mut config = GenerationsConfig::default();
/// config.track_requests = true;
/// let mut gens = Generations::new(config, now);
/// gens.handle_spawned(now);
/// gens.handle_initialized(now);
///
/// // A request goes to generation 1 ...
/// let SendStep::Send { generation: 1, ticket } = gens.handle_send(br#"{"jsonrpc":"2.0","id":7,"method":"slow"}"#, now, None) else { panic!() };
/// // ... which is killed while the send is under way.
/// gens.handle_ended(ExitReport::new(Exit::Signal(9), EndedBy::OnItsOwn, Duration::ZERO), now);
/// assert!(matches!(gens.poll_event(), Some(GenerationEvent::Exited(_))));
/// assert!(matches!(gens.poll_event(), Some(GenerationEvent::Unanswered(_))));
/// // The send then fails: its request was answered by that error, it is not sent again.
/// assert_eq!(gens.handle_sent(ticket, Err(Closed::Exited)), AfterSend::Done);
/// ```
#[derive(Debug)]
pub struct Generations {
    policy: RestartPolicy,
    pending: Option<PendingRequests>,
    while_down: WhileDown,
    wait_limit: Option<Duration>,
    phase: Phase,
    /// The caller ended the supervision: no restart.
    stopped: bool,
    /// The running generation's initialization failed: its end is
    /// unexpected whatever its report says.
    init_failed: bool,
    /// Requests sent untracked since the last report.
    untracked: u64,
    /// The running generation was found hung and is being killed: its end
    /// is unexpected, and its report says why.
    hung: bool,
    idle_stop: Option<Duration>,
    /// The last traffic either way (or the end of an initialization): the
    /// idle time counts from here.
    last_active: Instant,
    /// An idle stop was decided and not yet handed out
    /// ([`poll_idle_stop`](Self::poll_idle_stop)).
    stop_idle: Option<u32>,
    /// A send waits while the idle generation is being stopped: the next
    /// one starts as soon as it ended.
    wanted: bool,
    /// The spawn awaited was asked by a send after an idle stop, not by a
    /// crash: sends wait for it whatever `while_down` says.
    waking: bool,
    events: VecDeque<GenerationEvent>,
    /// The newest generations' reports, as many as the policy's history.
    reports: VecDeque<ExitReport>,
}

impl Generations {
    /// The supervision of a child whose first generation is about to be
    /// spawned.
    #[must_use]
    pub fn new(config: GenerationsConfig, now: Instant) -> Self {
        Self {
            policy: RestartPolicy::new(config.restart, config.seed),
            pending: (config.track_requests || config.idle_stop.is_some())
                .then(|| PendingRequests::new(config.max_tracked)),
            while_down: config.while_down,
            wait_limit: config.wait_limit,
            phase: Phase::Down(now),
            stopped: false,
            init_failed: false,
            untracked: 0,
            hung: false,
            idle_stop: config.idle_stop,
            last_active: now,
            stop_idle: None,
            wanted: false,
            waking: false,
            events: VecDeque::new(),
            reports: VecDeque::new(),
        }
    }

    // ---- the generations ----

    /// A generation was spawned at `now`: its initialization runs; sends
    /// wait for it.
    pub fn handle_spawned(&mut self, now: Instant) {
        if self.phase == Phase::Over {
            return;
        }
        self.policy.handle_started(now);
        self.init_failed = false;
        self.hung = false;
        self.phase = Phase::Starting(self.policy.generations());
    }

    /// Spawning the next generation failed.
    pub fn handle_spawn_failed(&mut self, now: Instant) {
        if self.phase == Phase::Over {
            return;
        }
        let verdict = self.policy.handle_spawn_failed(now);
        self.after(verdict);
    }

    /// The running generation's initialization went through: sends go to it.
    pub fn handle_initialized(&mut self, now: Instant) {
        if let Phase::Starting(generation) = self.phase {
            self.phase = Phase::Running(generation);
            self.last_active = now;
            self.waking = false;
        }
    }

    /// The running generation's initialization failed: the owner ends it;
    /// its end counts as unexpected.
    pub fn handle_init_failed(&mut self) {
        self.init_failed = true;
    }

    /// The running generation was found hung (a
    /// [`Liveness`](crate::liveness::Liveness) verdict) and its owner kills
    /// it: its end counts as unexpected (restarted as the policy says), and
    /// its report says it was killed for hanging.
    pub fn handle_hung(&mut self) {
        if matches!(self.phase, Phase::Starting(_) | Phase::Running(_)) {
            self.hung = true;
        }
    }

    /// The running generation ended with `report` (its receive stream's
    /// last item). Its unanswered requests get their error responses; the
    /// policy decides what comes next. Events: [`GenerationEvent::Exited`],
    /// then an [`Unanswered`](GenerationEvent::Unanswered) per request, then
    /// [`GaveUp`](GenerationEvent::GaveUp) if it gave up.
    pub fn handle_ended(&mut self, mut report: ExitReport, now: Instant) {
        let generation = match self.phase {
            Phase::Starting(generation) | Phase::Running(generation) => generation,
            Phase::Stopping(generation) => return self.ended_idle(generation, report, now),
            Phase::Down(_) | Phase::Idle | Phase::Over => return,
        };
        // A generation woken from idle that dies is a crash like any other.
        self.waking = false;
        report.killed_when_hung = self.hung;
        let unexpected = self.init_failed || report.unexpected();
        let verdict = if self.stopped {
            self.policy.handle_stop();
            RestartVerdict::Stop
        } else {
            self.policy.handle_exit(now, unexpected)
        };
        let restarting = matches!(verdict, RestartVerdict::Restart { .. });
        let unanswered = self.pending.as_mut().map(|pending| {
            pending.fail_tag(
                generation,
                &EndCause {
                    exit: Some(report.exit),
                    stderr: report.stderr_summary(),
                    restarting,
                },
            )
        });
        if let Some(unanswered) = &unanswered {
            report.unanswered_ids = unanswered.ids().cloned().collect();
        }
        report.untracked_requests = std::mem::take(&mut self.untracked);
        self.keep(report.clone());
        self.events
            .push_back(GenerationEvent::Exited(Box::new(report)));
        for request in unanswered.into_iter().flat_map(|u| u.requests) {
            self.events.push_back(GenerationEvent::Unanswered(request));
        }
        self.after(verdict);
    }

    /// The generation stopped when idle ended: no verdict (the policy only
    /// judges ends it did not choose); idle, or started again at once if a
    /// send waits.
    fn ended_idle(&mut self, generation: u32, mut report: ExitReport, now: Instant) {
        report.stopped_when_idle = true;
        report.untracked_requests = std::mem::take(&mut self.untracked);
        // Nothing waited for an answer when it was stopped; anything sent
        // since went to the next generation.
        let unanswered = self.pending.as_mut().map(|pending| {
            pending.fail_tag(
                generation,
                &EndCause {
                    exit: Some(report.exit),
                    stderr: None,
                    restarting: !self.stopped,
                },
            )
        });
        if let Some(unanswered) = &unanswered {
            report.unanswered_ids = unanswered.ids().cloned().collect();
        }
        self.keep(report.clone());
        self.events
            .push_back(GenerationEvent::Exited(Box::new(report)));
        for request in unanswered.into_iter().flat_map(|u| u.requests) {
            self.events.push_back(GenerationEvent::Unanswered(request));
        }
        self.phase = if self.stopped {
            self.policy.handle_stop();
            Phase::Over
        } else if std::mem::take(&mut self.wanted) {
            self.waking = true;
            Phase::Down(now)
        } else {
            Phase::Idle
        };
    }

    fn after(&mut self, verdict: RestartVerdict) {
        match verdict {
            RestartVerdict::Restart { at, .. } if !self.stopped => self.phase = Phase::Down(at),
            RestartVerdict::GiveUp { reason, history } => {
                let skip = self.reports.len().saturating_sub(history.len());
                let reports = self.reports.iter().skip(skip).cloned().collect();
                self.events
                    .push_back(GenerationEvent::GaveUp(Box::new(GaveUp {
                        reason,
                        history,
                        reports,
                    })));
                self.phase = Phase::Over;
            }
            _ => self.phase = Phase::Over,
        }
    }

    fn keep(&mut self, report: ExitReport) {
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

    /// The caller ended the supervision (shutdown, close, drop): the running
    /// generation's end is not restarted, a wait for the next one ends, and
    /// sends fail from now on.
    pub fn handle_stop(&mut self) {
        self.stopped = true;
        if let Phase::Down(_) | Phase::Idle = self.phase {
            self.policy.handle_stop();
            self.phase = Phase::Over;
        }
    }

    // ---- sending ----

    /// A send of `body` asks where to go. `waiting_since` is `None` on its
    /// first question and, once told to [`SendStep::Wait`], the moment it
    /// was first told so: its wait is counted from there, however often it
    /// asks, and ends at that moment plus `wait_limit`.
    pub fn handle_send(
        &mut self,
        body: &[u8],
        now: Instant,
        waiting_since: Option<Instant>,
    ) -> SendStep {
        let last = || self.reports.back().cloned().map(Box::new);
        if self.stopped {
            return SendStep::Refuse(Closed::Closing, last());
        }
        let until = self
            .wait_limit
            .and_then(|limit| waiting_since.unwrap_or(now).checked_add(limit));
        let waits = !matches!(self.phase, Phase::Running(_) | Phase::Over);
        if waits && until.is_some_and(|until| now >= until) {
            // This send has waited as long as it may.
            return SendStep::Refuse(Closed::Exited, last());
        }
        match self.phase {
            Phase::Running(generation) => {
                let ticket = match self.pending.as_mut().map(|p| p.begin(body, generation)) {
                    Some((Outgoing::Full, _)) => {
                        self.untracked = self.untracked.saturating_add(1);
                        if let Some(id) = untracked_id(body) {
                            self.events.push_back(GenerationEvent::Untracked(id));
                        }
                        None
                    }
                    Some((_, ticket)) => ticket,
                    None => None,
                };
                self.last_active = now;
                SendStep::Send { generation, ticket }
            }
            Phase::Over => SendStep::Refuse(Closed::Exited, last()),
            // Stopped when idle: a send starts the next generation (now, or
            // once the stop is over) and waits for it, whatever `while_down`
            // says (the child is not down, only resting).
            Phase::Idle | Phase::Stopping(_) => {
                if self.phase == Phase::Idle {
                    self.phase = Phase::Down(now);
                    self.waking = true;
                } else {
                    self.wanted = true;
                }
                SendStep::Wait {
                    after: self.policy.generations(),
                    until,
                }
            }
            Phase::Starting(_) | Phase::Down(_)
                if self.while_down == WhileDown::Wait || self.waking =>
            {
                let after = match self.phase {
                    Phase::Starting(generation) => generation.saturating_sub(1),
                    _ => self.policy.generations(),
                };
                SendStep::Wait { after, until }
            }
            Phase::Starting(_) | Phase::Down(_) => SendStep::Refuse(Closed::Exited, last()),
        }
    }

    /// The send told [`SendStep::Send`] ended: `Ok`, or refused with
    /// `Closed` (sending to that generation is over). See [`AfterSend`].
    pub fn handle_sent(&mut self, ticket: Option<Ticket>, result: Result<(), Closed>) -> AfterSend {
        let outcome = match (&ticket, &mut self.pending) {
            (Some(ticket), Some(pending)) => Some(pending.handle_sent(ticket, result.is_ok())),
            _ => None,
        };
        match (result, outcome) {
            (Ok(()), _) | (Err(_), Some(SendOutcome::AlreadyAnswered)) => AfterSend::Done,
            (Err(_), _) if self.stopped || self.phase == Phase::Over => AfterSend::Fail,
            (Err(_), _) if self.while_down == WhileDown::Wait || self.resting() => AfterSend::Retry,
            (Err(_), _) => AfterSend::Fail,
        }
    }

    // ---- receiving ----

    /// An item the running generation delivered at `now`: a response
    /// clears its request; any message keeps the child from idling.
    pub fn handle_received(&mut self, item: &Received, now: Instant) {
        if matches!(item, Received::Message(_)) {
            self.last_active = now;
        }
        let Some(pending) = &mut self.pending else {
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

    // ---- outputs ----

    /// The next event for the receive loop.
    pub fn poll_event(&mut self) -> Option<GenerationEvent> {
        self.events.pop_front()
    }

    /// Time passed: a running generation idle for
    /// [`idle_stop`](GenerationsConfig::idle_stop) (no traffic, no request
    /// waiting for its answer) is to be stopped
    /// ([`poll_idle_stop`](Self::poll_idle_stop)); sends wait from now on.
    /// Early, late and repeated calls are fine.
    pub fn handle_timeout(&mut self, now: Instant) {
        if let Phase::Running(generation) = self.phase {
            if !self.stopped && self.idle_deadline().is_some_and(|at| now >= at) {
                self.phase = Phase::Stopping(generation);
                self.stop_idle = Some(generation);
            }
        }
    }

    /// The generation to stop now because it is idle, once: shut it down
    /// gracefully and hand its report to [`handle_ended`](Self::handle_ended)
    /// as usual; it is not restarted until a send asks for it.
    pub fn poll_idle_stop(&mut self) -> Option<u32> {
        self.stop_idle.take()
    }

    /// When to call [`handle_timeout`](Self::handle_timeout) or spawn next:
    /// the next spawn while the child is down, the idle deadline while it
    /// runs with nothing in flight.
    #[must_use]
    pub fn poll_timeout(&self) -> Option<Instant> {
        match self.phase {
            Phase::Down(at) => Some(at),
            Phase::Running(_) if !self.stopped => self.idle_deadline(),
            _ => None,
        }
    }

    /// Whether the child rests after an idle stop (or wakes from it), as
    /// opposed to being down after a crash.
    fn resting(&self) -> bool {
        matches!(self.phase, Phase::Stopping(_) | Phase::Idle) || self.waking
    }

    /// When the running generation counts as idle, unless something moves
    /// first: never while a request waits for its answer.
    fn idle_deadline(&self) -> Option<Instant> {
        let idle = self.idle_stop?;
        if self.pending.as_ref().is_some_and(|p| !p.is_empty()) {
            return None;
        }
        self.last_active.checked_add(idle)
    }

    /// Whether the next generation is to be spawned now.
    #[must_use]
    pub fn restart_due(&self, now: Instant) -> bool {
        matches!(self.phase, Phase::Down(at) if now >= at) && !self.stopped
    }

    // ---- getters ----

    /// The generations started so far.
    #[must_use]
    pub fn generations(&self) -> u32 {
        self.policy.generations()
    }

    /// The running generation, once initialized.
    #[must_use]
    pub fn running(&self) -> Option<u32> {
        match self.phase {
            Phase::Running(generation) => Some(generation),
            _ => None,
        }
    }

    /// Whether no generation will come any more.
    #[must_use]
    pub fn is_over(&self) -> bool {
        self.phase == Phase::Over
    }

    /// Whether the caller ended the supervision.
    #[must_use]
    pub fn is_stopped(&self) -> bool {
        self.stopped
    }

    /// The last generation's report.
    #[must_use]
    pub fn last_report(&self) -> Option<&ExitReport> {
        self.reports.back()
    }

    /// The ids of the requests the running generation owes, in the order
    /// sent: a report learnt before the receive loop read the end lists
    /// these (see [`PendingRequests::ids`]).
    #[must_use]
    pub fn pending_ids(&self) -> Vec<Bytes> {
        self.pending
            .as_ref()
            .map_or_else(Vec::new, PendingRequests::ids)
    }
}

/// The id of a request that went untracked, as raw JSON text.
fn untracked_id(body: &[u8]) -> Option<Bytes> {
    let mut scanner = crate::jsonrpc::IdScanner::new();
    scanner.feed(body);
    scanner.id()
}
