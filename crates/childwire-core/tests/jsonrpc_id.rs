//! C28: the top-level JSON-RPC `id` of an over-long message is recovered
//! while it is discarded, whatever the key order and however it is chunked.
//!
//! The scanner is checked on hand-picked documents at every split point,
//! and against serde_json on generated documents with shuffled keys, random
//! whitespace and escapes, fed in random chunks.

use childwire_core::jsonrpc::{
    IdScanner, MAX_ID_LEN, OVERSIZED_ERROR_CODE, OVERSIZED_ERROR_MESSAGE, oversized_error,
};
use childwire_core::{Frame, LineDecoder};
use serde_json::Value;

/// The id of `doc` fed in one piece.
fn scan(doc: &[u8]) -> Option<Vec<u8>> {
    let mut scanner = IdScanner::new();
    scanner.feed(doc);
    scanner.id().map(|id| id.to_vec())
}

/// The id of `doc` fed in chunks of these sizes (cycled; 0 feeds an empty
/// chunk, then one byte, so the run always progresses).
fn scan_chunked(doc: &[u8], sizes: &[usize]) -> Option<Vec<u8>> {
    let mut scanner = IdScanner::new();
    let mut rest = doc;
    let mut sizes = sizes.iter().copied().cycle();
    while !rest.is_empty() {
        let n = match sizes.next() {
            None => rest.len(),
            Some(0) => {
                scanner.feed(&[]);
                1
            }
            Some(n) => n.min(rest.len()),
        };
        let (chunk, tail) = rest.split_at(n);
        scanner.feed(chunk);
        rest = tail;
    }
    scanner.id().map(|id| id.to_vec())
}

/// `doc`'s id is `expected` fed whole, byte by byte, split in two at every
/// point, and (for short documents) split in three at every pair of points.
#[track_caller]
fn assert_id(doc: &str, expected: Option<&str>) {
    let doc = doc.as_bytes();
    let expected = expected.map(|e| e.as_bytes().to_vec());
    assert_eq!(
        scan(doc),
        expected,
        "whole: {}",
        String::from_utf8_lossy(doc)
    );
    assert_eq!(scan_chunked(doc, &[1]), expected, "byte by byte");
    for i in 0..=doc.len() {
        let mut scanner = IdScanner::new();
        scanner.feed(&doc[..i]);
        scanner.feed(&doc[i..]);
        assert_eq!(
            scanner.id().map(|id| id.to_vec()),
            expected,
            "split at {i}: {}",
            String::from_utf8_lossy(doc)
        );
    }
    if doc.len() <= 120 {
        for i in 0..=doc.len() {
            for j in i..=doc.len() {
                let mut scanner = IdScanner::new();
                for part in [&doc[..i], &doc[i..j], &doc[j..]] {
                    scanner.feed(part);
                }
                assert_eq!(
                    scanner.id().map(|id| id.to_vec()),
                    expected,
                    "split at {i} and {j}"
                );
            }
        }
    }
}

