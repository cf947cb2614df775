//! The lifecycle state machine on a simulated clock (C12–C15).
//!
//! `Sim` is a discrete-event driver: it always jumps to the earliest of the
//! machine's deadline and the scripted child's next event, so a test of a
//! 4 s escalation runs in microseconds and is deterministic. The property
//! test at the end holds random inputs to the shared contract model.

use std::time::{Duration, Instant};

use childwire_core::ExitReport;
use childwire_core::{
    Action, EndedBy, Exit, Lifecycle, LifecycleConfig, Phase, SWEEP_FIRST_END_WAIT, SWEEP_WAIT,
    Signal, SignalError, Swept,
};

const fn ms(n: u64) -> Duration {
    Duration::from_millis(n)
}

/// How the scripted child reacts to the adapter's actions.
#[derive(Debug, Clone, Copy)]
enum Child {
    /// Exits with code 0 `after` its stdin is closed.
    ExitsOnEof { after: Duration },
    /// Ignores EOF; dies by SIGTERM `after` it arrives.
    ExitsOnTerm { after: Duration },
    /// Ignores EOF and SIGTERM; SIGKILL ends it 1 ms later.
    IgnoresAll,
    /// Exits on its own at this time after spawn.
    ExitsAt { at: Duration, exit: Exit },
    /// Ignores EOF, exits on its own before SIGTERM arrives (the signal gets
    /// ESRCH) and is reaped only `reaped_after` the failed signal.
    GoneBeforeTerm { reaped_after: Duration },
    /// Ignores EOF; SIGTERM fails with EPERM; SIGKILL works.
    TermDenied,
    /// Ignores EOF; dies of SIGTERM at once, but its exit is seen only
    /// `seen_after` it (past `term_grace`, as on a clock that jumps ahead
    /// while the exit takes real time to show): SIGKILL is sent meanwhile,
    /// to a child already dead of SIGTERM.
    TermSeenLate { seen_after: Duration },
}

struct Sim {
    lc: Lifecycle,
    start: Instant,
    now: Instant,
    child: Child,
    exit_at: Option<(Instant, Exit)>,
    /// Stdout and stderr reach EOF when the child exits (no grandchild
    /// holds them).
    pipes_close_on_exit: bool,
    actions: Vec<(Duration, Action)>,
    endings: Vec<(Duration, ExitReport)>,
}

impl Sim {
    fn new(config: LifecycleConfig, child: Child) -> Self {
        Self::with_group(config, true, child)
    }

    fn with_group(config: LifecycleConfig, process_group: bool, child: Child) -> Self {
        let start = Instant::now();
        let mut lc = Lifecycle::new(config, process_group, start);
        // The session's write queue is empty at spawn.
        lc.handle_outbound_drained(start);
        let exit_at = match child {
            Child::ExitsAt { at, exit } => Some((start + at, exit)),
            _ => None,
        };
        let mut sim = Sim {
            lc,
            start,
            now: start,
            child,
            exit_at,
            pipes_close_on_exit: true,
            actions: Vec::new(),
            endings: Vec::new(),
        };
        sim.drain();
        sim
    }

    /// A scripted child under the default graces.
    fn with_defaults(child: Child) -> Self {
        Self::new(LifecycleConfig::default(), child)
    }

    /// Keeps stdout and stderr open past the exit, as a grandchild holding
    /// them would.
    fn pipes_held_open(mut self) -> Self {
        self.pipes_close_on_exit = false;
        self
    }

    fn t(&self) -> Duration {
        self.now - self.start
    }

    /// Drains the outputs the way an adapter must, and plays the child.
    fn drain(&mut self) {
        while let Some(action) = self.lc.poll_action() {
            self.play(action);
        }
        if let Some(ending) = self.lc.poll_end() {
            self.endings.push((self.t(), ending));
        }
    }

    /// Takes a signal that is due, as a dropping handle does
    /// (`poll_signal`), and plays the child; then drains the rest.
    fn take_signal(&mut self) -> Option<Signal> {
        let signal = self.lc.poll_signal();
        if let Some(signal) = signal {
            self.play(Action::Signal(signal));
        }
        self.drain();
        signal
    }

    /// Records `action`, handed out now, and plays the child's answer.
    fn play(&mut self, action: Action) {
        self.actions.push((self.t(), action));
        let exited = self.lc.exit().is_some();
        if action == Action::Sweep {
            // The sweep found nothing left behind.
            self.lc.handle_swept(Swept::default(), self.now);
        }
        match (action, self.child) {
            (Action::CloseStdin, Child::ExitsOnEof { after }) if !exited => {
                self.exit_at = Some((self.now + after, Exit::Code(0)));
            }
            (Action::Signal(Signal::Term), Child::ExitsOnTerm { after }) => {
                self.exit_at = Some((self.now + after, Exit::Signal(15)));
            }
            (Action::Signal(Signal::Term), Child::GoneBeforeTerm { reaped_after }) => {
                self.lc
                    .handle_signal_failed(Signal::Term, SignalError::NoSuchProcess, self.now);
                self.exit_at = Some((self.now + reaped_after, Exit::Code(0)));
            }
            (Action::Signal(Signal::Term), Child::TermDenied) => {
                self.lc
                    .handle_signal_failed(Signal::Term, SignalError::PermissionDenied, self.now);
            }
            (Action::Signal(Signal::Term), Child::TermSeenLate { seen_after }) => {
                self.exit_at = Some((self.now + seen_after, Exit::Signal(15)));
            }
            (Action::Signal(Signal::Kill), Child::TermSeenLate { .. }) => {}
            (Action::Signal(Signal::Kill), _) => {
                self.exit_at = Some((self.now + ms(1), Exit::Signal(9)));
            }
            _ => {}
        }
        if action == Action::CloseStdin {
            self.lc.handle_stdin_closed(self.now);
        }
    }

