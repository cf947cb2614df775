//! JSON-RPC 2.0 envelope: sorting an incoming object into request,
//! notification or response, and writing answers as one compact line.

use std::fmt::Display;

use serde_json::{Map, Value, json};

/// What an incoming JSON value turned out to be.
#[derive(Debug)]
pub(super) enum Incoming {
    /// Has a method and an id: must be answered.
    Request {
        id: Value,
        method: String,
        params: Option<Value>,
    },
    /// Has a method and no id: must never be answered.
    Notification { method: String },
    /// Has a result or an error: an answer to a request of ours.
    Response { id: Value },
    /// Anything else: answered with -32600 and `id` (null when the id itself
    /// was unusable).
    Invalid { id: Value, reason: String },
}

pub(super) fn classify(message: Value) -> Incoming {
    let Value::Object(mut object) = message else {
        let reason = match message {
            // MCP 2025-06-18 removed JSON-RPC batching, and 2024-11-05
            // clients never send it, so one error for the whole array is honest.
            Value::Array(_) => "batches are not supported".to_owned(),
            other => format!("a message must be a JSON object, got {}", kind(&other)),
        };
        return invalid(Value::Null, reason);
    };

    let id = object.remove("id");
    // MCP forbids null ids; JSON-RPC allows only strings and numbers besides.
    let id = match id {
        None => None,
        Some(id @ (Value::String(_) | Value::Number(_))) => Some(id),
        Some(other) => {
            return invalid(
                Value::Null,
                format!("id must be a string or a number, got {}", kind(&other)),
            );
        }
    };

    if object.get("jsonrpc") != Some(&Value::from("2.0")) {
        return invalid(
            id.unwrap_or(Value::Null),
            "\"jsonrpc\" must be \"2.0\"".to_owned(),
        );
    }

    match (object.remove("method"), id) {
        (Some(Value::String(method)), Some(id)) => Incoming::Request {
            id,
            method,
            params: object.remove("params"),
        },
        (Some(Value::String(method)), None) => Incoming::Notification { method },
        (Some(other), id) => invalid(
            id.unwrap_or(Value::Null),
            format!("method must be a string, got {}", kind(&other)),
        ),
        (None, Some(id)) if is_response(&object) => Incoming::Response { id },
        (None, id) => invalid(
            id.unwrap_or(Value::Null),
            "a request needs a \"method\"".to_owned(),
        ),
    }
}

fn is_response(object: &Map<String, Value>) -> bool {
    object.contains_key("result") || object.contains_key("error")
}

fn invalid(id: Value, reason: String) -> Incoming {
    Incoming::Invalid { id, reason }
}

/// The JSON type name of `value`, for error messages.
pub(super) fn kind(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

/// A success response. `Value`'s `Display` is compact JSON, which never
/// contains a raw newline, so the answer is always exactly one line.
pub(super) fn success(id: Value, result: Value) -> String {
    json!({ "jsonrpc": "2.0", "id": id, "result": result }).to_string()
}

/// An error response.
pub(super) fn failure(id: Value, code: i64, message: impl Display) -> String {
    json!({
        "jsonrpc": "2.0",
        "id": id,
        "error": { "code": code, "message": message.to_string() },
    })
    .to_string()
}

/// An error response with `data` (MCP puts the supported revisions there).
pub(super) fn failure_with_data(
    id: Value,
    code: i64,
    message: impl Display,
    data: Value,
) -> String {
    json!({
        "jsonrpc": "2.0",
        "id": id,
        "error": { "code": code, "message": message.to_string(), "data": data },
    })
    .to_string()
}
