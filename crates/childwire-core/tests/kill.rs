//! `handle_kill`: the caller's immediate stop, as the lifecycle decides it (C12, C15).

use std::time::{Duration, Instant};

use childwire_core::{Action, EndedBy, Exit, Lifecycle, LifecycleConfig, Phase, Signal, Swept};

const KILL: Action = Action::Signal(Signal::Kill);

const fn ms(n: u64) -> Duration {
    Duration::from_millis(n)
}

/// A lifecycle spawned at `t0` with an empty write queue.
fn spawned(t0: Instant) -> Lifecycle {
    let mut lc = Lifecycle::new(LifecycleConfig::default(), true, t0);
    lc.handle_outbound_drained(t0);
    lc
}

fn actions(lc: &mut Lifecycle) -> Vec<Action> {
    std::iter::from_fn(|| lc.poll_action()).collect()
}

/// The killed child is reaped at `at`, swept, and its pipes close: the ending.
fn reaped(lc: &mut Lifecycle, at: Instant) -> childwire_core::ExitReport {
    lc.handle_exit(Exit::Signal(9), at);
    assert_eq!(actions(lc), [Action::Sweep]);
    lc.handle_swept(Swept::default(), at);
    lc.handle_stdout_eof(at);
    lc.handle_stderr_eof(at);
    lc.poll_end().expect("the end, once drained and swept")
}

#[test]
fn c12_kill_sends_sigkill_at_once_and_the_report_says_it_was_asked() {
    let t0 = Instant::now();
    let mut lc = spawned(t0);
    lc.handle_kill(t0 + ms(300));
    assert_eq!(actions(&mut lc), [KILL], "no stdin close, no SIGTERM first");
    assert_eq!(lc.phase(), Phase::Killing);
    assert_eq!(lc.poll_timeout(), None, "nothing to escalate to");
    // Asked again: nothing more.
    lc.handle_kill(t0 + ms(301));
    assert_eq!(actions(&mut lc), []);
    let end = reaped(&mut lc, t0 + ms(302));
    assert_eq!(end.ended_by, EndedBy::Sigkill);
    assert!(end.shutdown_requested && !end.unexpected());
    assert_eq!(end.elapsed, ms(2));
    assert_eq!(end.to_string(), "killed by SIGKILL, 2 ms after shutdown");
}

#[test]
fn c12_kill_cuts_a_graceful_shutdown_short() {
    let t0 = Instant::now();
    let mut lc = spawned(t0);
    lc.handle_shutdown(t0);
    assert_eq!(actions(&mut lc), [Action::CloseStdin]);
    lc.handle_stdin_closed(t0);
    // Well before the stdin grace ends: SIGKILL now, never SIGTERM.
    lc.handle_kill(t0 + ms(50));
    assert_eq!(actions(&mut lc), [KILL]);
    let end = reaped(&mut lc, t0 + ms(51));
    assert_eq!(end.ended_by, EndedBy::Sigkill);
    assert_eq!(end.elapsed, ms(51), "from the shutdown asked first");
}

#[test]
fn c15_kill_after_the_exit_changes_nothing() {
    let t0 = Instant::now();
    let mut lc = spawned(t0);
    lc.handle_exit(Exit::Code(3), t0 + ms(5));
    assert_eq!(actions(&mut lc), [Action::Sweep]);
    lc.handle_kill(t0 + ms(6));
    assert_eq!(actions(&mut lc), [], "no signal to a reaped PID");
    lc.handle_swept(Swept::default(), t0 + ms(6));
    lc.handle_stdout_eof(t0 + ms(6));
    lc.handle_stderr_eof(t0 + ms(6));
    let end = lc.poll_end().expect("the end");
    assert_eq!(end.ended_by, EndedBy::OnItsOwn);
    assert!(end.unexpected(), "it exited before anyone asked");
}
