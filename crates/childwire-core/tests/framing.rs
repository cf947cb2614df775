//! Framing tests: C01–C04 and C19 on the decoder, C06–C08 on the encoder.
//!
//! The reference model is `childwire_core::testing::lines`, behind the
//! `testing` feature, which CI turns on with `--all-features`.
#![cfg(feature = "testing")]

use childwire_core::testing::lines::{self as reference, Expected};
use childwire_core::{EncodeErrorKind, LineEncoder, check_message};
use childwire_core::{Frame, LineDecoder, OVERSIZED_HEAD_LEN};
use proptest::prelude::*;

/// Decodes `input` fed as `chunks` (sizes, cycled; the rest in one piece),
/// draining after every chunk, and checks the memory bound at every step.
fn decode_chunked(input: &[u8], max: usize, chunks: &[usize]) -> (Vec<Expected>, u64) {
    decode_chunked_by(input, max, chunks, Drain::Poll)
}

/// How frames are taken from the decoder.
#[derive(Debug, Clone, Copy)]
enum Drain {
    /// `poll_frame` until `None`.
    Poll,
    /// `drain_frames`, the batch form `Inbound` uses.
    Batch,
}

fn take_frames(decoder: &mut LineDecoder, how: Drain, out: &mut Vec<Expected>) {
    match how {
        Drain::Poll => {
            while let Some(frame) = decoder.poll_frame() {
                out.push(frame.into());
            }
        }
        Drain::Batch => decoder.drain_frames(|frame| out.push(frame.into())),
    }
}

fn decode_chunked_by(
    input: &[u8],
    max: usize,
    chunks: &[usize],
    how: Drain,
) -> (Vec<Expected>, u64) {
    let mut decoder = LineDecoder::new(max);
    let mut out = Vec::new();
    let mut rest = input;
    let mut sizes = chunks.iter().copied().filter(|&n| n > 0).cycle();
    while !rest.is_empty() {
        let n = sizes.next().unwrap_or(rest.len()).min(rest.len());
        let (chunk, tail) = rest.split_at(n);
        rest = tail;
        decoder.handle_data(chunk);
        assert!(
            decoder.buffered() <= max + 1 + chunk.len() + OVERSIZED_HEAD_LEN,
            "buffered {} bytes with max {max} and a {}-byte chunk",
            decoder.buffered(),
            chunk.len()
        );
        take_frames(&mut decoder, how, &mut out);
        assert!(decoder.buffered() <= max + 1 + OVERSIZED_HEAD_LEN);
    }
    decoder.handle_eof();
    take_frames(&mut decoder, how, &mut out);
    // Polled between chunks, no byte was copied twice (and the bytes of
    // oversized lines not at all, from the chunk where dropping began).
    assert!(
        decoder.bytes_copied() <= input.len() as u64,
        "copied {} of {} bytes",
        decoder.bytes_copied(),
        input.len()
    );
    assert_eq!(
        decoder.poll_frame(),
        None,
        "a drained decoder stays drained"
    );
    assert_eq!(decoder.buffered(), 0);
    (out, decoder.stats().blank_lines)
}

fn message(text: &str) -> Expected {
    Expected::Message(text.as_bytes().to_vec(), true)
}

/// Lines of every kind the rules distinguish, with a limit of 16.
const CORPUS: &[u8] = b"{\"id\":1}\n\n\r\n{\"crlf\":true}\r\nthis line is longer than sixteen bytes\n\xff\xfe not utf-8\nexactly16bytes!!\nexactly16bytes!!\r\n\r\r\nseventeen bytes!!\nno newline";
const CORPUS_MAX: usize = 16;

#[test]
fn c01_lines_split_on_newline_with_one_cr_stripped_and_blanks_counted() {
    let (frames, blank) = decode_chunked(b"a\r\nb\n\n\r\nc\r\r\n", 16, &[]);
    assert_eq!(frames, [message("a"), message("b"), message("c\r")]);
    assert_eq!(blank, 2);
}

