//! The end is never lost (C33): once the child has exited, every way a user meets its end carries
//! the exit report; no send returns `Ok` after the end is known, the runtime's drop included.

use std::time::Duration;

use futures_util::StreamExt;

use super::rt::{self, Command, Exit, ExitReport, Received, SendErrorKind, Transport};
use super::support::*;

/// How many times each runtime runs the child that exits at once: the report used to be lost in
/// a race between the exit, stderr's EOF and the caller, so one run proves little.
const RUNS: usize = 200;

/// What the child says on stderr before it exits with code 3.
#[cfg(unix)]
const SAID: &str = "cannot open database";
#[cfg(not(unix))]
const SAID: &str = "stderr line 3 of 3";

/// A child that fails at startup, as a server without its database does: the shell line of the
/// report that found the defect on Unix, the scripted child elsewhere. Its stderr is captured
/// quietly: shown (the default), 200 runs a path would flood the test output.
#[cfg(unix)]
fn exits_at_once() -> Command {
    let mut cmd = Command::new("sh");
    cmd.args(["-c", &format!("echo {SAID} >&2; exit 3")])
        .stderr(rt::StderrMode::Capture);
    if let Some(tag) = tag() {
        cmd.env(TAG_VAR, tag);
    }
    cmd
}

#[cfg(not(unix))]
fn exits_at_once() -> Command {
    misbehave(&["stderr-then-exit", "3"])
}

/// The report of that child, whatever path it came by.
fn assert_exited_at_once(report: &ExitReport, path: &str) {
    assert_eq!(report.exit, Exit::Code(3), "{path}: {report}");
    assert!(report.stderr_tail.contains(SAID), "{path}: {report}");
    let text = report.to_string();
    assert!(text.contains("exited with code 3"), "{path}: {text}");
    assert!(text.contains(SAID), "{path}: {text}");
}

/// Sends until a send fails, as a client that starts talking at once does; the send that fails
/// carries the report. Sends before the end may succeed (the pipe takes them).
async fn send_until_it_fails(t: &Transport) {
    let error = within(STEP, "a send to fail", async {
        loop {
            if let Err(err) = t
                .send("{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"ping\"}")
                .await
            {
                return err;
            }
        }
    })
    .await;
    assert!(
        matches!(error.kind(), SendErrorKind::Closed(_)),
        "send: {error}"
    );
    let report = error
        .exit_report()
        .unwrap_or_else(|| panic!("the failed send carries no report: {error}"));
    assert_exited_at_once(report, "send");
    assert!(error.to_string().contains(SAID), "send: {error}");
}

/// The receiver's way: `recv` (or the `Stream`), the report last, then the end.
async fn receive_the_report(t: &mut Transport, as_stream: bool) {
    let item = if as_stream {
        within(STEP, "the stream", t.next()).await
    } else {
        within(STEP, "recv", t.recv()).await
    };
    match item {
        Some(Received::Exited(report)) => assert_exited_at_once(&report, "recv"),
        other => panic!("expected the exit report, got {other:?}"),
    }
    assert!(
        within(STEP, "recv after the report", t.recv())
            .await
            .is_none()
    );
}

#[test]
fn c33_a_child_that_exits_at_once_is_reported_on_every_path() {
    run_for(Duration::from_secs(600), async {
        for run in 0..RUNS {
            let mut t = start(&exits_at_once(), config());
            let pid = pid_of(&t);
            let exit = t.exit_handle();
            // Each path first in turn: the first to meet the end must get the report too.
            match run % 4 {
                0 => {
                    send_until_it_fails(&t).await;
                    receive_the_report(&mut t, false).await;
                }
                1 => {
                    receive_the_report(&mut t, true).await;
                    send_until_it_fails(&t).await;
                }
                2 => {
                    let report = within(STEP, "the exit handle", exit.wait()).await;
                    assert_exited_at_once(&report.expect("a report"), "exit handle");
                    send_until_it_fails(&t).await;
                }
                _ => {}
            }
            let report = within(STEP, "shutdown", t.shutdown())
                .await
                .unwrap_or_else(|err| panic!("shutdown: {err}"));
            assert_exited_at_once(&report, "shutdown");
            // The handle outlives the transport.
            drop(t);
            let report = within(STEP, "the exit handle after the drop", exit.wait()).await;
            assert_exited_at_once(&report.expect("a report"), "exit handle");
            assert_reaped(pid).await;
        }
    });
}

/// A send refused because the child closed its stdin waits for the exit report until
/// `stdin_grace` plus `drain_grace` after the refusal. A child that exits before that deadline
/// with output nobody received yet has its report made one drain grace after the exit (stdout's
/// end is behind the caller's backlog), past the send's deadline: the report is certain by then,
/// and the refused send waits for it.
#[cfg(unix)]
#[test]
fn c33_a_send_refused_by_a_closed_stdin_waits_for_an_exit_that_came_before_its_deadline() {
    run(async {
        let grace = Duration::from_secs(2);
        let mut config = config();
        config.stdin_grace(grace).drain_grace(grace);
        config.recv_high_water(64 * 1024);
        // Its stdin closed at once, then lines nobody receives, and its exit 3 s later: a
        // second before the refused send's deadline, a drain grace before its report.
        let mut cmd = Command::new("sh");
        cmd.args(["-c", "exec 0<&-; yes x & sleep 3; exit 0"]);
        let t = start(&cmd, config);
        let pid = pid_of(&t);
        let (refused_at, refused) = within(STEP, "a send to be refused", async {
            loop {
                let at = std::time::Instant::now();
                if let Err(err) = t.send("{}").await {
                    return (at, err);
                }
            }
        })
        .await;
        assert_eq!(
            refused.kind(),
            SendErrorKind::Closed(rt::Closed::PeerClosed),
            "{refused}"
        );
        let waited = refused_at.elapsed();
        let report = refused
            .exit_report()
            .unwrap_or_else(|| panic!("no report after {waited:?}: {refused}"));
        assert_eq!(report.exit, Exit::Code(0), "{report}");
        assert!(
            !report.pipes_drained,
            "the caller's backlog held stdout's end: {report}"
        );
        assert_reaped(pid).await;
    });
}

#[test]
fn c33_after_the_runtime_is_dropped_no_send_succeeds() {
    run(async {
        let cmd = misbehave(&["ignore-eof"]);
        let started =
            rt::on_a_dropped_runtime(move || Transport::spawn(&cmd, config()).expect("spawn"));
        let t = match started {
            Ok(t) => t,
            Err(why) => {
                eprintln!("skipped: {why}");
                return;
            }
        };
        let sent = within(STEP, "send after the runtime was dropped", t.send("late")).await;
        let err = sent.expect_err("a send after the runtime is gone must not succeed");
        assert!(matches!(err.kind(), SendErrorKind::Closed(_)), "{err}");
        let report = err
            .exit_report()
            .unwrap_or_else(|| panic!("no report: {err}"));
        assert_killed(report);
    });
}

#[test]
fn c33_a_transport_dropped_unclosed_kills_its_child_and_its_exit_handle_says_so() {
    run(async {
        let mut t = start_misbehave(&["echo"]);
        let pid = pid_of(&t);
        roundtrip(&mut t, "alive").await;
        let exit = t.exit_handle();
        drop(t);
        let report = within(STEP, "the exit handle after the drop", exit.wait())
            .await
            .expect("the report of a child killed on drop");
        assert_killed(&report);
        assert!(!report.shutdown_requested, "{report}");
        assert_reaped(pid).await;
    });
}
