//! The child's life from spawn to reap as a sans-IO state machine.
//!
//! [`Lifecycle`] decides when to close the child's stdin, when to send SIGTERM
//! and SIGKILL, and when the child's end can be reported. It never reads the
//! clock and performs no I/O: the adapter passes every event in together with
//! `now`, and carries out the [`Action`]s it hands back.

use std::collections::VecDeque;
use std::fmt;
use std::time::{Duration, Instant};

use crate::ending::{EndedBy, Exit, Signal, Swept};
use crate::report::ExitReport;

/// The shutdown graces of a [`Lifecycle`].
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct LifecycleConfig {
    /// Time from the shutdown request until SIGTERM. It covers flushing the
    /// queued output, closing stdin and waiting for the child to exit on EOF.
    /// Default 2 s (the MCP stdio recommendation). Zero skips the wait.
    pub stdin_grace: Duration,
    /// Time from SIGTERM until SIGKILL. Default 2 s. Zero skips the wait.
    pub term_grace: Duration,
    /// After the exit was observed, how long to wait for stdout and stderr to
    /// reach EOF before reporting the end anyway (a grandchild may hold the
    /// pipes open). Default 1 s.
    pub drain_grace: Duration,
}

impl Default for LifecycleConfig {
    fn default() -> Self {
        Self {
            stdin_grace: Duration::from_secs(2),
            term_grace: Duration::from_secs(2),
            drain_grace: Duration::from_secs(1),
        }
    }
}

/// What the adapter must do now, from [`Lifecycle::poll_action`].
#[cfg_attr(feature = "arbitrary", derive(arbitrary::Arbitrary))]
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Action {
    /// Close (drop) the child's stdin, so it sees EOF. Then report it with
    /// [`Lifecycle::handle_stdin_closed`].
    CloseStdin,
    /// Deliver this signal to the child's group (or to its PID without a
    /// group). Report a failure with [`Lifecycle::handle_signal_failed`].
    Signal(Signal),
    /// End with SIGKILL whatever the child left behind: what is left of its
    /// process group (if it leads one: the group ID cannot be reused while
    /// any member lives, so this only hits the child's own descendants),
    /// and wherever the platform can find them, the processes that escaped
    /// the group but still hold the child's end of its pipes, and its
    /// cgroup (when contained in one). On Windows: everything still in the
    /// child's job object (none of it can leave the job), counted and then
    /// terminated; whether those held the pipes is not known there. Asked
    /// once: after the leader was
    /// reaped, or at once when the driver stops
    /// ([`Lifecycle::handle_driver_stopped`]). Report what it found with
    /// [`Lifecycle::handle_swept`]; the exit report waits for it (at most
    /// until the drain deadline).
    Sweep,
}

/// Where the child is in its life. Phases only move forward, in the order
/// listed (some may be skipped).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Phase {
    /// No shutdown asked yet.
    Running,
    /// Shutdown asked; waiting for the queued output to be written.
    Flushing,
    /// Stdin is closed; waiting for the child to exit until the stdin deadline.
    StdinClosed,
    /// SIGTERM sent; waiting for the child to exit until the term deadline.
    Terminating,
    /// SIGKILL sent; waiting for the reap.
    Killing,
    /// The exit was observed; waiting for stdout and stderr to reach EOF.
    Exited,
    /// The exit report was handed out; nothing more happens.
    Done,
}

/// Why delivering a [`Signal`] failed.
#[cfg_attr(feature = "arbitrary", derive(arbitrary::Arbitrary))]
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum SignalError {
    /// ESRCH: no such process (or group). The child already exited and
    /// awaits its reap, so escalation stops.
    NoSuchProcess,
    /// EPERM: not allowed to signal the process. Escalation continues.
    PermissionDenied,
    /// Any other failure. Escalation continues.
    Other {
        /// The OS error number, if there was one.
        errno: Option<i32>,
    },
}

impl SignalError {
    /// Classifies the error of a failed `kill`/`killpg`.
    #[cfg(unix)]
    #[must_use]
    pub fn from_io(err: &std::io::Error) -> Self {
        // ESRCH and EPERM have these numbers on every Unix; std maps neither
        // to a distinct `ErrorKind` we could match instead.
        const EPERM: i32 = 1;
        const ESRCH: i32 = 3;
        match err.raw_os_error() {
            Some(ESRCH) => SignalError::NoSuchProcess,
            Some(EPERM) => SignalError::PermissionDenied,
            errno => SignalError::Other { errno },
        }
    }
}

