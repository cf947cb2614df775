//! C35, a lying peer costs one frame: after a `Content-Length` frame that
//! lies or breaks, the decoder finds the next header and goes on. Each
//! hostile stream is fed whole, split at every point, and a byte at a
//! time, and checked against the reference model; then one lie of every
//! kind, anywhere, in any chunking (`childwire_core::testing`, behind the
//! `testing` feature that CI turns on with `--all-features`).
#![cfg(feature = "testing")]

use bytes::Bytes;
use childwire_core::testing::content_length::{
    self as reference,
    lies::{self, Kind, Lie},
};
use childwire_core::{ContentLengthDecoder, MAX_HEADER_LEN};
use childwire_core::{Frame, Malformed, MalformedReason, Message};
use proptest::prelude::*;

/// A limit no body here reaches.
const MAX: usize = 1 << 20;

/// `input` fed in chunks of the `sizes` (cycled; the rest at once),
/// alternately copied and as `Bytes`, draining after each; the memory bound
/// is checked at every step.
fn decode(input: &[u8], sizes: &[usize]) -> Vec<Frame> {
    let mut decoder = ContentLengthDecoder::new(MAX);
    let mut out = Vec::new();
    let mut rest = input;
    let mut sizes = sizes.iter().copied().filter(|&n| n > 0).cycle();
    let mut by_bytes = false;
    while !rest.is_empty() {
        let n = sizes.next().unwrap_or(rest.len()).min(rest.len());
        let (chunk, tail) = rest.split_at(n);
        rest = tail;
        reference::feed(&mut decoder, chunk, by_bytes, &mut out);
        by_bytes = !by_bytes;
    }
    reference::finish(&mut decoder, &mut out);
    out
}

/// Decodes `input` whole, split in two at every point, and a byte at a
/// time; every way must give `expected`, which the model must give too.
fn check_every_split(input: &[u8], expected: &[Frame]) {
    assert_eq!(reference::frames(input, MAX).0, expected, "the model");
    assert_eq!(decode(input, &[]), expected, "whole");
    for cut in 1..input.len() {
        assert_eq!(
            decode(input, &[cut, input.len()]),
            expected,
            "split at {cut}"
        );
    }
    assert_eq!(decode(input, &[1]), expected, "a byte at a time");
}

fn frame(body: &[u8]) -> Vec<u8> {
    let mut wire = format!("Content-Length: {}\r\n\r\n", body.len()).into_bytes();
    wire.extend_from_slice(body);
    wire
}

fn message(body: &[u8]) -> Frame {
    Frame::Message(Message::new(body.to_vec()))
}

fn malformed(reason: MalformedReason, head: &[u8]) -> Frame {
    Frame::Malformed(Malformed::new(reason, Bytes::copy_from_slice(head)))
}

