//! `mcp_client` end to end: against the bundled server, a scripted server,
//! and servers that fail in the ways users meet.

mod support;

use std::time::Duration;
#[cfg(unix)]
use std::time::Instant;

use support::{Output, example, run};

const DEADLINE: Duration = Duration::from_secs(30);

fn mcp_client(args: &[&str]) -> Output {
    run(&example("mcp_client"), args, Vec::new(), DEADLINE)
}

#[test]
fn c12_bundled_server_handshake_tools_call_and_clean_exit() {
    let out = mcp_client(&[]);
    assert_bundled_transcript(&out);
    assert!(
        out.stdout_text().contains(" on tokio, minimal environment"),
        "{out:?}"
    );
}

#[test]
fn c18_the_bundled_session_runs_the_same_on_every_runtime() {
    for runtime in ["smol", "async-std"] {
        let out = mcp_client(&["--runtime", runtime]);
        assert_bundled_transcript(&out);
        assert!(
            out.stdout_text().contains(&format!(" on {runtime}, ")),
            "{out:?}"
        );
    }
}

fn assert_bundled_transcript(out: &Output) {
    let stdout = out.stdout_text();
    assert!(out.status.success(), "{out:?}");
    for expected in [
        "-> initialize (protocol 2025-11-25)",
        "<- initialize: protocol 2025-11-25",
        "server: childwire-example-server",
        "-> notifications/initialized",
        "<- 2 tools",
        "echo(text: string)",
        "add(a: number, b: number)",
        "-> tools/call add {\"a\":2,\"b\":40}",
        "<- result: 42",
        "server exited with code 0 after stdin was closed",
    ] {
        assert!(
            stdout.contains(expected),
            "missing {expected:?} in:\n{stdout}"
        );
    }
}

#[test]
fn each_handshake_revision_is_negotiated_with_the_bundled_server() {
    for revision in ["2024-11-05", "2025-03-26", "2025-06-18", "2025-11-25"] {
        let out = mcp_client(&["--protocol", revision]);
        let stdout = out.stdout_text();
        assert!(out.status.success(), "{revision}: {out:?}");
        for expected in [
            format!("-> initialize (protocol {revision})"),
            format!("<- initialize: protocol {revision}\n"),
            "-> notifications/initialized".to_owned(),
            "<- result: 42".to_owned(),
        ] {
            assert!(
                stdout.contains(&expected),
                "{revision}: missing {expected:?} in:\n{stdout}"
            );
        }
    }
}

#[test]
fn the_client_accepts_an_older_revision_the_server_picks() {
    let server = example("example_server");
    let out = mcp_client(&[
        server.to_str().unwrap(),
        "--protocol-versions",
        "2025-03-26",
    ]);
    let stdout = out.stdout_text();
    assert!(out.status.success(), "{out:?}");
    assert!(
        stdout.contains("-> initialize (protocol 2025-11-25)"),
        "{stdout}"
    );
    assert!(
        stdout.contains("<- initialize: protocol 2025-03-26 (the server's choice"),
        "{stdout}"
    );
    assert!(stdout.contains("<- 2 tools"), "{stdout}");
}

#[test]
fn revision_2026_07_28_discovers_and_sends_meta_on_every_request() {
    let out = mcp_client(&["--protocol", "2026-07-28", "--show-stderr"]);
    let stdout = out.stdout_text();
    assert!(out.status.success(), "{out:?}");
    for expected in [
        "-> server/discover (protocol 2026-07-28, in _meta)",
        "<- server/discover: protocol 2026-07-28",
        "server: childwire-example-server",
        "no handshake: every request carries protocol 2026-07-28 in _meta",
        "<- 2 tools",
        "<- result: 42",
        "server exited with code 0 after stdin was closed",
    ] {
        assert!(
            stdout.contains(expected),
            "missing {expected:?} in:\n{stdout}"
        );
    }
    assert!(!stdout.contains("initialize"), "{stdout}");
    // The server saw the revision in each request's _meta.
    for method in ["server/discover", "tools/list", "tools/call"] {
        let seen = format!("<- {method} (id ");
        assert!(
            out.stderr
                .lines()
                .any(|line| line.contains(&seen) && line.contains("protocol 2026-07-28 in _meta)")),
            "{method}: {}",
            out.stderr
        );
    }
}