impl fmt::Display for SignalError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            SignalError::NoSuchProcess => f.write_str("no such process"),
            SignalError::PermissionDenied => f.write_str("permission denied"),
            SignalError::Other { errno: Some(errno) } => {
                write!(f, "signal delivery failed (os error {errno})")
            }
            SignalError::Other { errno: None } => f.write_str("signal delivery failed"),
        }
    }
}

impl std::error::Error for SignalError {}

/// The child's life from spawn to reap, as a pure state machine.
///
/// # How to drive it
///
/// Create it at spawn with [`Lifecycle::new`]. Then, after **every** input
/// call (`handle_*`), drain the outputs in this order:
///
/// 1. [`poll_action`](Self::poll_action) until `None`, carrying out each
///    [`Action`] (and reporting the outcome with `handle_stdin_closed` or
///    `handle_signal_failed`, which are inputs again);
/// 2. [`poll_end`](Self::poll_end): `Some` once, when the child's end is
///    known: the exit report, to complete with the stderr tail and counters;
/// 3. [`poll_timeout`](Self::poll_timeout): arm a timer for this instant (or
///    none for `None`); when it fires, call
///    [`handle_timeout`](Self::handle_timeout) with the current time.
///
/// Inputs, each taking `now`:
/// - [`handle_shutdown`](Self::handle_shutdown): the user asked for a
///   graceful shutdown;
/// - [`handle_outbound_drained`](Self::handle_outbound_drained) /
///   [`handle_outbound_pending`](Self::handle_outbound_pending): the write
///   queue became empty / non-empty;
/// - [`handle_close_stdin`](Self::handle_close_stdin): the channel gave up
///   on stdin (a write timed out): close it now, shutdown or not;
/// - [`handle_stdin_closed`](Self::handle_stdin_closed): stdin was closed
///   (by us, or broken by the child: EPIPE);
/// - [`handle_exit`](Self::handle_exit): the child was reaped;
/// - [`handle_stdout_eof`](Self::handle_stdout_eof) and
///   [`handle_stderr_eof`](Self::handle_stderr_eof);
/// - [`handle_signal_failed`](Self::handle_signal_failed);
/// - [`handle_swept`](Self::handle_swept): what the sweep ended;
/// - [`handle_driver_stopped`](Self::handle_driver_stopped): the adapter
///   stops driving (its runtime is going away): kill and sweep now;
/// - [`handle_timeout`](Self::handle_timeout): safe to call early, late or
///   repeatedly (spurious calls are no-ops).
///
/// `now` should be monotonic (`Instant`); an earlier `now` than before never
/// panics, it just does not move anything forward. Every input also fires any
/// deadline that `now` has reached, so a zero grace acts within the same
/// drain. No input order can make it panic.
///
/// # Guarantees
///
/// - SIGTERM is never asked before `stdin_grace` has passed since the
///   shutdown request, and SIGKILL never before `stdin_grace + term_grace`.
/// - Once the exit was observed, no [`Action::Signal`] is ever asked again
///   (the PID may be reused); only one [`Action::Sweep`], whether the child
///   leads its own group or not (what escaped the group is swept too).
/// - [`poll_timeout`](Self::poll_timeout) never moves backwards within one
///   [`Phase`].
#[derive(Debug, Clone)]
pub struct Lifecycle {
    config: LifecycleConfig,
    process_group: bool,
    spawned_at: Instant,
    shutdown_at: Option<Instant>,
    /// The phase, with the deadline it waits for.
    stage: Stage,
    /// Decided, not yet handed out by [`poll_action`](Self::poll_action),
    /// in the order decided.
    queue: VecDeque<Action>,
    /// Handed out and not reported failed: what the adapter did to the
    /// child, so what may have ended it.
    handed_out: Vec<Action>,
    /// The sweep, asked once.
    sweep: Sweep,
    /// The write queue is known to be empty. Unknown counts as not empty, so
    /// a session that never reports it loses nothing: stdin then closes at
    /// the stdin deadline.
    outbound_drained: bool,
    /// Stdin is closed or its close was decided.
    stdin_closed: bool,
    /// ESRCH came back: the child is gone and awaits its reap, so no
    /// deadline escalates any more.
    process_gone: bool,
    stdout_eof: bool,
    stderr_eof: bool,
    /// The adapter stops driving: no timer will fire again, so the end is
    /// reported as soon as the exit is known, drained or not.
    driver_stopped: bool,
    /// Every handle was dropped ([`handle_abandoned`](Self::handle_abandoned)).
    abandoned: bool,
}

