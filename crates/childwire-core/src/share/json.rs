//! The few places of a JSON-RPC message the share reads or rewrites, found
//! in the message's bytes without parsing it into a value.
//!
//! A message is checked whole first ([`json_shape::check`]); after that the
//! top-level members and the members of `params`, `params._meta` and
//! `result` are walked with [`json_shape::skip_value`], which skips nested
//! values (string contents with `memchr`). Rewriting splices new bytes
//! into those spans only: member order, spacing and everything the share
//! does not touch stay as the sender wrote them.

use std::borrow::Cow;
use std::io::Write as _;
use std::ops::Range;

use bytes::Bytes;

use crate::json_shape::{self, skip_value, unescape};

/// What a message is, as far as the share needs to know.
#[derive(Debug, Default)]
pub(crate) struct Parsed<'a> {
    /// The top-level `id` value's span, if there is one.
    pub(crate) id: Option<Range<usize>>,
    /// The top-level `method`, decoded, if it is a string.
    pub(crate) method: Option<Cow<'a, str>>,
    /// A top-level `method` member exists (whatever its value).
    pub(crate) has_method: bool,
    /// The top-level `params` value's span.
    pub(crate) params: Option<Range<usize>>,
    /// The top-level `result` value's span.
    pub(crate) result: Option<Range<usize>>,
    /// A top-level `error` member exists.
    pub(crate) has_error: bool,
}

impl<'a> Parsed<'a> {
    /// `message` read, or `None` if it is not one JSON object (checked
    /// whole, as JSON's grammar says).
    pub(crate) fn of(message: &'a [u8]) -> Option<Self> {
        if !json_shape::check(message).is_json {
            return None;
        }
        Self::walk(message)
    }

    /// `message` read by its structure alone (brackets balanced outside
    /// strings, members `"key": value`), for the server's messages: the
    /// share only routes them, so a value broken inside stays the
    /// server's business, and the full check's cost is saved on every
    /// answer. `None` if it is not structurally one object.
    pub(crate) fn of_structure(message: &'a [u8]) -> Option<Self> {
        Self::walk(message)
    }

    fn walk(message: &'a [u8]) -> Option<Self> {
        let mut parsed = Parsed::default();
        let complete = for_each_member(message, 0..message.len(), |key, value| {
            if key_is(key, "id") {
                parsed.id = Some(value);
            } else if key_is(key, "method") {
                parsed.has_method = true;
                parsed.method = string_value(message, value);
            } else if key_is(key, "params") {
                parsed.params = Some(value);
            } else if key_is(key, "result") {
                parsed.result = Some(value);
            } else if key_is(key, "error") {
                parsed.has_error = true;
            }
        });
        let end = complete?;
        message[end..]
            .iter()
            .all(u8::is_ascii_whitespace)
            .then_some(parsed)
    }

    /// The id's raw JSON text.
    pub(crate) fn id_text<'m>(&self, message: &'m [u8]) -> Option<&'m [u8]> {
        self.id.clone().map(|span| &message[span])
    }
}

/// Whether the raw id text is one a request may carry: a string or a
/// number (not `null`, not a structure).
pub(crate) fn is_request_id(raw: &[u8]) -> bool {
    matches!(raw.first(), Some(b'"' | b'-' | b'0'..=b'9'))
}

/// The span of the member `name` of the object at `object` (a span of
/// `message`), the last one when the key repeats.
pub(crate) fn member(message: &[u8], object: Range<usize>, name: &str) -> Option<Range<usize>> {
    let mut found = None;
    for_each_member(message, object, |key, value| {
        if key_is(key, name) {
            found = Some(value);
        }
    })?;
    found
}

/// The span at `path` below the object at `object`.
pub(crate) fn path(message: &[u8], object: Range<usize>, path: &[&str]) -> Option<Range<usize>> {
    let mut span = object;
    for name in path {
        span = member(message, span, name)?;
    }
    Some(span)
}

/// The keys of the object at `object`, decoded (at most `max`).
pub(crate) fn keys(message: &[u8], object: Range<usize>, max: usize) -> Vec<String> {
    let mut keys = Vec::new();
    for_each_member(message, object, |key, _| {
        if keys.len() < max {
            keys.push(decode_key(key).into_owned());
        }
    });
    keys
}

/// The decoded contents of the string at `span`, if it is one.
pub(crate) fn string_value(message: &[u8], span: Range<usize>) -> Option<Cow<'_, str>> {
    let raw = &message[span];
    let inner = raw.strip_prefix(b"\"")?.strip_suffix(b"\"")?;
    if !inner.contains(&b'\\') {
        return Some(String::from_utf8_lossy(inner));
    }
    Some(unescape(inner))
}

