//! A supervised child (C36, C37): restarted after an unexpected end and re-initialized before
//! traffic resumes, given up on when it keeps crashing, and its unanswered requests answered with
//! errors when it ends.
// Most of these tests kill a child by its pid and run on Unix only; elsewhere their helpers and
// imports go unused.
#![cfg_attr(not(unix), allow(unused_imports, dead_code))]

use std::sync::Arc;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::Duration;

use super::rt::{
    self, Closed, Exit, ExitReport, GiveUpReason, Received, SendErrorKind, Supervised,
    SupervisedEvent, Supervision, WhileDown,
};
use super::support::*;

/// What each re-initialization sends; the echo child answers with the same line.
const INIT: &str = r#"{"jsonrpc":"2.0","method":"init"}"#;

/// Restarts quick enough for a test, with no jitter.
fn supervision(budget: u32) -> Supervision {
    let mut supervision = Supervision::default();
    supervision.restart.initial_backoff = Duration::from_millis(10);
    supervision.restart.jitter = 0.0;
    supervision.restart.budget = budget;
    supervision
}

/// The next event; panics if the supervision ended or stalls.
async fn event(s: &mut Supervised) -> SupervisedEvent {
    within(STEP, "supervised recv", s.recv())
        .await
        .expect("the supervision ended early")
}

/// The next event, which must be a generation's exit report.
async fn exited(s: &mut Supervised) -> ExitReport {
    match event(s).await {
        SupervisedEvent::Received(Received::Exited(report)) => *report,
        other => panic!("expected an exit report, got {other:?}"),
    }
}

/// The next event, which must be a message; its text.
async fn text_of(s: &mut Supervised) -> String {
    match event(s).await {
        SupervisedEvent::Received(Received::Message(m)) => {
            String::from_utf8(m.bytes().to_vec()).expect("UTF-8")
        }
        other => panic!("expected a message, got {other:?}"),
    }
}

/// The next event, which must be the first generation's start (its initialization done).
async fn started(s: &mut Supervised) {
    match event(s).await {
        SupervisedEvent::Started { generation } => assert_eq!(generation, 1),
        other => panic!("expected the first generation's start, got {other:?}"),
    }
}

/// The next event, which must be the restart of `generation`.
async fn restarted(s: &mut Supervised, generation: u32) {
    match event(s).await {
        SupervisedEvent::Restarted { generation: g } => assert_eq!(g, generation),
        other => panic!("expected restart #{generation}, got {other:?}"),
    }
}

async fn roundtrip_supervised(s: &mut Supervised, msg: &str) {
    within(STEP, "send", s.send(msg))
        .await
        .unwrap_or_else(|err| panic!("send {msg:?} failed: {err}"));
    assert_eq!(text_of(s).await, msg);
}

#[cfg(unix)]
fn kill_9(pid: u32) {
    let status = std::process::Command::new("kill")
        .args(["-KILL", &pid.to_string()])
        .status()
        .expect("run kill");
    assert!(status.success(), "kill -KILL {pid}");
}

