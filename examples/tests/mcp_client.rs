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

#[test]
fn probe_json_against_the_bundled_server_is_one_document_with_what_it_offers() {
    for runtime in ["tokio", "smol", "async-std"] {
        let out = mcp_client(&[
            "--json",
            "--runtime",
            runtime,
            "--read-resource",
            "example://readme",
            "--get-prompt",
            "greet",
            "--args",
            r#"{"name":"Ada"}"#,
        ]);
        assert!(out.status.success(), "{runtime}: {out:?}");
        // Nothing but the document on stdout.
        let document: serde_json::Value = serde_json::from_slice(&out.stdout)
            .unwrap_or_else(|err| panic!("{runtime}: not one JSON document ({err}): {out:?}"));
        let names = |field: &str, key: &str| -> Vec<String> {
            document[field]
                .as_array()
                .unwrap_or_else(|| panic!("{runtime}: no `{field}` list in {document}"))
                .iter()
                .map(|item| item[key].as_str().unwrap_or_default().to_owned())
                .collect()
        };
        assert_eq!(names("tools", "name"), ["echo", "add"], "{document}");
        assert_eq!(
            names("resources", "uri"),
            ["example://readme"],
            "{document}"
        );
        assert_eq!(names("prompts", "name"), ["greet"], "{document}");
        assert_eq!(document["runtime"], runtime, "{document}");
        assert_eq!(document["outcome"], "ok", "{document}");
        assert_eq!(document["server_info"]["name"], "childwire-example-server");
        assert_eq!(document["protocol_version"], "2025-11-25", "{document}");
        assert_eq!(document["exit"]["code"], 0, "{document}");
        assert_eq!(document["exit"]["shutdown_requested"], true, "{document}");
        assert!(
            document["traffic"]["messages_out"].as_u64() > Some(0),
            "{document}"
        );
        let calls = document["calls"].as_array().expect("calls");
        let methods: Vec<&str> = calls.iter().filter_map(|c| c["method"].as_str()).collect();
        assert_eq!(
            methods,
            ["tools/call", "resources/read", "prompts/get"],
            "{document}"
        );
        assert_eq!(calls[0]["result"]["content"][0]["text"], "42", "{document}");
        assert!(
            calls[1]["result"]["contents"][0]["text"]
                .as_str()
                .is_some_and(|text| text.contains("example server")),
            "{document}"
        );
        assert!(
            calls[2]["result"]["messages"][0]["content"]["text"]
                .as_str()
                .is_some_and(|text| text.contains("Ada")),
            "{document}"
        );
        for step in [
            "spawn",
            "open",
            "tools/list",
            "tools/call",
            "shutdown",
            "total",
        ] {
            assert!(
                document["timings_ms"][step].is_number(),
                "{runtime}: no timing for {step}: {document}"
            );
        }
    }
}

#[test]
fn probe_lists_and_reads_resources_and_prompts_in_words() {
    let out = mcp_client(&[
        "--read-resource",
        "example://readme",
        "--get-prompt",
        "greet",
        "--args",
        r#"{"name":"Ada"}"#,
    ]);
    let stdout = out.stdout_text();
    assert!(out.status.success(), "{out:?}");
    for expected in [
        "-> resources/list\n<- 1 resource\n   example://readme  About this server (text/plain)",
        "-> prompts/list\n<- 1 prompt\n   greet(name)  Asks the model",
        "-> resources/read example://readme\n<- contents: The bundled example server",
        "-> prompts/get greet {\"name\":\"Ada\"}\n<- prompt: user: Please greet Ada",
    ] {
        assert!(
            stdout.contains(expected),
            "missing {expected:?} in:\n{stdout}"
        );
    }
}

