//! `relay` end to end: volume, order, logging, exit codes.

mod support;

use std::time::Duration;

use serde_json::Value;
use support::{example, run};

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
    assert!(
        out.stderr
            .contains("relay: child exited with code 0 after stdin was closed"),
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
    let exit = of("exit");
    assert_eq!(exit.len(), 1, "{text}");
    assert_eq!(exit[0]["exit_code"], 3);
    assert!(records.last().unwrap()["dir"] == "exit", "{text}");
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
