//! The in-flight request tracker: which outgoing messages are requests,
//! which incoming ones answer them, and the error responses for the ones a
//! dead child never answered.

use bytes::Bytes;
use childwire_core::Exit;
use childwire_core::pending::{
    EndCause, Outgoing, OversizedAction, PendingRequests, UNANSWERED_ERROR_CODE,
};
use childwire_core::{Frame, LineDecoder, Oversized};
use serde_json::{Value, json};

fn exited(code: i32) -> EndCause<'static> {
    EndCause {
        exit: Some(Exit::Code(code)),
        stderr: None,
        restarting: false,
    }
}

fn ids(pending: &mut PendingRequests, cause: &EndCause<'_>) -> Vec<String> {
    pending
        .fail_all(cause)
        .ids()
        .map(|id| String::from_utf8(id.to_vec()).unwrap())
        .collect()
}

#[test]
fn c37_requests_are_tracked_and_notifications_and_responses_are_not() {
    let mut pending = PendingRequests::default();
    assert_eq!(
        pending.handle_outgoing(br#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{}}"#),
        Outgoing::Tracked
    );
    assert_eq!(
        pending.handle_outgoing(
            br#"{"jsonrpc":"2.0","method":"notifications/progress","params":{"id":2}}"#
        ),
        Outgoing::Notification
    );
    assert_eq!(
        pending.handle_outgoing(br#"{"jsonrpc":"2.0","id":"s1","result":{"method":"x"}}"#),
        Outgoing::Response,
        "the answer to the child's own request"
    );
    assert_eq!(pending.len(), 1);
    assert_eq!(pending.untracked(), 0);
}

#[test]
fn c37_ids_that_are_strings_numbers_and_escaped_strings_are_matched_as_json_values() {
    let mut pending = PendingRequests::default();
    for id in [
        r#"7"#,
        r#"-3"#,
        r#""req-1""#,
        r#""caf\u00e9""#,
        r#""a\"b""#,
        r#""😀""#,
    ] {
        let message = format!(r#"{{"jsonrpc":"2.0","method":"m","id":{id}}}"#);
        assert_eq!(
            pending.handle_outgoing(message.as_bytes()),
            Outgoing::Tracked,
            "{id}"
        );
    }
    assert_eq!(pending.len(), 6);
    // The answers spell some ids differently, as JSON allows, and put the
    // id anywhere in the object.
    for (answer, sent) in [
        (r#""req\u002d1""#, r#""req-1""#),
        (r#""café""#, r#""caf\u00e9""#),
        (r#""a\u0022b""#, r#""a\"b""#),
        (r#""\ud83d\ude00""#, r#""😀""#),
        (r#"-3"#, r#"-3"#),
    ] {
        let response = format!(r#"{{"result":{{"id":999}},"id":{answer},"jsonrpc":"2.0"}}"#);
        assert_eq!(
            pending.handle_incoming(response.as_bytes()),
            Some(Bytes::from(sent.to_owned())),
            "{answer}"
        );
    }
    // A number is matched by its value: a server that writes 7 back as 7.0
    // (a JavaScript one re-serializing, say) answers request 7.
    assert_eq!(
        pending.handle_incoming(br#"{"jsonrpc":"2.0","id":7.0,"result":1}"#),
        Some(Bytes::from_static(b"7"))
    );
    assert!(ids(&mut pending, &exited(1)).is_empty());
}

#[test]
fn c37_numeric_ids_compare_by_value_however_they_are_spelled() {
    use childwire_core::jsonrpc::same_id;
    for (a, b) in [
        ("1", "1.0"),
        ("1", "10e-1"),
        ("1", "0.1E1"),
        ("100", "1e2"),
        ("100", "1.00E+2"),
        ("0", "-0"),
        ("0", "0.000e5"),
        ("-12.5", "-125e-1"),
    ] {
        assert!(same_id(a.as_bytes(), b.as_bytes()), "{a} = {b}");
    }
    for (a, b) in [
        ("12", "1.2"),
        ("1", "-1"),
        ("1", r#""1""#),
        ("01", "1"),
        ("1.", "1"),
    ] {
        assert!(!same_id(a.as_bytes(), b.as_bytes()), "{a} != {b}");
    }
}

#[test]
fn c37_a_request_from_the_child_with_a_pending_id_answers_nothing() {
    let mut pending = PendingRequests::default();
    pending.handle_outgoing(br#"{"jsonrpc":"2.0","id":1,"method":"tools/list"}"#);
    // Ids are per direction: the child's own request 1 is not our answer.
    assert_eq!(
        pending.handle_incoming(br#"{"jsonrpc":"2.0","id":1,"method":"roots/list"}"#),
        None
    );
    // Nor is a nested id, or a response to an id never sent.
    assert_eq!(
        pending.handle_incoming(br#"{"jsonrpc":"2.0","result":{"id":1},"id":2}"#),
        None
    );
    assert_eq!(pending.len(), 1);
    assert!(
        pending
            .handle_incoming(br#"{"jsonrpc":"2.0","id":1,"result":{}}"#)
            .is_some()
    );
    assert!(pending.is_empty());
}

#[test]
fn c37_duplicate_ids_are_each_answered_once_and_each_failed_once() {
    let mut pending = PendingRequests::default();
    for _ in 0..3 {
        pending.handle_outgoing(br#"{"jsonrpc":"2.0","id":5,"method":"ping"}"#);
    }
    pending.handle_outgoing(br#"{"jsonrpc":"2.0","id":6,"method":"ping"}"#);
    assert_eq!(pending.len(), 4);
    assert!(
        pending
            .handle_incoming(br#"{"jsonrpc":"2.0","id":5,"result":{}}"#)
            .is_some()
    );
    assert_eq!(pending.len(), 3);
    // Two requests with id 5 are still waiting: two error responses, in
    // the order sent.
    assert_eq!(ids(&mut pending, &exited(1)), ["5", "5", "6"]);
    assert!(pending.is_empty());
    assert_eq!(
        pending.handle_incoming(br#"{"jsonrpc":"2.0","id":5,"result":{}}"#),
        None
    );
}

#[test]
fn c37_every_pending_request_gets_an_error_response_that_says_why() {
    let mut pending = PendingRequests::default();
    pending.handle_outgoing(br#"{"jsonrpc":"2.0","id":1,"method":"a"}"#);
    pending.handle_outgoing(br#"{"jsonrpc":"2.0","id":"two","method":"b"}"#);
    let unanswered = pending.fail_all(&EndCause {
        exit: Some(Exit::Code(3)),
        stderr: Some("Error: \"db\" locked\tat line 1"),
        restarting: false,
    });
    assert_eq!(unanswered.requests.len(), 2);
    for (request, id) in unanswered.requests.iter().zip([json!(1), json!("two")]) {
        let response: Value = serde_json::from_slice(&request.response).expect("valid JSON");
        assert_eq!(response["jsonrpc"], "2.0");
        assert_eq!(response["id"], id);
        let error = &response["error"];
        assert_eq!(error["code"], UNANSWERED_ERROR_CODE);
        let message = error["message"].as_str().unwrap();
        assert!(
            message.contains("exited with code 3 before it answered")
                && message.contains("Error: \"db\" locked\tat line 1"),
            "{message}"
        );
        assert_eq!(error["data"]["code"], 3);
        assert_eq!(error["data"]["exit"], "exited with code 3");
        assert_eq!(error["data"]["restarting"], false);
    }
    // The report's list of ids never answered.
    assert_eq!(
        unanswered.ids().cloned().collect::<Vec<_>>(),
        [Bytes::from_static(b"1"), Bytes::from_static(br#""two""#)]
    );
}

#[test]
fn c37_on_restart_the_error_names_the_signal_and_says_the_request_may_be_retried() {
    let mut pending = PendingRequests::default();
    pending.handle_outgoing(br#"{"jsonrpc":"2.0","id":9,"method":"tools/call"}"#);
    let unanswered = pending.fail_all(&EndCause {
        exit: Some(Exit::Signal(9)),
        stderr: None,
        restarting: true,
    });
    let response: Value = serde_json::from_slice(&unanswered.requests[0].response).unwrap();
    let message = response["error"]["message"].as_str().unwrap();
    assert!(
        message.contains("killed by SIGKILL") && message.contains("may be sent again"),
        "{message}"
    );
    assert_eq!(response["error"]["data"]["signal"], 9);
    assert_eq!(response["error"]["data"]["restarting"], true);
    // Without a known exit (stdout closed first) it still says it ended.
    pending.handle_outgoing(br#"{"jsonrpc":"2.0","id":10,"method":"x"}"#);
    let unanswered = pending.fail_all(&EndCause::default());
    let response: Value = serde_json::from_slice(&unanswered.requests[0].response).unwrap();
    assert_eq!(
        response["error"]["message"],
        "the child process ended before it answered"
    );
}

#[test]
fn c37_memory_is_bounded_and_what_is_not_tracked_is_counted() {
    let mut pending = PendingRequests::new(2);
    for id in 0..5 {
        let message = format!(r#"{{"jsonrpc":"2.0","id":{id},"method":"m"}}"#);
        let expected = if id < 2 {
            Outgoing::Tracked
        } else {
            Outgoing::Full
        };
        assert_eq!(pending.handle_outgoing(message.as_bytes()), expected);
    }
    // Unreadable: a batch, broken JSON, a null id, an id too long to keep.
    let long_id = format!(
        r#"{{"jsonrpc":"2.0","id":"{}","method":"m"}}"#,
        "x".repeat(300)
    );
    for message in [
        &br#"[{"jsonrpc":"2.0","id":1,"method":"m"}]"#[..],
        br#"{"jsonrpc":"2.0","id":1,"method":"m""#,
        br#"{"jsonrpc":"2.0","id":null,"method":"m"}"#,
        long_id.as_bytes(),
    ] {
        assert_eq!(pending.handle_outgoing(message), Outgoing::Unreadable);
    }
    assert_eq!(pending.len(), 2);
    assert_eq!(pending.untracked(), 7);
    let unanswered = pending.fail_all(&exited(0));
    assert_eq!(unanswered.untracked, 7);
    assert_eq!(pending.untracked(), 0, "counted once, in that report");
}

#[test]
fn c37_content_length_bodies_are_read_the_same_way() {
    // The tracker sees bodies: a pretty-printed LSP request (newlines
    // inside) is one message.
    let mut pending = PendingRequests::default();
    let body = b"{\n  \"jsonrpc\": \"2.0\",\n  \"id\": 4,\n  \"method\": \"textDocument/hover\"\n}";
    assert_eq!(pending.handle_outgoing(body), Outgoing::Tracked);
    assert_eq!(
        pending.handle_incoming(b"{\r\n\"id\": 4, \"result\": null, \"jsonrpc\": \"2.0\"}"),
        Some(Bytes::from_static(b"4"))
    );
}

#[test]
fn c28_c37_a_dropped_oversized_response_answers_its_request() {
    let mut pending = PendingRequests::default();
    pending.handle_outgoing(br#"{"jsonrpc":"2.0","id":"big","method":"resources/read"}"#);
    let mut decoder = LineDecoder::new(32);
    decoder.handle_data(br#"{"result":{"text":"far too long for the limit"},"id":"big"}"#);
    decoder.handle_data(b"\n");
    let Some(Frame::Oversized(notice)) = decoder.poll_frame() else {
        panic!("expected an oversized notice")
    };
    let id = notice.json_rpc_id().expect("id found");
    assert_eq!(
        pending.handle_answered(id).as_deref(),
        Some(&br#""big""#[..])
    );
    assert!(pending.is_empty());
}

/// The notice for `line`, dropped over a 16-byte limit.
fn dropped(line: &[u8]) -> Oversized {
    let mut decoder = LineDecoder::new(16);
    decoder.handle_data(line);
    decoder.handle_eof();
    match decoder.poll_frame() {
        Some(Frame::Oversized(notice)) => notice,
        other => panic!("expected an oversized notice, got {other:?}"),
    }
}

#[test]
fn c28_c37_a_dropped_answer_fails_its_request_and_a_dropped_request_is_answered() {
    let mut pending = PendingRequests::default();
    pending.handle_outgoing(br#"{"jsonrpc":"2.0","id":"a","method":"tools/call"}"#);
    // Key order is the server's business: the id comes last.
    let answer = dropped(br#"{"jsonrpc":"2.0","result":"far too long","id":"\u0061"}"#);
    let OversizedAction::FailRequest(error) = pending.handle_oversized(&answer, 16) else {
        panic!("our request fails");
    };
    assert!(error.starts_with(br#"{"jsonrpc":"2.0","id":"\u0061","error":"#));
    assert!(pending.is_empty());
    // Answered once: the same answer again is nobody's.
    assert_eq!(
        pending.handle_oversized(&answer, 16),
        OversizedAction::Nothing
    );

    let request = dropped(br#"{"jsonrpc":"2.0","id":9,"method":"sampling/createMessage"}"#);
    let OversizedAction::AnswerPeer(error) = pending.handle_oversized(&request, 16) else {
        panic!("the peer's request is answered");
    };
    assert!(error.starts_with(br#"{"jsonrpc":"2.0","id":9,"error":"#));

    let notification = dropped(br#"{"jsonrpc":"2.0","method":"notifications/progress"}"#);
    assert_eq!(
        pending.handle_oversized(&notification, 16),
        OversizedAction::Nothing
    );
}

#[test]
fn c37_a_request_whose_send_failed_is_forgotten_the_newest_of_its_id() {
    let mut pending = PendingRequests::default();
    let first = br#"{"jsonrpc":"2.0","id":1,"method":"tools/list"}"#;
    let again = br#"{"jsonrpc":"2.0","id":1,"method":"tools/call"}"#;
    assert_eq!(pending.handle_outgoing(first), Outgoing::Tracked);
    assert_eq!(pending.handle_outgoing(again), Outgoing::Tracked);
    assert!(pending.handle_unsent(again));
    assert_eq!(pending.len(), 1);
    // What is not a request forgets nothing.
    assert!(!pending.handle_unsent(br#"{"jsonrpc":"2.0","id":1,"result":{}}"#));
    assert!(!pending.handle_unsent(br#"{"jsonrpc":"2.0","id":2,"method":"ping"}"#));
    assert_eq!(pending.len(), 1);
    assert!(pending.handle_unsent(first));
    assert!(pending.is_empty());
    assert!(!pending.handle_unsent(first), "once");
}
