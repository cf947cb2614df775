//! The child's stderr: always drained, tail kept for the report, lines to the caller (C09, C10).

use std::sync::{Arc, Mutex};

use super::rt::{EndedBy, Exit, Received, StderrMode};
use super::support::*;

/// `stderr-flood MIB` in `mode`: traffic on stdout keeps flowing while the child floods stderr,
/// and the child gets to write all of it (it says so on stdout). Returns the report.
async fn flood_stderr_while_talking(mode: StderrMode, mib: u64) -> super::rt::ExitReport {
    let mut cmd = misbehave(&["stderr-flood", &mib.to_string()]);
    cmd.stderr(mode);
    let mut t = start(&cmd, config());
    let mut echoed = 0u64;
    let mut done = None;
    send(&mut t, "m0").await;
    // Ping-pong until both the echoes and the flood are through; a stderr nobody drains
    // blocks the flooding thread and the "stderr_done" line never comes.
    while done.is_none() || echoed < 200 {
        let line = text(&mut t).await;
        assert!(
            !line.starts_with("{\"stderr_failed\""),
            "the child could not write stderr: {line}"
        );
        if let Some(bytes) = line.strip_prefix("{\"stderr_done\":") {
            done = bytes.strip_suffix('}').and_then(|b| b.parse::<u64>().ok());
            assert!(done.is_some(), "bad line {line:?}");
        } else {
            assert_eq!(line, format!("m{echoed}"));
            echoed += 1;
            if echoed < 200 {
                send(&mut t, &format!("m{echoed}")).await;
            }
        }
    }
    assert_eq!(done, Some(mib * 1024 * 1024));
    let report = finish(t).await;
    assert_eq!(report.ended_by, EndedBy::StdinClose);
    report
}

#[test]
fn c09_stderr_flood_never_blocks_stdout_traffic() {
    run(async {
        const MIB: u64 = 64;
        let report = flood_stderr_while_talking(StderrMode::Capture, MIB).await;
        assert_eq!(report.counters.stderr_bytes, MIB * 1024 * 1024);
        // The tail is bounded (default 64 KiB of lines), whatever the child wrote.
        assert!(
            report.stderr_tail.len() <= 80 * 1024,
            "stderr tail of {} bytes",
            report.stderr_tail.len()
        );
        assert!(report.stderr_tail.contains("stderr flood line"));
    });
}

#[test]
fn c09_discarded_stderr_never_blocks_either() {
    run(async {
        let report = flood_stderr_while_talking(StderrMode::Discard, 16).await;
        assert!(report.stderr_tail.is_empty());
    });
}

#[test]
fn c09_captured_stderr_lines_reach_the_callback() {
    run(async {
        let lines = Arc::new(Mutex::new(Vec::new()));
        let mut config = config();
        let sink = Arc::clone(&lines);
        config.on_stderr_line(move |line: &[u8]| {
            sink.lock().expect("lock").push(line.to_vec());
        });
        let mut t = start(&misbehave(&["stderr-then-exit", "0"]), config);
        let pid = pid_of(&t);
        let (_, report) = drain_to_exit(&mut t).await;
        assert_reaped(pid).await;
        assert_eq!(report.exit, Exit::Code(0));
        let lines = lines.lock().expect("lock").clone();
        let expected: Vec<Vec<u8>> = (1..=3)
            .map(|i| format!("stderr line {i} of 3").into_bytes())
            .collect();
        assert_eq!(
            lines, expected,
            "each line once, in order, without its newline; report: {report:?}"
        );
    });
}

#[test]
fn c10_a_server_that_fails_at_start_reports_its_stderr() {
    run(async {
        let mut t = start_misbehave(&["fail-start"]);
        let pid = pid_of(&t);
        let report = match recv(&mut t).await {
            Received::Exited(report) => report,
            other => panic!("expected the exit report, got {other:?}"),
        };
        assert!(within(STEP, "end", t.recv()).await.is_none());
        assert_reaped(pid).await;
        assert_eq!(report.exit, Exit::Code(1));
        assert_eq!(report.ended_by, EndedBy::OnItsOwn);
        assert!(report.unexpected());
        assert!(!report.success());
        assert!(report.stderr_tail.contains("Error: Cannot find module 'x'"));
        let shown = report.to_string();
        assert!(
            shown.contains("Cannot find module 'x'") && shown.contains("code 1"),
            "the report's one line says why: {shown}"
        );
    });
}

#[test]
fn c10_an_early_exit_reports_its_code_and_stderr_tail() {
    run(async {
        let mut t = start_misbehave(&["stderr-then-exit", "3"]);
        let pid = pid_of(&t);
        let (messages, report) = drain_to_exit(&mut t).await;
        assert_reaped(pid).await;
        assert!(messages.is_empty());
        assert_eq!(report.exit, Exit::Code(3));
        assert!(report.unexpected());
        let tail: Vec<&str> = report.stderr_tail.lines().collect();
        assert_eq!(
            tail,
            [
                "stderr line 1 of 3",
                "stderr line 2 of 3",
                "stderr line 3 of 3"
            ]
        );
    });
}

