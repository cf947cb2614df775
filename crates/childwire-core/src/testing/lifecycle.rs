//! A model of the [`Lifecycle`] contract checked against the real machine
//! after every input. The property test and the fuzz target hold the
//! machine to the same rules; each brings its own way of generating [`Op`]s
//! (with the `arbitrary` feature, `Op` implements `Arbitrary`).
//!
//! The expectations come from what the machine was told and what it asked
//! for, never from its internals: phases only move forward; no signal after
//! the exit was observed or after ESRCH; SIGTERM and SIGKILL never before
//! their graces, unless a kill was asked (the caller's kill, every handle
//! dropped with kill-on-drop, the driver stopping), and then SIGKILL at
//! once; stdin closed only by a shutdown, a stalled write or the handles
//! dropped without kill-on-drop, and then at once; the sweep after the exit,
//! or at once when the driver stops; `poll_timeout` never goes backwards
//! within a phase; and an observed exit ends the machine exactly once, as
//! soon as the end is due and not before, with an ending that says what
//! happened.

use std::time::{Duration, Instant};

use crate::ending::{EndedBy, Exit, Signal, Swept};
use crate::lifecycle::{
    Action, Lifecycle, LifecycleConfig, Phase, SWEEP_FIRST_END_WAIT, SWEEP_WAIT, SignalError,
};
use crate::report::ExitReport;

/// One input to the machine, or a move of the clock.
#[derive(Debug, Clone, Copy)]
pub enum Op {
    /// [`Lifecycle::handle_shutdown`].
    Shutdown,
    /// [`Lifecycle::handle_kill`]: the caller's kill (`start_kill`).
    Kill,
    /// [`Lifecycle::handle_abandoned`]: every handle was dropped, with
    /// kill-on-drop or without.
    Abandoned(bool),
    /// [`Lifecycle::handle_driver_stopped`].
    DriverStopped,
    /// [`Lifecycle::handle_close_stdin`]: a stdin write stalled past the
    /// write timeout. The core routes the stall here after every change to
    /// the write side (the session does, after every time step),
    /// so it may come again and again.
    Stalled,
    /// [`Lifecycle::handle_outbound_drained`].
    OutboundDrained,
    /// [`Lifecycle::handle_outbound_pending`].
    OutboundPending,
    /// [`Lifecycle::handle_stdin_closed`].
    StdinClosed,
    /// [`Lifecycle::handle_exit`].
    Exit(Exit),
    /// [`Lifecycle::handle_stdout_eof`].
    StdoutEof,
    /// [`Lifecycle::handle_stderr_eof`].
    StderrEof,
    /// [`Lifecycle::handle_signal_failed`].
    SignalFailed(Signal, SignalError),
    /// [`Lifecycle::handle_swept`]: what the sweep found. The machine asks
    /// for the sweep with [`Action::Sweep`]; the outcome comes later, as
    /// this op (a report nobody asked for, or a second one, is ignored).
    Swept(Swept),
    /// [`Lifecycle::handle_sweep_progress`]: what the sweep, still running,
    /// found so far, and whether it has been through the processes once.
    SweepProgress(Swept, bool),
    /// [`Lifecycle::handle_timeout`] with the current time.
    Timeout,
    /// `handle_timeout` with a `now` this far in the past.
    StaleTimeout(Duration),
    /// Moves the clock this far forward, then `handle_timeout`.
    Advance(Duration),
    /// Moves the clock to `poll_timeout`, then `handle_timeout`.
    AdvanceToDeadline,
}

/// Clock steps of up to 65.535 s, so a sequence of them cannot overflow an
/// `Instant` (as an arbitrary `Duration` would).
#[cfg(feature = "arbitrary")]
impl<'a> arbitrary::Arbitrary<'a> for Op {
    fn arbitrary(u: &mut arbitrary::Unstructured<'a>) -> arbitrary::Result<Self> {
        let ms = |u: &mut arbitrary::Unstructured<'a>| -> arbitrary::Result<Duration> {
            Ok(Duration::from_millis(u64::from(u.arbitrary::<u16>()?)))
        };
        Ok(match u.int_in_range(0..=17u8)? {
            0 => Op::Shutdown,
            1 => Op::OutboundDrained,
            2 => Op::OutboundPending,
            3 => Op::StdinClosed,
            4 => Op::Exit(u.arbitrary()?),
            5 => Op::StdoutEof,
            6 => Op::StderrEof,
            7 => Op::SignalFailed(u.arbitrary()?, u.arbitrary()?),
            8 => Op::Timeout,
            9 => Op::StaleTimeout(ms(u)?),
            10 => Op::Advance(ms(u)?),
            11 => Op::Kill,
            12 => Op::Abandoned(u.arbitrary()?),
            13 => Op::DriverStopped,
            14 => Op::Stalled,
            15 => Op::Swept(Swept {
                ended: u32::from(u.arbitrary::<u8>()? % 4),
                held_pipes: u.arbitrary()?,
            }),
            16 => Op::SweepProgress(
                Swept {
                    ended: u32::from(u.arbitrary::<u8>()? % 4),
                    held_pipes: u.arbitrary()?,
                },
                u.arbitrary()?,
            ),
            _ => Op::AdvanceToDeadline,
        })
    }
}

