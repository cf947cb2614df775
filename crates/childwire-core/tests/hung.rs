//! A supervised child found hung, on a simulated clock: the core's
//! `Liveness` gives the verdict, `Generations` counts the killed child's end
//! as a crash (restarted as the policy says) and its report says it hung.

use std::time::{Duration, Instant};

use childwire_core::liveness::{Liveness, LivenessConfig, Verdict};
use childwire_core::{
    EndedBy, Exit, ExitReport, GenerationEvent, Generations, GenerationsConfig, RestartConfig,
};

const HUNG_AFTER: Duration = Duration::from_secs(60);
const BACKOFF: Duration = Duration::from_millis(100);

fn generations(now: Instant) -> Generations {
    let mut restart = RestartConfig::default();
    restart.initial_backoff = BACKOFF;
    restart.jitter = 0.0;
    let mut config = GenerationsConfig::default();
    config.restart = restart;
    let mut gens = Generations::new(config, now);
    gens.handle_spawned(now);
    gens.handle_initialized(now);
    gens
}

/// The end of a child the owner killed: asked for, so it reads as expected.
fn killed_report() -> ExitReport {
    let mut report = ExitReport::new(Exit::Signal(9), EndedBy::Sigkill, Duration::from_millis(1));
    report.shutdown_requested = true;
    report
}

/// Steps a stopped server's watch on a simulated clock (pings never
/// answered, CPU time never moving) until its verdict is hung; when.
fn hung_at(start: Instant) -> Instant {
    let mut config = LivenessConfig::default();
    config.hung_after = HUNG_AFTER;
    let mut liveness = Liveness::new(config, start);
    let mut now = start;
    loop {
        if liveness.poll_ping(now) {
            liveness.handle_ping_sent(now);
        }
        if liveness.poll_cpu(now) {
            liveness.handle_cpu(Duration::from_secs(2), now);
        }
        if liveness.verdict() == Some(Verdict::Hung) {
            return now;
        }
        now = liveness.poll_timeout().expect("a deadline while not hung");
        liveness.handle_timeout(now);
    }
}

#[test]
fn a_hung_generation_killed_by_its_owner_is_a_crash_that_restarts_and_says_it_hung() {
    let start = Instant::now();
    let hung = hung_at(start);
    assert_eq!(
        hung,
        start + HUNG_AFTER,
        "hung exactly when no sign came for the time"
    );
    let mut gens = generations(start);
    gens.handle_hung();
    gens.handle_ended(killed_report(), hung);
    let Some(GenerationEvent::Exited(report)) = gens.poll_event() else {
        panic!("expected the generation's report");
    };
    assert!(report.killed_when_hung);
    assert!(
        report.unexpected(),
        "killed for hanging is not a requested end"
    );
    assert!(report.to_string().contains("it hung"), "{report}");
    assert!(!gens.is_over());
    assert!(!gens.restart_due(hung));
    assert!(
        gens.restart_due(hung + BACKOFF),
        "restarted after the backoff"
    );
}

#[test]
fn a_killed_generation_not_found_hung_is_an_asked_end_that_does_not_restart() {
    let start = Instant::now();
    let mut gens = generations(start);
    gens.handle_ended(killed_report(), start + Duration::from_secs(1));
    let Some(GenerationEvent::Exited(report)) = gens.poll_event() else {
        panic!("expected the generation's report");
    };
    assert!(!report.killed_when_hung);
    assert!(!report.unexpected());
}

#[test]
fn a_hung_verdict_after_the_next_spawn_does_not_mark_the_new_generation() {
    let start = Instant::now();
    let mut gens = generations(start);
    gens.handle_hung();
    gens.handle_ended(killed_report(), start);
    let _ = gens.poll_event();
    let later = start + BACKOFF;
    gens.handle_spawned(later);
    gens.handle_initialized(later);
    let mut report = killed_report();
    report.exit = Exit::Code(0);
    gens.handle_ended(report, later + Duration::from_secs(1));
    let Some(GenerationEvent::Exited(report)) = gens.poll_event() else {
        panic!("expected the generation's report");
    };
    assert!(
        !report.killed_when_hung,
        "the mark was the first generation's"
    );
}
