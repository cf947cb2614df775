//! `childwire replay FILE` as a server, spoken to through a childwire
//! transport on every runtime: the committed recordings (the bundled
//! example server; `@modelcontextprotocol/server-everything`, recorded once
//! with node, replayed here without it) come back message for message with
//! the live ids, the recorded stderr lines on its stderr, and the fake
//! server exits with the recorded code.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use childwire::{Command, Config, Exit, ExitReport, Received, Transport};
use childwire_cli::rt::{ExampleRuntime, Program, RuntimeChoice, run_on, timeout_at};
use childwire_replay::{Event, Recording};
use serde_json::Value;

/// Bound for one answer; only a failure waits this long.
const STEP: Duration = Duration::from_secs(30);

const RUNTIMES: [RuntimeChoice; 3] = [
    RuntimeChoice::Tokio,
    RuntimeChoice::Smol,
    RuntimeChoice::AsyncStd,
];

fn recording(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../childwire-replay/tests/recordings")
        .join(name)
}

/// What a host saw of a replayed session.
#[derive(Debug)]
struct Seen {
    /// Every message received, in order.
    messages: Vec<Value>,
    /// What the host sent, ids rewritten.
    sent: Vec<Value>,
    report: ExitReport,
}

/// A host that sends the recording's host side with ids of its own (the
/// recorded id with a `live-` prefix, a string whatever the recorded one
/// was), waits for each request's response, then closes the server's stdin
/// and reads everything up to the exit.
struct Host {
    recording: PathBuf,
}

impl Program for Host {
    type Output = Result<Seen, String>;

    async fn run<R: ExampleRuntime>(self) -> Result<Seen, String> {
        let text = std::fs::read_to_string(&self.recording).map_err(|err| err.to_string())?;
        let recorded = Recording::parse(&text).map_err(|err| err.to_string())?;
        let mut server = spawn_replay::<R>(&self.recording)?;
        let mut messages = Vec::new();
        let mut sent = Vec::new();
        for message in recorded.to_child() {
            let mut message: Value = serde_json::from_slice(message).map_err(|e| e.to_string())?;
            let request = message.get("method").is_some() && message.get("id").is_some();
            if request {
                message["id"] = live_id(&message["id"]);
            }
            server
                .send(message.to_string())
                .await
                .map_err(|err| err.to_string())?;
            sent.push(message.clone());
            // A host waits for the answer before it goes on.
            while request && !messages.iter().any(|seen: &Value| answers(seen, &message)) {
                messages.push(next_message::<R>(&mut server).await?);
            }
        }
        server.close().await.map_err(|err| err.to_string())?;
        loop {
            let item = timeout_at::<R, _>(Instant::now() + STEP, server.recv())
                .await
                .ok_or("no exit report in time")?;
            match item {
                Some(Received::Message(message)) => messages.push(json(&message)?),
                Some(Received::Exited(report)) => {
                    return Ok(Seen {
                        messages,
                        sent,
                        report: *report,
                    });
                }
                Some(other) => return Err(format!("unexpected {other:?}")),
                None => return Err("the stream ended without an exit report".into()),
            }
        }
    }
}

/// `childwire replay FILE` as a child of a transport on runtime `R`.
fn spawn_replay<R: ExampleRuntime>(recording: &Path) -> Result<Transport<R>, String> {
    let mut command = Command::new(env!("CARGO_BIN_EXE_childwire"));
    command.arg("replay").arg(recording);
    // Every stdout line as an item, as recorded (a child's default keeps a
    // banner out of the messages, with its stderr).
    let mut config = Config::default();
    config.pollution(Some(childwire::PollutionPolicy::Deliver));
    Transport::spawn(&command, config).map_err(|err| err.to_string())
}

async fn next_message<R: ExampleRuntime>(server: &mut Transport<R>) -> Result<Value, String> {
    let item = timeout_at::<R, _>(Instant::now() + STEP, server.recv())
        .await
        .ok_or("no answer in time")?;
    match item {
        Some(Received::Message(message)) => json(&message),
        other => Err(format!("expected a message, got {other:?}")),
    }
}

