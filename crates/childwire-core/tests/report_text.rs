//! The exit report's text never contradicts itself or what happened (C15):
//! random lifecycles, each ended by a random exit, and what their report
//! says checked against the steps the machine actually handed out.

use std::collections::BTreeSet;
use std::time::{Duration, Instant};

use childwire_core::{
    Action, EndedBy, Exit, ExitReport, Lifecycle, LifecycleConfig, Signal, SignalError, Swept,
};
use proptest::prelude::*;

/// One input to the lifecycle, or a move of the clock.
#[derive(Debug, Clone, Copy)]
enum Op {
    Shutdown,
    Kill,
    Abandoned(bool),
    DriverStopped,
    CloseStdin,
    OutboundDrained,
    OutboundPending,
    StdinClosed,
    Exit(Exit),
    StdoutEof,
    StderrEof,
    SignalFailed(Signal, SignalError),
    Advance(u16),
    ToDeadline,
}

fn exit() -> impl Strategy<Value = Exit> {
    prop_oneof![
        (0..4i32).prop_map(Exit::Code),
        Just(Exit::Signal(9)),
        Just(Exit::Signal(15)),
        (1..32i32).prop_map(Exit::Signal),
    ]
}

fn signal() -> impl Strategy<Value = Signal> {
    prop_oneof![Just(Signal::Term), Just(Signal::Kill)]
}

fn signal_error() -> impl Strategy<Value = SignalError> {
    prop_oneof![
        Just(SignalError::NoSuchProcess),
        Just(SignalError::PermissionDenied),
        Just(SignalError::Other { errno: None }),
    ]
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        3 => Just(Op::Shutdown),
        1 => Just(Op::Kill),
        1 => any::<bool>().prop_map(Op::Abandoned),
        1 => Just(Op::DriverStopped),
        1 => Just(Op::CloseStdin),
        2 => Just(Op::OutboundDrained),
        1 => Just(Op::OutboundPending),
        1 => Just(Op::StdinClosed),
        1 => exit().prop_map(Op::Exit),
        1 => Just(Op::StdoutEof),
        1 => Just(Op::StderrEof),
        2 => (signal(), signal_error()).prop_map(|(s, e)| Op::SignalFailed(s, e)),
        2 => (0..5000u16).prop_map(Op::Advance),
        4 => Just(Op::ToDeadline),
    ]
}

fn config() -> impl Strategy<Value = LifecycleConfig> {
    (0..3000u64, 0..3000u64, 0..2000u64).prop_map(|(stdin, term, drain)| {
        let mut config = LifecycleConfig::default();
        config.stdin_grace = Duration::from_millis(stdin);
        config.term_grace = Duration::from_millis(term);
        config.drain_grace = Duration::from_millis(drain);
        config
    })
}

/// A lifecycle driven by the ops, with what it handed out recorded from
/// its outputs alone.
struct Run {
    lc: Lifecycle,
    now: Instant,
    swept: Swept,
    /// Steps handed out and not reported failed.
    steps: BTreeSet<EndedBy>,
    /// `steps` and whether shutdown was asked, when the first exit came in.
    at_exit: Option<(Exit, BTreeSet<EndedBy>, bool)>,
    /// The sweep was reported with `swept`.
    sweep_reported: bool,
    report: Option<ExitReport>,
}