/// A broken rule, said in words. A `Result` rather than a panic so the
/// property test can shrink without unwinding through the machine.
pub type Violation = String;

macro_rules! check {
    ($cond:expr, $($msg:tt)+) => {
        if !$cond {
            return Err(format!($($msg)+));
        }
    };
}

macro_rules! check_eq {
    ($left:expr, $right:expr, $($msg:tt)+) => {{
        let (left, right) = (&$left, &$right);
        if left != right {
            return Err(format!("{}: {left:?} != {right:?}", format_args!($($msg)+)));
        }
    }};
}

/// Plays ops against a `Lifecycle` and checks the contract after each one.
pub struct Checker {
    lc: Lifecycle,
    config: LifecycleConfig,
    process_group: bool,
    start: Instant,
    now: Instant,
    /// The graceful shutdown, or the caller's kill, was asked at this time.
    shutdown_at: Option<Instant>,
    /// First exit passed in, with the `now` of that call and how it must be
    /// reported.
    exit: Option<(Exit, Instant, EndedBy)>,
    stdin_reported_closed: bool,
    /// Stdin may be closed without a shutdown: a write stalled, or every
    /// handle was dropped without kill-on-drop.
    close_wanted: bool,
    /// A kill at once was asked (the caller's, the handles' or the stopping
    /// driver's): SIGKILL may skip the graces and SIGTERM.
    kill_wanted: bool,
    abandoned: bool,
    driver_stopped: bool,
    /// SIGTERM / SIGKILL handed out and not reported failed.
    term_delivered: bool,
    kill_delivered: bool,
    close_asked: u32,
    term_asked: u32,
    kill_asked: u32,
    sweeps: u32,
    /// The sweep's outcome, reported after it was asked (the first report),
    /// or what it found by its deadline.
    swept: Option<Swept>,
    /// When the sweep was asked: the time of the input that asked it.
    sweep_asked_at: Option<Instant>,
    /// What the running sweep found so far, and whether it made a pass.
    sweep_so_far: Option<(Swept, bool)>,
    /// The drain grace passed at some input after the exit: the pipes are
    /// waited for no more.
    drain_over: bool,
    gone: bool,
    stdout_eof: bool,
    stderr_eof: bool,
    endings: u32,
    phase: Phase,
    timeout: Option<Instant>,
}

/// What the op being applied must make the machine ask within its drain.
#[derive(Default)]
struct Expected {
    close: bool,
    kill: bool,
}

impl Checker {
    /// A machine created with `config` and `process_group` at `start` (any
    /// instant: the model reads no clock either), and a model that has seen
    /// nothing yet.
    #[must_use]
    pub fn new(config: LifecycleConfig, process_group: bool, start: Instant) -> Self {
        Checker {
            lc: Lifecycle::new(config.clone(), process_group, start),
            config,
            process_group,
            start,
            now: start,
            shutdown_at: None,
            exit: None,
            stdin_reported_closed: false,
            close_wanted: false,
            kill_wanted: false,
            abandoned: false,
            driver_stopped: false,
            term_delivered: false,
            kill_delivered: false,
            close_asked: 0,
            term_asked: 0,
            kill_asked: 0,
            sweeps: 0,
            swept: None,
            sweep_asked_at: None,
            sweep_so_far: None,
            drain_over: false,
            gone: false,
            stdout_eof: false,
            stderr_eof: false,
            endings: 0,
            phase: Phase::Running,
            timeout: None,
        }
    }

