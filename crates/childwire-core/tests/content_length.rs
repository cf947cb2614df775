//! `Content-Length` framing (LSP, DAP): the decoder against the plain
//! reference model in `childwire_core::testing`, at every chunk boundary and
//! in many chunkings, each notice kind, the memory bound at every step, the
//! encoder, and the `tokio-util` codec.
//!
//! The reference model is behind the `testing` feature, which CI turns on
//! with `--all-features`.
#![cfg(feature = "testing")]

use bytes::{Bytes, BytesMut};
use childwire_core::EncodeErrorKind;
use childwire_core::testing::content_length as reference;
use childwire_core::{ContentLength, Frame, FrameDecoder, Framing, MalformedReason, Message};
use childwire_core::{ContentLengthDecoder, MAX_HEADER_LEN};
use childwire_core::{DecoderStats, OVERSIZED_HEAD_LEN};
use proptest::prelude::*;

/// How chunks are handed to the decoder.
#[derive(Debug, Clone, Copy)]
enum Feed {
    /// `handle_data` (copied once).
    Copy,
    /// `handle_bytes` (bodies sliced out of the chunk).
    Bytes,
    /// Alternating, so both paths meet state left by the other.
    Mixed,
}

/// Decodes `input` fed as `chunks` (sizes, cycled; the rest in one piece),
/// draining after every chunk, and checks the documented memory bound at
/// every step.
fn decode_with(
    input: &[u8],
    max: usize,
    chunks: &[usize],
    feed: Feed,
) -> (Vec<Frame>, DecoderStats) {
    let mut decoder = ContentLengthDecoder::new(max);
    let mut out = Vec::new();
    let mut rest = input;
    let mut sizes = chunks.iter().copied().filter(|&n| n > 0).cycle();
    let mut step = 0usize;
    while !rest.is_empty() {
        let n = sizes.next().unwrap_or(rest.len()).min(rest.len());
        let (chunk, tail) = rest.split_at(n);
        rest = tail;
        let by_bytes = match feed {
            Feed::Copy => false,
            Feed::Bytes => true,
            Feed::Mixed => step % 2 == 1,
        };
        step += 1;
        reference::feed(&mut decoder, chunk, by_bytes, &mut out);
    }
    reference::finish(&mut decoder, &mut out);
    (out, *decoder.stats())
}

fn decode(input: &[u8], max: usize, chunks: &[usize]) -> (Vec<Frame>, DecoderStats) {
    decode_with(input, max, chunks, Feed::Copy)
}

fn message(body: &[u8]) -> Frame {
    Frame::Message(Message::new(body.to_vec()))
}

fn malformed(reason: MalformedReason, head: &[u8]) -> Frame {
    Frame::Malformed(childwire_core::Malformed::new(
        reason,
        Bytes::copy_from_slice(head),
    ))
}

fn frame(body: &[u8]) -> Vec<u8> {
    let mut wire = format!("Content-Length: {}\r\n\r\n", body.len()).into_bytes();
    wire.extend_from_slice(body);
    wire
}

