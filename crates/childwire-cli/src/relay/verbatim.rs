//! The framing of both of relay's transports: lines in, as NDJSON reads
//! them, and bytes out exactly as given, so a long line can go out in
//! pieces.
//!
//! A transport copies what it is given into its send queue. A whole line
//! sent at once is a second copy of it (the first is the line read from the
//! other side), so a 50 MiB line would cost 100 MiB; sent in [`PIECE`]s, it
//! costs itself plus one piece and the queue's bound.

use bytes::{BufMut, Bytes, BytesMut};
use childwire::{SendError, Sender};
use childwire_core::{EncodeErrorKind, Framing, LineDecoder, Lines};

use crate::rt::ExampleRuntime;

/// Bytes per piece of a long line on its way out.
pub(super) const PIECE: usize = 64 * 1024;

/// Lines in, bytes out as given (the sender adds the newline).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(super) struct Verbatim;

impl Framing for Verbatim {
    type Decoder = LineDecoder;

    fn decoder(&self, max_message_size: usize) -> LineDecoder {
        Lines.decoder(max_message_size)
    }

    /// Only the size: a payload is a piece of a line (never longer than
    /// the line), a lone newline, or a short line with its newline, so the
    /// limit (which counts no newline) plus one. Lines come from the host's
    /// transport, which held them to the same limit.
    fn check(&self, payload: &[u8], max_message_size: usize) -> Result<(), EncodeErrorKind> {
        if payload.len() <= max_message_size.saturating_add(1) {
            return Ok(());
        }
        Lines.check(payload, max_message_size)
    }

    fn encode(&self, payload: &[u8], dst: &mut BytesMut) {
        dst.extend_from_slice(payload);
    }

    fn overhead(&self, _len: usize) -> usize {
        0
    }
}

/// Sends `line` and its newline: at once when it is short, else in
/// [`PIECE`]s, one after the other by this one task. Nothing comes between
/// them as long as this task is the sender's only writer.
pub(super) async fn send_line<R: ExampleRuntime, F: Framing>(
    to: &Sender<R, F>,
    line: Bytes,
) -> Result<(), SendError<Bytes>> {
    if line.len() < PIECE {
        let mut framed = BytesMut::with_capacity(line.len() + 1);
        framed.extend_from_slice(&line);
        framed.put_u8(b'\n');
        return to.send(framed.freeze()).await;
    }
    send_pieces(to, line).await?;
    to.send(Bytes::from_static(b"\n")).await
}

/// Sends `bytes`, part of a line, as they are, in [`PIECE`]s.
pub(super) async fn send_pieces<R: ExampleRuntime, F: Framing>(
    to: &Sender<R, F>,
    bytes: Bytes,
) -> Result<(), SendError<Bytes>> {
    let mut at = 0;
    while at < bytes.len() {
        let end = bytes.len().min(at + PIECE);
        to.send(bytes.slice(at..end)).await?;
        at = end;
    }
    Ok(())
}