impl Run {
    fn apply(&mut self, op: Op) {
        let now = self.now;
        match op {
            Op::Shutdown => self.lc.handle_shutdown(now),
            Op::Kill => self.lc.handle_kill(now),
            Op::Abandoned(kill) => self.lc.handle_abandoned(kill, now),
            Op::DriverStopped => self.lc.handle_driver_stopped(now),
            Op::CloseStdin => self.lc.handle_close_stdin(now),
            Op::OutboundDrained => self.lc.handle_outbound_drained(now),
            Op::OutboundPending => self.lc.handle_outbound_pending(now),
            Op::StdinClosed => self.lc.handle_stdin_closed(now),
            Op::Exit(exit) => {
                if self.at_exit.is_none() {
                    let shutdown = self.lc.shutdown_requested();
                    self.at_exit = Some((exit, self.steps.clone(), shutdown));
                }
                self.lc.handle_exit(exit, now);
            }
            Op::StdoutEof => self.lc.handle_stdout_eof(now),
            Op::StderrEof => self.lc.handle_stderr_eof(now),
            Op::SignalFailed(signal, err) => {
                self.steps.remove(&EndedBy::from(signal));
                self.lc.handle_signal_failed(signal, err, now);
            }
            Op::Advance(ms) => {
                self.now += Duration::from_millis(u64::from(ms));
                self.lc.handle_timeout(self.now);
            }
            Op::ToDeadline => {
                if let Some(deadline) = self.lc.poll_timeout() {
                    self.now = self.now.max(deadline);
                }
                self.lc.handle_timeout(self.now);
            }
        }
        self.drain();
    }

    fn drain(&mut self) {
        while let Some(action) = self.lc.poll_action() {
            // Whatever the inputs: no step after the exit was observed (the
            // PID may be reused), none twice while it stands, one sweep.
            match action {
                Action::CloseStdin => {
                    assert!(self.at_exit.is_none(), "CloseStdin after the exit");
                    assert!(self.steps.insert(EndedBy::StdinClose), "stdin closed twice");
                }
                Action::Signal(signal) => {
                    assert!(self.at_exit.is_none(), "{signal} after the exit");
                    let fresh = self.steps.insert(EndedBy::from(signal));
                    assert!(fresh, "{signal} asked again before it failed");
                }
                Action::Sweep => {
                    assert!(!self.sweep_reported, "a second sweep");
                    self.sweep_reported = true;
                    self.lc.handle_swept(self.swept, self.now);
                }
            }
        }
        if let Some(report) = self.lc.poll_end() {
            assert!(self.report.is_none(), "a second report");
            self.report = Some(report);
        }
    }
}