    /// Moves the clock to `to`, firing every child event and deadline on
    /// the way, in time order.
    fn run_until(&mut self, to: Instant) {
        while self.step(Some(to)) {}
        self.now = self.now.max(to);
    }

    /// Runs until nothing more is scheduled; returns the one ending.
    fn run(&mut self) -> ExitReport {
        for _ in 0..100 {
            if !self.step(None) {
                break;
            }
        }
        assert_eq!(
            self.endings.len(),
            1,
            "exactly one ending: {:?}",
            self.endings
        );
        self.endings[0].1.clone()
    }

    /// Fires the earliest event not after `limit`; false if there is none.
    fn step(&mut self, limit: Option<Instant>) -> bool {
        let deadline = self.lc.poll_timeout();
        let child = self.exit_at.map(|(at, _)| at);
        let next = match (deadline, child) {
            (Some(a), Some(b)) => a.min(b),
            (a, b) => match a.or(b) {
                Some(t) => t,
                None => return false,
            },
        };
        if limit.is_some_and(|limit| next > limit) {
            return false;
        }
        self.now = self.now.max(next);
        if let Some((_, exit)) = self.exit_at.filter(|&(at, _)| at <= self.now) {
            self.exit_at = None;
            self.lc.handle_exit(exit, self.now);
            self.drain();
            if self.pipes_close_on_exit {
                self.feed(Lifecycle::handle_stdout_eof);
                self.feed(Lifecycle::handle_stderr_eof);
            }
        } else {
            self.feed(Lifecycle::handle_timeout);
        }
        true
    }

    /// Hands the machine one input at the current time and drains, as an
    /// adapter does after every input.
    fn feed(&mut self, input: fn(&mut Lifecycle, Instant)) {
        input(&mut self.lc, self.now);
        self.drain();
    }

    /// Calls `handle_timeout` at `at` without moving the clock, as an
    /// adapter with a stale or late timer would.
    fn timeout_at(&mut self, at: Instant) {
        self.lc.handle_timeout(at);
        self.drain();
    }

    /// A deadline falls due and the exit is observed at `at`, both before
    /// the adapter gets to drain the actions the deadline decided.
    fn exit_lands_before_the_drain(&mut self, at: Instant, exit: Exit) {
        self.lc.handle_timeout(at);
        self.lc.handle_exit(exit, at);
        self.now = at;
        self.drain();
    }

    fn shutdown(&mut self) {
        self.feed(Lifecycle::handle_shutdown);
    }

    /// Asks for shutdown now and runs to the one ending.
    fn shut_down_and_run(&mut self) -> ExitReport {
        self.shutdown();
        self.run()
    }

    fn actions(&self) -> Vec<(Duration, Action)> {
        self.actions.clone()
    }
}

const CLOSE: Action = Action::CloseStdin;
const TERM: Action = Action::Signal(Signal::Term);
const KILL: Action = Action::Signal(Signal::Kill);
const SWEEP: Action = Action::Sweep;

fn secs(s: u64) -> Duration {
    Duration::from_secs(s)
}

/// The whole escalation, in the order the adapter must act: stdin closed,
/// SIGTERM, SIGKILL, then the sweep once the killed child is reaped.
fn escalation(
    close: Duration,
    term: Duration,
    kill: Duration,
    sweep: Duration,
) -> [(Duration, Action); 4] {
    [(close, CLOSE), (term, TERM), (kill, KILL), (sweep, SWEEP)]
}

/// Only `stdin_grace` and `term_grace` differ from the defaults.
fn graces(stdin_grace: Duration, term_grace: Duration) -> LifecycleConfig {
    let mut config = LifecycleConfig::default();
    config.stdin_grace = stdin_grace;
    config.term_grace = term_grace;
    config
}

/// An ending whose pipes both reached EOF within the drain grace.
fn drained_ending(
    exit: Exit,
    ended_by: EndedBy,
    shutdown_requested: bool,
    elapsed: Duration,
) -> ExitReport {
    let mut report = ExitReport::new(exit, ended_by, elapsed);
    report.shutdown_requested = shutdown_requested;
    report
}

#[test]
fn c12_child_exiting_on_stdin_eof_is_done_without_waiting_for_a_deadline() {
    let mut sim = Sim::with_defaults(Child::ExitsOnEof { after: ms(50) });
    sim.run_until(sim.start + secs(1));
    sim.shutdown();
    assert_eq!(sim.lc.phase(), Phase::StdinClosed);
    let ending = sim.run();
    assert_eq!(
        ending,
        drained_ending(Exit::Code(0), EndedBy::StdinClose, true, ms(50))
    );
    assert_eq!(sim.actions(), [(secs(1), CLOSE), (ms(1050), SWEEP)]);
    assert_eq!(sim.endings[0].0, ms(1050), "reported as soon as it exited");
    assert_eq!(sim.lc.phase(), Phase::Done);
    assert_eq!(sim.lc.poll_timeout(), None);
}

#[test]
fn c12_child_ignoring_eof_exits_on_sigterm_after_stdin_grace() {
    let mut sim = Sim::with_defaults(Child::ExitsOnTerm { after: ms(10) });
    let ending = sim.shut_down_and_run();
    assert_eq!(ending.exit, Exit::Signal(15));
    assert_eq!(ending.ended_by, EndedBy::Sigterm);
    assert_eq!(ending.elapsed, ms(2010));
    assert_eq!(
        sim.actions(),
        [(ms(0), CLOSE), (secs(2), TERM), (ms(2010), SWEEP)]
    );
}

