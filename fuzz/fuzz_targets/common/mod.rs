//! What the `session` and `channel` targets share: the reference model of
//! each framing, the cost of a queued frame, the lazy check of the receive
//! queue's memory bound, and the [`Harness`] that plays the transport's
//! tasks against a `Session` and checks what it gives back.

#![allow(dead_code)]

mod tasks;

pub use tasks::{Harness, Op};

use std::fmt::Debug;

use bytes::BytesMut;
use childwire_core::MAX_HEADER_LEN;
use childwire_core::OVERSIZED_HEAD_LEN;
use childwire_core::testing::{content_length, lines};
use childwire_core::{ContentLength, Frame, Framing, Lines};
use childwire_core::{Counters, ITEM_OVERHEAD};

/// A framing with its reference model, from `childwire_core::testing`.
pub trait Model: Framing {
    /// What frames are compared as.
    type Item: PartialEq + Debug;

    /// Whether a message is one line (so one set aside holds no `\n`).
    const ONE_LINE: bool;

    /// The frames of the whole `input` followed by the end of the stream.
    fn expected(input: &[u8], max: usize) -> Vec<Self::Item>;

    /// A decoded frame in the model's terms.
    fn item(frame: Frame) -> Self::Item;

    /// Checks `got`, decoded from `input` without the end of the stream,
    /// against the expected frames that `kept` keeps.
    fn check_without_eof(
        got: &[Self::Item],
        input: &[u8],
        max: usize,
        kept: &dyn Fn(&Self::Item) -> bool,
    );

    /// The bytes of a message frame; `None` for a notice.
    fn message(item: &Self::Item) -> Option<&[u8]>;

    /// `body` made into one well-formed frame of this framing, so that
    /// valid messages are as common as broken bytes.
    fn frame(&self, body: &[u8]) -> Vec<u8>;
}

impl Model for Lines {
    type Item = lines::Expected;
    const ONE_LINE: bool = true;

    fn expected(input: &[u8], max: usize) -> Vec<Self::Item> {
        lines::frames(input, max).0
    }

    fn item(frame: Frame) -> Self::Item {
        frame.into()
    }

    fn check_without_eof(
        got: &[Self::Item],
        input: &[u8],
        max: usize,
        kept: &dyn Fn(&Self::Item) -> bool,
    ) {
        // Without the end of the stream, exactly the terminated lines.
        let complete = input
            .iter()
            .rposition(|&b| b == b'\n')
            .map_or(&input[..0], |at| &input[..=at]);
        let expected: Vec<_> = Self::expected(complete, max)
            .into_iter()
            .filter(|item| kept(item))
            .collect();
        assert_eq!(got, expected.as_slice());
    }

    fn message(item: &Self::Item) -> Option<&[u8]> {
        match item {
            lines::Expected::Message(bytes, _) => Some(bytes),
            lines::Expected::Oversized(..) => None,
        }
    }

    fn frame(&self, body: &[u8]) -> Vec<u8> {
        let mut body: Vec<u8> = body
            .iter()
            .copied()
            .filter(|&b| b != b'\n' && b != b'\r')
            .collect();
        if body.is_empty() {
            body.push(b'x');
        }
        encode(self, &body)
    }
}

impl Model for ContentLength {
    type Item = Frame;
    const ONE_LINE: bool = false;

    fn expected(input: &[u8], max: usize) -> Vec<Self::Item> {
        content_length::frames(input, max).0
    }

    fn item(frame: Frame) -> Self::Item {
        frame
    }

    fn check_without_eof(
        got: &[Self::Item],
        input: &[u8],
        max: usize,
        kept: &dyn Fn(&Self::Item) -> bool,
    ) {
        // The end of the stream can only add the notice of a frame cut
        // short, in place of what was still being read.
        let expected: Vec<_> = Self::expected(input, max)
            .into_iter()
            .filter(|item| kept(item))
            .collect();
        let sure = got.len().min(expected.len().saturating_sub(1));
        assert_eq!(&got[..sure], &expected[..sure]);
        assert!(
            got.len() <= expected.len(),
            "{} frames decoded, {} in the whole stream",
            got.len(),
            expected.len()
        );
        if got.len() == expected.len() {
            assert_eq!(got.last(), expected.last());
        } else if got.len() + 1 == expected.len() {
            assert!(matches!(expected.last(), Some(Frame::Malformed(_))));
        } else {
            panic!("frames missing before the end: {got:?} vs {expected:?}");
        }
    }

