//! `relay` end to end: volume, order, logging, exit codes.

// Unix only: its children are POSIX shell scripts (`sh -c`, `cat`) and it is signalled (SIGTERM, SIGINT, SIGHUP).
#![cfg(unix)]

mod support;

use std::path::PathBuf;
use std::time::{Duration, Instant};

use rustix::process::Signal;
use serde_json::Value;
use support::{Running, assert_group_gone, example, run};

const DEADLINE: Duration = Duration::from_secs(60);

/// `count` distinct JSON lines of varying length, each ending in `\n`.
fn lines(count: usize) -> Vec<u8> {
    let mut input = Vec::new();
    for n in 0..count {
        let pad = "x".repeat(n % 97);
        input.extend_from_slice(
            format!("{{\"jsonrpc\":\"2.0\",\"id\":{n},\"pad\":\"{pad}\"}}\n").as_bytes(),
        );
    }
    input
}

#[test]
fn c04_100k_lines_through_cat_come_back_byte_identical() {
    let input = lines(100_000);
    for runtime in ["tokio", "smol", "async-std"] {
        let out = run(
            &example("relay"),
            &["--runtime", runtime, "cat"],
            input.clone(),
            DEADLINE,
        );
        assert_identical(&out, &input, runtime);
    }
}

fn assert_identical(out: &support::Output, input: &[u8], runtime: &str) {
    assert!(out.status.success(), "{runtime}: {}", out.stderr);
    assert_eq!(out.stdout.len(), input.len(), "{runtime}");
    // Not assert_eq on megabytes: say where they differ.
    if let Some(at) = out.stdout.iter().zip(input).position(|(a, b)| a != b) {
        panic!("{runtime}: output differs from input at byte {at}");
    }
    // The example's own name starts what it says (`childwire relay` says
    // its own).
    assert!(
        out.stderr
            .lines()
            .any(|line| line.starts_with("relay: child exited with code 0 after stdin was closed")),
        "{}",
        out.stderr
    );
}

#[test]
fn c15_log_records_both_directions_and_the_exit_code_is_mirrored() {
    let log = std::env::temp_dir().join(format!(
        "childwire-relay-test-{}.ndjson",
        std::process::id()
    ));
    let _ = std::fs::remove_file(&log);
    let input = b"{\"id\":1}\nnot json\n\n{\"id\":2}\n".to_vec();
    let out = run(
        &example("relay"),
        &[
            "--log",
            log.to_str().unwrap(),
            // Every line relayed as it came, a non-JSON one included.
            "--stdout-noise",
            "pass",
            "sh",
            "-c",
            "cat; echo 'bye' >&2; exit 3",
        ],
        input,
        DEADLINE,
    );
    let text = std::fs::read_to_string(&log).unwrap();
    std::fs::remove_file(&log).unwrap();

    assert_eq!(out.status.code(), Some(3), "{}", out.stderr);
    // Blank lines are not messages (C01); the rest is relayed unchanged.
    assert_eq!(out.stdout_text(), "{\"id\":1}\nnot json\n{\"id\":2}\n");
    // Not --quiet: the child's stderr shows through, and the report follows.
    assert!(out.stderr.contains("bye\n"), "{}", out.stderr);
    assert!(
        out.stderr.contains("relay: child exited with code 3"),
        "{}",
        out.stderr
    );

    let records: Vec<Value> = text
        .lines()
        .map(|line| serde_json::from_str(line).unwrap_or_else(|e| panic!("{e}: {line}")))
        .collect();
    let of = |dir: &str| -> Vec<&Value> { records.iter().filter(|r| r["dir"] == dir).collect() };
    for dir in ["to_child", "from_child"] {
        let records = of(dir);
        assert_eq!(records.len(), 3, "{dir}: {text}");
        assert_eq!(records[0]["msg"]["id"], 1);
        assert_eq!(records[1]["text"], "not json");
        assert_eq!(records[2]["msg"]["id"], 2);
        assert!(
            records
                .iter()
                .all(|r| r["ts"].as_str().is_some_and(|ts| ts.ends_with('Z')))
        );
    }
    // The child's stderr, through the tap on its transport, with the level
    // the line names (none).
    let stderr = of("stderr");
    assert_eq!(stderr.len(), 1, "{text}");
    assert_eq!(stderr[0]["line"], "bye");
    assert_eq!(stderr[0]["level"], Value::Null);
    let exit = of("exit");
    assert_eq!(exit.len(), 1, "{text}");
    assert_eq!(exit[0]["exit_code"], 3);
    assert_eq!(exit[0]["signal"], Value::Null);
    assert!(records.last().unwrap()["dir"] == "exit", "{text}");
    // Seconds on the runtime's clock from the first record, never going back.
    let t: Vec<f64> = records.iter().map(|r| r["t"].as_f64().unwrap()).collect();
    assert_eq!(t[0], 0.0, "{text}");
    assert!(t.windows(2).all(|w| w[0] <= w[1]), "{text}");
}