/// Calls `f` with each member of the object whose value spans `object` in
/// `message` (already checked to be JSON): the key's raw text between its
/// quotes, and the value's span. Where the object ends (past its `}`), or
/// `None` if `object` is not an object.
fn for_each_member(
    message: &[u8],
    object: Range<usize>,
    mut f: impl FnMut(&[u8], Range<usize>),
) -> Option<usize> {
    let end = object.end;
    let bytes = &message[..end];
    let ws = |at: &mut usize| {
        while let Some(b' ' | b'\t' | b'\r' | b'\n') = bytes.get(*at) {
            *at += 1;
        }
    };
    let mut at = object.start;
    ws(&mut at);
    if bytes.get(at) != Some(&b'{') {
        return None;
    }
    at += 1;
    ws(&mut at);
    if bytes.get(at) == Some(&b'}') {
        return Some(at + 1);
    }
    loop {
        if bytes.get(at) != Some(&b'"') {
            return None;
        }
        let key_end = skip_value(bytes, at)?;
        let key = &bytes[at + 1..key_end - 1];
        at = key_end;
        ws(&mut at);
        if bytes.get(at) != Some(&b':') {
            return None;
        }
        at += 1;
        ws(&mut at);
        let value_end = skip_value(bytes, at)?;
        f(key, at..value_end);
        at = value_end;
        ws(&mut at);
        match bytes.get(at) {
            Some(b',') => {
                at += 1;
                ws(&mut at);
            }
            Some(b'}') => return Some(at + 1),
            _ => return None,
        }
    }
}

/// Whether a key's raw text (between its quotes) reads as `name`. Keys
/// are short: a byte loop beats `memchr`'s set-up.
fn key_is(raw: &[u8], name: &str) -> bool {
    if raw == name.as_bytes() {
        return true;
    }
    raw.contains(&b'\\') && unescape(raw) == name
}

fn decode_key(raw: &[u8]) -> Cow<'_, str> {
    unescape(raw)
}

/// `message` with each span replaced by its bytes; the spans must not
/// overlap (any order).
pub(crate) fn splice(message: &[u8], edits: &mut [(Range<usize>, &[u8])]) -> Bytes {
    edits.sort_unstable_by_key(|(span, _)| span.start);
    let grown: usize = edits.iter().map(|(_, bytes)| bytes.len()).sum();
    let mut out = Vec::with_capacity(message.len() + grown);
    let mut at = 0;
    for (span, bytes) in edits.iter() {
        out.extend_from_slice(&message[at..span.start]);
        out.extend_from_slice(bytes);
        at = span.end;
    }
    out.extend_from_slice(&message[at..]);
    Bytes::from(out)
}

/// A key for an id (raw JSON text) under which JSON-RPC's equal ids are
/// equal: a string's decoded characters, or a number's text as written
/// (a small integer, the usual id, without an allocation).
pub(crate) fn id_key(raw: &[u8]) -> Option<IdKey> {
    match raw.first()? {
        b'"' => {
            let inner = &raw[1..raw.len().saturating_sub(1).max(1)];
            Some(IdKey::Text(unescape(inner).into_owned().into_boxed_str()))
        }
        b'-' | b'0'..=b'9' => {
            // Digits only, at most 18 of them and no leading zero: its text
            // is exactly what `i64` prints.
            let digits = raw.strip_prefix(b"-").unwrap_or(raw);
            let plain = !digits.is_empty()
                && digits.len() <= 18
                && (digits[0] != b'0' || digits.len() == 1)
                && digits.iter().all(u8::is_ascii_digit)
                && raw != b"-0";
            if plain {
                let value = digits
                    .iter()
                    .fold(0i64, |n, d| n * 10 + i64::from(d - b'0'));
                return Some(IdKey::Int(if raw[0] == b'-' { -value } else { value }));
            }
            Some(IdKey::Number(raw.to_vec().into_boxed_slice()))
        }
        _ => None,
    }
}

/// See [`id_key`].
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub(crate) enum IdKey {
    /// A number that is a small integer, written plainly.
    Int(i64),
    /// Any other number, as written (`1.0` is not `1`).
    Number(Box<[u8]>),
    /// A string's characters.
    Text(Box<str>),
}

