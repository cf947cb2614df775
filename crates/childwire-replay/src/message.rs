//! What a JSON-RPC message is (request, notification, response), and its
//! `id` rewritten in place.
//!
//! A replayed response must be the recorded one byte for byte except for
//! its id: member order, spacing and number formatting are what the host
//! under test saw from the real server, and a host bug may hang on them.
//! So the message is never re-serialized; [`member_span`] finds where the
//! top-level `id` value sits in the text and only those bytes change.

use std::ops::Range;

use serde_json::value::RawValue;

/// The shape of one message, as far as matching needs it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Shape {
    /// `method` and `id`: answered by a response with that id.
    Request {
        /// The method's name.
        method: String,
        /// The id, canonical (see [`canonical_id`]).
        id: String,
    },
    /// `method` without `id`.
    Notification {
        /// The method's name.
        method: String,
    },
    /// `id` without `method`: a result or an error.
    Response {
        /// The id, canonical (see [`canonical_id`]).
        id: String,
    },
    /// Anything else: not JSON, not an object, a batch, an object with
    /// neither `method` nor `id`, a `method` that is not a string.
    Other,
}

impl Shape {
    /// The shape of `message`.
    pub(crate) fn of(message: &[u8]) -> Self {
        // Checked whole first: the span scanner below trusts its input.
        if serde_json::from_slice::<&RawValue>(message).is_err() {
            return Shape::Other;
        }
        let method = member_span(message, "method")
            .map(|span| serde_json::from_slice::<String>(&message[span]).ok());
        let id = member_span(message, "id").map(|span| canonical_id(&message[span]));
        match (method, id) {
            (Some(Some(method)), Some(id)) => Shape::Request { method, id },
            (Some(Some(method)), None) => Shape::Notification { method },
            (None, Some(id)) => Shape::Response { id },
            _ => Shape::Other,
        }
    }
}

/// Where a request carries its progress token (MCP:
/// `params._meta.progressToken`).
pub(crate) const REQUEST_PROGRESS_TOKEN: &[&str] = &["params", "_meta", "progressToken"];

/// Where a progress notification names the request's token.
pub(crate) const PROGRESS_TOKEN: &[&str] = &["params", "progressToken"];

/// `message` with the value of its top-level `id` replaced by `id` (raw
/// JSON text); unchanged when it has none.
pub(crate) fn with_id(message: &[u8], id: &[u8]) -> Vec<u8> {
    with_value_at(message, &["id"], id)
}

/// `message` with the value at `path` replaced by `value` (raw JSON text);
/// unchanged when it has none.
pub(crate) fn with_value_at(message: &[u8], path: &[&str], value: &[u8]) -> Vec<u8> {
    let Some(span) = path_span(message, path) else {
        return message.to_vec();
    };
    let mut out = Vec::with_capacity(message.len() - span.len() + value.len());
    out.extend_from_slice(&message[..span.start]);
    out.extend_from_slice(value);
    out.extend_from_slice(&message[span.end..]);
    out
}

/// Where the value at `path` sits: a top-level member, a member of that,
/// and so on. `json` must be valid JSON, as for [`member_span`].
pub(crate) fn path_span(json: &[u8], path: &[&str]) -> Option<Range<usize>> {
    let mut span = 0..json.len();
    for name in path {
        let inner = member_span(&json[span.clone()], name)?;
        span = span.start + inner.start..span.start + inner.end;
    }
    Some(span)
}

/// An id as one string, so that `7`, `7 ` and `"a"` vs `"\u0061"` compare
/// the way JSON-RPC means them: the value re-serialized, or the raw text if
/// it is not JSON.
pub(crate) fn canonical_id(raw: &[u8]) -> String {
    match serde_json::from_slice::<serde_json::Value>(raw) {
        Ok(value) => value.to_string(),
        Err(_) => String::from_utf8_lossy(raw).into_owned(),
    }
}