    /// Feeds `op` to the machine, drains it and checks every output.
    ///
    /// # Errors
    ///
    /// The first rule the machine broke, in words.
    pub fn apply(&mut self, op: &Op) -> Result<(), Violation> {
        let mut call_now = self.now;
        let mut expected = Expected::default();
        let alive = self.exit.is_none();
        match *op {
            Op::Shutdown => {
                // After a kill was asked the end is under way: a shutdown
                // changes nothing (a kill by the caller counts as one).
                if self.shutdown_at.is_none() && alive && !self.kill_wanted {
                    self.shutdown_at = Some(self.now);
                }
                self.lc.handle_shutdown(self.now);
            }
            Op::Kill => {
                // SIGKILL at once, unless the child is known dead or a
                // SIGKILL already stands; it counts as an asked-for end.
                if alive && !self.gone && !self.kill_delivered {
                    self.shutdown_at.get_or_insert(self.now);
                    expected.kill = self.want_kill();
                }
                self.lc.handle_kill(self.now);
            }
            Op::Abandoned(kill) => {
                let first = !std::mem::replace(&mut self.abandoned, true);
                // Dropping the handles changes nothing after a shutdown or
                // a kill was asked, or after the exit.
                if first && self.shutdown_at.is_none() && alive && !self.kill_delivered {
                    if kill && !self.gone {
                        expected.kill = self.want_kill();
                    } else if !kill {
                        expected.close = self.want_close();
                    }
                }
                self.lc.handle_abandoned(kill, self.now);
            }
            Op::DriverStopped => {
                let first = !std::mem::replace(&mut self.driver_stopped, true);
                if first && alive && !self.gone && !self.kill_delivered {
                    expected.kill = self.want_kill();
                }
                self.lc.handle_driver_stopped(self.now);
            }
            Op::Stalled => {
                if alive {
                    expected.close = self.want_close();
                }
                self.lc.handle_close_stdin(self.now);
            }
            Op::OutboundDrained => self.lc.handle_outbound_drained(self.now),
            Op::OutboundPending => self.lc.handle_outbound_pending(self.now),
            Op::StdinClosed => {
                self.stdin_reported_closed = true;
                self.lc.handle_stdin_closed(self.now);
            }
            Op::Exit(exit) => {
                if alive {
                    self.exit = Some((exit, self.now, self.ended_by(exit)));
                }
                self.lc.handle_exit(exit, self.now);
            }
            Op::StdoutEof => {
                self.stdout_eof = true;
                self.lc.handle_stdout_eof(self.now);
            }
            Op::StderrEof => {
                self.stderr_eof = true;
                self.lc.handle_stderr_eof(self.now);
            }
            Op::SignalFailed(signal, error) => {
                match signal {
                    Signal::Term => self.term_delivered = false,
                    Signal::Kill => self.kill_delivered = false,
                }
                self.gone |= error == SignalError::NoSuchProcess;
                self.lc.handle_signal_failed(signal, error, self.now);
            }
            Op::Swept(swept) => {
                if self.sweeps == 1 && self.swept.is_none() && self.endings == 0 {
                    self.swept = Some(swept);
                }
                self.lc.handle_swept(swept, self.now);
            }
            Op::SweepProgress(so_far, passed) => {
                if self.sweeps == 1 && self.swept.is_none() {
                    self.sweep_so_far = Some((so_far, passed));
                }
                self.lc.handle_sweep_progress(so_far, passed, self.now);
            }
            Op::Timeout => self.lc.handle_timeout(self.now),
            Op::StaleTimeout(back) => {
                call_now = self.now.checked_sub(back).unwrap_or(self.now);
                self.lc.handle_timeout(call_now);
            }
            Op::Advance(by) => {
                self.now += by;
                call_now = self.now;
                self.lc.handle_timeout(self.now);
            }
            Op::AdvanceToDeadline => {
                if let Some(deadline) = self.lc.poll_timeout() {
                    self.now = self.now.max(deadline);
                }
                call_now = self.now;
                self.lc.handle_timeout(self.now);
            }
        }
        let (close_before, kill_before) = (self.close_asked, self.kill_asked);
        self.drain(call_now)?;
        if expected.close {
            check!(
                self.close_asked > close_before,
                "{op:?} did not close stdin at once"
            );
        }
        if expected.kill {
            check!(
                self.kill_asked > kill_before,
                "{op:?} did not ask SIGKILL at once"
            );
        }
        Ok(())
    }

