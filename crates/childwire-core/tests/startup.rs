//! The start-up verdict on a simulated clock: an instantly exiting child,
//! a silent child, a slow but chatty child, and a caller's own "ready".

use std::time::{Duration, Instant};

use childwire_core::Exit;
use childwire_core::startup::{ReadyOn, Startup, StartupConfig, StartupVerdict};

fn secs(n: u64) -> Duration {
    Duration::from_secs(n)
}

fn config(silence: u64) -> StartupConfig {
    let mut config = StartupConfig::default();
    config.silence = Some(secs(silence));
    config
}

/// Advances to each deadline the machine names, as a driver's timer would,
/// until the verdict comes or `until` is passed.
fn run_timers(startup: &mut Startup, until: Instant) -> Option<StartupVerdict> {
    while let Some(at) = startup.poll_timeout() {
        if at > until {
            break;
        }
        startup.handle_timeout(at);
        if let Some(verdict) = startup.poll_verdict() {
            return Some(verdict);
        }
    }
    None
}

#[test]
fn c38_an_instantly_exiting_child_exited_before_its_first_message() {
    let spawned = Instant::now();
    let mut startup = Startup::new(config(10), spawned);
    startup.handle_stderr(spawned + Duration::from_millis(3));
    startup.handle_exit(
        Exit::Code(127),
        "sh: 1: no-such-server: not found\n".to_owned(),
        spawned + Duration::from_millis(5),
    );
    let verdict = startup.poll_verdict().expect("decided at the exit");
    assert_eq!(
        verdict,
        StartupVerdict::ExitedBeforeFirstMessage {
            exit: Exit::Code(127),
            stderr_tail: "sh: 1: no-such-server: not found\n".to_owned(),
            after: Duration::from_millis(5),
        }
    );
    let text = verdict.to_string();
    assert!(
        text.starts_with("exited with code 127 before its first message")
            && text.contains("could not find the program")
            && text.ends_with("its stderr ends with: sh: 1: no-such-server: not found"),
        "{text}"
    );
    assert_eq!(startup.poll_verdict(), None, "once");
    assert_eq!(startup.poll_timeout(), None);
}

#[test]
fn c38_a_silent_child_gets_no_sign_of_life_at_the_deadline() {
    let spawned = Instant::now();
    let mut startup = Startup::new(config(10), spawned);
    assert_eq!(startup.poll_timeout(), Some(spawned + secs(10)));
    // Early and spurious timers change nothing.
    startup.handle_timeout(spawned + secs(9));
    assert_eq!(startup.poll_verdict(), None);
    let verdict = run_timers(&mut startup, spawned + secs(3600)).expect("a verdict");
    assert_eq!(
        verdict,
        StartupVerdict::NoSignOfLife {
            silent_for: secs(10),
            after: secs(10),
            showed_life: false,
            limit_reached: false,
        }
    );
    assert!(
        verdict
            .to_string()
            .starts_with("no sign of life for 10.0 s: no output on stdout or stderr at all"),
        "{verdict}"
    );
    // Its exit after the verdict changes nothing.
    startup.handle_exit(Exit::Signal(15), String::new(), spawned + secs(12));
    assert_eq!(startup.poll_verdict(), None);
}

#[test]
fn c38_a_slow_but_chatty_child_is_given_the_time_it_needs() {
    let spawned = Instant::now();
    let mut startup = Startup::new(config(10), spawned);
    // A download that logs every 7 s for two minutes, then the first message.
    let mut now = spawned;
    for _ in 0..17 {
        now += secs(7);
        assert_eq!(run_timers(&mut startup, now), None, "still showing life");
        startup.handle_stderr(now);
        assert_eq!(startup.poll_timeout(), Some(now + secs(10)), "stretched");
    }
    now += secs(2);
    startup.handle_stdout(now);
    now += secs(1);
    startup.handle_message(now);
    assert_eq!(
        startup.poll_verdict(),
        Some(StartupVerdict::Ready { after: secs(122) })
    );
}