/// The log holds every message of the session: a new one is readable by its owner alone, and an
/// existing one keeps the mode its owner gave it (never widened).
#[test]
fn c40_a_new_log_is_created_private_and_an_existing_one_is_not_widened() {
    use std::os::unix::fs::PermissionsExt as _;

    let mode = |log: &TempLog| std::fs::metadata(&log.0).unwrap().permissions().mode() & 0o777;
    for runtime in ["tokio", "smol"] {
        let new = TempLog::new(&format!("mode-new-{runtime}"));
        let existing = TempLog::new(&format!("mode-existing-{runtime}"));
        std::fs::write(&existing.0, b"").unwrap();
        std::fs::set_permissions(&existing.0, std::fs::Permissions::from_mode(0o640)).unwrap();
        for log in [&new, &existing] {
            let out = run(
                &example("relay"),
                &["--runtime", runtime, "--log", log.path(), "cat"],
                b"{\"id\":1,\"secret\":\"token\"}\n".to_vec(),
                DEADLINE,
            );
            assert!(out.status.success(), "{runtime}: {out:?}");
            // The message is in it: the mode guards what it should.
            assert_eq!(log.records()[0]["msg"]["secret"], "token", "{runtime}");
        }
        assert_eq!(mode(&new), 0o600, "{runtime}: {:o}", mode(&new));
        assert_eq!(mode(&existing), 0o640, "{runtime}: {:o}", mode(&existing));
    }
}

#[test]
fn c04_a_child_killed_mid_stream_loses_no_line_and_is_reported() {
    // Relays 1000 lines, then dies by SIGKILL while more are coming.
    let input = lines(20_000);
    let out = run(
        &example("relay"),
        &["--quiet", "sh", "-c", "head -n 1000; kill -9 $$"],
        input.clone(),
        DEADLINE,
    );
    let expected: Vec<u8> = input
        .split_inclusive(|&b| b == b'\n')
        .take(1000)
        .flatten()
        .copied()
        .collect();
    assert_eq!(out.status.code(), Some(128 + 9), "{}", out.stderr);
    assert!(
        out.stdout == expected,
        "got {} bytes, expected {}",
        out.stdout.len(),
        expected.len()
    );
    assert!(
        out.stderr
            .contains("relay: child killed by SIGKILL on its own"),
        "{}",
        out.stderr
    );
}

#[test]
fn c11_a_missing_program_exits_127_with_the_reason() {
    let out = run(&example("relay"), &["/no/such/child"], Vec::new(), DEADLINE);
    assert_eq!(out.status.code(), Some(127));
    assert!(
        out.stderr.contains("could not start `/no/such/child`"),
        "{}",
        out.stderr
    );
}

/// A log file of this test's own, removed when the test ends.
struct TempLog(PathBuf);

impl TempLog {
    fn new(name: &str) -> Self {
        let path = std::env::temp_dir().join(format!(
            "childwire-relay-{name}-{}.ndjson",
            std::process::id()
        ));
        let _ = std::fs::remove_file(&path);
        Self(path)
    }

    fn path(&self) -> &str {
        self.0.to_str().unwrap()
    }

    fn records(&self) -> Vec<Value> {
        std::fs::read_to_string(&self.0)
            .unwrap_or_default()
            .lines()
            .map(|line| serde_json::from_str(line).unwrap_or_else(|e| panic!("{e}: {line}")))
            .collect()
    }
}

impl Drop for TempLog {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.0);
    }
}

/// A server that ignores its stdin closing (it never reads it): prints its
/// pid, which is also its process group's id, then sleeps. With
/// `ignore_term` it ignores SIGTERM too, so only SIGKILL ends it.
fn stubborn_child(ignore_term: bool) -> String {
    let trap = if ignore_term { "trap '' TERM; " } else { "" };
    format!("{trap}echo \"child pid $$\" >&2; exec sleep 1000")
}

/// Starts relay with `args` before the child's command, and waits until
/// the child has said its pid.
fn start_relay(args: &[&str], ignore_term: bool) -> (Running, u32) {
    let script = stubborn_child(ignore_term);
    let mut all: Vec<&str> = args.to_vec();
    all.extend(["sh", "-c", &script]);
    let mut relay = Running::start(&example("relay"), &all);
    let line = relay.wait_for_stderr(|line| line.starts_with("child pid "), DEADLINE);
    let pid = line["child pid ".len()..].parse().unwrap();
    (relay, pid)
}

fn exit_records(log: &TempLog) -> Vec<Value> {
    log.records()
        .into_iter()
        .filter(|record| record["dir"] == "exit")
        .collect()
}

#[test]
fn c12_sigterm_sigint_and_sighup_shut_an_eof_ignoring_child_down_and_log_its_exit() {
    // SIGHUP's child ignores SIGTERM as well: the sequence must reach SIGKILL.
    let cases = [
        (Signal::TERM, "SIGTERM", false, 128 + 15),
        (Signal::INT, "SIGINT", false, 128 + 15),
        (Signal::HUP, "SIGHUP", true, 128 + 9),
    ];
    for (signal, name, ignore_term, code) in cases {
        let log = TempLog::new(name);
        // relay's stdin stays open: the signal alone must end everything.
        let (mut relay, child) = start_relay(&["--log", log.path()], ignore_term);
        relay.signal(signal);
        let status = relay
            .wait_for_exit(DEADLINE)
            .unwrap_or_else(|| panic!("{name}: relay still running"));
        let stderr = relay.stderr();
        assert_eq!(status.code(), Some(code), "{name}: {stderr}");
        assert!(
            stderr.contains(&format!("relay: {name}: shutting the child down")),
            "{name}: {stderr}"
        );
        assert_group_gone(child, Duration::from_secs(1));
        let exits = exit_records(&log);
        assert_eq!(exits.len(), 1, "{name}: {:?}", log.records());
        // A signal ended it: no exit code, the signal's number.
        assert_eq!(exits[0]["exit_code"], Value::Null, "{name}");
        assert_eq!(exits[0]["signal"], code - 128, "{name}");
        assert!(
            exits[0]["report"]
                .as_str()
                .is_some_and(|report| report.contains("after shutdown")),
            "{name}: {}",
            exits[0]
        );
    }
}