#[test]
fn c12_child_ignoring_eof_and_sigterm_dies_by_sigkill_after_both_graces() {
    let mut sim = Sim::with_defaults(Child::IgnoresAll);
    sim.run_until(sim.start + ms(300));
    let ending = sim.shut_down_and_run();
    assert_eq!(ending.exit, Exit::Signal(9));
    assert_eq!(ending.ended_by, EndedBy::Sigkill);
    assert!(ending.shutdown_requested);
    assert_eq!(ending.elapsed, ms(4001));
    assert_eq!(
        sim.actions(),
        escalation(ms(300), ms(2300), ms(4300), ms(4301))
    );
}

#[test]
fn c12_a_child_dead_of_sigterm_is_reported_so_though_sigkill_was_sent_before_its_exit_was_seen() {
    let mut sim = Sim::with_defaults(Child::TermSeenLate {
        seen_after: secs(3),
    });
    let ending = sim.shut_down_and_run();
    assert_eq!(
        sim.actions(),
        escalation(ms(0), secs(2), secs(4), secs(5)),
        "SIGKILL went out before the exit was seen"
    );
    assert_eq!(ending.exit, Exit::Signal(15));
    assert_eq!(ending.ended_by, EndedBy::Sigterm, "{ending}");
    assert!(!ending.to_string().contains("SIGKILL"), "{ending}");
}

#[test]
fn c31_every_handle_dropped_kills_through_the_lifecycle_and_the_end_says_sigkill() {
    let mut sim = Sim::with_defaults(Child::IgnoresAll);
    sim.run_until(sim.start + ms(300));
    sim.feed(|lc, now| lc.handle_abandoned(true, now));
    // The handles go once: a second call changes nothing.
    sim.feed(|lc, now| lc.handle_abandoned(true, now));
    let ending = sim.run();
    assert_eq!(sim.actions(), [(ms(300), KILL), (ms(301), SWEEP)]);
    assert_eq!(ending.exit, Exit::Signal(9));
    assert_eq!(ending.ended_by, EndedBy::Sigkill, "{ending}");
    assert!(!ending.shutdown_requested);
}

/// The kill a drop decides can be taken at once by the dropping handle
/// (`poll_signal`), ahead of the background task: handed out as
/// `poll_action` would hand it out, so the end still says SIGKILL and the
/// kill is not handed out twice. Nothing but a signal is taken that way.
#[test]
fn c31_the_kill_of_a_drop_is_taken_at_once_and_nothing_else_is() {
    let mut sim = Sim::with_defaults(Child::IgnoresAll);
    sim.run_until(sim.start + ms(300));
    sim.lc.handle_abandoned(true, sim.now);
    assert_eq!(sim.take_signal(), Some(Signal::Kill));
    assert_eq!(sim.take_signal(), None, "the kill is handed out once");
    let ending = sim.run();
    assert_eq!(sim.actions(), [(ms(300), KILL), (ms(301), SWEEP)]);
    assert_eq!(ending.ended_by, EndedBy::Sigkill, "{ending}");

    let mut sim = Sim::with_defaults(Child::ExitsOnEof { after: ms(20) });
    sim.run_until(sim.start + ms(300));
    sim.lc.handle_abandoned(false, sim.now);
    assert_eq!(sim.take_signal(), None, "closing stdin is no signal");
    let ending = sim.run();
    assert_eq!(sim.actions(), [(ms(300), CLOSE), (ms(320), SWEEP)]);
    assert_eq!(ending.ended_by, EndedBy::StdinClose, "{ending}");
}

#[test]
fn c31_every_handle_dropped_without_kill_on_drop_closes_stdin_and_sends_no_signal() {
    let mut sim = Sim::with_defaults(Child::ExitsOnEof { after: ms(20) });
    sim.run_until(sim.start + ms(300));
    sim.feed(|lc, now| lc.handle_abandoned(false, now));
    let ending = sim.run();
    assert_eq!(sim.actions(), [(ms(300), CLOSE), (ms(320), SWEEP)]);
    assert_eq!(ending.exit, Exit::Code(0));
    assert_eq!(ending.ended_by, EndedBy::StdinClose, "{ending}");
}

#[test]
fn c12_graces_are_configurable() {
    let mut sim = Sim::new(graces(ms(100), ms(250)), Child::IgnoresAll);
    sim.shut_down_and_run();
    assert_eq!(sim.actions(), escalation(ms(0), ms(100), ms(350), ms(351)));
}

#[test]
fn c15_child_exiting_before_shutdown_is_reported_as_unexpected() {
    let exit = Exit::Code(1);
    let mut sim = Sim::with_defaults(Child::ExitsAt { at: ms(800), exit });
    let ending = sim.run();
    assert_eq!(
        ending,
        drained_ending(exit, EndedBy::OnItsOwn, false, ms(800))
    );
    assert_eq!(sim.actions(), [(ms(800), SWEEP)]);

    // A shutdown asked afterwards does nothing at all.
    sim.shutdown();
    sim.timeout_at(sim.now + secs(60));
    assert_eq!(sim.actions(), [(ms(800), SWEEP)]);
    assert_eq!(sim.endings.len(), 1);
    assert_eq!(sim.lc.phase(), Phase::Done);
}