#[test]
fn c01_corpus_matches_reference_unsplit() {
    let (frames, blank) = decode_chunked(CORPUS, CORPUS_MAX, &[]);
    let (expected, expected_blank) = reference::frames(CORPUS, CORPUS_MAX);
    assert_eq!(frames, expected);
    assert_eq!(blank, expected_blank);
    // The corpus is meant to hold every kind of line: check that it does.
    assert!(
        expected
            .iter()
            .any(|f| matches!(f, Expected::Oversized(..)))
    );
    assert!(
        expected
            .iter()
            .any(|f| matches!(f, Expected::Message(_, false)))
    );
    assert!(expected_blank >= 2);
}

#[test]
fn c01_corpus_split_at_every_point_matches_unsplit() {
    let whole = decode_chunked(CORPUS, CORPUS_MAX, &[]);
    for cut in 1..CORPUS.len() {
        assert_eq!(
            decode_chunked(CORPUS, CORPUS_MAX, &[cut, CORPUS.len()]),
            whole,
            "cut at {cut}"
        );
    }
    for a in 1..CORPUS.len() {
        for b in [1, 2, 3, 7, 16, 17, 18] {
            assert_eq!(
                decode_chunked(CORPUS, CORPUS_MAX, &[a, b]),
                whole,
                "chunks {a}, {b}"
            );
        }
    }
}

/// Chunks given without polling between them (a line completed by one
/// and the next begun by another, before anyone polled) frame the same.
#[test]
fn c01_chunks_given_without_polling_between_match_unsplit() {
    let whole = decode_chunked(CORPUS, CORPUS_MAX, &[]).0;
    for size in 1..CORPUS.len() {
        for polled_every in [2, 3] {
            let mut decoder = LineDecoder::new(CORPUS_MAX);
            let mut frames = Vec::new();
            for (i, chunk) in CORPUS.chunks(size).enumerate() {
                decoder.handle_data(chunk);
                if i % polled_every == 0 {
                    frames.extend(std::iter::from_fn(|| decoder.poll_frame()).map(Expected::from));
                }
            }
            decoder.handle_eof();
            frames.extend(std::iter::from_fn(|| decoder.poll_frame()).map(Expected::from));
            assert_eq!(
                frames, whole,
                "chunks of {size}, polled every {polled_every}"
            );
        }
    }
}

#[test]
fn c01_long_lines_spanning_chunks_are_copied_once_and_whole() {
    // Lines of about 1 MiB in 64 KiB chunks, of lengths that put their ends
    // anywhere in a chunk: each byte goes to the buffer its line is
    // completed in, once (the start of a line too, not through the staging
    // buffer first).
    const CHUNK: usize = 64 * 1024;
    let mut input = Vec::new();
    let mut lines = Vec::new();
    for (i, len) in [1 << 20, (1 << 20) + 7, (1 << 20) - 4099, 300, 1 << 20]
        .into_iter()
        .enumerate()
    {
        let line = vec![b'a' + i as u8; len];
        input.extend_from_slice(&line);
        input.push(b'\n');
        lines.push(line);
    }
    for how in [Drain::Poll, Drain::Batch] {
        let mut decoder = LineDecoder::new(2 << 20);
        let mut out = Vec::new();
        for chunk in input.chunks(CHUNK) {
            decoder.handle_data(chunk);
            take_frames(&mut decoder, how, &mut out);
        }
        let expected: Vec<Expected> = lines
            .iter()
            .map(|l| Expected::Message(l.clone(), true))
            .collect();
        assert_eq!(out, expected, "{how:?}");
        assert_eq!(decoder.bytes_copied(), input.len() as u64, "{how:?}");
    }
}

#[test]
fn c01_corpus_in_one_byte_chunks_matches_unsplit() {
    assert_eq!(
        decode_chunked(CORPUS, CORPUS_MAX, &[1]),
        decode_chunked(CORPUS, CORPUS_MAX, &[])
    );
}