/// A [`Phase`] with the deadline it waits for, and after the exit what is
/// known of the end. A deadline of `None` (an overflowing grace) never
/// fires.
#[derive(Debug, Clone, Copy)]
enum Stage {
    Running,
    Flushing {
        stdin_deadline: Option<Instant>,
    },
    StdinClosed {
        stdin_deadline: Option<Instant>,
    },
    Terminating {
        term_deadline: Option<Instant>,
    },
    Killing,
    /// The exit was observed; the pipes' EOF is awaited until
    /// `drain_deadline` (`None` once it passed, or if it overflowed), and
    /// the sweep until its own deadline.
    Exited {
        end: End,
        drain_deadline: Option<Instant>,
        /// The drain deadline passed: the pipes are waited for no more.
        drain_over: bool,
    },
    /// The end is decided; [`Lifecycle::poll_end`] hands it out.
    Ended {
        end: End,
        pipes_drained: bool,
        stray_processes_ended: u32,
    },
    Done {
        exit: Exit,
    },
}

/// What is known of the end when the exit is observed.
#[derive(Debug, Clone, Copy)]
struct End {
    exit: Exit,
    ended_by: EndedBy,
    shutdown_requested: bool,
    elapsed: Duration,
}

/// How long the report waits for a sweep's result once it was asked: a
/// scan that chases a descendant changing its PID may go on for longer,
/// and then what it ended by this deadline is counted (the rest is the
/// adapter's to log).
pub const SWEEP_WAIT: Duration = Duration::from_millis(250);

/// How much longer than [`SWEEP_WAIT`] the report waits for a sweep that has
/// not yet been through the processes once, or has ended nothing yet (on a
/// loaded machine, behind another scan, or chasing a descendant that
/// changes its PID).
pub const SWEEP_FIRST_END_WAIT: Duration = Duration::from_secs(2);

/// How long a child sent SIGKILL by a background task that stopped early
/// (its runtime shut down) is waited for, so that it is reaped and its
/// report made. SIGKILL takes effect within milliseconds unless the child
/// is stuck in the kernel; past this, the runtime's child type is left to
/// reap it.
pub(crate) const REAP_AFTER_STOP_WAIT: Duration = Duration::from_secs(2);

/// Where the one [`Action::Sweep`] is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Sweep {
    NotDecided,
    /// Asked at `at`; `so_far` is what the running sweep found, as last
    /// handed in, and whether it has been through the processes once.
    /// `longer`: [`SWEEP_WAIT`] passed with nothing ended, so the report
    /// waits [`SWEEP_FIRST_END_WAIT`] longer.
    Asked {
        at: Instant,
        so_far: Option<(Swept, bool)>,
        longer: bool,
    },
    Reported(Swept),
}

impl Sweep {
    /// The next instant the asked sweep's wait is decided at: it only moves
    /// forward.
    fn deadline(self) -> Option<Instant> {
        let Sweep::Asked { at, longer, .. } = self else {
            return None;
        };
        if longer {
            at.checked_add(SWEEP_WAIT + SWEEP_FIRST_END_WAIT)
        } else {
            at.checked_add(SWEEP_WAIT)
        }
    }

    /// At `now`: what the sweep ended counts once [`SWEEP_WAIT`] passed and
    /// it ended something in a pass, or once the longer wait passed
    /// whatever it ended.
    fn settle(&mut self, now: Instant) {
        let Sweep::Asked { at, so_far, longer } = *self else {
            return;
        };
        let passed = |wait: Duration| at.checked_add(wait).is_some_and(|d| now >= d);
        let ended_something = so_far.is_some_and(|(swept, passed)| passed && swept.ended > 0);
        if (passed(SWEEP_WAIT) && ended_something) || passed(SWEEP_WAIT + SWEEP_FIRST_END_WAIT) {
            *self = Sweep::Reported(so_far.map(|(swept, _)| swept).unwrap_or_default());
        } else if passed(SWEEP_WAIT) && !longer {
            *self = Sweep::Asked {
                at,
                so_far,
                longer: true,
            };
        }
    }
}

