//! The `misbehave` child program checked on its own, through `std::process` (no childwire), so a
//! suite failure can be blamed on the transport and not on the child. Also exercises the `/proc`
//! helpers against real processes.

use std::io::{BufRead, BufReader, Read, Write};
use std::process::{Child, ChildStdout, Command, ExitStatus, Stdio};
use std::time::Duration;

use childwire_conformance::lines::{numbered_line, parse_numbered};
use childwire_conformance::procfs::LIVENESS_SUPPORTED;
#[cfg(target_os = "linux")]
use childwire_conformance::{live_group_members, own_pgid, pid_exists, procfs, zombie_children_of};
use childwire_conformance::{process_alive, wait_until};

const DEADLINE: Duration = Duration::from_secs(20);

fn misbehave(args: &[&str]) -> Command {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_misbehave"));
    cmd.args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    cmd
}

fn start(args: &[&str]) -> Child {
    misbehave(args).spawn().expect("spawn misbehave")
}

/// Feeds `input`, closes stdin, and returns (status, stdout, stderr).
fn run(args: &[&str], input: &[u8]) -> (ExitStatus, Vec<u8>, String) {
    let mut child = start(args);
    let mut stdin = child.stdin.take().expect("stdin");
    let input = input.to_vec();
    // A writer thread: a child that answers while we write must not deadlock on full pipes.
    let writer = std::thread::spawn(move || {
        let _ = stdin.write_all(&input);
    });
    let out = child.wait_with_output().expect("wait");
    writer.join().expect("writer thread");
    (
        out.status,
        out.stdout,
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

fn read_line(out: &mut BufReader<ChildStdout>) -> Vec<u8> {
    let mut line = Vec::new();
    out.read_until(b'\n', &mut line).expect("read line");
    line
}

#[cfg(target_os = "linux")]
fn kill(signal: &str, target: &str) {
    let status = Command::new("kill")
        .args([signal, "--", target])
        .status()
        .expect("run kill");
    assert!(status.success(), "kill {signal} {target}");
}

/// Ends process `pid` at once, whatever it ignores.
fn kill_pid(pid: u32) {
    let status = if cfg!(windows) {
        Command::new("taskkill")
            .args(["/F", "/PID", &pid.to_string()])
            .stdout(Stdio::null())
            .status()
    } else {
        Command::new("kill")
            .args(["-KILL", &pid.to_string()])
            .status()
    };
    assert!(status.expect("run kill").success(), "kill {pid}");
}

/// Waits for `child` to exit on its own within `deadline`; `None` if it is still running.
fn exits_within(child: &mut Child, deadline: Duration) -> Option<ExitStatus> {
    let mut status = None;
    wait_until(deadline, || {
        status = child.try_wait().expect("try_wait");
        status.is_some()
    });
    status
}

#[cfg(target_os = "linux")]
fn signal_of(status: ExitStatus) -> Option<i32> {
    std::os::unix::process::ExitStatusExt::signal(&status)
}

#[test]
fn echo_answers_each_line_and_exits_at_eof() {
    let (status, out, _) = run(&["echo"], b"{\"a\":1}\nsecond\nno-newline");
    assert!(status.success());
    assert_eq!(out, b"{\"a\":1}\nsecond\nno-newline\n");

    let (status, out, _) = run(&["echo-crlf"], b"x\ny\n");
    assert!(status.success());
    assert_eq!(out, b"x\r\ny\r\n");
}

#[test]
fn echo_flushes_one_message_without_waiting_for_more() {
    let mut child = start(&["echo"]);
    let mut stdin = child.stdin.take().expect("stdin");
    let mut out = BufReader::new(child.stdout.take().expect("stdout"));
    for i in 0..50 {
        writeln!(stdin, "ping {i}").expect("write");
        stdin.flush().expect("flush");
        assert_eq!(read_line(&mut out), format!("ping {i}\n").into_bytes());
    }
    drop(stdin);
    assert!(child.wait().expect("wait").success());
}

#[test]
fn flood_writes_numbered_lines_of_the_requested_length_then_echoes() {
    let (status, out, _) = run(&["flood", "1000", "64"], b"tail\n");
    assert!(status.success());
    let lines: Vec<&[u8]> = out.split(|&b| b == b'\n').collect();
    assert_eq!(
        lines.len(),
        1002,
        "1000 lines, the echo, and the empty rest"
    );
    for (n, line) in lines[..1000].iter().enumerate() {
        assert_eq!(*line, numbered_line(n as u64, 64).as_slice());
        assert_eq!(parse_numbered(line), Some(n as u64));
    }
    assert_eq!(lines[1000], b"tail");
}

#[test]
fn long_line_is_followed_by_a_valid_line() {
    let len = 3 * 64 * 1024 + 5;
    let (status, out, _) = run(&["long-line", &len.to_string()], b"");
    assert!(status.success());
    assert_eq!(out.len(), len + 1 + b"{\"after\":\"long\"}\n".len());
    assert!(out[..len].iter().all(|&b| b == b'a'));
    assert_eq!(&out[len..], b"\n{\"after\":\"long\"}\n");
}

#[test]
fn fixed_outputs_are_byte_exact() {
    let (status, out, _) = run(&["invalid-utf8"], b"");
    assert!(status.success());
    assert!(out.starts_with(b"\xff\xfe bad\n"));
    assert!(out.ends_with(b"\n{\"valid\":true}\n"));
    assert!(std::str::from_utf8(&out).is_err());

    let (_, out, _) = run(&["blank-lines"], b"");
    assert_eq!(out, b"\n\n{\"a\":1}\n\r\n\n{\"b\":2}\n");

    let (status, out, _) = run(&["unterminated"], b"");
    assert!(status.success());
    assert_eq!(out, b"one\ntwo\nlast-without-newline");
}

#[test]
fn exit_after_writes_its_lines_and_exits_with_the_code_without_reading() {
    // stdin stays open and unread: the child must not wait for it.
    let mut child = start(&["exit-after", "3", "7"]);
    let mut out = Vec::new();
    child
        .stdout
        .take()
        .expect("stdout")
        .read_to_end(&mut out)
        .expect("read");
    let status = exits_within(&mut child, DEADLINE).expect("exits on its own");
    assert_eq!(status.code(), Some(7));
    assert_eq!(out, b"{\"n\":0}\n{\"n\":1}\n{\"n\":2}\n");
}

#[test]
fn failing_starts_print_to_stderr_and_exit_with_their_code() {
    let (status, out, err) = run(&["fail-start"], b"");
    assert_eq!(status.code(), Some(1));
    assert!(out.is_empty());
    assert_eq!(err, "Error: Cannot find module 'x'\n");

    let (status, _, err) = run(&["stderr-then-exit", "5"], b"");
    assert_eq!(status.code(), Some(5));
    assert_eq!(err.lines().count(), 3);

    let (status, _, err) = run(&["no-such-scenario"], b"");
    assert_eq!(status.code(), Some(2));
    assert!(err.contains("unknown scenario"), "{err}");
}

#[cfg(target_os = "linux")]
#[test]
fn ignore_eof_outlives_stdin_and_dies_of_sigterm() {
    let mut child = start(&["ignore-eof"]);
    let pid = child.id();
    drop(child.stdin.take());
    // Bounded wait for an exit that must not happen.
    assert!(exits_within(&mut child, Duration::from_millis(200)).is_none());
    assert!(process_alive(pid));
    kill("-TERM", &pid.to_string());
    let status = exits_within(&mut child, DEADLINE).expect("SIGTERM ends it");
    assert_eq!(signal_of(status), Some(libc::SIGTERM));
}

#[cfg(target_os = "linux")]
#[test]
fn ignore_term_survives_sigterm_and_eof_until_sigkill() {
    let mut child = start(&["ignore-term"]);
    let mut out = BufReader::new(child.stdout.take().expect("stdout"));
    assert_eq!(read_line(&mut out), b"{\"ready\":true}\n");
    kill("-TERM", &child.id().to_string());
    let mut stdin = child.stdin.take().expect("stdin");
    writeln!(stdin, "still here").expect("write");
    assert_eq!(read_line(&mut out), b"still here\n");
    drop(stdin);
    assert!(exits_within(&mut child, Duration::from_millis(200)).is_none());
    child.kill().expect("SIGKILL");
    let status = child.wait().expect("wait");
    assert_eq!(signal_of(status), Some(libc::SIGKILL));
}

/// Starts `grandchild ARGS` in a process group of its own; returns (child, stdout, grandchild pid).
#[cfg(target_os = "linux")]
fn start_grandchild(args: &[&str]) -> (Child, BufReader<ChildStdout>, u32) {
    use std::os::unix::process::CommandExt;
    let mut all = vec!["grandchild"];
    all.extend_from_slice(args);
    let mut child = misbehave(&all).process_group(0).spawn().expect("spawn");
    let mut out = BufReader::new(child.stdout.take().expect("stdout"));
    let line = String::from_utf8(read_line(&mut out)).expect("utf-8");
    let pid = line
        .trim_end()
        .strip_prefix("{\"grandchild\":")
        .and_then(|rest| rest.strip_suffix('}'))
        .and_then(|pid| pid.parse().ok())
        .unwrap_or_else(|| panic!("unexpected first line {line:?}"));
    (child, out, pid)
}

#[cfg(target_os = "linux")]
#[test]
fn grandchild_outlives_its_parent_until_the_group_is_killed() {
    for args in [&[][..], &["ignore-term"], &["ignore-term", "hold-pipes"]] {
        let (mut child, _out, grandchild) = start_grandchild(args);
        let pgid = child.id();
        assert_eq!(live_group_members(pgid), {
            let mut both = vec![pgid, grandchild];
            both.sort_unstable();
            both
        });
        if args.contains(&"ignore-term") {
            kill("-TERM", &grandchild.to_string());
        }
        drop(child.stdin.take());
        assert!(child.wait().expect("wait").success(), "{args:?}");
        assert!(!pid_exists(pgid));
        assert!(process_alive(grandchild), "{args:?}: orphaned on purpose");
        assert_eq!(live_group_members(pgid), vec![grandchild]);
        kill("-KILL", &format!("-{pgid}"));
        assert!(
            wait_until(DEADLINE, || live_group_members(pgid).is_empty()),
            "{args:?}: group still has {:?}",
            live_group_members(pgid)
        );
    }
}

#[cfg(target_os = "linux")]
#[test]
fn stderr_flood_keeps_echoing_and_reports_when_done() {
    let mut child = start(&["stderr-flood", "4"]);
    let mut err = child.stderr.take().expect("stderr");
    let drain = std::thread::spawn(move || {
        let mut total = 0u64;
        let mut buf = vec![0; 64 * 1024];
        loop {
            match err.read(&mut buf) {
                Ok(0) | Err(_) => return total,
                Ok(n) => total += n as u64,
            }
        }
    });
    let mut stdin = child.stdin.take().expect("stdin");
    let mut out = BufReader::new(child.stdout.take().expect("stdout"));
    let mut echoed = 0;
    let mut done = None;
    writeln!(stdin, "m0").expect("write");
    while done.is_none() || echoed < 100 {
        let line = String::from_utf8(read_line(&mut out)).expect("utf-8");
        if let Some(bytes) = line.strip_prefix("{\"stderr_done\":") {
            done = Some(bytes.trim_end().trim_end_matches('}').to_owned());
        } else {
            assert_eq!(line, format!("m{echoed}\n"));
            echoed += 1;
            if echoed < 100 {
                writeln!(stdin, "m{echoed}").expect("write");
            }
        }
    }
    assert_eq!(done.as_deref(), Some("4194304"));
    drop(stdin);
    assert!(child.wait().expect("wait").success());
    assert_eq!(drain.join().expect("drain thread"), 4 * 1024 * 1024);
}

#[test]
fn ignore_eof_outlives_stdin_until_killed() {
    let mut child = start(&["ignore-eof"]);
    let pid = child.id();
    let mut stdin = child.stdin.take().expect("stdin");
    let mut out = BufReader::new(child.stdout.take().expect("stdout"));
    writeln!(stdin, "still echoing").expect("write");
    assert_eq!(read_line(&mut out), b"still echoing\n");
    drop(stdin);
    // Bounded wait for an exit that must not happen.
    assert!(exits_within(&mut child, Duration::from_millis(200)).is_none());
    assert!(process_alive(pid) || !LIVENESS_SUPPORTED);
    child.kill().expect("kill");
    child.wait().expect("reap");
    assert!(!process_alive(pid));
}

#[test]
fn tree_is_three_live_processes_that_outlive_eof() {
    let mut child = start(&["tree", "ignore-term"]);
    let pid = child.id();
    let mut out = BufReader::new(child.stdout.take().expect("stdout"));
    let line = String::from_utf8(read_line(&mut out)).expect("utf-8");
    let pids: Vec<u32> = line
        .trim_end()
        .strip_prefix("{\"tree\":[")
        .and_then(|rest| rest.strip_suffix("]}"))
        .map(|pids| pids.split(',').filter_map(|p| p.parse().ok()).collect())
        .unwrap_or_default();
    let [branch, leaf] = pids[..] else {
        panic!("unexpected first line {line:?}");
    };
    assert!(pid != branch && branch != leaf && leaf != pid);
    drop(child.stdin.take());
    assert!(exits_within(&mut child, Duration::from_millis(200)).is_none());
    if LIVENESS_SUPPORTED {
        for process in [pid, branch, leaf] {
            assert!(
                process_alive(process),
                "{process} of the tree is not running"
            );
        }
    }
    child.kill().expect("kill");
    child.wait().expect("reap");
    // The rest of the tree is on its own now: ended one by one.
    for process in [branch, leaf] {
        kill_pid(process);
    }
    if LIVENESS_SUPPORTED {
        assert!(wait_until(DEADLINE, || {
            !process_alive(branch) && !process_alive(leaf)
        }));
    }
}

#[test]
fn no_read_says_ready_and_blocks() {
    let mut child = start(&["no-read"]);
    let mut out = BufReader::new(child.stdout.take().expect("stdout"));
    assert_eq!(read_line(&mut out), b"{\"ready\":true}\n");
    drop(child.stdin.take());
    assert!(exits_within(&mut child, Duration::from_millis(100)).is_none());
    child.kill().expect("kill");
    child.wait().expect("reap");
}

#[test]
fn print_env_reports_exactly_the_environment_given() {
    let mut cmd = misbehave(&["print-env"]);
    cmd.env_clear().env("ONE", "1").env("MULTI", "a\nb");
    let out = cmd.output().expect("print-env");
    assert_eq!(String::from_utf8_lossy(&out.stdout), "MULTI=a\\nb\nONE=1\n");
}

#[test]
fn print_scenarios_report_cwd_and_args_exactly() {
    // Resolved on Unix, where it may be a symlink; on Windows canonical paths are verbatim
    // (`\\?\C:\...`), which a process never sees as its working directory, and the temp
    // dir ends in a separator, which a working directory does not.
    let dir = if cfg!(windows) {
        std::env::temp_dir().components().collect()
    } else {
        std::env::temp_dir().canonicalize().expect("temp dir")
    };
    let out = misbehave(&["print-cwd"])
        .current_dir(&dir)
        .output()
        .expect("print-cwd");
    assert_eq!(
        String::from_utf8(out.stdout).expect("utf-8"),
        format!("cwd={}\n", dir.display())
    );

    let args = ["a b", "$HOME", "*", "'q'", "\"dq\"", "", "--flag=ü"];
    let mut all = vec!["print-args"];
    all.extend_from_slice(&args);
    let out = misbehave(&all).output().expect("print-args");
    let expected: String = args
        .iter()
        .enumerate()
        .map(|(i, arg)| format!("[{i}]={arg}\n"))
        .collect();
    assert_eq!(String::from_utf8(out.stdout).expect("utf-8"), expected);
}

#[cfg(target_os = "linux")]
#[test]
fn print_pgid_shows_whether_the_child_leads_its_group() {
    use std::os::unix::process::CommandExt;
    let own = misbehave(&["print-pgid"])
        .process_group(0)
        .output()
        .expect("run");
    let shared = misbehave(&["print-pgid"]).output().expect("run");
    let parse = |out: &[u8]| -> (u32, u32) {
        let line = std::str::from_utf8(out).expect("utf-8").trim_end();
        let (pid, pgid) = line
            .strip_prefix("{\"pid\":")
            .and_then(|rest| rest.strip_suffix('}'))
            .and_then(|rest| rest.split_once(",\"pgid\":"))
            .unwrap_or_else(|| panic!("unexpected {line:?}"));
        (pid.parse().expect("pid"), pgid.parse().expect("pgid"))
    };
    let (pid, pgid) = parse(&own.stdout);
    assert_eq!(pid, pgid);
    let (pid, pgid) = parse(&shared.stdout);
    assert_ne!(pid, pgid);
    assert_eq!(Some(pgid), own_pgid());
}

#[test]
fn slow_reader_still_echoes_everything() {
    let (status, out, _) = run(&["slow-reader"], b"1\n2\n3\n");
    assert!(status.success());
    assert_eq!(out, b"1\n2\n3\n");
}

#[test]
fn garbage_ends_with_a_valid_line_then_echoes() {
    let (status, out, _) = run(&["garbage", "100000", "42"], b"after\n");
    assert!(status.success());
    assert!(out.len() > 100_000);
    assert!(out.ends_with(b"\n{\"after\":\"garbage\"}\nafter\n"));
    let (_, again, _) = run(&["garbage", "100000", "42"], b"after\n");
    assert_eq!(out, again, "reproducible from the seed");
}

#[cfg(target_os = "linux")]
#[test]
fn reaped_children_leave_no_zombie() {
    const { assert!(procfs::SUPPORTED) };
    let (status, _, _) = run(&["exit-after", "0", "0"], b"");
    assert!(status.success());
    let me = std::process::id();
    let mut child = start(&["exit-after", "0", "3"]);
    let pid = child.id();
    assert!(wait_until(DEADLINE, || zombie_children_of(me).contains(&pid)));
    assert_eq!(child.wait().expect("reap").code(), Some(3));
    assert!(!pid_exists(pid));
}

#[test]
fn content_length_lie_tells_one_lie_then_writes_20_frames() {
    let (status, out, _) = run(&["content-length-lie", "short"], b"");
    assert!(status.success());
    let frames = |lf_only: bool| {
        let mut wire = Vec::new();
        for n in 0..20 {
            let body = format!("{{\"jsonrpc\":\"2.0\",\"method\":\"n\",\"params\":{n}}}");
            let eol = if lf_only && n % 2 == 0 { "\n" } else { "\r\n" };
            wire.extend(format!("Content-Length: {}{eol}{eol}{body}", body.len()).into_bytes());
        }
        wire
    };
    let lie = b"Content-Length: 5\r\n\r\n{\"jsonrpc\":\"2.0\",\"method\":\"lie\"}";
    assert_eq!(out, [&lie[..], &frames(false)].concat());

    let (status, out, _) = run(&["content-length-lie", "lf-only"], b"");
    assert!(status.success());
    assert_eq!(out, frames(true));

    let (status, out, _) = run(&["content-length-lie", "over-long"], b"");
    assert!(status.success());
    assert!(out.starts_with(b"Content-Length: 38\r\nX-Padding: ppp"));

    let (status, _, err) = run(&["content-length-lie", "other"], b"");
    assert_eq!(status.code(), Some(2), "{err}");
}