fn json(message: &[u8]) -> Result<Value, String> {
    serde_json::from_slice(message).map_err(|err| format!("{err}: {message:?}"))
}

fn live_id(recorded: &Value) -> Value {
    Value::from(format!("live-{recorded}"))
}

fn answers(response: &Value, request: &Value) -> bool {
    response.get("method").is_none() && response.get("id") == request.get("id")
}

/// The recording's server side, each response carrying the live id of the
/// request it answers: written here from the recording alone, not with the
/// replay engine.
fn expected(recording: &Recording) -> Vec<Value> {
    let mut live: HashMap<String, Value> = HashMap::new();
    for message in recording.to_child() {
        let message: Value = serde_json::from_slice(message).unwrap();
        if message.get("method").is_some() {
            if let Some(id) = message.get("id") {
                live.insert(id.to_string(), live_id(id));
            }
        }
    }
    recording
        .from_child()
        .map(|message| {
            let mut message: Value = serde_json::from_slice(message).unwrap();
            if message.get("method").is_none() {
                if let Some(id) = message.get("id").and_then(|id| live.get(&id.to_string())) {
                    message["id"] = id.clone();
                }
            }
            message
        })
        .collect()
}

fn replays_on_every_runtime(name: &str) {
    let path = recording(name);
    let recorded = Recording::parse(&std::fs::read_to_string(&path).unwrap()).unwrap();
    let want = expected(&recorded);
    assert!(want.len() >= 4, "{name}: a session, not a stub: {want:?}");
    let recorded_stderr: Vec<&str> = recorded
        .events()
        .iter()
        .filter_map(|event| match event {
            Event::Stderr(line) => Some(line.as_str()),
            _ => None,
        })
        .collect();
    assert!(!recorded_stderr.is_empty(), "{name}: recorded by the tap");
    for runtime in RUNTIMES {
        let seen = run_on(
            runtime,
            Host {
                recording: path.clone(),
            },
        )
        .unwrap()
        .unwrap_or_else(|err| panic!("{name} on {runtime}: {err}"));
        assert_eq!(seen.messages, want, "{name} on {runtime}");
        // The ids really were the live ones, not the recorded ones.
        assert!(
            seen.sent
                .iter()
                .filter_map(|sent| sent.get("id"))
                .all(|id| id.as_str().is_some_and(|id| id.starts_with("live-"))),
            "{:?}",
            seen.sent
        );
        assert_eq!(
            Some(seen.report.exit),
            recorded.exit().map(|exit| exit.exit),
            "{name} on {runtime}: {}",
            seen.report
        );
        // The server's stderr lines, written by the fake server to its own.
        let stderr: Vec<&str> = seen.report.stderr_tail.lines().collect();
        assert_eq!(stderr, recorded_stderr, "{name} on {runtime}");
    }
}

#[test]
fn c40_the_bundled_example_servers_session_replays_on_every_runtime() {
    replays_on_every_runtime("example_server.ndjson");
}

#[test]
fn c40_a_server_everything_session_replays_on_every_runtime_without_node() {
    replays_on_every_runtime("server_everything.ndjson");
}

/// A fake server with a banner, stderr lines, a request it was never asked
/// and exit code 3.
struct Scripted {
    recording: PathBuf,
}

impl Program for Scripted {
    type Output = Result<(Vec<Received>, ExitReport), String>;

    async fn run<R: ExampleRuntime>(self) -> Self::Output {
        let mut server = spawn_replay::<R>(&self.recording)?;
        for message in [
            r#"{"jsonrpc":"2.0","id":10,"method":"tools/call","params":{"name":"add"}}"#,
            r#"{"jsonrpc":"2.0","id":11,"method":"resources/list"}"#,
        ] {
            server.send(message).await.map_err(|err| err.to_string())?;
        }
        server.close().await.map_err(|err| err.to_string())?;
        let mut items = Vec::new();
        loop {
            match timeout_at::<R, _>(Instant::now() + STEP, server.recv()).await {
                None => return Err(format!("no exit in time; got {items:?}")),
                Some(None) => return Err("no exit report".into()),
                Some(Some(Received::Exited(report))) => return Ok((items, *report)),
                Some(Some(item)) => items.push(item),
            }
        }
    }
}

