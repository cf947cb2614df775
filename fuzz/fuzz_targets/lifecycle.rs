//! Fuzzing of `Lifecycle` with arbitrary sequences of inputs and clock steps
//! (stale times included), checking the contract after every drain: phases
//! only move forward; no signal after the exit was observed; SIGTERM and
//! SIGKILL never before their graces; `poll_timeout` never goes backwards
//! within a phase; and an observed exit ends the machine exactly once, with
//! an ending that says what happened.

#![no_main]

use std::time::{Duration, Instant};

use arbitrary::Arbitrary;
use childwire_core::lifecycle::{
    Action, EndedBy, Ending, Exit, Lifecycle, LifecycleConfig, Phase, Signal, SignalError,
};
use libfuzzer_sys::fuzz_target;

#[derive(Debug, Arbitrary)]
struct Input {
    /// Graces in milliseconds; zero is the interesting edge.
    stdin_grace: u16,
    term_grace: u16,
    drain_grace: u16,
    process_group: bool,
    ops: Vec<Op>,
}

#[derive(Debug, Clone, Copy, Arbitrary)]
enum FuzzSignal {
    Term,
    Kill,
}

#[derive(Debug, Clone, Copy, Arbitrary)]
enum FuzzError {
    NoSuchProcess,
    PermissionDenied,
    Other(Option<i32>),
}

#[derive(Debug, Clone, Copy, Arbitrary)]
enum Op {
    Shutdown,
    OutboundDrained,
    OutboundPending,
    StdinClosed,
    ExitCode(i32),
    ExitSignal(i32),
    StdoutEof,
    StderrEof,
    SignalFailed(FuzzSignal, FuzzError),
    Timeout,
    /// `handle_timeout` with a `now` this many ms in the past.
    StaleTimeout(u16),
    /// Moves the clock this many ms forward, then `handle_timeout`.
    Advance(u16),
    /// Moves the clock to `poll_timeout`, then `handle_timeout`.
    AdvanceToDeadline,
}

/// What the machine was told and what it asked for, independent of its
/// internals.
struct Model {
    config: LifecycleConfig,
    start: Instant,
    now: Instant,
    shutdown_at: Option<Instant>,
    exit: Option<(Exit, Instant, EndedBy)>,
    stdin_reported_closed: bool,
    close_asked: u32,
    term_asked: u32,
    kill_asked: u32,
    sweeps: u32,
    term_delivered: bool,
    kill_delivered: bool,
    gone: bool,
    stdout_eof: bool,
    stderr_eof: bool,
    endings: u32,
    phase: Phase,
    timeout: Option<Instant>,
}

impl Model {
    fn ended_by(&self) -> EndedBy {
        if self.kill_delivered {
            EndedBy::Sigkill
        } else if self.term_delivered {
            EndedBy::Sigterm
        } else if self.close_asked > 0 {
            EndedBy::StdinClose
        } else {
            EndedBy::OnItsOwn
        }
    }

    fn apply(&mut self, lc: &mut Lifecycle, op: Op) {
        let mut call_now = self.now;
        match op {
            Op::Shutdown => {
                if self.shutdown_at.is_none() && self.exit.is_none() {
                    self.shutdown_at = Some(self.now);
                }
                lc.handle_shutdown(self.now);
            }
            Op::OutboundDrained => lc.handle_outbound_drained(self.now),
            Op::OutboundPending => lc.handle_outbound_pending(self.now),
            Op::StdinClosed => {
                self.stdin_reported_closed = true;
                lc.handle_stdin_closed(self.now);
            }
            Op::ExitCode(code) => self.exit(lc, Exit::Code(code)),
            Op::ExitSignal(signo) => self.exit(lc, Exit::Signal(signo)),
            Op::StdoutEof => {
                self.stdout_eof = true;
                lc.handle_stdout_eof(self.now);
            }
            Op::StderrEof => {
                self.stderr_eof = true;
                lc.handle_stderr_eof(self.now);
            }
            Op::SignalFailed(signal, error) => {
                let signal = match signal {
                    FuzzSignal::Term => {
                        self.term_delivered = false;
                        Signal::Term
                    }
                    FuzzSignal::Kill => {
                        self.kill_delivered = false;
                        Signal::Kill
                    }
                };
                let error = match error {
                    FuzzError::NoSuchProcess => {
                        self.gone = true;
                        SignalError::NoSuchProcess
                    }
                    FuzzError::PermissionDenied => SignalError::PermissionDenied,
                    FuzzError::Other(errno) => SignalError::Other { errno },
                };
                lc.handle_signal_failed(signal, error, self.now);
            }
            Op::Timeout => lc.handle_timeout(self.now),
            Op::StaleTimeout(back) => {
                let back = Duration::from_millis(u64::from(back));
                call_now = self.now.checked_sub(back).unwrap_or(self.now);
                lc.handle_timeout(call_now);
            }
            Op::Advance(by) => {
                self.now += Duration::from_millis(u64::from(by));
                call_now = self.now;
                lc.handle_timeout(self.now);
            }
            Op::AdvanceToDeadline => {
                if let Some(deadline) = lc.poll_timeout() {
                    self.now = self.now.max(deadline);
                }
                call_now = self.now;
                lc.handle_timeout(self.now);
            }
        }
        self.drain(lc, call_now);
    }