#[test]
fn c02_oversized_line_is_dropped_and_stream_continues() {
    let mut decoder = LineDecoder::new(8);
    decoder.handle_data(b"{\"id\":7,\"x\":\"");
    assert_eq!(decoder.poll_frame(), None);
    // The line is known to be too long before its end: nothing of it is held
    // but the head, however much more arrives.
    for _ in 0..1000 {
        decoder.handle_data(&[b'x'; 1000]);
        assert_eq!(decoder.poll_frame(), None);
        assert!(decoder.buffered() <= OVERSIZED_HEAD_LEN);
    }
    decoder.handle_data(b"\"}\r\n{\"ok\":1}\n");
    let Some(Frame::Oversized(notice)) = decoder.poll_frame() else {
        panic!("expected an oversized notice");
    };
    assert_eq!(notice.len, 13 + 1_000_000 + 2);
    assert_eq!(notice.head.len(), OVERSIZED_HEAD_LEN);
    assert!(
        notice.head.starts_with(b"{\"id\":7,"),
        "the head lets a caller find the id"
    );
    assert_eq!(
        decoder.poll_frame().map(Expected::from),
        Some(message("{\"ok\":1}"))
    );
    assert_eq!(decoder.stats().oversized, 1);
}

#[test]
fn c02_line_of_exactly_the_limit_is_delivered_with_lf_and_crlf() {
    let (frames, _) = decode_chunked(b"12345678\n12345678\r\n123456789\n", 8, &[1]);
    assert_eq!(
        frames,
        [
            message("12345678"),
            message("12345678"),
            Expected::Oversized(9, b"123456789".to_vec())
        ]
    );
}

#[test]
fn c02_oversized_notices_repeat_and_resynchronise() {
    let input = b"aaaaaaaaaaaa\nbbbbbbbbbbbbbb\r\nok\ncccccccccccc";
    let (frames, _) = decode_chunked(input, 4, &[3]);
    assert_eq!(
        frames,
        [
            Expected::Oversized(12, b"aaaaaaaaaaaa".to_vec()),
            Expected::Oversized(14, b"bbbbbbbbbbbbbb".to_vec()),
            message("ok"),
            Expected::Oversized(12, b"cccccccccccc".to_vec()),
        ]
    );
}

#[test]
fn c03_invalid_utf8_is_delivered_as_bytes_with_a_checked_text_view() {
    let mut decoder = LineDecoder::default();
    decoder.handle_data(b"\xff\xfe\n{\"after\":true}\n");
    let Some(Frame::Message(bad)) = decoder.poll_frame() else {
        panic!("invalid UTF-8 must be delivered");
    };
    assert_eq!(&bad[..], b"\xff\xfe");
    assert!(bad.as_str().is_err());
    let Some(Frame::Message(good)) = decoder.poll_frame() else {
        panic!("the stream goes on after invalid UTF-8");
    };
    assert_eq!(good.as_str(), Ok("{\"after\":true}"));
}

#[test]
fn c04_final_line_without_newline_is_delivered_once_marked_unterminated() {
    let mut decoder = LineDecoder::default();
    decoder.handle_data(b"one\ntwo");
    assert!(matches!(decoder.poll_frame(), Some(Frame::Message(m)) if m.is_terminated()));
    assert_eq!(decoder.poll_frame(), None, "no line end yet: wait for more");
    decoder.handle_eof();
    let Some(Frame::Message(last)) = decoder.poll_frame() else {
        panic!("the final line must be delivered at EOF");
    };
    assert_eq!(&last[..], b"two");
    assert!(!last.is_terminated());
    assert_eq!(decoder.poll_frame(), None);
    assert_eq!(decoder.poll_frame(), None);
}

#[test]
fn c19_framer_counts_what_it_decoded() {
    let mut decoder = LineDecoder::new(4);
    decoder.handle_data(b"ab\n\ncdefgh\nij\n");
    while decoder.poll_frame().is_some() {}
    let stats = decoder.stats();
    assert_eq!(
        (
            stats.messages,
            stats.bytes,
            stats.blank_lines,
            stats.oversized
        ),
        (2, 4, 1, 1)
    );
}

#[test]
fn c06_payload_with_newline_or_cr_is_refused_and_returned_intact() {
    let mut encoder = LineEncoder::new(64, 1024);
    let err = encoder.encode(b"ab\ncd".to_vec()).unwrap_err();
    assert_eq!(err.kind(), &EncodeErrorKind::Newline { at: 2 });
    assert!(err.to_string().contains("newline at byte 2"), "{err}");
    assert_eq!(err.into_payload(), b"ab\ncd");
    let err = encoder.encode("x\ry\n").unwrap_err();
    assert_eq!(err.kind(), &EncodeErrorKind::CarriageReturn { at: 1 });
    assert_eq!(
        encoder.poll_transmit().as_deref(),
        None,
        "nothing of a refused message is queued"
    );
}