#[test]
fn c12_a_second_signal_kills_the_child_at_once() {
    let log = TempLog::new("second-signal");
    // Graces so long that only the second signal can end it in time.
    let (mut relay, child) = start_relay(
        &[
            "--log",
            log.path(),
            "--stdin-grace",
            "60",
            "--term-grace",
            "60",
        ],
        true,
    );
    relay.signal(Signal::TERM);
    relay.wait_for_stderr(
        |line| line.contains("SIGTERM: shutting the child down"),
        DEADLINE,
    );
    let second = Instant::now();
    relay.signal(Signal::INT);
    let status = relay.wait_for_exit(Duration::from_secs(10));
    let stderr = relay.stderr();
    let status = status.unwrap_or_else(|| panic!("relay still running: {stderr}"));
    assert!(second.elapsed() < Duration::from_secs(10), "{stderr}");
    assert_eq!(status.code(), Some(128 + 9), "{stderr}");
    assert!(
        stderr.contains("SIGINT, a second signal: killing"),
        "{stderr}"
    );
    assert_group_gone(child, Duration::from_secs(1));
    let exits = exit_records(&log);
    assert_eq!(exits.len(), 1, "{:?}", log.records());
    assert_eq!(exits[0]["exit_code"], Value::Null);
    assert_eq!(exits[0]["signal"], 9);
}

#[test]
fn c26_a_sigkilled_relay_leaves_no_server_behind() {
    if !cfg!(target_os = "linux") {
        eprintln!("skipped: the parent-death signal is Linux's");
        return;
    }
    // SIGKILL cannot be caught: relay runs no shutdown. The server, which
    // ignores EOF and SIGTERM alike, must die with it all the same.
    let (mut relay, child) = start_relay(&[], true);
    relay.signal(Signal::KILL);
    let status = relay.wait_for_exit(DEADLINE);
    assert!(status.is_some(), "relay survived SIGKILL");
    assert_group_gone(child, Duration::from_secs(5));
}

#[test]
fn c12_a_host_closing_stdin_then_signalling_leaves_no_process() {
    // What hosts do: close the server's stdin, SIGTERM it if it is still
    // there 2 s later, SIGKILL it 2 s after that. The server (behind relay)
    // ignores both stdin closing and SIGTERM.
    let host_grace = Duration::from_secs(2);
    let (mut relay, child) = start_relay(&[], true);
    relay.close_stdin();
    let mut status = relay.wait_for_exit(host_grace);
    if status.is_none() {
        relay.signal(Signal::TERM);
        status = relay.wait_for_exit(host_grace);
    }
    let stderr = relay.stderr();
    // Had relay needed the host's SIGKILL, the child would be left behind.
    let status = status.unwrap_or_else(|| panic!("relay outlived the host's graces: {stderr}"));
    assert_eq!(status.code(), Some(128 + 9), "{stderr}");
    assert_group_gone(child, Duration::from_secs(1));
}

#[test]
fn c15_every_request_is_logged_before_its_response_over_1000_concurrent_requests() {
    // All requests written at once, without waiting for answers. `cat`
    // answers each at once with a line carrying its id: the fastest server
    // there is, so a log written after the hand-over loses the race (it did
    // here). Records are matched by id, not by order.
    let mut input = Vec::new();
    for id in 0..1000 {
        input.extend_from_slice(
            format!("{{\"jsonrpc\":\"2.0\",\"id\":{id},\"method\":\"ping\"}}\n").as_bytes(),
        );
    }
    for runtime in ["tokio", "smol", "async-std"] {
        let log = TempLog::new(&format!("order-{runtime}"));
        let out = run(
            &example("relay"),
            &["--quiet", "--runtime", runtime, "--log", log.path(), "cat"],
            input.clone(),
            DEADLINE,
        );
        assert!(out.status.success(), "{runtime}: {out:?}");
        let records = log.records();
        let mut requested = vec![None; 1000];
        let mut answered = 0;
        for (at, record) in records.iter().enumerate() {
            let Some(id) = record["msg"]["id"].as_u64() else {
                continue;
            };
            let id = usize::try_from(id).unwrap();
            match record["dir"].as_str() {
                Some("to_child") => requested[id] = Some(at),
                Some("from_child") => {
                    assert!(
                        requested[id].is_some(),
                        "{runtime}: the response to {id} (record {at}) was logged before its request"
                    );
                    answered += 1;
                }
                other => panic!("{runtime}: {other:?}"),
            }
        }
        assert_eq!(answered, 1000, "{runtime}");
        assert!(requested.iter().all(Option::is_some), "{runtime}");
    }
}

