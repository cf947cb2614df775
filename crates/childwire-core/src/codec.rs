//! [`tokio_util::codec`] bindings for the framers, behind the
//! `tokio-util` feature.
//!
//! [`LineCodec`] (newline-delimited) and [`ContentLengthCodec`] (LSP, DAP)
//! plug childwire's framing into `FramedRead` / `FramedWrite`. Unlike
//! `tokio_util::codec::LinesCodec`, an over-long message is an *item*
//! ([`Frame::Oversized`]), not an `Err`, and so is a broken frame
//! ([`Frame::Malformed`]): a `FramedRead` ends its stream after the first
//! error, and one bad message must not end a session.

use bytes::BytesMut;
use tokio_util::codec::{Decoder, Encoder};

use crate::content_length::{ContentLength, Parser};
use crate::decoder::{DEFAULT_MAX_MESSAGE_SIZE, Framer};
use crate::frame::Frame;
use crate::framing::Framing;
use crate::lines::check_message;

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
/// use childwire_core::Frame;
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
    pub fn stats(&self) -> &crate::frame::DecoderStats {
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

/// `Content-Length` framing (LSP, DAP) for `tokio_util::codec`.
///
/// Decodes into [`Frame`]s with exactly the rules of
/// [`ContentLengthDecoder`](crate::content_length::ContentLengthDecoder)
/// (the same code: notices are items, never errors, and decoding goes on
/// after them); encodes any non-empty `AsRef<[u8]>` payload within the
/// size limit as `Content-Length: N\r\n\r\n` and its bytes.
///
/// Each call to `decode` consumes the whole read buffer: what belongs to a
/// frame not complete yet is kept by the codec (at most one body, header
/// block or oversized body's head, as the decoder's memory bound says), and
/// a body found whole in the buffer is split off it without copying.
///
/// ```
/// use bytes::BytesMut;
/// use childwire_core::codec::ContentLengthCodec;
/// use childwire_core::{Frame, MalformedReason};
/// use tokio_util::codec::{Decoder, Encoder};
///
/// let mut codec = ContentLengthCodec::new(8);
/// let mut buf = BytesMut::from(&b"Content-Length: 12\r\n\r\nfar too long"[..]);
/// buf.extend_from_slice(b"Content-Type: x\r\n\r\nContent-Length: 2\r\n\r\n{}");
/// assert!(matches!(codec.decode(&mut buf)?, Some(Frame::Oversized(o)) if o.len == 12));
/// assert!(matches!(
///     codec.decode(&mut buf)?,
///     Some(Frame::Malformed(m)) if m.reason == MalformedReason::MissingLength
/// ));
/// assert!(matches!(codec.decode(&mut buf)?, Some(Frame::Message(m)) if &m[..] == b"{}"));
///
/// let mut out = BytesMut::new();
/// codec.encode("{}", &mut out)?;
/// assert_eq!(&out[..], b"Content-Length: 2\r\n\r\n{}");
/// # Ok::<(), std::io::Error>(())
/// ```
#[derive(Debug)]
pub struct ContentLengthCodec {
    parser: Parser,
    max_message_size: usize,
}

impl ContentLengthCodec {
    /// A codec with the same limit for both directions.
    pub fn new(max_message_size: usize) -> Self {
        Self {
            parser: Parser::new(max_message_size),
            max_message_size,
        }
    }

    /// Counters of what has been decoded so far.
    pub fn stats(&self) -> &crate::frame::DecoderStats {
        &self.parser.stats
    }

    /// Bytes the codec holds outside the read buffer: a frame begun in an
    /// earlier read.
    pub fn buffered(&self) -> usize {
        self.parser.held()
    }
}

impl Default for ContentLengthCodec {
    fn default() -> Self {
        Self::new(DEFAULT_MAX_MESSAGE_SIZE)
    }
}

impl Decoder for ContentLengthCodec {
    type Item = Frame;
    type Error = std::io::Error;

    fn decode(&mut self, src: &mut BytesMut) -> Result<Option<Frame>, Self::Error> {
        Ok(self.parser.next_frame(src, false))
    }

    fn decode_eof(&mut self, src: &mut BytesMut) -> Result<Option<Frame>, Self::Error> {
        Ok(self.parser.next_frame(src, true))
    }
}

impl<B: AsRef<[u8]>> Encoder<B> for ContentLengthCodec {
    type Error = std::io::Error;

    fn encode(&mut self, item: B, dst: &mut BytesMut) -> Result<(), Self::Error> {
        let payload = item.as_ref();
        ContentLength
            .check(payload, self.max_message_size)
            .map_err(|kind| std::io::Error::new(std::io::ErrorKind::InvalidInput, kind))?;
        ContentLength.encode(payload, dst);
        Ok(())
    }
}
