//! Shutdown, process groups, reaping and the exit report (C12–C15).

use std::time::{Duration, Instant};

use childwire_conformance::lines::{numbered_line, parse_numbered};
#[cfg(unix)]
use childwire_conformance::own_pgid;
use childwire_conformance::procfs::{LIVENESS_SUPPORTED, SUPPORTED};
use childwire_conformance::{live_group_members, pid_exists, process_alive};

use super::rt::{EndedBy, Exit, Received};
use super::support::*;

#[test]
fn c12_shutdown_of_a_child_that_exits_on_eof_is_immediate() {
    run(async {
        // Default graces (2 s each): a transport that sleeps through any of them fails here.
        let mut t = start(&misbehave(&["echo"]), super::rt::Config::default());
        // JSON: the default config names a plain-text line as pollution.
        roundtrip(&mut t, r#"{"jsonrpc":"2.0","method":"ping"}"#).await;
        let started = Instant::now();
        let report = finish(t).await;
        let took = started.elapsed();
        // Half a grace: sleeping through one cannot pass, a loaded machine can.
        assert!(took < Duration::from_secs(1), "shutdown took {took:?}");
        assert_eq!(report.ended_by, EndedBy::StdinClose);
        assert_eq!(report.exit, Exit::Code(0));
        assert!(report.shutdown_requested && !report.unexpected() && report.success());
        assert!(report.elapsed <= took, "report says {:?}", report.elapsed);
    });
}

#[test]
fn c12_shutdown_flushes_queued_messages_before_closing_stdin() {
    run(async {
        const MESSAGES: u64 = 1000;
        // The stdin grace counts from the shutdown request and covers the flush: 300 KB through
        // an echo takes a few ms, but seconds on a machine busy with other work. The grace is
        // not what this test is about: a long one, which the child (it exits at EOF) never
        // waits out.
        let mut config = config();
        config.stdin_grace(STEP);
        // Likewise the drain grace, the time stdout has after the exit to reach EOF: under Wine on
        // a loaded machine, reading the last echoes through a blocking thread took longer than 1 s
        // (499 of 1000 read before the end was reported, 1 full Wine run in 2).
        config.drain_grace(STEP);
        let t = start(&misbehave(&["echo"]), config);
        let pid = pid_of(&t);
        let (tx, rx) = t.split();
        for n in 0..MESSAGES {
            within(STEP, "send", tx.send(numbered_line(n, 300)))
                .await
                .expect("send");
        }
        // Straight to shutdown: whatever is still queued must reach the child first.
        let (messages, report) = finish_split(pid, tx, rx).await;
        assert_eq!(
            messages.len() as u64,
            MESSAGES,
            "every queued message was echoed; {report}; {:?}",
            report.counters
        );
        for (n, line) in messages.iter().enumerate() {
            assert_eq!(parse_numbered(line), Some(n as u64));
        }
        assert_eq!(report.ended_by, EndedBy::StdinClose);
        assert_eq!(report.counters.messages_out, MESSAGES);
    });
}

#[test]
fn c12_a_child_ignoring_eof_is_stopped_by_sigterm_after_stdin_grace() {
    // Windows: CTRL_BREAK_EVENT is the SIGTERM of this clause.
    run(async {
        const STDIN_GRACE: Duration = Duration::from_millis(100);
        let mut config = config();
        config.stdin_grace(STDIN_GRACE);
        config.term_grace(Duration::from_secs(5));
        let mut t = start(&misbehave(&["ignore-eof"]), config);
        roundtrip(&mut t, "alive").await;
        let started = Instant::now();
        let report = finish(t).await;
        let took = started.elapsed();
        assert_ended_by_the_graceful_step(&report);
        assert!(took >= STDIN_GRACE, "SIGTERM came after only {took:?}");
        assert!(
            took < Duration::from_secs(5),
            "took {took:?}: SIGTERM was not obeyed at once"
        );
        assert!(report.elapsed >= STDIN_GRACE && report.elapsed <= took);
    });
}

#[test]
fn c12_a_child_ignoring_eof_is_ended_by_shutdown_within_both_graces() {
    // Whichever step ends it (Windows: the break reaches only a child sharing the host's
    // console; without one the job is terminated after `term_grace`), it ends in time.
    run(async {
        const STDIN_GRACE: Duration = Duration::from_millis(100);
        const TERM_GRACE: Duration = Duration::from_millis(300);
        let mut config = config();
        config.stdin_grace(STDIN_GRACE);
        config.term_grace(TERM_GRACE);
        let mut t = start(&misbehave(&["ignore-eof"]), config);
        let pid = pid_of(&t);
        roundtrip(&mut t, "alive").await;
        let started = Instant::now();
        let report = finish(t).await;
        let took = started.elapsed();
        assert_ended_after_stdin_grace(&report);
        assert!(took >= STDIN_GRACE, "ended after only {took:?}");
        assert!(
            took < STDIN_GRACE + TERM_GRACE + Duration::from_secs(3),
            "took {took:?}"
        );
        assert!(!process_alive(pid));
    });
}

#[test]
fn c12_a_child_ignoring_sigterm_is_killed_after_both_graces() {
    // Windows: the child ignores CTRL_BREAK_EVENT, and its job is terminated.
    run(async {
        const STDIN_GRACE: Duration = Duration::from_millis(100);
        const TERM_GRACE: Duration = Duration::from_millis(100);
        let mut config = config();
        config.stdin_grace(STDIN_GRACE);
        config.term_grace(TERM_GRACE);
        let mut t = start(&misbehave(&["ignore-term"]), config);
        // Wait until SIGTERM is ignored, or the test would race the child's startup.
        assert_eq!(text(&mut t).await, "{\"ready\":true}");
        let started = Instant::now();
        let report = finish(t).await;
        let took = started.elapsed();
        assert_killed(&report);
        assert!(
            took >= STDIN_GRACE + TERM_GRACE,
            "SIGKILL came after only {took:?}"
        );
        assert!(
            took < STDIN_GRACE + TERM_GRACE + Duration::from_secs(3),
            "took {took:?}"
        );
        assert!(report.elapsed >= STDIN_GRACE + TERM_GRACE);
    });
}

/// `print-pgid` through the transport: (pid, pgid) as the child sees them.
#[cfg(unix)]
async fn child_pgid(process_group: bool) -> (u32, u32, u32) {
    let mut cmd = misbehave(&["print-pgid"]);
    cmd.process_group(process_group);
    let mut t = start(&cmd, config());
    let id = pid_of(&t);
    let line = text(&mut t).await;
    let (pid, pgid) = line
        .strip_prefix("{\"pid\":")
        .and_then(|rest| rest.strip_suffix('}'))
        .and_then(|rest| rest.split_once(",\"pgid\":"))
        .and_then(|(pid, pgid)| Some((pid.parse().ok()?, pgid.parse().ok()?)))
        .unwrap_or_else(|| panic!("unexpected {line:?}"));
    let (_, report) = drain_to_exit(&mut t).await;
    assert_eq!(report.exit, Exit::Code(0));
    assert_reaped(id).await;
    (id, pid, pgid)
}

#[cfg(unix)]
#[test]
fn c13_the_child_leads_its_own_process_group_by_default() {
    run(async {
        let (id, pid, pgid) = child_pgid(true).await;
        assert_eq!(id, pid, "Transport::id is the child's pid");
        assert_eq!(pgid, pid, "the child leads its own group");
    });
}

#[cfg(unix)]
#[test]
fn c13_the_process_group_can_be_opted_out_of() {
    run(async {
        let (_, pid, pgid) = child_pgid(false).await;
        assert_ne!(pgid, pid);
        if let Some(own) = own_pgid() {
            assert_eq!(pgid, own, "without its own group the child shares ours");
        }
    });
}

#[test]
fn c13_grandchildren_are_gone_after_shutdown() {
    run(async {
        for args in [&["grandchild"][..], &["grandchild", "ignore-term"]] {
            let mut t = start_misbehave(args);
            let grandchild = grandchild_pid(&mut t).await;
            let pgid = pid_of(&t);
            assert!(process_alive(grandchild) || !LIVENESS_SUPPORTED);
            if SUPPORTED {
                assert!(live_group_members(pgid).contains(&grandchild));
            }
            roundtrip(&mut t, "hi").await;
            let report = finish(t).await;
            // The launcher itself exits on EOF; its orphan is stopped with the group.
            assert_eq!(report.ended_by, EndedBy::StdinClose, "{args:?}");
            assert!(
                !process_alive(grandchild),
                "{args:?}: grandchild {grandchild} survived"
            );
        }
    });
}

#[test]
fn c13_a_grandchild_holding_stdout_open_does_not_stall_shutdown() {
    run(async {
        // The grandchild inherits the transport's stdin and stdout and ignores SIGTERM: stdout
        // reaches EOF only once the group is killed after the launcher exits.
        let mut t = start_misbehave(&["grandchild", "ignore-term", "hold-pipes"]);
        let grandchild = grandchild_pid(&mut t).await;
        roundtrip(&mut t, "hi").await;
        let started = Instant::now();
        let report = finish(t).await;
        let took = started.elapsed();
        assert_eq!(report.exit, Exit::Code(0));
        assert!(took < Duration::from_secs(3), "shutdown took {took:?}");
        assert!(!process_alive(grandchild));
    });
}

#[test]
fn c14_drop_without_shutdown_kills_and_reaps_the_whole_group() {
    run(async {
        for args in [&["grandchild", "ignore-term"][..], &["ignore-term"]] {
            let mut t = start_misbehave(args);
            let grandchild = match args[0] {
                "grandchild" => Some(grandchild_pid(&mut t).await),
                _ => {
                    assert_eq!(text(&mut t).await, "{\"ready\":true}");
                    None
                }
            };
            let pid = pid_of(&t);
            drop(t);
            eventually(STEP, "the dropped child is reaped", || !pid_exists(pid)).await;
            assert_reaped(pid).await;
            if let Some(grandchild) = grandchild {
                assert!(
                    !process_alive(grandchild),
                    "{args:?}: grandchild survived the drop"
                );
            }
        }
    });
}

#[test]
fn c14_drop_kills_a_tree_of_three_processes() {
    run(async {
        // The child, its child and its grandchild, all ignoring SIGTERM (Windows: console
        // control events), all alive until the drop; the child also ignores stdin's EOF.
        let mut t = start_misbehave(&["tree", "ignore-term"]);
        let pid = pid_of(&t);
        let [branch, leaf] = tree_pids(&mut t).await;
        roundtrip(&mut t, "the tree stands").await;
        for process in [pid, branch, leaf] {
            assert!(process_alive(process) || !LIVENESS_SUPPORTED, "{process}");
        }
        drop(t);
        eventually(STEP, "the whole tree is gone", || {
            [pid, branch, leaf]
                .iter()
                .all(|&process| !process_alive(process))
        })
        .await;
        // Dead is not yet reaped: after a drop the reaping is the background's, and follows.
        eventually(STEP, "the dropped child is reaped", || !pid_exists(pid)).await;
        assert_reaped(pid).await;
    });
}

#[test]
fn c14_a_child_that_exits_on_its_own_is_reaped() {
    run(async {
        let mut t = start_misbehave(&["exit-after", "2", "0"]);
        let pid = pid_of(&t);
        let (messages, report) = drain_to_exit(&mut t).await;
        assert_eq!(messages.len(), 2);
        assert_eq!(report.ended_by, EndedBy::OnItsOwn);
        // No shutdown and no drop yet: the report alone means the child was reaped.
        assert_reaped(pid).await;
        drop(t);
    });
}

#[test]
fn c15_the_report_counts_traffic_both_ways() {
    run(async {
        let mut t = start_misbehave(&["echo"]);
        let mut bytes = 0;
        for n in 0..10 {
            let msg = format!("{{\"n\":{n}}}");
            bytes += msg.len() as u64;
            roundtrip(&mut t, &msg).await;
        }
        let report = finish(t).await;
        let c = &report.counters;
        assert_eq!((c.messages_out, c.bytes_out), (10, bytes));
        assert_eq!((c.messages_in, c.bytes_in), (10, bytes));
        assert_eq!((c.oversized, c.blank_lines, c.stderr_bytes), (0, 0, 0));
        assert!(report.elapsed < Duration::from_secs(2));
        assert!(!report.to_string().is_empty());
    });
}

#[test]
fn c15_shutdown_after_the_child_exited_returns_its_report() {
    run(async {
        let mut t = start_misbehave(&["exit-after", "1", "4"]);
        let pid = pid_of(&t);
        let report = loop {
            match recv(&mut t).await {
                Received::Exited(report) => break report,
                Received::Message(_) => {}
                other => panic!("unexpected {other:?}"),
            }
        };
        assert_eq!(report.exit, Exit::Code(4));
        let again = within(STEP, "shutdown", t.shutdown())
            .await
            .expect("shutdown after exit still answers");
        assert_eq!(again.exit, Exit::Code(4));
        assert_eq!(again.ended_by, EndedBy::OnItsOwn);
        assert!(!again.shutdown_requested, "it exited before anyone asked");
        assert_reaped(pid).await;
    });
}