#[test]
fn c02_max_message_size_passes_lines_up_to_it_and_reports_longer_ones_both_ways() {
    let log = TempLog::new("max-size");
    let fits = format!("{{\"id\":1,\"pad\":\"{}\"}}\n", "x".repeat(1000 - 17));
    let too_long = format!("{{\"id\":2,\"pad\":\"{}\"}}\n", "y".repeat(2000));
    // Exactly the limit: framing (`\n`) is not counted.
    assert_eq!(fits.len(), 1000 + 1);
    let input = format!("{fits}{too_long}{fits}");
    // The child echoes what it gets and adds a line of its own over the
    // limit: both directions are checked.
    let out = run(
        &example("relay"),
        &[
            "--max-message-size",
            "1000",
            "--log",
            log.path(),
            "sh",
            "-c",
            "cat; head -c 5000 /dev/zero | tr '\\0' z; echo",
        ],
        input.into_bytes(),
        DEADLINE,
    );
    assert!(out.status.success(), "{out:?}");
    // The too-long request never reached the child: relay answered it, by
    // its id, in between the echoes (its place among them is not fixed).
    let mut lines: Vec<String> = out.stdout_text().lines().map(str::to_owned).collect();
    let answer = lines
        .iter()
        .position(|line| line.contains("\"error\""))
        .map(|at| lines.remove(at))
        .unwrap_or_else(|| panic!("no answer for the dropped request: {out:?}"));
    let answer: Value = serde_json::from_str(&answer).expect("the answer is JSON");
    assert_eq!(answer["id"], 2, "{answer}");
    assert_eq!(answer["error"]["code"], -32013, "{answer}");
    assert_eq!(answer["error"]["data"]["size"], 2017, "{answer}");
    assert_eq!(answer["error"]["data"]["limit"], 1000, "{answer}");
    assert_eq!(lines, [fits.trim_end(), fits.trim_end()]);
    assert!(
        out.stderr
            .contains("relay: from stdin: dropped a 2017-byte message"),
        "{}",
        out.stderr
    );
    assert!(
        out.stderr
            .contains("relay: from the child: dropped a 5000-byte message"),
        "{}",
        out.stderr
    );
    let oversized: Vec<(String, u64)> = log
        .records()
        .iter()
        .filter_map(|r| Some((r["dir"].as_str()?.to_owned(), r["oversized"].as_u64()?)))
        .collect();
    assert_eq!(
        oversized,
        [
            ("to_child".to_owned(), 2017),
            ("from_child".to_owned(), 5000)
        ]
    );
}

#[test]
fn c28_a_response_too_large_reaches_the_host_as_an_error_for_its_id() {
    // The TypeScript SDK's key order: the id comes last, after a result
    // that holds an `"id"` of its own, past any head a scan could use.
    let child = "read request; \
        printf '{\"result\":{\"id\":99,\"text\":\"'; head -c 3000 /dev/zero | tr '\\0' a; \
        printf '\"},\"jsonrpc\":\"2.0\",\"id\":7}\\n'; \
        printf '{\"jsonrpc\":\"2.0\",\"id\":8,\"result\":{}}\\n'";
    let out = run(
        &example("relay"),
        &["--max-message-size", "1000", "sh", "-c", child],
        b"{\"jsonrpc\":\"2.0\",\"id\":7,\"method\":\"tools/call\"}\n".to_vec(),
        DEADLINE,
    );
    assert!(out.status.success(), "{out:?}");
    let lines: Vec<Value> = out.json_lines();
    assert_eq!(lines.len(), 2, "{out:?}");
    assert_eq!(lines[0]["id"], 7, "the top-level id, not the nested 99");
    assert_eq!(lines[0]["error"]["code"], -32013);
    assert_eq!(lines[0]["error"]["data"]["limit"], 1000);
    assert_eq!(lines[1]["id"], 8, "the stream goes on after the notice");
}

/// A line from the host with a raw `\r` between its tokens cannot travel as one line: it is
/// dropped, and a request among such lines is answered in its place with an error for its id, so
/// the host is not left waiting; a notification is answered by nothing, and the lines around them
/// go through.
#[test]
fn c02_a_request_holding_a_carriage_return_is_answered_with_an_error_for_its_id() {
    let input = b"{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"a\"}\n\
        {\"jsonrpc\":\"2.0\",\r\"id\":\"two\",\"method\":\"b\"}\n\
        {\"jsonrpc\":\"2.0\",\r\"method\":\"note\"}\n\
        {\"jsonrpc\":\"2.0\",\"id\":3,\"method\":\"c\"}\n";
    let out = run(&example("relay"), &["cat"], input.to_vec(), DEADLINE);
    assert!(out.status.success(), "{out:?}");
    let lines: Vec<Value> = out.json_lines();
    assert_eq!(lines.len(), 3, "{out:?}");
    let answer = lines
        .iter()
        .find(|line| line["id"] == "two")
        .unwrap_or_else(|| panic!("no answer for the dropped request: {out:?}"));
    assert_eq!(answer["error"]["code"], -32600, "{answer}");
    let echoed: Vec<&Value> = lines.iter().filter_map(|line| line.get("method")).collect();
    assert_eq!(echoed, ["a", "c"], "{out:?}");
    assert!(
        out.stderr
            .contains("dropped a line from stdin: it holds a carriage return"),
        "{}",
        out.stderr
    );
}