/// Where the value of the top-level member `name` of the JSON object `json`
/// sits, or `None` if `json` is not an object or has no such member (the
/// first one counts when a key repeats). Keys are compared as JSON reads
/// them: `"\u0069d"` is `id`.
///
/// `json` must be valid JSON (check it first): on anything else the answer
/// is `None` or a meaningless range inside `json`, never a panic.
pub(crate) fn member_span(json: &[u8], name: &str) -> Option<Range<usize>> {
    let mut at = skip_space(json, 0);
    if json.get(at) != Some(&b'{') {
        return None;
    }
    at += 1;
    loop {
        at = skip_space(json, at);
        if json.get(at) != Some(&b'"') {
            // `}`: the object ended without it.
            return None;
        }
        let key_end = string_end(json, at)?;
        let key = &json[at..key_end];
        at = skip_space(json, key_end);
        if json.get(at) != Some(&b':') {
            return None;
        }
        let value_start = skip_space(json, at + 1);
        let value_end = value_end(json, value_start)?;
        if key_is(key, name) {
            return Some(value_start..value_end);
        }
        at = skip_space(json, value_end);
        if json.get(at) != Some(&b',') {
            return None;
        }
        at += 1;
    }
}

/// Whether the JSON string `key` (quotes included) reads as `name`.
fn key_is(key: &[u8], name: &str) -> bool {
    let inner = &key[1..key.len() - 1];
    if !inner.contains(&b'\\') {
        return inner == name.as_bytes();
    }
    serde_json::from_slice::<String>(key).is_ok_and(|key| key == name)
}

fn skip_space(json: &[u8], mut at: usize) -> usize {
    while matches!(json.get(at), Some(b' ' | b'\t' | b'\n' | b'\r')) {
        at += 1;
    }
    at
}

/// The end (exclusive) of the string whose opening quote is at `start`.
fn string_end(json: &[u8], start: usize) -> Option<usize> {
    let mut at = start + 1;
    loop {
        match json.get(at)? {
            b'\\' => at += 2,
            b'"' => return Some(at + 1),
            _ => at += 1,
        }
    }
}

