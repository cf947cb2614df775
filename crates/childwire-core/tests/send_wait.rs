//! How long a supervised send waits for the next generation, on a simulated
//! clock: its wait is counted from when it first had to wait, however often
//! it asks again, and the core ends it.

use std::time::{Duration, Instant};

use childwire_core::{
    Closed, EndedBy, Exit, ExitReport, Generations, GenerationsConfig, SendStep, WhileDown,
};

const LIMIT: Duration = Duration::from_secs(5);
const REQUEST: &[u8] = br#"{"jsonrpc":"2.0","id":1,"method":"tools/call"}"#;

fn secs(n: u64) -> Duration {
    Duration::from_secs(n)
}

/// Generation 1 ran from `start` and was killed at `start`: down, its next
/// spawn not yet made.
fn down(start: Instant, wait_limit: Option<Duration>) -> Generations {
    let mut config = GenerationsConfig::default();
    config.while_down = WhileDown::Wait;
    config.wait_limit = wait_limit;
    let mut gens = Generations::new(config, start);
    gens.handle_spawned(start);
    gens.handle_initialized(start);
    gens.handle_ended(
        ExitReport::new(Exit::Signal(9), EndedBy::OnItsOwn, Duration::ZERO),
        start,
    );
    while gens.poll_event().is_some() {}
    gens
}

/// The end of the wait `step` names, if it is one.
fn wait_until(step: &SendStep) -> Option<Instant> {
    match step {
        SendStep::Wait { until, .. } => *until,
        other => panic!("expected a wait, got {other:?}"),
    }
}

#[test]
fn c32_a_send_waits_for_the_next_generation_from_its_first_wait_and_the_core_ends_it() {
    let start = Instant::now();
    let mut gens = down(start, Some(LIMIT));
    let began = start + secs(1);
    let first = gens.handle_send(REQUEST, began, None);
    assert_eq!(wait_until(&first), Some(began + LIMIT));
    // Asked again before its end (a timer early, a wake-up for nothing): the
    // same end, not one counted from the question.
    let again = gens.handle_send(REQUEST, start + secs(4), Some(began));
    assert_eq!(
        wait_until(&again),
        Some(began + LIMIT),
        "the end is the first wait's, whenever asked"
    );
    // Another send that began later has its own end.
    let other = gens.handle_send(REQUEST, start + secs(4), None);
    assert_eq!(wait_until(&other), Some(start + secs(4) + LIMIT));
    // At its end the core refuses it, with the last report.
    match gens.handle_send(REQUEST, began + LIMIT, Some(began)) {
        SendStep::Refuse(Closed::Exited, Some(report)) => {
            assert_eq!(report.exit, Exit::Signal(9), "{report}");
        }
        other => panic!("expected the refusal at the wait's end, got {other:?}"),
    }
    // The later send still waits.
    let later = gens.handle_send(REQUEST, began + LIMIT, Some(start + secs(4)));
    assert_eq!(wait_until(&later), Some(start + secs(4) + LIMIT));
}

#[test]
fn c32_a_send_whose_wait_ended_goes_to_a_generation_that_started_meanwhile() {
    let start = Instant::now();
    let mut gens = down(start, Some(LIMIT));
    let began = start + secs(1);
    let _ = wait_until(&gens.handle_send(REQUEST, began, None));
    // The next generation runs before the send asks again, past its end:
    // it is sent, not refused.
    gens.handle_spawned(start + secs(2));
    gens.handle_initialized(start + secs(2));
    assert!(matches!(
        gens.handle_send(REQUEST, began + LIMIT + secs(1), Some(began)),
        SendStep::Send { generation: 2, .. }
    ));
}

#[test]
fn c32_without_a_limit_a_send_waits_as_long_as_it_takes() {
    let start = Instant::now();
    let mut gens = down(start, None);
    let _ = wait_until(&gens.handle_send(REQUEST, start, None));
    let hour = start + secs(3600);
    assert_eq!(
        wait_until(&gens.handle_send(REQUEST, hour, Some(start))),
        None
    );
}
