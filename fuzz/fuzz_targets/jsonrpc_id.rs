//! Differential fuzzing of `IdScanner` against serde_json's view of the
//! top-level `id`.
//!
//! Structured inputs are JSON objects built from arbitrary data (ids first,
//! last, repeated, nested; escaped keys and strings; huge numbers), written
//! with shuffled key order, random whitespace and escapes, and fed in
//! arbitrary chunks: the scanner must find exactly the last top-level id as
//! it was written. Raw inputs are arbitrary bytes: the scanner must not
//! panic, must answer the same however they are chunked, and must agree
//! with serde_json wherever serde_json reads them as an object.

#![no_main]

use arbitrary::Arbitrary;
use childwire_core::jsonrpc::{IdScanner, MAX_ID_LEN};
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
    fn text(&self) -> &str {
        match self {
            Key::Id => "id",
            Key::Other(s) => s,
        }
    }
}

struct Writer {
    out: Vec<u8>,
    state: u64,
}

impl Writer {
    fn next(&mut self) -> u64 {
        self.state ^= self.state << 13;
        self.state ^= self.state >> 7;
        self.state ^= self.state << 17;
        self.state
    }

    fn one_in(&mut self, n: u64) -> bool {
        self.next() % n == 0
    }

    fn space(&mut self) {
        while self.one_in(4) {
            let pick = b" \t\r\n"[(self.next() % 4) as usize];
            self.out.push(pick);
        }
    }

    fn string(&mut self, s: &str) {
        self.out.push(b'"');
        for c in s.chars() {
            match c {
                '"' => self.out.extend_from_slice(b"\\\""),
                '\\' => self.out.extend_from_slice(b"\\\\"),
                '/' if self.one_in(2) => self.out.extend_from_slice(b"\\/"),
                '\n' if self.one_in(2) => self.out.extend_from_slice(b"\\n"),
                c if (c as u32) < 0x20 || self.one_in(6) => {
                    for unit in c.encode_utf16(&mut [0; 2]) {
                        let escaped = if self.one_in(2) {
                            format!("\\u{unit:04x}")
                        } else {
                            format!("\\u{unit:04X}")
                        };
                        self.out.extend_from_slice(escaped.as_bytes());
                    }
                }
                c => self
                    .out
                    .extend_from_slice(c.encode_utf8(&mut [0; 4]).as_bytes()),
            }
        }
        self.out.push(b'"');
    }

    fn value(&mut self, value: &Value) {
        match value {
            Value::Null => self.out.extend_from_slice(b"null"),
            Value::Bool(b) => self
                .out
                .extend_from_slice(if *b { b"true" } else { b"false" }),
            Value::Int(n) => self.out.extend_from_slice(n.to_string().as_bytes()),
            Value::Float {
                mantissa,
                fraction,
                exponent,
            } => {
                // Within f64's range, so serde_json reads every document.
                let e = exponent / 2;
                let text = format!("{mantissa}.{fraction}e{e}");
                self.out.extend_from_slice(text.as_bytes());
            }
            Value::Huge(digits) => {
                self.out.push(b'1');
                // At most 300 digits: still within f64's range.
                for d in digits.iter().take(299) {
                    self.out.push(b'0' + d % 10);
                }
            }
            Value::Str(s) => self.string(s),
            Value::Arr(items) => {
                self.out.push(b'[');
                for (i, item) in items.iter().enumerate() {
                    self.space();
                    if i > 0 {
                        self.out.push(b',');
                        self.space();
                    }
                    self.value(item);
                }
                self.space();
                self.out.push(b']');
            }
            Value::Obj(members) => {
                let order = self.shuffled(members.len());
                self.object(members, &order);
            }
        }
    }

    fn shuffled(&mut self, len: usize) -> Vec<usize> {
        let mut order: Vec<usize> = (0..len).collect();
        for i in (1..len).rev() {
            let j = (self.next() % (i as u64 + 1)) as usize;
            order.swap(i, j);
        }
        order
    }

    /// Writes the members in `order`; returns the last `id` member's value
    /// and its raw text.
    fn object<'a>(
        &mut self,
        members: &'a [(Key, Value)],
        order: &[usize],
    ) -> Option<(&'a Value, Vec<u8>)> {
        let mut id = None;
        self.out.push(b'{');
        for (i, &at) in order.iter().enumerate() {
            let (key, value) = &members[at];
            self.space();
            if i > 0 {
                self.out.push(b',');
                self.space();
            }
            self.string(key.text());
            self.space();
            self.out.push(b':');
            self.space();
            let start = self.out.len();
            self.value(value);
            if key.text() == "id" {
                id = Some((value, self.out[start..].to_vec()));
            }
        }
        self.space();
        self.out.push(b'}');
        id
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
        let mut writer = Writer {
            out: Vec::new(),
            state: seed | 1,
        };
        writer.space();
        let order = writer.shuffled(members.len());
        let last = writer.object(&members, &order);
        writer.space();
        let doc = writer.out;

        // Nesting past serde_json's limit: the scanner refuses it too.
        let parsed = serde_json::from_slice::<Serde>(&doc);
        let too_deep =
            matches!(&parsed, Err(error) if error.to_string().contains("recursion limit"));
        let raw_len = last.as_ref().map_or(0, |(_, raw)| raw.len());
        let expected = match last {
            _ if too_deep => None,
            Some((
                Value::Null | Value::Int(_) | Value::Float { .. } | Value::Huge(_) | Value::Str(_),
                raw,
            )) if raw.len() <= MAX_ID_LEN => Some(raw),
            _ => None,
        };
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
