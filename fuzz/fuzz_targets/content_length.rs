//! Differential fuzzing of `ContentLengthDecoder` against the plain,
//! non-streaming reference model in `childwire_core::testing`: arbitrary
//! bytes in arbitrary chunkings, fed by copy or as `Bytes`, with a small
//! limit so oversized bodies are common. Checks the frames, the counters and
//! the memory bound after every step; then encodes arbitrary payloads and
//! checks that the accepted ones decode back to themselves.

#![no_main]

use arbitrary::Arbitrary;
use bytes::BytesMut;
use childwire_core::ContentLengthDecoder;
use childwire_core::EncodeErrorKind;
use childwire_core::testing::content_length as reference;
use childwire_core::{ContentLength, Frame, Framing};
use libfuzzer_sys::fuzz_target;

/// Room for a header block over the 8 KiB bound and what follows it; more
/// only slows each run.
const MAX_DATA: usize = 24 * 1024;

#[derive(Debug, Arbitrary)]
struct Input {
    /// The limit is `max % 64`: small, so bodies over it are frequent.
    max: u8,
    /// Chunk sizes, cycled, scaled up by one per 2 KiB of input so long
    /// inputs stay quick. 0 feeds an empty chunk (then one byte, so the run
    /// always progresses); an empty list feeds everything at once.
    chunks: Vec<u8>,
    /// Bit `i % 8` says whether chunk `i` is given as `Bytes` (no copy).
    by_bytes: u8,
    /// The stream, written as pieces so that well-formed headers (which
    /// random bytes almost never spell) are as common as broken ones.
    pieces: Vec<Piece>,
    /// Payloads for the encode → decode round trip.
    payloads: Vec<Vec<u8>>,
}

#[derive(Debug, Arbitrary)]
enum Piece {
    /// Any bytes.
    Raw(Vec<u8>),
    /// A well-formed frame around this body.
    Frame(Vec<u8>),
    /// A `Content-Length` header line: `upper` picks the name's case, `ows`
    /// adds white space, the value is written as is.
    Length { upper: bool, ows: bool, value: u64 },
    /// Another header line.
    Other,
    /// `\r\n`: ends a header line, or the block after one.
    Crlf,
    /// A run of filler, to reach the header block bound.
    Fill(u16),
}

impl Piece {
    fn write(&self, out: &mut Vec<u8>) {
        match self {
            Piece::Raw(bytes) => out.extend_from_slice(bytes),
            Piece::Frame(body) => {
                out.extend_from_slice(format!("Content-Length: {}\r\n\r\n", body.len()).as_bytes());
                out.extend_from_slice(body);
            }
            Piece::Length { upper, ows, value } => {
                let name = if *upper {
                    "CONTENT-LENGTH"
                } else {
                    "Content-Length"
                };
                let ws = if *ows { " \t" } else { "" };
                // Small values mostly, so bodies fit in the input.
                let value = if value % 4 == 0 { *value } else { value % 80 };
                out.extend_from_slice(format!("{name}:{ws}{value}{ws}\r\n").as_bytes());
            }
            Piece::Other => out.extend_from_slice(b"Content-Type: application/json\r\n"),
            Piece::Crlf => out.extend_from_slice(b"\r\n"),
            Piece::Fill(n) => out.resize(out.len() + usize::from(*n % 10_000), b'f'),
        }
    }
}

fuzz_target!(|input: Input| {
    let max = usize::from(input.max % 64);
    let mut data = Vec::new();
    for piece in &input.pieces {
        piece.write(&mut data);
        if data.len() > MAX_DATA {
            break;
        }
    }
    data.truncate(MAX_DATA);
    decode_matches_reference(&input, &data, max);
    round_trip(&input.payloads, max);
});

fn decode_matches_reference(input: &Input, data: &[u8], max: usize) {
    let mut decoder = ContentLengthDecoder::new(max);
    let mut frames: Vec<Frame> = Vec::new();
    let mut rest = data;
    let mut sizes = input.chunks.iter().copied().cycle();
    let scale = 1 + data.len() / 2048;
    let mut step = 0u32;

    let mut feed = |decoder: &mut ContentLengthDecoder, chunk: &[u8], frames: &mut Vec<Frame>| {
        let by_bytes = input.by_bytes & (1 << (step % 8)) != 0;
        step += 1;
        reference::feed(decoder, chunk, by_bytes, frames);
    };

    while !rest.is_empty() {
        let size = match sizes.next() {
            None => rest.len(),
            Some(0) => {
                feed(&mut decoder, &[], &mut frames);
                1
            }
            Some(n) => usize::from(n) * scale,
        };
        let (chunk, tail) = rest.split_at(size.min(rest.len()));
        rest = tail;
        feed(&mut decoder, chunk, &mut frames);
    }
    reference::finish(&mut decoder, &mut frames);

    let (expected, stats) = reference::frames(data, max);
    assert_eq!(frames, expected);
    assert_eq!(*decoder.stats(), stats);
}

fn round_trip(payloads: &[Vec<u8>], max: usize) {
    let mut wire = BytesMut::new();
    let mut accepted = Vec::new();
    for payload in payloads {
        match ContentLength.check(payload, max) {
            Ok(()) => {
                let before = wire.len();
                ContentLength.encode(payload, &mut wire);
                assert_eq!(
                    wire.len() - before,
                    payload.len() + ContentLength.overhead(payload.len())
                );
                accepted.push(payload.as_slice());
            }
            Err(EncodeErrorKind::Empty) => assert!(payload.is_empty()),
            Err(EncodeErrorKind::TooLarge { len, .. }) => {
                assert!(len == payload.len() && len > max);
            }
            Err(other) => panic!("unexpected refusal {other:?}"),
        }
    }
    let mut decoder = ContentLengthDecoder::new(max);
    decoder.handle_bytes(wire.freeze());
    decoder.handle_eof();
    let mut decoded = Vec::new();
    while let Some(frame) = decoder.poll_frame() {
        match frame {
            Frame::Message(m) => decoded.push(m.into_bytes()),
            other => panic!("an accepted payload came back as {other:?}"),
        }
    }
    assert_eq!(decoded, accepted);
}
