//! Typed JSON on top of the byte transport (feature `serde`): serialize to
//! one compact line, deserialize each message.

use std::fmt;

use childwire_core::{ExitReport, Malformed, Message, Oversized, PollutionNotice, SendError};

/// Why [`Sender::send_json`](crate::Sender::send_json) did not send.
#[derive(Debug)]
#[non_exhaustive]
pub enum SendJsonError {
    /// The value could not be serialized.
    Serialize(serde_json::Error),
    /// The serialized message was refused or sending is over; the bytes are
    /// handed back.
    Send(SendError<Vec<u8>>),
}

impl fmt::Display for SendJsonError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            SendJsonError::Serialize(err) => write!(f, "cannot serialize the message: {err}"),
            SendJsonError::Send(err) => err.fmt(f),
        }
    }
}

impl std::error::Error for SendJsonError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            SendJsonError::Serialize(err) => Some(err),
            SendJsonError::Send(err) => Some(err),
        }
    }
}

/// What [`Receiver::recv_json`](crate::Receiver::recv_json) hands out instead of a value.
#[derive(Debug)]
#[non_exhaustive]
pub enum RecvJsonError {
    /// A message that is not JSON of the expected type; its bytes are kept.
    Parse {
        /// The message as it came.
        message: Message,
        /// Why it did not deserialize.
        error: serde_json::Error,
    },
    /// A message over the size limit was dropped (its JSON-RPC id, if any,
    /// is in the notice); the stream goes on.
    Oversized(Oversized),
    /// Bytes that break the framing were dropped; the stream goes on.
    Malformed(Malformed),
    /// A line on stdout that is not a JSON message was named (a banner, a
    /// log line, the other framing); the line itself follows, as a
    /// [`Parse`](Self::Parse) error, unless the policy drops it.
    Pollution(PollutionNotice),
    /// The child ended: the last item.
    Exited(Box<ExitReport>),
}

impl fmt::Display for RecvJsonError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            RecvJsonError::Parse { error, .. } => {
                write!(f, "a message is not the JSON expected: {error}")
            }
            RecvJsonError::Oversized(notice) => notice.fmt(f),
            RecvJsonError::Malformed(notice) => notice.fmt(f),
            RecvJsonError::Pollution(notice) => notice.fmt(f),
            RecvJsonError::Exited(report) => write!(f, "the child {report}"),
        }
    }
}

impl std::error::Error for RecvJsonError {}
