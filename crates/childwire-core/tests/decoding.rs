//! The decoder lent to the reader (`Channel::lend_decoder`, what the shipped
//! transport reads with): the same bytes in the same chunks give the same
//! frames, counters, pollution counts and set-aside lines as
//! `handle_read`, whatever the lines and the framing; while it is lent the
//! counters stay put, and only the lease holder gets it, once, after a read
//! that completed several frames.

use std::time::Instant;

use childwire_core::{
    Channel, ChannelConfig, ContentLength, Frame, Framing, Lines, PollutionPolicy, ReadStep,
};
use proptest::prelude::*;

const MAX: usize = 64;

fn channel<F: Framing>(framing: F, policy: Option<PollutionPolicy>) -> Channel<F> {
    let mut config = ChannelConfig::default();
    config.max_message_size = MAX;
    config.recv_high_water = 1 << 20;
    config.pollution = policy;
    Channel::new(framing, &config)
}

/// Everything a reader of the channel can see after the chunks.
#[derive(Debug, PartialEq)]
struct Seen {
    frames: Vec<Frame>,
    counters: childwire_core::Counters,
    pollution: Option<childwire_core::pollution::PollutionCounts>,
    diverted: Vec<bytes::Bytes>,
    notices: Vec<String>,
}

/// Reads `chunks` (then the end) into a new channel, lending the decoder
/// for each read or not.
fn read_all<F: Framing>(
    framing: F,
    policy: Option<PollutionPolicy>,
    chunks: &[Vec<u8>],
    lend: bool,
) -> (Seen, usize) {
    let mut channel = channel(framing, policy);
    let mut decoding = channel.decoding();
    let now = Instant::now();
    let mut frames = Vec::new();
    let mut lent = 0;
    for chunk in chunks {
        assert_eq!(channel.poll_read(), ReadStep::Read);
        if lend && channel.lend_decoder(&mut decoding) {
            lent += 1;
            decoding.handle_data(chunk);
            channel.handle_decoded(&mut decoding, now);
        } else {
            channel.handle_read(chunk, now);
        }
        frames.extend(std::iter::from_fn(|| channel.poll_received()));
    }
    assert_eq!(channel.poll_read(), ReadStep::Read);
    channel.handle_read_eof(now);
    frames.extend(std::iter::from_fn(|| channel.poll_received()));
    let seen = Seen {
        frames,
        counters: channel.counters(),
        pollution: channel.pollution_counts().cloned(),
        diverted: std::iter::from_fn(|| channel.poll_diverted()).collect(),
        notices: std::iter::from_fn(|| channel.poll_diverted_notice())
            .map(|notice| notice.to_string())
            .collect(),
    };
    (seen, lent)
}

/// What `chunks` give read through a lent decoder, and read in place.
fn both_ways<F: Framing>(
    framing: F,
    policy: Option<PollutionPolicy>,
    chunks: &[Vec<u8>],
) -> (Seen, Seen) {
    (
        read_all(framing.clone(), policy, chunks, true).0,
        read_all(framing, policy, chunks, false).0,
    )
}

/// A line a server might write: a message, a banner, a blank line, one
/// over the size limit, one with `\r\n`, one with spaces around it.
fn line() -> impl Strategy<Value = Vec<u8>> {
    prop_oneof![
        (0u32..1000).prop_map(|id| format!("{{\"jsonrpc\":\"2.0\",\"id\":{id}}}\n").into_bytes()),
        Just(b"Starting server on stdio...\n".to_vec()),
        Just(b"\n".to_vec()),
        Just(format!("{{\"pad\":\"{}\"}}\n", "x".repeat(MAX)).into_bytes()),
        Just(b"{\"id\":7}\r\n".to_vec()),
        Just(b"  [1,2]  \n".to_vec()),
        Just(b"[INFO] ready\n".to_vec()),
    ]
}

/// `stream` cut at `cuts` (positions, any order, repeats allowed).
fn chunked(stream: &[u8], cuts: &[usize]) -> Vec<Vec<u8>> {
    let mut at: Vec<usize> = cuts.iter().map(|c| c % (stream.len() + 1)).collect();
    at.push(stream.len());
    at.sort_unstable();
    at.dedup();
    let mut start = 0;
    let mut chunks = Vec::new();
    for end in at {
        if end > start {
            chunks.push(stream[start..end].to_vec());
            start = end;
        }
    }
    chunks
}

fn policy() -> impl Strategy<Value = Option<PollutionPolicy>> {
    prop_oneof![
        Just(None),
        Just(Some(PollutionPolicy::Deliver)),
        Just(Some(PollutionPolicy::Divert)),
        Just(Some(PollutionPolicy::Drop)),
    ]
}

