use std::sync::{Arc, Mutex};

use serde_json::{Value, json};

use childwire::ChannelConfig;
use childwire::tokio::TokioIo;

use super::{McpServer, SERVER_NAME, serve};
use crate::protocol::{
    HANDSHAKE_PROTOCOL_VERSIONS, INVALID_PARAMS, LATEST_PROTOCOL_VERSION, METHOD_NOT_FOUND,
    UNSUPPORTED_PROTOCOL_VERSION,
};

/// Sends `message` and returns the one answer, checked to be a single line
/// of JSON-RPC 2.0.
fn answer(server: &mut McpServer, message: &str) -> Value {
    let line = server
        .handle_line(message)
        .unwrap_or_else(|| panic!("no answer to {message}"));
    assert!(!line.contains('\n'), "answer spans lines: {line:?}");
    let value: Value = serde_json::from_str(&line).expect("answer is JSON");
    assert_eq!(value["jsonrpc"], "2.0", "{line}");
    value
}

fn request(id: i64, method: &str, params: Value) -> String {
    json!({ "jsonrpc": "2.0", "id": id, "method": method, "params": params }).to_string()
}

fn initialize(version: &str) -> String {
    request(
        1,
        "initialize",
        json!({
            "protocolVersion": version,
            "capabilities": {},
            "clientInfo": { "name": "test-client", "version": "0.0.0" },
        }),
    )
}