    /// Runs the clock out: every deadline fires and none is left; a live
    /// child is killed in the end unless ESRCH said it is gone; and a reaped
    /// child (reaped here if it was not yet, its sweep reported) ends the
    /// machine exactly once.
    ///
    /// # Errors
    ///
    /// The first rule the machine broke, in words.
    pub fn finish(&mut self) -> Result<(), Violation> {
        for _ in 0..10 {
            self.apply(&Op::AdvanceToDeadline)?;
        }
        check_eq!(
            self.lc.poll_timeout(),
            None,
            "a deadline survived running the clock out"
        );
        if self.exit.is_none() {
            check_eq!(self.endings, 0, "an ending without an exit");
            if (self.shutdown_at.is_some() || self.kill_wanted) && !self.gone {
                check!(self.kill_asked >= 1, "a live child is killed in the end");
            }
            self.apply(&Op::Exit(Exit::Signal(9)))?;
        }
        if self.swept.is_none() {
            self.apply(&Op::Swept(Swept::default()))?;
        }
        self.apply(&Op::StdoutEof)?;
        self.apply(&Op::StderrEof)?;
        check_eq!(self.endings, 1, "a reaped child ends exactly once");
        check_eq!(self.lc.phase(), Phase::Done, "phase after the end");
        check_eq!(
            self.sweeps,
            1,
            "sweeps with process_group = {}",
            self.process_group
        );
        Ok(())
    }

    /// Stdin may now be closed without a shutdown; whether the machine must
    /// ask for it (it was neither asked nor reported closed before).
    fn want_close(&mut self) -> bool {
        self.close_wanted = true;
        self.close_asked == 0 && !self.stdin_reported_closed
    }

    /// SIGKILL may now skip the graces; the machine must ask it at once
    /// (always `true`, for symmetry with [`want_close`](Self::want_close)).
    fn want_kill(&mut self) -> bool {
        self.kill_wanted = true;
        true
    }

    /// How an exit observed now must be reported. A death by SIGTERM is
    /// never SIGKILL's doing, even when SIGKILL went out before the exit was
    /// seen (a clock that jumps past the term grace): SIGKILL cannot be
    /// outlived.
    fn ended_by(&self, exit: Exit) -> EndedBy {
        let died_of_term = exit == Exit::Signal(Signal::Term.number());
        if self.kill_delivered && !died_of_term {
            EndedBy::Sigkill
        } else if self.term_delivered {
            EndedBy::Sigterm
        } else if self.close_asked > 0 {
            EndedBy::StdinClose
        } else {
            EndedBy::OnItsOwn
        }
    }

    /// Whether the end must be known by now: once the child was reaped,
    /// when the sweep was reported (or its deadline passed) and both pipes
    /// reached EOF or `drain_grace` passed since the exit, or at once when
    /// the driver stopped (nobody reads the pipes any more).
    fn end_due(&self) -> bool {
        if self.exit.is_none() {
            return false;
        }
        let pipes_done = (self.stdout_eof && self.stderr_eof) || self.drain_over;
        (self.swept.is_some() && pipes_done) || self.driver_stopped
    }

    /// What the input at `call_now` decided by the clock: the sweep's wait
    /// ([`SWEEP_WAIT`] once it ended something in a pass, else
    /// [`SWEEP_FIRST_END_WAIT`] longer; then what it found counts), and
    /// the drain grace, which once passed stays passed.
    fn settle(&mut self, call_now: Instant) {
        if let (Some(at), None, 0) = (self.sweep_asked_at, self.swept, self.endings) {
            let passed = |wait: Duration| at.checked_add(wait).is_some_and(|d| call_now >= d);
            let ended_something = self
                .sweep_so_far
                .is_some_and(|(swept, passed)| passed && swept.ended > 0);
            if (passed(SWEEP_WAIT) && ended_something) || passed(SWEEP_WAIT + SWEEP_FIRST_END_WAIT)
            {
                self.swept = Some(
                    self.sweep_so_far
                        .map(|(swept, _)| swept)
                        .unwrap_or_default(),
                );
            }
        }
        if let Some((_, exit_now, _)) = self.exit {
            let deadline = exit_now.checked_add(self.config.drain_grace);
            self.drain_over |= deadline.is_some_and(|d| call_now >= d);
        }
    }