#[test]
fn c12_child_exiting_between_sigterm_and_its_deadline_stops_escalation() {
    let mut sim = Sim::with_defaults(Child::ExitsOnTerm { after: ms(1500) });
    let ending = sim.shut_down_and_run();
    assert_eq!(ending.ended_by, EndedBy::Sigterm);
    assert_eq!(ending.elapsed, ms(3500));
    assert_eq!(
        sim.endings[0].0,
        ms(3500),
        "no wait for the SIGKILL deadline"
    );
    assert_eq!(
        sim.actions(),
        [(ms(0), CLOSE), (secs(2), TERM), (ms(3500), SWEEP)]
    );

    // The old SIGKILL deadline passing changes nothing.
    sim.timeout_at(sim.start + secs(10));
    assert_eq!(sim.actions().len(), 3);
}

#[test]
fn c14_esrch_on_sigterm_stops_escalation_and_waits_for_the_reap() {
    let mut sim = Sim::with_defaults(Child::GoneBeforeTerm {
        reaped_after: secs(3),
    });
    sim.shutdown();
    sim.run_until(sim.start + ms(2001));
    assert_eq!(sim.lc.phase(), Phase::Terminating);
    assert_eq!(
        sim.lc.poll_timeout(),
        None,
        "no SIGKILL deadline after ESRCH"
    );
    let ending = sim.run();
    assert_eq!(
        sim.actions(),
        [(ms(0), CLOSE), (secs(2), TERM), (secs(5), SWEEP)]
    );
    assert_eq!(ending.exit, Exit::Code(0));
    // The failed SIGTERM did not end it; it went after its stdin closed.
    assert_eq!(ending.ended_by, EndedBy::StdinClose);
    assert_eq!(ending.elapsed, secs(5));
}

/// ESRCH said the child is gone: no later input sends SIGKILL to it, not
/// the caller's kill, nor every handle dropped with kill-on-drop, nor the
/// driver stopping (which still sweeps what escaped), and the end names
/// no SIGKILL that reached nothing. Dropping the handles acts only without
/// a shutdown, so there the ESRCH comes unasked (any input order is
/// allowed).
#[test]
fn c14_no_input_sends_sigkill_after_esrch() {
    type Input = fn(&mut Lifecycle, Instant);
    let inputs: [(&str, bool, Input); 3] = [
        ("kill", true, |lc, now| lc.handle_kill(now)),
        ("driver stopped", true, |lc, now| {
            lc.handle_driver_stopped(now)
        }),
        ("abandoned", false, |lc, now| lc.handle_abandoned(true, now)),
    ];
    for (name, shutdown, input) in inputs {
        let start = Instant::now();
        let mut lc = Lifecycle::new(graces(ms(0), secs(2)), true, start);
        lc.handle_outbound_drained(start);
        if shutdown {
            lc.handle_shutdown(start);
            assert_eq!(lc.poll_action(), Some(CLOSE), "{name}");
            assert_eq!(lc.poll_action(), Some(TERM), "{name}");
        }
        lc.handle_signal_failed(Signal::Term, SignalError::NoSuchProcess, start);
        input(&mut lc, start + ms(5));
        let mut asked = Vec::from_iter(std::iter::from_fn(|| lc.poll_action()));
        assert!(!asked.contains(&KILL), "{name}: {asked:?}");
        lc.handle_exit(Exit::Code(0), start + ms(10));
        asked.extend(std::iter::from_fn(|| lc.poll_action()));
        assert_eq!(asked, [SWEEP], "{name}: swept once, nothing else");
        lc.handle_swept(Swept::default(), start + ms(10));
        lc.handle_stdout_eof(start + ms(10));
        lc.handle_stderr_eof(start + ms(10));
        let ending = lc.poll_end().expect("the end");
        let ended_by = if shutdown {
            EndedBy::StdinClose
        } else {
            EndedBy::OnItsOwn
        };
        assert_eq!(ending.ended_by, ended_by, "{name}: {ending}");
    }
}

#[test]
fn c12_failed_sigterm_other_than_esrch_keeps_the_schedule() {
    let mut sim = Sim::with_defaults(Child::TermDenied);
    let ending = sim.shut_down_and_run();
    assert_eq!(sim.actions(), escalation(ms(0), secs(2), secs(4), ms(4001)));
    assert_eq!(ending.ended_by, EndedBy::Sigkill);
}

#[test]
fn c12_shutdown_asked_twice_acts_once() {
    let mut sim = Sim::with_defaults(Child::IgnoresAll);
    sim.shutdown();
    sim.run_until(sim.start + secs(1));
    sim.shutdown();
    let ending = sim.shut_down_and_run();
    assert_eq!(
        sim.actions(),
        escalation(ms(0), secs(2), secs(4), ms(4001)),
        "the deadlines run from the first request"
    );
    assert_eq!(ending.elapsed, ms(4001));
}

#[test]
fn c12_zero_graces_escalate_in_the_same_drain() {
    let config = graces(Duration::ZERO, Duration::ZERO);
    let mut sim = Sim::new(config, Child::IgnoresAll);
    sim.shutdown();
    assert_eq!(
        sim.actions(),
        [(ms(0), CLOSE), (ms(0), TERM), (ms(0), KILL)]
    );
    assert_eq!(sim.lc.phase(), Phase::Killing);
    assert_eq!(sim.lc.poll_timeout(), None, "only the reap is left");
    assert_eq!(sim.run().ended_by, EndedBy::Sigkill);
}

#[test]
fn c12_zero_stdin_grace_sends_sigterm_with_the_close() {
    let mut config = LifecycleConfig::default();
    config.stdin_grace = Duration::ZERO;
    let mut sim = Sim::new(config, Child::IgnoresAll);
    sim.shutdown();
    assert_eq!(sim.actions(), [(ms(0), CLOSE), (ms(0), TERM)]);
    assert_eq!(sim.lc.poll_timeout(), Some(sim.start + secs(2)));
    sim.run();
    assert_eq!(sim.actions()[2], (secs(2), KILL));
}

