//! The committed recordings, replayed by the engine alone (no process): fed
//! its own host side with other ids, each answers with exactly its server
//! side (messages and stderr lines, in their order), the live ids in the
//! responses, then exits the recorded way.
//!
//! The same files are replayed through a real transport on every runtime
//! by `childwire replay` (crates/childwire-cli/tests/replay.rs). How they
//! were made is in `recordings/README.md`.

use std::path::Path;

use childwire_replay::{Event, Output, Recording, Replayer};
use serde_json::Value;

/// What the replayed server said: a message (as JSON) or a stderr line.
#[derive(Debug, PartialEq)]
enum Seen {
    Message(Value),
    Stderr(String),
}

fn replays_itself(name: &str) {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/recordings")
        .join(name);
    let recording = Recording::parse(&std::fs::read_to_string(path).unwrap()).unwrap();
    let mut server = Replayer::new(recording.clone());
    let mut outputs = Vec::new();
    let mut live_ids = Vec::new();
    for (n, message) in recording.to_child().enumerate() {
        let mut message: Value = serde_json::from_slice(message).unwrap();
        if message.get("method").is_some() && message.get("id").is_some() {
            live_ids.push((message["id"].clone(), Value::from(format!("live-{n}"))));
            message["id"] = Value::from(format!("live-{n}"));
        }
        server.handle_message(message.to_string().as_bytes());
        outputs.extend(std::iter::from_fn(|| server.poll_output()));
    }
    server.handle_eof();
    outputs.extend(std::iter::from_fn(|| server.poll_output()));

    // The server's side as recorded, messages and stderr lines in their
    // order, each response with the live id of the request it answers.
    let expected: Vec<Seen> = recording
        .events()
        .iter()
        .filter_map(|event| match event {
            Event::FromChild(message) => {
                let mut message: Value = serde_json::from_slice(message).unwrap();
                if message.get("method").is_none() {
                    if let Some((_, live)) = live_ids
                        .iter()
                        .find(|(id, _)| Some(id) == message.get("id"))
                    {
                        message["id"] = live.clone();
                    }
                }
                Some(Seen::Message(message))
            }
            Event::Stderr(line) => Some(Seen::Stderr(line.clone())),
            _ => None,
        })
        .collect();
    let Some(Output::Exit(exit)) = outputs.pop() else {
        panic!("{name}: no exit last: {outputs:?}")
    };
    assert_eq!(Some(&exit), recording.exit(), "{name}");
    let seen: Vec<Seen> = outputs
        .iter()
        .map(|output| match output {
            Output::Message(message) => Seen::Message(serde_json::from_slice(message).unwrap()),
            Output::Stderr(line) => Seen::Stderr(line.clone()),
            other => panic!("{name}: {other:?}"),
        })
        .collect();
    assert_eq!(seen, expected, "{name}");
    assert!(
        seen.iter().any(|seen| matches!(seen, Seen::Stderr(_))),
        "{name}: recorded by the tap, with the server's stderr: {seen:?}"
    );
    assert!(live_ids.len() >= 4, "{name}: a whole session: {live_ids:?}");
    assert!(
        server.unmatched().is_empty(),
        "{name}: {:?}",
        server.unmatched()
    );
}

#[test]
fn c40_the_example_server_recording_replays_itself() {
    replays_itself("example_server.ndjson");
}

#[test]
fn c40_the_server_everything_recording_replays_itself() {
    replays_itself("server_everything.ndjson");
}
