//! Differential fuzzing of `IdScanner` against serde_json's view of the
//! top-level `id`.
//!
//! Structured inputs are JSON objects built from arbitrary data (ids first,
//! last, repeated, nested; escaped keys and strings; huge numbers), written
//! by the core's `testing::jsonrpc` writer with shuffled key order, random
//! whitespace and escapes, and fed in
//! arbitrary chunks: the scanner must find exactly the last top-level id as
//! it was written. Raw inputs are arbitrary bytes: the scanner must not
//! panic, must answer the same however they are chunked, and must agree
//! with serde_json wherever serde_json reads them as an object.

#![no_main]

use arbitrary::Arbitrary;
use childwire_core::jsonrpc::{IdScanner, MAX_ID_LEN};
use childwire_core::testing::jsonrpc::{Document, Json, document};
use libfuzzer_sys::fuzz_target;
use serde_json::Value as Serde;

#[derive(Debug, Arbitrary)]
enum Input {
    Structured {
        members: Vec<(Key, Value)>,
        /// Drives the key order, whitespace and escapes.
        seed: u64,
        chunks: Vec<u8>,
    },
    Raw {
        data: Vec<u8>,
        chunks: Vec<u8>,
    },
}

#[derive(Debug, Arbitrary)]
enum Key {
    Id,
    Other(String),
}

#[derive(Debug, Arbitrary)]
enum Value {
    Null,
    Bool(bool),
    Int(i64),
    Float {
        mantissa: i64,
        fraction: u32,
        exponent: i8,
    },
    /// Digits of a number far past `u64` (and, at length, the id cap).
    Huge(Vec<u8>),
    Str(String),
    Arr(Vec<Value>),
    Obj(Vec<(Key, Value)>),
}

impl Key {
    fn text(&self) -> String {
        match self {
            Key::Id => "id".to_string(),
            Key::Other(s) => s.clone(),
        }
    }
}

/// The members as the core's writer takes them.
fn members(members: &[(Key, Value)]) -> Vec<(String, Json)> {
    members
        .iter()
        .map(|(key, value)| (key.text(), value.json()))
        .collect()
}

impl Value {
    fn json(&self) -> Json {
        match self {
            Value::Null => Json::Null,
            Value::Bool(b) => Json::Bool(*b),
            Value::Int(n) => Json::Num(n.to_string()),
            Value::Float {
                mantissa,
                fraction,
                exponent,
            } => {
                // Within f64's range, so serde_json reads every document.
                let e = exponent / 2;
                Json::Num(format!("{mantissa}.{fraction}e{e}"))
            }
            Value::Huge(digits) => {
                // At most 300 digits: still within f64's range.
                let digits = digits.iter().take(299).map(|d| char::from(b'0' + d % 10));
                Json::Num(std::iter::once('1').chain(digits).collect())
            }
            Value::Str(s) => Json::Str(s.clone()),
            Value::Arr(items) => Json::Arr(items.iter().map(Value::json).collect()),
            Value::Obj(m) => Json::Obj(members(m)),
        }
    }
}

/// The scanner's answer for `data` fed in chunks of these sizes (cycled;
/// 0 feeds an empty chunk, then one byte).
fn scan(data: &[u8], chunks: &[u8]) -> Option<Vec<u8>> {
    let mut scanner = IdScanner::new();
    let mut rest = data;
    let mut sizes = chunks.iter().copied().cycle();
    while !rest.is_empty() {
        let n = match sizes.next() {
            None => rest.len(),
            Some(0) => {
                scanner.feed(&[]);
                1
            }
            Some(n) => usize::from(n).min(rest.len()),
        };
        let (chunk, tail) = rest.split_at(n);
        scanner.feed(chunk);
        rest = tail;
    }
    let id = scanner.id().map(|id| id.to_vec());
    assert!(id.as_ref().is_none_or(|id| id.len() <= MAX_ID_LEN));
    id
}

fn is_scalar(value: &Serde) -> bool {
    matches!(value, Serde::Null | Serde::Number(_) | Serde::String(_))
}

fuzz_target!(|input: Input| match input {
    Input::Structured {
        members,
        seed,
        chunks,
    } => {
        let Document {
            text: doc,
            last_id,
            expected,
        } = document(&self::members(&members), seed, true);

        // Nesting past serde_json's limit: the scanner refuses it too.
        let parsed = serde_json::from_slice::<Serde>(&doc);
        let too_deep =
            matches!(&parsed, Err(error) if error.to_string().contains("recursion limit"));
        let raw_len = last_id.as_ref().map_or(0, Vec::len);
        let expected = if too_deep { None } else { expected };
        let found = scan(&doc, &chunks);
        assert_eq!(found, expected, "doc {:?}", String::from_utf8_lossy(&doc));
        assert_eq!(scan(&doc, &[]), expected);

        let parsed = match parsed {
            Ok(parsed) => parsed,
            Err(_) if too_deep => return,
            Err(error) => panic!("the writer wrote invalid JSON: {error}"),
        };
        let serde_id = parsed.get("id");
        if let Some(raw) = &found {
            let ours: Serde = serde_json::from_slice(raw).expect("the id is valid JSON");
            assert_eq!(Some(&ours), serde_id);
        } else if let Some(id) = serde_id {
            // serde_json sees a usable id only if ours was too long.
            assert!(
                !is_scalar(id) || raw_len > MAX_ID_LEN,
                "serde_json found {id}"
            );
        }
    }
    Input::Raw { data, chunks } => {
        let whole = scan(&data, &[]);
        assert_eq!(scan(&data, &chunks), whole);
        match serde_json::from_slice::<Serde>(&data) {
            Ok(Serde::Object(map)) => match (&whole, map.get("id")) {
                (Some(raw), id) => {
                    let ours: Serde = serde_json::from_slice(raw).expect("the id is valid JSON");
                    assert_eq!(Some(&ours), id);
                }
                (None, Some(id)) if is_scalar(id) => {
                    // Escapes make the raw text at most 6 times longer
                    // than serde_json's compact form.
                    assert!(
                        id.to_string().len() * 6 > MAX_ID_LEN,
                        "serde_json found id {id} in {:?}",
                        String::from_utf8_lossy(&data)
                    );
                }
                (None, _) => {}
            },
            Ok(_) => assert_eq!(whole, None, "not an object"),
            Err(error) => {
                // The scanner skips the contents of strings other than
                // top-level keys and the id, and does not range-check
                // numbers; those are the only ways it may read a document
                // serde_json refuses.
                if whole.is_some() {
                    let message = error.to_string();
                    assert!(
                        [
                            "control character",
                            "invalid unicode code point",
                            "surrogate",
                            "escape",
                            "number out of range",
                        ]
                        .iter()
                        .any(|lenient| message.contains(lenient)),
                        "scanner found an id where serde_json says {message}: {:?}",
                        String::from_utf8_lossy(&data)
                    );
                }
            }
        }
    }
});