impl Lifecycle {
    /// Starts the machine for a child spawned at `now`. With
    /// `process_group`, the child leads its own group: signals go to the
    /// whole group. Either way, after the leader exits what it left behind
    /// is swept once ([`Action::Sweep`]), so launchers such as `sh -c` or
    /// `npx` leave no orphaned grandchildren.
    #[must_use]
    pub fn new(config: LifecycleConfig, process_group: bool, now: Instant) -> Self {
        Self {
            config,
            process_group,
            spawned_at: now,
            shutdown_at: None,
            stage: Stage::Running,
            queue: VecDeque::new(),
            handed_out: Vec::new(),
            sweep: Sweep::NotDecided,
            outbound_drained: false,
            stdin_closed: false,
            process_gone: false,
            stdout_eof: false,
            stderr_eof: false,
            driver_stopped: false,
            abandoned: false,
        }
    }

    // ---- getters ----

    /// The current phase.
    #[must_use]
    pub fn phase(&self) -> Phase {
        match self.stage {
            Stage::Running => Phase::Running,
            Stage::Flushing { .. } => Phase::Flushing,
            Stage::StdinClosed { .. } => Phase::StdinClosed,
            Stage::Terminating { .. } => Phase::Terminating,
            Stage::Killing => Phase::Killing,
            Stage::Exited { .. } | Stage::Ended { .. } => Phase::Exited,
            Stage::Done { .. } => Phase::Done,
        }
    }

    /// Whether the child leads its own process group (signals go to the
    /// group).
    #[must_use]
    pub fn process_group(&self) -> bool {
        self.process_group
    }

    /// The configuration it was created with.
    #[must_use]
    pub fn config(&self) -> &LifecycleConfig {
        &self.config
    }

    /// Whether stdin is closed, or its close was decided.
    #[must_use]
    pub fn is_stdin_closed(&self) -> bool {
        self.stdin_closed
    }

    /// Whether shutdown was asked.
    #[must_use]
    pub fn shutdown_requested(&self) -> bool {
        self.shutdown_at.is_some()
    }

    /// The exit, once observed. While this is `None` the child has not been
    /// reaped, so its PID is still its own (a drop path may signal it).
    #[must_use]
    pub fn exit(&self) -> Option<Exit> {
        match self.stage {
            Stage::Exited { end, .. } | Stage::Ended { end, .. } => Some(end.exit),
            Stage::Done { exit } => Some(exit),
            _ => None,
        }
    }

    // ---- inputs ----

    /// The user asked for a graceful shutdown. Asking again changes
    /// nothing; asking after the exit was observed changes nothing.
    ///
    /// With the write queue already known empty (or stdin already closed) it
    /// goes straight to closing stdin; otherwise it waits for
    /// [`handle_outbound_drained`](Self::handle_outbound_drained) until the
    /// stdin deadline (`now + stdin_grace`).
    pub fn handle_shutdown(&mut self, now: Instant) {
        if matches!(self.stage, Stage::Running) {
            self.shutdown_at = Some(now);
            let stdin_deadline = now.checked_add(self.config.stdin_grace);
            self.stage = Stage::Flushing { stdin_deadline };
            if self.stdin_closed || self.outbound_drained {
                self.close_stdin(stdin_deadline);
            }
        }
        self.advance(now);
    }

    /// The session's write queue is empty. Call it whenever that becomes true
    /// (calling it more often is harmless), also before any shutdown.
    pub fn handle_outbound_drained(&mut self, now: Instant) {
        self.outbound_drained = true;
        if let Stage::Flushing { stdin_deadline } = self.stage {
            self.close_stdin(stdin_deadline);
        }
        self.advance(now);
    }

    /// The session queued bytes, so its write queue is not empty any more.
    pub fn handle_outbound_pending(&mut self, now: Instant) {
        self.outbound_drained = false;
        self.advance(now);
    }

    /// The channel gave up on stdin (its write timeout ran out): close it now
    /// with [`Action::CloseStdin`], whether a shutdown was asked or not. The
    /// child's exit then counts as [`EndedBy::StdinClose`].
    pub fn handle_close_stdin(&mut self, now: Instant) {
        if self.exit().is_none() {
            self.decide_close();
        }
        self.advance(now);
    }

    /// Stdin was closed: by us after [`Action::CloseStdin`], or broken by the
    /// child (EPIPE). Nothing more will be flushed.
    pub fn handle_stdin_closed(&mut self, now: Instant) {
        self.stdin_closed = true;
        if let Stage::Flushing { stdin_deadline } = self.stage {
            self.stage = Stage::StdinClosed { stdin_deadline };
        }
        self.advance(now);
    }