/// Checks `text`, the report of a child that exited with `exit` after the
/// lifecycle handed out `steps`, against those facts.
fn check_text(
    text: &str,
    report: &ExitReport,
    exit: Exit,
    steps: &BTreeSet<EndedBy>,
    shutdown: bool,
) -> Result<(), TestCaseError> {
    let died_of = |signal: Signal| exit == Exit::Signal(signal.number());
    let rest = text
        .strip_prefix(&exit.to_string())
        .ok_or_else(|| TestCaseError::fail(format!("{text:?} does not start with {exit}")))?;
    prop_assert!(
        !(died_of(Signal::Term) && text.contains("after SIGKILL")),
        "{text:?}: SIGKILL cannot be outlived"
    );
    let named = [
        EndedBy::Sigkill,
        EndedBy::Sigterm,
        EndedBy::StdinClose,
        EndedBy::OnItsOwn,
    ]
    .into_iter()
    .find(|step| rest.starts_with(&format!(" {step}")));
    match named {
        Some(EndedBy::OnItsOwn) => prop_assert!(
            !steps.contains(&EndedBy::StdinClose) && !steps.contains(&EndedBy::Sigterm),
            "{text:?} after {steps:?}"
        ),
        Some(step) => prop_assert!(steps.contains(&step), "{text:?} after {steps:?}"),
        None => prop_assert!(
            [Signal::Term, Signal::Kill]
                .into_iter()
                .any(|signal| died_of(signal) && steps.contains(&EndedBy::from(signal))),
            "{text:?} names no step, so the exit must be the signal sent, after {steps:?}"
        ),
    }
    // A delivered SIGKILL ended the child unless it had died of SIGTERM.
    if steps.contains(&EndedBy::Sigkill) && !died_of(Signal::Term) {
        prop_assert!(text.contains("SIGKILL"), "{text:?} after {steps:?}");
    }
    prop_assert_eq!(text.contains(" after shutdown"), shutdown, "{}", text);
    let stray = report.stray_processes_ended;
    prop_assert_eq!(
        text.contains(" left behind"),
        stray > 0,
        "{} with {} stray",
        text,
        stray
    );
    prop_assert!(!text.chars().any(char::is_control), "{text:?}");
    prop_assert_eq!(
        text.contains("; last stderr: "),
        !exit.success() && report.stderr_summary().is_some(),
        "{}",
        text
    );
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(2048))]

    #[test]
    fn c15_the_report_text_says_what_happened_and_never_contradicts_itself(
        config in config(),
        ops in prop::collection::vec(op(), 0..30),
        final_exit in exit(),
        swept in (0..3u32, any::<bool>()).prop_map(|(ended, held_pipes)| Swept { ended, held_pipes }),
        stderr in prop_oneof![Just(""), Just("loading\n"), Just("Error: boom\r\x1b[2K\n")],
        unreceived in 0..3u64,
        held_back in any::<bool>(),
    ) {
        let start = Instant::now();
        let mut run = Run {
            lc: Lifecycle::new(config, true, start),
            now: start,
            swept,
            steps: BTreeSet::new(),
            at_exit: None,
            sweep_reported: false,
            report: None,
        };
        run.lc.handle_outbound_drained(start);
        for op in ops {
            run.apply(op);
        }
        // The clock runs out; a child still alive is reaped.
        for _ in 0..4 {
            run.apply(Op::ToDeadline);
        }
        run.apply(Op::Exit(final_exit));
        run.apply(Op::StdoutEof);
        run.apply(Op::StderrEof);
        run.apply(Op::ToDeadline);

        let (exit, steps, shutdown) = run.at_exit.clone().expect("an exit went in");
        let mut report = run.report.take().expect("a reaped child is reported");
        prop_assert_eq!(report.exit, exit);
        // The sweep's count, unless the end was decided without it (the
        // drain grace ran out first).
        let stray = report.stray_processes_ended;
        prop_assert!(
            stray == 0 || (run.sweep_reported && stray == swept.ended),
            "{} stray, sweep reported: {}",
            stray,
            run.sweep_reported
        );
        // What the supervisor adds to the lifecycle's report.
        report.stderr_tail = stderr.to_owned();
        report.unreceived_messages = unreceived;
        report.unreceived_bytes = unreceived * 7;
        report.stdout_held_back = held_back;
        check_text(&report.to_string(), &report, exit, &steps, shutdown)?;
    }
}

/// The case the issue saw under a paused clock, and its cousin: SIGKILL went
/// out, the child had died of SIGTERM (ours, or someone else's after ours
/// failed).
#[test]
fn c15_a_child_that_died_of_sigterm_is_never_reported_killed_after_sigkill() {
    for term_fails in [false, true] {
        let start = Instant::now();
        let mut config = LifecycleConfig::default();
        config.stdin_grace = Duration::ZERO;
        config.term_grace = Duration::ZERO;
        let mut lc = Lifecycle::new(config, true, start);
        lc.handle_outbound_drained(start);
        lc.handle_shutdown(start);
        assert_eq!(lc.poll_action(), Some(Action::CloseStdin));
        assert_eq!(lc.poll_action(), Some(Action::Signal(Signal::Term)));
        if term_fails {
            lc.handle_signal_failed(Signal::Term, SignalError::PermissionDenied, start);
        }
        assert_eq!(lc.poll_action(), Some(Action::Signal(Signal::Kill)));
        lc.handle_exit(Exit::Signal(15), start);
        assert_eq!(lc.poll_action(), Some(Action::Sweep));
        lc.handle_swept(Swept::default(), start);
        lc.handle_stdout_eof(start);
        lc.handle_stderr_eof(start);
        let report = lc.poll_end().expect("the end");
        let expected = if term_fails {
            "killed by SIGTERM after stdin was closed, 0 ms after shutdown"
        } else {
            "killed by SIGTERM, 0 ms after shutdown"
        };
        assert_eq!(report.to_string(), expected, "term fails: {term_fails}");
    }
}