    fn message(item: &Self::Item) -> Option<&[u8]> {
        match item {
            Frame::Message(message) => Some(message),
            _ => None,
        }
    }

    fn frame(&self, body: &[u8]) -> Vec<u8> {
        encode(self, if body.is_empty() { b"x" } else { body })
    }
}

/// `payload` (valid for `framing`) as it goes on the wire.
pub fn encode<F: Framing>(framing: &F, payload: &[u8]) -> Vec<u8> {
    let mut dst = BytesMut::new();
    framing.encode(payload, &mut dst);
    dst.to_vec()
}

/// What a queued frame costs the receive queue: the same sum as the core's
/// `Inbound` (its bytes, an oversized notice's recovered id, and
/// `ITEM_OVERHEAD`), from the frame alone.
pub fn cost(frame: &Frame) -> usize {
    ITEM_OVERHEAD
        + match frame {
            Frame::Message(m) => m.len(),
            Frame::Oversized(o) => o.head.len() + o.json_rpc_id().map_or(0, |id| id.len()),
            Frame::Malformed(m) => m.head.len(),
            other => panic!("a frame kind this target does not know: {other:?}"),
        }
}

/// Frames the decoder produced so far, from the counters: the halves queue
/// every frame as soon as it is decoded.
pub fn decoded(counters: &Counters) -> u64 {
    // Polluting lines dropped, or diverted to where stderr lines go, are
    // counted as messages read but never become items.
    counters.messages_in + counters.oversized + counters.malformed
        - counters.polluted_dropped
        - counters.polluted_diverted
}

/// The receive queue's memory bound, checked lazily: neither `Session` nor
/// `Channel` shows what the queued frames cost, but the counters say how
/// many were decoded, the test knows how many it took, and each frame's
/// cost is known once it is taken. So the log records, after every step,
/// which frames were queued and the bound; [`check`](Self::check) sums the
/// costs once every frame was taken.
#[derive(Default)]
pub struct QueueLog {
    /// (frames decoded, frames taken, bound on their cost, step).
    entries: Vec<(u64, u64, usize, usize)>,
    costs: Vec<usize>,
}

impl QueueLog {
    /// The queue holds frames `taken..decoded`, which may cost at most `bound`.
    pub fn record(&mut self, decoded: u64, taken: u64, bound: usize, step: usize) {
        self.entries.push((decoded, taken, bound, step));
    }

    /// The next frame was taken; it costs `cost`.
    pub fn taken(&mut self, cost: usize) {
        self.costs.push(cost);
    }

    /// Every recorded queue within its bound. Call once every frame decoded
    /// was taken.
    pub fn check(&self) {
        let mut prefix = vec![0usize];
        for cost in &self.costs {
            prefix.push(prefix.last().unwrap() + cost);
        }
        for &(decoded, taken, bound, step) in &self.entries {
            let (decoded, taken) = (decoded as usize, taken as usize);
            assert!(
                decoded < prefix.len(),
                "step {step}: {decoded} frames decoded, only {} taken in the end",
                self.costs.len()
            );
            let queued = prefix[decoded] - prefix[taken];
            assert!(
                queued <= bound,
                "step {step}: frames {taken}..{decoded} queued cost {queued} > bound {bound}"
            );
        }
    }
}

/// What one read of `len` bytes can add to the receive queue: each frame it
/// completes ends in a byte of it (plus the one frame the end of the stream
/// may flush), and costs `ITEM_OVERHEAD` plus at most twice its bytes (a
/// notice's head and recovered id both come from the frame); those bytes are
/// this read's or what the decoder held (a line up to the limit, a notice's
/// head, a header block).
pub fn one_read(len: usize, max_message_size: usize) -> usize {
    let held = max_message_size + 2 + OVERSIZED_HEAD_LEN + MAX_HEADER_LEN;
    (len + 1) * ITEM_OVERHEAD + 2 * (len + held)
}