#[test]
fn c28_id_first_middle_and_last() {
    assert_id(r#"{"id":1,"jsonrpc":"2.0","result":{}}"#, Some("1"));
    assert_id(r#"{"jsonrpc":"2.0","id":"a","result":{}}"#, Some(r#""a""#));
    // The TypeScript SDK's order: the id after the result.
    assert_id(
        r#"{"result":{"content":[{"type":"text","text":"hi"}]},"jsonrpc":"2.0","id":42}"#,
        Some("42"),
    );
}

#[test]
fn c28_nested_ids_are_not_the_id() {
    assert_id(
        r#"{"result":{"id":99,"items":[{"id":1},{"id":2}]},"id":7}"#,
        Some("7"),
    );
    assert_id(r#"{"method":"x","params":{"id":5}}"#, None);
    assert_id(
        r#"{"params":[{"id":5}],"x":[["id"],"id",{"id":{"id":1}}]}"#,
        None,
    );
    assert_id(r#"{"a":{"b":{"c":[[[{"id":3}]]]}},"id":-4}"#, Some("-4"));
    // An "id" that is a value, not a key, is no id either.
    assert_id(r#"{"x":"id","y":["id",1]}"#, None);
    assert_id(r#"{"x":"id","id":"id"}"#, Some(r#""id""#));
}

#[test]
fn c28_keys_match_as_json_does() {
    assert_id(r#"{"\u0069d":1}"#, Some("1"));
    assert_id(r#"{"i\u0064":2}"#, Some("2"));
    assert_id(r#"{"\u0069\u0064":3}"#, Some("3"));
    // `Id`: keys are case-sensitive.
    assert_id(r#"{"\u0049d":4}"#, None);
    assert_id(r#"{"ID":5,"Id":6,"i":7,"idx":8,"":9,"i d":10}"#, None);
    assert_id(r#"{"id\u0000":1}"#, None);
    assert_id(r#"{"\"id\"":1}"#, None);
    assert_id(r#"{"id\\":1}"#, None);
    // A surrogate pair or a non-ASCII character is never `i` or `d`.
    assert_id(r#"{"\ud835\udc22d":1,"іd":2}"#, None);
}

#[test]
fn c28_escaped_strings_do_not_confuse_the_structure() {
    assert_id(
        r#"{"result":{"text":"a \"quoted\" }]{[ \\ \"id\":9, \\\"","t":"\\"},"id":1}"#,
        Some("1"),
    );
    assert_id(
        r#"{"id":"a\"b\\c\/d\u00e9\ud83d\ude00\n"}"#,
        Some(r#""a\"b\\c\/d\u00e9\ud83d\ude00\n""#),
    );
    assert_id(r#"{"id":"\\"}"#, Some(r#""\\""#));
    assert_id(r#"{"id":"\"","x":"\\\\"}"#, Some(r#""\"""#));
    assert_id(r#"{"id":"héllo ✓ 😀"}"#, Some(r#""héllo ✓ 😀""#));
    assert_id(r#"{"id":""}"#, Some(r#""""#));
}

#[test]
fn c28_numbers_are_kept_verbatim() {
    for number in [
        "0",
        "-0",
        "12",
        "-1.5e-3",
        "1E+2",
        "0.000",
        "123456789012345678901234567890123456789012345678901234567890",
        "1e308",
        // Out of f64's range: serde_json refuses the document, but it is
        // valid JSON and the id is what it is.
        "1e400",
    ] {
        assert_id(&format!(r#"{{"id":{number}}}"#), Some(number));
        assert_id(&format!(r#"{{"id":{number},"x":1}}"#), Some(number));
        assert_id(&format!(r#"{{ "id" : {number} }}"#), Some(number));
    }
    for broken in [
        "01", "-", "1.", ".5", "1e", "1e+", "+1", "0x1", "1.2.3", "--1", "NaN",
    ] {
        assert_id(&format!(r#"{{"id":{broken}}}"#), None);
    }
}

#[test]
fn c28_whitespace_anywhere() {
    assert_id(
        " \t\r\n{ \t\r\n\"result\" \n: [ 1 , { \"id\" : 2 } ] ,\r\n \"id\"\t:\t\"x\" \n} \t\r\n",
        Some(r#""x""#),
    );
    assert_id("{\"id\":1}\r", Some("1"));
}

#[test]
fn c28_null_is_reported_and_other_kinds_are_not_ids() {
    assert_id(
        r#"{"jsonrpc":"2.0","id":null,"error":{"code":-32700,"message":"x"}}"#,
        Some("null"),
    );
    for value in ["true", "false", "{}", "[]", r#"{"id":1}"#, "[1]"] {
        assert_id(&format!(r#"{{"id":{value},"x":1}}"#), None);
    }
}

#[test]
fn c28_the_last_top_level_id_wins() {
    assert_id(r#"{"id":1,"x":{"id":2},"id":3}"#, Some("3"));
    assert_id(r#"{"id":1,"id":"two"}"#, Some(r#""two""#));
    // The last one decides, even when it is no usable id.
    assert_id(r#"{"id":1,"id":true}"#, None);
    assert_id(r#"{"id":1,"id":{}}"#, None);
    assert_id(r#"{"id":true,"id":1}"#, Some("1"));
    let long = format!(r#""{}""#, "x".repeat(MAX_ID_LEN));
    assert_id(&format!(r#"{{"id":1,"id":{long}}}"#), None);
    assert_id(&format!(r#"{{"id":{long},"id":1}}"#), Some("1"));
}

#[test]
fn c28_ids_up_to_the_cap_are_kept() {
    let fits = format!(r#""{}""#, "x".repeat(MAX_ID_LEN - 2));
    assert_eq!(fits.len(), MAX_ID_LEN);
    assert_id(&format!(r#"{{"id":{fits}}}"#), Some(&fits));
    let over = format!(r#""{}""#, "x".repeat(MAX_ID_LEN - 1));
    assert_id(&format!(r#"{{"id":{over}}}"#), None);
    let digits = "9".repeat(MAX_ID_LEN);
    assert_id(&format!(r#"{{"id":{digits}}}"#), Some(&digits));
    assert_id(&format!(r#"{{"id":{digits}1}}"#), None);
}

#[test]
fn c28_what_is_not_one_object_has_no_id() {
    for doc in [
        "",
        " ",
        "{",
        r#"{"id":1"#,
        r#"{"id":1,"#,
        r#"{"id":1,}"#,
        r#"{"id":1}}"#,
        r#"{"id":1}x"#,
        r#"{"id":1}{"id":2}"#,
        r#"[{"id":1}]"#,
        r#""id""#,
        "1",
        "null",
        r#"{"id" 1}"#,
        r#"{"id":1 "x":2}"#,
        r#"{"id"::1}"#,
        r#"{id:1}"#,
        r#"{'id':1}"#,
        r#"{"id":1,"x":[}]}"#,
        r#"{"id":1,"x":{]}"#,
        r#"{"id":1,"x":[1,]}"#,
        r#"{"id":1,"x":[,1]}"#,
        r#"{"id":1,"x":{"a"}}"#,
        r#"{"id":1,"x":{"a":}}"#,
        r#"{"id":1,"x":{1:2}}"#,
        r#"{"id":1,"x":tru}"#,
        r#"{"id":1,"x":nul1}"#,
        r#"{"id":1,"x":truex}"#,
        r#"{"id":1,"x":"unterminated}"#,
        r#"{"id":"\q"}"#,
        r#"{"id":"\u12g4"}"#,
        r#"{"i\qd":1}"#,
        "\u{feff}{\"id\":1}",
    ] {
        assert_id(doc, None);
    }
}

#[test]
fn c28_string_contents_are_skipped_but_the_id_is_checked() {
    // Raw control characters, invalid UTF-8, lone surrogates and unknown
    // escapes elsewhere leave the structure readable: the id is still found.
    let mut doc = br#"{"text":"tab	bell"#.to_vec();
    doc.push(0x07);
    doc.extend_from_slice(b"\xff\xfe\"");
    doc.extend_from_slice(br#","lone":"\ud800","esc":"\x\u12g4\\","id":5}"#);
    assert_eq!(scan(&doc).as_deref(), Some(&b"5"[..]));
    assert_eq!(scan_chunked(&doc, &[1]).as_deref(), Some(&b"5"[..]));
    // In the id itself, they make it unusable: it could not be copied
    // into a response as valid JSON.
    assert_id(r#"{"id":"\ud800"}"#, None);
    assert_id(r#"{"id":"\udc00\ud800"}"#, None);
    assert_id(r#"{"id":"\ud800x"}"#, None);
    assert_id(r#"{"id":"\ud800\u0041"}"#, None);
    assert_id(r#"{"id":"\ud800\udc00"}"#, Some(r#""\ud800\udc00""#));
    assert_id("{\"id\":\"a\tb\"}", None);
    assert_eq!(scan(b"{\"id\":\"\xff\"}"), None);
    assert_eq!(
        scan(b"{\"id\":\"\xc3\xa9\"}").as_deref(),
        Some(&b"\"\xc3\xa9\""[..])
    );
}

#[test]
fn c28_nesting_is_followed_to_serde_json_depth_limit() {
    let nested = |levels: usize| {
        format!(
            r#"{{"result":{}{},"id":1}}"#,
            "[".repeat(levels),
            "]".repeat(levels)
        )
    };
    for levels in [126, 127, 128, 129, 1000] {
        let doc = nested(levels);
        let serde_ok = serde_json::from_str::<Value>(&doc).is_ok();
        assert_eq!(
            scan(doc.as_bytes()).is_some(),
            serde_ok,
            "{levels} levels inside the top-level object"
        );
    }
    // 127 levels in all, the top-level object included; not one more.
    assert!(scan(nested(126).as_bytes()).is_some());
    assert!(scan(nested(127).as_bytes()).is_none());
    assert!(scan(nested(1000).as_bytes()).is_none());
}

#[test]
fn c28_feeding_after_the_end() {
    let mut scanner = IdScanner::new();
    scanner.feed(br#"{"id":1}"#);
    assert_eq!(scanner.id().as_deref(), Some(&b"1"[..]));
    scanner.feed(b"  \r\n");
    assert_eq!(scanner.id().as_deref(), Some(&b"1"[..]));
    assert!(!scanner.has_failed());
    scanner.feed(b"x");
    assert_eq!(scanner.id(), None);
    assert!(scanner.has_failed());
    // Before the end there is no answer yet, and no failure.
    let mut scanner = IdScanner::new();
    scanner.feed(br#"{"id":1,"result":"#);
    assert_eq!(scanner.id(), None);
    assert!(!scanner.has_failed());
}

#[test]
fn c28_arbitrary_bytes_never_panic() {
    let mut state: u64 = 0x2545_f491_4f6c_dd1d;
    let mut next = move || {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        state
    };
    const ALPHABET: &[u8] = b"{}[]\":,\\ u0123456789abcdefintrulsEe+-.\x00\xff";
    for _ in 0..2000 {
        let len = (next() % 64) as usize;
        let doc: Vec<u8> = (0..len)
            .map(|_| ALPHABET[(next() % ALPHABET.len() as u64) as usize])
            .collect();
        let whole = scan(&doc);
        assert_eq!(scan_chunked(&doc, &[1]), whole);
        assert_eq!(scan_chunked(&doc, &[3, 0, 2]), whole);
        if let (Some(id), Ok(Value::Object(map))) = (&whole, serde_json::from_slice(&doc)) {
            assert_eq!(
                serde_json::from_slice::<Value>(id).ok().as_ref(),
                map.get("id")
            );
        }
    }
}

#[test]
fn c28_error_response_is_compact_json_rpc() {
    let response = oversized_error(br#""req-1""#, 20_000_000, 16 << 20);
    assert!(!response.contains(&b'\n'));
    let value: Value = serde_json::from_slice(&response).unwrap();
    assert_eq!(
        value,
        serde_json::json!({
            "jsonrpc": "2.0",
            "id": "req-1",
            "error": {
                "code": OVERSIZED_ERROR_CODE,
                "message": OVERSIZED_ERROR_MESSAGE,
                "data": {"size": 20_000_000, "limit": 16 << 20},
            },
        })
    );
    assert!((-32099..=-32000).contains(&OVERSIZED_ERROR_CODE));
    let value: Value = serde_json::from_slice(&oversized_error(b"", 2, 1)).unwrap();
    assert_eq!(value["id"], Value::Null);
    let value: Value = serde_json::from_slice(&oversized_error(b"-7", 2, 1)).unwrap();
    assert_eq!(value["id"], serde_json::json!(-7));
}

/// A response far over the limit, its id last, fed to the decoder in many
/// chunks that cut through keys, escapes and the id itself.
#[test]
fn c28_decoder_notice_names_the_id_of_a_line_split_across_chunks() {
    let max = 1024;
    let mut line = br#"{"result":{"id":"nested","text":""#.to_vec();
    for i in 0..5000 {
        line.extend_from_slice(format!(r#"chunk {i} \"id\":{i} \\ \u00e9 "#).as_bytes());
    }
    line.extend_from_slice(
        br#"","items":[{"id":1},{"id":2}]},"jsonrpc":"2.0","\u0069d":"req-\"42\""}"#,
    );
    let serde_id = serde_json::from_slice::<Value>(&line).unwrap()["id"].clone();
    assert_eq!(serde_id, Value::from("req-\"42\""));

    for chunk in [1, 7, 64, 1000, 4096, 65536] {
        let mut decoder = LineDecoder::new(max);
        let mut input = line.clone();
        input.extend_from_slice(b"\r\n{\"id\":2,\"ok\":true}\n");
        let mut frames = Vec::new();
        for piece in input.chunks(chunk) {
            decoder.handle_data(piece);
            while let Some(frame) = decoder.poll_frame() {
                frames.push(frame);
            }
        }
        let [Frame::Oversized(notice), Frame::Message(next)] = &frames[..] else {
            panic!("{chunk}-byte chunks: expected a notice and a message, got {frames:?}");
        };
        assert_eq!(notice.len, line.len() as u64);
        let id = notice.json_rpc_id().expect("the notice names the id");
        assert_eq!(&id[..], br#""req-\"42\"""#, "{chunk}-byte chunks");
        assert_eq!(serde_json::from_slice::<Value>(id).unwrap(), serde_id);
        assert_eq!(&next[..], br#"{"id":2,"ok":true}"#);
        assert!(notice.to_string().contains(r#"(JSON-RPC id "req-\"42\"")"#));
    }
}

/// The same line arriving whole in one chunk (the decoder sees it complete
/// before it knows it is too long) gets the same notice as piecewise.
#[test]
fn c28_decoder_whole_line_and_piecewise_notices_agree() {
    let line = br#"{"result":{"id":5,"pad":"............................"},"id":[1],"id":6}"#;
    let mut input = line.to_vec();
    input.extend_from_slice(b"\n{\"x\":1}\n");
    let notices = |chunk: usize| {
        let mut decoder = LineDecoder::new(16);
        let mut out = Vec::new();
        for piece in input.chunks(chunk) {
            decoder.handle_data(piece);
            while let Some(frame) = decoder.poll_frame() {
                if let Frame::Oversized(notice) = frame {
                    out.push(notice);
                }
            }
        }
        out
    };
    let whole = notices(input.len());
    assert_eq!(whole.len(), 1);
    assert_eq!(whole[0].json_rpc_id().map(|id| &id[..]), Some(&b"6"[..]));
    for chunk in 1..input.len() {
        assert_eq!(notices(chunk), whole, "{chunk}-byte chunks");
    }
    // Not JSON, or JSON without an id: a notice without one.
    let mut decoder = LineDecoder::new(4);
    decoder.handle_data(b"not json at all\n{\"method\":\"m\"}\n");
    for _ in 0..2 {
        let Some(Frame::Oversized(notice)) = decoder.poll_frame() else {
            panic!("expected a notice")
        };
        assert_eq!(notice.json_rpc_id(), None);
    }
}

// ---------------------------------------------------------------------
// Differential against serde_json on generated documents.

/// The documents and the expected id come from the core's `testing`
/// module, shared with the `jsonrpc_id` fuzz target; CI turns the feature on
/// with `--all-features`.
#[cfg(feature = "testing")]
mod generated {
    use childwire_core::testing::jsonrpc::{Document, Json, document};
    use proptest::prelude::*;

    use super::*;

    /// Keys that are, or nearly are, `id`.
    fn key() -> impl Strategy<Value = String> {
        prop_oneof![
            3 => Just("id".to_string()),
            1 => Just("ID".to_string()),
            1 => Just("i".to_string()),
            1 => Just("idd".to_string()),
            1 => Just("\"id\"".to_string()),
            1 => Just("jsonrpc".to_string()),
            1 => Just("result".to_string()),
            1 => Just("method".to_string()),
            1 => Just("metho".to_string()),
            1 => "[a-z\"\\\\/\u{0}-\u{1f}é😀]{0,6}",
        ]
    }

    fn number() -> impl Strategy<Value = String> {
        prop_oneof![
            "-?(0|[1-9][0-9]{0,20})",
            "-?(0|[1-9][0-9]{0,40})(\\.[0-9]{1,20})?([eE][+-]?[0-9]{1,2})?",
            // Huge: past u64 and, sometimes, past the id cap.
            "[1-9][0-9]{200,300}",
        ]
    }

    fn text() -> impl Strategy<Value = String> {
        prop_oneof![
            "[a-z ]{0,12}",
            "[a-z\"\\\\/\u{0}-\u{1f}{}\\[\\]:,é\u{2028}😀]{0,16}",
            Just("\"id\":1,".to_string()),
        ]
    }

    fn value() -> impl Strategy<Value = Json> {
        let leaf = prop_oneof![
            Just(Json::Null),
            any::<bool>().prop_map(Json::Bool),
            number().prop_map(Json::Num),
            text().prop_map(Json::Str),
        ];
        leaf.prop_recursive(5, 48, 6, |inner| {
            prop_oneof![
                prop::collection::vec(inner.clone(), 0..6).prop_map(Json::Arr),
                prop::collection::vec((key(), inner), 0..6).prop_map(Json::Obj),
            ]
        })
    }

    /// A message: top-level members with zero or more ids among them (the
    /// writer shuffles them).
    fn message() -> impl Strategy<Value = Vec<(String, Json)>> {
        prop::collection::vec((key(), value()), 0..8)
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(2000))]

        #[test]
        fn c28_scanner_agrees_with_serde_json(
            members in message(),
            seed in any::<u64>(),
            chunks in prop::collection::vec(0usize..40, 0..8),
        ) {
            let Document { text: doc, last_id, expected } = document(&members, seed, true);
            let raw_len = last_id.as_ref().map_or(0, Vec::len);
            let parsed: Value = serde_json::from_slice(&doc).expect("the generator writes valid JSON");
            let found = scan_chunked(&doc, &chunks);
            prop_assert_eq!(&found, &expected, "doc: {}", String::from_utf8_lossy(&doc));
            prop_assert_eq!(scan(&doc), expected);
            // Which top-level members there are, as the request tracker
            // asks (C37): `method` and `id`, whatever the id's value.
            let mut whole = IdScanner::new();
            whole.feed(&doc);
            prop_assert_eq!(whole.has_method(), parsed.get("method").is_some());
            prop_assert_eq!(whole.has_id_member(), parsed.get("id").is_some());
            // serde_json's own view: the id it reads is the one found, whenever
            // that one is usable.
            let serde_id = parsed.get("id");
            match &found {
                Some(raw) => {
                    let ours = serde_json::from_slice::<Value>(raw).ok();
                    prop_assert_eq!(ours.as_ref(), serde_id);
                }
                None => prop_assert!(
                    matches!(serde_id, None | Some(Value::Bool(_) | Value::Array(_) | Value::Object(_)))
                        || raw_len > MAX_ID_LEN,
                    "serde_json found id {:?}", serde_id
                ),
            }
        }

        #[test]
        fn c28_decoder_notice_carries_the_id_however_chunked(
            members in message(),
            seed in any::<u64>(),
            chunks in prop::collection::vec(1usize..200, 1..8),
        ) {
            let Document { text: doc, expected, .. } = document(&members, seed, false);
            let mut input = doc.clone();
            input.extend_from_slice(b"\n{}\n");
            let mut decoder = LineDecoder::new(8);
            let mut notices = Vec::new();
            let mut rest = &input[..];
            let mut sizes = chunks.iter().copied().cycle();
            while !rest.is_empty() {
                let n = sizes.next().unwrap_or(rest.len()).min(rest.len());
                decoder.handle_data(&rest[..n]);
                rest = &rest[n..];
                while let Some(frame) = decoder.poll_frame() {
                    if let Frame::Oversized(notice) = frame {
                        notices.push(notice);
                    }
                }
            }
            // Up to 8 bytes (one `\r` at the end excluded) is delivered; longer
            // is a notice.
            if doc.len() - usize::from(doc.ends_with(b"\r")) > 8 {
                prop_assert_eq!(notices.len(), 1);
                prop_assert_eq!(notices[0].json_rpc_id().map(|id| id.to_vec()), expected);
            } else {
                prop_assert!(notices.is_empty());
            }
        }
    }
}

#[test]
fn c28_scanner_state_is_small_and_fixed() {
    // The documented bound: a few dozen bytes plus the id buffer, inline.
    let size = std::mem::size_of::<IdScanner>();
    assert!(size <= MAX_ID_LEN + 64, "IdScanner is {size} bytes");
}

#[test]
fn c28_number_arrays_are_read_strictly() {
    assert_id(r#"{"v":[1,-2,3.5e1,0,-0.0,10,2E-3],"id":1}"#, Some("1"));
    assert_id(r#"{"v":[1, -2 ,3],"w":[[0],[1,2]],"id":1}"#, Some("1"));
    for broken in [
        "[1,01]", "[1,-]", "[1,2.]", "[1,,2]", "[1,2,]", "[1 2]", "[1,2e]", "[0-1]", "[1,2",
    ] {
        assert_id(&format!(r#"{{"v":{broken},"id":1}}"#), None);
    }
}