/// A server past the handshake.
fn ready_server() -> McpServer {
    let mut server = McpServer::new();
    let _ = answer(&mut server, &initialize(LATEST_PROTOCOL_VERSION));
    assert_eq!(
        server.handle_line(r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#),
        None
    );
    server
}

fn call_tool(server: &mut McpServer, params: Value) -> Value {
    answer(server, &request(7, "tools/call", params))
}

fn assert_error(response: &Value, id: Value, code: i64) {
    assert_eq!(response["id"], id, "{response}");
    assert_eq!(response["error"]["code"], code, "{response}");
    assert!(
        response["error"]["message"]
            .as_str()
            .is_some_and(|m| !m.is_empty()),
        "{response}"
    );
    assert!(response.get("result").is_none(), "{response}");
}

/// The single text item of a `tools/call` result, and its `isError`.
fn tool_text(response: &Value) -> (&str, bool) {
    assert!(response.get("error").is_none(), "{response}");
    let result = &response["result"];
    let content = result["content"].as_array().expect("content array");
    assert_eq!(content.len(), 1, "{response}");
    assert_eq!(content[0]["type"], "text", "{response}");
    let text = content[0]["text"].as_str().expect("text is a string");
    let is_error = result["isError"].as_bool().expect("isError is a boolean");
    (text, is_error)
}

#[test]
fn mcp_initialize_accepts_each_supported_client_version() {
    for version in HANDSHAKE_PROTOCOL_VERSIONS {
        let mut server = McpServer::new();
        let response = answer(&mut server, &initialize(version));
        assert_eq!(response["id"], 1);
        assert_eq!(response["result"]["protocolVersion"], *version);
        assert_eq!(server.negotiated_protocol_version(), Some(*version));
    }
}

#[test]
fn mcp_initialize_answers_latest_version_for_an_unknown_one() {
    // 2026-07-28 is known, but stateless: no handshake can agree on it.
    for version in ["2099-01-01", "1.0", "", "2026-07-28"] {
        let mut server = McpServer::new();
        let response = answer(&mut server, &initialize(version));
        assert_eq!(
            response["result"]["protocolVersion"],
            LATEST_PROTOCOL_VERSION
        );
    }
}

#[test]
fn mcp_initialize_reports_server_info_and_tools_capability() {
    let mut server = McpServer::new();
    let result = answer(&mut server, &initialize("2025-03-26"))["result"].take();
    assert_eq!(
        result["capabilities"],
        json!({ "tools": {}, "resources": {}, "prompts": {} })
    );
    assert_eq!(result["serverInfo"]["name"], SERVER_NAME);
    assert!(result["serverInfo"]["version"].is_string(), "{result}");
}

#[test]
fn mcp_initialize_without_protocol_version_is_invalid_params() {
    let mut server = McpServer::new();
    for params in [
        json!({ "capabilities": {} }),
        json!({ "protocolVersion": 20250618 }),
    ] {
        let response = answer(&mut server, &request(3, "initialize", params));
        assert_error(&response, json!(3), -32602);
    }
    let no_params = r#"{"jsonrpc":"2.0","id":4,"method":"initialize"}"#;
    assert_error(&answer(&mut server, no_params), json!(4), -32602);
    assert_eq!(server.negotiated_protocol_version(), None);
}

#[test]
fn mcp_second_initialize_is_an_invalid_request_and_keeps_the_first_version() {
    let mut server = McpServer::new();
    let _ = answer(&mut server, &initialize("2024-11-05"));
    let response = answer(&mut server, &initialize("2025-06-18"));
    assert_error(&response, json!(1), -32600);
    assert_eq!(server.negotiated_protocol_version(), Some("2024-11-05"));
}

#[test]
fn mcp_initialized_notification_is_recorded_and_never_answered() {
    let mut server = McpServer::new();
    let _ = answer(&mut server, &initialize(LATEST_PROTOCOL_VERSION));
    assert!(!server.client_initialized());
    let note = r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#;
    assert_eq!(server.handle_line(note), None);
    assert!(server.client_initialized());
}

#[test]
fn mcp_unknown_notifications_are_never_answered() {
    let mut server = ready_server();
    for note in [
        r#"{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":3}}"#,
        r#"{"jsonrpc":"2.0","method":"no/such/method"}"#,
        r#"{"jsonrpc":"2.0","method":"tools/call","params":{"name":"nope"}}"#,
    ] {
        assert_eq!(server.handle_line(note), None, "{note}");
    }
}

#[test]
fn mcp_ping_answers_an_empty_result_with_the_same_id() {
    let mut server = ready_server();
    let response = answer(
        &mut server,
        r#"{"jsonrpc":"2.0","id":"abc-1","method":"ping"}"#,
    );
    assert_eq!(response["id"], "abc-1");
    assert_eq!(response["result"], json!({}));
    let response = answer(&mut server, &request(-5, "ping", json!({})));
    assert_eq!(response["id"], -5);
    assert_eq!(response["result"], json!({}));
}

#[test]
fn mcp_tools_list_describes_echo_and_add_with_object_schemas() {
    let mut server = ready_server();
    let response = answer(&mut server, &request(2, "tools/list", json!({})));
    let tools = response["result"]["tools"].as_array().expect("tools array");
    let names: Vec<&str> = tools.iter().filter_map(|t| t["name"].as_str()).collect();
    assert_eq!(names, ["echo", "add"]);
    for tool in tools {
        assert!(tool["description"].is_string(), "{tool}");
        assert_eq!(tool["inputSchema"]["type"], "object", "{tool}");
    }
    assert_eq!(
        tools[0]["inputSchema"]["properties"]["text"]["type"],
        "string"
    );
    assert_eq!(tools[0]["inputSchema"]["required"], json!(["text"]));
    assert_eq!(tools[1]["inputSchema"]["properties"]["a"]["type"], "number");
    assert_eq!(tools[1]["inputSchema"]["properties"]["b"]["type"], "number");
    assert_eq!(tools[1]["inputSchema"]["required"], json!(["a", "b"]));
}

#[test]
fn mcp_echo_returns_its_text_unchanged() {
    let mut server = ready_server();
    let text = "héllo \"world\"\nsecond line";
    let response = call_tool(
        &mut server,
        json!({ "name": "echo", "arguments": { "text": text } }),
    );
    assert_eq!(response["id"], 7);
    assert_eq!(tool_text(&response), (text, false));
}

#[test]
fn mcp_add_sums_integers_exactly_and_other_numbers_as_floats() {
    let mut server = ready_server();
    for (a, b, sum) in [
        (json!(2), json!(3), "5"),
        (json!(-7), json!(7), "0"),
        (json!(9007199254740993_i64), json!(1), "9007199254740994"),
        (json!(1.5), json!(2.25), "3.75"),
        (json!(i64::MAX), json!(1), "9.223372036854776e+18"),
    ] {
        let response = call_tool(
            &mut server,
            json!({ "name": "add", "arguments": { "a": a, "b": b } }),
        );
        assert_eq!(tool_text(&response), (sum, false), "{a} + {b}");
    }
}

#[test]
fn mcp_add_reports_an_infinite_sum_as_a_tool_error() {
    let mut server = ready_server();
    let args = json!({ "a": f64::MAX, "b": f64::MAX });
    let response = call_tool(&mut server, json!({ "name": "add", "arguments": args }));
    let (text, is_error) = tool_text(&response);
    assert!(is_error, "{response}");
    assert!(text.contains("finite"), "{text}");
}

#[test]
fn mcp_bad_tool_arguments_are_tool_errors_not_protocol_errors() {
    let mut server = ready_server();
    for (params, mentions) in [
        (json!({ "name": "echo" }), "text"),
        (json!({ "name": "echo", "arguments": {} }), "text"),
        (
            json!({ "name": "echo", "arguments": { "text": 5 } }),
            "string",
        ),
        (json!({ "name": "echo", "arguments": "hi" }), "object"),
        (
            json!({ "name": "echo", "arguments": { "text": "x", "loud": true } }),
            "loud",
        ),
        (json!({ "name": "add", "arguments": { "a": 1 } }), "`b`"),
        (
            json!({ "name": "add", "arguments": { "a": "1", "b": 2 } }),
            "`a`",
        ),
        (json!({ "name": "add", "arguments": [1, 2] }), "object"),
    ] {
        let response = call_tool(&mut server, params.clone());
        let (text, is_error) = tool_text(&response);
        assert!(is_error, "{params} -> {response}");
        assert!(text.contains(mentions), "{params} -> {text}");
    }
}

#[test]
fn mcp_unknown_tool_is_an_invalid_params_error() {
    let mut server = ready_server();
    let response = call_tool(&mut server, json!({ "name": "subtract", "arguments": {} }));
    assert_error(&response, json!(7), -32602);
    assert!(
        response["error"]["message"]
            .as_str()
            .is_some_and(|m| m.contains("subtract"))
    );
}

#[test]
fn mcp_tools_call_without_a_tool_name_is_an_invalid_params_error() {
    let mut server = ready_server();
    for params in [
        json!({ "arguments": {} }),
        json!({ "name": 3 }),
        json!(["echo"]),
    ] {
        let response = call_tool(&mut server, params.clone());
        assert_error(&response, json!(7), -32602);
    }
}

#[test]
fn mcp_unknown_method_is_method_not_found() {
    let mut server = ready_server();
    let response = answer(&mut server, &request(9, "completion/complete", json!({})));
    assert_error(&response, json!(9), -32601);
    assert!(
        response["error"]["message"]
            .as_str()
            .is_some_and(|m| m.contains("completion/complete"))
    );
}

#[test]
fn mcp_unparseable_line_is_a_parse_error_with_a_null_id() {
    let mut server = ready_server();
    for line in [
        "not json",
        r#"{"jsonrpc":"2.0","id":1,"method":"ping""#,
        "{} trailing",
    ] {
        assert_error(&answer(&mut server, line), Value::Null, -32700);
    }
    let response = server.handle_bytes(b"{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"\xff\"}");
    let response: Value = serde_json::from_str(&response.expect("an answer")).expect("JSON");
    assert_error(&response, Value::Null, -32700);
}

#[test]
fn mcp_the_session_continues_after_an_error() {
    let mut server = ready_server();
    let _ = answer(&mut server, "garbage");
    let _ = answer(&mut server, &request(8, "nope", json!({})));
    let response = answer(&mut server, &request(10, "ping", json!({})));
    assert_eq!(response["result"], json!({}));
}

#[test]
fn mcp_non_object_messages_and_batches_are_invalid_requests() {
    let mut server = ready_server();
    for line in [
        "[]",
        r#"[{"jsonrpc":"2.0","id":1,"method":"ping"}]"#,
        "42",
        "\"ping\"",
        "null",
    ] {
        assert_error(&answer(&mut server, line), Value::Null, -32600);
    }
}

#[test]
fn mcp_malformed_envelopes_are_invalid_requests() {
    let mut server = ready_server();
    for (line, id) in [
        (r#"{"id":1,"method":"ping"}"#, json!(1)),
        (r#"{"jsonrpc":"1.0","id":2,"method":"ping"}"#, json!(2)),
        (r#"{"jsonrpc":"2.0","id":3,"method":7}"#, json!(3)),
        (r#"{"jsonrpc":"2.0","id":4}"#, json!(4)),
        (
            r#"{"jsonrpc":"2.0","id":null,"method":"ping"}"#,
            Value::Null,
        ),
        (
            r#"{"jsonrpc":"2.0","id":{"n":1},"method":"ping"}"#,
            Value::Null,
        ),
        (
            r#"{"jsonrpc":"2.0","id":true,"method":"ping"}"#,
            Value::Null,
        ),
    ] {
        assert_error(&answer(&mut server, line), id, -32600);
    }
}

#[test]
fn mcp_responses_from_the_client_are_not_answered() {
    let mut server = ready_server();
    for line in [
        r#"{"jsonrpc":"2.0","id":1,"result":{}}"#,
        r#"{"jsonrpc":"2.0","id":"x","error":{"code":-1,"message":"no"}}"#,
    ] {
        assert_eq!(server.handle_line(line), None, "{line}");
    }
}

#[test]
fn mcp_blank_lines_are_not_answered() {
    let mut server = ready_server();
    for line in ["", " ", "\t", "\r"] {
        assert_eq!(server.handle_line(line), None, "{line:?}");
    }
}

#[test]
fn mcp_logger_hears_about_requests_and_errors() {
    let lines = Arc::new(Mutex::new(Vec::<String>::new()));
    let sink = Arc::clone(&lines);
    let mut server = McpServer::with_logger(move |line| {
        sink.lock().expect("log lock").push(line.to_owned());
    });
    let _ = answer(&mut server, &initialize("2025-03-26"));
    let _ = answer(&mut server, "garbage");
    let lines = lines.lock().expect("log lock");
    assert!(
        lines
            .iter()
            .any(|l| l.contains("test-client") && l.contains("2025-03-26")),
        "{lines:?}"
    );
    assert!(lines.iter().any(|l| l.contains("unparseable")), "{lines:?}");
}

/// Runs [`serve`] over in-memory pipes on Tokio: the client side writes
/// `input` then closes; returns what the server wrote and how `serve` ended.
fn serve_bytes(
    server: &mut McpServer,
    input: &[u8],
    max_message_size: usize,
) -> (Vec<u8>, Result<(), String>) {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("a Tokio runtime");
    runtime.block_on(async {
        let (client, server_side) = tokio::io::duplex(64 * 1024);
        let (server_read, server_write) = tokio::io::split(server_side);
        let mut config = ChannelConfig::default();
        config.max_message_size = max_message_size;
        let peer = childwire::tokio::Transport::from_pipes(
            TokioIo(server_read),
            TokioIo(server_write),
            &config,
        )
        .expect("on a runtime");
        let (mut client_read, mut client_write) = tokio::io::split(client);
        let input = input.to_vec();
        // A task of its own (no `join!`: the examples build Tokio without
        // its macros), run while `serve` waits.
        let client = tokio::spawn(async move {
            client_write.write_all(&input).await.expect("write input");
            client_write.shutdown().await.expect("close input");
            let mut output = Vec::new();
            client_read
                .read_to_end(&mut output)
                .await
                .expect("read output");
            output
        });
        let served = serve(server, peer, max_message_size).await;
        let output = client.await.expect("the client task");
        (output, served.map_err(|err| err.to_string()))
    })
}

#[test]
fn mcp_serve_answers_line_by_line_in_order_and_returns_at_end_of_input() {
    let input = [
        initialize("2025-06-18"),
        r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#.to_owned(),
        String::new(),
        request(2, "tools/list", json!({})),
        "garbage\r".to_owned(),
        // The last line has no newline: it is still a message.
        request(3, "ping", json!({})),
    ]
    .join("\n");
    let mut server = McpServer::new();
    let (output, served) = serve_bytes(&mut server, input.as_bytes(), 1 << 20);
    served.expect("serve");

    let text = String::from_utf8(output).expect("UTF-8 output");
    assert!(text.ends_with('\n'), "{text}");
    let answers: Vec<Value> = text
        .lines()
        .map(|line| serde_json::from_str(line).expect("each line is JSON"))
        .collect();
    let ids: Vec<&Value> = answers.iter().map(|a| &a["id"]).collect();
    assert_eq!(ids, [&json!(1), &json!(2), &Value::Null, &json!(3)]);
    assert_eq!(answers[2]["error"]["code"], -32700);
    assert!(server.client_initialized());
}

#[test]
fn mcp_serve_answers_a_request_over_the_limit_by_its_id_and_goes_on() {
    // The id comes last, after params holding an `"id"` of their own.
    let big = format!(
        r#"{{"jsonrpc":"2.0","method":"tools/call","params":{{"id":99,"name":"echo","arguments":{{"text":"{}"}}}},"id":7}}"#,
        "a".repeat(4096)
    );
    let input = format!("{big}\n{}\n", request(8, "ping", json!({})));
    let (output, served) = serve_bytes(&mut McpServer::new(), input.as_bytes(), 1024);
    served.expect("serve");
    let text = String::from_utf8(output).expect("UTF-8 output");
    let answers: Vec<Value> = text
        .lines()
        .map(|line| serde_json::from_str(line).expect("each line is JSON"))
        .collect();
    assert_eq!(answers.len(), 2, "{text}");
    assert_eq!(answers[0]["id"], 7, "the top-level id, not the nested one");
    assert_eq!(answers[0]["error"]["data"]["size"], big.len());
    assert_eq!(answers[0]["error"]["data"]["limit"], 1024);
    assert_eq!(answers[1]["id"], 8);
    assert!(answers[1].get("result").is_some(), "{text}");
}

#[test]
fn mcp_serve_answers_each_request_before_the_next_one_is_written() {
    // A client that waits for each answer before asking again: it would
    // wait forever if an answer sat in a buffer.
    use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};

    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("a Tokio runtime");
    runtime.block_on(async {
        let (client, server_side) = tokio::io::duplex(64 * 1024);
        let (server_read, server_write) = tokio::io::split(server_side);
        let peer = childwire::tokio::Transport::from_pipes(
            TokioIo(server_read),
            TokioIo(server_write),
            &ChannelConfig::default(),
        )
        .expect("on a runtime");
        let (client_read, mut client_write) = tokio::io::split(client);
        let mut server = McpServer::new();
        let client = tokio::spawn(async move {
            let mut lines = BufReader::new(client_read).lines();
            for id in 1..=3 {
                let line = format!("{}\n", request(id, "ping", json!({})));
                client_write
                    .write_all(line.as_bytes())
                    .await
                    .expect("write");
                let answer =
                    tokio::time::timeout(std::time::Duration::from_secs(20), lines.next_line())
                        .await
                        .expect("the answer came without more input")
                        .expect("read")
                        .expect("a line");
                let answer: Value = serde_json::from_str(&answer).expect("JSON");
                assert_eq!(answer["id"], id);
            }
            client_write.shutdown().await.expect("close");
        });
        let served = serve(&mut server, peer, 1 << 20).await;
        client.await.expect("the client task");
        served.expect("serve");
    });
}

#[test]
fn mcp_serve_says_why_when_the_client_is_gone() {
    // The client writes one request and goes away before the answer.
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("a Tokio runtime");
    let served = runtime.block_on(async {
        use tokio::io::AsyncWriteExt;
        let (mut client, server_side) = tokio::io::duplex(64 * 1024);
        let (server_read, server_write) = tokio::io::split(server_side);
        let peer = childwire::tokio::Transport::from_pipes(
            TokioIo(server_read),
            TokioIo(server_write),
            &ChannelConfig::default(),
        )
        .expect("on a runtime");
        let line = format!("{}\n", request(1, "ping", json!({})));
        client.write_all(line.as_bytes()).await.expect("write");
        drop(client);
        serve(&mut McpServer::new(), peer, 1 << 20).await
    });
    let error = served.expect_err("the answer has nowhere to go");
    assert!(error.to_string().contains("peer"), "{error}");
}

/// A stateless (2026-07-28) request's `_meta`.
fn meta(version: &str) -> Value {
    json!({
        "io.modelcontextprotocol/protocolVersion": version,
        "io.modelcontextprotocol/clientCapabilities": {},
        "io.modelcontextprotocol/clientInfo": { "name": "test-client", "version": "0" },
    })
}

#[test]
fn mcp_server_discover_lists_versions_capabilities_and_identity() {
    let mut server = McpServer::new();
    let response = answer(
        &mut server,
        &request(1, "server/discover", json!({ "_meta": meta("2026-07-28") })),
    );
    let result = &response["result"];
    assert_eq!(result["resultType"], "complete", "{response}");
    assert_eq!(result["supportedVersions"][0], "2026-07-28", "{response}");
    assert!(
        result["supportedVersions"]
            .as_array()
            .unwrap()
            .contains(&json!("2024-11-05"))
    );
    assert_eq!(
        result["capabilities"],
        json!({ "tools": {}, "resources": {}, "prompts": {} })
    );
    assert_eq!(result["serverInfo"]["name"], SERVER_NAME);
    // Stateless: nothing was negotiated, and no handshake is needed after.
    assert_eq!(server.negotiated_protocol_version(), None);
}

#[test]
fn mcp_stateless_requests_are_served_without_a_handshake_and_say_so() {
    let mut server = McpServer::new();
    let list = answer(
        &mut server,
        &request(2, "tools/list", json!({ "_meta": meta("2026-07-28") })),
    );
    assert_eq!(list["result"]["resultType"], "complete", "{list}");
    assert_eq!(list["result"]["tools"].as_array().unwrap().len(), 2);
    let call = answer(
        &mut server,
        &request(
            3,
            "tools/call",
            json!({ "name": "add", "arguments": { "a": 1, "b": 2 }, "_meta": meta("2026-07-28") }),
        ),
    );
    assert_eq!(call["result"]["content"][0]["text"], "3", "{call}");
    assert_eq!(call["result"]["resultType"], "complete", "{call}");
    // A handshake-era request gets no resultType.
    let old = answer(&mut server, &request(4, "tools/list", json!({})));
    assert!(old["result"].get("resultType").is_none(), "{old}");
}

#[test]
fn mcp_an_unknown_revision_in_meta_is_refused_with_the_supported_list() {
    let mut server = McpServer::new();
    let response = answer(
        &mut server,
        &request(5, "tools/list", json!({ "_meta": meta("2099-01-01") })),
    );
    assert_error(&response, json!(5), UNSUPPORTED_PROTOCOL_VERSION);
    assert_eq!(
        response["error"]["data"]["supported"][0], "2026-07-28",
        "{response}"
    );
}

#[test]
fn mcp_a_stateless_request_without_client_capabilities_is_invalid_params() {
    let mut server = McpServer::new();
    let params = json!({ "_meta": { "io.modelcontextprotocol/protocolVersion": "2026-07-28" } });
    let response = answer(&mut server, &request(6, "tools/list", params));
    assert_error(&response, json!(6), INVALID_PARAMS);
}

#[test]
fn mcp_a_legacy_server_knows_no_discovery_and_ignores_meta() {
    let mut server = McpServer::new().speaking(&["2025-06-18", "2025-03-26"]);
    let response = answer(
        &mut server,
        &request(1, "server/discover", json!({ "_meta": meta("2026-07-28") })),
    );
    assert_error(&response, json!(1), METHOD_NOT_FOUND);
    // It negotiates down to the newest revision it speaks...
    let init = answer(&mut server, &initialize("2025-11-25"));
    assert_eq!(init["result"]["protocolVersion"], "2025-06-18");
    // ... and `_meta` is free-form to it.
    let list = answer(
        &mut server,
        &request(2, "tools/list", json!({ "_meta": meta("2099-01-01") })),
    );
    assert!(list["result"].get("resultType").is_none(), "{list}");
    assert_eq!(list["result"]["tools"].as_array().unwrap().len(), 2);
}

#[test]
fn the_binary_can_be_told_to_speak_fewer_revisions() {
    use crate::cli::Parsed;
    let parse = |args: &[&str]| super::parse_args(args.iter().map(std::ffi::OsString::from));
    assert_eq!(
        parse(&["--legacy"]).unwrap(),
        Parsed::Run(HANDSHAKE_PROTOCOL_VERSIONS.to_vec())
    );
    assert_eq!(
        parse(&["--protocol-versions", "2024-11-05, 2026-07-28"]).unwrap(),
        Parsed::Run(vec!["2024-11-05", "2026-07-28"])
    );
    assert!(
        parse(&["--protocol-versions", "1999-01-01"])
            .unwrap_err()
            .0
            .contains("unknown protocol revision")
    );
    assert!(parse(&["extra"]).is_err());
}

#[test]
fn mcp_the_one_resource_is_listed_and_read_and_an_unknown_uri_is_32002() {
    let mut server = ready_server();
    let listed = answer(&mut server, &request(2, "resources/list", json!({})));
    let resources = listed["result"]["resources"].as_array().expect("resources");
    assert_eq!(resources.len(), 1, "{listed}");
    let uri = resources[0]["uri"].as_str().expect("a uri");

    let read = answer(
        &mut server,
        &request(3, "resources/read", json!({ "uri": uri })),
    );
    let contents = read["result"]["contents"].as_array().expect("contents");
    assert_eq!(contents[0]["uri"], uri, "{read}");
    assert!(
        contents[0]["text"]
            .as_str()
            .is_some_and(|text| text.contains("echo")),
        "{read}"
    );

    let missing = answer(
        &mut server,
        &request(4, "resources/read", json!({ "uri": "example://nothing" })),
    );
    assert_error(&missing, json!(4), -32002);
    let no_uri = answer(&mut server, &request(5, "resources/read", json!({})));
    assert_error(&no_uri, json!(5), INVALID_PARAMS);
}

#[test]
fn mcp_the_greet_prompt_is_listed_and_filled_in_and_bad_arguments_are_32602() {
    let mut server = ready_server();
    let listed = answer(&mut server, &request(2, "prompts/list", json!({})));
    assert_eq!(listed["result"]["prompts"][0]["name"], "greet", "{listed}");
    assert_eq!(
        listed["result"]["prompts"][0]["arguments"][0]["required"], true,
        "{listed}"
    );

    let got = answer(
        &mut server,
        &request(
            3,
            "prompts/get",
            json!({ "name": "greet", "arguments": { "name": "Ada" } }),
        ),
    );
    let text = got["result"]["messages"][0]["content"]["text"]
        .as_str()
        .expect("a text message");
    assert!(text.contains("Ada"), "{got}");

    for (id, params) in [
        (4, json!({ "name": "greet" })),
        (5, json!({ "name": "greet", "arguments": { "name": 7 } })),
        (6, json!({ "name": "nope", "arguments": {} })),
    ] {
        let refused = answer(&mut server, &request(id, "prompts/get", params));
        assert_error(&refused, json!(id), INVALID_PARAMS);
    }
}
