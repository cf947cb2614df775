//! Fuzzing of `LineEncoder` with arbitrary payloads and partial writes:
//! accepted payloads reach the wire intact and decode back to themselves;
//! refused ones are refused for the right reason and handed back unchanged.

#![no_main]

use arbitrary::Arbitrary;
use childwire_core::{EncodeErrorKind, LineEncoder};
use childwire_core::{Frame, LineDecoder};
use libfuzzer_sys::fuzz_target;

#[derive(Debug, Arbitrary)]
struct Input {
    /// Outbound limit: `max % 64`.
    max: u8,
    /// High-water mark: `high_water % 256`, small so `Full` happens.
    high_water: u8,
    ops: Vec<Op>,
}

#[derive(Debug, Arbitrary)]
enum Op {
    Encode(Vec<u8>),
    /// The writer took this many bytes (clamped to what is queued).
    Written(u8),
}

fuzz_target!(|input: Input| {
    let max = usize::from(input.max % 64);
    let high_water = usize::from(input.high_water);
    let mut encoder = LineEncoder::new(max, high_water);
    // The model: what has reached the "child", and what is still queued.
    let mut wire = Vec::new();
    let mut queued = Vec::new();
    let mut accepted = Vec::new();

    for op in input.ops {
        match op {
            Op::Encode(payload) => {
                let first_break = payload.iter().position(|&b| b == b'\n' || b == b'\r');
                let queued_before = encoder.queued();
                // The bound is on what the queue costs: its bytes plus a
                // record per message.
                let cost_before = encoder.cost();
                assert!(cost_before >= queued_before);
                match encoder.encode(payload.clone()) {
                    Ok(()) => {
                        assert!(first_break.is_none(), "accepted a line break");
                        assert!(payload.len() <= max, "accepted {} > {max}", payload.len());
                        assert!(
                            queued_before == 0 || cost_before < high_water,
                            "accepted over the high-water mark"
                        );
                        queued.extend_from_slice(&payload);
                        queued.push(b'\n');
                        accepted.push(payload);
                    }
                    Err(error) => {
                        let kind = *error.kind();
                        match (first_break, kind) {
                            (Some(at), EncodeErrorKind::Newline { at: said }) => {
                                assert_eq!(said, at);
                                assert_eq!(payload[at], b'\n');
                            }
                            (Some(at), EncodeErrorKind::CarriageReturn { at: said }) => {
                                assert_eq!(said, at);
                                assert_eq!(payload[at], b'\r');
                            }
                            (None, EncodeErrorKind::Empty) => assert!(payload.is_empty()),
                            (None, EncodeErrorKind::TooLarge { len, max: said }) => {
                                assert_eq!((len, said), (payload.len(), max));
                                assert!(len > max);
                            }
                            (
                                None,
                                EncodeErrorKind::Full {
                                    queued,
                                    high_water: said,
                                },
                            ) => {
                                assert!(payload.len() <= max);
                                assert_eq!((queued, said), (queued_before, high_water));
                                assert!(queued != 0 && cost_before >= high_water);
                            }
                            (at, kind) => panic!("refused for {kind:?}, first break at {at:?}"),
                        }
                        assert_eq!(
                            error.into_payload(),
                            payload,
                            "payload not handed back intact"
                        );
                        assert_eq!(encoder.queued(), queued_before, "a refusal queued bytes");
                    }
                }
            }
            Op::Written(n) => {
                // A writer only writes what `poll_transmit` handed out: the
                // batch in flight, a prefix of everything queued.
                let transmit = encoder.poll_transmit().unwrap_or_default();
                let n = usize::from(n).min(transmit.len());
                wire.extend_from_slice(&transmit[..n]);
                encoder.handle_written(n);
                queued.drain(..n);
            }
        }
        assert_eq!(encoder.queued(), queued.len());
        let transmit = encoder.poll_transmit().unwrap_or_default();
        assert_eq!(
            transmit.is_empty(),
            queued.is_empty(),
            "queued bytes are always handed out"
        );
        assert!(
            queued.starts_with(&transmit),
            "the batch is the front of the queue"
        );
    }
    wire.extend_from_slice(&queued);

    // Whatever reached the wire is exactly the accepted messages, each with
    // its '\n', and decodes back to them.
    let expected_wire: Vec<u8> = accepted
        .iter()
        .flat_map(|p| p.iter().copied().chain([b'\n']))
        .collect();
    assert_eq!(wire, expected_wire);

    let mut decoder = LineDecoder::new(max);
    decoder.handle_data(&wire);
    decoder.handle_eof();
    let mut decoded = Vec::new();
    while let Some(frame) = decoder.poll_frame() {
        match frame {
            Frame::Message(m) => {
                assert!(m.is_terminated());
                decoded.push(m.to_vec());
            }
            other => panic!("accepted payload came back as {other:?}"),
        }
    }
    // An empty payload is refused: it would be a blank line, not a message.
    assert!(accepted.iter().all(|p| !p.is_empty()));
    assert_eq!(decoded, accepted);
    assert_eq!(decoder.stats().blank_lines, 0);
});
