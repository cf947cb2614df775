//! The restart policy on a simulated clock: a crash loop ends in the
//! verdict, a child that stays up refills the budget, the backoff grows and
//! is capped, the jitter stays in its bounds; then random inputs against the
//! model in `childwire_core::testing::restart`.

use std::time::{Duration, Instant};

use childwire_core::restart::{
    GiveUpReason, RestartConfig, RestartPolicy, RestartVerdict, backoff,
};

fn ms(n: u64) -> Duration {
    Duration::from_millis(n)
}

fn no_jitter() -> RestartConfig {
    let mut config = RestartConfig::default();
    config.jitter = 0.0;
    config
}

/// Runs generations that each stay up `uptime`, restarting at the instant
/// the policy names, until it stops restarting; returns the waits and the
/// final verdict.
fn crash_loop(
    policy: &mut RestartPolicy,
    start: Instant,
    uptime: Duration,
) -> (Vec<Duration>, RestartVerdict) {
    let mut now = start;
    let mut waits = Vec::new();
    policy.handle_started(now);
    loop {
        // Nothing is due before the generation could become stable.
        assert!(policy.poll_timeout().is_some_and(|at| at > now));
        now += uptime;
        policy.handle_timeout(now);
        match policy.handle_exit(now, true) {
            RestartVerdict::Restart { at, delay, .. } => {
                assert_eq!(policy.poll_timeout(), Some(at));
                assert_eq!(at, now + delay);
                waits.push(delay);
                now = at;
                policy.handle_started(now);
            }
            verdict => return (waits, verdict),
        }
        assert!(waits.len() < 1000, "never gave up");
    }
}

#[test]
fn c36_a_crash_loop_ends_in_the_verdict_with_every_generation_recorded() {
    let mut config = no_jitter();
    config.budget = 4;
    let mut policy = RestartPolicy::new(config, 1);
    let start = Instant::now();
    let (waits, verdict) = crash_loop(&mut policy, start, ms(50));
    assert_eq!(waits, [ms(250), ms(500), ms(1000), ms(2000)]);
    let RestartVerdict::GiveUp { reason, history } = verdict else {
        panic!("{verdict:?}");
    };
    assert_eq!(
        reason,
        GiveUpReason::BudgetSpent {
            restarts: 4,
            stable_after: Duration::from_secs(30)
        }
    );
    assert_eq!(
        history.iter().map(|g| g.number).collect::<Vec<_>>(),
        [1, 2, 3, 4, 5]
    );
    assert!(history.iter().all(|g| g.unexpected && g.uptime() == ms(50)));
    // Each generation started when the one before it ended plus its wait.
    for (pair, wait) in history.windows(2).zip(&waits) {
        assert_eq!(pair[1].started, pair[0].ended + *wait);
    }
    assert_eq!(policy.poll_timeout(), None, "nothing more to do");
    assert!(
        reason.to_string().contains("4 restarts in a row"),
        "{reason}"
    );
    // A late second report of the last exit repeats the verdict.
    let again = policy.handle_exit(history[4].ended, true);
    assert!(matches!(again, RestartVerdict::GiveUp { .. }));
}

#[test]
fn c36_a_child_that_stays_up_refills_the_budget_and_resets_the_backoff() {
    let mut config = no_jitter();
    config.budget = 2;
    let mut policy = RestartPolicy::new(config, 1);
    let mut now = Instant::now();
    policy.handle_started(now);
    // Two quick crashes spend the budget...
    for expected in [ms(250), ms(500)] {
        now += ms(10);
        let RestartVerdict::Restart { at, delay, .. } = policy.handle_exit(now, true) else {
            panic!("should restart");
        };
        assert_eq!(delay, expected);
        now = at;
        policy.handle_started(now);
    }
    assert_eq!(policy.budget_left(), 0);
    // ...then this generation stays up until it is stable.
    let stable_at = policy.poll_timeout().expect("the stable deadline");
    assert_eq!(stable_at, now + Duration::from_secs(30));
    now = stable_at;
    policy.handle_timeout(now);
    assert_eq!(policy.budget_left(), 2, "refilled");
    assert_eq!(policy.poll_timeout(), None);
    // Its crash restarts with the first wait again.
    now += Duration::from_secs(100);
    let RestartVerdict::Restart { delay, attempt, .. } = policy.handle_exit(now, true) else {
        panic!("should restart");
    };
    assert_eq!((delay, attempt), (ms(250), 1));
}