#[test]
fn a_prompt_the_server_refuses_is_a_failed_step_that_says_so() {
    let out = mcp_client(&["--json", "--get-prompt", "greet"]);
    assert_eq!(out.status.code(), Some(1), "{out:?}");
    let document: serde_json::Value = serde_json::from_slice(&out.stdout).expect("JSON");
    assert_eq!(document["outcome"], "failed", "{document}");
    assert_eq!(document["error"]["step"], "prompts/get greet", "{document}");
    let call = &document["calls"][1];
    assert_eq!(call["method"], "prompts/get", "{document}");
    assert!(
        call["error"].as_str().is_some_and(|e| e.contains("-32602")),
        "{document}"
    );
    assert!(
        out.stderr
            .contains("missing required prompt argument `name`"),
        "{out:?}"
    );
}

#[cfg(unix)]
#[test]
fn probe_against_cat_says_its_request_was_echoed_and_counts_one_in_the_singular() {
    let out = mcp_client(&["--", "cat"]);
    assert_eq!(out.status.code(), Some(1), "{out:?}");
    assert!(
        out.stderr
            .contains("sent the initialize request back unchanged instead of answering it")
            && out.stderr.contains("(is it `cat`?)"),
        "{out:?}"
    );
    // Not blamed on the server as an error it answered.
    assert!(!out.stderr.contains("answered with error"), "{out:?}");
    let stdout = out.stdout_text();
    assert!(
        stdout.contains("traffic: sent 1 message (") && stdout.contains("received 1 message ("),
        "{stdout}"
    );
    assert!(!stdout.contains(" 1 messages"), "{stdout}");
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
        "stdout: 1 line that was not a JSON message (named above)",
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
        "mcp_client: the server ended during initialize",
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
    assert!(
        out.stderr
            .contains("--args goes right after the --call NAME or --get-prompt NAME"),
        "{}",
        out.stderr
    );
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

// ---- --restart: the session survives a server killed with SIGKILL ----

/// The pid in a `spawned ... (pid N) ...` line.
#[cfg(unix)]
fn pid_in(line: &str) -> u32 {
    let at = line.find("(pid ").expect("a pid") + "(pid ".len();
    let digits: String = line[at..]
        .chars()
        .take_while(char::is_ascii_digit)
        .collect();
    digits
        .parse()
        .unwrap_or_else(|_| panic!("no pid in {line:?}"))
}

#[cfg(unix)]
fn kill_9(pid: u32) {
    let pid = rustix::process::Pid::from_raw(pid.try_into().unwrap()).unwrap();
    rustix::process::kill_process(pid, rustix::process::Signal::KILL).unwrap();
}

/// Runs `mcp_client --restart ARGS`, waits until it watches the server,
/// kills the server with SIGKILL, waits until the new process is up and
/// watched, ends the session by closing stdin and checks the transcript:
/// the exit report, the restart and the re-initialization with the tools
/// listed again. Returns it.
#[cfg(unix)]
fn assert_survives_kill_9(args: &[&str], deadline: Duration) -> String {
    let mut all = vec!["--restart"];
    all.extend_from_slice(args);
    let mut client = support::Running::start_lines(&example("mcp_client"), &all);
    let spawned = client.wait_for_stdout(|line| line.starts_with("spawned "), deadline);
    let first = pid_in(&spawned);
    client.wait_for_stdout(|line| line.starts_with("-> watching the server"), deadline);
    kill_9(first);
    let restarted =
        client.wait_for_stdout(|line| line.contains("restarted: generation 2"), deadline);
    let second = pid_in(&restarted);
    assert_ne!(first, second, "{restarted}");
    client.wait_for_stdout(|line| line.starts_with("-> watching the server"), deadline);
    client.close_stdin();
    let status = client.wait_for_exit(deadline);
    let stdout = client.stdout_lines();
    let stderr = client.stderr();
    let status = status.unwrap_or_else(|| panic!("still running:\n{stdout}\n{stderr}"));
    assert!(status.success(), "{status}:\n{stdout}\n{stderr}");
    let after_kill = stdout
        .split_once("<- server killed by SIGKILL on its own")
        .map(|(_, after)| after)
        .unwrap_or_else(|| panic!("no exit report for the kill in:\n{stdout}"));
    for expected in [
        &format!("spawned the server again (pid {second}); re-initializing it")[..],
        "-> initialize (protocol 2025-11-25)",
        "<- initialize: protocol 2025-11-25",
        "-> notifications/initialized",
        "-> tools/list",
        &format!("-> watching the server (pid {second})"),
        "end of stdin: ending the session",
        "server exited with code 0 after stdin was closed",
    ] {
        assert!(
            after_kill.contains(expected),
            "missing {expected:?} after the kill in:\n{stdout}"
        );
    }
    // `<- N tools`: once in the session, once after the restart.
    let listed = |text: &str| {
        text.lines()
            .filter(|line| line.starts_with("<- ") && line.ends_with(" tools"))
            .count()
    };
    assert_eq!((listed(&stdout), listed(after_kill)), (2, 1), "{stdout}");
    stdout
}

#[cfg(unix)]
#[test]
fn c36_restart_survives_a_kill_9_of_the_bundled_server_and_lists_tools_again() {
    for runtime in ["tokio", "smol", "async-std"] {
        let stdout = assert_survives_kill_9(&["--runtime", runtime], DEADLINE);
        assert!(stdout.contains(&format!(" on {runtime}, ")), "{stdout}");
        assert_eq!(stdout.matches("<- 2 tools").count(), 2, "{stdout}");
        // The session itself ran once: the tool was called before the kill.
        assert_eq!(stdout.matches("<- result: 42").count(), 1, "{stdout}");
    }
}

#[cfg(unix)]
#[test]
fn c36_restart_survives_a_kill_9_of_server_everything() {
    const PACKAGE: &str = "@modelcontextprotocol/server-everything";
    if let Err(why) = npm_registry_answers(PACKAGE) {
        eprintln!("skipped: {why}");
        return;
    }
    // A first `npx -y` downloads the server.
    assert_survives_kill_9(
        &["--timeout", "120", "npx", "-y", PACKAGE],
        Duration::from_secs(180),
    );
}

/// Whether `npx` runs here and the npm registry knows `package`.
#[cfg(unix)]
fn npm_registry_answers(package: &str) -> Result<(), String> {
    for tool in ["npx", "npm"] {
        let found = std::process::Command::new(tool)
            .arg("--version")
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .status();
        if !found.is_ok_and(|status| status.success()) {
            return Err(format!("`{tool}` is not on PATH"));
        }
    }
    let out = run(
        std::path::Path::new("npm"),
        &["view", package, "version"],
        Vec::new(),
        Duration::from_secs(60),
    );
    if out.status.success() && !out.stdout.is_empty() {
        Ok(())
    } else {
        Err(format!(
            "the npm registry did not answer for {package}: {}",
            out.stderr.trim()
        ))
    }
}

#[cfg(unix)]
#[test]
fn c37_restart_sends_a_request_the_killed_server_never_answered_again() {
    // The first process kills itself on `tools/list`, leaving a mark; the
    // next one answers it.
    let mark = std::env::temp_dir().join(format!("childwire-restart-mark-{}", std::process::id()));
    let _ = std::fs::remove_file(&mark);
    let on_list = format!(
        r#"if [ -e '{mark}' ]; then echo "{{\"jsonrpc\":\"2.0\",\"id\":$id,\"result\":{{\"tools\":[{{\"name\":\"old_tool\",\"inputSchema\":{{\"type\":\"object\"}}}}]}}}}"; else : > '{mark}'; kill -9 $$; fi"#,
        mark = mark.display()
    );
    let script = legacy_server(":").replace(
        r#"*'"tools/list"'*) echo"#,
        &format!(r#"*'"tools/list"'*) {on_list} ;; *'"never"'*) echo"#),
    );
    // stdin is closed at once: the watch ends as soon as it starts.
    let out = mcp_client(&["--restart", "sh", "-c", &script]);
    let _ = std::fs::remove_file(&mark);
    let stdout = out.stdout_text();
    assert!(out.status.success(), "{out:?}");
    let after_kill = stdout
        .split_once("<- server killed by SIGKILL on its own")
        .map(|(_, after)| after)
        .unwrap_or_else(|| panic!("no exit report for the kill in:\n{stdout}"));
    for expected in [
        "tools/list was not answered (the server killed by SIGKILL on its own",
        "it is sent again once the server is back",
        "spawned the server again (pid ",
        "-> initialize (protocol 2025-11-25)",
        "restarted: generation 2 (pid ",
        "-> tools/list (again)",
        "<- 1 tool\n",
        "end of stdin: ending the session",
        "server exited with code 0 after stdin was closed",
    ] {
        assert!(
            after_kill.contains(expected),
            "missing {expected:?} after the kill in:\n{stdout}"
        );
    }
    // Listed by the re-initialization, then by the request sent again.
    assert_eq!(after_kill.matches("<- 1 tool\n").count(), 2, "{stdout}");
}

#[cfg(unix)]
#[test]
fn c36_restart_a_server_that_dies_between_requests_is_restarted_and_the_next_one_goes_to_it() {
    // The first process exits right after answering initialize, leaving a
    // mark; the next one stays. Whether tools/list finds the server down
    // or is left unanswered, it reaches the new process.
    let mark =
        std::env::temp_dir().join(format!("childwire-restart-between-{}", std::process::id()));
    let _ = std::fs::remove_file(&mark);
    let script = legacy_server(":").replace(
        r#""version\":\"1\"}}}" ;;"#,
        &format!(
            r#""version\":\"1\"}}}}}}"; [ -e '{mark}' ] || {{ : > '{mark}'; echo 'crashed after initialize' >&2; exit 1; }} ;;"#,
            mark = mark.display()
        ),
    );
    assert_ne!(script, legacy_server(":"), "the script was changed");
    let out = mcp_client(&["--restart", "sh", "-c", &script]);
    let _ = std::fs::remove_file(&mark);
    let stdout = out.stdout_text();
    assert!(out.status.success(), "{out:?}");
    let after_exit = stdout
        .split_once("<- server exited with code 1 on its own")
        .map(|(_, after)| after)
        .unwrap_or_else(|| panic!("no exit report in:\n{stdout}"));
    for expected in [
        "crashed after initialize",
        "spawned the server again (pid ",
        "-> initialize (protocol 2025-11-25)",
        "restarted: generation 2 (pid ",
        "-> tools/list (again)",
        "server exited with code 0 after stdin was closed",
    ] {
        assert!(
            after_exit.contains(expected),
            "missing {expected:?} after the exit in:\n{stdout}"
        );
    }
    // Listed by the re-initialization, then by the session's own request.
    assert_eq!(after_exit.matches("<- 1 tool\n").count(), 2, "{stdout}");
}

#[cfg(unix)]
#[test]
fn c36_restart_gives_up_on_a_server_that_keeps_crashing_and_says_why() {
    let out = mcp_client(&[
        "--restart",
        "sh",
        "-c",
        "echo 'Error: cannot open database' >&2; exit 3",
    ]);
    let stdout = out.stdout_text();
    assert_eq!(out.status.code(), Some(1), "{out:?}");
    assert_eq!(
        stdout.matches("restarted: generation ").count(),
        5,
        "{stdout}"
    );
    assert!(
        stdout
            .contains("<- gave up restarting the child: it ended again after 5 restarts in a row"),
        "{stdout}"
    );
    for expected in [
        "mcp_client: the server kept ending during initialize and is not restarted again",
        "the last time it exited with code 3 on its own",
        "| Error: cannot open database",
    ] {
        assert!(
            out.stderr.contains(expected),
            "missing {expected:?} in:\n{}",
            out.stderr
        );
    }
}