/// The end (exclusive) of the value starting at `start`.
fn value_end(json: &[u8], start: usize) -> Option<usize> {
    match json.get(start)? {
        b'"' => string_end(json, start),
        b'{' | b'[' => {
            let mut depth = 0usize;
            let mut at = start;
            loop {
                match json.get(at)? {
                    b'"' => {
                        at = string_end(json, at)?;
                        continue;
                    }
                    b'{' | b'[' => depth += 1,
                    b'}' | b']' => {
                        depth -= 1;
                        if depth == 0 {
                            return Some(at + 1);
                        }
                    }
                    _ => {}
                }
                at += 1;
            }
        }
        // A number or a literal: up to the next delimiter.
        _ => {
            let len = json[start..]
                .iter()
                .position(|byte| matches!(byte, b',' | b'}' | b']' | b' ' | b'\t' | b'\n' | b'\r'))
                .unwrap_or(json.len() - start);
            Some(start + len)
        }
    }
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;
    use serde_json::{Value, json};

    use super::*;

    fn id_text(json: &str) -> Option<&str> {
        member_span(json.as_bytes(), "id").map(|span| &json[span])
    }

    #[test]
    fn finds_the_top_level_id_whatever_the_order_and_nesting() {
        assert_eq!(
            id_text(r#"{"jsonrpc":"2.0","id":7,"method":"x"}"#),
            Some("7")
        );
        assert_eq!(
            id_text(r#"{"result":{"id":1,"a":[{"id":2}]},"jsonrpc":"2.0","id":"r-3"}"#),
            Some(r#""r-3""#)
        );
        assert_eq!(id_text(r#" { "id" : -1.5e3 , "x":1}"#), Some("-1.5e3"));
        assert_eq!(id_text(r#"{"\u0069d":null}"#), Some("null"));
        assert_eq!(id_text(r#"{"s":"}\"id\":5","id":6}"#), Some("6"));
        assert_eq!(id_text(r#"{"method":"x"}"#), None);
        assert_eq!(id_text(r#"[{"id":1}]"#), None);
        assert_eq!(id_text(r#""id""#), None);
    }

    #[test]
    fn shapes() {
        let shape = |text: &str| Shape::of(text.as_bytes());
        assert_eq!(
            shape(r#"{"jsonrpc":"2.0","id":1,"method":"ping"}"#),
            Shape::Request {
                method: "ping".into(),
                id: "1".into()
            }
        );
        assert_eq!(
            shape(r#"{"method":"notifications/initialized"}"#),
            Shape::Notification {
                method: "notifications/initialized".into()
            }
        );
        assert_eq!(
            shape(r#"{"id":"\u0061","result":{}}"#),
            Shape::Response {
                id: r#""a""#.into()
            }
        );
        for other in ["not json", "[1,2]", "{}", r#"{"method":3}"#, r#"{"id":1"#] {
            assert_eq!(shape(other), Shape::Other, "{other}");
        }
    }

    #[test]
    fn nested_values_are_found_by_path() {
        let message =
            br#"{"id":1,"params":{"x":{"progressToken":0},"_meta":{"progressToken":"t-1"}}}"#;
        let span = path_span(message, REQUEST_PROGRESS_TOKEN).unwrap();
        assert_eq!(&message[span], br#""t-1""#);
        assert_eq!(path_span(message, PROGRESS_TOKEN), None);
        assert_eq!(
            with_value_at(message, REQUEST_PROGRESS_TOKEN, b"7"),
            br#"{"id":1,"params":{"x":{"progressToken":0},"_meta":{"progressToken":7}}}"#
        );
    }

    #[test]
    fn rewriting_the_id_changes_nothing_else() {
        let message = br#"{"result":{"id":1},"jsonrpc":"2.0", "id" : 17 }"#;
        assert_eq!(
            with_id(message, br#""live-1""#),
            br#"{"result":{"id":1},"jsonrpc":"2.0", "id" : "live-1" }"#
        );
        assert_eq!(with_id(b"{\"x\":1}", b"2"), b"{\"x\":1}");
    }

    /// Arbitrary JSON values, objects likely.
    fn json_value() -> impl Strategy<Value = Value> {
        let leaf = prop_oneof![
            Just(Value::Null),
            any::<bool>().prop_map(Value::from),
            any::<i64>().prop_map(Value::from),
            any::<f64>()
                .prop_filter("finite", |f| f.is_finite())
                .prop_map(Value::from),
            "[a-z\"\\\\{}\\[\\],: \u{e9}\u{1F600}]{0,8}".prop_map(Value::from),
        ];
        leaf.prop_recursive(4, 32, 6, |inner| {
            prop_oneof![
                prop::collection::vec(inner.clone(), 0..4).prop_map(Value::from),
                prop::collection::vec(("(id|method|[a-z]{1,3})", inner), 0..5)
                    .prop_map(|members| Value::Object(members.into_iter().collect())),
            ]
        })
    }

    proptest! {
        /// The scanner agrees with serde_json on every top-level member,
        /// compact or pretty-printed.
        #[test]
        fn member_span_agrees_with_serde_json(value in json_value(), pretty in any::<bool>()) {
            let text = if pretty {
                serde_json::to_string_pretty(&value).unwrap()
            } else {
                value.to_string()
            };
            // Both sides read by serde_json: its float parsing is not exact.
            let value: Value = serde_json::from_str(&text).unwrap();
            for name in ["id", "method", "a"] {
                let found = member_span(text.as_bytes(), name)
                    .map(|span| serde_json::from_str::<Value>(&text[span]).unwrap());
                prop_assert_eq!(found.as_ref(), value.get(name), "{} in {}", name, text);
            }
        }

        /// Garbage never panics the scanner.
        #[test]
        fn member_span_never_panics(bytes in prop::collection::vec(any::<u8>(), 0..64)) {
            let _ = member_span(&bytes, "id");
            let _ = Shape::of(&bytes);
        }
    }

    #[test]
    fn canonical_ids_compare_as_json_values() {
        assert_eq!(canonical_id(b"\"\\u0061\""), canonical_id(b"\"a\""));
        assert_eq!(canonical_id(b" 7"), "7");
        assert_ne!(canonical_id(b"7"), canonical_id(b"\"7\""));
        assert_eq!(json!(canonical_id(b"{")), json!("{"));
    }
}