#[test]
fn c40_stderr_the_exit_code_and_a_request_not_in_the_recording() {
    let path = std::env::temp_dir().join(format!("childwire-replay-{}.ndjson", std::process::id()));
    std::fs::write(
        &path,
        concat!(
            r#"{"t":0.001,"dir":"from_child","text":"Starting server on stdio"}"#,
            "\n",
            r#"{"t":0.002,"dir":"stderr","line":"INFO server ready","level":"info"}"#,
            "\n",
            r#"{"t":0.003,"dir":"to_child","msg":{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"add"}}}"#,
            "\n",
            r#"{"t":0.004,"dir":"stderr","line":"ERROR database is locked","level":"error"}"#,
            "\n",
            r#"{"t":0.005,"dir":"from_child","msg":{"jsonrpc":"2.0","id":1,"error":{"code":-32603,"message":"database is locked"}}}"#,
            "\n",
            r#"{"t":0.006,"dir":"exit","exit_code":3,"signal":null,"report":"exited with code 3 after stdin was closed"}"#,
            "\n",
        ),
    )
    .unwrap();
    for runtime in RUNTIMES {
        let (items, report) = run_on(
            runtime,
            Scripted {
                recording: path.clone(),
            },
        )
        .unwrap()
        .unwrap_or_else(|err| panic!("{runtime}: {err}"));
        let messages: Vec<String> = items
            .iter()
            .filter_map(|item| match item {
                Received::Message(message) => Some(String::from_utf8_lossy(message).into_owned()),
                _ => None,
            })
            .collect();
        assert_eq!(messages.len(), 3, "{runtime}: {items:?}");
        assert_eq!(messages[0], "Starting server on stdio", "{runtime}");
        assert_eq!(
            messages[1],
            r#"{"jsonrpc":"2.0","id":10,"error":{"code":-32603,"message":"database is locked"}}"#,
            "{runtime}"
        );
        let error: Value = serde_json::from_str(&messages[2]).unwrap();
        assert_eq!(error["id"], 11, "{runtime}");
        assert_eq!(error["error"]["code"], -32601, "{runtime}");
        assert!(
            error["error"]["message"]
                .as_str()
                .unwrap()
                .contains("`resources/list` request #1 is not in the recording"),
            "{runtime}: {error}"
        );
        assert_eq!(report.exit, Exit::Code(3), "{runtime}: {report}");
        // In the order things happened.
        let lines: Vec<&str> = report.stderr_tail.lines().collect();
        assert_eq!(
            lines,
            [
                "INFO server ready",
                "ERROR database is locked",
                "childwire replay: not in the recording: `resources/list` #1",
            ],
            "{runtime}: {report}"
        );
    }
    std::fs::remove_file(&path).unwrap();
}