#[test]
fn c02_the_default_limit_lets_a_25_mb_message_through_both_ways() {
    let mut input = b"{\"id\":1,\"result\":\"".to_vec();
    input.resize(25_000_000, b'a');
    input.extend_from_slice(b"\"}\n");
    let out = run(&example("relay"), &["cat"], input.clone(), DEADLINE);
    assert!(out.status.success(), "{}", out.stderr);
    assert!(!out.stderr.contains("dropped"), "{}", out.stderr);
    assert!(out.stdout == input, "{} bytes back", out.stdout.len());
}

/// A message costs the relay itself plus a constant in memory, never itself twice: the child →
/// host direction writes a long line to the host in pieces, as the other direction does to the
/// child. The relay's peak resident memory is read from `/proc` once the whole line reached the
/// host, while the relay still runs (its child sleeps after the line).
#[cfg(target_os = "linux")]
#[test]
fn c25_a_long_line_from_the_child_costs_the_relay_itself_plus_a_constant() {
    for runtime in ["tokio", "smol"] {
        long_line_from_the_child_costs_itself_plus_a_constant(runtime);
    }
}

#[cfg(target_os = "linux")]
fn long_line_from_the_child_costs_itself_plus_a_constant(runtime: &str) {
    use std::io::{Read as _, Write as _};
    use std::process::{Command, Stdio};

    const LINE: usize = 32 << 20;
    const CONSTANT: usize = 20 << 20;
    let dir = std::env::temp_dir().join(format!(
        "childwire-relay-c25-{runtime}-{}",
        std::process::id()
    ));
    std::fs::create_dir_all(&dir).unwrap();
    let file = dir.join("line");
    let mut line = b"{\"id\":1,\"result\":\"".to_vec();
    line.resize(LINE - 3, b'a');
    line.extend_from_slice(b"\"}\n");
    std::fs::File::create(&file)
        .unwrap()
        .write_all(&line)
        .unwrap();

    let script = format!("cat '{}'; exec sleep 60", file.display());
    let mut relay = Command::new(example("relay"))
        .args(["--runtime", runtime, "--quiet", "--", "sh", "-c", &script])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut got = vec![0; LINE];
    let read = relay.stdout.take().unwrap().read_exact(&mut got);
    let peak = peak_rss(relay.id());
    // Ends the relay before any assertion can fail; its child dies with it (parent-death signal).
    let _ = relay.kill();
    let _ = relay.wait();
    let _ = std::fs::remove_dir_all(&dir);

    read.expect("the whole line from the relay");
    assert!(got == line, "the line came back changed");
    let peak = peak.expect("the relay's VmHWM in /proc/PID/status");
    assert!(
        peak <= LINE + CONSTANT,
        "relay on {runtime} peaked at {} MiB for a {} MiB line (at most {} MiB expected)",
        peak >> 20,
        LINE >> 20,
        (LINE + CONSTANT) >> 20
    );
}

/// A long line from the host costs the relay the line plus a constant: the child gets it in
/// pieces, never a second copy of it. The child reads exactly the line, then says so; the relay's
/// peak resident memory is read from `/proc` once that answer reached the host, while the relay
/// still runs (its stdin stays open until then).
#[cfg(target_os = "linux")]
#[test]
fn c43_a_long_line_from_the_host_costs_the_relay_itself_plus_a_constant() {
    const ANSWER: &[u8] = b"{\"jsonrpc\":\"2.0\",\"id\":1,\"result\":\"read it all\"}\n";
    let script = format!(
        "head -c {HOST_LINE} >/dev/null && printf '%s\\n' '{}'; exec sleep 60",
        std::str::from_utf8(&ANSWER[..ANSWER.len() - 1]).unwrap()
    );
    for runtime in ["tokio", "smol"] {
        let peak = peak_for_a_long_line_from_the_host(runtime, &["sh", "-c", &script], ANSWER);
        assert!(
            peak <= HOST_LINE + HOST_LINE_CONSTANT,
            "relay on {runtime} peaked at {} MiB for a {} MiB line (at most {} MiB expected)",
            peak >> 20,
            HOST_LINE >> 20,
            (HOST_LINE + HOST_LINE_CONSTANT) >> 20
        );
    }
}

/// The same line echoed back as it is read (`cat`): the child's answer, as long, is read whole
/// while the host's line still goes out. The host's line goes to the child as it comes, never held
/// whole, so the relay holds the echo alone (it held both, 110-125 MiB, before; see
/// `docs/relay-memory.md`).
#[cfg(target_os = "linux")]
#[test]
fn c43_a_long_line_from_the_host_costs_the_relay_itself_plus_a_constant_even_echoed() {
    let line = long_host_line();
    for runtime in ["tokio", "smol"] {
        let peak = peak_for_a_long_line_from_the_host(runtime, &["cat"], &line);
        assert!(
            peak <= HOST_LINE + HOST_LINE_CONSTANT,
            "relay on {runtime} peaked at {} MiB for a {} MiB line echoed (at most {} MiB expected)",
            peak >> 20,
            HOST_LINE >> 20,
            (HOST_LINE + HOST_LINE_CONSTANT) >> 20
        );
    }
}