#[test]
fn c12_shutdown_flushes_queued_output_before_closing_stdin() {
    let mut sim = Sim::with_defaults(Child::ExitsOnEof { after: ms(50) });
    sim.feed(Lifecycle::handle_outbound_pending);
    sim.shutdown();
    assert_eq!(sim.lc.phase(), Phase::Flushing);
    assert_eq!(sim.actions(), []);
    assert_eq!(sim.lc.poll_timeout(), Some(sim.start + secs(2)));

    sim.run_until(sim.start + ms(300));
    sim.feed(Lifecycle::handle_outbound_drained);
    assert_eq!(sim.actions(), [(ms(300), CLOSE)]);
    assert_eq!(
        sim.lc.poll_timeout(),
        Some(sim.start + secs(2)),
        "the stdin deadline covers the flush"
    );
    let ending = sim.run();
    assert_eq!(ending.ended_by, EndedBy::StdinClose);
    assert_eq!(ending.elapsed, ms(350));
}

#[test]
fn c12_a_flush_that_never_finishes_closes_stdin_with_sigterm_at_the_stdin_deadline() {
    let mut sim = Sim::with_defaults(Child::IgnoresAll);
    sim.feed(Lifecycle::handle_outbound_pending);
    sim.shut_down_and_run();
    assert_eq!(
        sim.actions(),
        escalation(secs(2), secs(2), secs(4), ms(4001))
    );
}

#[test]
fn c12_stdin_broken_during_the_flush_is_not_closed_again() {
    let mut sim = Sim::with_defaults(Child::ExitsOnTerm { after: ms(5) });
    sim.feed(Lifecycle::handle_outbound_pending);
    sim.shutdown();
    sim.run_until(sim.start + ms(100));
    // EPIPE: the child closed its end.
    sim.feed(Lifecycle::handle_stdin_closed);
    assert_eq!(sim.lc.phase(), Phase::StdinClosed);
    let ending = sim.run();
    assert_eq!(sim.actions(), [(secs(2), TERM), (ms(2005), SWEEP)]);
    assert_eq!(ending.ended_by, EndedBy::Sigterm);
}

#[test]
fn c13_c26_what_the_child_left_is_swept_once_after_exit_with_or_without_a_group() {
    for process_group in [true, false] {
        let mut sim = Sim::with_group(LifecycleConfig::default(), process_group, Child::IgnoresAll);
        sim.shut_down_and_run();
        sim.lc.handle_exit(Exit::Code(0), sim.now);
        sim.lc.handle_timeout(sim.now + secs(9));
        sim.drain();
        let sweeps = sim.actions().iter().filter(|(_, a)| *a == SWEEP).count();
        // Without a group there is still what escaped it (pipe holders, a cgroup).
        assert_eq!(sweeps, 1, "process_group = {process_group}");
    }
}

#[test]
fn c14_no_signal_is_asked_after_the_exit_was_observed() {
    let mut sim = Sim::with_defaults(Child::IgnoresAll);
    sim.shutdown();
    // SIGTERM is decided at the deadline, but the exit lands before the
    // adapter drains it: it must never come out.
    sim.exit_lands_before_the_drain(sim.start + secs(2), Exit::Code(0));
    sim.timeout_at(sim.start + secs(60));
    assert_eq!(sim.actions(), [(ms(0), CLOSE), (secs(2), SWEEP)]);

    // The same for SIGKILL.
    let mut sim = Sim::with_defaults(Child::IgnoresAll);
    sim.shutdown();
    sim.run_until(sim.start + secs(3));
    sim.exit_lands_before_the_drain(sim.start + secs(4), Exit::Signal(15));
    assert_eq!(
        sim.actions(),
        [(ms(0), CLOSE), (secs(2), TERM), (secs(4), SWEEP)]
    );
    assert_eq!(
        sim.lc.poll_end().map(|e| e.ended_by),
        None,
        "pipes still open"
    );
}

#[test]
fn c15_the_end_waits_for_both_pipes_at_most_drain_grace() {
    let mut sim = Sim::with_defaults(Child::ExitsAt {
        at: ms(10),
        exit: Exit::Code(3),
    })
    .pipes_held_open();
    sim.run_until(sim.start + ms(10));
    assert_eq!(sim.lc.phase(), Phase::Exited);
    assert_eq!(sim.lc.poll_timeout(), Some(sim.start + ms(1010)));
    sim.feed(Lifecycle::handle_stdout_eof);
    assert!(sim.endings.is_empty(), "stderr is still open");
    let ending = sim.run();
    assert_eq!(sim.endings[0].0, ms(1010));
    assert!(!ending.pipes_drained);
    assert_eq!(
        ending.elapsed,
        ms(10),
        "elapsed runs to the exit, not to the end"
    );
}

#[test]
fn c15_pipes_at_eof_before_the_exit_end_it_at_once() {
    let mut sim = Sim::with_defaults(Child::ExitsAt {
        at: ms(10),
        exit: Exit::Code(0),
    })
    .pipes_held_open();
    sim.lc.handle_stderr_eof(sim.now);
    sim.lc.handle_stdout_eof(sim.now);
    sim.lc.handle_stdout_eof(sim.now);
    sim.drain();
    let ending = sim.run();
    assert_eq!(sim.endings[0].0, ms(10));
    assert!(ending.pipes_drained);
}

