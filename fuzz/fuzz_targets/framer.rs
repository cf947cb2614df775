//! Differential fuzzing of `LineDecoder` against the plain reference model:
//! arbitrary bytes, arbitrary chunking, a small limit so oversized lines are
//! common. Checks the frames, the notices, the blank-line count and the
//! memory bound after every step.

#![no_main]

use arbitrary::Arbitrary;
use childwire_core::testing::lines::{self as reference, Expected};
use childwire_core::{LineDecoder, OVERSIZED_HEAD_LEN};
use libfuzzer_sys::fuzz_target;

#[derive(Debug, Arbitrary)]
struct Input {
    /// The limit is `1 + max % 64`: small, so lines over it are frequent.
    max: u8,
    /// Chunk sizes, cycled. 0 feeds an empty chunk (then one byte, so the
    /// run always progresses); an empty list feeds everything at once.
    chunks: Vec<u8>,
    data: Vec<u8>,
}

fuzz_target!(|input: Input| {
    let max = 1 + usize::from(input.max % 64);
    let mut decoder = LineDecoder::new(max);
    let mut frames: Vec<Expected> = Vec::new();
    let mut rest = input.data.as_slice();
    let mut sizes = input.chunks.iter().copied().cycle();
    // The top bit of `max` picks how frames are taken: one `poll_frame`
    // at a time, or in batches with `drain_frames`, as `Inbound` does.
    let batched = input.max & 0x80 != 0;
    let take = |decoder: &mut LineDecoder, frames: &mut Vec<Expected>| {
        if batched {
            decoder.drain_frames(|frame| frames.push(frame.into()));
        } else {
            while let Some(frame) = decoder.poll_frame() {
                frames.push(frame.into());
            }
        }
    };

    let feed = |decoder: &mut LineDecoder, chunk: &[u8], frames: &mut Vec<Expected>| {
        decoder.handle_data(chunk);
        // The documented bound: the incomplete line (limit + a possible
        // `\r`), the chunk just given, and an oversized line's head.
        let bound = max + 1 + chunk.len() + OVERSIZED_HEAD_LEN;
        assert!(
            decoder.buffered() <= bound,
            "buffered {} > {bound} (max {max}, chunk {})",
            decoder.buffered(),
            chunk.len()
        );
        take(decoder, frames);
        assert!(decoder.buffered() <= max + 1 + OVERSIZED_HEAD_LEN);
    };

    while !rest.is_empty() {
        let size = match sizes.next() {
            None => rest.len(),
            Some(0) => {
                feed(&mut decoder, &[], &mut frames);
                1
            }
            Some(n) => usize::from(n),
        };
        let (chunk, tail) = rest.split_at(size.min(rest.len()));
        rest = tail;
        feed(&mut decoder, chunk, &mut frames);
    }
    decoder.handle_eof();
    take(&mut decoder, &mut frames);
    assert!(
        decoder.poll_frame().is_none(),
        "a drained decoder stays drained"
    );
    assert_eq!(decoder.buffered(), 0, "nothing held after EOF is drained");

    // Polled after every chunk: no byte was copied twice.
    assert!(decoder.bytes_copied() <= input.data.len() as u64);

    let (expected, blank) = reference::frames(&input.data, max);
    assert_eq!(frames, expected);
    let stats = decoder.stats();
    assert_eq!(stats.blank_lines, blank);
    let messages = expected
        .iter()
        .filter(|e| matches!(e, Expected::Message(..)))
        .count() as u64;
    assert_eq!(stats.messages, messages);
    assert_eq!(stats.oversized, expected.len() as u64 - messages);
});
