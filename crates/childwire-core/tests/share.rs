//! The sharing machine (`childwire_core::share`) on a simulated clock: ids
//! rewritten and restored, routing of answers, notifications and the
//! server's requests, cancellation, the one initialization, the server's
//! end, the per-client bound and the linger; then a reference model
//! (`share/model.rs`, also the fuzz target's) over generated operations.

use std::time::{Duration, Instant};

use childwire_core::Exit;
use childwire_core::pending::EndCause;
use childwire_core::share::{ClientId, Disconnect, Event, ReinitStep, Share, ShareConfig};
use proptest::prelude::*;
use serde_json::{Value, json};

#[path = "share/model.rs"]
mod model;

fn start() -> (Share, Instant) {
    let now = Instant::now();
    (Share::new(ShareConfig::default(), now), now)
}

fn send_client(share: &mut Share, now: Instant, client: ClientId, message: Value) {
    share.handle_client(now, client, message.to_string().as_bytes());
}

fn send_server(share: &mut Share, now: Instant, message: Value) {
    share.handle_server(now, message.to_string().as_bytes());
}

fn server_got(share: &mut Share) -> Vec<Value> {
    std::iter::from_fn(|| share.poll_server())
        .map(|m| serde_json::from_slice(&m).expect("the share sends JSON"))
        .collect()
}

fn client_got(share: &mut Share, client: ClientId) -> Vec<Value> {
    let now = Instant::now();
    std::iter::from_fn(|| share.poll_client(now, client))
        .map(|m| serde_json::from_slice(&m).expect("the share sends JSON"))
        .collect()
}

fn events(share: &mut Share) -> Vec<Event> {
    std::iter::from_fn(|| share.poll_event()).collect()
}

fn request(id: Value, method: &str) -> Value {
    json!({"jsonrpc": "2.0", "id": id, "method": method, "params": {}})
}

fn initialize(id: Value, version: &str, capabilities: Value) -> Value {
    json!({"jsonrpc": "2.0", "id": id, "method": "initialize", "params": {
        "protocolVersion": version, "capabilities": capabilities,
        "clientInfo": {"name": "test", "version": "1"}}})
}

#[test]
fn the_same_id_from_two_clients_reaches_each_with_its_own_answer() {
    let (mut share, now) = start();
    let a = share.join(now).unwrap();
    let b = share.join(now).unwrap();
    send_client(&mut share, now, a, request(json!(7), "tools/list"));
    send_client(&mut share, now, b, request(json!(7), "tools/list"));
    send_client(&mut share, now, b, request(json!("x"), "ping"));
    let seen = server_got(&mut share);
    let ids: Vec<&Value> = seen.iter().map(|m| &m["id"]).collect();
    assert_eq!(ids, [&json!(1), &json!(2), &json!(3)]);
    // Answered out of order, the server's way.
    for (id, result) in [(3, "pong"), (1, "for-a"), (2, "for-b")] {
        send_server(
            &mut share,
            now,
            json!({"jsonrpc": "2.0", "id": id, "result": {"r": result}}),
        );
    }
    assert_eq!(
        client_got(&mut share, a),
        [json!({"jsonrpc": "2.0", "id": 7, "result": {"r": "for-a"}})]
    );
    assert_eq!(
        client_got(&mut share, b),
        [
            json!({"jsonrpc": "2.0", "id": "x", "result": {"r": "pong"}}),
            json!({"jsonrpc": "2.0", "id": 7, "result": {"r": "for-b"}}),
        ]
    );
    // An answer to nothing in flight reaches no one.
    send_server(
        &mut share,
        now,
        json!({"jsonrpc": "2.0", "id": 1, "result": {}}),
    );
    assert!(client_got(&mut share, a).is_empty() && client_got(&mut share, b).is_empty());
    assert_eq!(share.counters().server_dropped, 1);
}