/// A batch written out lends its memory to the next one once the writer let
/// go of it: no allocation (and no page faults) per batch. While the writer
/// still holds it, the next batch is elsewhere, and nothing is overwritten.
///
/// Only the batch written last is kept, so every pointer compared here is
/// memory the encoder holds: none of them could come back from the allocator
/// by chance (an earlier version of this test compared with a batch already
/// freed, and failed when the allocator handed that memory to someone else).
#[test]
fn c07_the_next_batch_reuses_the_memory_of_the_batch_written_out() {
    let mut encoder = LineEncoder::new(1 << 20, 4 << 20);
    let big = vec![b'x'; 100_000];
    encoder.encode(&big[..]).unwrap();
    let first = encoder.poll_transmit().unwrap();
    let first_at = first.as_ptr();
    encoder.handle_written(first.len());
    drop(first);
    // Written and let go: the next batch lands in its memory.
    encoder.encode(&big[..]).unwrap();
    let again = encoder.poll_transmit().unwrap();
    assert_eq!(again.as_ptr(), first_at);
    assert_eq!(again.len(), big.len() + 1);
    encoder.handle_written(again.len());
    // The writer still holds the batch: the next goes elsewhere.
    encoder.encode("held").unwrap();
    let second = encoder.poll_transmit().unwrap();
    let (second_at, second_len) = (second.as_ptr(), second.len());
    assert_ne!(second_at, first_at);
    assert_eq!(&again[..again.len() - 1], &big[..], "still intact");
    drop(again);
    encoder.handle_written(second.len());
    drop(second);
    // The batch written last is the one kept: the next lands in its memory,
    // right after its bytes (it has room there, so nothing is rewound).
    encoder.encode("next").unwrap();
    let third = encoder.poll_transmit().unwrap();
    assert_eq!(third.as_ptr(), second_at.wrapping_add(second_len));
    assert_eq!(&third[..], b"next\n");
    assert_eq!(encoder.messages_written(), 3);
}

#[test]
fn c06_payload_over_the_limit_is_refused_and_returned_intact() {
    let mut encoder = LineEncoder::new(4, 1024);
    encoder.encode("1234").unwrap();
    let err = encoder.encode("12345").unwrap_err();
    assert_eq!(err.kind(), &EncodeErrorKind::TooLarge { len: 5, max: 4 });
    assert_eq!(err.into_payload(), "12345");
    assert_eq!(encoder.poll_transmit().as_deref(), Some(&b"1234\n"[..]));
}

#[test]
fn c07_queued_messages_go_out_together_and_partial_writes_resume() {
    let mut encoder = LineEncoder::new(64, 1024);
    for id in 0..3 {
        encoder.encode(format!("{{\"id\":{id}}}")).unwrap();
    }
    assert_eq!(
        encoder.poll_transmit().as_deref(),
        Some(&b"{\"id\":0}\n{\"id\":1}\n{\"id\":2}\n"[..])
    );
    encoder.handle_written(10);
    encoder.encode("{}").unwrap();
    assert_eq!(encoder.queued(), 17 + 3);
    // The batch in flight is finished first; what came later is the next.
    assert_eq!(
        encoder.poll_transmit().as_deref(),
        Some(&b"\"id\":1}\n{\"id\":2}\n"[..])
    );
    encoder.handle_written(usize::MAX);
    assert_eq!(encoder.poll_transmit().as_deref(), Some(&b"{}\n"[..]));
    encoder.handle_written(3);
    assert_eq!(encoder.poll_transmit(), None);
    assert_eq!(
        (encoder.messages_written(), encoder.bytes_written()),
        (4, 26)
    );
}

#[test]
fn c07_queue_is_bounded_by_the_high_water_mark() {
    let mut encoder = LineEncoder::new(64, 10);
    // An empty queue takes a valid message even above the mark...
    encoder.encode("0123456789abcdef").unwrap();
    // ...and then refuses until the writer catches up.
    let err = encoder.encode("x").unwrap_err();
    assert_eq!(
        err.kind(),
        &EncodeErrorKind::Full {
            queued: 17,
            high_water: 10
        }
    );
    assert_eq!(err.into_payload(), "x");
    assert!(encoder.poll_transmit().is_some());
    // 9 bytes left, plus the message's record, still cost more than 10.
    encoder.handle_written(8);
    assert!(matches!(
        encoder.encode("x").unwrap_err().kind(),
        EncodeErrorKind::Full { .. }
    ));
    assert!(encoder.cost() > encoder.queued());
    encoder.handle_written(9);
    encoder.encode("x").unwrap();
    assert_eq!(encoder.queued(), 2);
    assert_eq!(encoder.messages_written(), 1);
}