    /// The child was reaped. Ends the escalation at once, whatever the phase
    ///: no signal is asked after this. Only the first exit counts.
    pub fn handle_exit(&mut self, exit: Exit, now: Instant) {
        if self.exit().is_none() {
            let since = self.shutdown_at.unwrap_or(self.spawned_at);
            let end = End {
                exit,
                ended_by: self.ended_by(exit),
                shutdown_requested: self.shutdown_at.is_some(),
                elapsed: now.saturating_duration_since(since),
            };
            // Undelivered steps are moot now, and a signal could hit a reused PID.
            self.queue.retain(|action| *action == Action::Sweep);
            self.decide_sweep(now);
            self.stage = Stage::Exited {
                end,
                drain_deadline: now.checked_add(self.config.drain_grace),
                drain_over: false,
            };
        }
        self.advance(now);
    }

    /// The child's stdout reached EOF (it may come before the exit).
    pub fn handle_stdout_eof(&mut self, now: Instant) {
        self.stdout_eof = true;
        self.advance(now);
    }

    /// The child's stderr reached EOF (it may come before the exit). Without
    /// a stderr pipe (inherit or discard mode) call it right after spawn.
    pub fn handle_stderr_eof(&mut self, now: Instant) {
        self.stderr_eof = true;
        self.advance(now);
    }

    /// Delivering `signal` failed. [`SignalError::NoSuchProcess`] means the
    /// child is gone but not yet reaped: escalation stops and the machine
    /// waits for [`handle_exit`](Self::handle_exit). Other errors keep the
    /// schedule. Either way the signal does not count as the step that
    /// ended the child.
    pub fn handle_signal_failed(&mut self, signal: Signal, err: SignalError, now: Instant) {
        // An undelivered signal did not end the child, so it must not be
        // named in the ending (kill/killpg fail only when nothing got it).
        self.handed_out
            .retain(|action| *action != Action::Signal(signal));
        if err == SignalError::NoSuchProcess {
            self.process_gone = true;
            self.queue
                .retain(|action| !matches!(action, Action::Signal(_)));
        }
        self.advance(now);
    }

    /// The [`Action::Sweep`] was carried out and found `swept`. The exit
    /// report counts what it ended, and says the pipes were held if any of
    /// them held the child's pipes. Only the first report counts, and none
    /// after the sweep's deadline (see
    /// [`handle_sweep_progress`](Self::handle_sweep_progress)).
    pub fn handle_swept(&mut self, swept: Swept, now: Instant) {
        if matches!(self.sweep, Sweep::Asked { .. }) {
            self.sweep = Sweep::Reported(swept);
        }
        self.advance(now);
    }

    /// The [`Action::Sweep`] is still running, and has found `so_far`;
    /// `passed` says whether it has been through the processes once. The
    /// report waits for the sweep's result [`SWEEP_WAIT`] after it was
    /// asked, or [`SWEEP_FIRST_END_WAIT`] longer while it has not yet ended
    /// anything in a pass; at that deadline ([`poll_timeout`](Self::poll_timeout))
    /// it counts what was last handed in here.
    pub fn handle_sweep_progress(&mut self, so_far: Swept, passed: bool, now: Instant) {
        if let Sweep::Asked { at, longer, .. } = self.sweep {
            self.sweep = Sweep::Asked {
                at,
                so_far: Some((so_far, passed)),
                longer,
            };
        }
        self.advance(now);
    }

    /// The adapter stops driving the child for good (its task is dropped:
    /// the runtime shuts down), so no timer will fire and no pipe will be
    /// read again. Unless the exit was already observed (or ESRCH said the
    /// child is gone), SIGKILL is asked at once; the sweep is asked at once too (what escaped the group is
    /// ended now, not after a reap that may never be seen); and the end is
    /// reported as soon as the exit is known, without waiting for the
    /// pipes. The adapter should wait (briefly) for the exit and report it.
    pub fn handle_driver_stopped(&mut self, now: Instant) {
        if !std::mem::replace(&mut self.driver_stopped, true) {
            if self.exit().is_none() {
                self.kill_now();
            }
            self.decide_sweep(now);
        }
        self.advance(now);
    }