#[test]
fn the_rewrite_changes_nothing_but_the_id() {
    let (mut share, now) = start();
    let a = share.join(now).unwrap();
    let text = r#"{ "method" : "tools/call", "params":{"id":"inner","name":"x"},"id" : "a-1" ,"jsonrpc":"2.0"}"#;
    share.handle_client(now, a, text.as_bytes());
    assert_eq!(
        share.poll_server().unwrap(),
        r#"{ "method" : "tools/call", "params":{"id":"inner","name":"x"},"id" : 1 ,"jsonrpc":"2.0"}"#
    );
    share.handle_server(now, br#"{"result":{"id":1},"id":1,"jsonrpc":"2.0"}"#);
    assert_eq!(
        share.poll_client(now, a).unwrap(),
        r#"{"result":{"id":1},"id":"a-1","jsonrpc":"2.0"}"#
    );
}

#[test]
fn progress_reaches_the_client_whose_token_it_names_with_its_token() {
    let (mut share, now) = start();
    let a = share.join(now).unwrap();
    let b = share.join(now).unwrap();
    for client in [a, b] {
        send_client(
            &mut share,
            now,
            client,
            json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call",
                "params": {"name": "slow", "_meta": {"progressToken": "tok"}}}),
        );
    }
    let seen = server_got(&mut share);
    assert_eq!(seen[0]["params"]["_meta"]["progressToken"], json!(1));
    assert_eq!(seen[1]["params"]["_meta"]["progressToken"], json!(2));
    send_server(
        &mut share,
        now,
        json!({"jsonrpc": "2.0", "method": "notifications/progress",
            "params": {"progressToken": 2, "progress": 5}}),
    );
    assert!(client_got(&mut share, a).is_empty());
    assert_eq!(
        client_got(&mut share, b),
        [json!({"jsonrpc": "2.0", "method": "notifications/progress",
            "params": {"progressToken": "tok", "progress": 5}})]
    );
    // Progress for a request answered already goes nowhere.
    send_server(
        &mut share,
        now,
        json!({"jsonrpc": "2.0", "id": 2, "result": {}}),
    );
    send_server(
        &mut share,
        now,
        json!({"jsonrpc": "2.0", "method": "notifications/progress",
            "params": {"progressToken": 2, "progress": 6}}),
    );
    assert_eq!(client_got(&mut share, b).len(), 1, "the answer only");
}

#[test]
fn other_notifications_reach_every_client() {
    let (mut share, now) = start();
    let clients: Vec<ClientId> = (0..3).map(|_| share.join(now).unwrap()).collect();
    let note = json!({"jsonrpc": "2.0", "method": "notifications/tools/list_changed"});
    send_server(&mut share, now, note.clone());
    for client in clients {
        assert_eq!(client_got(&mut share, client), std::slice::from_ref(&note));
    }
}

#[test]
fn a_client_cancels_its_own_requests_only() {
    let (mut share, now) = start();
    let a = share.join(now).unwrap();
    let b = share.join(now).unwrap();
    send_client(&mut share, now, a, request(json!(1), "tools/call"));
    send_client(&mut share, now, b, request(json!(2), "tools/call"));
    server_got(&mut share);
    let cancel = |id: Value| {
        json!({"jsonrpc": "2.0", "method": "notifications/cancelled",
            "params": {"requestId": id, "reason": "user"}})
    };
    // b names a's id (and an id of no request): dropped.
    send_client(&mut share, now, b, cancel(json!(1)));
    send_client(&mut share, now, b, cancel(json!(9)));
    assert!(server_got(&mut share).is_empty());
    // a cancels its own: the server hears of its id.
    send_client(&mut share, now, a, cancel(json!(1)));
    assert_eq!(
        server_got(&mut share),
        [
            json!({"jsonrpc": "2.0", "method": "notifications/cancelled",
            "params": {"requestId": 1, "reason": "user"}})
        ]
    );
    // A late answer to it is dropped.
    send_server(
        &mut share,
        now,
        json!({"jsonrpc": "2.0", "id": 1, "result": {}}),
    );
    assert!(client_got(&mut share, a).is_empty());
    assert_eq!(share.in_flight(), 1);
}

#[test]
fn a_client_that_leaves_has_its_requests_cancelled_at_the_server() {
    let (mut share, now) = start();
    let a = share.join(now).unwrap();
    let b = share.join(now).unwrap();
    send_client(&mut share, now, a, request(json!(1), "tools/call"));
    send_client(&mut share, now, a, request(json!(2), "tools/call"));
    send_client(&mut share, now, b, request(json!(1), "tools/call"));
    server_got(&mut share);
    share.leave(a, now);
    let cancels = server_got(&mut share);
    let named: Vec<&Value> = cancels.iter().map(|m| &m["params"]["requestId"]).collect();
    assert_eq!(named, [&json!(1), &json!(2)]);
    assert!(
        cancels
            .iter()
            .all(|m| m["method"] == "notifications/cancelled")
    );
    assert_eq!(share.counters().cancelled_on_leave, 2);
    // b goes on.
    send_server(
        &mut share,
        now,
        json!({"jsonrpc": "2.0", "id": 3, "result": {}}),
    );
    assert_eq!(client_got(&mut share, b)[0]["id"], json!(1));
}

