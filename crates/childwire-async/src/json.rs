//! Typed JSON on top of the byte transport (feature `serde`): serialize to
//! one compact line, deserialize each message.

use std::fmt;

use childwire_core::{
    ExitReport, Framing, Malformed, Message, Oversized, PollutionNotice, Received, SendError,
};
use serde::Serialize;
use serde::de::DeserializeOwned;

use crate::runtime::Runtime;
use crate::transport::{Receiver, Sender, Transport};

/// Why [`Sender::send_json`] did not send.
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

/// What [`Receiver::recv_json`] hands out instead of a value.
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

impl<R: Runtime, F: Framing> Sender<R, F> {
    /// Serializes `value` as compact JSON (one line, as NDJSON wants) and
    /// sends it. See [`send`](Self::send).
    pub async fn send_json<T: Serialize + ?Sized>(&self, value: &T) -> Result<(), SendJsonError> {
        let bytes = serde_json::to_vec(value).map_err(SendJsonError::Serialize)?;
        self.send(bytes).await.map_err(SendJsonError::Send)
    }
}

impl<R: Runtime, F: Framing> Receiver<R, F> {
    /// The next message deserialized as `T`; notices and the end come as
    /// errors, then `None`. Cancel-safe like [`recv`](Self::recv).
    pub async fn recv_json<T: DeserializeOwned>(&mut self) -> Option<Result<T, RecvJsonError>> {
        Some(match self.recv().await? {
            Received::Message(message) => serde_json::from_slice(&message)
                .map_err(|error| RecvJsonError::Parse { message, error }),
            Received::Oversized(notice) => Err(RecvJsonError::Oversized(notice)),
            Received::Malformed(notice) => Err(RecvJsonError::Malformed(notice)),
            Received::Pollution(notice) => Err(RecvJsonError::Pollution(notice)),
            Received::Exited(report) => Err(RecvJsonError::Exited(report)),
            // A variant added later: not a message of type T.
            _ => return None,
        })
    }
}

impl<R: Runtime, F: Framing> Transport<R, F> {
    /// See [`Sender::send_json`].
    ///
    /// ```no_run
    /// # async fn demo<R: childwire_async::Runtime>(mut server: childwire_async::Transport<R>) {
    /// use serde_json::{Value, json};
    ///
    /// server.send_json(&json!({"jsonrpc": "2.0", "id": 1, "method": "ping"})).await.unwrap();
    /// let reply: Value = server.recv_json().await.unwrap().unwrap();
    /// # }
    /// ```
    pub async fn send_json<T: Serialize + ?Sized>(&self, value: &T) -> Result<(), SendJsonError> {
        self.sender().send_json(value).await
    }

    /// See [`Receiver::recv_json`].
    pub async fn recv_json<T: DeserializeOwned>(&mut self) -> Option<Result<T, RecvJsonError>> {
        self.receiver_mut().recv_json().await
    }
}
