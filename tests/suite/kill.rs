//! `kill` and `try_wait`: the immediate stop and the non-blocking "has it ended" of
//! `tokio::process::Child`, on a transport (C12, C15).

use std::time::Duration;

use super::rt::{Closed, EndedBy, Exit, SendErrorKind};
use super::support::*;

/// Graces far longer than [`STEP`]: a kill that took the graceful path would time out.
fn patient_config() -> super::rt::Config {
    let mut config = config();
    config.stdin_grace(Duration::from_secs(60));
    config.term_grace(Duration::from_secs(60));
    config
}

#[test]
fn c12_kill_ends_a_child_ignoring_eof_at_once_and_the_receiver_gets_the_same_report() {
    run(async {
        let mut t = start(&misbehave(&["ignore-eof"]), patient_config());
        let pid = pid_of(&t);
        roundtrip(&mut t, "alive").await;
        assert_eq!(t.try_wait(), None, "it runs");
        let report = within(STEP, "kill", t.kill()).await.expect("kill");
        assert_killed(&report);
        assert!(
            report.shutdown_requested && !report.unexpected(),
            "{report}"
        );
        assert_eq!(t.try_wait().as_ref(), Some(&report));
        let refused = t.send("too late").await.expect_err("sending after kill");
        assert!(
            matches!(
                refused.kind(),
                SendErrorKind::Closed(Closed::Closing | Closed::Exited)
            ),
            "{refused}"
        );
        let (messages, received) = drain_to_exit(&mut t).await;
        assert!(messages.is_empty(), "{messages:?}");
        assert_eq!(received.exit, report.exit);
        assert_eq!(received.ended_by, report.ended_by);
        assert_reaped(pid).await;
    });
}

// Signals to a group and the branch's `ignore-term` are Unix's.
#[cfg(unix)]
#[test]
fn c12_kill_cuts_a_shutdown_short_and_takes_the_whole_group() {
    run(async {
        let mut t = start(&misbehave(&["tree", "ignore-term"]), patient_config());
        let pid = pid_of(&t);
        let [branch, leaf] = tree_pids(&mut t).await;
        let (tx, mut rx) = t.split();
        // The graceful shutdown begins: stdin is closed, and SIGTERM would wait a minute.
        within(STEP, "close", tx.close()).await.expect("close");
        let report = within(STEP, "kill", tx.kill()).await.expect("kill");
        assert_killed(&report);
        let by_shutdown = within(STEP, "shutdown", tx.shutdown())
            .await
            .expect("shutdown");
        assert_eq!(by_shutdown, report, "one end, one report");
        loop {
            if let super::rt::Received::Exited(received) = within(STEP, "recv", rx.recv())
                .await
                .expect("the report before the end")
            {
                assert_eq!(received.ended_by, EndedBy::Sigkill);
                break;
            }
        }
        assert_reaped(pid).await;
        for pid in [branch, leaf] {
            eventually(STEP, "the group's other processes die", || {
                !childwire_conformance::process_alive(pid)
            })
            .await;
        }
    });
}

#[test]
fn c15_try_wait_has_the_report_of_a_child_that_ended_on_its_own_and_kill_then_returns_it() {
    run(async {
        let t = start_misbehave(&["exit-after", "1", "3"]);
        let pid = pid_of(&t);
        // Nobody receives: the report is known all the same.
        eventually(STEP, "the end is known", || t.try_wait().is_some()).await;
        let report = t.try_wait().expect("the report");
        assert_eq!(report.exit, Exit::Code(3));
        assert_eq!(report.ended_by, EndedBy::OnItsOwn);
        assert!(report.unexpected());
        let killed = within(STEP, "kill", t.kill())
            .await
            .expect("kill after the end");
        assert_eq!(killed, report, "nothing left to kill: the report as it is");
        assert_reaped(pid).await;
    });
}