#[test]
fn the_server_is_initialized_once_and_later_clients_get_its_answer() {
    let (mut share, now) = start();
    let a = share.join(now).unwrap();
    let b = share.join(now).unwrap();
    send_client(
        &mut share,
        now,
        a,
        initialize(json!(0), "2025-06-18", json!({"sampling": {}})),
    );
    // b asks before the server answered: it waits.
    send_client(
        &mut share,
        now,
        b,
        initialize(json!("i"), "2025-06-18", json!({})),
    );
    let seen = server_got(&mut share);
    assert_eq!(seen.len(), 1);
    assert_eq!(seen[0]["method"], "initialize");
    let result = json!({"protocolVersion": "2025-06-18", "capabilities": {"tools": {}},
        "serverInfo": {"name": "s", "version": "1"}});
    send_server(
        &mut share,
        now,
        json!({"jsonrpc": "2.0", "id": seen[0]["id"], "result": result}),
    );
    assert_eq!(
        client_got(&mut share, a),
        [json!({"jsonrpc": "2.0", "id": 0, "result": result})]
    );
    assert_eq!(
        client_got(&mut share, b),
        [json!({"jsonrpc": "2.0", "id": "i", "result": result})]
    );
    // `notifications/initialized` once.
    let initialized = json!({"jsonrpc": "2.0", "method": "notifications/initialized"});
    send_client(&mut share, now, a, initialized.clone());
    send_client(&mut share, now, b, initialized.clone());
    assert_eq!(server_got(&mut share), [initialized]);
    // A third, later: from the cache; another version: an error.
    let c = share.join(now).unwrap();
    send_client(
        &mut share,
        now,
        c,
        initialize(json!(5), "2025-06-18", json!({})),
    );
    send_client(
        &mut share,
        now,
        c,
        initialize(json!(6), "1999-01-01", json!({})),
    );
    assert!(server_got(&mut share).is_empty());
    let got = client_got(&mut share, c);
    assert_eq!(got[0], json!({"jsonrpc": "2.0", "id": 5, "result": result}));
    assert_eq!(got[1]["id"], json!(6));
    assert_eq!(got[1]["error"]["code"], json!(-32602));
    assert_eq!(
        got[1]["error"]["data"],
        json!({"supported": ["2025-06-18"], "requested": "1999-01-01"})
    );
    // What a restarted server is initialized with.
    let reinit: Value = serde_json::from_slice(&share.handle_reinit_start(now).unwrap()).unwrap();
    assert_eq!(
        reinit,
        initialize(
            json!("childwire-share-reinit"),
            "2025-06-18",
            json!({"sampling": {}})
        )
    );
}

/// A share whose server was initialized by one client, `a`, then restarted:
/// the new server's re-initialization has started at `now`.
fn reinitializing() -> (Share, Instant, ClientId) {
    reinitializing_with(ShareConfig::default())
}

/// [`reinitializing`] with `config`.
fn reinitializing_with(config: ShareConfig) -> (Share, Instant, ClientId) {
    let now = Instant::now();
    let mut share = Share::new(config, now);
    let a = share.join(now).unwrap();
    send_client(&mut share, now, a, initialize(json!(1), "v", json!({})));
    server_got(&mut share);
    send_server(
        &mut share,
        now,
        json!({"jsonrpc": "2.0", "id": 1, "result": {"protocolVersion": "v"}}),
    );
    client_got(&mut share, a);
    share.handle_server_ended(now, &EndCause::default(), true);
    assert!(share.handle_reinit_start(now).is_some());
    (share, now, a)
}

