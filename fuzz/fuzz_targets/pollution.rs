//! Differential fuzzing of the pollution classifier's JSON check against
//! serde_json, and of everything that reads what a child writes (the
//! classifier, the detector, stderr levels, the report summary) for panics.
//!
//! Structured inputs are JSON objects written by the core's
//! `testing::jsonrpc` writer (shuffled keys, random whitespace and
//! escapes), then perhaps damaged by one edit: the check must call every
//! undamaged one JSON, and agree with serde_json on every damaged one where
//! it claims to be exact. Raw inputs are arbitrary bytes, held to the same
//! agreement. Whatever the input, the classifier agrees with a model of its
//! rule (`model` below): which lines are messages, and that a line it names
//! is a JSON scalar exactly when it is JSON.

#![no_main]

use arbitrary::Arbitrary;
use bytes::Bytes;
use childwire_core::pollution::{
    NOTICE_HEAD_LEN, PollutionDetector, PollutionPolicy, check_json, classify, header_mismatch,
};
use childwire_core::stderr_level::{LogRecord, level_of};
use childwire_core::stderr_tail::summary_line;
use childwire_core::testing::jsonrpc::{Json, document};
use childwire_core::{Malformed, MalformedReason, PollutionKind};
use libfuzzer_sys::fuzz_target;
use serde_json::Value as Serde;

#[derive(Debug, Arbitrary)]
enum Input {
    Structured {
        members: Vec<(String, Value)>,
        /// Drives the key order, whitespace and escapes.
        seed: u64,
        edit: Option<Edit>,
    },
    Raw(Vec<u8>),
}

#[derive(Debug, Arbitrary)]
enum Value {
    Null,
    Bool(bool),
    Int(i64),
    Float { mantissa: i32, fraction: u16 },
    Str(String),
    Arr(Vec<Value>),
    Obj(Vec<(String, Value)>),
}

/// One damage to a written document, at a position taken modulo its
/// length.
#[derive(Debug, Arbitrary)]
enum Edit {
    Set(u16, u8),
    Insert(u16, u8),
    Remove(u16),
    Truncate(u16),
}

impl Value {
    fn json(&self) -> Json {
        match self {
            Value::Null => Json::Null,
            Value::Bool(b) => Json::Bool(*b),
            Value::Int(n) => Json::Num(n.to_string()),
            Value::Float { mantissa, fraction } => Json::Num(format!("{mantissa}.{fraction}")),
            Value::Str(s) => Json::Str(s.clone()),
            Value::Arr(items) => Json::Arr(items.iter().map(Value::json).collect()),
            Value::Obj(m) => Json::Obj(m.iter().map(|(k, v)| (k.clone(), v.json())).collect()),
        }
    }
}

impl Edit {
    fn apply(&self, doc: &mut Vec<u8>) {
        if doc.is_empty() {
            return;
        }
        let at = |i: &u16| usize::from(*i) % doc.len();
        match self {
            Edit::Set(i, b) => {
                let i = at(i);
                doc[i] = *b;
            }
            Edit::Insert(i, b) => {
                let i = at(i);
                doc.insert(i, *b);
            }
            Edit::Remove(i) => {
                let i = at(i);
                doc.remove(i);
            }
            Edit::Truncate(i) => {
                let i = at(i);
                doc.truncate(i);
            }
        }
    }
}

/// What the model says a line is.
enum Model {
    Message,
    /// A message if it is JSON (`[true]`), else named (`[INFO] ok [x]`).
    IfJson,
    Named,
}

/// Written apart from the classifier, from its documented rule.
fn model(bytes: &[u8]) -> Model {
    let space = |b: &u8| matches!(b, b' ' | b'\t' | b'\r' | b'\n');
    let start = bytes.iter().take_while(|b| space(b)).count();
    let end = bytes.len() - bytes.iter().rev().take_while(|b| space(b)).count();
    if end <= start + 1 {
        return Model::Named;
    }
    let trimmed = &bytes[start..end];
    match (trimmed[0], trimmed[trimmed.len() - 1]) {
        (b'{', b'}') => Model::Message,
        (b'[', b']') if trimmed[1].is_ascii_alphabetic() => Model::IfJson,
        (b'[', b']') => Model::Message,
        _ => Model::Named,
    }
}

/// The check against serde_json, and nothing that reads `bytes` panics.
fn check(bytes: &[u8]) {
    let ours = check_json(bytes);
    let serde = serde_json::from_slice::<Serde>(bytes);
    if ours.exact {
        assert_eq!(
            ours.is_json,
            serde.is_ok(),
            "{:?}: serde_json says {serde:?}",
            String::from_utf8_lossy(bytes)
        );
    } else if serde.is_ok() {
        // Not exact only where serde_json may refuse valid JSON; never
        // where it accepts what the check refuses.
        assert!(ours.is_json, "{:?}", String::from_utf8_lossy(bytes));
    }

    let kind = classify(bytes);
    // The model of what a message is: `{...}` or `[...]` once the spaces
    // around the line are left out, whatever is inside; a `[` followed by
    // a letter only if the line is JSON. Anything else is named, a JSON
    // value as a scalar.
    match model(bytes) {
        Model::Message => assert_eq!(kind, None, "{:?}", String::from_utf8_lossy(bytes)),
        Model::IfJson => assert_eq!(
            kind.is_none(),
            ours.is_json,
            "{:?}",
            String::from_utf8_lossy(bytes)
        ),
        Model::Named => {
            let named = kind.expect("a line that does not look like a message is named");
            assert_eq!(
                named == PollutionKind::JsonScalar,
                ours.is_json,
                "{named:?} for {:?}",
                String::from_utf8_lossy(bytes)
            );
        }
    }
    let mut detector = PollutionDetector::new(PollutionPolicy::Drop);
    let seen = detector.observe(bytes);
    assert_eq!(seen.deliver, kind.is_none());
    if let Some(notice) = seen.notice {
        assert!(notice.head.len() <= NOTICE_HEAD_LEN);
        assert_eq!(notice.len, bytes.len());
        let _ = notice.to_string();
    }
    // A second line of the same kind is counted, never reported.
    assert!(detector.observe(bytes).notice.is_none());
    assert_eq!(detector.counts().lines, 2);

    let _ = header_mismatch(bytes);
    let head = Bytes::copy_from_slice(&bytes[..bytes.len().min(1024)]);
    let _ = detector.observe_malformed(&Malformed::new(MalformedReason::InvalidHeader, head));

    let _ = level_of(bytes);
    if let Some(record) = LogRecord::parse(bytes) {
        assert!(record.fields.len() <= childwire_core::stderr_level::MAX_FIELDS);
    }
    let text = String::from_utf8_lossy(bytes);
    if let Some(line) = summary_line(&text) {
        assert!(text.lines().any(|l| l.trim() == line));
    }
}

fuzz_target!(|input: Input| match input {
    Input::Structured {
        members,
        seed,
        edit,
    } => {
        let members: Vec<_> = members.iter().map(|(k, v)| (k.clone(), v.json())).collect();
        let mut doc = document(&members, seed, true).text;
        if edit.is_none() {
            let ours = check_json(&doc);
            let too_deep = serde_json::from_slice::<Serde>(&doc)
                .is_err_and(|e| e.to_string().contains("recursion limit"));
            assert!(
                ours.is_json || too_deep,
                "the writer's JSON: {:?}",
                String::from_utf8_lossy(&doc)
            );
        }
        if let Some(edit) = edit {
            edit.apply(&mut doc);
        }
        check(&doc);
    }
    Input::Raw(data) => check(&data),
});
