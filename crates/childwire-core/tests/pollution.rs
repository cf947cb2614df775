//! C39: stdout pollution and framing mismatch are named, with their bytes,
//! once per kind; the JSON check agrees with serde_json wherever it claims
//! to be exact.

use bytes::Bytes;
use childwire_core::ContentLengthDecoder;
use childwire_core::LineDecoder;
use childwire_core::pollution::{
    NOTICE_HEAD_LEN, PollutionDetector, PollutionPolicy, check_json, classify, header_mismatch,
};
use childwire_core::{Frame, Malformed, MalformedReason, PollutionKind};
use proptest::prelude::*;

/// What a line decoder delivers for `wire`, each message through the
/// detector: (the messages delivered, the notices).
fn through_lines(
    detector: &mut PollutionDetector,
    wire: &[u8],
) -> (Vec<String>, Vec<childwire_core::PollutionNotice>) {
    let mut decoder = LineDecoder::new(1 << 20);
    decoder.handle_data(wire);
    decoder.handle_eof();
    let (mut delivered, mut notices) = (Vec::new(), Vec::new());
    while let Some(frame) = decoder.poll_frame() {
        let Frame::Message(message) = frame else {
            panic!("only messages here, got {frame:?}");
        };
        let seen = detector.observe(&message);
        notices.extend(seen.notice);
        if seen.deliver {
            delivered.push(String::from_utf8_lossy(&message).into_owned());
        }
    }
    (delivered, notices)
}

#[test]
fn c39_a_banner_then_json_is_one_notice_and_the_session_goes_on() {
    let wire = b"Starting server on stdio...\nLoaded 3 tools\n\
                 {\"jsonrpc\":\"2.0\",\"id\":0,\"result\":{}}\n\
                 {\"jsonrpc\":\"2.0\",\"method\":\"notifications/initialized\"}\n";
    let mut detector = PollutionDetector::default();
    let (delivered, notices) = through_lines(&mut detector, wire);

    assert_eq!(
        notices.len(),
        1,
        "one notice for two banner lines: {notices:?}"
    );
    let notice = &notices[0];
    assert_eq!(notice.kind, PollutionKind::Text);
    assert_eq!(notice.line, 1);
    assert_eq!(&notice.head[..], b"Starting server on stdio...");
    assert!(!notice.dropped);
    assert!(notice.to_string().contains("banner"), "{notice}");
    // Deliver (the default) changes nothing: all four lines go on.
    assert_eq!(delivered.len(), 4);
    let counts = detector.counts();
    assert_eq!((counts.lines, counts.polluted, counts.dropped), (4, 2, 0));
    assert_eq!(counts.of(PollutionKind::Text), 2);
}