#[test]
fn a_restarted_servers_answer_to_its_initialize_is_kept_from_the_clients() {
    let (mut share, now, a) = reinitializing();
    let until = now + ShareConfig::default().reinit_timeout;
    assert_eq!(share.poll_reinit(now), Some(ReinitStep::Wait(Some(until))));
    // What else the server says meanwhile goes to the clients.
    send_server(
        &mut share,
        now,
        json!({"jsonrpc": "2.0", "method": "notifications/message", "params": {}}),
    );
    assert_eq!(share.poll_reinit(now), Some(ReinitStep::Wait(Some(until))));
    send_server(
        &mut share,
        now,
        json!({"jsonrpc": "2.0", "id": "childwire-share-reinit", "result": {}}),
    );
    let Some(ReinitStep::Answered(initialized)) = share.poll_reinit(now) else {
        panic!("the answer ends the re-initialization");
    };
    let initialized: Value = serde_json::from_slice(&initialized).unwrap();
    assert_eq!(initialized["method"], "notifications/initialized");
    assert_eq!(share.poll_reinit(now), None, "it is over");
    let got = client_got(&mut share, a);
    assert_eq!(got.len(), 1, "only the notification: {got:?}");
    assert_eq!(got[0]["method"], "notifications/message");
}

#[test]
fn a_restarted_server_that_does_not_answer_in_time_fails_its_re_initialization() {
    let (mut share, now, _) = reinitializing();
    let until = now + ShareConfig::default().reinit_timeout;
    // Asked before the end (a timer early): the same end.
    let early = until - Duration::from_millis(1);
    assert_eq!(
        share.poll_reinit(early),
        Some(ReinitStep::Wait(Some(until)))
    );
    match share.poll_reinit(until) {
        Some(ReinitStep::Failed(why)) => assert!(why.contains("no answer"), "{why}"),
        other => panic!("expected the failure at the end, got {other:?}"),
    }
    assert_eq!(share.poll_reinit(until), None);
}

#[test]
fn a_re_initialization_timeout_too_long_to_count_never_ends_it() {
    let mut config = ShareConfig::default();
    config.reinit_timeout = Duration::MAX;
    let (mut share, now, _) = reinitializing_with(config);
    let year = now + Duration::from_secs(365 * 24 * 3600);
    assert_eq!(share.poll_reinit(year), Some(ReinitStep::Wait(None)));
}

#[test]
fn a_restarted_server_that_ends_before_it_answers_fails_its_re_initialization() {
    let (mut share, now, _) = reinitializing();
    share.handle_reinit_ended("exited with code 1");
    match share.poll_reinit(now) {
        Some(ReinitStep::Failed(why)) => {
            assert!(why.contains("exited with code 1"), "{why}");
        }
        other => panic!("expected the failure, got {other:?}"),
    }
}

#[test]
fn a_failed_initialize_fails_the_waiting_ones_and_the_next_is_forwarded() {
    let (mut share, now) = start();
    let a = share.join(now).unwrap();
    let b = share.join(now).unwrap();
    send_client(&mut share, now, a, initialize(json!(1), "v", json!({})));
    send_client(&mut share, now, b, initialize(json!(2), "v", json!({})));
    server_got(&mut share);
    send_server(
        &mut share,
        now,
        json!({"jsonrpc": "2.0", "id": 1, "error": {"code": -32603, "message": "no"}}),
    );
    assert_eq!(client_got(&mut share, a)[0]["id"], json!(1));
    assert_eq!(client_got(&mut share, b)[0]["error"]["message"], "no");
    assert!(share.handle_reinit_start(now).is_none());
    send_client(&mut share, now, b, initialize(json!(3), "v", json!({})));
    assert_eq!(server_got(&mut share)[0]["method"], "initialize");
}