/// `n` well-formed JSON-RPC notifications.
fn good_bodies(n: usize) -> Vec<Vec<u8>> {
    (0..n)
        .map(|i| {
            format!(r#"{{"jsonrpc":"2.0","method":"progress","params":{{"n":{i}}}}}"#).into_bytes()
        })
        .collect()
}

fn good_frames(n: usize) -> (Vec<u8>, Vec<Frame>) {
    let bodies = good_bodies(n);
    let wire = bodies.iter().flat_map(|b| frame(b)).collect();
    (wire, bodies.iter().map(|b| message(b)).collect())
}

#[test]
fn c35_a_header_claiming_fewer_bytes_than_its_body_then_20_frames_delivers_all_20() {
    // The issue's hostile sequence: the lie's first 5 bytes are its
    // message (nothing can tell them from one), the rest of its body is
    // one notice, and all 20 frames after it arrive.
    let lie = br#"{"jsonrpc":"2.0","method":"lie"}"#;
    let mut input = b"Content-Length: 5\r\n\r\n".to_vec();
    input.extend_from_slice(lie);
    let (good, mut expected) = good_frames(20);
    input.extend(good);
    expected.insert(0, message(&lie[..5]));
    expected.insert(1, malformed(MalformedReason::InvalidHeader, &lie[5..]));
    check_every_split(&input, &expected);
}

#[test]
fn c35_a_leftover_that_reads_as_a_header_line_still_loses_no_frame() {
    // Cut inside a string, the leftover `a:1"}` reads as a header line
    // `a: 1"}Content-Length: ...`: a `Content-Length` inside another
    // header's value is where the next header starts. Likewise inside a
    // name (`abcContent-Length:`).
    for (lie, leftover) in [
        (&br#"{"k":"a:1"}"#[..], &br#"a:1"}"#[..]),
        (b"xyzabc", b"abc"),
    ] {
        let claim = lie.len() - leftover.len();
        let mut input = format!("Content-Length: {claim}\r\n\r\n").into_bytes();
        input.extend_from_slice(lie);
        let (good, mut expected) = good_frames(3);
        input.extend(good);
        expected.insert(0, message(&lie[..claim]));
        expected.insert(1, malformed(MalformedReason::InvalidHeader, leftover));
        check_every_split(&input, &expected);
    }
}

#[test]
fn c35_a_header_claiming_more_bytes_than_its_body_loses_only_the_frame_it_runs_into() {
    let (good, bodies) = (good_frames(5).0, good_bodies(5));
    let body = br#"{"jsonrpc":"2.0","method":"long"}"#;
    // Claims 10 bytes more: it takes the start of the next frame's header.
    let mut input = format!("Content-Length: {}\r\n\r\n", body.len() + 10).into_bytes();
    input.extend_from_slice(body);
    input.extend_from_slice(&good);
    let (frames, stats) = reference::frames(&input, MAX);
    let messages: Vec<&[u8]> = frames
        .iter()
        .filter_map(|f| match f {
            Frame::Message(m) => Some(&m[..]),
            _ => None,
        })
        .collect();
    // The lie's claimed body, then frames 1..5: frame 0's header was
    // swallowed, its body dropped with the header's leftover.
    assert_eq!(messages.len(), 5);
    assert_eq!(messages[0].len(), body.len() + 10);
    assert_eq!(
        &messages[1..],
        &bodies[1..].iter().map(|b| &b[..]).collect::<Vec<_>>()[..]
    );
    assert_eq!(stats.malformed, 1);
    check_every_split(&input, &frames);
}

#[test]
fn c35_lf_only_headers_are_accepted_one_frame_at_a_time() {
    // A sloppy server ends header lines with `\n` alone, in some frames
    // only: each frame is read as it comes, and none costs another.
    let mut input = Vec::new();
    input.extend_from_slice(b"Content-Length: 7\n\n{\"a\":1}");
    input.extend(frame(br#"{"b":2}"#));
    input.extend_from_slice(b"Content-Type: application/json\nContent-Length: 7\n\n{\"c\":3}");
    input.extend_from_slice(b"Content-Length: 7\r\n\n{\"d\":4}");
    input.extend_from_slice(b"Content-Length: 7\n\r\n{\"e\":5}");
    input.extend(frame(br#"{"f":6}"#));
    let expected: Vec<Frame> = [
        br#"{"a":1}"#,
        br#"{"b":2}"#,
        br#"{"c":3}"#,
        br#"{"d":4}"#,
        br#"{"e":5}"#,
        br#"{"f":6}"#,
    ]
    .iter()
    .map(|b| message(&b[..]))
    .collect();
    check_every_split(&input, &expected);
}

#[test]
fn c35_an_over_long_header_block_then_good_frames_costs_only_its_header() {
    // A header line that alone is over the bound, before the length: the
    // block breaks at its byte past the bound, and the search for the next
    // header starts there, so its own `Content-Length` line further on is
    // that header. Nothing is held meanwhile.
    let mut input = b"X-Padding: ".to_vec();
    input.resize(MAX_HEADER_LEN + 100, b'p');
    input.extend_from_slice(b"\r\n");
    let head = input[..1024].to_vec();
    input.extend(frame(br#"{"over":"long"}"#));
    let (good, mut expected) = good_frames(20);
    input.extend(good);
    expected.insert(0, malformed(MalformedReason::InvalidHeader, &head));
    expected.insert(1, message(br#"{"over":"long"}"#));
    check_every_split(&input, &expected);

    // With the length inside the bound, the block is dropped whole, its
    // body with it, up to the next header.
    let mut input = b"Content-Length: 15\r\nX-Padding: ".to_vec();
    input.resize(MAX_HEADER_LEN + 100, b'p');
    input.extend_from_slice(b"\r\n\r\n{\"over\":\"long\"}");
    let head = input[..1024].to_vec();
    let (good, mut expected) = good_frames(20);
    input.extend(good);
    expected.insert(0, malformed(MalformedReason::InvalidHeader, &head));
    check_every_split(&input, &expected);
}

#[test]
fn c35_garbage_between_frames_is_one_notice_each_and_no_frame_is_lost() {
    let garbage: [(&[u8], MalformedReason); 7] = [
        (b"}", MalformedReason::InvalidHeader),
        (b"npm WARN deprecated\n", MalformedReason::InvalidHeader),
        (b"oops\r\n\r\n", MalformedReason::InvalidHeader),
        (b"\x00\xff\xfe binary \r", MalformedReason::InvalidHeader),
        (b"Content-Length: 12abc\r\n", MalformedReason::InvalidLength),
        (
            b"Content-Length is a header\n",
            MalformedReason::InvalidHeader,
        ),
        (b"status: ok", MalformedReason::InvalidHeader),
    ];
    let bodies = good_bodies(garbage.len() + 1);
    let mut input = frame(&bodies[0]);
    let mut expected = vec![message(&bodies[0])];
    for ((junk, reason), body) in garbage.iter().zip(&bodies[1..]) {
        input.extend_from_slice(junk);
        input.extend(frame(body));
        expected.push(malformed(*reason, junk));
        expected.push(message(body));
    }
    check_every_split(&input, &expected);
}

/// A lie of any kind.
fn lie() -> impl Strategy<Value = Lie> {
    let kind = prop_oneof![
        Just(Kind::Short),
        Just(Kind::Long),
        Just(Kind::Cut),
        Just(Kind::Garbage),
        Just(Kind::LfOnly),
        Just(Kind::OverLong),
        Just(Kind::MissingLength),
        Just(Kind::BadLength),
    ];
    (kind, body(), 0usize..200).prop_map(|(kind, body, by)| Lie { kind, body, by })
}

/// Bodies of what JSON holds, and what a header does, so that the search
/// for the next header meets look-alikes.
fn body() -> impl Strategy<Value = Vec<u8>> {
    let token = prop_oneof![
        6 => prop::collection::vec(
            prop_oneof![
                4 => b'a'..=b'z',
                2 => prop::sample::select(&b"{}[]\":,. -0123456789"[..]),
                1 => any::<u8>(),
            ],
            1..8,
        ),
        1 => Just(b"Content-Length".to_vec()),
        1 => Just(b"content-length: 12".to_vec()),
        1 => Just(b"Content-Type:".to_vec()),
    ];
    prop::collection::vec(token, 1..8).prop_map(|tokens| tokens.concat())
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(1000))]

    #[test]
    fn c35_one_lie_anywhere_in_any_chunking_keeps_the_frames_after_it(
        bodies in prop::collection::vec(body(), 1..12),
        at in 0usize..12,
        lie in lie(),
        chunks in prop::collection::vec(1usize..64, 1..6),
    ) {
        let told = lies::tell(&bodies, at, &lie);
        let frames = decode(&told.wire, &chunks);
        prop_assert_eq!(&frames, &reference::frames(&told.wire, MAX).0);
        if let Err(why) = lies::check(&told, &frames) {
            prop_assert!(false, "{}", why);
        }
    }
}