#[test]
fn c38_a_chatty_child_that_then_falls_silent_is_reported_as_such() {
    let spawned = Instant::now();
    let mut startup = Startup::new(config(10), spawned);
    startup.handle_stderr(spawned + secs(4));
    let verdict = run_timers(&mut startup, spawned + secs(60)).expect("a verdict");
    assert_eq!(
        verdict,
        StartupVerdict::NoSignOfLife {
            silent_for: secs(10),
            after: secs(14),
            showed_life: true,
            limit_reached: false,
        }
    );
}

#[test]
fn c38_the_limit_ends_a_start_up_however_chatty() {
    let spawned = Instant::now();
    let mut config = config(10);
    config.limit = Some(secs(30));
    let mut startup = Startup::new(config, spawned);
    let mut verdict = None;
    for second in (5..100).step_by(5) {
        let now = spawned + secs(second);
        verdict = run_timers(&mut startup, now);
        if verdict.is_some() {
            break;
        }
        startup.handle_stderr(now);
    }
    let verdict = verdict.expect("the limit");
    assert!(
        matches!(
            verdict,
            StartupVerdict::NoSignOfLife { after, limit_reached: true, .. } if after == secs(30)
        ),
        "{verdict:?}"
    );
}

#[test]
fn c38_with_a_caller_predicate_messages_are_life_and_the_caller_says_ready() {
    let spawned = Instant::now();
    let mut config = config(10);
    config.ready_on = ReadyOn::Caller;
    let mut startup = Startup::new(config, spawned);
    startup.handle_message(spawned + secs(5));
    assert_eq!(
        startup.poll_verdict(),
        None,
        "a log notification, not ready"
    );
    assert_eq!(startup.poll_timeout(), Some(spawned + secs(15)));
    startup.handle_ready(spawned + secs(8));
    assert_eq!(
        startup.poll_verdict(),
        Some(StartupVerdict::Ready { after: secs(8) })
    );
    // Its exit afterwards is not a start-up matter.
    startup.handle_exit(Exit::Code(1), String::new(), spawned + secs(9));
    assert_eq!(startup.poll_verdict(), None);
}

#[test]
fn c38_without_a_deadline_only_the_child_decides() {
    let spawned = Instant::now();
    let mut config = StartupConfig::default();
    config.silence = None;
    let mut startup = Startup::new(config, spawned);
    assert_eq!(startup.poll_timeout(), None);
    startup.handle_timeout(spawned + secs(100_000));
    assert_eq!(startup.poll_verdict(), None);
    startup.handle_exit(Exit::Code(0), String::new(), spawned + secs(100_001));
    let verdict = startup.poll_verdict().expect("the exit");
    assert!(
        verdict.to_string().ends_with("it wrote nothing to stderr"),
        "{verdict}"
    );
}

#[test]
fn c38_output_ended_with_no_exit_is_its_own_verdict_and_a_ready_child_stays_ready() {
    let spawned = Instant::now();
    let mut startup = Startup::new(config(10), spawned);
    startup.handle_stdout(spawned + secs(1));
    startup.handle_closed(spawned + secs(2));
    let verdict = startup
        .poll_verdict()
        .expect("decided when the output ended");
    assert_eq!(
        verdict,
        StartupVerdict::ClosedBeforeFirstMessage { after: secs(2) }
    );
    assert_eq!(
        verdict.to_string(),
        "its output ended before its first message (2.0 s after it was started)"
    );

    // Once ready, the end of its output changes nothing.
    let mut startup = Startup::new(config(10), spawned);
    startup.handle_message(spawned + secs(1));
    startup.handle_closed(spawned + secs(2));
    assert_eq!(
        startup.poll_verdict(),
        Some(StartupVerdict::Ready { after: secs(1) })
    );
    // Past the silence, the deadline's verdict comes first.
    let mut startup = Startup::new(config(10), spawned);
    startup.handle_closed(spawned + secs(11));
    assert!(matches!(
        startup.poll_verdict(),
        Some(StartupVerdict::NoSignOfLife { .. })
    ));
}
