//! The whole loop on every runtime: a live session with the bundled example
//! server, recorded by a `Recorder` set as the transport's tap
//! (`Config::tap`), then replayed by the in-memory twin through a
//! transport. A host with ids of its own gets the messages the live server
//! sent (each response with the id the host just sent), the server's stderr
//! lines and its exit (C40).

use std::future::{Future, poll_fn};
use std::io::{self, Write};
use std::path::{Path, PathBuf};
use std::pin::pin;
use std::process::Command as Cargo;
use std::sync::{Arc, Mutex, OnceLock};
use std::task::Poll;
use std::time::{Duration, Instant};

use childwire::tap::Recorder;
use childwire::{
    ChannelConfig, Command, Config, ExitReport, Received, Runtime, StderrMode, Transport,
};
use childwire_replay::{Recording, twin};
use serde_json::{Value, json};

/// Bound for a whole session; only a failure waits this long.
const LIMIT: Duration = Duration::from_secs(60);

/// `future` on runtime `R`, failing the test if it takes over [`LIMIT`].
async fn within<R: Runtime, F: Future>(what: &str, future: F) -> F::Output {
    let runtime = R::current().expect("inside the runtime");
    let deadline = Instant::now() + LIMIT;
    let mut timer = runtime.timer(deadline);
    let mut future = pin!(future);
    poll_fn(|cx| {
        if let Poll::Ready(output) = future.as_mut().poll(cx) {
            return Poll::Ready(output);
        }
        if runtime.now() >= deadline || timer.as_mut().poll(cx).is_ready() {
            panic!("{what} did not end within {LIMIT:?}");
        }
        Poll::Pending
    })
    .await
}