/// An unchanged host, `childwire probe`, against the replay of the bundled
/// server on each runtime: it sees the server it saw when recording.
#[test]
fn c40_the_probe_sees_the_bundled_server_in_its_replay_on_every_runtime() {
    let recording = recording("example_server.ndjson");
    for runtime in ["tokio", "smol", "async-std"] {
        let out = std::process::Command::new(env!("CARGO_BIN_EXE_childwire"))
            .args(["probe", "--runtime", runtime, "--timeout", "30"])
            .args(["--call", "add", "--args", r#"{"a":2,"b":40}"#, "--"])
            .arg(env!("CARGO_BIN_EXE_childwire"))
            .arg("replay")
            .arg(&recording)
            .output()
            .expect("running childwire probe");
        let stdout = String::from_utf8_lossy(&out.stdout);
        assert!(
            out.status.success(),
            "{runtime}: {stdout}{}",
            String::from_utf8_lossy(&out.stderr)
        );
        for line in [
            "<- initialize: protocol 2025-06-18",
            "   server: childwire-example-server 0.1.0",
            "<- 2 tools",
            "<- result: 42",
            "server exited with code 0 after stdin was closed",
        ] {
            assert!(stdout.contains(line), "{runtime}: {line:?} in:\n{stdout}");
        }
    }
}

/// A recording written to a private temporary file, removed on drop.
struct TempRecording(PathBuf);

impl TempRecording {
    fn new(name: &str, text: &str) -> Self {
        let path = std::env::temp_dir().join(format!(
            "childwire-replay-{name}-{}.ndjson",
            std::process::id()
        ));
        std::fs::write(&path, text).unwrap();
        Self(path)
    }
}

impl Drop for TempRecording {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.0);
    }
}