    fn exit(&mut self, lc: &mut Lifecycle, exit: Exit) {
        if self.exit.is_none() {
            self.exit = Some((exit, self.now, self.ended_by()));
        }
        lc.handle_exit(exit, self.now);
    }

    fn drain(&mut self, lc: &mut Lifecycle, call_now: Instant) {
        while let Some(action) = lc.poll_action() {
            let exited = self.exit.is_some();
            match action {
                Action::CloseStdin => {
                    assert!(!exited && self.shutdown_at.is_some(), "stray CloseStdin");
                    self.close_asked += 1;
                }
                Action::Signal(signal) => {
                    assert!(!exited, "{signal} after the exit was observed");
                    assert!(!self.gone, "{signal} after ESRCH");
                    let shutdown_at = self.shutdown_at.expect("a signal without shutdown");
                    let since = call_now.saturating_duration_since(shutdown_at);
                    assert!(
                        since >= self.config.stdin_grace,
                        "{signal} {since:?} after shutdown"
                    );
                    assert!(
                        self.close_asked == 1 || self.stdin_reported_closed,
                        "{signal} while stdin is open"
                    );
                    match signal {
                        Signal::Term => {
                            self.term_asked += 1;
                            self.term_delivered = true;
                        }
                        Signal::Kill => {
                            assert_eq!(self.term_asked, 1, "SIGKILL without SIGTERM first");
                            let both = self.config.stdin_grace + self.config.term_grace;
                            assert!(since >= both, "SIGKILL {since:?} after shutdown");
                            self.kill_asked += 1;
                            self.kill_delivered = true;
                        }
                    }
                }
                Action::SweepGroup => {
                    assert!(exited && self.config.process_group, "stray SweepGroup");
                    self.sweeps += 1;
                }
            }
        }
        assert!(self.close_asked <= 1 && self.term_asked <= 1 && self.kill_asked <= 1);
        assert!(self.sweeps <= 1);

        if let Some(ending) = lc.poll_end() {
            let (exit, exit_now, ended_by) = self.exit.expect("an ending without an exit");
            let since = self.shutdown_at.unwrap_or(self.start);
            let expected = Ending {
                exit,
                ended_by,
                shutdown_requested: self.shutdown_at.is_some(),
                elapsed: exit_now.saturating_duration_since(since),
                pipes_drained: self.stdout_eof && self.stderr_eof,
            };
            assert_eq!(ending, expected);
            self.endings += 1;
        }
        assert!(self.endings <= 1, "more than one ending");

        let phase = lc.phase();
        assert!(
            phase >= self.phase,
            "phase went back: {:?} -> {phase:?}",
            self.phase
        );
        let timeout = lc.poll_timeout();
        if phase == self.phase
            && let (Some(before), Some(after)) = (self.timeout, timeout)
        {
            assert!(after >= before, "poll_timeout went backwards in {phase:?}");
        }
        self.phase = phase;
        self.timeout = timeout;
    }
}

fuzz_target!(|input: Input| {
    let ms = |n: u16| Duration::from_millis(u64::from(n));
    let config = LifecycleConfig {
        stdin_grace: ms(input.stdin_grace),
        term_grace: ms(input.term_grace),
        process_group: input.process_group,
        drain_grace: ms(input.drain_grace),
    };
    let start = Instant::now();
    let mut lc = Lifecycle::new(config.clone(), start);
    let mut model = Model {
        config,
        start,
        now: start,
        shutdown_at: None,
        exit: None,
        stdin_reported_closed: false,
        close_asked: 0,
        term_asked: 0,
        kill_asked: 0,
        sweeps: 0,
        term_delivered: false,
        kill_delivered: false,
        gone: false,
        stdout_eof: false,
        stderr_eof: false,
        endings: 0,
        phase: Phase::Running,
        timeout: None,
    };
    for op in input.ops {
        model.apply(&mut lc, op);
    }

    // Run the clock out: every deadline fires, then nothing is left.
    for _ in 0..8 {
        model.apply(&mut lc, Op::AdvanceToDeadline);
    }
    assert_eq!(
        lc.poll_timeout(),
        None,
        "a deadline survived running the clock out"
    );
    if model.exit.is_none() {
        if model.shutdown_at.is_some() && !model.gone {
            assert_eq!(model.kill_asked, 1, "a live child is killed in the end");
        }
        model.apply(&mut lc, Op::ExitSignal(9));
        model.apply(&mut lc, Op::StdoutEof);
        model.apply(&mut lc, Op::StderrEof);
    }
    assert_eq!(model.endings, 1, "a reaped child ends exactly once");
    assert_eq!(lc.phase(), Phase::Done);
    assert_eq!(model.sweeps, u32::from(model.config.process_group));
});