#[test]
fn c39_drop_policy_delivers_only_json_and_counts_the_rest() {
    let wire = b"banner\n{\"id\":1}\nmore text\n[INFO] ready\n{\"id\":2}\n";
    let mut detector = PollutionDetector::new(PollutionPolicy::Drop);
    let (delivered, notices) = through_lines(&mut detector, wire);
    assert_eq!(delivered, [r#"{"id":1}"#, r#"{"id":2}"#]);
    let kinds: Vec<_> = notices
        .iter()
        .map(|n| (n.kind, n.line, n.dropped))
        .collect();
    assert_eq!(
        kinds,
        [
            (PollutionKind::Text, 1, true),
            (PollutionKind::LogLine, 4, true)
        ]
    );
    let counts = detector.counts();
    assert_eq!((counts.lines, counts.polluted, counts.dropped), (5, 3, 3));
}

#[test]
fn c39_divert_policy_delivers_only_json_and_leaves_the_rest_to_its_caller() {
    let wire = b"banner\n{\"id\":1}\nmore text\n[INFO] ready\n";
    let mut detector = PollutionDetector::new(PollutionPolicy::Divert);
    let (delivered, notices) = through_lines(&mut detector, wire);
    assert_eq!(delivered, [r#"{"id":1}"#]);
    let kinds: Vec<_> = notices
        .iter()
        .map(|n| (n.kind, n.line, n.diverted, n.dropped))
        .collect();
    assert_eq!(
        kinds,
        [
            (PollutionKind::Text, 1, true, false),
            (PollutionKind::LogLine, 4, true, false)
        ]
    );
    // The caller says what became of each line it was not to deliver.
    detector.diverted(true);
    detector.diverted(true);
    detector.diverted(false);
    let counts = detector.counts();
    assert_eq!(
        (
            counts.lines,
            counts.polluted,
            counts.diverted,
            counts.dropped
        ),
        (4, 3, 2, 1)
    );
}

#[test]
fn c39_an_lsp_server_spoken_to_as_ndjson_is_named_once() {
    // What a line decoder makes of two LSP frames: header lines, blank
    // lines (skipped) and bodies glued to the next header.
    let body = r#"{"jsonrpc":"2.0","id":1,"result":{"capabilities":{}}}"#;
    let wire = format!(
        "Content-Length: {}\r\n\r\n{body}Content-Length: {}\r\n\r\n{body}",
        body.len(),
        body.len()
    );
    let mut detector = PollutionDetector::default();
    let (_, notices) = through_lines(&mut detector, wire.as_bytes());
    assert_eq!(notices.len(), 1, "one notice names the cause: {notices:?}");
    assert_eq!(notices[0].kind, PollutionKind::ContentLengthHeader);
    assert_eq!(notices[0].line, 1);
    assert!(
        notices[0].to_string().contains("LSP-style framing"),
        "{}",
        notices[0]
    );
    assert_eq!(
        detector.counts().of(PollutionKind::ContentLengthHeader),
        1,
        "the second header is glued to the first body: {notices:?}"
    );
    assert_eq!(
        notices
            .iter()
            .filter(|n| n.kind == PollutionKind::ContentLengthHeader)
            .count(),
        1
    );
}

#[test]
fn c39_an_ndjson_server_on_a_content_length_channel_is_named() {
    let mut decoder = ContentLengthDecoder::new(1 << 20);
    decoder.handle_data(b"{\"jsonrpc\":\"2.0\",\"id\":0,\"result\":{}}\n");
    decoder.handle_data(b"{\"jsonrpc\":\"2.0\",\"method\":\"x\"}\n");
    decoder.handle_eof();
    let mut detector = PollutionDetector::default();
    let mut notices = Vec::new();
    while let Some(frame) = decoder.poll_frame() {
        if let Frame::Malformed(malformed) = frame {
            notices.extend(detector.observe_malformed(&malformed));
        }
    }
    assert_eq!(notices.len(), 1, "{notices:?}");
    assert_eq!(notices[0].kind, PollutionKind::JsonOnContentLength);
    assert!(notices[0].dropped);
    assert!(notices[0].head.starts_with(b"{\"jsonrpc\""));
    assert_eq!(
        notices[0].to_string(),
        "stdout line 1: JSON where a `Content-Length` header belongs: the server speaks \
         newline-delimited JSON; it began: \"{\\\"jsonrpc\\\":\\\"2.0\\\",\\\"id\\\":0,\\\"result\\\":{}}\\n\
         {\\\"jsonrpc\\\":\\\"2.0\\\",\\\"method\\\":\\\"x\\\"}\\n\" (dropped)"
    );
}

#[test]
fn c39_a_real_bad_header_is_left_to_the_malformed_notice() {
    let mut detector = PollutionDetector::default();
    for head in [&b"Content-Length: abc\r\n\r\n"[..], b"X-Thing: 1\r\n\r\n"] {
        let malformed =
            Malformed::new(MalformedReason::InvalidLength, Bytes::copy_from_slice(head));
        assert_eq!(detector.observe_malformed(&malformed), None, "{head:?}");
    }
    // A truncated body's head is a body, not a header position.
    let cut = Malformed::new(
        MalformedReason::Truncated {
            expected: 10,
            got: 3,
        },
        Bytes::from_static(b"hey"),
    );
    assert_eq!(detector.observe_malformed(&cut), None);
    let banner = Malformed::new(
        MalformedReason::InvalidHeader,
        Bytes::from_static(b"Starting LSP server\r\n\r\n"),
    );
    let notice = detector.observe_malformed(&banner).expect("a banner");
    assert_eq!(notice.kind, PollutionKind::Text);
}

#[test]
fn c39_each_kind_is_named() {
    let cases: &[(&[u8], Option<PollutionKind>)] = &[
        (br#"{"jsonrpc":"2.0","id":1,"method":"ping"}"#, None),
        (br#"[{"jsonrpc":"2.0","id":1,"method":"ping"}]"#, None),
        (b"  {\"id\":1}  ", None),
        (b"Server listening on stdio", Some(PollutionKind::Text)),
        (b"\x1b[32mready\x1b[0m", Some(PollutionKind::Text)),
        (b"[server] ready", Some(PollutionKind::Text)),
        (b"INFO: started", Some(PollutionKind::LogLine)),
        (b"WARNING:root:no config", Some(PollutionKind::LogLine)),
        (
            b"2026-01-01T00:00:00Z  INFO server: up",
            Some(PollutionKind::LogLine),
        ),
        (
            b"Content-Length: 120",
            Some(PollutionKind::ContentLengthHeader),
        ),
        (
            b"content-type : application/json",
            Some(PollutionKind::ContentLengthHeader),
        ),
        (b"{", Some(PollutionKind::BrokenJson)),
        (b"  \"jsonrpc\": \"2.0\",", Some(PollutionKind::BrokenJson)),
        (b"},", Some(PollutionKind::BrokenJson)),
        (br#"{"id":1,"#, Some(PollutionKind::BrokenJson)),
        (b"[1, 2", Some(PollutionKind::BrokenJson)),
        (b"[INFO] started [ok]", Some(PollutionKind::LogLine)),
        (b"[server] up [pid 7]", Some(PollutionKind::Text)),
        (b"\t[warn] slow [x]  ", Some(PollutionKind::LogLine)),
        (b"[true, null]", None),
        (b" [ false ] ", None),
        (b"\r\n[]\t", None),
        (b"   ", Some(PollutionKind::Text)),
        (b"42", Some(PollutionKind::JsonScalar)),
        (b"\"ready\"", Some(PollutionKind::JsonScalar)),
        (b"\x00\x01\x02garbage", Some(PollutionKind::Binary)),
        (b"caf\xe9", Some(PollutionKind::Binary)),
    ];
    for (line, kind) in cases {
        assert_eq!(classify(line), *kind, "{:?}", String::from_utf8_lossy(line));
    }
    // Leading whitespace past the head does not hide a message.
    let padded = [vec![b' '; 2 * NOTICE_HEAD_LEN], br#"{"id":1}"#.to_vec()].concat();
    assert_eq!(classify(&padded), None);
}

#[test]
fn c39_a_line_shaped_like_a_message_is_one_and_its_json_is_not_judged_here() {
    // `{...}` and `[...]` (spaces around them left out) are messages: bad
    // JSON inside is the JSON layer's to report, as it is for any message.
    for line in [
        &br#"{"id":1}{"id":2}"#[..],
        br#"{"id":1,}"#,
        b"{not json at all}",
        b"[1 2]",
        b"{\xff\x00}",
        br#"  {"id":1}	"#,
        b"{}",
        b"[]",
    ] {
        assert_eq!(classify(line), None, "{:?}", String::from_utf8_lossy(line));
        let mut detector = PollutionDetector::new(PollutionPolicy::Drop);
        let seen = detector.observe(line);
        assert!(seen.deliver && seen.notice.is_none(), "{seen:?}");
        assert_eq!(detector.counts().polluted, 0);
    }
    // A line that starts or ends otherwise is looked at closer, as before.
    for (line, kind) in [
        (&br#"{"id":1}x"#[..], PollutionKind::BrokenJson),
        (br#"x{"id":1}"#, PollutionKind::Text),
        (b"{", PollutionKind::BrokenJson),
        (b"}", PollutionKind::BrokenJson),
        (b"[", PollutionKind::BrokenJson),
        (b"]", PollutionKind::BrokenJson),
        (b"{]", PollutionKind::BrokenJson),
        (b"[}", PollutionKind::BrokenJson),
        (b"-1", PollutionKind::JsonScalar),
    ] {
        assert_eq!(
            classify(line),
            Some(kind),
            "{:?}",
            String::from_utf8_lossy(line)
        );
    }
}

#[test]
fn c39_header_mismatch_names_what_cannot_start_a_header_block() {
    let cases: &[(&[u8], Option<PollutionKind>)] = &[
        (b"Content-Length: 17\r\n\r\n{}", None),
        (b"content-type: x\r\n", None),
        (b"\r\nContent-Length: 2\r\n", None),
        (b"", None),
        (
            b"{\"id\":1}\n{\"id\":2}\n",
            Some(PollutionKind::JsonOnContentLength),
        ),
        (b"[1]\n", Some(PollutionKind::JsonOnContentLength)),
        (b"Starting server...\r\n", Some(PollutionKind::Text)),
        (b"INFO: listening\n", Some(PollutionKind::LogLine)),
        (b"\xff\xfe\x00binary", Some(PollutionKind::Binary)),
    ];
    for (bytes, kind) in cases {
        assert_eq!(
            header_mismatch(bytes),
            *kind,
            "{:?}",
            String::from_utf8_lossy(bytes)
        );
    }
}

#[test]
fn c39_a_notice_keeps_a_bounded_head_and_the_full_length() {
    let line = vec![b'x'; 10_000];
    let mut detector = PollutionDetector::default();
    let notice = detector.observe(&line).notice.unwrap();
    assert_eq!(notice.len, 10_000);
    assert_eq!(notice.head.len(), NOTICE_HEAD_LEN);
    // A UTF-8 character cut at the head's end does not make it binary.
    let mut text = vec![b'a'; NOTICE_HEAD_LEN - 1];
    text.extend_from_slice("é and more".as_bytes());
    assert_eq!(classify(&text), Some(PollutionKind::Text));
}

#[test]
fn c39_json_check_edge_cases_agree_with_serde_json() {
    let cases: &[&[u8]] = &[
        b"",
        b" ",
        b"{}",
        b"[]",
        b"{ }",
        b"[ ]",
        b"null",
        b"nul",
        b"true",
        b"tru",
        b"false",
        b"0",
        b"-0",
        b"01",
        b"-",
        b"1.",
        b".5",
        b"1.5",
        b"-1.5",
        b"+1",
        b"0x10",
        b"NaN",
        b"Infinity",
        b"\"\"",
        b"\"\\u00e9\"",
        b"\"\\u00g9\"",
        b"\"\\x\"",
        b"\"a\tb\"",
        b"\"\xc3\xa9\"",
        b"\"\xc3\"",
        b"\"\xed\xa0\x80\"",
        b"{\"a\":1,}",
        b"[1,]",
        b"[,1]",
        b"{\"a\"}",
        b"{\"a\":}",
        b"{1:2}",
        b"{\"a\":1 \"b\":2}",
        b"[1 2]",
        b"{\"a\":[1,{\"b\":null}]}",
        b"{}}",
        b"[]]",
        b"[",
        b"{",
        b"]",
        b"}",
        b"\"abc",
        b"{\"a\":\"b\\\"\"}",
        b"[1]\r\n",
        b"\t[1]\t",
        b"[1]\x0b",
        b"\xef\xbb\xbf{}",
        b"[\"\\/\\b\\f\\n\\r\\t\"]",
    ];
    for case in cases {
        let ours = check_json(case);
        let serde = serde_json::from_slice::<serde_json::Value>(case).is_ok();
        assert!(ours.exact, "{:?}", String::from_utf8_lossy(case));
        assert_eq!(ours.is_json, serde, "{:?}", String::from_utf8_lossy(case));
    }
}

#[test]
fn c39_deep_nesting_is_structural_past_127_levels() {
    for depth in [126, 127, 128, 200, 5000] {
        let line = format!("{}{}", "[".repeat(depth), "]".repeat(depth));
        let ours = check_json(line.as_bytes());
        assert!(ours.is_json, "depth {depth}");
        let serde = serde_json::from_slice::<serde_json::Value>(line.as_bytes()).is_ok();
        if ours.exact {
            assert_eq!(ours.is_json, serde, "depth {depth}");
        }
        let unbalanced = format!("{}{}", "[".repeat(depth), "]".repeat(depth - 1));
        assert!(!check_json(unbalanced.as_bytes()).is_json, "depth {depth}");
    }
    assert!(!check_json(&[b'['; 100_000]).is_json);
}

/// What a line is by the documented rule (the fuzz target's model).
enum Model {
    Message,
    /// A message if it is JSON (`[true]`), else named (`[INFO] ok [x]`).
    IfJson,
    Named,
}

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

/// JSON-ish text: fragments that build valid documents often and nearly
/// valid ones the rest of the time.
fn jsonish() -> impl Strategy<Value = Vec<u8>> {
    let piece = prop_oneof![
        Just(&b"{"[..]),
        Just(&b"}"[..]),
        Just(&b"["[..]),
        Just(&b"]"[..]),
        Just(&b","[..]),
        Just(&b":"[..]),
        Just(&b"\"k\""[..]),
        Just(&b"\"a\\\"b\\u00e9\\ud83d\\ude00\""[..]),
        Just(&b"\"\\ud800\""[..]),
        Just(&b"\"\xc3\xa9\""[..]),
        Just(&b"\"\xc3\""[..]),
        Just(&b"1"[..]),
        Just(&b"-0.5"[..]),
        Just(&b"1e5"[..]),
        Just(&b"00"[..]),
        Just(&b"true"[..]),
        Just(&b"null"[..]),
        Just(&b" "[..]),
        Just(&b"\t"[..]),
        Just(&b"\n"[..]),
    ];
    prop::collection::vec(piece, 0..24).prop_map(|pieces| pieces.concat())
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(4096))]

    /// The fuzz target's property (fuzz/fuzz_targets/pollution.rs), run on
    /// stable for every test run.
    #[test]
    fn c39_json_check_matches_serde_json_where_exact(
        bytes in prop_oneof![jsonish(), prop::collection::vec(any::<u8>(), 0..64)],
    ) {
        let ours = check_json(&bytes);
        if ours.exact {
            let serde = serde_json::from_slice::<serde_json::Value>(&bytes).is_ok();
            prop_assert_eq!(ours.is_json, serde, "{:?}", String::from_utf8_lossy(&bytes));
        }
        // Whatever it is, naming it and observing it never panics.
        let _ = classify(&bytes);
        let _ = header_mismatch(&bytes);
        let mut detector = PollutionDetector::new(PollutionPolicy::Drop);
        let seen = detector.observe(&bytes);
        prop_assert_eq!(seen.deliver, classify(&bytes).is_none());
        // The rule, as the fuzz target's model states it.
        let kind = classify(&bytes);
        match model(&bytes) {
            Model::Message => prop_assert_eq!(kind, None),
            Model::IfJson => prop_assert_eq!(kind.is_none(), ours.is_json),
            Model::Named => prop_assert_eq!(kind.map(|k| k == PollutionKind::JsonScalar), Some(ours.is_json)),
        }
    }

    #[test]
    fn c39_serde_json_documents_are_json(value in arb_json()) {
        let text = serde_json::to_vec(&value).unwrap();
        let ours = check_json(&text);
        prop_assert!(ours.is_json, "{}", String::from_utf8_lossy(&text));
        let pretty = serde_json::to_vec_pretty(&value).unwrap();
        prop_assert!(check_json(&pretty).is_json);
    }
}

fn arb_json() -> impl Strategy<Value = serde_json::Value> {
    use serde_json::Value;
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::Bool),
        any::<i64>().prop_map(Value::from),
        any::<f64>()
            .prop_filter("finite", |f| f.is_finite())
            .prop_map(Value::from),
        any::<String>().prop_map(Value::String),
    ];
    leaf.prop_recursive(4, 32, 6, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..6).prop_map(Value::Array),
            prop::collection::btree_map(any::<String>(), inner, 0..6)
                .prop_map(|m| Value::Object(m.into_iter().collect())),
        ]
    })
}
