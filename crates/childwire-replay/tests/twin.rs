//! The in-memory twin under a real transport (`Transport::from_pipes`) on
//! every runtime: a committed recording comes back message for message
//! with the live ids; its stderr lines and the exit are on the handle.

use std::future::{Future, poll_fn};
use std::path::Path;
use std::pin::pin;
use std::task::Poll;
use std::time::{Duration, Instant};

use childwire::{ChannelConfig, Exit, Received, Runtime, Transport};
use childwire_replay::{Event, Recording, Twin, twin};
use serde_json::Value;

/// Bound for a whole session; only a failure waits this long.
const LIMIT: Duration = Duration::from_secs(30);

/// `future` on runtime `R`, failing the test if it takes over [`LIMIT`].
async fn within<R: Runtime, F: Future>(future: F) -> F::Output {
    let runtime = R::current().expect("inside the runtime");
    let deadline = Instant::now() + LIMIT;
    let mut timer = runtime.timer(deadline);
    let mut future = pin!(future);
    poll_fn(|cx| {
        if let Poll::Ready(output) = future.as_mut().poll(cx) {
            return Poll::Ready(output);
        }
        if runtime.now() >= deadline || timer.as_mut().poll(cx).is_ready() {
            panic!("the session did not end within {LIMIT:?}");
        }
        Poll::Pending
    })
    .await
}

/// Sends `host`, closes the twin's stdin and reads everything up to its
/// EOF: the messages (non-JSON ones as JSON strings) and the handle.
async fn session<R: Runtime>(
    recording: Recording,
    host: Vec<String>,
    close: bool,
) -> (Vec<Value>, Twin) {
    let (stdout, stdin, twin) = twin(recording);
    let mut server = Transport::<R>::from_pipes(stdout, stdin, &ChannelConfig::default())
        .expect("inside the runtime");
    within::<R, _>(async {
        for message in &host {
            server.send(message.as_str()).await.expect("sent");
        }
        if close {
            server.close().await.expect("closed");
        }
        let mut messages = Vec::new();
        while let Some(item) = server.recv().await {
            match item {
                Received::Message(message) => messages.push(
                    serde_json::from_slice(&message)
                        .unwrap_or_else(|_| Value::from(String::from_utf8_lossy(&message))),
                ),
                // The banner's notice, when pollution detection is on.
                Received::Pollution(_) => {}
                other => panic!("unexpected {other:?}"),
            }
        }
        (messages, twin)
    })
    .await
}

fn on_every_runtime(
    recording: &Recording,
    host: &[String],
    close: bool,
) -> Vec<(&'static str, Vec<Value>, Twin)> {
    let (recording, host) = (recording.clone(), host.to_vec());
    let tokio =
        tokio::runtime::Runtime::new()
            .unwrap()
            .block_on(session::<childwire::tokio::Tokio>(
                recording.clone(),
                host.clone(),
                close,
            ));
    let smol = smol::block_on(session::<childwire::smol::Smol>(
        recording.clone(),
        host.clone(),
        close,
    ));
    let async_std = async_std::task::block_on(session::<childwire::async_std::AsyncStd>(
        recording, host, close,
    ));
    vec![
        ("tokio", tokio.0, tokio.1),
        ("smol", smol.0, smol.1),
        ("async-std", async_std.0, async_std.1),
    ]
}

#[test]
fn c40_the_example_server_recording_through_a_transport_on_every_runtime() {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/recordings/example_server.ndjson");
    let recording = Recording::parse(&std::fs::read_to_string(path).unwrap()).unwrap();
    // The host side with ids of its own, and the server side as the host
    // must see it.
    let mut host = Vec::new();
    let mut live_ids = Vec::new();
    for (n, message) in recording.to_child().enumerate() {
        let mut message: Value = serde_json::from_slice(message).unwrap();
        if message.get("id").is_some() {
            live_ids.push((message["id"].clone(), Value::from(format!("live-{n}"))));
            message["id"] = Value::from(format!("live-{n}"));
        }
        host.push(message.to_string());
    }
    let want: Vec<Value> = recording
        .from_child()
        .map(|message| {
            let mut message: Value = serde_json::from_slice(message).unwrap();
            let live = live_ids
                .iter()
                .find(|(id, _)| Some(id) == message.get("id"));
            if let Some((_, live)) = live {
                message["id"] = live.clone();
            }
            message
        })
        .collect();
    assert_eq!(want.len(), 4);
    let stderr: Vec<&str> = recording
        .events()
        .iter()
        .filter_map(|event| match event {
            Event::Stderr(line) => Some(line.as_str()),
            _ => None,
        })
        .collect();
    assert!(stderr.len() >= 2, "the server's log, recorded: {stderr:?}");
    for (runtime, messages, twin) in on_every_runtime(&recording, &host, true) {
        assert_eq!(messages, want, "{runtime}");
        assert_eq!(twin.stderr_lines(), stderr, "{runtime}");
        assert_eq!(
            twin.exit().map(|exit| exit.exit),
            Some(Exit::Code(0)),
            "{runtime}"
        );
        assert!(
            twin.unmatched().is_empty(),
            "{runtime}: {:?}",
            twin.unmatched()
        );
    }
}