/// A long line from the host goes to the child as it comes (without `--log` and `--restart`), so
/// by the time it is known to be over the limit, or to hold a `\r`, its start has reached the
/// child. The rest is dropped: the child gets that start as a line of its own, and the host gets
/// what a line dropped whole gets: the error for its id, and the notice on stderr. The child
/// here says how long each line it gets is.
#[test]
fn c02_a_long_line_over_the_limit_goes_no_further_than_the_limit_and_is_answered() {
    const LIMIT: usize = 2 << 20;
    let mut over = b"{\"jsonrpc\":\"2.0\",\"id\":5,\"method\":\"x\",\"params\":\"".to_vec();
    over.resize(3 << 20, b'a');
    over.extend_from_slice(b"\"}\n");
    // Under the limit but over the relay's 1 MiB for streaming, with a `\r` past that.
    let mut carriage_return = b"{\"jsonrpc\":\"2.0\",\"method\":\"y\",\"params\":\"".to_vec();
    carriage_return.resize(3 << 19, b'b');
    carriage_return[5 << 18] = b'\r';
    carriage_return.extend_from_slice(b"\"}\n");
    let short = b"{\"jsonrpc\":\"2.0\",\"id\":6,\"method\":\"z\"}\n";
    let input = [&over[..], &carriage_return, short].concat();
    let limit = LIMIT.to_string();
    for runtime in ["tokio", "smol"] {
        let out = run(
            &example("relay"),
            &[
                "--runtime",
                runtime,
                "--max-message-size",
                &limit,
                "awk",
                "{ printf \"{\\\"length\\\":%d}\\n\", length($0); fflush() }",
            ],
            input.clone(),
            DEADLINE,
        );
        assert!(out.status.success(), "{runtime}: {out:?}");
        let mut lines: Vec<Value> = out.json_lines();
        // The relay's answer comes once the host's line ended, the child's lines as it reads
        // them: in no fixed order between them.
        let answer = lines
            .iter()
            .position(|line| line.get("error").is_some())
            .map(|at| lines.remove(at))
            .unwrap_or_else(|| panic!("{runtime}: no answer for the dropped request: {out:?}"));
        assert_eq!(answer["id"], 5, "{runtime}: {answer}");
        assert_eq!(answer["error"]["code"], -32013, "{runtime}: {answer}");
        assert_eq!(answer["error"]["data"]["size"], over.len() - 1, "{runtime}");
        assert_eq!(answer["error"]["data"]["limit"], LIMIT, "{runtime}");
        let lengths: Vec<&Value> = lines.iter().map(|line| &line["length"]).collect();
        assert_eq!(
            lengths,
            [LIMIT, 5 << 18, short.len() - 1],
            "{runtime}: what the child got: the limit's worth of the first line, the second \
             line's start up to its `\\r`, the last line whole"
        );
        for said in [
            format!(
                "relay: from stdin: dropped a {}-byte message over the size limit (JSON-RPC id 5); \
                 it went to the child as it came, and the child got its first {LIMIT} bytes",
                over.len() - 1
            ),
            format!(
                "relay: dropped a line from stdin: it holds a carriage return; it went to the \
                 child as it came, and the child got its first {} bytes",
                5 << 18
            ),
        ] {
            assert!(out.stderr.contains(&said), "{runtime}: {}", out.stderr);
        }
    }
}

/// The length of the host's long line, its newline included.
#[cfg(target_os = "linux")]
const HOST_LINE: usize = 50 << 20;
/// What the relay may cost beyond the line: issue 37's bound.
#[cfg(target_os = "linux")]
const HOST_LINE_CONSTANT: usize = 20 << 20;

/// A JSON-RPC request [`HOST_LINE`] bytes long, with its newline.
#[cfg(target_os = "linux")]
fn long_host_line() -> Vec<u8> {
    let mut line = b"{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"x\",\"params\":\"".to_vec();
    line.resize(HOST_LINE - 3, b'a');
    line.extend_from_slice(b"\"}\n");
    line
}

/// Runs relay in front of `child`, writes it [`long_host_line`], waits until `expected` came
/// back whole on its stdout, and returns the relay's peak resident memory then, in bytes.
#[cfg(target_os = "linux")]
fn peak_for_a_long_line_from_the_host(runtime: &str, child: &[&str], expected: &[u8]) -> usize {
    use std::io::{Read as _, Write as _};
    use std::process::{Command, Stdio};

    let line = long_host_line();
    let mut relay = Command::new(example("relay"))
        .args(["--runtime", runtime, "--quiet", "--"])
        .args(child)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut stdin = relay.stdin.take().unwrap();
    // The host's stdin stays open until the peak is read: the writer hands it back.
    let writer = std::thread::spawn(move || {
        let written = stdin.write_all(&line);
        (stdin, written)
    });
    let mut stdout = relay.stdout.take().unwrap();
    let len = expected.len();
    let (done, answer) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let mut got = vec![0; len];
        let read = stdout.read_exact(&mut got);
        let _ = done.send(read.map(|()| got));
    });
    // With a deadline: a relay that keeps part of the line queued never answers.
    let answer = answer.recv_timeout(DEADLINE);
    let peak = peak_rss(relay.id());
    // Ends the relay before any assertion can fail; its child dies with it (parent-death signal).
    let _ = relay.kill();
    let _ = relay.wait();
    let (stdin, written) = writer.join().unwrap();
    drop(stdin);

    written.expect("the whole line to the relay");
    let got = answer
        .unwrap_or_else(|_| panic!("relay on {runtime}: no whole answer within {DEADLINE:?}"))
        .expect("the whole answer from the relay");
    assert!(
        got == expected,
        "relay on {runtime}: the answer came back changed"
    );
    peak.expect("the relay's VmHWM in /proc/PID/status")
}