proptest! {
    #[test]
    fn lines_read_through_a_lent_decoder_come_out_as_read_in_place(
        lines in proptest::collection::vec(line(), 0..48),
        cuts in proptest::collection::vec(any::<usize>(), 0..8),
        policy in policy(),
        unterminated in any::<bool>(),
    ) {
        let mut stream = lines.concat();
        if unterminated {
            stream.extend_from_slice(b"{\"id\":\"last\"}");
        }
        let (lent, in_place) = both_ways(Lines, policy, &chunked(&stream, &cuts));
        prop_assert_eq!(lent, in_place);
    }

    #[test]
    fn content_length_read_through_a_lent_decoder_comes_out_as_read_in_place(
        bodies in proptest::collection::vec(line(), 0..32),
        cuts in proptest::collection::vec(any::<usize>(), 0..8),
        policy in policy(),
    ) {
        let mut stream = Vec::new();
        for body in &bodies {
            stream.extend_from_slice(format!("Content-Length: {}\r\n\r\n", body.len()).as_bytes());
            stream.extend_from_slice(body);
        }
        // A line of NDJSON where a header should be.
        stream.extend_from_slice(b"{\"id\":1}\n");
        let (lent, in_place) = both_ways(ContentLength, policy, &chunked(&stream, &cuts));
        prop_assert_eq!(lent, in_place);
    }
}

#[test]
fn a_flood_lends_the_decoder_and_comes_out_as_read_in_place() {
    let line = b"{\"jsonrpc\":\"2.0\",\"method\":\"tick\"}\n";
    let stream: Vec<u8> = std::iter::repeat_n(&line[..], 400)
        .flatten()
        .copied()
        .collect();
    // Reads of 1 KiB, cut mid-line: about 25 lines each.
    let chunks: Vec<Vec<u8>> = stream.chunks(1024).map(<[u8]>::to_vec).collect();
    for policy in [None, Some(PollutionPolicy::Divert)] {
        let (lent, reads) = read_all(Lines, policy, &chunks, true);
        let (in_place, _) = read_all(Lines, policy, &chunks, false);
        assert_eq!(lent, in_place);
        // Every read after the first lent it.
        assert_eq!(reads, chunks.len() - 1);
        assert_eq!(lent.frames.len(), 400);
    }
}

#[test]
fn one_answer_per_read_is_decoded_in_place() {
    let now = Instant::now();
    let mut channel = channel(Lines, None);
    let mut decoding = channel.decoding();
    for id in 0..10 {
        assert_eq!(channel.poll_read(), ReadStep::Read);
        assert!(!channel.lend_decoder(&mut decoding), "read {id} lent it");
        channel.handle_read(format!("{{\"id\":{id}}}\n").as_bytes(), now);
        assert!(matches!(channel.poll_received(), Some(Frame::Message(_))));
    }
}

#[test]
fn while_lent_the_counters_stay_and_nobody_else_gets_the_decoder() {
    let now = Instant::now();
    let mut channel = channel(Lines, Some(PollutionPolicy::Deliver));
    let mut decoding = channel.decoding();
    let mut other = channel.decoding();
    // No reader holds the lease yet: nothing is lent, and bytes given to
    // the place where it would be are not taken.
    assert!(!channel.lend_decoder(&mut decoding));
    decoding.handle_data(b"{\"id\":0}\n");
    channel.handle_decoded(&mut decoding, now);
    assert!(channel.poll_received().is_none());
    assert_eq!(channel.poll_read(), ReadStep::Read);
    channel.handle_read(b"{\"id\":1}\n[1]\n[2]\n[3]\n", now);
    let before = channel.counters();
    assert_eq!(before.messages_in, 4);
    assert!(matches!(channel.poll_received(), Some(Frame::Message(m)) if &m[..] == b"{\"id\":1}"));
    for _ in 0..3 {
        assert!(matches!(channel.poll_received(), Some(Frame::Message(_))));
    }

    assert_eq!(channel.poll_read(), ReadStep::Read);
    assert!(
        channel.lend_decoder(&mut decoding),
        "the lease holder gets it"
    );
    assert!(!channel.lend_decoder(&mut other), "lent once");
    // What is not lent hands nothing back.
    channel.handle_decoded(&mut other, now);
    assert_eq!(channel.poll_read(), ReadStep::Wait);
    decoding.handle_data(b"{\"id\":2}\nbanner\n{\"id\":3}\n");
    // Decoded, not handed back: nothing of it shows yet.
    assert_eq!(channel.counters(), before);
    assert!(channel.poll_received().is_none());
    // Another reader waits for the lease.
    assert_eq!(channel.poll_read(), ReadStep::Wait);

    channel.handle_decoded(&mut decoding, now);
    assert_eq!(channel.counters().messages_in, 7);
    let frames: Vec<Frame> = std::iter::from_fn(|| channel.poll_received()).collect();
    let texts: Vec<String> = frames
        .iter()
        .map(|frame| match frame {
            Frame::Message(m) => String::from_utf8_lossy(m).into_owned(),
            Frame::Pollution(notice) => format!("notice: {notice}"),
            other => format!("{other:?}"),
        })
        .collect();
    assert_eq!(texts.len(), 4, "{texts:?}");
    assert_eq!(texts[0], "{\"id\":2}");
    assert!(texts[1].starts_with("notice: "), "{texts:?}");
    assert_eq!(texts[2], "banner");
    assert_eq!(texts[3], "{\"id\":3}");
    // The lease came back with it: the next read may start.
    assert_eq!(channel.poll_read(), ReadStep::Read);
}