#[test]
fn a_server_request_goes_to_the_client_it_works_for() {
    let (mut share, now) = start();
    let a = share.join(now).unwrap();
    let b = share.join(now).unwrap();
    let c = share.join(now).unwrap();
    // Only a and b declared sampling; a's initialize goes to the server.
    send_client(
        &mut share,
        now,
        a,
        initialize(json!(0), "v", json!({"sampling": {}})),
    );
    server_got(&mut share);
    send_server(
        &mut share,
        now,
        json!({"jsonrpc": "2.0", "id": 1, "result": {"protocolVersion": "v"}}),
    );
    send_client(
        &mut share,
        now,
        b,
        initialize(json!(0), "v", json!({"sampling": {}, "roots": {}})),
    );
    send_client(&mut share, now, c, initialize(json!(0), "v", json!({})));
    for client in [a, b, c] {
        client_got(&mut share, client);
    }
    // b has a tool call in flight: sampling goes to b.
    send_client(
        &mut share,
        now,
        b,
        json!({"jsonrpc": "2.0", "id": 4, "method": "tools/call",
            "params": {"_meta": {"progressToken": 4}}}),
    );
    // c, more recent, cannot answer sampling.
    send_client(&mut share, now, c, request(json!(4), "tools/list"));
    server_got(&mut share);
    let sampling = json!({"jsonrpc": "2.0", "id": "s1", "method": "sampling/createMessage",
        "params": {"messages": []}});
    send_server(&mut share, now, sampling.clone());
    assert_eq!(client_got(&mut share, b), [sampling]);
    assert!(client_got(&mut share, a).is_empty() && client_got(&mut share, c).is_empty());
    // Only b may answer it, and once.
    let answer = json!({"jsonrpc": "2.0", "id": "s1", "result": {"content": "hi"}});
    send_client(&mut share, now, a, answer.clone());
    assert!(server_got(&mut share).is_empty());
    send_client(&mut share, now, b, answer.clone());
    send_client(&mut share, now, b, answer.clone());
    assert_eq!(server_got(&mut share), [answer]);

    // A request naming a's token (a's request in flight) goes to a.
    send_client(
        &mut share,
        now,
        a,
        json!({"jsonrpc": "2.0", "id": 9, "method": "tools/call",
            "params": {"_meta": {"progressToken": "p"}}}),
    );
    let id = server_got(&mut share)[0]["id"].clone();
    let named = json!({"jsonrpc": "2.0", "id": "s2", "method": "sampling/createMessage",
        "params": {"_meta": {"progressToken": id}}});
    send_server(&mut share, now, named.clone());
    assert_eq!(client_got(&mut share, a), [named]);

    // roots: only b declared them.
    send_server(
        &mut share,
        now,
        json!({"jsonrpc": "2.0", "id": "r", "method": "roots/list"}),
    );
    assert_eq!(client_got(&mut share, b).len(), 1);
    // elicitation: no one; the server hears so.
    send_server(
        &mut share,
        now,
        json!({"jsonrpc": "2.0", "id": "e", "method": "elicitation/create", "params": {}}),
    );
    let refused = server_got(&mut share);
    assert_eq!(refused[0]["id"], "e");
    assert_eq!(refused[0]["error"]["code"], json!(-32601));
    // ping: the share answers.
    send_server(
        &mut share,
        now,
        json!({"jsonrpc": "2.0", "id": 77, "method": "ping"}),
    );
    assert_eq!(
        server_got(&mut share),
        [json!({"jsonrpc": "2.0", "id": 77, "result": {}})]
    );
}

#[test]
fn a_client_that_leaves_holding_a_server_request_is_answered_for() {
    let (mut share, now) = start();
    let a = share.join(now).unwrap();
    send_server(
        &mut share,
        now,
        json!({"jsonrpc": "2.0", "id": 5, "method": "x/y"}),
    );
    assert_eq!(client_got(&mut share, a).len(), 1);
    let _b = share.join(now).unwrap();
    share.leave(a, now);
    let got = server_got(&mut share);
    assert_eq!(got[0]["id"], json!(5));
    assert_eq!(got[0]["error"]["code"], json!(-32000));
}

#[test]
fn the_servers_end_answers_every_request_in_flight() {
    let (mut share, now) = start();
    let a = share.join(now).unwrap();
    let b = share.join(now).unwrap();
    send_client(&mut share, now, a, request(json!(1), "tools/call"));
    send_client(&mut share, now, b, request(json!("q"), "tools/call"));
    send_server(
        &mut share,
        now,
        json!({"jsonrpc": "2.0", "id": "s", "method": "x/y"}),
    );
    server_got(&mut share);
    let cause = EndCause {
        exit: Some(Exit::Code(3)),
        stderr: None,
        restarting: true,
    };
    share.handle_server_ended(now, &cause, true);
    let got_a = client_got(&mut share, a);
    let got_b = client_got(&mut share, b);
    let all: Vec<&Value> = got_a.iter().chain(&got_b).collect();
    let answered: Vec<&Value> = all
        .iter()
        .filter(|m| m.get("method").is_none())
        .map(|m| &m["id"])
        .collect();
    assert_eq!(answered.len(), 2, "{all:?}");
    assert!(answered.contains(&&json!(1)) && answered.contains(&&json!("q")));
    assert!(all.iter().filter(|m| m.get("error").is_some()).all(|m| {
        m["error"]["code"] == json!(-32000)
            && m["error"]["message"]
                .as_str()
                .unwrap()
                .contains("exited with code 3")
    }));
    // The server's own request: cancelled to whoever held it.
    assert!(
        all.iter()
            .any(|m| m["method"] == "notifications/cancelled" && m["params"]["requestId"] == "s")
    );
    assert_eq!(share.in_flight(), 0);
    // Restarting: traffic goes on, ids go on.
    send_client(&mut share, now, a, request(json!(1), "tools/call"));
    assert_eq!(server_got(&mut share)[0]["id"], json!(3));

    // For good: requests are answered by the share.
    share.handle_server_ended(now, &EndCause::default(), false);
    client_got(&mut share, a);
    send_client(&mut share, now, a, request(json!(2), "tools/call"));
    assert!(server_got(&mut share).is_empty());
    assert_eq!(client_got(&mut share, a)[0]["error"]["code"], json!(-32000));
    assert!(share.is_ended());
    assert!(share.join(now).is_err());
}