#[test]
fn c36_the_refill_is_noticed_at_the_exit_without_a_timer() {
    let mut config = no_jitter();
    config.budget = 1;
    let mut policy = RestartPolicy::new(config, 1);
    let mut now = Instant::now();
    policy.handle_started(now);
    for _ in 0..5 {
        // Up 31 s each time, never told of the stable deadline.
        now += Duration::from_secs(31);
        let RestartVerdict::Restart { at, attempt, .. } = policy.handle_exit(now, true) else {
            panic!("each generation was stable, so each restarts");
        };
        assert_eq!(attempt, 1);
        now = at;
        policy.handle_started(now);
    }
}

#[test]
fn c36_an_expected_end_stops_whatever_the_budget() {
    let mut config = no_jitter();
    config.budget = 0;
    let mut policy = RestartPolicy::new(config, 1);
    let now = Instant::now();
    policy.handle_started(now);
    assert_eq!(policy.handle_exit(now + ms(5), false), RestartVerdict::Stop);
    // A fresh start after the verdict starts over.
    policy.handle_started(now + ms(10));
    assert!(matches!(
        policy.handle_exit(now + ms(20), true),
        RestartVerdict::GiveUp {
            reason: GiveUpReason::BudgetSpent { restarts: 0, .. },
            ..
        }
    ));
    assert_eq!(policy.history().count(), 1, "only this start's generation");
}

#[test]
fn c36_the_window_caps_restarts_of_a_child_that_keeps_refilling_its_budget() {
    let mut config = no_jitter();
    config.max_in_window = 3;
    config.window = Duration::from_secs(600);
    let mut policy = RestartPolicy::new(config, 1);
    // Each generation is stable (40 s) and then crashes.
    let (waits, verdict) = crash_loop(&mut policy, Instant::now(), Duration::from_secs(40));
    assert_eq!(waits, [ms(250); 3], "every restart is a first attempt");
    let RestartVerdict::GiveUp { reason, history } = verdict else {
        panic!("{verdict:?}");
    };
    assert_eq!(
        reason,
        GiveUpReason::TooManyInWindow {
            restarts: 3,
            window: Duration::from_secs(600)
        }
    );
    assert_eq!(history.len(), 4);
}

#[test]
fn c36_restarts_older_than_the_window_no_longer_count() {
    let mut config = no_jitter();
    config.max_in_window = 2;
    config.window = Duration::from_secs(60);
    let mut policy = RestartPolicy::new(config, 1);
    // Stable for 61 s each: the restart before falls out of the window.
    let mut now = Instant::now();
    policy.handle_started(now);
    for _ in 0..10 {
        now += Duration::from_secs(61);
        let RestartVerdict::Restart { at, .. } = policy.handle_exit(now, true) else {
            panic!("never more than one restart within 60 s");
        };
        now = at;
        policy.handle_started(now);
    }
}

#[test]
fn c36_the_backoff_grows_by_the_multiplier_and_is_capped() {
    let mut config = no_jitter();
    config.initial_backoff = ms(100);
    config.multiplier = 3.0;
    config.max_backoff = Duration::from_secs(5);
    config.budget = 8;
    let mut policy = RestartPolicy::new(config.clone(), 1);
    let (waits, _) = crash_loop(&mut policy, Instant::now(), ms(1));
    assert_eq!(waits, [100, 300, 900, 2700, 5000, 5000, 5000, 5000].map(ms));
    assert_eq!(backoff(&config, u32::MAX), Duration::from_secs(5));
}

#[test]
fn c36_the_jitter_stays_within_its_bounds_and_spreads_the_waits() {
    let mut config = RestartConfig::default();
    config.jitter = 0.5;
    config.budget = 6;
    let mut spread = std::collections::HashSet::new();
    for seed in 0..200 {
        let mut policy = RestartPolicy::new(config.clone(), seed);
        let (waits, _) = crash_loop(&mut policy, Instant::now(), ms(1));
        assert_eq!(waits.len(), 6);
        for (n, wait) in (1..).zip(&waits) {
            let full = backoff(&config, n);
            assert!(
                *wait <= full && *wait >= full / 2,
                "seed {seed}: wait {wait:?} for attempt {n} outside [{:?}, {full:?}]",
                full / 2
            );
        }
        spread.insert(waits[0]);
    }
    assert!(
        spread.len() > 100,
        "only {} distinct first waits",
        spread.len()
    );
    // The same seed gives the same waits.
    let waits = |seed| {
        crash_loop(
            &mut RestartPolicy::new(config.clone(), seed),
            Instant::now(),
            ms(1),
        )
        .0
    };
    assert_eq!(waits(42), waits(42));
}