/// `childwire replay ARGS` with stdin closed, its memory limited to
/// `max_kib` of address space (`ulimit -v`): its exit status and stderr.
fn replay_limited(args: &[&str], max_kib: u64) -> (std::process::ExitStatus, String) {
    let out = std::process::Command::new("sh")
        .arg("-c")
        .arg(format!("ulimit -v {max_kib} && exec \"$0\" replay \"$@\""))
        .arg(env!("CARGO_BIN_EXE_childwire"))
        .args(args)
        .stdin(std::process::Stdio::null())
        .output()
        .expect("running childwire replay");
    (
        out.status,
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// 512 MiB of address space: the replay reads at most one 128 MiB record
/// at a time, where reading the whole file grew without a bound.
const BOUNDED_KIB: u64 = 512 * 1024;

#[test]
fn an_endless_stream_is_refused_with_a_clear_error_in_bounded_memory() {
    let (status, stderr) = replay_limited(&["/dev/zero"], BOUNDED_KIB);
    assert_eq!(status.code(), Some(1), "{status}: {stderr}");
    assert!(
        stderr.contains("/dev/zero: line 1: a record longer than the limit of 134217728 bytes"),
        "{stderr}"
    );
    let (status, stderr) = replay_limited(&["--max-size", "8MiB", "/dev/zero"], BOUNDED_KIB);
    assert_eq!(status.code(), Some(1), "{status}: {stderr}");
    assert!(
        stderr.contains("line 1: the recording is larger than the limit of 8388608 bytes"),
        "{stderr}"
    );
    // Valid records, endless, on a pipe: the file's limit.
    let out = std::process::Command::new("sh")
        .arg("-c")
        .arg(format!(
            "ulimit -v {BOUNDED_KIB} && yes '{{\"dir\":\"stderr\",\"line\":\"x\"}}' | \"$0\" replay --max-size 8MiB /dev/stdin"
        ))
        .arg(env!("CARGO_BIN_EXE_childwire"))
        .stdin(std::process::Stdio::null())
        .output()
        .expect("running childwire replay");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{}: {stderr}", out.status);
    assert!(
        stderr.contains(
            "/dev/stdin: line 299594: the recording is larger than the limit of 8388608 bytes"
        ),
        "{stderr}"
    );
}

#[test]
fn a_recording_larger_than_the_limit_is_refused_naming_the_limit() {
    let record = r#"{"dir":"from_child","text":"a banner of some length, repeated"}"#;
    let text = format!("{record}\n").repeat(40_000);
    let file = TempRecording::new("large", &text);
    let path = file.0.to_str().unwrap();
    let (status, stderr) = replay_limited(&["--max-size", "1MiB", path], BOUNDED_KIB);
    assert_eq!(status.code(), Some(1), "{status}: {stderr}");
    assert!(
        stderr.contains(
            "the recording is larger than the limit of 1048576 bytes (raise it with --max-size)"
        ),
        "{stderr}"
    );
    // Under a limit it fits: it plays (every banner on stdout) and exits 0.
    let (status, stderr) = replay_limited(&["--max-size", "4MiB", path], BOUNDED_KIB);
    assert_eq!(status.code(), Some(0), "{status}: {stderr}");
}

#[test]
fn a_text_with_a_raw_line_break_is_an_error_naming_its_line() {
    let file = TempRecording::new(
        "newline",
        concat!(
            r#"{"dir":"to_child","msg":{"jsonrpc":"2.0","id":1,"method":"ping"}}"#,
            "\n\n",
            r#"{"dir":"from_child","text":"two\nmessages"}"#,
            "\n"
        ),
    );
    let (status, stderr) = replay_limited(&[file.0.to_str().unwrap()], BOUNDED_KIB);
    assert_eq!(status.code(), Some(1), "{status}: {stderr}");
    assert!(
        stderr.contains(": line 3: a \"text\" holding a raw line break"),
        "{stderr}"
    );
}

/// A host that pings the replay of one generation and reads to its exit.
struct Generation {
    recording: PathBuf,
    args: Vec<&'static str>,
}

impl Program for Generation {
    type Output = Result<(Vec<Value>, ExitReport), String>;

    async fn run<R: ExampleRuntime>(self) -> Self::Output {
        let mut command = Command::new(env!("CARGO_BIN_EXE_childwire"));
        command.arg("replay").args(&self.args).arg(&self.recording);
        let mut server =
            Transport::<R>::spawn(&command, Config::default()).map_err(|err| err.to_string())?;
        let ping = r#"{"jsonrpc":"2.0","id":"live","method":"ping"}"#;
        server.send(ping).await.map_err(|err| err.to_string())?;
        let mut messages = Vec::new();
        loop {
            match timeout_at::<R, _>(Instant::now() + STEP, server.recv()).await {
                None => return Err(format!("no exit in time; got {messages:?}")),
                Some(None) => return Err("no exit report".into()),
                Some(Some(Received::Exited(report))) => return Ok((messages, *report)),
                Some(Some(Received::Message(message))) => {
                    messages.push(json(&message)?);
                    // Generation 2 waits for its stdin to close.
                    server.close().await.map_err(|err| err.to_string())?;
                }
                Some(Some(other)) => return Err(format!("unexpected {other:?}")),
            }
        }
    }
}

#[test]
fn a_two_generation_recording_replays_either_generation() {
    let file = TempRecording::new(
        "generations",
        &[
            r#"{"dir":"to_child","msg":{"jsonrpc":"2.0","id":1,"method":"ping"}}"#,
            r#"{"dir":"from_child","msg":{"jsonrpc":"2.0","id":1,"result":{"generation":1}}}"#,
            r#"{"dir":"stderr","line":"FATAL gone","level":"error"}"#,
            r#"{"dir":"exit","exit_code":3,"signal":null,"report":"exited with code 3 on its own after 5 ms"}"#,
            r#"{"dir":"generation","generation":2}"#,
            r#"{"dir":"to_child","msg":{"jsonrpc":"2.0","id":1,"method":"ping"}}"#,
            r#"{"dir":"from_child","msg":{"jsonrpc":"2.0","id":1,"result":{"generation":2}}}"#,
            r#"{"dir":"exit","exit_code":0,"signal":null,"report":"exited with code 0 after stdin was closed"}"#,
        ]
        .join("\n"),
    );
    for runtime in [RuntimeChoice::Tokio, RuntimeChoice::Smol] {
        let run = |args: Vec<&'static str>| {
            run_on(
                runtime,
                Generation {
                    recording: file.0.clone(),
                    args,
                },
            )
            .unwrap()
            .unwrap_or_else(|err| panic!("{runtime}: {err}"))
        };
        let (messages, report) = run(vec!["--generation", "1"]);
        assert_eq!(messages.len(), 1, "{runtime}: {messages:?}");
        assert_eq!(messages[0]["id"], "live", "{runtime}");
        assert_eq!(messages[0]["result"]["generation"], 1, "{runtime}");
        assert_eq!(report.exit, Exit::Code(3), "{runtime}: {report}");
        assert!(
            report.stderr_tail.contains("FATAL gone"),
            "{runtime}: {report}"
        );

        let (messages, report) = run(vec!["--generation", "2"]);
        assert_eq!(messages.len(), 1, "{runtime}: {messages:?}");
        assert_eq!(messages[0]["result"]["generation"], 2, "{runtime}");
        assert_eq!(report.exit, Exit::Code(0), "{runtime}: {report}");
        assert!(!report.stderr_tail.contains("FATAL"), "{runtime}: {report}");

        // No choice: the first, and a line that says so.
        let (messages, report) = run(vec![]);
        assert_eq!(messages[0]["result"]["generation"], 1, "{runtime}");
        assert!(
            report
                .stderr_tail
                .contains("childwire replay: the recording holds 2 generations"),
            "{runtime}: {report}"
        );
    }
    let (status, stderr) = replay_limited(
        &["--generation", "3", file.0.to_str().unwrap()],
        BOUNDED_KIB,
    );
    assert_eq!(status.code(), Some(1), "{status}: {stderr}");
    assert!(
        stderr.contains("no generation 3: the recording holds 2"),
        "{stderr}"
    );
}

/// A host that calls two tools in the other order than recorded, and one
/// the recording does not have.
struct ByName {
    recording: PathBuf,
}

impl Program for ByName {
    type Output = Result<(Vec<Value>, ExitReport), String>;

    async fn run<R: ExampleRuntime>(self) -> Self::Output {
        let mut server = spawn_replay::<R>(&self.recording)?;
        let mut messages = Vec::new();
        for (id, name) in [(1, "echo"), (2, "get-sum")] {
            let call = format!(
                r#"{{"jsonrpc":"2.0","id":{id},"method":"tools/call","params":{{"name":"{name}"}}}}"#
            );
            server.send(call).await.map_err(|err| err.to_string())?;
            messages.push(next_message::<R>(&mut server).await?);
        }
        server.close().await.map_err(|err| err.to_string())?;
        match timeout_at::<R, _>(Instant::now() + STEP, server.recv()).await {
            None => Err("no exit in time".into()),
            Some(None) => Err("no exit report".into()),
            Some(Some(Received::Exited(report))) => Ok((messages, *report)),
            Some(Some(other)) => Err(format!("unexpected {other:?}")),
        }
    }
}

#[test]
fn tools_called_in_the_other_order_replay_by_name() {
    let file = TempRecording::new(
        "by-name",
        &[
            r#"{"dir":"to_child","msg":{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"get-sum","arguments":{"a":1,"b":2}}}}"#,
            r#"{"dir":"from_child","msg":{"jsonrpc":"2.0","id":1,"result":{"content":[{"type":"text","text":"3"}]}}}"#,
            r#"{"dir":"to_child","msg":{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"echo","arguments":{"message":"hi"}}}}"#,
            r#"{"dir":"from_child","msg":{"jsonrpc":"2.0","id":2,"result":{"content":[{"type":"text","text":"Echo: hi"}]}}}"#,
        ]
        .join("\n"),
    );
    for runtime in [RuntimeChoice::Tokio, RuntimeChoice::Smol] {
        let (messages, report) = run_on(
            runtime,
            ByName {
                recording: file.0.clone(),
            },
        )
        .unwrap()
        .unwrap_or_else(|err| panic!("{runtime}: {err}"));
        assert_eq!(
            messages[0]["result"]["content"][0]["text"], "Echo: hi",
            "{runtime}"
        );
        assert_eq!(messages[0]["id"], 1, "{runtime}");
        assert_eq!(
            messages[1]["result"]["content"][0]["text"], "3",
            "{runtime}"
        );
        assert_eq!(messages[1]["id"], 2, "{runtime}");
        assert!(
            !report.stderr_tail.contains("by rank"),
            "{runtime}: {report}"
        );
    }
}