#[test]
fn a_request_that_could_not_be_sent_is_answered() {
    let (mut share, now) = start();
    let a = share.join(now).unwrap();
    send_client(&mut share, now, a, request(json!(8), "tools/call"));
    let sent = share.poll_server().unwrap();
    share.handle_unsent(now, &sent, "the server is down");
    let got = client_got(&mut share, a);
    assert_eq!(got[0]["id"], json!(8));
    assert!(
        got[0]["error"]["message"]
            .as_str()
            .unwrap()
            .contains("the server is down")
    );
    assert_eq!(share.in_flight(), 0);
}

#[test]
fn bad_client_messages_get_errors_and_nothing_reaches_the_server() {
    let (mut share, now) = start();
    let a = share.join(now).unwrap();
    share.handle_client(now, a, b"not json");
    share.handle_client(now, a, b"[1,2]");
    share.handle_client(now, a, br#"{"jsonrpc":"2.0"}"#);
    share.handle_client(now, a, br#"{"jsonrpc":"2.0","id":null,"method":"x"}"#);
    send_client(&mut share, now, a, request(json!(1), "x"));
    send_client(&mut share, now, a, request(json!(1), "x"));
    let got = client_got(&mut share, a);
    let codes: Vec<&Value> = got.iter().map(|m| &m["error"]["code"]).collect();
    assert_eq!(
        codes,
        [
            &json!(-32700),
            &json!(-32700),
            &json!(-32600),
            &json!(-32600),
            &json!(-32600)
        ]
    );
    assert_eq!(got[4]["id"], json!(1), "the reused id is named");
    assert_eq!(server_got(&mut share).len(), 1);
}

#[test]
fn requests_in_flight_are_bounded() {
    let now = Instant::now();
    let mut config = ShareConfig::default();
    config.max_in_flight = 2;
    let mut share = Share::new(config, now);
    let a = share.join(now).unwrap();
    for id in 0..3 {
        send_client(&mut share, now, a, request(json!(id), "x"));
    }
    assert_eq!(server_got(&mut share).len(), 2);
    let got = client_got(&mut share, a);
    assert_eq!(got[0]["id"], json!(2));
    assert_eq!(got[0]["error"]["code"], json!(-32029));
}

#[test]
fn a_client_that_stops_reading_is_disconnected_and_the_others_go_on() {
    let now = Instant::now();
    let mut config = ShareConfig::default();
    config.client_queue_bytes = 4096;
    let mut share = Share::new(config, now);
    let slow = share.join(now).unwrap();
    let fast = share.join(now).unwrap();
    send_client(&mut share, now, slow, request(json!(1), "tools/call"));
    server_got(&mut share);
    let note = json!({"jsonrpc": "2.0", "method": "notifications/message",
        "params": {"data": "x".repeat(200)}});
    let mut fast_got = 0;
    let mut disconnected = None;
    for _ in 0..100 {
        send_server(&mut share, now, note.clone());
        fast_got += client_got(&mut share, fast).len();
        for event in events(&mut share) {
            if let Event::Disconnected { client, reason } = event {
                disconnected = Some((client, reason));
            }
        }
        assert!(share.queued(slow) <= 4096);
    }
    assert_eq!(fast_got, 100);
    let (client, Disconnect::StoppedReading { queued, bound }) = disconnected.unwrap() else {
        unreachable!()
    };
    assert_eq!(client, slow);
    assert!(queued > bound && bound == 4096);
    assert!(!share.is_joined(slow));
    // Its request was cancelled at the server.
    let cancels = server_got(&mut share);
    assert_eq!(cancels[0]["params"]["requestId"], json!(1));
}

#[test]
fn the_server_stops_after_the_linger_with_no_client() {
    let now = Instant::now();
    let mut config = ShareConfig::default();
    config.linger = Duration::from_secs(5);
    let mut share = Share::new(config, now);
    // No one joined yet: the share waits for a first client.
    assert_eq!(share.poll_timeout(), None);
    share.handle_timeout(now + Duration::from_secs(60));
    assert!(events(&mut share).is_empty());
    let a = share.join(now).unwrap();
    assert_eq!(share.poll_timeout(), None);
    share.leave(a, now + Duration::from_secs(1));
    assert_eq!(share.poll_timeout(), Some(now + Duration::from_secs(6)));
    // Someone comes back within the linger: the server stays.
    share.handle_timeout(now + Duration::from_secs(3));
    let b = share.join(now + Duration::from_secs(3)).unwrap();
    share.handle_timeout(now + Duration::from_secs(10));
    assert!(events(&mut share).is_empty());
    share.leave(b, now + Duration::from_secs(10));
    share.handle_timeout(now + Duration::from_secs(14));
    assert!(events(&mut share).is_empty());
    share.handle_timeout(now + Duration::from_secs(15));
    assert_eq!(events(&mut share), [Event::StopServer]);
    assert_eq!(share.poll_timeout(), None);
    assert!(share.join(now + Duration::from_secs(15)).is_err());
}

#[test]
fn without_a_linger_the_last_one_out_stops_the_server() {
    let (mut share, now) = start();
    let a = share.join(now).unwrap();
    let b = share.join(now).unwrap();
    share.leave(a, now);
    assert!(events(&mut share).is_empty());
    share.leave(b, now);
    assert_eq!(events(&mut share), [Event::StopServer]);
}

#[test]
fn clients_are_bounded() {
    let now = Instant::now();
    let mut config = ShareConfig::default();
    config.max_clients = 2;
    let mut share = Share::new(config, now);
    share.join(now).unwrap();
    share.join(now).unwrap();
    assert!(share.join(now).is_err());
}

/// Bytes that look like JSON-RPC more often than random ones do.
fn jsonish() -> impl Strategy<Value = Vec<u8>> {
    const PIECES: [&[u8]; 23] = [
        b"{",
        b"}",
        b"[",
        b"]",
        b",",
        b":",
        b"\"",
        b"\\",
        br#""id""#,
        br#""method""#,
        br#""params""#,
        br#""result""#,
        br#""_meta""#,
        br#""progressToken""#,
        br#""requestId""#,
        br#""notifications/progress""#,
        br#""notifications/cancelled""#,
        br#""initialize""#,
        b"1",
        b"2",
        b"null",
        b" ",
        b"\xff",
    ];
    prop::collection::vec(prop::sample::select(&PIECES[..]), 0..40)
        .prop_map(|pieces| pieces.concat())
}

proptest! {
    #![proptest_config(ProptestConfig {
        cases: 2048,
        failure_persistence: None,
        ..ProptestConfig::default()
    })]
    /// Whatever the server and the clients send, the share does not panic,
    /// sends the server only what parses as a JSON object, and keeps its
    /// books bounded.
    #[test]
    fn anything_in_nothing_breaks(
        messages in prop::collection::vec((any::<bool>(), jsonish()), 0..40),
    ) {
        let now = Instant::now();
        let mut share = Share::new(ShareConfig::default(), now);
        let a = share.join(now).unwrap();
        let b = share.join(now).unwrap();
        // Requests in flight for the server's messages to name.
        send_client(&mut share, now, a, json!({"jsonrpc": "2.0", "id": 1, "method": "x",
            "params": {"_meta": {"progressToken": 1}}}));
        send_client(&mut share, now, b, request(json!(1), "initialize"));
        share.poll_server();
        share.poll_server();
        for (from_server, message) in &messages {
            if *from_server {
                share.handle_server(now, message);
            } else {
                share.handle_client(now, a, message);
            }
            while let Some(out) = share.poll_server() {
                prop_assert!(serde_json::from_slice::<Value>(&out).is_ok(), "{:?}", out);
            }
            prop_assert!(share.in_flight() <= 2 + messages.len());
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig {
        cases: 512,
        failure_persistence: None,
        ..ProptestConfig::default()
    })]
    /// The reference model the fuzz target runs, on generated operations.
    #[test]
    fn the_model_holds(ops in prop::collection::vec(any::<u8>(), 0..600)) {
        if let Err(violation) = model::run(&ops) {
            panic!("{violation}");
        }
    }
}

