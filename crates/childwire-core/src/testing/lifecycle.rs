//! A model of the [`Lifecycle`] contract checked against the real machine
//! after every input. The property test and the fuzz target hold the
//! machine to the same rules; each brings its own way of generating [`Op`]s
//! (with the `arbitrary` feature, `Op` implements `Arbitrary`).
//!
//! The expectations come from what the machine was told and what it asked
//! for, never from its internals: phases only move forward; no signal after
//! the exit was observed or after ESRCH; SIGTERM and SIGKILL never before
//! their graces; `poll_timeout` never goes backwards within a phase; and an
//! observed exit ends the machine exactly once, with an ending that says what
//! happened.

use std::time::{Duration, Instant};

use crate::ending::{EndedBy, Exit, Signal, Swept};
use crate::lifecycle::{Action, Lifecycle, LifecycleConfig, Phase, SignalError};
use crate::report::ExitReport;

/// One input to the machine, or a move of the clock.
#[derive(Debug, Clone, Copy)]
pub enum Op {
    /// [`Lifecycle::handle_shutdown`].
    Shutdown,
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
        Ok(match u.int_in_range(0..=11u8)? {
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
    shutdown_at: Option<Instant>,
    /// First exit passed in, with the `now` of that call and how it must be
    /// reported.
    exit: Option<(Exit, Instant, EndedBy)>,
    stdin_reported_closed: bool,
    term_delivered: bool,
    kill_delivered: bool,
    close_asked: u32,
    term_asked: u32,
    kill_asked: u32,
    sweeps: u32,
    gone: bool,
    stdout_eof: bool,
    stderr_eof: bool,
    endings: u32,
    phase: Phase,
    timeout: Option<Instant>,
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
            term_delivered: false,
            kill_delivered: false,
            close_asked: 0,
            term_asked: 0,
            kill_asked: 0,
            sweeps: 0,
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
        match *op {
            Op::Shutdown => {
                if self.shutdown_at.is_none() && self.exit.is_none() {
                    self.shutdown_at = Some(self.now);
                }
                self.lc.handle_shutdown(self.now);
            }
            Op::OutboundDrained => self.lc.handle_outbound_drained(self.now),
            Op::OutboundPending => self.lc.handle_outbound_pending(self.now),
            Op::StdinClosed => {
                self.stdin_reported_closed = true;
                self.lc.handle_stdin_closed(self.now);
            }
            Op::Exit(exit) => {
                if self.exit.is_none() {
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
        self.drain(call_now)
    }

    /// Runs the clock out: every deadline fires and none is left; a live
    /// child is killed in the end unless ESRCH said it is gone; and a reaped
    /// child (reaped here if it was not yet) ends the machine exactly once.
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
            if self.shutdown_at.is_some() && !self.gone {
                check_eq!(self.kill_asked, 1, "a live child is killed in the end");
            }
            self.apply(&Op::Exit(Exit::Signal(9)))?;
            self.apply(&Op::StdoutEof)?;
            self.apply(&Op::StderrEof)?;
        }
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

    /// Drains the machine's outputs; `call_now` is the `now` of the input
    /// that produced them.
    fn drain(&mut self, call_now: Instant) -> Result<(), Violation> {
        while let Some(action) = self.lc.poll_action() {
            self.check_action(action, call_now)?;
        }
        check!(
            self.close_asked <= 1 && self.term_asked <= 1 && self.kill_asked <= 1,
            "an action asked twice: close {}, term {}, kill {}",
            self.close_asked,
            self.term_asked,
            self.kill_asked
        );
        check!(self.sweeps <= 1, "{} sweeps", self.sweeps);

        if let Some(ending) = self.lc.poll_end() {
            let Some((exit, exit_now, ended_by)) = self.exit else {
                return Err(format!("an ending without an exit: {ending:?}"));
            };
            let since = self.shutdown_at.unwrap_or(self.start);
            let mut expected =
                ExitReport::new(exit, ended_by, exit_now.saturating_duration_since(since));
            expected.shutdown_requested = self.shutdown_at.is_some();
            expected.pipes_drained = self.stdout_eof && self.stderr_eof;
            check_eq!(ending, expected, "the ending");
            self.endings += 1;
        }
        check!(self.endings <= 1, "more than one ending");

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
                check!(self.shutdown_at.is_some(), "CloseStdin without shutdown");
                self.close_asked += 1;
            }
            Action::Signal(signal) => {
                check!(!exited, "{signal} after the exit was observed");
                check!(!self.gone, "{signal} after ESRCH");
                let Some(shutdown_at) = self.shutdown_at else {
                    return Err(format!("{signal} without shutdown"));
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
                match signal {
                    Signal::Term => {
                        self.term_asked += 1;
                        self.term_delivered = true;
                    }
                    Signal::Kill => {
                        check_eq!(self.term_asked, 1, "SIGKILL without SIGTERM first");
                        let both = self.config.stdin_grace + self.config.term_grace;
                        check!(since >= both, "SIGKILL {since:?} after shutdown");
                        self.kill_asked += 1;
                        self.kill_delivered = true;
                    }
                }
            }
            Action::Sweep => {
                check!(exited, "Sweep before the exit");
                self.sweeps += 1;
                self.lc.handle_swept(Swept::default(), call_now);
            }
        }
        Ok(())
    }
}