#[cfg(unix)]
#[test]
fn c36_a_killed_child_is_restarted_and_the_session_goes_on_after_reinit() {
    run(async {
        let reinits = Arc::new(AtomicU32::new(0));
        let counted = Arc::clone(&reinits);
        let mut s = Supervised::spawn(&misbehave(&["echo"]), config(), supervision(3), move |t| {
            let counted = Arc::clone(&counted);
            Box::pin(async move {
                t.send(INIT).await?;
                match t.recv().await {
                    Some(Received::Message(m)) if m.bytes() == INIT.as_bytes() => {}
                    other => return Err(format!("no answer to init: {other:?}").into()),
                }
                counted.fetch_add(1, Ordering::SeqCst);
                Ok(())
            })
        })
        .expect("spawn");
        // The first generation is initialized by the same step, before anything else.
        started(&mut s).await;
        assert_eq!(
            reinits.load(Ordering::SeqCst),
            1,
            "generation 1 initialized"
        );
        roundtrip_supervised(&mut s, r#"{"before":"kill"}"#).await;
        let first = s.id().expect("a pid");
        kill_9(first);

        let report = exited(&mut s).await;
        assert_eq!(report.exit, Exit::Signal(9), "{report}");
        assert!(report.unexpected());
        restarted(&mut s, 2).await;
        assert_eq!(
            reinits.load(Ordering::SeqCst),
            2,
            "re-initialized once more"
        );
        let second = s.id().expect("the new generation's pid");
        assert_ne!(first, second);
        assert_reaped(first).await;

        // The init exchange was the step's; the caller sees only its own traffic.
        roundtrip_supervised(&mut s, r#"{"after":"restart"}"#).await;

        let report = within(STEP, "shutdown", s.shutdown())
            .await
            .expect("shutdown");
        assert!(!report.unexpected(), "{report}");
        let last = exited(&mut s).await;
        assert!(!last.unexpected(), "{last}");
        assert!(
            within(STEP, "recv after shutdown", s.recv())
                .await
                .is_none(),
            "a shutdown is not restarted"
        );
        assert_eq!(reinits.load(Ordering::SeqCst), 2);
        assert_reaped(second).await;
        let refused = s
            .send("{}")
            .await
            .expect_err("no generation after shutdown");
        assert_eq!(refused.kind(), SendErrorKind::Closed(Closed::Closing));
    });
}

#[test]
fn c36_a_crash_loop_ends_in_the_budgets_verdict_with_every_report() {
    run(async {
        let mut s = Supervised::spawn(
            &misbehave(&["fail-start"]),
            config(),
            supervision(2),
            |_| Box::pin(async { Ok(()) }),
        )
        .expect("spawn");
        let mut reports = Vec::new();
        let verdict = loop {
            match event(&mut s).await {
                SupervisedEvent::Received(Received::Exited(report)) => reports.push(*report),
                SupervisedEvent::Started { generation } => assert_eq!(generation, 1),
                SupervisedEvent::Restarted { generation } => {
                    assert_eq!(generation as usize, reports.len() + 1);
                }
                SupervisedEvent::GaveUp(verdict) => break verdict,
                other => panic!("unexpected event: {other:?}"),
            }
        };
        assert!(
            within(STEP, "recv after the verdict", s.recv())
                .await
                .is_none(),
            "the verdict is last"
        );
        assert_eq!(reports.len(), 3, "the first run and two restarts");
        assert!(matches!(
            verdict.reason,
            GiveUpReason::BudgetSpent { restarts: 2, .. }
        ));
        assert_eq!(verdict.history.len(), 3);
        assert_eq!(
            verdict.history.iter().map(|g| g.number).collect::<Vec<_>>(),
            [1, 2, 3]
        );
        assert_eq!(verdict.reports, reports);
        for report in &verdict.reports {
            assert_eq!(report.exit, Exit::Code(1), "{report}");
            assert!(
                report.stderr_tail.contains("Cannot find module"),
                "{report}"
            );
        }
        let text = verdict.to_string();
        assert!(text.contains("after 2 restarts in a row"), "{text}");
        let refused = s
            .send("{}")
            .await
            .expect_err("no generation after the verdict");
        assert_eq!(refused.kind(), SendErrorKind::Closed(Closed::Exited));
        assert!(refused.exit_report().is_some(), "{refused}");
    });
}

/// A request with this id, which the `no-read` child never answers.
fn request(id: &str) -> String {
    format!(r#"{{"jsonrpc":"2.0","id":{id},"method":"tools/call"}}"#)
}

/// The error responses that follow a generation's report, up to the next other event.
async fn unanswered(s: &mut Supervised, count: usize) -> Vec<(String, String)> {
    let mut out = Vec::new();
    for _ in 0..count {
        match event(s).await {
            SupervisedEvent::Unanswered(request) => out.push((
                String::from_utf8(request.id.to_vec()).expect("UTF-8"),
                String::from_utf8(request.response.to_vec()).expect("UTF-8"),
            )),
            other => panic!("expected an error response, got {other:?}"),
        }
    }
    out
}

#[cfg(unix)]
#[test]
fn c37_pending_requests_get_error_responses_on_restart_and_on_exit() {
    run(async {
        let mut supervision = supervision(3);
        supervision.track_requests = true;
        let ready = r#"{"ready":true}"#;
        let mut s = Supervised::spawn(&misbehave(&["no-read"]), config(), supervision, move |t| {
            Box::pin(async move {
                match t.recv().await {
                    Some(Received::Message(m)) if m.bytes() == ready.as_bytes() => Ok(()),
                    other => Err(format!("not ready: {other:?}").into()),
                }
            })
        })
        .expect("spawn");
        // The hook took the greeting: the first generation is ready.
        started(&mut s).await;
        for id in ["1", r#""a""#] {
            within(STEP, "send", s.send(request(id)))
                .await
                .expect("send");
        }
        // A notification waits for no answer.
        within(STEP, "send", s.send(r#"{"jsonrpc":"2.0","method":"note"}"#))
            .await
            .expect("send");
        kill_9(s.id().expect("a pid"));

        let report = exited(&mut s).await;
        assert_eq!(report.exit, Exit::Signal(9), "{report}");
        // The report names them too.
        assert_eq!(report.unanswered_ids, [&b"1"[..], br#""a""#]);
        assert!(
            report
                .to_string()
                .contains(r#"; 2 requests never answered (ids 1, "a")"#),
            "{report}"
        );
        let errors = unanswered(&mut s, 2).await;
        assert_eq!(errors[0].0, "1");
        assert_eq!(errors[1].0, r#""a""#);
        for (id, response) in &errors {
            assert!(
                response.starts_with(&format!(r#"{{"jsonrpc":"2.0","id":{id},"error":"#)),
                "{response}"
            );
            assert!(response.contains("killed by SIGKILL"), "{response}");
            assert!(response.contains(r#""restarting":true"#), "{response}");
        }
        restarted(&mut s, 2).await;

        within(STEP, "send", s.send(request("2")))
            .await
            .expect("send");
        // The child never reads: the shutdown ends it with SIGTERM. Its report names the request
        // left unanswered, as the one `recv` hands out does.
        let shut = within(STEP, "shutdown", s.shutdown())
            .await
            .expect("shutdown");
        assert_eq!(shut.unanswered_ids, [&b"2"[..]], "{shut}");
        let report = exited(&mut s).await;
        assert_eq!(report.unanswered_ids, [&b"2"[..]]);
        let errors = unanswered(&mut s, 1).await;
        assert_eq!(errors[0].0, "2");
        assert!(
            errors[0].1.contains(r#""restarting":false"#),
            "{}",
            errors[0].1
        );
        assert!(
            within(STEP, "recv after the end", s.recv()).await.is_none(),
            "nothing after the last error response"
        );
    });
}

#[cfg(unix)]
#[test]
fn c37_a_send_refused_by_a_dead_generation_names_its_unanswered_requests_as_recv_does() {
    run(async {
        let mut supervision = supervision(3);
        supervision.track_requests = true;
        supervision.while_down = WhileDown::Fail;
        let mut s = Supervised::spawn(&misbehave(&["no-read"]), config(), supervision, |_| {
            Box::pin(async { Ok(()) })
        })
        .expect("spawn");
        started(&mut s).await;
        assert_eq!(text_of(&mut s).await, r#"{"ready":true}"#);
        within(STEP, "send", s.send(request("1")))
            .await
            .expect("send");
        kill_9(s.id().expect("a pid"));
        // No `recv` meanwhile: the refusal is the first to learn the end. Sends that go out
        // before the end is known are requests left unanswered too.
        let refused = within(STEP, "a refused send", async {
            loop {
                if let Err(err) = s.send(request("2")).await {
                    break err;
                }
            }
        })
        .await;
        let from_send = refused.exit_report().expect("the report").clone();
        assert_eq!(from_send.exit, Exit::Signal(9), "{from_send}");
        assert_eq!(from_send.unanswered_ids[0], &b"1"[..], "{from_send}");
        assert!(
            from_send.unanswered_ids[1..]
                .iter()
                .all(|id| id == &b"2"[..]),
            "{from_send}"
        );
        let from_recv = exited(&mut s).await;
        assert_eq!(from_recv.unanswered_ids, from_send.unanswered_ids);
        let errors = unanswered(&mut s, from_send.unanswered_ids.len()).await;
        assert_eq!(errors[0].0, "1");
        within(STEP, "shutdown", s.shutdown())
            .await
            .expect("shutdown");
    });
}

#[test]
fn c36_a_child_that_dies_during_reinit_counts_as_a_crash() {
    run(async {
        // The step waits for a greeting the crashing child never sends: it sees the end instead.
        let mut s = Supervised::spawn(&misbehave(&["fail-start"]), config(), supervision(1), |t| {
            Box::pin(async move {
                match t.recv().await {
                    Some(Received::Message(_)) => Ok(()),
                    other => Err(format!("no greeting: {other:?}").into()),
                }
            })
        })
        .expect("spawn");
        for expected in [1, 2] {
            match event(&mut s).await {
                SupervisedEvent::ReinitFailed { generation, error } => {
                    assert_eq!(generation, expected);
                    assert!(error.to_string().contains("no greeting"), "{error}");
                }
                other => panic!("expected the failed initialization, got {other:?}"),
            }
            if expected == 1 {
                assert_eq!(exited(&mut s).await.exit, Exit::Code(1));
            }
        }
        let report = exited(&mut s).await;
        assert_eq!(report.exit, Exit::Code(1), "{report}");
        match event(&mut s).await {
            SupervisedEvent::GaveUp(verdict) => assert_eq!(verdict.reports.len(), 2),
            other => panic!("expected the verdict, got {other:?}"),
        }
        assert!(
            within(STEP, "recv after the verdict", s.recv())
                .await
                .is_none()
        );
    });
}

/// An echo child whose re-initialization is one `INIT` round trip.
#[cfg(unix)]
fn echo_supervised(while_down: WhileDown) -> Supervised {
    let mut supervision = supervision(3);
    supervision.while_down = while_down;
    Supervised::spawn(&misbehave(&["echo"]), config(), supervision, |t| {
        Box::pin(async move {
            t.send(INIT).await?;
            match t.recv().await {
                Some(Received::Message(m)) if m.bytes() == INIT.as_bytes() => Ok(()),
                other => Err(format!("no answer to init: {other:?}").into()),
            }
        })
    })
    .expect("spawn")
}

#[cfg(unix)]
#[test]
fn c36_a_send_while_the_child_is_down_waits_for_the_next_generation() {
    run(async {
        let mut s = echo_supervised(WhileDown::Wait);
        started(&mut s).await;
        kill_9(s.id().expect("a pid"));
        exited(&mut s).await;
        // Down until the next recv restarts it: this send waits for the re-initialized child.
        let sender = s.sender();
        let sent = rt::spawn(async move { sender.send(r#"{"queued":true}"#).await.is_ok() });
        restarted(&mut s, 2).await;
        assert!(
            within(STEP, "the waiting send", sent).await,
            "sent to generation 2"
        );
        assert_eq!(text_of(&mut s).await, r#"{"queued":true}"#);
        within(STEP, "shutdown", s.shutdown())
            .await
            .expect("shutdown");
    });
}

#[cfg(unix)]
#[test]
fn c36_a_send_while_the_child_is_down_fails_at_once_when_asked() {
    run(async {
        let mut s = echo_supervised(WhileDown::Fail);
        started(&mut s).await;
        kill_9(s.id().expect("a pid"));
        exited(&mut s).await;
        let refused = within(STEP, "send while down", s.send("{}"))
            .await
            .expect_err("the child is down");
        assert_eq!(refused.kind(), SendErrorKind::Closed(Closed::Exited));
        let report = refused.exit_report().expect("the last report");
        assert_eq!(report.exit, Exit::Signal(9), "{report}");
        restarted(&mut s, 2).await;
        roundtrip_supervised(&mut s, r#"{"after":"restart"}"#).await;
        within(STEP, "shutdown", s.shutdown())
            .await
            .expect("shutdown");
    });
}

#[cfg(unix)]
#[test]
fn c36_a_send_while_the_child_is_down_waits_at_most_the_write_timeout() {
    const LIMIT: Duration = Duration::from_millis(300);
    run(async {
        let mut supervision = supervision(3);
        supervision.while_down = WhileDown::Wait;
        let mut config = config();
        config.write_timeout(Some(LIMIT));
        let mut s = Supervised::spawn(&misbehave(&["echo"]), config, supervision, |_| {
            Box::pin(async { Ok(()) })
        })
        .expect("spawn");
        started(&mut s).await;
        kill_9(s.id().expect("a pid"));
        exited(&mut s).await;
        // Nothing calls recv, so nothing restarts the child: the send waits
        // for a generation that does not come, until its limit.
        let began = std::time::Instant::now();
        let refused = within(STEP, "send while down", s.send("{}"))
            .await
            .expect_err("no generation came");
        let waited = began.elapsed();
        assert!(
            waited >= LIMIT,
            "gave up after {waited:?}, before {LIMIT:?}"
        );
        assert_eq!(refused.kind(), SendErrorKind::Closed(Closed::Exited));
        let report = refused.exit_report().expect("the last report");
        assert_eq!(report.exit, Exit::Signal(9), "{report}");
        within(STEP, "shutdown", s.shutdown())
            .await
            .expect("the last report");
    });
}

#[cfg(unix)]
#[test]
fn c36_a_shutdown_while_the_child_is_down_is_not_restarted() {
    run(async {
        let mut s = echo_supervised(WhileDown::Wait);
        started(&mut s).await;
        let pid = s.id().expect("a pid");
        kill_9(pid);
        exited(&mut s).await;
        // Down: the shutdown has no child to end, and returns the last report.
        let report = within(STEP, "shutdown", s.shutdown())
            .await
            .expect("the last report");
        assert_eq!(report.exit, Exit::Signal(9), "{report}");
        assert!(
            within(STEP, "recv after shutdown", s.recv())
                .await
                .is_none(),
            "no restart after a shutdown"
        );
        assert_eq!(s.id(), None);
        assert_eq!(s.generation(), 1);
        assert_reaped(pid).await;
    });
}

#[cfg(unix)]
#[test]
fn c36_dropping_the_supervised_side_releases_a_waiting_sender() {
    run(async {
        let mut s = echo_supervised(WhileDown::Wait);
        started(&mut s).await;
        kill_9(s.id().expect("a pid"));
        exited(&mut s).await;
        let sender = s.sender();
        drop(s);
        let refused = within(STEP, "send after the drop", sender.send("{}"))
            .await
            .expect_err("nothing restarts the child any more");
        assert_eq!(refused.kind(), SendErrorKind::Closed(Closed::Closing));
    });
}

/// The first generation's initialization runs before any message: a send made at once waits for
/// it, and the child sees the step's exchange first.
#[cfg(unix)]
#[test]
fn c36_the_first_generation_is_initialized_by_the_hook_before_any_send() {
    run(async {
        let mut s = echo_supervised(WhileDown::Wait);
        let sender = s.sender();
        let sent = rt::spawn(async move { sender.send(r#"{"first":"send"}"#).await.is_ok() });
        started(&mut s).await;
        assert!(
            within(STEP, "the waiting send", sent).await,
            "sent once initialized"
        );
        // The step took INIT's echo; the caller's own message comes next.
        assert_eq!(text_of(&mut s).await, r#"{"first":"send"}"#);
        within(STEP, "shutdown", s.shutdown())
            .await
            .expect("shutdown");
    });
}

/// `Transport::request` in an initialization: the answer, found by its id, without scanning.
#[cfg(unix)]
#[test]
fn c36_an_initialization_waits_for_its_answer_with_request() {
    run(async {
        let mut s = Supervised::spawn(&misbehave(&["answer"]), config(), supervision(1), |t| {
            Box::pin(async move {
                let answer = t
                    .request(r#"{"jsonrpc":"2.0","id":0,"method":"initialize"}"#)
                    .await?;
                if answer.bytes() != r#"{"jsonrpc":"2.0","id":0,"result":{}}"#.as_bytes() {
                    return Err(format!("another answer: {answer:?}").into());
                }
                Ok(())
            })
        })
        .expect("spawn");
        started(&mut s).await;
        within(STEP, "send", s.send(request("1")))
            .await
            .expect("send");
        assert_eq!(
            text_of(&mut s).await,
            r#"{"jsonrpc":"2.0","id":1,"result":{}}"#
        );
        within(STEP, "shutdown", s.shutdown())
            .await
            .expect("shutdown");
    });
}

/// How many runs the restart race gets per runtime: a request answered twice showed in 6 runs
/// of 9 before, so 200 leave no room for luck.
const RACE_RUNS: usize = 200;

/// How many requests are in flight when the child is killed.
const IN_FLIGHT: usize = 300;

/// 300 requests in flight, the child killed with SIGKILL: every request is answered exactly
/// once, by the child (the first generation, or the second after its send is retried) or by the
/// tracker's error, never both and never neither.
#[cfg(unix)]
#[test]
fn c37_every_request_in_flight_at_a_kill_is_answered_exactly_once() {
    use std::collections::HashMap;
    for run_number in 0..RACE_RUNS {
        run(async move {
            let mut supervision = supervision(3);
            supervision.track_requests = true;
            supervision.while_down = WhileDown::Wait;
            let mut s = Supervised::spawn(&misbehave(&["answer"]), config(), supervision, |_| {
                Box::pin(async { Ok(()) })
            })
            .expect("spawn");
            started(&mut s).await;
            let pid = s.id().expect("a pid");
            let sender = s.sender();
            let senders: Vec<_> = (0..IN_FLIGHT)
                .map(|id| {
                    let sender = sender.clone();
                    rt::spawn(async move { sender.send(request(&id.to_string())).await.is_ok() })
                })
                .collect();
            let mut answers: HashMap<String, u32> = HashMap::new();
            // Killed once this many answers came (0: at once), most requests still in flight.
            let kill_after = run_number % 40;
            let mut killed = kill_after == 0;
            if killed {
                kill_9(pid);
            }
            let mut restarted_seen = false;
            while answers.len() < IN_FLIGHT || !restarted_seen {
                match event(&mut s).await {
                    SupervisedEvent::Received(Received::Message(m)) => {
                        let text = String::from_utf8(m.bytes().to_vec()).expect("UTF-8");
                        let value: serde_json::Value = serde_json::from_str(&text).expect("JSON");
                        *answers.entry(value["id"].to_string()).or_default() += 1;
                        if !killed && answers.len() >= kill_after {
                            killed = true;
                            kill_9(pid);
                        }
                    }
                    SupervisedEvent::Unanswered(request) => {
                        let id = String::from_utf8(request.id.to_vec()).expect("UTF-8");
                        *answers.entry(id).or_default() += 1;
                    }
                    SupervisedEvent::Received(Received::Exited(_)) => {}
                    SupervisedEvent::Restarted { .. } => restarted_seen = true,
                    other => panic!("unexpected event: {other:?}"),
                }
            }
            for sent in senders {
                assert!(
                    within(STEP, "a send", sent).await,
                    "every send went through"
                );
            }
            let twice: Vec<_> = answers.iter().filter(|(_, n)| **n > 1).collect();
            assert!(
                twice.is_empty(),
                "run {run_number}: answered twice: {twice:?}"
            );
            assert_eq!(
                answers.len(),
                IN_FLIGHT,
                "run {run_number}: some never answered"
            );
            within(STEP, "shutdown", s.shutdown())
                .await
                .expect("shutdown");
        });
    }
}

/// Request tracking beyond its limit says so: every request past it is named by an event, and
/// the report counts them; nothing is silently left without an answer. (It used to stop at
/// 1,024 pending requests with no word: 98,986 of 100,010 got nothing.)
#[cfg(unix)]
#[test]
fn c37_requests_beyond_the_trackers_limit_are_named_and_counted_not_silently_dropped() {
    run(async {
        const LIMIT: usize = 16;
        const SENT: usize = 40;
        let mut supervision = supervision(0);
        supervision.track_requests = true;
        supervision.max_tracked = LIMIT;
        let mut s = Supervised::spawn(&misbehave(&["no-read"]), config(), supervision, |t| {
            Box::pin(async move {
                match t.recv().await {
                    Some(Received::Message(_)) => Ok(()),
                    other => Err(format!("not ready: {other:?}").into()),
                }
            })
        })
        .expect("spawn");
        started(&mut s).await;
        for id in 0..SENT {
            within(STEP, "send", s.send(request(&id.to_string())))
                .await
                .expect("send");
        }
        kill_9(s.id().expect("a pid"));
        let mut untracked = Vec::new();
        let report = loop {
            match event(&mut s).await {
                SupervisedEvent::Untracked(id) => {
                    untracked.push(String::from_utf8(id.to_vec()).unwrap())
                }
                SupervisedEvent::Received(Received::Exited(report)) => break *report,
                other => panic!("unexpected event: {other:?}"),
            }
        };
        let expected: Vec<String> = (LIMIT..SENT).map(|id| id.to_string()).collect();
        assert_eq!(untracked, expected, "each request past the limit is named");
        assert_eq!(report.unanswered_ids.len(), LIMIT, "{report}");
        assert_eq!(report.untracked_requests, (SENT - LIMIT) as u64, "{report}");
        assert!(
            report.to_string().contains("24 requests not tracked"),
            "{report}"
        );
        assert_eq!(unanswered(&mut s, LIMIT).await.len(), LIMIT);
    });
}

/// A server that writes an id back another way (a JavaScript one, re-serializing `1.0` as `1`)
/// still answers the request: ids compare as JSON values.
#[cfg(unix)]
#[test]
fn c37_an_answer_whose_id_is_spelled_otherwise_still_answers_its_request() {
    run(async {
        let mut supervision = supervision(0);
        supervision.track_requests = true;
        let mut s = Supervised::spawn(&misbehave(&["echo"]), config(), supervision, |_| {
            Box::pin(async { Ok(()) })
        })
        .expect("spawn");
        started(&mut s).await;
        // The echo child sends the request back; the answer it stands for has id 1.
        within(
            STEP,
            "send",
            s.send(r#"{"jsonrpc":"2.0","id":1.0,"method":"x"}"#),
        )
        .await
        .expect("send");
        assert_eq!(
            text_of(&mut s).await,
            r#"{"jsonrpc":"2.0","id":1.0,"method":"x"}"#
        );
        within(
            STEP,
            "send",
            s.send(r#"{"jsonrpc":"2.0","id":1,"result":{}}"#),
        )
        .await
        .expect("send");
        assert_eq!(
            text_of(&mut s).await,
            r#"{"jsonrpc":"2.0","id":1,"result":{}}"#
        );
        let report = within(STEP, "shutdown", s.shutdown())
            .await
            .expect("shutdown");
        assert!(report.unanswered_ids.is_empty(), "answered: {report}");
    });
}

/// An idle child is stopped the graceful way after the configured time; a later send starts a
/// new generation, runs its initialization, and then goes, and its answer comes.
#[test]
fn an_idle_server_is_stopped_and_the_next_send_restarts_it_and_gets_its_answer() {
    run(async {
        let reinits = Arc::new(AtomicU32::new(0));
        let counted = Arc::clone(&reinits);
        let mut supervision = supervision(3);
        supervision.idle_stop = Some(Duration::from_millis(300));
        let mut s = Supervised::spawn(&misbehave(&["echo"]), config(), supervision, move |t| {
            let counted = Arc::clone(&counted);
            Box::pin(async move {
                t.send(INIT).await?;
                match t.recv().await {
                    Some(Received::Message(m)) if m.bytes() == INIT.as_bytes() => {}
                    other => return Err(format!("no answer to init: {other:?}").into()),
                }
                counted.fetch_add(1, Ordering::SeqCst);
                Ok(())
            })
        })
        .expect("spawn");
        started(&mut s).await;
        roundtrip_supervised(&mut s, r#"{"before":"idle"}"#).await;
        let first = s.id().expect("a pid");

        // Nothing more to do: the next event is the idle generation's end.
        let report = exited(&mut s).await;
        assert!(report.stopped_when_idle, "{report}");
        assert!(
            report.shutdown_requested && !report.unexpected(),
            "{report}"
        );
        assert_eq!(
            report.exit,
            Exit::Code(0),
            "echo exits at its stdin's EOF: {report}"
        );
        assert!(report.to_string().contains("stopped when idle"), "{report}");
        assert_eq!(s.id(), None, "no child while idle");
        assert_reaped(first).await;

        // A send from another task wakes it; `recv` starts and initializes generation 2.
        let sender = s.sender();
        let send = rt::spawn(async move { sender.send(r#"{"after":"idle"}"#).await.is_ok() });
        restarted(&mut s, 2).await;
        assert_eq!(reinits.load(Ordering::SeqCst), 2, "initialized again first");
        assert_eq!(text_of(&mut s).await, r#"{"after":"idle"}"#);
        assert!(
            within(STEP, "the waking send", send).await,
            "the send went through"
        );
        let second = s.id().expect("the new generation's pid");
        assert_ne!(first, second);
        within(STEP, "shutdown", s.shutdown())
            .await
            .expect("shutdown");
        assert_reaped(second).await;
    });
}

/// Pings often, hung after 400 ms without an answer, CPU time or output.
fn watched(budget: u32) -> Supervision {
    let mut liveness = rt::LivenessConfig::default();
    liveness.ping_every = Duration::from_millis(50);
    liveness.ping_timeout = Duration::from_millis(100);
    liveness.hung_after = Duration::from_millis(400);
    liveness.cpu_every = Duration::from_millis(50);
    let mut supervision = supervision(budget);
    supervision.restart_when_hung = Some(liveness);
    supervision
}

/// A request the `answer` child answers with `{"jsonrpc":"2.0","id":ID,"result":{}}`.
async fn answered(s: &mut Supervised, id: u32) {
    let request = format!(r#"{{"jsonrpc":"2.0","id":{id},"method":"work"}}"#);
    within(STEP, "send", s.send(request)).await.expect("send");
    assert_eq!(
        text_of(s).await,
        format!(r#"{{"jsonrpc":"2.0","id":{id},"result":{{}}}}"#),
        "its answer, and no ping's answer, comes out of recv"
    );
}

/// A server that answers its pings runs on, their answers kept out of `recv`; stopped with
/// SIGSTOP it is found hung within the configured time, killed, its report says so, and the next
/// generation answers.
#[test]
#[cfg(unix)]
fn a_server_stopped_with_sigstop_is_found_hung_killed_and_restarted() {
    run(async {
        let mut s = Supervised::spawn(&misbehave(&["answer", "0"]), config(), watched(3), |_| {
            Box::pin(async { Ok(()) })
        })
        .expect("spawn");
        started(&mut s).await;
        answered(&mut s, 1).await;
        // Answering its pings for twice the hung time: nothing happens, nothing comes out.
        let quiet = rt::timeout(Duration::from_millis(800), s.recv()).await;
        assert!(
            quiet.is_none(),
            "an answering server was disturbed: {quiet:?}"
        );
        answered(&mut s, 2).await;

        let first = s.id().expect("a pid");
        let status = std::process::Command::new("kill")
            .args(["-STOP", &first.to_string()])
            .status()
            .expect("kill -STOP");
        assert!(status.success());
        let stopped = std::time::Instant::now();
        let report = exited(&mut s).await;
        let found = stopped.elapsed();
        assert!(report.killed_when_hung, "{report}");
        assert!(
            report.unexpected(),
            "a hung child's end is a crash: {report}"
        );
        assert!(report.to_string().contains("hung"), "{report}");
        assert!(
            found < Duration::from_millis(400 + 1000),
            "found hung {found:?} after the stop (hung after 400 ms)"
        );
        assert_reaped(first).await;
        restarted(&mut s, 2).await;
        answered(&mut s, 3).await;
        let second = s.id().expect("the new generation's pid");
        assert_ne!(first, second);
        within(STEP, "shutdown", s.shutdown())
            .await
            .expect("shutdown");
        assert_reaped(second).await;
    });
}

/// A server that answers no ping but computes for twice the hung time (its CPU time advancing)
/// is busy, not hung: it is not killed.
#[test]
#[cfg(target_os = "linux")]
fn a_server_computing_for_twice_the_hung_time_is_not_killed() {
    run(async {
        let mut s = Supervised::spawn(&misbehave(&["spin"]), config(), watched(3), |_| {
            Box::pin(async { Ok(()) })
        })
        .expect("spawn");
        started(&mut s).await;
        assert_eq!(text_of(&mut s).await, r#"{"spinning":true}"#);
        let quiet = rt::timeout(Duration::from_millis(800), s.recv()).await;
        assert!(quiet.is_none(), "a computing server was ended: {quiet:?}");
        let pid = s.id().expect("still running");
        let report = within(STEP, "shutdown", s.shutdown())
            .await
            .expect("shutdown");
        assert!(!report.killed_when_hung, "{report}");
        assert_reaped(pid).await;
    });
}