#[test]
fn c08_a_message_is_queued_whole_or_not_at_all() {
    let mut encoder = LineEncoder::new(8, 1024);
    for payload in ["ok", "bad\nline", "too long for it", "fine"] {
        let before = encoder.queued();
        match encoder.encode(payload) {
            Ok(()) => assert_eq!(encoder.queued(), before + payload.len() + 1),
            Err(_) => assert_eq!(encoder.queued(), before),
        }
    }
    assert_eq!(encoder.poll_transmit().as_deref(), Some(&b"ok\nfine\n"[..]));
}

/// A queue that outgrows a pipe's worth is handed out in batches of at most
/// 64 KiB (or one larger message), in order, each byte once, and the
/// counters stay exact across them.
#[test]
fn c07_a_queue_past_a_pipes_worth_goes_out_in_batches_in_order() {
    let mut encoder = LineEncoder::new(1 << 20, 4 << 20);
    let mut expected = Vec::new();
    for id in 0..2_000 {
        let message = format!("{{\"id\":{id},\"pad\":\"{}\"}}", "x".repeat(id % 300));
        encoder.encode(message.as_str()).unwrap();
        expected.extend_from_slice(message.as_bytes());
        expected.push(b'\n');
    }
    let big = vec![b'y'; 100_000];
    encoder.encode(&big[..]).unwrap();
    expected.extend_from_slice(&big);
    expected.push(b'\n');
    let mut out = Vec::new();
    let mut batches = 0;
    while let Some(batch) = encoder.poll_transmit() {
        assert!(
            batch.len() <= 64 * 1024 || batch.len() == big.len() + 1,
            "a batch of {} bytes",
            batch.len()
        );
        // Half of it first: a partial write resumes where it stopped.
        let half = batch.len() / 2;
        out.extend_from_slice(&batch[..half]);
        encoder.handle_written(half);
        let rest = encoder.poll_transmit().unwrap();
        out.extend_from_slice(&rest);
        encoder.handle_written(rest.len());
        batches += 1;
    }
    assert!(batches > 2, "{batches} batches");
    assert_eq!(out, expected);
    assert_eq!(encoder.messages_written(), 2_001);
    assert_eq!(encoder.queued(), 0);
}

/// A writer that never quite catches up (every write leaves a little
/// behind): the records of written messages are let go of, so what the
/// queue holds stays bounded however long it runs.
#[test]
fn c07_a_queue_that_never_empties_keeps_its_records_bounded() {
    let mut encoder = LineEncoder::new(64, 1024);
    for _ in 0..100_000 {
        encoder.encode("{\"jsonrpc\":\"2.0\"}").unwrap();
        encoder.encode("{}").unwrap();
        // Everything but the last byte.
        while encoder.queued() > 1 {
            let batch = encoder.poll_transmit().unwrap();
            encoder.handle_written(batch.len().min(encoder.queued() - 1));
        }
        assert!(encoder.cost() < 200, "cost {}", encoder.cost());
    }
    assert_eq!(encoder.messages_written(), 199_999);
    assert_eq!(encoder.queued_messages(), 1);
}

/// Payloads up to a few hundred bytes, mostly JSON-like, with a few control
/// bytes (tab, line breaks, others below 0x0E) anywhere: the lengths where
/// the check takes 16 or 64 bytes at a time, and their overlapping ends.
fn payload_with_controls() -> impl Strategy<Value = Vec<u8>> {
    (
        prop::collection::vec(b' '..=b'~', 0..300),
        prop::collection::vec(
            (
                any::<prop::sample::Index>(),
                prop_oneof![
                    Just(b'\n'),
                    Just(b'\r'),
                    Just(b'\t'),
                    0u8..0x0E,
                    Just(0x0Eu8)
                ],
            ),
            0..3,
        ),
    )
        .prop_map(|(mut payload, controls)| {
            if !payload.is_empty() {
                for (at, byte) in controls {
                    let at = at.index(payload.len());
                    payload[at] = byte;
                }
            }
            payload
        })
}