#[test]
fn c14_stale_or_early_time_never_panics_nor_fires() {
    let start = Instant::now() + secs(100);
    let mut lc = Lifecycle::new(LifecycleConfig::default(), true, start);
    lc.handle_shutdown(start + secs(10));
    lc.handle_timeout(start + secs(5));
    lc.handle_timeout(start);
    assert_eq!(
        lc.poll_action(),
        None,
        "nothing pending: stdin state unknown"
    );
    assert_eq!(lc.poll_timeout(), Some(start + secs(12)));
    lc.handle_timeout(start + secs(11));
    assert_eq!(lc.poll_action(), None, "early call is a no-op");
    lc.handle_timeout(start + secs(12));
    lc.handle_timeout(start + secs(12));
    assert_eq!(lc.poll_action(), Some(CLOSE));
    assert_eq!(lc.poll_action(), Some(TERM));
    assert_eq!(lc.poll_action(), None, "repeated call is a no-op");
    lc.handle_exit(Exit::Signal(15), start);
    assert_eq!(lc.poll_action(), Some(SWEEP));
    lc.handle_swept(Swept::default(), start);
    lc.handle_stdout_eof(start);
    lc.handle_stderr_eof(start);
    let ending = lc.poll_end().expect("ended");
    assert_eq!(ending.elapsed, Duration::ZERO);
    assert_eq!(ending.ended_by, EndedBy::Sigterm);
    assert_eq!(lc.poll_end(), None);
}

#[test]
fn c12_huge_graces_do_not_overflow() {
    let start = Instant::now();
    let mut config = LifecycleConfig::default();
    config.stdin_grace = Duration::MAX;
    config.term_grace = Duration::MAX;
    config.drain_grace = Duration::MAX;
    let mut lc = Lifecycle::new(config, false, start);
    lc.handle_shutdown(start);
    assert_eq!(
        lc.poll_timeout(),
        None,
        "a deadline past the end of time never fires"
    );
    lc.handle_exit(Exit::Code(0), start + secs(1));
    lc.handle_timeout(start + secs(1_000_000));
    assert_eq!(lc.poll_action(), Some(SWEEP));
    assert_eq!(lc.poll_action(), None);
    lc.handle_swept(Swept::default(), start + secs(1));
    assert_eq!(lc.poll_end(), None);
    lc.handle_stdout_eof(start);
    lc.handle_stderr_eof(start);
    assert!(lc.poll_end().is_some());
}

// ---- exit report (C15) ----

fn report(
    exit: Exit,
    ended_by: EndedBy,
    shutdown: bool,
    elapsed: Duration,
    tail: &str,
) -> ExitReport {
    let mut report = drained_ending(exit, ended_by, shutdown, elapsed);
    report.stderr_tail = tail.to_owned();
    report
}

/// The report of a child that exited before anyone asked it to.
fn on_its_own(exit: Exit, elapsed: Duration, tail: &str) -> ExitReport {
    report(exit, EndedBy::OnItsOwn, false, elapsed, tail)
}

#[test]
fn c15_report_display_reads_at_a_glance() {
    let crash = on_its_own(Exit::Code(1), ms(800), "Error: Cannot find module 'x'\n");
    assert_eq!(
        crash.to_string(),
        "exited with code 1 on its own after 0.8 s; last stderr: Error: Cannot find module 'x'"
    );
    assert!(crash.unexpected());
    assert!(!crash.success());

    let killed = report(Exit::Signal(9), EndedBy::Sigkill, true, ms(4001), "");
    // The signal that killed it names the step: no "after SIGKILL" again.
    assert_eq!(
        killed.to_string(),
        "killed by SIGKILL, 4.0 s after shutdown"
    );
    assert!(!killed.unexpected());

    let mut held = report(Exit::Code(0), EndedBy::StdinClose, true, ms(12), "");
    held.pipes_drained = false;
    assert_eq!(
        held.to_string(),
        "exited with code 0 after stdin was closed, 12 ms after shutdown; \
         something it started still held its pipes open"
    );

    let hostile = on_its_own(Exit::Code(1), ms(5), "fatal\r\x1b[1Aexited cleanly\n");
    assert_eq!(
        hostile.to_string(),
        "exited with code 1 on its own after 5 ms; last stderr: fatal\\r\\u{1b}[1Aexited cleanly",
        "control characters from the child are shown escaped"
    );

    let clean = report(Exit::Code(0), EndedBy::StdinClose, true, ms(12), "bye\n");
    assert_eq!(
        clean.to_string(),
        "exited with code 0 after stdin was closed, 12 ms after shutdown"
    );
    assert!(clean.success());

    let odd = report(Exit::Signal(42), EndedBy::Sigterm, true, secs(2), "");
    assert_eq!(
        odd.to_string(),
        "killed by signal 42 after SIGTERM, 2.0 s after shutdown"
    );
}

#[test]
fn c10_report_display_picks_the_error_line_out_of_a_trailer() {
    let node = "node:internal/modules/cjs/loader:1080\n  throw err;\n  ^\n\n\
                Error: Cannot find module 'x'\nRequire stack:\n- /srv/index.js\n    at Module._load (node:internal)\n\n\
                Node.js v18.19.0";
    let r = on_its_own(Exit::Code(1), ms(90), node);
    assert_eq!(r.stderr_summary(), Some("Error: Cannot find module 'x'"));
    assert!(
        r.to_string()
            .ends_with("; last stderr: Error: Cannot find module 'x'"),
        "{r}"
    );
    assert_eq!(r.stderr_tail, node, "the whole tail stays in the field");

    let plain = on_its_own(Exit::Code(2), ms(90), "usage: x [-h]\n  \n");
    assert_eq!(plain.stderr_summary(), Some("usage: x [-h]"));

    let long = "e".repeat(1000);
    let r = on_its_own(Exit::Code(2), ms(90), &long);
    assert!(r.to_string().chars().count() < 300, "one line, cut");
}