#[test]
fn an_answer_over_the_size_limit_becomes_an_error_for_the_client_that_asked() {
    use childwire_core::{Frame, LineDecoder};
    let (mut share, now) = start();
    let a = share.join(now).unwrap();
    send_client(&mut share, now, a, request(json!("big"), "resources/read"));
    let sent: Value = serde_json::from_slice(&share.poll_server().unwrap()).unwrap();
    let mut decoder = LineDecoder::new(64);
    let answer = json!({"jsonrpc": "2.0", "id": sent["id"], "result": {"text": "x".repeat(100)}});
    decoder.handle_data(format!("{answer}\n").as_bytes());
    let Some(Frame::Oversized(notice)) = decoder.poll_frame() else {
        panic!("the decoder drops it")
    };
    share.handle_server_oversized(now, &notice, 64);
    let got = client_got(&mut share, a);
    assert_eq!(got[0]["id"], json!("big"));
    assert_eq!(got[0]["error"]["code"], json!(-32013));
    assert_eq!(share.in_flight(), 0);
}

/// A share with a 4 KiB queue bound and a 0.5 s read grace, and one client.
fn one_reader(now: Instant) -> (Share, ClientId) {
    let mut config = ShareConfig::default();
    config.client_queue_bytes = 4096;
    config.read_grace = Duration::from_millis(500);
    let mut share = Share::new(config, now);
    let reader = share.join(now).unwrap();
    (share, reader)
}

