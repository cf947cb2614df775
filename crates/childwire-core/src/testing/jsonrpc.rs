//! Generated documents for checking [`IdScanner`] against a JSON parser: a
//! JSON value, written with random key order, whitespace and escapes, and
//! the id the scanner must find in what was written.
//!
//! The writer records the raw text of the last top-level `id` member as it
//! went out, so the expected answer does not depend on the scanner's own
//! reading of the text.
//!
//! [`IdScanner`]: crate::jsonrpc::IdScanner

use crate::jsonrpc::MAX_ID_LEN;

/// A JSON value as generated; strings are decoded text.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Json {
    /// `null`.
    Null,
    /// `true` or `false`.
    Bool(bool),
    /// Raw number text, written as is: the generator makes it valid JSON.
    Num(String),
    /// A string, escaped when written.
    Str(String),
    /// An array.
    Arr(Vec<Json>),
    /// An object's members, in the order given (the writer shuffles them).
    Obj(Vec<(String, Json)>),
}

/// A written document and what it says of its id.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Document {
    /// The document: one object, with white space around it.
    pub text: Vec<u8>,
    /// The raw text of the last top-level `id` member's value, as written.
    pub last_id: Option<Vec<u8>>,
    /// What the scanner must report: `last_id` when that value is `null`, a
    /// number or a string, and at most [`MAX_ID_LEN`] bytes long.
    pub expected: Option<Vec<u8>>,
}

/// Writes `members` as one object, with every object's members shuffled
/// and random white space and escapes, all drawn from `seed`. With
/// `newlines` false the white space has no `\n`, so the document is one
/// line.
pub fn document(members: &[(String, Json)], seed: u64, newlines: bool) -> Document {
    let mut writer = Writer {
        out: Vec::new(),
        state: seed | 1,
        newlines,
    };
    writer.space();
    let last = writer.object(members);
    writer.space();
    let expected = match &last {
        Some((Json::Null | Json::Num(_) | Json::Str(_), raw)) if raw.len() <= MAX_ID_LEN => {
            Some(raw.clone())
        }
        _ => None,
    };
    Document {
        text: writer.out,
        last_id: last.map(|(_, raw)| raw),
        expected,
    }
}

struct Writer {
    out: Vec<u8>,
    /// A xorshift generator's state: never zero.
    state: u64,
    newlines: bool,
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
        while self.one_in(3) {
            let options: &[u8] = if self.newlines { b" \t\r\n" } else { b" \t\r" };
            let pick = options[(self.next() % options.len() as u64) as usize];
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
                '\t' if self.one_in(2) => self.out.extend_from_slice(b"\\t"),
                c if (c as u32) < 0x20 || self.one_in(5) => {
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

    fn value(&mut self, value: &Json) {
        match value {
            Json::Null => self.out.extend_from_slice(b"null"),
            Json::Bool(b) => self
                .out
                .extend_from_slice(if *b { b"true" } else { b"false" }),
            Json::Num(n) => self.out.extend_from_slice(n.as_bytes()),
            Json::Str(s) => self.string(s),
            Json::Arr(items) => {
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
            Json::Obj(members) => {
                self.object(members);
            }
        }
    }

    /// Writes the members in a shuffled order; returns the last `id`
    /// member's value and its raw text.
    fn object<'a>(&mut self, members: &'a [(String, Json)]) -> Option<(&'a Json, Vec<u8>)> {
        let mut order: Vec<usize> = (0..members.len()).collect();
        for i in (1..order.len()).rev() {
            let j = (self.next() % (i as u64 + 1)) as usize;
            order.swap(i, j);
        }
        let mut id = None;
        self.out.push(b'{');
        for (i, &at) in order.iter().enumerate() {
            let (key, value) = &members[at];
            self.space();
            if i > 0 {
                self.out.push(b',');
                self.space();
            }
            self.string(key);
            self.space();
            self.out.push(b':');
            self.space();
            let start = self.out.len();
            self.value(value);
            if key == "id" {
                id = Some((value, self.out[start..].to_vec()));
            }
        }
        self.space();
        self.out.push(b'}');
        id
    }
}
