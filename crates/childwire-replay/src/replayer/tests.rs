use childwire_core::Exit;
use proptest::prelude::*;
use serde_json::{Value, json};

use super::*;

fn replayer(lines: &[&str]) -> Replayer {
    Replayer::new(Recording::parse(&lines.join("\n")).unwrap())
}

fn drain(replayer: &mut Replayer) -> Vec<Output> {
    std::iter::from_fn(|| replayer.poll_output()).collect()
}

fn message(text: &str) -> Output {
    Output::Message(text.as_bytes().to_vec())
}

const AFTER_STDIN_CLOSED: &str = r#"{"dir":"exit","exit_code":0,"report":"exited with code 0 after stdin was closed, 1 ms after shutdown"}"#;

#[test]
fn the_opening_comes_before_anything_is_asked() {
    let mut server = replayer(&[
        r#"{"dir":"stderr","line":"INFO starting"}"#,
        r#"{"dir":"from_child","text":"Starting server on stdio"}"#,
        r#"{"dir":"from_child","msg":{"jsonrpc":"2.0","method":"notifications/message"}}"#,
        r#"{"dir":"to_child","msg":{"jsonrpc":"2.0","id":1,"method":"ping"}}"#,
        r#"{"dir":"from_child","msg":{"jsonrpc":"2.0","id":1,"result":{}}}"#,
        AFTER_STDIN_CLOSED,
    ]);
    assert_eq!(
        drain(&mut server),
        [
            Output::Stderr("INFO starting".into()),
            message("Starting server on stdio"),
            message(r#"{"jsonrpc":"2.0","method":"notifications/message"}"#),
        ]
    );
    server.handle_message(br#"{"jsonrpc":"2.0","id":9,"method":"ping"}"#);
    assert_eq!(
        drain(&mut server),
        [message(r#"{"jsonrpc":"2.0","id":9,"result":{}}"#)]
    );
    assert!(!server.is_exited());
    server.handle_eof();
    let [Output::Exit(exit)] = &drain(&mut server)[..] else {
        panic!("no exit")
    };
    assert_eq!(exit.exit, Exit::Code(0));
    assert!(server.is_exited());
    assert!(server.unmatched().is_empty());
}

#[test]
fn requests_match_by_method_and_occurrence_whatever_their_ids() {
    let mut server = replayer(&[
        r#"{"dir":"to_child","msg":{"jsonrpc":"2.0","id":"a","method":"tools/call","params":{"n":1}}}"#,
        r#"{"dir":"from_child","msg":{"result":{"id":"nested","n":1},"jsonrpc":"2.0","id":"a"}}"#,
        r#"{"dir":"to_child","msg":{"jsonrpc":"2.0","id":2,"method":"ping"}}"#,
        r#"{"dir":"from_child","msg":{"jsonrpc":"2.0","id":2,"result":{}}}"#,
        r#"{"dir":"to_child","msg":{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"n":2}}}"#,
        r#"{"dir":"from_child","msg":{"result":{"id":"nested","n":2},"jsonrpc":"2.0", "id" : 3 }}"#,
    ]);
    server.handle_message(br#"{"jsonrpc":"2.0","id":100,"method":"tools/call","params":{}}"#);
    server.handle_message(br#"{"jsonrpc":"2.0","id":"x-1","method":"tools/call"}"#);
    server.handle_message(br#"{"jsonrpc":"2.0","id":null,"method":"ping"}"#);
    assert_eq!(
        drain(&mut server),
        [
            message(r#"{"result":{"id":"nested","n":1},"jsonrpc":"2.0","id":100}"#),
            message(r#"{"result":{"id":"nested","n":2},"jsonrpc":"2.0", "id" : "x-1" }"#),
            message(r#"{"jsonrpc":"2.0","id":null,"result":{}}"#),
        ]
    );
}

#[test]
fn a_request_missing_from_the_recording_gets_an_error_naming_it() {
    let mut server = replayer(&[
        r#"{"dir":"to_child","msg":{"jsonrpc":"2.0","id":1,"method":"tools/list"}}"#,
        r#"{"dir":"from_child","msg":{"jsonrpc":"2.0","id":1,"result":{"tools":[]}}}"#,
    ]);
    server.handle_message(br#"{"jsonrpc":"2.0","id":1,"method":"tools/list"}"#);
    server.handle_message(br#"{"jsonrpc":"2.0","id":"second","method":"tools/list"}"#);
    server.handle_message(br#"{"jsonrpc":"2.0","method":"notifications/cancelled"}"#);
    server.handle_message(b"not json");
    let outputs = drain(&mut server);
    assert_eq!(outputs.len(), 2, "{outputs:?}");
    let Output::Message(error) = &outputs[1] else {
        panic!("{outputs:?}")
    };
    let error: Value = serde_json::from_slice(error).unwrap();
    assert_eq!(error["id"], "second");
    assert_eq!(error["error"]["code"], NOT_IN_RECORDING);
    assert_eq!(
        error["error"]["message"],
        "replay: `tools/list` request #2 is not in the recording (it has 1)"
    );
    assert_eq!(
        error["error"]["data"],
        json!({"method": "tools/list", "occurrence": 2, "recorded": 1})
    );
    let unmatched: Vec<&str> = server
        .unmatched()
        .iter()
        .map(|unmatched| unmatched.what.as_str())
        .collect();
    assert_eq!(
        unmatched,
        [
            "`tools/list` #2",
            "`notifications/cancelled` #1",
            "a message that is not JSON-RPC, `not json` (#1)"
        ]
    );
}

#[test]
fn a_response_waits_for_its_request_when_the_host_sends_out_of_order() {
    // Recorded: a slow call, then a ping; both answers came after the ping.
    let mut server = replayer(&[
        r#"{"dir":"to_child","msg":{"jsonrpc":"2.0","id":1,"method":"tools/call"}}"#,
        r#"{"dir":"to_child","msg":{"jsonrpc":"2.0","id":2,"method":"ping"}}"#,
        r#"{"dir":"from_child","msg":{"jsonrpc":"2.0","id":2,"result":{}}}"#,
        r#"{"dir":"from_child","msg":{"jsonrpc":"2.0","id":1,"result":{"slow":true}}}"#,
    ]);
    server.handle_message(br#"{"jsonrpc":"2.0","id":"p","method":"ping"}"#);
    assert_eq!(
        drain(&mut server),
        [message(r#"{"jsonrpc":"2.0","id":"p","result":{}}"#)]
    );
    server.handle_message(br#"{"jsonrpc":"2.0","id":"c","method":"tools/call"}"#);
    assert_eq!(
        drain(&mut server),
        [message(
            r#"{"jsonrpc":"2.0","id":"c","result":{"slow":true}}"#
        )]
    );
}

#[test]
fn a_server_request_is_answered_by_id_and_the_session_goes_on() {
    let mut server = replayer(&[
        r#"{"dir":"to_child","msg":{"jsonrpc":"2.0","id":1,"method":"tools/call"}}"#,
        r#"{"dir":"from_child","msg":{"jsonrpc":"2.0","id":"s-1","method":"sampling/createMessage"}}"#,
        r#"{"dir":"to_child","msg":{"jsonrpc":"2.0","id":"s-1","result":{"text":"hi"}}}"#,
        r#"{"dir":"from_child","msg":{"jsonrpc":"2.0","id":1,"result":{"sampled":"hi"}}}"#,
    ]);
    server.handle_message(br#"{"jsonrpc":"2.0","id":7,"method":"tools/call"}"#);
    assert_eq!(
        drain(&mut server),
        [message(
            r#"{"jsonrpc":"2.0","id":"s-1","method":"sampling/createMessage"}"#
        )]
    );
    // Another answer than recorded: matched by the id it answers.
    server.handle_message(br#"{"jsonrpc":"2.0","id":"s-1","result":{"text":"other"}}"#);
    assert_eq!(
        drain(&mut server),
        [message(
            r#"{"jsonrpc":"2.0","id":7,"result":{"sampled":"hi"}}"#
        )]
    );
}

#[test]
fn progress_notifications_carry_the_live_requests_token() {
    let mut server = replayer(&[
        r#"{"dir":"to_child","msg":{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"slow","_meta":{"progressToken":"rec-1"}}}}"#,
        r#"{"dir":"from_child","msg":{"jsonrpc":"2.0","method":"notifications/progress","params":{"progressToken":"rec-1","progress":1}}}"#,
        r#"{"dir":"from_child","msg":{"jsonrpc":"2.0","method":"notifications/progress","params":{"progressToken":"other","progress":1}}}"#,
        r#"{"dir":"from_child","msg":{"jsonrpc":"2.0","id":1,"result":{}}}"#,
    ]);
    server.handle_message(
        br#"{"jsonrpc":"2.0","id":5,"method":"tools/call","params":{"_meta":{"progressToken":42},"name":"slow"}}"#,
    );
    assert_eq!(
        drain(&mut server),
        [
            message(
                r#"{"jsonrpc":"2.0","method":"notifications/progress","params":{"progressToken":42,"progress":1}}"#
            ),
            message(
                r#"{"jsonrpc":"2.0","method":"notifications/progress","params":{"progressToken":"other","progress":1}}"#
            ),
            message(r#"{"jsonrpc":"2.0","id":5,"result":{}}"#),
        ]
    );
}

#[test]
fn a_server_that_exited_on_its_own_exits_where_it_did() {
    let mut server = replayer(&[
        r#"{"dir":"to_child","msg":{"jsonrpc":"2.0","id":1,"method":"tools/call"}}"#,
        r#"{"dir":"from_child","oversized":20000000}"#,
        r#"{"dir":"stderr","line":"panicked at src/main.rs:3"}"#,
        r#"{"dir":"exit","exit_code":null,"signal":6,"report":"killed by SIGABRT on its own after 4 ms"}"#,
    ]);
    assert_eq!(drain(&mut server), []);
    server.handle_message(br#"{"jsonrpc":"2.0","id":1,"method":"tools/call"}"#);
    let outputs = drain(&mut server);
    assert_eq!(
        outputs[..2],
        [
            Output::Oversized(20_000_000),
            Output::Stderr("panicked at src/main.rs:3".into())
        ]
    );
    let Output::Exit(exit) = &outputs[2] else {
        panic!("{outputs:?}")
    };
    assert_eq!((exit.exit, exit.shell_code()), (Exit::Signal(6), 134));
    assert!(server.is_exited());
    // Nothing after the exit, not even an error.
    server.handle_message(br#"{"jsonrpc":"2.0","id":2,"method":"ping"}"#);
    server.handle_eof();
    assert_eq!(drain(&mut server), []);
}

#[test]
fn a_recording_without_an_exit_exits_with_code_0_at_eof() {
    let mut server =
        replayer(&[r#"{"dir":"to_child","msg":{"jsonrpc":"2.0","id":1,"method":"ping"}}"#]);
    server.handle_eof();
    assert_eq!(drain(&mut server), [Output::Exit(RecordedExit::default())]);
}

fn notes(replayer: &mut Replayer) -> Vec<String> {
    std::iter::from_fn(|| replayer.poll_note())
        .map(|note| note.to_string())
        .collect()
}

/// Recorded: `get-sum` then `echo`; the host calls `echo` first.
#[test]
fn tools_called_in_another_order_are_answered_by_name() {
    let mut server = replayer(&[
        r#"{"dir":"to_child","msg":{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"get-sum","arguments":{"a":1,"b":2}}}}"#,
        r#"{"dir":"from_child","msg":{"jsonrpc":"2.0","id":1,"result":{"content":[{"type":"text","text":"3"}]}}}"#,
        r#"{"dir":"to_child","msg":{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"echo","arguments":{"message":"hi"}}}}"#,
        r#"{"dir":"from_child","msg":{"jsonrpc":"2.0","id":2,"result":{"content":[{"type":"text","text":"Echo: hi"}]}}}"#,
        r#"{"dir":"to_child","msg":{"jsonrpc":"2.0","id":3,"method":"resources/read","params":{"uri":"file:///a"}}}"#,
        r#"{"dir":"from_child","msg":{"jsonrpc":"2.0","id":3,"result":{"contents":["a"]}}}"#,
        r#"{"dir":"to_child","msg":{"jsonrpc":"2.0","id":4,"method":"resources/read","params":{"uri":"file:///b"}}}"#,
        r#"{"dir":"from_child","msg":{"jsonrpc":"2.0","id":4,"result":{"contents":["b"]}}}"#,
        r#"{"dir":"to_child","msg":{"jsonrpc":"2.0","id":5,"method":"prompts/get","params":{"name":"p1"}}}"#,
        r#"{"dir":"from_child","msg":{"jsonrpc":"2.0","id":5,"result":{"p":1}}}"#,
        r#"{"dir":"to_child","msg":{"jsonrpc":"2.0","id":6,"method":"prompts/get","params":{"name":"p2"}}}"#,
        r#"{"dir":"from_child","msg":{"jsonrpc":"2.0","id":6,"result":{"p":2}}}"#,
    ]);
    server.handle_message(
        br#"{"jsonrpc":"2.0","id":"e","method":"tools/call","params":{"arguments":{"message":"yo"},"name":"echo"}}"#,
    );
    server.handle_message(
        br#"{"jsonrpc":"2.0","id":"s","method":"tools/call","params":{"name":"get-sum"}}"#,
    );
    server.handle_message(
        br#"{"jsonrpc":"2.0","id":"b","method":"resources/read","params":{"uri":"file:///b"}}"#,
    );
    server.handle_message(
        br#"{"jsonrpc":"2.0","id":"a","method":"resources/read","params":{"uri":"file:///a"}}"#,
    );
    server.handle_message(
        br#"{"jsonrpc":"2.0","id":"p2","method":"prompts/get","params":{"name":"p2"}}"#,
    );
    server.handle_message(
        br#"{"jsonrpc":"2.0","id":"p1","method":"prompts/get","params":{"name":"p1"}}"#,
    );
    assert_eq!(
        drain(&mut server),
        [
            message(
                r#"{"jsonrpc":"2.0","id":"e","result":{"content":[{"type":"text","text":"Echo: hi"}]}}"#
            ),
            message(
                r#"{"jsonrpc":"2.0","id":"s","result":{"content":[{"type":"text","text":"3"}]}}"#
            ),
            message(r#"{"jsonrpc":"2.0","id":"b","result":{"contents":["b"]}}"#),
            message(r#"{"jsonrpc":"2.0","id":"a","result":{"contents":["a"]}}"#),
            message(r#"{"jsonrpc":"2.0","id":"p2","result":{"p":2}}"#),
            message(r#"{"jsonrpc":"2.0","id":"p1","result":{"p":1}}"#),
        ]
    );
    assert_eq!(notes(&mut server), Vec::<String>::new());
    assert!(server.unmatched().is_empty());
}

#[test]
fn a_tool_not_in_the_recording_is_answered_by_rank_and_a_note_says_so() {
    let mut server = replayer(&[
        r#"{"dir":"to_child","msg":{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"get-sum"}}}"#,
        r#"{"dir":"from_child","msg":{"jsonrpc":"2.0","id":1,"result":{"sum":3}}}"#,
        r#"{"dir":"to_child","msg":{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"echo"}}}"#,
        r#"{"dir":"from_child","msg":{"jsonrpc":"2.0","id":2,"result":{"echo":"hi"}}}"#,
    ]);
    server.handle_message(
        br#"{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"other"}}"#,
    );
    assert_eq!(
        drain(&mut server),
        [message(r#"{"jsonrpc":"2.0","id":7,"result":{"sum":3}}"#)]
    );
    assert_eq!(
        notes(&mut server),
        [
            r#"`tools/call` #1 of "other" is not in the recording by name: answered as `tools/call` #1 of "get-sum", by rank"#
        ]
    );
    server.handle_message(
        br#"{"jsonrpc":"2.0","id":8,"method":"tools/call","params":{"name":"echo"}}"#,
    );
    server.handle_message(
        br#"{"jsonrpc":"2.0","id":9,"method":"tools/call","params":{"name":"echo"}}"#,
    );
    let outputs = drain(&mut server);
    assert_eq!(
        outputs[0],
        message(r#"{"jsonrpc":"2.0","id":8,"result":{"echo":"hi"}}"#)
    );
    let Output::Message(error) = &outputs[1] else {
        panic!("{outputs:?}")
    };
    let error: Value = serde_json::from_slice(error).unwrap();
    assert_eq!(
        error["error"]["message"],
        "replay: `tools/call` request #3 is not in the recording (it has 2)"
    );
    assert_eq!(
        notes(&mut server),
        ["not in the recording: `tools/call` #3"]
    );
}

#[test]
fn endless_unmatched_messages_cost_a_count_not_memory() {
    let mut server = replayer(&[]);
    let long = format!(
        r#"{{"jsonrpc":"2.0","method":"x","params":"{}"}}"#,
        "y".repeat(10_000)
    );
    for _ in 0..5000 {
        server.handle_message(long.as_bytes());
    }
    assert_eq!(server.unmatched().len(), MAX_KEPT);
    assert!(
        server
            .unmatched()
            .iter()
            .all(|unmatched| unmatched.message.len() <= KEPT_BYTES)
    );
    let notes: Vec<Note> = std::iter::from_fn(|| server.poll_note()).collect();
    assert_eq!(notes.len(), MAX_KEPT + 1);
    assert_eq!(notes[MAX_KEPT], Note::LeftOut(5000 - MAX_KEPT as u64));
    assert_eq!(server.poll_note(), None);
}

#[test]
fn a_recording_of_several_generations_replays_the_first_and_says_so() {
    let text = [
        r#"{"dir":"to_child","msg":{"jsonrpc":"2.0","id":1,"method":"ping"}}"#,
        r#"{"dir":"from_child","msg":{"jsonrpc":"2.0","id":1,"result":{"gen":1}}}"#,
        r#"{"dir":"exit","exit_code":1,"report":"exited with code 1 on its own after 3 ms"}"#,
        r#"{"dir":"generation","generation":2}"#,
        r#"{"dir":"to_child","msg":{"jsonrpc":"2.0","id":1,"method":"ping"}}"#,
        r#"{"dir":"from_child","msg":{"jsonrpc":"2.0","id":1,"result":{"gen":2}}}"#,
        r#"{"dir":"notice","kind":"dropped","records":2,"text":"2 records dropped"}"#,
        AFTER_STDIN_CLOSED,
    ]
    .join("\n");
    let recording = Recording::parse(&text).unwrap();
    let mut first = Replayer::new(recording.clone());
    assert_eq!(
        notes(&mut first),
        ["the recording holds 2 generations (a restarted child): replaying the first"]
    );
    first.handle_message(br#"{"jsonrpc":"2.0","id":"x","method":"ping"}"#);
    let outputs = drain(&mut first);
    assert_eq!(
        outputs[0],
        message(r#"{"jsonrpc":"2.0","id":"x","result":{"gen":1}}"#)
    );
    assert!(matches!(&outputs[1], Output::Exit(exit) if exit.exit == Exit::Code(1)));

    let mut second = Replayer::new(recording.generation(2).unwrap());
    assert_eq!(
        notes(&mut second),
        [
            "the recorder dropped 2 records (its writer fell behind): the replay may lack some of what happened"
        ]
    );
    second.handle_message(br#"{"jsonrpc":"2.0","id":"y","method":"ping"}"#);
    second.handle_eof();
    let outputs = drain(&mut second);
    assert_eq!(
        outputs[0],
        message(r#"{"jsonrpc":"2.0","id":"y","result":{"gen":2}}"#)
    );
    assert!(matches!(&outputs[1], Output::Exit(exit) if exit.exit == Exit::Code(0)));
}

/// One step of a generated session.
#[derive(Debug, Clone)]
enum Step {
    /// The host sends a request of method `methods[n % len]`, with a
    /// number id or a string id.
    Request(usize, bool),
    Notification(usize),
    /// The server answers one of the open requests (or, with none open,
    /// sends a notification).
    Answer(usize),
    ServerNotification,
    ServerRequest,
    /// The host answers the oldest open server request.
    HostAnswer,
    Stderr(String),
    Banner(String),
}

const METHODS: [&str; 3] = ["tools/call", "ping", "tools/list"];

fn step() -> impl Strategy<Value = Step> {
    prop_oneof![
        (0..3usize, any::<bool>()).prop_map(|(method, string)| Step::Request(method, string)),
        (0..3usize).prop_map(Step::Notification),
        any::<usize>().prop_map(Step::Answer),
        any::<usize>().prop_map(Step::Answer),
        Just(Step::ServerNotification),
        Just(Step::ServerRequest),
        Just(Step::HostAnswer),
        "[ -~\u{e9}\u{1F600}]{0,12}".prop_map(Step::Stderr),
        "[A-Za-z ]{0,12}".prop_map(|text| Step::Banner(format!("banner: {text}"))),
    ]
}

/// A generated session: the recording's text, what the live host sends,
/// and what the replay must answer.
#[derive(Debug, Default)]
struct Session {
    records: Vec<String>,
    live: Vec<Vec<u8>>,
    /// For each live message (index 0 is the opening, before any), the
    /// outputs expected right after it.
    expected: Vec<Vec<Output>>,
}

impl Session {
    fn record(&mut self, dir: &str, field: &str, value: &str) {
        let t = self.records.len() as f64 / 1000.0;
        self.records.push(format!(
            r#"{{"t":{t:.6},"ts":"2026-11-25T09:30:00.000100Z","dir":"{dir}","{field}":{value}}}"#
        ));
    }

    fn host(&mut self, recorded: &str, live: String) {
        self.record("to_child", "msg", recorded);
        self.live.push(live.into_bytes());
        self.expected.push(Vec::new());
    }

    fn server(&mut self, recorded: &str, expected: Output) {
        self.record("from_child", "msg", recorded);
        self.expected.last_mut().unwrap().push(expected);
    }

    fn build(steps: &[Step], spaced: bool, code: i32, on_its_own: bool) -> Self {
        let mut session = Session {
            expected: vec![Vec::new()],
            ..Session::default()
        };
        let sp = if spaced { " " } else { "" };
        // (recorded id, live id) of each request the server has not answered.
        let mut open: Vec<(String, String)> = Vec::new();
        let mut server_open: Vec<String> = Vec::new();
        for (n, step) in steps.iter().enumerate() {
            match step {
                Step::Request(method, string) => {
                    let method = METHODS[*method];
                    let (recorded, live) = if *string {
                        (format!(r#""r-{n}""#), format!("{}", n + 500))
                    } else {
                        (format!("{n}"), format!(r#""live-{n}""#))
                    };
                    session.host(
                        &format!(r#"{{"jsonrpc":"2.0",{sp}"id":{recorded},"method":"{method}"}}"#),
                        format!(r#"{{"method":"{method}","id":{live},"jsonrpc":"2.0"}}"#),
                    );
                    open.push((recorded, live));
                }
                Step::Notification(method) => {
                    let text = format!(
                        r#"{{"jsonrpc":"2.0","method":"notifications/{}"}}"#,
                        METHODS[*method]
                    );
                    session.host(&text, text.clone());
                }
                Step::Answer(pick) if !open.is_empty() => {
                    let (recorded, live) = open.remove(pick % open.len());
                    let body = |id: &str| {
                        format!(
                            r#"{{"result":{{"id":"inner","n":{n}}},{sp}"jsonrpc":"2.0","id":{sp}{id}}}"#
                        )
                    };
                    session.server(&body(&recorded), Output::Message(body(&live).into_bytes()));
                }
                Step::Answer(_) | Step::ServerNotification => {
                    let text = format!(
                        r#"{{"jsonrpc":"2.0","method":"notifications/progress","params":{{"n":{n}}}}}"#
                    );
                    session.server(&text, Output::Message(text.clone().into_bytes()));
                }
                Step::ServerRequest => {
                    let text = format!(r#"{{"jsonrpc":"2.0","id":"s-{n}","method":"roots/list"}}"#);
                    session.server(&text, Output::Message(text.clone().into_bytes()));
                    server_open.push(format!(r#""s-{n}""#));
                }
                Step::HostAnswer if !server_open.is_empty() => {
                    let id = server_open.remove(0);
                    let text = format!(r#"{{"jsonrpc":"2.0","id":{id},"result":{{"roots":[]}}}}"#);
                    session.host(&text, text.clone());
                }
                Step::HostAnswer => {}
                Step::Stderr(line) => {
                    session.record("stderr", "line", &json!(line).to_string());
                    session
                        .expected
                        .last_mut()
                        .unwrap()
                        .push(Output::Stderr(line.clone()));
                }
                Step::Banner(text) => {
                    session.record("from_child", "text", &json!(text).to_string());
                    session
                        .expected
                        .last_mut()
                        .unwrap()
                        .push(Output::Message(text.clone().into_bytes()));
                }
            }
        }
        let how = if on_its_own {
            "on its own after 3 ms"
        } else {
            "after stdin was closed, 2 ms after shutdown"
        };
        session.records.push(format!(
            r#"{{"dir":"exit","exit_code":{code},"signal":null,"report":"exited with code {code} {how}"}}"#
        ));
        session
    }
}

proptest! {
    /// Any recording, fed its own host side (with other ids), answers with
    /// exactly its server side, each response carrying the live id, in the
    /// recorded order, and exits the recorded way.
    #[test]
    fn c40_a_recording_replays_its_own_server_side(
        steps in prop::collection::vec(step(), 0..40),
        spaced in any::<bool>(),
        code in 0..256i32,
        on_its_own in any::<bool>(),
    ) {
        let session = Session::build(&steps, spaced, code, on_its_own);
        let recording = Recording::parse(&session.records.join("\n")).unwrap();
        let mut server = Replayer::new(recording);
        let exit = Output::Exit(RecordedExit {
            exit: Exit::Code(code),
            report: None,
        });
        let last = session.live.len();
        for (index, expected) in session.expected.iter().enumerate() {
            if index > 0 {
                server.handle_message(&session.live[index - 1]);
            }
            let mut outputs = drain(&mut server);
            if on_its_own && index == last {
                // The exit, right after the last answer.
                let Some(Output::Exit(got)) = outputs.pop() else {
                    panic!("no exit after the last answer: {outputs:?}")
                };
                prop_assert_eq!(got.exit, Exit::Code(code));
            }
            prop_assert_eq!(&outputs, expected, "after live message {}", index);
        }
        prop_assert!(server.unmatched().is_empty(), "{:?}", server.unmatched());
        server.handle_eof();
        let outputs = drain(&mut server);
        if on_its_own {
            prop_assert_eq!(outputs, []);
        } else {
            let [Output::Exit(got)] = &outputs[..] else {
                panic!("no exit at EOF: {outputs:?}")
            };
            prop_assert_eq!(Output::Exit(RecordedExit { report: None, ..got.clone() }), exit);
        }
    }
}