/// The number a share wrote as an id or a token: plain decimal digits, no
/// sign, no leading zero.
pub(crate) fn share_number(raw: &[u8]) -> Option<u64> {
    if raw.is_empty() || raw.len() > 20 || (raw[0] == b'0' && raw.len() > 1) {
        return None;
    }
    if !raw.iter().all(u8::is_ascii_digit) {
        return None;
    }
    std::str::from_utf8(raw).ok()?.parse().ok()
}

pub(crate) use crate::jsonrpc::json_string;

/// A JSON-RPC error response: compact JSON, no newline. `id` is raw JSON
/// text (empty: `null`); `data`, raw JSON text, is left out when `None`.
pub(crate) fn error_response(id: &[u8], code: i32, message: &str, data: Option<&[u8]>) -> Bytes {
    let id = if id.is_empty() { &b"null"[..] } else { id };
    let mut out = Vec::with_capacity(64 + id.len() + message.len());
    out.extend_from_slice(br#"{"jsonrpc":"2.0","id":"#);
    out.extend_from_slice(id);
    let _ = write!(out, r#","error":{{"code":{code},"message":"#);
    json_string(&mut out, message);
    if let Some(data) = data {
        out.extend_from_slice(br#","data":"#);
        out.extend_from_slice(data);
    }
    out.extend_from_slice(b"}}");
    Bytes::from(out)
}

/// A JSON-RPC success response with `result` (raw JSON text).
pub(crate) fn result_response(id: &[u8], result: &[u8]) -> Bytes {
    let mut out = Vec::with_capacity(40 + id.len() + result.len());
    out.extend_from_slice(br#"{"jsonrpc":"2.0","id":"#);
    out.extend_from_slice(id);
    out.extend_from_slice(br#","result":"#);
    out.extend_from_slice(result);
    out.push(b'}');
    Bytes::from(out)
}

/// `notifications/cancelled` for request `id` (raw JSON text).
pub(crate) fn cancelled(id: &[u8], reason: &str) -> Bytes {
    let mut out = Vec::with_capacity(100 + id.len() + reason.len());
    out.extend_from_slice(
        br#"{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":"#,
    );
    out.extend_from_slice(id);
    out.extend_from_slice(br#","reason":"#);
    json_string(&mut out, reason);
    out.extend_from_slice(b"}}");
    Bytes::from(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn finds_members_at_any_place() {
        let m = br#" {"params":{"_meta":{"progressToken":"t"},"x":{"progressToken":1}},"\u0069d":7,"method":"tools/call"} "#;
        let p = Parsed::of(m).unwrap();
        assert_eq!(p.id_text(m), Some(&b"7"[..]));
        assert_eq!(p.method.as_deref(), Some("tools/call"));
        let token = path(m, p.params.clone().unwrap(), &["_meta", "progressToken"]).unwrap();
        assert_eq!(&m[token.clone()], b"\"t\"");
        let out = splice(m, &mut [(token, b"9"), (p.id.unwrap(), b"\"a\"")]);
        assert_eq!(
            &out[..],
            &br#" {"params":{"_meta":{"progressToken":9},"x":{"progressToken":1}},"\u0069d":"a","method":"tools/call"} "#[..]
        );
    }

    #[test]
    fn refuses_what_is_not_one_object() {
        for bad in [
            &b"[1]"[..],
            b"{",
            b"nope",
            b"{\"id\":1}x",
            b"",
            b"{\"id\":1} {}",
        ] {
            assert!(Parsed::of(bad).is_none(), "{bad:?}");
            assert!(Parsed::of_structure(bad).is_none(), "{bad:?}");
        }
        // Broken inside a value: refused whole, routed by its structure.
        let inside = br#"{"id":1,"result":{"n":01}}"#;
        assert!(Parsed::of(inside).is_none());
        assert_eq!(
            Parsed::of_structure(inside).unwrap().id_text(inside),
            Some(&b"1"[..])
        );
    }

    #[test]
    fn ids_compare_as_json() {
        assert_eq!(id_key(br#""\u0061""#), id_key(br#""a""#));
        assert_ne!(id_key(b"1"), id_key(br#""1""#));
        assert_eq!(id_key(b"-12"), Some(IdKey::Int(-12)));
        assert_ne!(id_key(b"1.0"), id_key(b"1"));
        assert_ne!(id_key(b"-0"), id_key(b"0"));
        assert!(matches!(
            id_key(b"1234567890123456789"),
            Some(IdKey::Number(_))
        ));
        assert_eq!(share_number(b"12"), Some(12));
        assert_eq!(share_number(b"012"), None);
        assert_eq!(share_number(b"-1"), None);
    }
}
