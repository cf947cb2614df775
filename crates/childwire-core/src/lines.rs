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
    if let Some(at) = memchr::memchr2(b'\n', b'\r', payload) {
        return Err(if payload[at] == b'\n' {
            EncodeErrorKind::Newline { at }
        } else {
            EncodeErrorKind::CarriageReturn { at }
        });
    }
    if payload.len() > max_message_size {
        return Err(EncodeErrorKind::TooLarge {
            len: payload.len(),
            max: max_message_size,
        });
    }
    Ok(())
}