    /// The user asked to stop the child now: SIGKILL (to its group, with
    /// one) at once, without closing stdin or SIGTERM first, unless its exit
    /// was already observed or it is already gone. It counts as an asked-for
    /// end: the report says [`shutdown_requested`](ExitReport::shutdown_requested)
    /// and [`EndedBy::Sigkill`]. Asking again changes nothing. The end is
    /// reported as usual: after the sweep, once the pipes drained or
    /// `drain_grace` passed.
    pub fn handle_kill(&mut self, now: Instant) {
        if self.exit().is_none() && !self.process_gone && !self.kill_handed_out() {
            self.shutdown_at.get_or_insert(now);
            self.kill_now();
        }
        self.advance(now);
    }

    /// Every handle on the transport was dropped without a shutdown. With
    /// `kill`, the non-graceful path: SIGKILL (to the group), then the
    /// sweep, and the end counts as [`EndedBy::Sigkill`]. Without it, the
    /// child is left to run: its stdin is closed (it reads EOF) and nothing
    /// else is sent. Nothing changes after a shutdown or the exit, or the
    /// second time; no SIGKILL after ESRCH said the child is gone.
    pub fn handle_abandoned(&mut self, kill: bool, now: Instant) {
        let first = !std::mem::replace(&mut self.abandoned, true);
        if first && self.shutdown_at.is_none() && self.exit().is_none() && !self.kill_handed_out() {
            if kill {
                self.kill_now();
            } else {
                self.decide_close();
            }
        }
        self.advance(now);
    }

    /// A deadline from [`poll_timeout`](Self::poll_timeout) may have passed.
    /// Early, late and repeated calls are fine: only deadlines `now` has
    /// reached fire.
    pub fn handle_timeout(&mut self, now: Instant) {
        self.advance(now);
    }

    // ---- outputs ----

    /// The next thing the adapter must do, if any. Drain until `None` after
    /// every input.
    #[must_use]
    pub fn poll_action(&mut self) -> Option<Action> {
        let action = self.queue.pop_front()?;
        if action != Action::Sweep {
            self.handed_out.push(action);
        }
        Some(action)
    }

    /// The next action if it is a signal, handed out as
    /// [`poll_action`](Self::poll_action) would hand it out; `None`, taking
    /// nothing, if the next action is anything else or there is none.
    #[must_use]
    pub fn poll_signal(&mut self) -> Option<Signal> {
        let Some(&Action::Signal(signal)) = self.queue.front() else {
            return None;
        };
        self.queue.pop_front();
        self.handed_out.push(Action::Signal(signal));
        Some(signal)
    }

    /// The child's end, exactly once: after the exit was observed, the sweep
    /// reported and both pipes reached EOF, or `drain_grace` passed since
    /// the exit (at once after the exit once the driver stopped). Moves the
    /// phase to [`Phase::Done`]. The report's stderr tail and counters are
    /// empty: the lifecycle does not know them.
    #[must_use]
    pub fn poll_end(&mut self) -> Option<ExitReport> {
        let Stage::Ended {
            end,
            pipes_drained,
            stray_processes_ended,
        } = self.stage
        else {
            return None;
        };
        self.stage = Stage::Done { exit: end.exit };
        let mut report = ExitReport::new(end.exit, end.ended_by, end.elapsed);
        report.shutdown_requested = end.shutdown_requested;
        report.pipes_drained = pipes_drained;
        report.stray_processes_ended = stray_processes_ended;
        Some(report)
    }

    /// When to call [`handle_timeout`](Self::handle_timeout) next; `None`
    /// when nothing is scheduled.
    #[must_use]
    pub fn poll_timeout(&self) -> Option<Instant> {
        match self.stage {
            Stage::Flushing { stdin_deadline } | Stage::StdinClosed { stdin_deadline }
                if !self.process_gone =>
            {
                stdin_deadline
            }
            Stage::Terminating { term_deadline } if !self.process_gone => term_deadline,
            Stage::Exited { drain_deadline, .. } => match (drain_deadline, self.sweep.deadline()) {
                (Some(drain), Some(sweep)) => Some(drain.min(sweep)),
                (drain, sweep) => drain.or(sweep),
            },
            _ => None,
        }
    }

    // ---- internals ----