/// The bundled example server's binary, built once per test binary with
/// this profile (a no-op when `cargo test` built the examples already).
/// `CHILDWIRE_EXAMPLES_DIR` names a directory where they are built
/// already.
fn example_server() -> PathBuf {
    static DIR: OnceLock<PathBuf> = OnceLock::new();
    let dir = DIR.get_or_init(|| {
        if let Some(dir) = std::env::var_os("CHILDWIRE_EXAMPLES_DIR") {
            return PathBuf::from(dir);
        }
        // target/<profile>/deps/<test binary>
        let exe = std::env::current_exe().expect("the test binary's path");
        let profile_dir = exe
            .parent()
            .and_then(Path::parent)
            .expect("the test binary sits in target/<profile>/deps");
        let mut build = Cargo::new(env!("CARGO"));
        build.args(["build", "--example", "example_server", "--manifest-path"]);
        build.arg(Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples/Cargo.toml"));
        match profile_dir.file_name().and_then(|name| name.to_str()) {
            Some("debug") | None => {}
            Some("release") => {
                build.arg("--release");
            }
            Some(profile) => {
                build.args(["--profile", profile]);
            }
        }
        let status = build
            .status()
            .expect("running cargo to build the example server");
        assert!(
            status.success(),
            "building the example server failed: {status}"
        );
        profile_dir.join("examples")
    });
    dir.join(format!("example_server{}", std::env::consts::EXE_SUFFIX))
}

/// A writer whose bytes the test reads once the recorder is done.
#[derive(Clone, Default)]
struct Shared(Arc<Mutex<Vec<u8>>>);

impl Write for Shared {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        self.0.lock().unwrap().extend_from_slice(buf);
        Ok(buf.len())
    }

    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

/// The host's side of the session; requests get the ids `ids` gives, in
/// order.
fn host_messages(ids: &[Value; 4]) -> Vec<Value> {
    vec![
        json!({"jsonrpc": "2.0", "id": ids[0], "method": "initialize", "params": {
            "protocolVersion": "2025-06-18",
            "capabilities": {},
            "clientInfo": {"name": "childwire-test", "version": "0.1.0"},
        }}),
        json!({"jsonrpc": "2.0", "method": "notifications/initialized"}),
        json!({"jsonrpc": "2.0", "id": ids[1], "method": "tools/list"}),
        json!({"jsonrpc": "2.0", "id": ids[2], "method": "tools/call", "params": {
            "name": "add", "arguments": {"a": 2, "b": 40},
        }}),
        json!({"jsonrpc": "2.0", "id": ids[3], "method": "ping"}),
    ]
}

/// Sends `host`, waiting for the response to each request, closes the
/// server's stdin and reads up to the end: the messages, and the exit
/// report if the transport gives one.
async fn talk<R: Runtime>(
    server: &mut Transport<R>,
    host: &[Value],
) -> (Vec<Value>, Option<ExitReport>) {
    let mut messages: Vec<Value> = Vec::new();
    for message in host {
        server.send(message.to_string()).await.expect("sent");
        let Some(id) = message.get("id") else {
            continue;
        };
        while !messages
            .iter()
            .any(|seen| seen.get("method").is_none() && seen.get("id") == Some(id))
        {
            match server.recv().await {
                Some(Received::Message(message)) => {
                    messages.push(serde_json::from_slice(&message).expect("JSON"));
                }
                other => panic!("waiting for the answer to {id}: {other:?}"),
            }
        }
    }
    server.close().await.expect("closed");
    let mut report = None;
    while let Some(item) = server.recv().await {
        match item {
            Received::Message(message) => {
                messages.push(serde_json::from_slice(&message).expect("JSON"));
            }
            Received::Exited(exit) => report = Some(*exit),
            other => panic!("unexpected {other:?}"),
        }
    }
    (messages, report)
}

/// The live session, recorded, then its replay, on runtime `R`.
async fn record_then_replay<R: Runtime>(runtime: &str) {
    // Live, with ids 1 to 4, as the server's own host would send them.
    let out = Shared::default();
    let recorder = Arc::new(Recorder::new(out.clone()));
    let mut config = Config::default();
    config.tap(Arc::clone(&recorder));
    let mut command = Command::new(example_server());
    command.stderr(StderrMode::Capture);
    let mut server = Transport::<R>::spawn(&command, config).expect("spawned");
    let recorded_ids = [json!(1), json!(2), json!(3), json!(4)];
    let (live, report) = within::<R, _>(
        "the live session",
        talk(&mut server, &host_messages(&recorded_ids)),
    )
    .await;
    drop(server);
    let report = report.expect("the live server's exit report");
    assert!(report.success(), "{runtime}: {report}");
    let live_stderr: Vec<&str> = report.stderr_tail.lines().collect();
    assert!(
        live_stderr
            .iter()
            .any(|line| line.contains("<- tools/call")),
        "{runtime}: the server's log: {live_stderr:?}"
    );
    recorder.flush().expect("recorded");
    let text = String::from_utf8(out.0.lock().unwrap().clone()).expect("UTF-8");
    let recording = Recording::parse(&text).unwrap_or_else(|err| panic!("{err}:\n{text}"));

    // Replayed, to a host with ids of its own.
    let replay_ids = [json!("a"), json!("b"), json!(7), json!("ping-1")];
    let (stdout, stdin, twin) = twin(recording);
    let mut replayed = Transport::<R>::from_pipes(stdout, stdin, &ChannelConfig::default())
        .expect("inside the runtime");
    let (messages, _) = within::<R, _>(
        "the replay",
        talk(&mut replayed, &host_messages(&replay_ids)),
    )
    .await;

    // The live messages, each response with the replaying host's id.
    let want: Vec<Value> = live
        .into_iter()
        .map(|mut message| {
            let at = recorded_ids
                .iter()
                .position(|id| message.get("method").is_none() && message.get("id") == Some(id));
            if let Some(at) = at {
                message["id"] = replay_ids[at].clone();
            }
            message
        })
        .collect();
    assert_eq!(want.len(), 4, "{runtime}: {want:#?}");
    assert_eq!(messages, want, "{runtime}");
    assert_eq!(twin.stderr_lines(), live_stderr, "{runtime}");
    let exit = twin.exit().expect("the replayed exit");
    assert_eq!(exit.exit, report.exit, "{runtime}");
    assert!(
        twin.unmatched().is_empty(),
        "{runtime}: {:?}",
        twin.unmatched()
    );
}

#[test]
fn c40_a_session_recorded_by_the_tap_replays_with_the_same_messages_on_tokio() {
    tokio::runtime::Runtime::new()
        .unwrap()
        .block_on(record_then_replay::<childwire::tokio::Tokio>("tokio"));
}

#[test]
fn c40_a_session_recorded_by_the_tap_replays_with_the_same_messages_on_smol() {
    smol::block_on(record_then_replay::<childwire::smol::Smol>("smol"));
}

#[test]
fn c40_a_session_recorded_by_the_tap_replays_with_the_same_messages_on_async_std() {
    async_std::task::block_on(record_then_replay::<childwire::async_std::AsyncStd>(
        "async-std",
    ));
}