/// The peak resident memory (`VmHWM`) of running process `pid`, in bytes, if `/proc` says.
#[cfg(target_os = "linux")]
fn peak_rss(pid: u32) -> Option<usize> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    let kib: usize = status
        .lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())?;
    Some(kib * 1024)
}

// ---- --restart: the host's session survives a server killed with SIGKILL ----

/// An MCP server as a POSIX shell script that says on stderr what it gets:
/// it answers `initialize` and `tools/list`, and works forever on
/// `tools/call` (which is left in flight).
const SCRIPTED_SERVER: &str = r#"
    echo "server $$ started" >&2
    while read -r line; do
        id=$(printf '%s\n' "$line" | sed -n 's/.*"id":\([0-9][0-9]*\).*/\1/p')
        case "$line" in
            *'"initialize"'*)
                echo "server $$: initialize $id" >&2
                echo "{\"jsonrpc\":\"2.0\",\"id\":$id,\"result\":{\"protocolVersion\":\"2025-11-25\",\"capabilities\":{\"tools\":{}},\"serverInfo\":{\"name\":\"scripted\",\"version\":\"$$\"}}}" ;;
            *'"notifications/initialized"'*) echo "server $$: initialized" >&2 ;;
            *'"tools/list"'*) echo "{\"jsonrpc\":\"2.0\",\"id\":$id,\"result\":{\"tools\":[]}}" ;;
            *'"tools/call"'*) echo "server $$: working on $id" >&2 ;;
        esac
    done
"#;

/// The JSON line on stdout whose `id` is `id`.
fn response_to(relay: &mut Running, id: u64) -> Value {
    let line = relay.wait_for_stdout(
        |line| serde_json::from_str::<Value>(line).is_ok_and(|v| v["id"] == id),
        DEADLINE,
    );
    serde_json::from_str(&line).unwrap()
}

/// The pid in a `server PID started` line.
fn server_started(relay: &mut Running) -> u32 {
    let line = relay.wait_for_stderr(
        |line| line.starts_with("server ") && line.ends_with(" started"),
        DEADLINE,
    );
    line["server ".len()..line.len() - " started".len()]
        .parse()
        .unwrap()
}

#[test]
fn c37_relay_restart_keeps_the_hosts_session_across_a_kill_9() {
    for runtime in ["tokio", "smol", "async-std"] {
        restart_keeps_the_hosts_session_across_a_kill_9(runtime);
    }
}

fn restart_keeps_the_hosts_session_across_a_kill_9(runtime: &str) {
    let log = TempLog::new(&format!("restart-{runtime}"));
    let mut relay = Running::start_lines(
        &example("relay"),
        &[
            "--runtime",
            runtime,
            "--restart",
            "--log",
            log.path(),
            "sh",
            "-c",
            SCRIPTED_SERVER,
        ],
    );
    let first = server_started(&mut relay);
    relay.write(b"{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"initialize\",\"params\":{\"protocolVersion\":\"2025-11-25\",\"capabilities\":{},\"clientInfo\":{\"name\":\"host\",\"version\":\"1\"}}}\n");
    assert_eq!(
        response_to(&mut relay, 1)["result"]["serverInfo"]["version"],
        first.to_string()
    );
    relay.write(b"{\"jsonrpc\":\"2.0\",\"method\":\"notifications/initialized\"}\n");
    relay.wait_for_stderr(
        |line| line == format!("server {first}: initialized"),
        DEADLINE,
    );
    relay.write(b"{\"jsonrpc\":\"2.0\",\"id\":2,\"method\":\"tools/call\",\"params\":{\"name\":\"slow\"}}\n");
    relay.wait_for_stderr(
        |line| line == format!("server {first}: working on 2"),
        DEADLINE,
    );

    relay.signal_pid(first, Signal::KILL);

    // The request in flight gets an error that says why.
    let error = response_to(&mut relay, 2);
    assert_eq!(error["error"]["code"], -32000, "{error}");
    let message = error["error"]["message"].as_str().unwrap_or_default();
    assert!(
        message.contains("killed by SIGKILL before it answered")
            && message.contains("it is being restarted"),
        "{error}"
    );
    // The new server gets the host's handshake again before anything else.
    let second = server_started(&mut relay);
    assert_ne!(first, second);
    // The relay's notes and the server's stderr come in no fixed order.
    let mut expected = vec![
        format!("server {second}: initialize 1"),
        format!("server {second}: initialized"),
        format!(
            "relay: the child runs again (pid {second}); the host's initialize was replayed to it"
        ),
        "relay: restarted the child (generation 2); traffic resumes".to_owned(),
    ];
    while !expected.is_empty() {
        let line = relay.wait_for_stderr(|line| expected.iter().any(|e| e == line), DEADLINE);
        expected.retain(|e| *e != line);
    }
    // And the session goes on.
    relay.write(b"{\"jsonrpc\":\"2.0\",\"id\":3,\"method\":\"tools/list\"}\n");
    assert_eq!(
        response_to(&mut relay, 3)["result"]["tools"],
        serde_json::json!([])
    );

    relay.close_stdin();
    let status = relay.wait_for_exit(DEADLINE);
    let stdout = relay.stdout_lines();
    let stderr = relay.stderr();
    let status = status.unwrap_or_else(|| panic!("relay still running: {stderr}"));
    assert_eq!(status.code(), Some(0), "{stderr}");
    // One answer per request: the replayed initialize's was swallowed.
    let ids: Vec<Value> = stdout
        .lines()
        .map(|line| serde_json::from_str::<Value>(line).unwrap()["id"].clone())
        .collect();
    assert_eq!(ids, [1, 2, 3], "{stdout}");
    assert!(
        stderr.contains("relay: child killed by SIGKILL on its own"),
        "{stderr}"
    );
    assert!(
        stderr.contains("restarted the child (generation 2)"),
        "{stderr}"
    );
    assert!(
        stderr.contains("relay: child exited with code 0 after stdin was closed"),
        "{stderr}"
    );
    // Each process's end is logged: killed by signal 9, then code 0.
    let exits: Vec<(Value, Value)> = exit_records(&log)
        .iter()
        .map(|record| (record["exit_code"].clone(), record["signal"].clone()))
        .collect();
    assert_eq!(
        exits,
        [(Value::Null, 9.into()), (0.into(), Value::Null)],
        "{:?}",
        log.records()
    );
}