/// What the child's fd 2 is in `mode`, as `/proc/self/fd/2` names it.
#[cfg(target_os = "linux")]
async fn child_stderr_target(mode: StderrMode) -> String {
    let mut cmd = misbehave(&["print-stderr"]);
    cmd.stderr(mode);
    let mut t = start(&cmd, config());
    let pid = pid_of(&t);
    let line = text(&mut t).await;
    let (_, report) = drain_to_exit(&mut t).await;
    assert_reaped(pid).await;
    assert_eq!(report.exit, Exit::Code(0));
    assert_eq!(report.counters.stderr_bytes, 0);
    line.strip_prefix("stderr=")
        .unwrap_or_else(|| panic!("unexpected {line:?}"))
        .to_owned()
}

#[cfg(target_os = "linux")]
#[test]
fn c09_each_stderr_mode_gives_the_child_the_right_stderr() {
    run(async {
        assert_eq!(child_stderr_target(StderrMode::Discard).await, "/dev/null");
        let ours = std::fs::read_link("/proc/self/fd/2").expect("our own stderr");
        assert_eq!(
            child_stderr_target(StderrMode::Inherit).await,
            ours.display().to_string(),
            "inherit shares our stderr"
        );
        let captured = child_stderr_target(StderrMode::Capture).await;
        assert!(
            captured.starts_with("pipe:"),
            "capture pipes it: {captured}"
        );
    });
}

/// `stderr-host` on this runtime, running the instant-exit server of issue 30 in `mode`: what
/// the host wrote on its stderr, and its stdout (the exit report).
#[cfg(unix)]
fn instant_exit_through_a_host(mode: &str) -> (String, String) {
    let mut host = std::process::Command::new(env!("CARGO_BIN_EXE_stderr-host"));
    host.args([
        super::rt::NAME,
        mode,
        "sh",
        "-c",
        "echo cannot open database >&2; exit 3",
    ])
    .stdout(std::process::Stdio::piped())
    .stderr(std::process::Stdio::piped());
    if let Some(tag) = tag() {
        host.env(TAG_VAR, tag);
    }
    let host = host.spawn().expect("spawn stderr-host");
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let _ = tx.send(host.wait_with_output());
    });
    let output = rx
        .recv_timeout(STEP)
        .expect("the host ends")
        .expect("the host's output");
    assert!(output.status.success(), "the host failed: {output:?}");
    (
        String::from_utf8_lossy(&output.stderr).into_owned(),
        String::from_utf8_lossy(&output.stdout).into_owned(),
    )
}

#[cfg(unix)]
#[test]
fn c09_by_default_the_servers_stderr_is_shown_marked_with_its_name_and_kept_for_the_report() {
    run(async {
        let (shown, report) = instant_exit_through_a_host("show");
        assert_eq!(shown, "[sh] cannot open database\n");
        assert!(
            report.contains("exited with code 3") && report.contains("cannot open database"),
            "the report keeps the tail: {report}"
        );
    });
}

/// A host whose own stderr nobody reads (a pipe whose reader stopped), running a server that
/// writes 20,000 stderr lines (about 600 KB, far more than a pipe holds) and exits: shown lines
/// that stderr does not take wait for a thread of their own, up to a bound, so the host still
/// gets the exit report. Written by the background task, they stopped it once the host's stderr
/// pipe was full, and the host waited for ever. On Windows, lines to a pipe always take the thread.
#[test]
fn c09_a_host_whose_stderr_nobody_reads_still_gets_the_report() {
    run(async {
        let mut host = std::process::Command::new(env!("CARGO_BIN_EXE_stderr-host"));
        host.args([
            super::rt::NAME,
            "show",
            MISBEHAVE,
            "stderr-lines",
            "20000",
            "3",
        ])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped());
        if let Some(tag) = tag() {
            host.env(TAG_VAR, tag);
        }
        let mut host = host.spawn().expect("spawn stderr-host");
        // Held, never read.
        let unread = host.stderr.take().expect("piped");
        let mut stdout = host.stdout.take().expect("piped");
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            let mut report = String::new();
            let _ = std::io::Read::read_to_string(&mut stdout, &mut report);
            let _ = tx.send(report);
        });
        let report = rx.recv_timeout(STEP);
        if report.is_err() {
            let _ = host.kill();
        }
        let status = host.wait().expect("the host is reaped");
        drop(unread);
        let report = report.expect("the host prints the report with its stderr unread");
        assert!(status.success(), "the host failed: {status}");
        assert!(
            report.contains("exited with code 3")
                && report.contains("line 19999 of a chatty server"),
            "the report keeps the tail: {report}"
        );
    });
}

#[cfg(unix)]
#[test]
fn c09_captured_stderr_stays_off_the_hosts_stderr_and_in_the_report() {
    run(async {
        let (shown, report) = instant_exit_through_a_host("capture");
        assert_eq!(shown, "");
        assert!(
            report.contains("exited with code 3") && report.contains("cannot open database"),
            "the report keeps the tail: {report}"
        );
    });
}