#[test]
fn c15_exit_and_steps_display() {
    assert_eq!(Exit::Code(0).to_string(), "exited with code 0");
    for (signo, name) in [
        (1, "SIGHUP"),
        (2, "SIGINT"),
        (6, "SIGABRT"),
        (9, "SIGKILL"),
        (11, "SIGSEGV"),
        (13, "SIGPIPE"),
        (15, "SIGTERM"),
    ] {
        assert_eq!(Exit::Signal(signo).to_string(), format!("killed by {name}"));
    }
    assert_eq!(EndedBy::OnItsOwn.to_string(), "on its own");
    assert_eq!(Signal::Term.number(), 15);
    assert_eq!(Signal::Kill.number(), 9);
    assert_eq!(SignalError::NoSuchProcess.to_string(), "no such process");
}

#[cfg(unix)]
#[test]
fn c20_signal_errors_classify_os_errors() {
    use std::io::Error;
    assert_eq!(
        SignalError::from_io(&Error::from_raw_os_error(3)),
        SignalError::NoSuchProcess
    );
    assert_eq!(
        SignalError::from_io(&Error::from_raw_os_error(1)),
        SignalError::PermissionDenied
    );
    assert_eq!(
        SignalError::from_io(&Error::from_raw_os_error(22)),
        SignalError::Other { errno: Some(22) }
    );
}

// ---- property test: random inputs and clock steps ----

/// The shared contract model lives in `childwire_core::testing`, behind the
/// `testing` feature, which CI turns on with `--all-features`.
#[cfg(feature = "testing")]
mod contract {
    use super::*;
    use childwire_core::testing::lifecycle::{Checker, Op};
    use proptest::prelude::*;

    fn op() -> impl Strategy<Value = Op> {
        let exit = prop_oneof![
            (-1..3i32).prop_map(Exit::Code),
            prop::sample::select(vec![9, 15, 6]).prop_map(Exit::Signal),
        ];
        let signal = prop_oneof![Just(Signal::Term), Just(Signal::Kill)];
        let error = prop_oneof![
            Just(SignalError::NoSuchProcess),
            Just(SignalError::PermissionDenied),
            Just(SignalError::Other { errno: None }),
        ];
        prop_oneof![
            2 => Just(Op::Shutdown),
            2 => Just(Op::OutboundDrained),
            1 => Just(Op::OutboundPending),
            1 => Just(Op::StdinClosed),
            1 => exit.prop_map(Op::Exit),
            1 => Just(Op::StdoutEof),
            1 => Just(Op::StderrEof),
            1 => (signal, error).prop_map(|(s, e)| Op::SignalFailed(s, e)),
            1 => Just(Op::Kill),
            1 => any::<bool>().prop_map(Op::Abandoned),
            1 => Just(Op::DriverStopped),
            1 => Just(Op::Stalled),
            2 => (0..3u32, any::<bool>())
                .prop_map(|(ended, held_pipes)| Op::Swept(Swept { ended, held_pipes })),
            2 => (0..3u32, any::<bool>(), any::<bool>()).prop_map(|(ended, held_pipes, passed)| {
                Op::SweepProgress(Swept { ended, held_pipes }, passed)
            }),
            2 => Just(Op::Timeout),
            1 => (0..3000u64).prop_map(|n| Op::StaleTimeout(ms(n))),
            3 => (0..3000u64).prop_map(|n| Op::Advance(ms(n))),
            3 => Just(Op::AdvanceToDeadline),
        ]
    }

    fn config() -> impl Strategy<Value = LifecycleConfig> {
        let grace = prop_oneof![Just(0u64), 0..3000u64].prop_map(ms);
        (grace.clone(), grace.clone(), grace).prop_map(|(stdin_grace, term_grace, drain_grace)| {
            let mut config = LifecycleConfig::default();
            config.stdin_grace = stdin_grace;
            config.term_grace = term_grace;
            config.drain_grace = drain_grace;
            config
        })
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(2048))]

        #[test]
        fn c12_c14_c15_c31_random_inputs_keep_the_lifecycle_contract(
            config in config(),
            process_group in any::<bool>(),
            ops in prop::collection::vec(op(), 0..40),
        ) {
            let mut checker = Checker::new(config, process_group, Instant::now());
            for op in &ops {
                checker.apply(op).map_err(TestCaseError::fail)?;
            }
            checker.finish().map_err(TestCaseError::fail)?;
        }
    }
}

#[test]
fn c26_the_report_counts_what_the_sweep_ended_and_says_the_pipes_were_held() {
    let start = Instant::now();
    let mut lc = Lifecycle::new(LifecycleConfig::default(), true, start);
    lc.handle_stdout_eof(start);
    lc.handle_stderr_eof(start);
    lc.handle_exit(Exit::Code(0), start);
    assert_eq!(lc.poll_action(), Some(SWEEP));
    assert_eq!(lc.poll_end(), None, "the end waits for the sweep's outcome");
    lc.handle_swept(
        Swept {
            ended: 2,
            held_pipes: true,
        },
        start,
    );
    let ending = lc.poll_end().expect("ended");
    assert_eq!(ending.stray_processes_ended, 2);
    assert!(!ending.pipes_drained, "holders were found at the exit");
    assert!(
        ending
            .to_string()
            .contains("ended 2 processes it left behind"),
        "{ending}"
    );
}

