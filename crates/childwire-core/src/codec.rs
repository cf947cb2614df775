//! [`tokio_util::codec`] bindings for the framer (C19), behind the
//! `tokio-util` feature.
//!
//! [`LineCodec`] plugs childwire's framing into `FramedRead` / `FramedWrite`.
//! Unlike `tokio_util::codec::LinesCodec`, an over-long line is an *item*
//! ([`Frame::Oversized`]), not an `Err`: a `FramedRead` ends its stream after
//! the first error, and one bad line must not end a session.

use bytes::BytesMut;
use tokio_util::codec::{Decoder, Encoder};

use crate::decoder::{DEFAULT_MAX_MESSAGE_SIZE, Frame, Framer};
use crate::encoder::check_message;

/// Newline-delimited framing for `tokio_util::codec`.
///
/// Decodes into [`Frame`]s with exactly the rules of
/// [`LineDecoder`](crate::decoder::LineDecoder); encodes any `AsRef<[u8]>`
/// payload with the checks of [`LineEncoder`](crate::encoder::LineEncoder)
/// (no `\n` or `\r`, size limit).
///
/// ```
/// use bytes::BytesMut;
/// use childwire_core::codec::LineCodec;
/// use childwire_core::decoder::Frame;
/// use tokio_util::codec::{Decoder, Encoder};
///
/// let mut codec = LineCodec::new(8);
/// let mut buf = BytesMut::from(&b"far too long\n{}\n"[..]);
/// assert!(matches!(codec.decode(&mut buf)?, Some(Frame::Oversized(o)) if o.len == 12));
/// assert!(matches!(codec.decode(&mut buf)?, Some(Frame::Message(m)) if &m[..] == b"{}"));
///
/// let mut out = BytesMut::new();
/// codec.encode("{}", &mut out)?;
/// assert_eq!(&out[..], b"{}\n");
/// # Ok::<(), std::io::Error>(())
/// ```
#[derive(Debug)]
pub struct LineCodec {
    framer: Framer,
    max_message_size: usize,
}

impl LineCodec {
    /// A codec with the same limit for both directions.
    pub fn new(max_message_size: usize) -> Self {
        Self {
            framer: Framer::new(max_message_size),
            max_message_size,
        }
    }

    /// Counters of what has been decoded so far.
    pub fn stats(&self) -> &crate::decoder::DecoderStats {
        &self.framer.stats
    }
}

impl Default for LineCodec {
    fn default() -> Self {
        Self::new(DEFAULT_MAX_MESSAGE_SIZE)
    }
}

impl Decoder for LineCodec {
    type Item = Frame;
    type Error = std::io::Error;

    fn decode(&mut self, src: &mut BytesMut) -> Result<Option<Frame>, Self::Error> {
        Ok(self.framer.next_frame(src, false))
    }

    fn decode_eof(&mut self, src: &mut BytesMut) -> Result<Option<Frame>, Self::Error> {
        Ok(self.framer.next_frame(src, true))
    }
}

impl<B: AsRef<[u8]>> Encoder<B> for LineCodec {
    type Error = std::io::Error;

    fn encode(&mut self, item: B, dst: &mut BytesMut) -> Result<(), Self::Error> {
        let payload = item.as_ref();
        // The queue bound is FramedWrite's business (its backpressure
        // boundary), so only the message checks apply here.
        check_message(payload, self.max_message_size)
            .map_err(|kind| std::io::Error::new(std::io::ErrorKind::InvalidInput, kind))?;
        dst.reserve(payload.len() + 1);
        dst.extend_from_slice(payload);
        dst.extend_from_slice(b"\n");
        Ok(())
    }
}