#[test]
fn revision_2026_07_28_falls_back_to_initialize_on_method_not_found() {
    let server = example("example_server");
    let out = mcp_client(&[
        "--protocol",
        "2026-07-28",
        "--call",
        "add",
        "--args",
        r#"{"a":1,"b":2}"#,
        server.to_str().unwrap(),
        "--legacy",
    ]);
    let stdout = out.stdout_text();
    assert!(out.status.success(), "{out:?}");
    for expected in [
        "-> server/discover (protocol 2026-07-28, in _meta)",
        "<- server/discover: error -32601 (method not found)",
        "falling back to initialize",
        "-> initialize (protocol 2025-11-25)",
        "<- initialize: protocol 2025-11-25",
        "-> notifications/initialized",
        "<- result: 3",
    ] {
        assert!(
            stdout.contains(expected),
            "missing {expected:?} in:\n{stdout}"
        );
    }
}

#[test]
fn any_server_command_with_a_tool_call_and_arguments() {
    let server = example("example_server");
    let out = mcp_client(&[
        "--call",
        "echo",
        "--args",
        r#"{"text":"hello, -- world"}"#,
        server.to_str().unwrap(),
    ]);
    let stdout = out.stdout_text();
    assert!(out.status.success(), "{out:?}");
    assert!(stdout.contains("<- result: hello, -- world"), "{stdout}");
}