#[test]
fn c27_a_stopping_driver_kills_and_sweeps_at_once_and_ends_at_the_exit() {
    let start = Instant::now();
    let mut lc = Lifecycle::new(LifecycleConfig::default(), true, start);
    lc.handle_driver_stopped(start);
    assert_eq!(lc.poll_action(), Some(KILL));
    assert_eq!(
        lc.poll_action(),
        Some(SWEEP),
        "escapees are swept before the reap"
    );
    assert_eq!(lc.poll_action(), None);
    lc.handle_swept(Swept::default(), start);
    lc.handle_exit(Exit::Signal(9), start + ms(1));
    assert_eq!(lc.poll_action(), None, "swept once");
    let ending = lc.poll_end().expect("no waiting for pipes nobody reads");
    assert_eq!(ending.ended_by, EndedBy::Sigkill);
    assert!(!ending.pipes_drained);

    // After the exit, stopping only ends the wait for the pipes.
    let mut lc = Lifecycle::new(LifecycleConfig::default(), false, start);
    lc.handle_exit(Exit::Code(0), start);
    assert_eq!(lc.poll_action(), Some(SWEEP));
    lc.handle_swept(Swept::default(), start);
    assert_eq!(lc.poll_end(), None);
    lc.handle_driver_stopped(start);
    assert_eq!(lc.poll_action(), None, "no signal after the exit");
    assert_eq!(lc.poll_end().map(|e| e.ended_by), Some(EndedBy::OnItsOwn));
}

/// A sweep that goes on (a scan chasing what the child left) does not hold
/// the report past its deadline, which the machine keeps: 250 ms after the
/// sweep was asked once it has ended something in a pass, counting what it
/// ended by then; 2 s longer while it has ended nothing yet. A result after
/// the deadline no longer counts.
#[test]
fn c32_a_running_sweep_is_waited_for_until_its_deadline_and_what_it_ended_by_then_is_counted() {
    let start = Instant::now();
    // A child that exited at `start`, its pipes drained or not, its sweep
    // asked.
    let exited = |drained: bool| {
        let mut lc = Lifecycle::new(LifecycleConfig::default(), true, start);
        if drained {
            lc.handle_stdout_eof(start);
            lc.handle_stderr_eof(start);
        }
        lc.handle_exit(Exit::Code(0), start);
        assert_eq!(lc.poll_action(), Some(SWEEP));
        lc
    };

    // It ended two in its first pass: the report comes at 250 ms.
    let mut lc = exited(true);
    let two = Swept {
        ended: 2,
        held_pipes: true,
    };
    lc.handle_sweep_progress(two, true, start + ms(40));
    assert_eq!(lc.poll_timeout(), Some(start + SWEEP_WAIT));
    lc.handle_timeout(start + SWEEP_WAIT - ms(1));
    assert_eq!(lc.poll_end(), None, "the sweep is waited for");
    lc.handle_timeout(start + SWEEP_WAIT);
    let ending = lc.poll_end().expect("reported at the sweep's deadline");
    assert_eq!(ending.stray_processes_ended, 2);
    assert!(!ending.pipes_drained);
    lc.handle_swept(
        Swept {
            ended: 5,
            held_pipes: true,
        },
        start + secs(1),
    );
    assert_eq!(lc.poll_end(), None, "reported once");

    // Nothing ended yet: past the drain grace, up to 2.25 s.
    let mut lc = exited(false);
    let none_yet = Swept {
        ended: 0,
        held_pipes: true,
    };
    lc.handle_sweep_progress(none_yet, true, start + ms(300));
    let last = SWEEP_WAIT + SWEEP_FIRST_END_WAIT;
    assert_eq!(
        lc.poll_timeout(),
        Some(start + secs(1)),
        "the drain grace first"
    );
    lc.handle_timeout(start + secs(1));
    assert_eq!(lc.poll_end(), None, "the sweep still runs");
    assert_eq!(lc.poll_timeout(), Some(start + last));
    lc.handle_timeout(start + last);
    let ending = lc.poll_end().expect("reported at the last deadline");
    assert_eq!(ending.stray_processes_ended, 0);
    assert!(!ending.pipes_drained, "the pipes were held");

    // A result before the deadline is taken at once.
    let mut lc = exited(true);
    lc.handle_sweep_progress(Swept::default(), false, start + ms(10));
    assert_eq!(lc.poll_end(), None);
    lc.handle_swept(two, start + ms(600));
    assert_eq!(lc.poll_end().map(|e| e.stray_processes_ended), Some(2));

    // Past 250 ms with nothing ended, a pass that ends something counts at
    // once.
    let mut lc = exited(true);
    lc.handle_timeout(start + SWEEP_WAIT);
    assert_eq!(lc.poll_end(), None);
    lc.handle_sweep_progress(two, true, start + ms(700));
    assert_eq!(lc.poll_end().map(|e| e.stray_processes_ended), Some(2));

    // A sweep nobody reports on still ends the wait, counting nothing; the
    // deadlines only move forward.
    let mut lc = exited(true);
    assert_eq!(lc.poll_timeout(), Some(start + SWEEP_WAIT));
    lc.handle_timeout(start + SWEEP_WAIT);
    assert_eq!(lc.poll_end(), None, "nothing ended yet: it waits longer");
    assert_eq!(lc.poll_timeout(), Some(start + secs(1)));
    lc.handle_timeout(start + secs(1));
    assert_eq!(lc.poll_timeout(), Some(start + last));
    lc.handle_timeout(start + last);
    assert_eq!(lc.poll_end().map(|e| e.stray_processes_ended), Some(0));
}
