//! The NDJSON framing: [`Lines`], and the rule a message must follow to
//! travel as one line.

use bytes::{BufMut, BytesMut};

use crate::decoder::LineDecoder;
use crate::framing::{EncodeErrorKind, Framing};

/// Newline-delimited messages: each one is its bytes and `\n` (NDJSON).
///
/// Inbound, one `\r` before the `\n` is removed, blank lines are skipped,
/// and a final line without `\n` is delivered, marked unterminated (see
/// [`LineDecoder`]). Outbound, a payload must not contain `\n` or `\r`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Lines;

impl Framing for Lines {
    type Decoder = LineDecoder;

    fn decoder(&self, max_message_size: usize) -> LineDecoder {
        LineDecoder::new(max_message_size)
    }

    #[inline]
    fn check(&self, payload: &[u8], max_message_size: usize) -> Result<(), EncodeErrorKind> {
        check_message(payload, max_message_size)
    }

    #[inline]
    fn encode(&self, payload: &[u8], dst: &mut BytesMut) {
        dst.extend_from_slice(payload);
        dst.put_u8(b'\n');
    }

    #[inline]
    fn overhead(&self, _len: usize) -> usize {
        1
    }
}

/// Checks that `payload` can travel as one line: not empty, no `\n` or `\r`
/// (the first one found is named) and at most `max_message_size` bytes.
#[inline]
pub fn check_message(payload: &[u8], max_message_size: usize) -> Result<(), EncodeErrorKind> {
    if payload.is_empty() {
        return Err(EncodeErrorKind::Empty);
    }
    // A line break is a byte below 0x0E, and compact JSON holds no byte so
    // low: so the payload is first asked only whether it holds one, in one
    // pass of vector minimums, and only one that does (a tab between
    // tokens, a line break) is searched for where its break is.
    // At 200 B that pass is about 60 instructions where `memchr2` took 120
    // (docs/performance.md).
    if has_control_byte(payload) {
        if let Some(at) = memchr::memchr2(b'\n', b'\r', payload) {
            return Err(if payload[at] == b'\n' {
                EncodeErrorKind::Newline { at }
            } else {
                EncodeErrorKind::CarriageReturn { at }
            });
        }
    }
    if payload.len() > max_message_size {
        return Err(EncodeErrorKind::TooLarge {
            len: payload.len(),
            max: max_message_size,
        });
    }
    Ok(())
}

// Not inlined: inlined into a caller's loop, the compiler kept the
// minimums in memory and the check cost twice as much.
#[inline(never)]
fn has_control_byte(payload: &[u8]) -> bool {
    let least = if payload.len() >= 64 {
        fold16(&least_per_lane::<64>(payload))
    } else if payload.len() >= 16 {
        least_per_lane::<16>(payload)
    } else {
        return payload.iter().any(|&b| b <= b'\r');
    };
    least.iter().fold(false, |low, &b| low | (b <= b'\r'))
}

/// The least byte at each position of `payload`'s `N`-byte steps, the last
/// step being its last `N` bytes (some seen twice, which a minimum does not
/// mind), so that no byte is taken one at a time: loops the compiler turns
/// into vector minimums. `payload` has at least `N` bytes.
#[inline(always)]
fn least_per_lane<const N: usize>(payload: &[u8]) -> [u8; N] {
    fn take<const N: usize>(least: &mut [u8; N], chunk: &[u8]) {
        for (least, &b) in least.iter_mut().zip(chunk) {
            *least = (*least).min(b);
        }
    }
    let mut least = [u8::MAX; N];
    for chunk in payload.chunks_exact(N) {
        take(&mut least, chunk);
    }
    take(&mut least, &payload[payload.len() - N..]);
    least
}

/// 64 lanes of minimums folded into 16.
#[inline(always)]
fn fold16(least: &[u8; 64]) -> [u8; 16] {
    let mut folded = [u8::MAX; 16];
    for chunk in least.chunks_exact(16) {
        for (folded, &b) in folded.iter_mut().zip(chunk) {
            *folded = (*folded).min(b);
        }
    }
    folded
}
