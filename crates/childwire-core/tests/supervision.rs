//! The three supervision machines driven together on a simulated clock, the
//! way a supervised transport will drive them: each generation gets a
//! start-up verdict; on each end the pending requests are answered with
//! errors; the restart policy decides what comes next. A discrete-event
//! loop always jumps to the earliest deadline.

use std::time::{Duration, Instant};

use bytes::Bytes;
use childwire_core::Exit;
use childwire_core::pending::{EndCause, PendingRequests};
use childwire_core::restart::{GiveUpReason, RestartConfig, RestartPolicy, RestartVerdict};
use childwire_core::startup::{Startup, StartupConfig, StartupVerdict};
use serde_json::Value;

/// What a scripted child does in one generation.
#[derive(Clone, Copy)]
enum Script {
    /// Answers requests, then crashes with this exit after this long.
    CrashAfter(Duration, Exit),
    /// Exits at once, before any message.
    ExitAtOnce(Exit),
}

/// What the driver saw of one generation.
#[derive(Debug)]
struct GenerationSeen {
    startup: StartupVerdict,
    unanswered: Vec<Bytes>,
    error_messages: Vec<String>,
}

/// Drives generations of `script(n)` until the policy stops; in each
/// generation that became ready it sends two requests, and the child
/// answers the first only.
fn supervise(
    config: RestartConfig,
    script: impl Fn(u32) -> Script,
) -> (Vec<GenerationSeen>, RestartVerdict) {
    let mut policy = RestartPolicy::new(config, 99);
    let mut pending = PendingRequests::default();
    let mut now = Instant::now();
    let mut seen = Vec::new();
    let mut next_id = 1;
    loop {
        let generation = policy.generations() + 1;
        policy.handle_started(now);
        let mut startup = Startup::new(StartupConfig::default(), now);
        let (exit, uptime) = match script(generation) {
            Script::ExitAtOnce(exit) => {
                startup.handle_stderr(now);
                (exit, Duration::from_millis(2))
            }
            Script::CrashAfter(uptime, exit) => {
                // Ready at its first message; then two requests go out and
                // the first is answered.
                let ready_at = now + Duration::from_millis(20);
                startup.handle_stdout(ready_at);
                startup.handle_message(ready_at);
                for _ in 0..2 {
                    let request =
                        format!(r#"{{"jsonrpc":"2.0","id":{next_id},"method":"tools/call"}}"#);
                    pending.handle_outgoing(request.as_bytes());
                    next_id += 1;
                }
                let answer = format!(r#"{{"jsonrpc":"2.0","id":{},"result":{{}}}}"#, next_id - 2);
                assert!(pending.handle_incoming(answer.as_bytes()).is_some());
                (exit, uptime)
            }
        };
        now += uptime;
        startup.handle_exit(exit, "fatal: out of cheese\n".to_owned(), now);
        let startup_verdict = startup.poll_verdict().expect("a verdict by the exit");
        let verdict = policy.handle_exit(now, true);
        let unanswered = pending.fail_all(&EndCause {
            exit: Some(exit),
            stderr: Some("fatal: out of cheese"),
            restarting: matches!(verdict, RestartVerdict::Restart { .. }),
        });
        seen.push(GenerationSeen {
            startup: startup_verdict,
            unanswered: unanswered.ids().cloned().collect(),
            error_messages: unanswered
                .requests
                .iter()
                .map(|request| {
                    let response: Value = serde_json::from_slice(&request.response).unwrap();
                    response["error"]["message"].as_str().unwrap().to_owned()
                })
                .collect(),
        });
        match verdict {
            RestartVerdict::Restart { at, .. } => {
                // The driver's timer: the earliest deadline is the restart.
                assert_eq!(policy.poll_timeout(), Some(at));
                now = at;
            }
            other => return (seen, other),
        }
        assert!(seen.len() < 1000, "the policy never gave up");
    }
}

#[test]
fn c36_c37_c38_a_crash_loop_ends_in_the_verdict_with_every_generation_and_its_requests() {
    let mut config = RestartConfig::default();
    config.budget = 3;
    let (seen, verdict) = supervise(config, |_| {
        Script::CrashAfter(Duration::from_secs(1), Exit::Signal(11))
    });
    assert_eq!(seen.len(), 4, "the first run and three restarts");
    let RestartVerdict::GiveUp { reason, history } = verdict else {
        panic!("{verdict:?}")
    };
    assert!(matches!(
        reason,
        GiveUpReason::BudgetSpent { restarts: 3, .. }
    ));
    assert_eq!(
        history.iter().map(|g| g.number).collect::<Vec<_>>(),
        [1, 2, 3, 4]
    );
    for (n, generation) in seen.iter().enumerate() {
        assert!(generation.startup.is_ready(), "{:?}", generation.startup);
        // The second request of each generation was never answered; its
        // error says why, and whether a restart follows.
        let expected_id = Bytes::from(format!("{}", 2 * n + 2));
        assert_eq!(generation.unanswered, [expected_id]);
        let message = &generation.error_messages[0];
        assert!(
            message.contains("killed by SIGSEGV") && message.contains("out of cheese"),
            "{message}"
        );
        assert_eq!(
            message.contains("may be sent again"),
            n < 3,
            "the last end is not followed by a restart: {message}"
        );
    }
}

#[test]
fn c36_c38_a_child_that_exits_at_once_is_reported_so_each_time_until_the_verdict() {
    let mut config = RestartConfig::default();
    config.budget = 2;
    let (seen, verdict) = supervise(config, |_| Script::ExitAtOnce(Exit::Code(127)));
    assert!(matches!(verdict, RestartVerdict::GiveUp { .. }));
    assert_eq!(seen.len(), 3);
    for generation in &seen {
        assert!(
            matches!(
                generation.startup,
                StartupVerdict::ExitedBeforeFirstMessage {
                    exit: Exit::Code(127),
                    ..
                }
            ),
            "{:?}",
            generation.startup
        );
        assert!(generation.unanswered.is_empty(), "nothing was sent");
    }
}

#[test]
fn c36_a_server_that_crashes_once_a_minute_keeps_being_restarted_until_the_window_says_no() {
    let mut config = RestartConfig::default();
    config.max_in_window = 4;
    config.window = Duration::from_secs(600);
    // Up 60 s each time: stable, so the budget never runs out.
    let (seen, verdict) = supervise(config, |_| {
        Script::CrashAfter(Duration::from_secs(60), Exit::Code(1))
    });
    assert_eq!(seen.len(), 5);
    assert!(
        matches!(
            verdict,
            RestartVerdict::GiveUp {
                reason: GiveUpReason::TooManyInWindow { restarts: 4, .. },
                ..
            }
        ),
        "{verdict:?}"
    );
}