#[test]
fn c20_a_json_rpc_error_from_the_server_is_explained_with_a_failure_code() {
    let server = example("example_server");
    let out = mcp_client(&["--call", "nope", server.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(1), "{out:?}");
    assert!(
        out.stderr.contains("tools/call nope failed")
            && out.stderr.contains("error -32602")
            && out.stderr.contains("Unknown tool: nope"),
        "{}",
        out.stderr
    );
    // It still shut the server down properly.
    assert!(
        out.stdout_text()
            .contains("exited with code 0 after stdin was closed"),
        "{out:?}"
    );
}

// The server is a POSIX shell script.
#[cfg(unix)]
#[test]
fn server_requests_notifications_and_an_unknown_protocol_are_handled() {
    // Logs, asks the client for its roots, echoes the client's answer to its
    // stderr, then answers initialize with a revision nobody knows and no
    // tools; reads until stdin closes.
    let script = r#"
        read -r init
        echo '{"jsonrpc":"2.0","method":"notifications/message","params":{"level":"info","data":"hello"}}'
        echo '{"jsonrpc":"2.0","id":"s1","method":"roots/list"}'
        read -r answer
        echo "client answered: $answer" >&2
        echo '{"jsonrpc":"2.0","id":99,"result":{}}'
        echo '{"jsonrpc":"2.0","id":1,"result":{"protocolVersion":"1999-01-01","capabilities":{},"serverInfo":{"name":"scripted","version":"0"}}}'
        cat >/dev/null
    "#;
    let out = mcp_client(&["--show-stderr", "sh", "-c", script]);
    let stdout = out.stdout_text();
    assert!(out.status.success(), "{out:?}");
    for expected in [
        "<- notification notifications/message [info] hello",
        "<- server request roots/list (id \"s1\"): answered -32601",
        "a response to id 99, which is not pending",
        "protocol 1999-01-01, which this client does not know",
        "server: scripted 0",
        "no tools capability",
        "exited with code 0 after stdin was closed",
    ] {
        assert!(
            stdout.contains(expected),
            "missing {expected:?} in:\n{stdout}"
        );
    }
    assert!(
        out.stderr.contains(r#"client answered: {"#)
            && out.stderr.contains(r#""id":"s1""#)
            && out.stderr.contains("-32601"),
        "{}",
        out.stderr
    );
}

// The server is a POSIX shell script.
#[cfg(unix)]
#[test]
fn c39_a_banner_on_stdout_is_named_and_stderr_lines_show_their_level() {
    // Prints a banner on stdout before its first message, logs a JSON-lines
    // warning on stderr, then answers initialize.
    let script = r#"
        echo 'Starting server on stdio...'
        echo '{"level":"warn","msg":"no config file, using defaults"}' >&2
        read -r init
        echo '{"jsonrpc":"2.0","id":1,"result":{"protocolVersion":"2025-11-25","capabilities":{},"serverInfo":{"name":"bannered","version":"0"}}}'
        cat >/dev/null
    "#;
    let out = mcp_client(&["--show-stderr", "sh", "-c", script]);
    let stdout = out.stdout_text();
    assert!(out.status.success(), "{out:?}");
    for expected in [
        "<- stdout line 1 is not a JSON message: text, like a banner",
        "\"Starting server on stdio...\"",
        "server: bannered 0",
        "stdout lines that were not JSON messages: 1",
    ] {
        assert!(
            stdout.contains(expected),
            "missing {expected:?} in:\n{stdout}"
        );
    }
    assert_eq!(
        stdout.matches("is not a JSON message").count(),
        1,
        "{stdout}"
    );
    assert!(
        out.stderr
            .contains(r#"server stderr  warn | {"level":"warn","msg":"no config file"#),
        "{}",
        out.stderr
    );
}

#[test]
fn c11_a_missing_server_is_explained_with_a_failure_code() {
    let out = mcp_client(&["/definitely/not/an/mcp/server", "--flag"]);
    assert_eq!(out.status.code(), Some(1), "{out:?}");
    assert!(
        out.stderr
            .contains("could not start `/definitely/not/an/mcp/server`"),
        "{}",
        out.stderr
    );
}

// The server is a POSIX shell script.
#[cfg(unix)]
#[test]
fn c10_a_server_that_dies_during_the_handshake_shows_its_stderr_tail() {
    let out = mcp_client(&[
        "sh",
        "-c",
        "echo 'starting up' >&2; echo \"Error: Cannot find module 'left-pad'\" >&2; exit 3",
    ]);
    assert_eq!(out.status.code(), Some(1), "{out:?}");
    for expected in [
        "the server ended during initialize",
        "exited with code 3",
        "Error: Cannot find module 'left-pad'",
        "| starting up",
    ] {
        assert!(
            out.stderr.contains(expected),
            "missing {expected:?} in:\n{}",
            out.stderr
        );
    }
    // Once, in the tail, not again in the paragraph's report.
    assert_eq!(out.stderr.matches("left-pad").count(), 1, "{}", out.stderr);
    // The command is shown as it would be typed.
    assert!(
        out.stdout_text()
            .contains("spawned sh -c 'echo '\\''starting up'\\''"),
        "{out:?}"
    );
}

// The server is POSIX `sleep`, and the report names SIGTERM.
#[cfg(unix)]
#[test]
fn c12_a_silent_server_times_out_and_is_shut_down() {
    let started = Instant::now();
    let out = mcp_client(&["--timeout", "0.3", "sleep", "30"]);
    assert_eq!(out.status.code(), Some(1), "{out:?}");
    assert!(
        out.stderr
            .contains("did not answer initialize within 0.3 s")
            && out
                .stderr
                .contains("killed by SIGTERM, 2.0 s after shutdown")
            && !out.stderr.contains("after SIGTERM"),
        "{}",
        out.stderr
    );
    // `sleep` ignores its stdin closing, so SIGTERM ends it after the
    // default 2 s grace: well before its 30 s.
    assert!(
        started.elapsed() < Duration::from_secs(15),
        "{:?}",
        started.elapsed()
    );
}

#[test]
fn usage_errors_exit_with_code_2() {
    let out = mcp_client(&["--args", "{}"]);
    assert_eq!(out.status.code(), Some(2), "{out:?}");
    assert!(out.stderr.contains("--args needs --call"), "{}", out.stderr);
}

// ---- the 2026-07-28 discovery rule against legacy servers ----

/// A legacy (pre-2026-07-28) MCP server as a POSIX shell script: it knows
/// `initialize` and `tools/list`, and meets `server/discover` with
/// `on_discover` (shell code; `$id` holds the request's id). Every server
/// process it is started as logs its pid and what it read to stderr.
#[cfg(unix)]
fn legacy_server(on_discover: &str) -> String {
    format!(
        r#"
        echo "legacy server $$ started" >&2
        while read -r line; do
            id=$(printf '%s\n' "$line" | sed -n 's/.*"id":\([0-9][0-9]*\).*/\1/p')
            case "$line" in
                *'"server/discover"'*) {on_discover} ;;
                *'"initialize"'*) echo "{{\"jsonrpc\":\"2.0\",\"id\":$id,\"result\":{{\"protocolVersion\":\"2025-11-25\",\"capabilities\":{{\"tools\":{{}}}},\"serverInfo\":{{\"name\":\"legacy\",\"version\":\"1\"}}}}}}" ;;
                *'"tools/list"'*) echo "{{\"jsonrpc\":\"2.0\",\"id\":$id,\"result\":{{\"tools\":[{{\"name\":\"old_tool\",\"inputSchema\":{{\"type\":\"object\"}}}}]}}}}" ;;
            esac
        done
        "#
    )
}

/// Runs `mcp_client --protocol 2026-07-28 [extra...]` against
/// `legacy_server(on_discover)` and checks that it fell back to the
/// handshake and completed the session; returns the output for more checks.
#[cfg(unix)]
fn assert_falls_back(on_discover: &str, extra: &[&str], reason: &str) -> Output {
    let script = legacy_server(on_discover);
    let mut args = vec!["--protocol", "2026-07-28", "--show-stderr"];
    args.extend_from_slice(extra);
    args.extend_from_slice(&["sh", "-c", &script]);
    let out = mcp_client(&args);
    let stdout = out.stdout_text();
    assert!(out.status.success(), "{reason}: {out:?}");
    for expected in [
        "-> server/discover (protocol 2026-07-28, in _meta)",
        reason,
        "falling back to initialize",
        "-> initialize (protocol 2025-11-25)",
        "<- initialize: protocol 2025-11-25",
        "server: legacy 1",
        "-> notifications/initialized",
        "<- 1 tool",
        "old_tool",
        "exited with code 0 after stdin was closed",
    ] {
        assert!(
            stdout.contains(expected),
            "{reason}: missing {expected:?} in:\n{stdout}"
        );
    }
    assert!(!stdout.contains("no handshake"), "{stdout}");
    out
}

#[cfg(unix)]
const ANSWER_METHOD_NOT_FOUND: &str = r#"echo "{\"jsonrpc\":\"2.0\",\"id\":$id,\"error\":{\"code\":-32601,\"message\":\"Method not found\"}}""#;

#[cfg(unix)]
#[test]
fn c36_discovery_falls_back_on_method_not_found() {
    assert_falls_back(
        ANSWER_METHOD_NOT_FOUND,
        &[],
        "<- server/discover: error -32601 (method not found)",
    );
}

#[cfg(unix)]
#[test]
fn c36_discovery_falls_back_on_invalid_params() {
    assert_falls_back(
        r#"echo "{\"jsonrpc\":\"2.0\",\"id\":$id,\"error\":{\"code\":-32602,\"message\":\"Invalid params\"}}""#,
        &[],
        "<- server/discover: error -32602 (invalid params)",
    );
}

#[cfg(unix)]
#[test]
fn c36_discovery_falls_back_on_any_other_error_or_a_result_that_is_not_modern() {
    assert_falls_back(
        r#"echo "{\"jsonrpc\":\"2.0\",\"id\":$id,\"error\":{\"code\":-32000,\"message\":\"Server not initialized\"}}""#,
        &[],
        "<- server/discover: error -32000 (a server error)",
    );
    assert_falls_back(
        r#"echo "{\"jsonrpc\":\"2.0\",\"id\":$id,\"result\":{}}""#,
        &[],
        "<- server/discover: a result without supportedVersions",
    );
}

#[cfg(unix)]
#[test]
fn c36_discovery_falls_back_when_no_answer_comes_in_time() {
    let out = assert_falls_back(
        ":",
        &["--discover-timeout", "0.5"],
        "<- server/discover: no answer within 0.5 s",
    );
    // One process did it all.
    assert_eq!(
        out.stderr.matches("legacy server").count(),
        1,
        "{}",
        out.stderr
    );
}

#[cfg(unix)]
#[test]
fn c36_discovery_falls_back_on_a_new_process_when_the_server_exits_on_it() {
    let out = assert_falls_back(
        r#"echo "unknown method server/discover, bye" >&2; exit 1"#,
        &[],
        "the server exited with code 1 instead of answering",
    );
    let stdout = out.stdout_text();
    assert!(
        stdout.contains("on a new server process") && stdout.contains(" again (pid "),
        "{stdout}"
    );
    assert_eq!(
        out.stderr.matches("legacy server").count(),
        2,
        "{}",
        out.stderr
    );
}

#[cfg(unix)]
#[test]
fn c36_discover_sibling_probes_a_disposable_process_and_keeps_the_session_on_its_own() {
    let out = assert_falls_back(
        r#"echo "unknown method server/discover, bye" >&2; exit 1"#,
        &["--discover-sibling"],
        "the server exited with code 1 instead of answering",
    );
    let stdout = out.stdout_text();
    for expected in [
        " as a disposable sibling (pid ",
        "-> server/discover (protocol 2026-07-28, in _meta) on the sibling",
        "sibling exited with code 1",
    ] {
        assert!(
            stdout.contains(expected),
            "missing {expected:?} in:\n{stdout}"
        );
    }
    // The session's process saw no probe, so it was never started again.
    assert!(!stdout.contains(" again (pid "), "{stdout}");
    assert_eq!(
        out.stderr.matches("legacy server").count(),
        2,
        "{}",
        out.stderr
    );
}

#[test]
fn c36_discover_sibling_with_a_modern_server_goes_stateless_on_the_session_process() {
    let out = mcp_client(&["--protocol", "2026-07-28", "--discover-sibling"]);
    let stdout = out.stdout_text();
    assert!(out.status.success(), "{out:?}");
    for expected in [
        " as a disposable sibling (pid ",
        "<- server/discover: protocol 2026-07-28",
        "sibling exited with code 0 after stdin was closed",
        "no handshake: every request carries protocol 2026-07-28 in _meta",
        "<- result: 42",
    ] {
        assert!(
            stdout.contains(expected),
            "missing {expected:?} in:\n{stdout}"
        );
    }
    assert!(!stdout.contains("initialize"), "{stdout}");
}