/// Ten notifications of 200 bytes from the server at `at`: past half of
/// `one_reader`'s bound.
fn burst(share: &mut Share, at: Instant) {
    let note = json!({"jsonrpc": "2.0", "method": "notifications/message",
        "params": {"data": "x".repeat(200)}});
    for _ in 0..10 {
        send_server(share, at, note.clone());
    }
}

#[test]
fn a_client_that_reads_holds_the_server_back_one_that_stopped_does_not() {
    let now = Instant::now();
    let (mut share, reader) = one_reader(now);
    assert_eq!(share.poll_read_pause(now), None);
    burst(&mut share, now);
    // Over half its bound, and it read (joined) just now: the server waits.
    assert!(share.queued(reader) > 2048);
    let until = now + Duration::from_millis(500);
    assert_eq!(share.poll_read_pause(now), Some(until));
    // It reads one: the pause is counted from that read.
    let later = now + Duration::from_millis(100);
    share.poll_client(later, reader).unwrap();
    assert_eq!(
        share.poll_read_pause(later),
        Some(later + Duration::from_millis(500))
    );
    // It stops: after the grace it holds no one up.
    assert_eq!(
        share.poll_read_pause(later + Duration::from_millis(500)),
        None
    );
    // Reading down to half lifts the pause at once.
    while share.queued(reader) > 2048 {
        share.poll_client(later, reader).unwrap();
    }
    assert_eq!(share.poll_read_pause(later), None);
}

/// A client waiting for its next message is reading, however long ago its last read was: when a
/// burst comes, the time it has to read is counted from the burst, so a client that joined (or
/// last read) long before it is not taken for one that stopped reading and dropped.
#[test]
fn a_caught_up_client_is_given_the_read_grace_from_the_burst_not_from_its_last_read() {
    let now = Instant::now();
    let (mut share, reader) = one_reader(now);
    // Ten seconds later, a burst past half its bound.
    let later = now + Duration::from_secs(10);
    burst(&mut share, later);
    assert!(share.queued(reader) > 2048);
    assert_eq!(
        share.poll_read_pause(later),
        Some(later + Duration::from_millis(500)),
        "held back for the client that was waiting"
    );
    // Still not reading half a second after the burst: it holds no one up.
    assert_eq!(
        share.poll_read_pause(later + Duration::from_millis(500)),
        None
    );
}

#[test]
fn a_server_request_with_a_broken_id_is_dropped_not_answered() {
    let (mut share, now) = start();
    let _a = share.join(now).unwrap();
    share.handle_server(now, br#"{"id":1null,"method":"ping"}"#);
    share.handle_server(now, br#"{"id":"\x","method":"ping"}"#);
    assert_eq!(share.poll_server(), None);
    assert_eq!(share.counters().server_dropped, 2);
}