#[test]
fn c40_a_server_that_crashed_ends_the_stream_where_it_did_with_its_stderr() {
    let recording: Recording = [
        r#"{"dir":"from_child","text":"Starting server on stdio"}"#,
        r#"{"dir":"stderr","line":"INFO ready"}"#,
        r#"{"dir":"to_child","msg":{"jsonrpc":"2.0","id":1,"method":"tools/call"}}"#,
        r#"{"dir":"stderr","line":"FATAL out of memory"}"#,
        r#"{"dir":"exit","exit_code":2,"signal":null,"report":"exited with code 2 on its own after 5 ms"}"#,
    ]
    .join("\n")
    .parse()
    .unwrap();
    let host = [r#"{"jsonrpc":"2.0","id":9,"method":"tools/call"}"#.to_owned()];
    // Stdin left open: the stream ends because the server exits.
    for (runtime, messages, twin) in on_every_runtime(&recording, &host, false) {
        assert_eq!(
            messages,
            [Value::from("Starting server on stdio")],
            "{runtime}"
        );
        assert_eq!(
            twin.stderr_lines(),
            ["INFO ready", "FATAL out of memory"],
            "{runtime}"
        );
        let exit = twin.exit().unwrap();
        assert_eq!(
            (exit.exit, exit.on_its_own()),
            (Exit::Code(2), true),
            "{runtime}"
        );
    }
}

/// A message recorded only by its size, 5 GiB of it: the twin makes the
/// filler as it is read instead of allocating it (which aborted the test
/// process).
#[test]
fn a_5_gib_oversized_record_is_streamed_not_allocated() {
    use childwire::PipeRead;
    use std::task::{Context, Waker};

    let huge = 5u64 << 30;
    let recording = Recording::from_events(vec![
        Event::OversizedFromChild(huge),
        Event::OversizedFromChild(6),
    ]);
    let (mut stdout, _stdin, _twin) = twin(recording);
    let mut cx = Context::from_waker(Waker::noop());
    let mut buf = vec![0; 64 * 1024];
    let Poll::Ready(Ok(read)) = stdout.poll_read(&mut cx, &mut buf) else {
        panic!("the filler is there at once")
    };
    assert_eq!(read, buf.len());
    assert_eq!(buf[0], b'"');
    assert!(buf[1..].iter().all(|&byte| byte == b'x'));

    // A small one, whole, after nothing else.
    let (mut stdout, _stdin, _twin) = twin(Recording::from_events(vec![
        Event::OversizedFromChild(6),
        Event::OversizedFromChild(1),
    ]));
    let mut all = Vec::new();
    for _ in 0..4 {
        let mut byte = [0; 3];
        if let Poll::Ready(Ok(read)) = stdout.poll_read(&mut cx, &mut byte) {
            all.extend_from_slice(&byte[..read]);
        }
    }
    assert_eq!(all, b"\"xxxx\"\n\"\"\n");
}

fn ping(id: u32) -> String {
    format!(r#"{{"jsonrpc":"2.0","id":{id},"method":"ping"}}"#)
}

/// A supervised server's recording: generation 1 crashed after its first
/// answer, generation 2 answered twice and was shut down.
fn two_generations() -> Recording {
    [
        r#"{"dir":"to_child","msg":{"jsonrpc":"2.0","id":1,"method":"ping"}}"#,
        r#"{"dir":"from_child","msg":{"jsonrpc":"2.0","id":1,"result":{"generation":1}}}"#,
        r#"{"dir":"stderr","line":"FATAL gone"}"#,
        r#"{"dir":"exit","exit_code":3,"signal":null,"report":"exited with code 3 on its own after 5 ms"}"#,
        r#"{"dir":"generation","generation":2}"#,
        r#"{"dir":"to_child","msg":{"jsonrpc":"2.0","id":2,"method":"ping"}}"#,
        r#"{"dir":"from_child","msg":{"jsonrpc":"2.0","id":2,"result":{"generation":2}}}"#,
        r#"{"dir":"to_child","msg":{"jsonrpc":"2.0","id":3,"method":"ping"}}"#,
        r#"{"dir":"from_child","msg":{"jsonrpc":"2.0","id":3,"result":{"generation":2,"again":true}}}"#,
        r#"{"dir":"exit","exit_code":0,"signal":null,"report":"exited with code 0 after stdin was closed, 1 ms after shutdown"}"#,
    ]
    .join("\n")
    .parse()
    .unwrap()
}

#[test]
fn a_two_generation_recording_replays_either_generation() {
    let recording = two_generations();
    assert_eq!(recording.generations(), 2);

    let first = recording.generation(1).unwrap();
    for (runtime, messages, twin) in on_every_runtime(&first, &[ping(10)], false) {
        assert_eq!(
            messages,
            [serde_json::json!({"jsonrpc":"2.0","id":10,"result":{"generation":1}})],
            "{runtime}"
        );
        assert_eq!(twin.stderr_lines(), ["FATAL gone"], "{runtime}");
        assert_eq!(
            twin.exit().map(|e| e.exit),
            Some(Exit::Code(3)),
            "{runtime}"
        );
        assert!(twin.notes().is_empty(), "{runtime}: {:?}", twin.notes());
    }

    let second = recording.generation(2).unwrap();
    for (runtime, messages, twin) in on_every_runtime(&second, &[ping(20), ping(21)], true) {
        assert_eq!(
            messages,
            [
                serde_json::json!({"jsonrpc":"2.0","id":20,"result":{"generation":2}}),
                serde_json::json!({"jsonrpc":"2.0","id":21,"result":{"generation":2,"again":true}}),
            ],
            "{runtime}"
        );
        assert!(twin.stderr_lines().is_empty(), "{runtime}");
        assert_eq!(
            twin.exit().map(|e| e.exit),
            Some(Exit::Code(0)),
            "{runtime}"
        );
    }

    // The whole file: the first generation, and a note that says so.
    for (runtime, messages, twin) in on_every_runtime(&recording, &[ping(30)], false) {
        assert_eq!(messages.len(), 1, "{runtime}");
        assert_eq!(messages[0]["result"]["generation"], 1, "{runtime}");
        let notes: Vec<String> = twin.notes().iter().map(ToString::to_string).collect();
        assert_eq!(
            notes,
            ["the recording holds 2 generations (a restarted child): replaying the first"],
            "{runtime}"
        );
    }
}

/// Recorded: `get-sum`, then `echo`; the host calls them the other way
/// round and gets each tool's own answer.
#[test]
fn tools_called_in_the_other_order_replay_by_name_on_every_runtime() {
    let recording: Recording = [
        r#"{"dir":"to_child","msg":{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"get-sum","arguments":{"a":1,"b":2}}}}"#,
        r#"{"dir":"from_child","msg":{"jsonrpc":"2.0","id":1,"result":{"content":[{"type":"text","text":"3"}]}}}"#,
        r#"{"dir":"to_child","msg":{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"echo","arguments":{"message":"hi"}}}}"#,
        r#"{"dir":"from_child","msg":{"jsonrpc":"2.0","id":2,"result":{"content":[{"type":"text","text":"Echo: hi"}]}}}"#,
    ]
    .join("\n")
    .parse()
    .unwrap();
    let host = [
        r#"{"jsonrpc":"2.0","id":"e","method":"tools/call","params":{"name":"echo","arguments":{"message":"hi"}}}"#.to_owned(),
        r#"{"jsonrpc":"2.0","id":"s","method":"tools/call","params":{"name":"get-sum","arguments":{"a":1,"b":2}}}"#.to_owned(),
    ];
    for (runtime, messages, twin) in on_every_runtime(&recording, &host, true) {
        assert_eq!(
            messages,
            [
                serde_json::json!({"jsonrpc":"2.0","id":"e","result":{"content":[{"type":"text","text":"Echo: hi"}]}}),
                serde_json::json!({"jsonrpc":"2.0","id":"s","result":{"content":[{"type":"text","text":"3"}]}}),
            ],
            "{runtime}"
        );
        assert!(twin.notes().is_empty(), "{runtime}: {:?}", twin.notes());
    }
}