#[test]
fn c36_a_stop_cancels_the_awaited_restart_and_every_later_exit_stops() {
    let mut policy = RestartPolicy::new(no_jitter(), 1);
    let now = Instant::now();
    policy.handle_started(now);
    let RestartVerdict::Restart { .. } = policy.handle_exit(now + ms(5), true) else {
        panic!("should restart")
    };
    assert!(policy.is_waiting());
    policy.handle_stop();
    assert!(!policy.is_waiting());
    assert_eq!(policy.poll_timeout(), None, "no restart to wait for");
    assert_eq!(policy.handle_exit(now + ms(6), true), RestartVerdict::Stop);
    // Stopped while running: the crash that follows is not restarted.
    policy.handle_started(now + ms(10));
    policy.handle_stop();
    assert_eq!(policy.handle_exit(now + ms(20), true), RestartVerdict::Stop);
}

#[test]
fn c36_a_failed_spawn_spends_the_budget_like_a_crash() {
    let mut config = no_jitter();
    config.budget = 2;
    let mut policy = RestartPolicy::new(config, 1);
    let mut now = Instant::now();
    policy.handle_started(now);
    now += ms(5);
    let RestartVerdict::Restart { at, .. } = policy.handle_exit(now, true) else {
        panic!()
    };
    let RestartVerdict::Restart { at, attempt, .. } = policy.handle_spawn_failed(at) else {
        panic!()
    };
    assert_eq!(attempt, 2);
    let verdict = policy.handle_spawn_failed(at);
    let RestartVerdict::GiveUp { history, .. } = verdict else {
        panic!("{verdict:?}")
    };
    assert_eq!(history.len(), 3);
    assert_eq!(history[2].uptime(), Duration::ZERO);
}

// ---- property test: random inputs and clock steps ----

/// The shared model lives in `childwire_core::testing`, behind the
/// `testing` feature, which CI turns on with `--all-features`.
#[cfg(feature = "testing")]
mod model {
    use super::*;
    use childwire_core::testing::restart::{Checker, Op};
    use proptest::prelude::*;

    fn op() -> impl Strategy<Value = Op> {
        prop_oneof![
            3 => Just(Op::Start),
            3 => any::<bool>().prop_map(|unexpected| Op::Exit { unexpected }),
            1 => Just(Op::SpawnFailed),
            1 => Just(Op::Stop),
            1 => Just(Op::Timeout),
            3 => (0..40_000u64).prop_map(|n| Op::Advance(ms(n))),
            2 => Just(Op::AdvanceToDeadline),
        ]
    }

    fn config() -> impl Strategy<Value = RestartConfig> {
        (
            (0..2000u64, 0..60_000u64, 1.0..4.0f64, 0.0..=1.0f64),
            (0..6u32, 0..60_000u64, 0..6u32, 0..120_000u64),
        )
            .prop_map(
                |(
                    (initial, max, multiplier, jitter),
                    (budget, stable_after, max_in_window, window),
                )| {
                    let mut config = RestartConfig::default();
                    config.initial_backoff = ms(initial);
                    config.max_backoff = ms(max);
                    config.multiplier = multiplier;
                    config.jitter = jitter;
                    config.budget = budget;
                    config.stable_after = ms(stable_after);
                    config.max_in_window = max_in_window;
                    config.window = ms(window);
                    config
                },
            )
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(2048))]

        #[test]
        fn c36_random_inputs_keep_the_restart_rules(
            config in config(),
            seed in any::<u64>(),
            ops in prop::collection::vec(op(), 0..60),
        ) {
            let mut checker = Checker::new(config, seed, Instant::now());
            for op in &ops {
                checker.apply(op).map_err(TestCaseError::fail)?;
            }
        }
    }
}