    /// Drains the machine's outputs; `call_now` is the `now` of the input
    /// that produced them.
    fn drain(&mut self, call_now: Instant) -> Result<(), Violation> {
        while let Some(action) = self.lc.poll_action() {
            self.check_action(action, call_now)?;
        }
        self.settle(call_now);
        check!(
            self.close_asked <= 1,
            "stdin closed {} times",
            self.close_asked
        );
        check!(self.sweeps <= 1, "{} sweeps", self.sweeps);
        if self.exit.is_some() || self.driver_stopped {
            check_eq!(
                self.sweeps,
                1,
                "the sweep is asked at the exit or when the driver stops"
            );
        }

        if let Some(ending) = self.lc.poll_end() {
            let Some((exit, exit_now, ended_by)) = self.exit else {
                return Err(format!("an ending without an exit: {ending:?}"));
            };
            check!(self.end_due(), "an ending before it was due");
            let since = self.shutdown_at.unwrap_or(self.start);
            let swept = self.swept.unwrap_or_default();
            let mut expected =
                ExitReport::new(exit, ended_by, exit_now.saturating_duration_since(since));
            expected.shutdown_requested = self.shutdown_at.is_some();
            // Holders found by the sweep held the pipes, drained or not.
            expected.pipes_drained = self.stdout_eof && self.stderr_eof && !swept.held_pipes;
            expected.stray_processes_ended = swept.ended;
            check_eq!(ending, expected, "the ending");
            self.endings += 1;
        }
        check!(self.endings <= 1, "more than one ending");
        if self.end_due() {
            check_eq!(self.endings, 1, "the end is due and was not reported");
        }

        let phase = self.lc.phase();
        check!(
            phase >= self.phase,
            "phase went back from {:?} to {phase:?}",
            self.phase
        );
        let timeout = self.lc.poll_timeout();
        if let (true, Some(before), Some(after)) = (phase == self.phase, self.timeout, timeout) {
            check!(after >= before, "poll_timeout went backwards in {phase:?}");
        }
        if self.exit.is_some() {
            check!(phase >= Phase::Exited, "{phase:?} after the exit");
        }
        self.phase = phase;
        self.timeout = timeout;
        Ok(())
    }

    fn check_action(&mut self, action: Action, call_now: Instant) -> Result<(), Violation> {
        let exited = self.exit.is_some();
        match action {
            Action::CloseStdin => {
                check!(!exited, "CloseStdin after the exit was observed");
                check!(
                    self.shutdown_at.is_some() || self.close_wanted,
                    "CloseStdin without shutdown, stall or dropped handles"
                );
                self.close_asked += 1;
            }
            Action::Signal(signal) => self.check_signal(signal, call_now)?,
            Action::Sweep => {
                check!(
                    exited || self.driver_stopped,
                    "Sweep before the exit (the driver runs)"
                );
                self.sweeps += 1;
                self.sweep_asked_at.get_or_insert(call_now);
            }
        }
        Ok(())
    }

    fn check_signal(&mut self, signal: Signal, call_now: Instant) -> Result<(), Violation> {
        check!(self.exit.is_none(), "{signal} after the exit was observed");
        check!(!self.gone, "{signal} after ESRCH");
        match signal {
            Signal::Term => {
                check!(!self.term_delivered, "SIGTERM asked again while it stands");
                check_eq!(self.kill_asked, 0, "SIGTERM after SIGKILL");
            }
            Signal::Kill => {
                check!(!self.kill_delivered, "SIGKILL asked again while it stands");
            }
        }
        // The graceful path; a kill asked at once skips it.
        if !(signal == Signal::Kill && self.kill_wanted) {
            let Some(shutdown_at) = self.shutdown_at else {
                return Err(format!("{signal} without shutdown or kill"));
            };
            let since = call_now.saturating_duration_since(shutdown_at);
            check!(
                since >= self.config.stdin_grace,
                "{signal} {since:?} after shutdown"
            );
            check!(
                self.close_asked == 1 || self.stdin_reported_closed,
                "{signal} while stdin is open"
            );
            if signal == Signal::Kill {
                check!(self.term_asked >= 1, "SIGKILL without SIGTERM first");
                let both = self.config.stdin_grace + self.config.term_grace;
                check!(since >= both, "SIGKILL {since:?} after shutdown");
            }
        }
        match signal {
            Signal::Term => {
                self.term_asked += 1;
                self.term_delivered = true;
            }
            Signal::Kill => {
                self.kill_asked += 1;
                self.kill_delivered = true;
            }
        }
        Ok(())
    }
}