/// Frames of every kind the rules distinguish, with a limit of 16.
fn corpus() -> Vec<u8> {
    let mut wire = Vec::new();
    wire.extend(frame(br#"{"id":1}"#));
    // Other headers, any case, white space around values, a body holding
    // what looks like framing, and invalid UTF-8.
    wire.extend_from_slice(b"content-type: application/json\r\nCONTENT-length:\t 12 \r\n\r\n");
    wire.extend_from_slice(b"a\r\n\r\nb\n\xff\xfe\r\nc");
    // A stray CRLF before a header block, and a repeated length that agrees.
    wire.extend_from_slice(b"\r\nContent-Length: 3\r\nContent-Length: 003\r\n\r\nabc");
    // An empty body: skipped and counted.
    wire.extend(frame(b""));
    // Over the limit: dropped, keeping its head.
    wire.extend(frame(b"this body is longer than sixteen bytes"));
    // Exactly the limit.
    wire.extend(frame(b"exactly16bytes!!"));
    // Malformed blocks; each is dropped up to the next header.
    wire.extend_from_slice(b"Content-Type: x\r\n\r\n");
    wire.extend_from_slice(b"Content-Length: -1\r\n\r\n");
    wire.extend_from_slice(b"Content-Length: 1\r\nContent-Length: 2\r\n\r\n");
    wire.extend(frame(b"x"));
    wire.extend_from_slice(b"no colon here\r\n\r\n");
    wire.extend(frame(b"after"));
    // A length shorter than the body: the rest is dropped up to the next
    // header. Then headers ended by `\n` alone.
    wire.extend_from_slice(b"Content-Length: 2\r\n\r\n[1,2]");
    wire.extend_from_slice(b"Content-Length: 2\n\nlf");
    // Cut short by the end of the stream.
    wire.extend_from_slice(b"Content-Length: 9\r\n\r\ncut");
    wire
}
const CORPUS_MAX: usize = 16;

#[test]
fn corpus_matches_the_reference_and_holds_every_kind() {
    let input = corpus();
    let (frames, stats) = decode(&input, CORPUS_MAX, &[]);
    let (expected, expected_stats) = reference::frames(&input, CORPUS_MAX);
    assert_eq!(frames, expected);
    assert_eq!(stats, expected_stats);
    assert_eq!(
        frames,
        [
            message(br#"{"id":1}"#),
            message(b"a\r\n\r\nb\n\xff\xfe\r\nc"),
            message(b"abc"),
            Frame::Oversized(childwire_core::Oversized::new(
                38,
                Bytes::from_static(b"this body is longer than sixteen bytes")
            )),
            message(b"exactly16bytes!!"),
            malformed(MalformedReason::MissingLength, b"Content-Type: x\r\n\r\n"),
            malformed(
                MalformedReason::InvalidLength,
                b"Content-Length: -1\r\n\r\n"
            ),
            malformed(
                MalformedReason::InvalidLength,
                b"Content-Length: 1\r\nContent-Length: 2\r\n\r\n"
            ),
            message(b"x"),
            malformed(MalformedReason::InvalidHeader, b"no colon here\r\n\r\n"),
            message(b"after"),
            message(b"[1"),
            malformed(MalformedReason::InvalidHeader, b",2]"),
            message(b"lf"),
            malformed(
                MalformedReason::Truncated {
                    expected: 9,
                    got: 3
                },
                b"cut"
            ),
        ]
    );
    assert_eq!(
        (
            stats.messages,
            stats.bytes,
            stats.blank_lines,
            stats.oversized,
            stats.malformed
        ),
        (8, 8 + 12 + 3 + 16 + 1 + 5 + 2 + 2, 1, 1, 6)
    );
}

#[test]
fn corpus_split_at_every_point_matches_unsplit() {
    let input = corpus();
    let whole = decode(&input, CORPUS_MAX, &[]);
    for cut in 1..input.len() {
        for feed in [Feed::Copy, Feed::Bytes, Feed::Mixed] {
            assert_eq!(
                decode_with(&input, CORPUS_MAX, &[cut, input.len()], feed),
                whole,
                "cut at {cut}, {feed:?}"
            );
        }
    }
}

#[test]
fn corpus_in_many_chunkings_matches_unsplit() {
    let input = corpus();
    let whole = decode(&input, CORPUS_MAX, &[]);
    for a in 1..input.len() {
        for b in [1, 2, 3, 4, 5, 7, 16, 17, 18, 64] {
            for feed in [Feed::Copy, Feed::Bytes, Feed::Mixed] {
                assert_eq!(
                    decode_with(&input, CORPUS_MAX, &[a, b], feed),
                    whole,
                    "chunks {a}, {b}, {feed:?}"
                );
            }
        }
    }
    assert_eq!(
        decode(&input, CORPUS_MAX, &[1]),
        whole,
        "one byte at a time"
    );
}

#[test]
fn body_in_one_chunk_is_a_slice_of_it_without_copying() {
    let chunk = Bytes::from(frame(b"{\"zero\":\"copy\"}"));
    let range = chunk.as_ptr_range();
    let mut decoder = ContentLengthDecoder::default();
    decoder.handle_bytes(chunk.clone());
    let Some(Frame::Message(message)) = decoder.poll_frame() else {
        panic!("one message");
    };
    assert!(
        range.contains(&message.as_ptr()),
        "the body must point into the chunk"
    );
    assert_eq!(decoder.buffered(), 0);
}

#[test]
fn oversized_body_streams_past_holding_only_its_head() {
    let mut decoder = ContentLengthDecoder::new(8);
    decoder.handle_data(b"Content-Length: 1000015\r\n\r\n{\"id\":7,\"x\":\"");
    assert_eq!(decoder.poll_frame(), None);
    for _ in 0..1000 {
        decoder.handle_data(&[b'x'; 1000]);
        assert_eq!(decoder.poll_frame(), None);
        assert!(decoder.buffered() <= OVERSIZED_HEAD_LEN);
    }
    decoder.handle_data(b"\"}Content-Length: 2\r\n\r\nok");
    let Some(Frame::Oversized(notice)) = decoder.poll_frame() else {
        panic!("expected an oversized notice");
    };
    assert_eq!(notice.len, 1_000_015);
    assert_eq!(notice.head.len(), OVERSIZED_HEAD_LEN);
    assert!(
        notice.head.starts_with(b"{\"id\":7,"),
        "the head lets a caller find the id"
    );
    assert_eq!(decoder.poll_frame(), Some(message(b"ok")));
    assert_eq!(decoder.stats().oversized, 1);
    assert_eq!(decoder.buffered(), 0);
}

#[test]
fn length_beyond_u64_or_memory_is_a_notice_not_an_allocation() {
    let input = b"Content-Length: 18446744073709551615\r\n\r\nabc";
    let (frames, _) = decode(input, 16, &[5]);
    assert_eq!(
        frames,
        [malformed(
            MalformedReason::Truncated {
                expected: u64::MAX,
                got: 3
            },
            b"abc"
        )]
    );
    let (frames, _) = decode(b"Content-Length: 18446744073709551616\r\n\r\n", 16, &[]);
    assert!(
        matches!(&frames[..], [Frame::Malformed(m)] if m.reason == MalformedReason::InvalidLength)
    );
}

#[test]
fn body_over_the_default_limit_grows_as_it_arrives_within_its_length() {
    const DEFAULT: usize = 16 * 1024 * 1024;
    const BIG: usize = 20 * 1024 * 1024;
    let mut decoder = ContentLengthDecoder::new(usize::MAX);
    decoder.handle_data(format!("Content-Length: {BIG}\r\n\r\n").as_bytes());
    assert_eq!(decoder.poll_frame(), None);
    let chunk = vec![b'b'; 1024 * 1024];
    let mut arrived = 0;
    let mut frames = Vec::new();
    while arrived < BIG {
        decoder.handle_data(&chunk);
        arrived += chunk.len();
        frames.extend(std::iter::from_fn(|| decoder.poll_frame()));
        if arrived < BIG {
            // The default limit's worth first, then (doubling, capped) the
            // body's length: never the claimed length up front.
            let expected = if arrived <= DEFAULT { DEFAULT } else { BIG };
            assert_eq!(decoder.buffered(), expected, "after {arrived} bytes");
        }
    }
    assert!(
        matches!(&frames[..], [Frame::Message(m)] if m.len() == BIG && m.iter().all(|&b| b == b'b'))
    );
    assert_eq!(decoder.buffered(), 0);
}

#[test]
fn header_claiming_more_than_memory_holds_costs_nothing_until_bytes_come() {
    let mut decoder = ContentLengthDecoder::new(usize::MAX);
    decoder.handle_data(b"Content-Length: 1152921504606846976\r\n\r\nabc");
    assert_eq!(decoder.poll_frame(), None);
    assert!(decoder.buffered() <= 16 * 1024 * 1024);
    decoder.handle_eof();
    assert_eq!(
        decoder.poll_frame(),
        Some(malformed(
            MalformedReason::Truncated {
                expected: 1 << 60,
                got: 3
            },
            b"abc"
        ))
    );
}

#[test]
fn c35_each_header_problem_is_one_notice_and_its_body_goes_with_it() {
    // Each broken block is followed by the body its sender meant for it,
    // which cannot be measured: it is dropped with the block, up to the
    // next header, and the next frame arrives.
    let cases: &[(&[u8], MalformedReason)] = &[
        (
            b"Content-Type: text\r\n\r\n",
            MalformedReason::MissingLength,
        ),
        (
            b"Content-Length: twelve\r\n\r\n",
            MalformedReason::InvalidLength,
        ),
        (
            b"Content-Length: -5\r\n\r\n",
            MalformedReason::InvalidLength,
        ),
        (
            b"Content-Length: 1.5\r\n\r\n",
            MalformedReason::InvalidLength,
        ),
        (b"Content-Length:\r\n\r\n", MalformedReason::InvalidLength),
        (
            b"Content-Length: 7\r\nContent-Length: 3\r\n\r\n",
            MalformedReason::InvalidLength,
        ),
        (
            b"Content-Length: 18446744073709551616\r\n\r\n",
            MalformedReason::InvalidLength,
        ),
        (b"Content-Length 7\r\n\r\n", MalformedReason::InvalidHeader),
        (b"X: y\r\nbroken\r\n\r\n", MalformedReason::InvalidHeader),
        (b"\"id\": 7\r\n\r\n", MalformedReason::InvalidHeader),
    ];
    for &(block, reason) in cases {
        let mut dropped = block.to_vec();
        dropped.extend_from_slice(br#"{"a":1}"#);
        let mut input = dropped.clone();
        input.extend(frame(b"ok"));
        for chunk in 1..=input.len() {
            let (frames, stats) = decode(&input, 16, &[chunk]);
            assert_eq!(
                frames,
                [malformed(reason, &dropped), message(b"ok")],
                "{:?} in {chunk}-byte chunks",
                String::from_utf8_lossy(block)
            );
            assert_eq!((stats.malformed, stats.messages), (1, 1));
        }
    }
}

#[test]
fn c35_blank_lines_between_frames_are_skipped_without_a_notice() {
    let mut input = b"\r\n\r\n\n".to_vec();
    input.extend(frame(b"a"));
    input.extend_from_slice(b"\r\n");
    input.extend(frame(b"b"));
    input.extend_from_slice(b"\n\r\n");
    for chunk in 1..=input.len() {
        let (frames, stats) = decode(&input, 16, &[chunk]);
        assert_eq!(
            frames,
            [message(b"a"), message(b"b")],
            "{chunk}-byte chunks"
        );
        assert_eq!(stats.malformed, 0);
    }
}

#[test]
fn c35_a_broken_line_before_the_length_costs_only_that_line() {
    // The search for the next header starts at the byte that broke the
    // block, so a `Content-Length` later in the same block is that next
    // header, and its body is delivered.
    let mut input = b"X: y\r\n{broken}\r\nContent-Length: 2\r\n\r\nhi".to_vec();
    input.extend(frame(b"ok"));
    let (frames, _) = decode(&input, 16, &[]);
    assert_eq!(
        frames,
        [
            malformed(MalformedReason::InvalidHeader, b"X: y\r\n{broken}\r\n"),
            message(b"hi"),
            message(b"ok"),
        ]
    );
}

/// A header block of `len` bytes, its `\r\n\r\n` included, that would
/// otherwise be valid: a long `X-Padding` header before `Content-Length`.
fn long_header(len: usize) -> Vec<u8> {
    let fixed = b"X-Padding: \r\nContent-Length: 2\r\n\r\n".len();
    let mut block = b"X-Padding: ".to_vec();
    block.resize(len - (fixed - b"X-Padding: ".len()), b'p');
    block.extend_from_slice(b"\r\nContent-Length: 2\r\n\r\n");
    assert_eq!(block.len(), len);
    block
}

#[test]
fn header_block_of_exactly_the_bound_is_accepted_one_more_byte_is_not() {
    let mut input = long_header(MAX_HEADER_LEN);
    input.extend_from_slice(b"ok");
    for chunk in [
        1,
        3,
        4,
        100,
        4096,
        MAX_HEADER_LEN - 1,
        MAX_HEADER_LEN,
        1 << 20,
    ] {
        let (frames, _) = decode(&input, 16, &[chunk]);
        assert_eq!(frames, [message(b"ok")], "{chunk}-byte chunks");
    }

    let mut input = long_header(MAX_HEADER_LEN + 1);
    input.extend_from_slice(b"ok");
    input.extend(frame(b"next"));
    let head = &input[..OVERSIZED_HEAD_LEN];
    for chunk in [
        1,
        3,
        4,
        100,
        4096,
        MAX_HEADER_LEN,
        MAX_HEADER_LEN + 1,
        1 << 20,
    ] {
        let (frames, stats) = decode(&input, 16, &[chunk]);
        // The block breaks at its byte past the bound: from there, the
        // bytes up to the next header (the block's last `\n` and its body
        // `ok`) are dropped with it, and `next` arrives.
        assert_eq!(
            frames,
            [
                malformed(MalformedReason::InvalidHeader, head),
                message(b"next"),
            ],
            "{chunk}-byte chunks"
        );
        assert_eq!(stats.malformed, 1);
        assert_eq!(frames, reference::frames(&input, 16).0);
    }
}

#[test]
fn endless_header_block_is_dropped_holding_nothing_until_the_next_header() {
    let mut decoder = ContentLengthDecoder::new(16);
    let mut notices = 0;
    for _ in 0..1000 {
        // Well-formed lines: only the block's length is wrong.
        decoder.handle_data(b"X-Endless: 0123456789abcdef\r\n");
        while let Some(frame) = decoder.poll_frame() {
            assert_eq!(
                frame,
                malformed(
                    MalformedReason::InvalidHeader,
                    &b"X-Endless: 0123456789abcdef\r\n".repeat(40)[..OVERSIZED_HEAD_LEN]
                )
            );
            notices += 1;
        }
        assert!(decoder.buffered() <= OVERSIZED_HEAD_LEN);
    }
    assert_eq!(notices, 1, "one notice for the whole block");
    decoder.handle_data(b"Content-Length: 2\r\n\r\nok");
    assert_eq!(decoder.poll_frame(), Some(message(b"ok")));
    assert_eq!(decoder.buffered(), 0);
}

#[test]
fn stream_ending_inside_a_frame_is_one_truncated_notice() {
    let cases: &[(&[u8], u64, u64, &[u8])] = &[
        (b"Content-Len", 0, 0, b"Content-Len"),
        (b"Content-Length: 5\r\n\r", 0, 0, b"Content-Length: 5\r\n\r"),
        (b"Content-Length: 5\r\n\r\n", 5, 0, b""),
        (b"Content-Length: 5\r\n\r\nabcd", 5, 4, b"abcd"),
        // Over the limit of 2: still truncated, with the head that came.
        (b"Content-Length: 50\r\n\r\nabcd", 50, 4, b"abcd"),
    ];
    for &(input, expected, got, head) in cases {
        for chunk in 1..=input.len() {
            let (frames, stats) = decode(input, 2, &[chunk]);
            assert_eq!(
                frames,
                [malformed(
                    MalformedReason::Truncated { expected, got },
                    head
                )],
                "{:?} in {chunk}-byte chunks",
                String::from_utf8_lossy(input)
            );
            assert_eq!((stats.malformed, stats.oversized), (1, 0));
        }
    }
}

#[test]
fn empty_bodies_are_skipped_and_counted() {
    let mut input = frame(b"");
    input.extend(frame(b"x"));
    input.extend(frame(b""));
    let (frames, stats) = decode(&input, 16, &[1]);
    assert_eq!(frames, [message(b"x")]);
    assert_eq!(stats.blank_lines, 2);
}

#[test]
fn decoder_after_eof_starts_a_new_stream() {
    let mut decoder = ContentLengthDecoder::new(16);
    decoder.handle_data(b"Content-Length: 3\r\n\r\nab");
    decoder.handle_eof();
    assert!(matches!(decoder.poll_frame(), Some(Frame::Malformed(_))));
    assert_eq!(decoder.poll_frame(), None);
    decoder.handle_data(&frame(b"new"));
    assert_eq!(decoder.poll_frame(), Some(message(b"new")));
}

#[test]
fn framing_trait_builds_the_decoder_and_reports_its_limit() {
    let decoder = ContentLength.decoder(42);
    assert_eq!(FrameDecoder::max_message_size(&decoder), 42);
    assert_eq!(
        ContentLengthDecoder::default().max_message_size(),
        16 * 1024 * 1024
    );
}

#[test]
fn encode_refuses_empty_and_oversized_and_accepts_any_bytes() {
    assert_eq!(ContentLength.check(b"", 8), Err(EncodeErrorKind::Empty));
    assert_eq!(
        ContentLength.check(b"123456789", 8),
        Err(EncodeErrorKind::TooLarge { len: 9, max: 8 })
    );
    assert_eq!(ContentLength.check(b"a\r\n\r\n\0\xff", 8), Ok(()));
    let mut wire = BytesMut::new();
    ContentLength.encode(b"a\r\n\r\n\0\xff", &mut wire);
    assert_eq!(&wire[..], b"Content-Length: 7\r\n\r\na\r\n\r\n\0\xff");
    assert_eq!(wire.len(), 7 + ContentLength.overhead(7));
}

#[cfg(feature = "tokio-util")]
mod codec {
    use super::*;
    use childwire_core::codec::ContentLengthCodec;
    use tokio_util::codec::{Decoder, Encoder};

    /// Decodes `input` through the codec, a read buffer filled `chunk`
    /// bytes at a time as `FramedRead` would.
    pub(super) fn decode(input: &[u8], max: usize, chunk: usize) -> (Vec<Frame>, DecoderStats) {
        let mut codec = ContentLengthCodec::new(max);
        let mut buf = BytesMut::new();
        let mut out = Vec::new();
        for piece in input.chunks(chunk.max(1)) {
            buf.extend_from_slice(piece);
            while let Some(frame) = codec.decode(&mut buf).expect("notices are items") {
                out.push(frame);
            }
            assert!(buf.is_empty(), "decode consumes the whole buffer");
            assert!(codec.buffered() <= reference::drained_bound(max));
        }
        while let Some(frame) = codec.decode_eof(&mut buf).expect("notices are items") {
            out.push(frame);
        }
        assert_eq!(codec.buffered(), 0);
        (out, *codec.stats())
    }

    #[test]
    fn codec_decodes_exactly_like_the_decoder() {
        let input = corpus();
        let whole = super::decode(&input, CORPUS_MAX, &[]);
        for chunk in 1..=input.len() {
            assert_eq!(
                decode(&input, CORPUS_MAX, chunk),
                whole,
                "{chunk}-byte reads"
            );
        }
    }

    #[test]
    fn codec_refuses_what_the_framing_refuses() {
        let mut codec = ContentLengthCodec::new(4);
        let mut out = BytesMut::new();
        let err = codec.encode(b"", &mut out).unwrap_err();
        assert_eq!(err.kind(), std::io::ErrorKind::InvalidInput);
        let err = codec.encode("12345", &mut out).unwrap_err();
        assert!(err.to_string().contains('5'), "{err}");
        assert!(out.is_empty(), "nothing of a refused message is written");
        codec.encode("\n\r", &mut out).unwrap();
        assert_eq!(&out[..], b"Content-Length: 2\r\n\r\n\n\r");
    }
}

/// Bytes that favour what the framing looks at: `\r`, `\n`, `:`, digits,
/// spaces, and the header name.
fn wire_bytes() -> impl Strategy<Value = Vec<u8>> {
    let token = prop_oneof![
        4 => prop::collection::vec(prop_oneof![
            3 => b'a'..=b'e',
            3 => Just(b'\r'),
            3 => Just(b'\n'),
            2 => Just(b':'),
            2 => b'0'..=b'9',
            1 => Just(b' '),
            1 => any::<u8>(),
        ], 1..6),
        1 => Just(b"Content-Length: ".to_vec()),
        1 => Just(b"content-length:".to_vec()),
        1 => Just(b"\r\n\r\n".to_vec()),
        1 => (0u8..30).prop_map(|n| n.to_string().into_bytes()),
    ];
    prop::collection::vec(token, 0..80).prop_map(|tokens| tokens.concat())
}

/// Streams of frames, mostly well formed: the interesting cases are valid
/// frames next to broken ones, where resynchronisation shows.
fn frame_stream() -> impl Strategy<Value = Vec<u8>> {
    let body = prop::collection::vec(
        prop_oneof![3 => b'a'..=b'z', 1 => Just(b'\r'), 1 => Just(b'\n'), 1 => any::<u8>()],
        0..40,
    );
    let piece = prop_oneof![
        // A frame: length right or off by a little, headers in any order
        // and case, with or without white space and other headers.
        6 => (body, -2i64..3, any::<bool>(), any::<bool>(), any::<bool>(), any::<bool>())
            .prop_map(|(body, delta, wrong_len, upper, ows, extra)| {
                let len = if wrong_len { body.len() as i64 + delta } else { body.len() as i64 };
                let name = if upper { "CONTENT-LENGTH" } else { "Content-Length" };
                let sep = if ows { ":\t " } else { ":" };
                let mut wire = Vec::new();
                if extra {
                    wire.extend_from_slice(b"Content-Type: application/json\r\n");
                }
                wire.extend_from_slice(format!("{name}{sep}{len}\r\n\r\n").as_bytes());
                wire.extend_from_slice(&body);
                wire
            }),
        1 => wire_bytes(),
    ];
    prop::collection::vec(piece, 0..12).prop_map(|pieces| pieces.concat())
}

fn check_against_reference(
    input: &[u8],
    max: usize,
    chunks: &[usize],
    feed: Feed,
) -> Result<(), TestCaseError> {
    let (frames, stats) = decode_with(input, max, chunks, feed);
    let (expected, expected_stats) = reference::frames(input, max);
    prop_assert_eq!(frames, expected);
    prop_assert_eq!(stats, expected_stats);
    Ok(())
}

fn feed() -> impl Strategy<Value = Feed> {
    prop_oneof![Just(Feed::Copy), Just(Feed::Bytes), Just(Feed::Mixed)]
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(2000))]

    #[test]
    fn frame_streams_in_any_chunking_match_the_reference(
        input in frame_stream(),
        max in 0usize..48,
        chunks in prop::collection::vec(1usize..40, 1..8),
        feed in feed(),
    ) {
        check_against_reference(&input, max, &chunks, feed)?;
    }

    #[test]
    fn any_bytes_in_any_chunking_match_the_reference(
        input in wire_bytes(),
        max in 0usize..24,
        chunks in prop::collection::vec(1usize..40, 1..8),
        feed in feed(),
    ) {
        check_against_reference(&input, max, &chunks, feed)?;
    }

    #[test]
    fn every_accepted_payload_decodes_back_to_itself(
        payloads in prop::collection::vec(prop::collection::vec(any::<u8>(), 0..40), 0..20),
        max in 0usize..32,
        chunk in 1usize..64,
    ) {
        let mut wire = BytesMut::new();
        let mut accepted = Vec::new();
        for payload in payloads {
            match ContentLength.check(&payload, max) {
                Ok(()) => {
                    let before = wire.len();
                    ContentLength.encode(&payload, &mut wire);
                    prop_assert_eq!(wire.len() - before, payload.len() + ContentLength.overhead(payload.len()));
                    accepted.push(message(&payload));
                }
                Err(EncodeErrorKind::Empty) => prop_assert!(payload.is_empty()),
                Err(EncodeErrorKind::TooLarge { len, max: limit }) => {
                    prop_assert!(len == payload.len() && len > max && limit == max);
                }
                Err(other) => prop_assert!(false, "unexpected refusal {other:?}"),
            }
        }
        let (frames, _) = decode(&wire, max, &[chunk]);
        prop_assert_eq!(frames, accepted);
    }
}

proptest! {
    // Its space is small (block lengths within 8 bytes of the bound, a
    // handful of chunk sizes) and each case is 16 KiB fed in pieces: a few
    // hundred cases cover it.
    #![proptest_config(ProptestConfig::with_cases(256))]

    #[test]
    fn header_blocks_around_the_bound_match_the_reference(
        lens in prop::collection::vec(MAX_HEADER_LEN - 8..MAX_HEADER_LEN + 8, 1..3),
        tail in wire_bytes(),
        chunk in prop_oneof![1usize..8, 4000usize..9000],
    ) {
        let mut input: Vec<u8> = lens.into_iter().flat_map(|len| {
            let mut block = long_header(len);
            block.extend_from_slice(b"ok");
            block
        }).collect();
        input.extend(tail);
        check_against_reference(&input, 16, &[chunk], Feed::Mixed)?;
    }
}

#[test]
fn c28_an_oversized_body_names_its_top_level_json_rpc_id() {
    // The id comes last, after a result holding an `"id"` of its own.
    let body = format!(
        r#"{{"result":{{"id":99,"text":"{}"}},"jsonrpc":"2.0","id":"req-7"}}"#,
        "a".repeat(300)
    );
    let wire = format!("Content-Length: {}\r\n\r\n{body}", body.len());
    for split in [1, 7, 64, wire.len()] {
        let mut decoder = ContentLengthDecoder::new(64);
        for chunk in wire.as_bytes().chunks(split) {
            decoder.handle_data(chunk);
        }
        let Some(Frame::Oversized(notice)) = decoder.poll_frame() else {
            panic!("expected an oversized notice");
        };
        assert_eq!(notice.len, body.len() as u64);
        assert_eq!(
            notice.json_rpc_id().map(|id| &id[..]),
            Some(&br#""req-7""#[..]),
            "split every {split} bytes"
        );
    }
}