/// Bytes that favour the interesting cases: newlines, `\r`, invalid UTF-8.
fn wire_bytes() -> impl Strategy<Value = Vec<u8>> {
    prop::collection::vec(
        prop_oneof![4 => b'a'..=b'e', 2 => Just(b'\n'), 1 => Just(b'\r'), 1 => any::<u8>()],
        0..400,
    )
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(2000))]

    #[test]
    fn c02_any_bytes_any_chunking_match_the_reference_within_the_memory_bound(
        input in wire_bytes(),
        max in 0usize..24,
        chunks in prop::collection::vec(1usize..40, 1..8),
    ) {
        let (frames, blank) = decode_chunked(&input, max, &chunks);
        let (expected, expected_blank) = reference::frames(&input, max);
        prop_assert_eq!(frames, expected);
        prop_assert_eq!(blank, expected_blank);
    }

    #[test]
    fn c02_frames_drained_in_batches_match_the_reference_too(
        input in wire_bytes(),
        max in 0usize..24,
        chunks in prop::collection::vec(1usize..40, 1..8),
    ) {
        let (frames, blank) = decode_chunked_by(&input, max, &chunks, Drain::Batch);
        let (expected, expected_blank) = reference::frames(&input, max);
        prop_assert_eq!(frames, expected);
        prop_assert_eq!(blank, expected_blank);
    }

    #[test]
    fn c06_the_first_line_break_is_found_at_any_length_and_position(payload in payload_with_controls()) {
        let expected = match payload.iter().position(|&b| b == b'\n' || b == b'\r') {
            _ if payload.is_empty() => Err(EncodeErrorKind::Empty),
            Some(at) if payload[at] == b'\n' => Err(EncodeErrorKind::Newline { at }),
            Some(at) => Err(EncodeErrorKind::CarriageReturn { at }),
            None => Ok(()),
        };
        prop_assert_eq!(check_message(&payload, usize::MAX), expected);
    }

    #[test]
    fn c06_every_accepted_payload_decodes_back_to_itself(
        payloads in prop::collection::vec(prop::collection::vec(any::<u8>(), 0..40), 0..20),
        max in 0usize..32,
    ) {
        let mut encoder = LineEncoder::new(max, usize::MAX);
        let mut accepted = Vec::new();
        for payload in payloads {
            let clean = !payload.contains(&b'\n') && !payload.contains(&b'\r');
            match encoder.encode(payload.clone()) {
                Ok(()) => {
                    prop_assert!(clean && !payload.is_empty() && payload.len() <= max);
                    accepted.push(payload);
                }
                Err(err) => {
                    let expected_at = payload.iter().position(|&b| b == b'\n' || b == b'\r');
                    match *err.kind() {
                        EncodeErrorKind::Empty => prop_assert!(payload.is_empty()),
                        EncodeErrorKind::Newline { at } => {
                            prop_assert_eq!(Some(at), expected_at);
                            prop_assert_eq!(payload[at], b'\n');
                        }
                        EncodeErrorKind::CarriageReturn { at } => {
                            prop_assert_eq!(Some(at), expected_at);
                            prop_assert_eq!(payload[at], b'\r');
                        }
                        EncodeErrorKind::TooLarge { len, .. } => {
                            prop_assert!(clean && len == payload.len() && len > max);
                        }
                        other => prop_assert!(false, "unexpected refusal {other:?}"),
                    }
                    prop_assert_eq!(err.into_payload(), payload);
                }
            }
        }
        let mut decoder = LineDecoder::new(max);
        decoder.handle_bytes(encoder.poll_transmit().unwrap_or_default());
        decoder.handle_eof();
        let mut decoded = Vec::new();
        while let Some(frame) = decoder.poll_frame() {
            match frame {
                Frame::Message(m) => decoded.push(m.to_vec()),
                other => prop_assert!(false, "accepted payload came back as {other:?}"),
            }
        }
        // Empty payloads are refused: they would be blank lines, not messages.
        prop_assert!(accepted.iter().all(|p| !p.is_empty()));
        prop_assert_eq!(decoded, accepted);
    }
}