/// A server that fails at once, every time.
const CRASHING_SERVER: &str = "echo 'Error: cannot open database' >&2; exit 3";

#[test]
fn c36_relay_restart_gives_up_on_a_crash_loop_with_the_last_exit_code() {
    let log = TempLog::new("crash-loop");
    let mut relay = Running::start(
        &example("relay"),
        &[
            "--restart",
            "--log",
            log.path(),
            "sh",
            "-c",
            CRASHING_SERVER,
        ],
    );
    let status = relay.wait_for_exit(DEADLINE);
    let stderr = relay.stderr();
    let status = status.unwrap_or_else(|| panic!("relay still running: {stderr}"));
    assert_eq!(status.code(), Some(3), "{stderr}");
    assert!(
        stderr.contains(
            "relay: gave up restarting the child: it ended again after 5 restarts in a row"
        ),
        "{stderr}"
    );
    assert_eq!(stderr.matches("; restarting it").count(), 5, "{stderr}");
    // The first process and five restarts, each logged once.
    assert_eq!(exit_records(&log).len(), 6, "{:?}", log.records());
}

#[test]
fn c12_relay_restart_ends_on_sigterm_while_the_child_is_down() {
    let mut relay = Running::start(
        &example("relay"),
        &["--restart", "sh", "-c", CRASHING_SERVER],
    );
    relay.wait_for_stderr(|line| line.ends_with("; restarting it"), DEADLINE);
    // Most likely during the pause before the restart; if a new process
    // runs by then, it ends with the same code.
    relay.signal(Signal::TERM);
    let status = relay.wait_for_exit(DEADLINE);
    let stderr = relay.stderr();
    let status = status.unwrap_or_else(|| panic!("relay still running: {stderr}"));
    assert_eq!(status.code(), Some(3), "{stderr}");
    assert!(!stderr.contains("lost track"), "{stderr}");
}

/// By default a line the child writes to stdout that is not a message (a banner) is kept from the
/// host, whose parser it would break, and goes with the child's stderr lines, marked; `drop`
/// drops it.
#[test]
fn c42_a_childs_banner_is_kept_from_the_host_and_logged_with_its_stderr() {
    let log = std::env::temp_dir().join(format!(
        "childwire-relay-noise-{}.ndjson",
        std::process::id()
    ));
    let _ = std::fs::remove_file(&log);
    let child = ["sh", "-c", "echo 'Starting server on stdio'; cat"];
    let input = b"{\"id\":1}\n".to_vec();
    let mut args = vec!["--log", log.to_str().unwrap()];
    args.extend(child);
    let out = run(&example("relay"), &args, input.clone(), DEADLINE);
    let text = std::fs::read_to_string(&log).unwrap();
    std::fs::remove_file(&log).unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", out.stderr);
    assert_eq!(
        out.stdout_text(),
        "{\"id\":1}\n",
        "only the message reaches the host"
    );
    assert!(
        out.stderr.contains("(stdout) Starting server on stdio\n"),
        "{}",
        out.stderr
    );
    assert!(
        text.lines()
            .any(|line| line.contains(r#""line":"(stdout) Starting server on stdio""#)),
        "{text}"
    );

    let mut args = vec!["--stdout-noise", "drop"];
    args.extend(child);
    let out = run(&example("relay"), &args, input, DEADLINE);
    assert_eq!(out.status.code(), Some(0), "{}", out.stderr);
    assert_eq!(out.stdout_text(), "{\"id\":1}\n");
    assert!(!out.stderr.contains("(stdout) Starting"), "{}", out.stderr);
}
