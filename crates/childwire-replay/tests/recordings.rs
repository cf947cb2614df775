//! The committed recordings, replayed by the engine alone (no process): fed
//! its own host side with other ids, each answers with exactly its server
//! side, the live ids in the responses, then exits the recorded way.
//!
//! The same files are replayed through a real transport on every runtime
//! by `childwire replay` (crates/childwire-cli/tests/replay.rs). How they
//! were made is in `recordings/README.md`.

use std::path::Path;

use childwire_replay::{Output, Recording, Replayer};
use serde_json::Value;

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

    let mut expected: Vec<Value> = recording
        .from_child()
        .map(|message| serde_json::from_slice(message).unwrap())
        .collect();
    for message in &mut expected {
        if message.get("method").is_none() {
            if let Some((_, live)) = live_ids
                .iter()
                .find(|(id, _)| Some(id) == message.get("id"))
            {
                message["id"] = live.clone();
            }
        }
    }
    let Some(Output::Exit(exit)) = outputs.pop() else {
        panic!("{name}: no exit last: {outputs:?}")
    };
    assert_eq!(Some(&exit), recording.exit(), "{name}");
    let messages: Vec<Value> = outputs
        .iter()
        .map(|output| match output {
            Output::Message(message) => serde_json::from_slice(message).unwrap(),
            other => panic!("{name}: {other:?}"),
        })
        .collect();
    assert_eq!(messages, expected, "{name}");
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