    /// The step that ended the child: the last one handed out (and not
    /// reported failed) before its exit, unless the exit rules it out. A
    /// child that died of SIGTERM was not ended by a SIGKILL sent after it
    /// (its grace ran out before the exit was seen, as on a clock that
    /// jumps): the report never says "killed by SIGTERM after SIGKILL".
    fn ended_by(&self, exit: Exit) -> EndedBy {
        let handed_out = |action| self.handed_out.contains(&action);
        let died_of_term = exit == Exit::Signal(Signal::Term.number());
        if self.kill_handed_out() && !died_of_term {
            EndedBy::Sigkill
        } else if handed_out(Action::Signal(Signal::Term)) {
            EndedBy::Sigterm
        } else if handed_out(Action::CloseStdin) {
            EndedBy::StdinClose
        } else {
            EndedBy::OnItsOwn
        }
    }

    /// SIGKILL was handed out and not reported failed.
    fn kill_handed_out(&self) -> bool {
        self.handed_out.contains(&Action::Signal(Signal::Kill))
    }

    /// Decides the close of stdin (once) and moves to the phase after it.
    fn close_stdin(&mut self, stdin_deadline: Option<Instant>) {
        self.decide_close();
        self.stage = Stage::StdinClosed { stdin_deadline };
    }

    /// Decides the close of stdin, once; the phase is the caller's business.
    fn decide_close(&mut self) {
        if !std::mem::replace(&mut self.stdin_closed, true) {
            self.queue.push_back(Action::CloseStdin);
        }
    }

    /// Decides SIGKILL now, instead of the gentler steps still waiting,
    /// unless it was already handed out or ESRCH said the child is gone
    /// (nothing is left to kill: the sweep ends what escaped).
    fn kill_now(&mut self) {
        if self.kill_handed_out() || self.process_gone {
            return;
        }
        let kill = Action::Signal(Signal::Kill);
        self.queue.retain(|action| *action == Action::Sweep);
        self.queue.push_back(kill);
        if self.phase() < Phase::Killing {
            self.stage = Stage::Killing;
        }
    }

    /// Decides the sweep, once, asked at `now`.
    fn decide_sweep(&mut self, now: Instant) {
        if self.sweep == Sweep::NotDecided {
            self.sweep = Sweep::Asked {
                at: now,
                so_far: None,
                longer: false,
            };
            self.queue.push_back(Action::Sweep);
        }
    }

    /// Fires every deadline `now` has reached, and decides the end once it
    /// is known.
    fn advance(&mut self, now: Instant) {
        let reached = |deadline: Option<Instant>| deadline.is_some_and(|d| now >= d);
        self.sweep.settle(now);
        loop {
            match self.stage {
                Stage::Flushing { stdin_deadline } | Stage::StdinClosed { stdin_deadline }
                    if !self.process_gone && reached(stdin_deadline) =>
                {
                    // The flush ran out of time: close stdin anyway, with the signal.
                    self.decide_close();
                    self.queue.push_back(Action::Signal(Signal::Term));
                    // From `now`, not the deadline: a late timer still gives
                    // the child its whole term_grace after the signal.
                    let term_deadline = now.checked_add(self.config.term_grace);
                    self.stage = Stage::Terminating { term_deadline };
                }
                Stage::Terminating { term_deadline }
                    if !self.process_gone && reached(term_deadline) =>
                {
                    self.queue.push_back(Action::Signal(Signal::Kill));
                    self.stage = Stage::Killing;
                }
                Stage::Exited {
                    end,
                    drain_deadline,
                    drain_over,
                } => {
                    if reached(drain_deadline) {
                        self.stage = Stage::Exited {
                            end,
                            drain_deadline: None,
                            drain_over: true,
                        };
                        continue;
                    }
                    let drained = self.stdout_eof && self.stderr_eof;
                    let swept = match self.sweep {
                        Sweep::Reported(swept) => Some(swept),
                        Sweep::NotDecided | Sweep::Asked { .. } => None,
                    };
                    let sweep_handed_out = !self.queue.contains(&Action::Sweep);
                    // A sweep still running past the drain deadline is
                    // waited for until its own deadline, which is bounded.
                    let decided = (swept.is_some() && (drained || drain_over))
                        || (self.driver_stopped && (swept.is_some() || sweep_handed_out));
                    if decided {
                        let swept = swept.unwrap_or_default();
                        self.stage = Stage::Ended {
                            end,
                            // Holders found by the sweep are dead now and
                            // the pipes may reach EOF, but they were held.
                            pipes_drained: drained && !swept.held_pipes,
                            stray_processes_ended: swept.ended,
                        };
                    }
                    return;
                }
                _ => return,
            }
        }
    }
}
