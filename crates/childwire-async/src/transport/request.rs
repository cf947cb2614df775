//! [`Transport::request`]: send a JSON-RPC request and wait for its answer,
//! without scanning ids by hand. The messages that come first stay queued
//! for `recv`.

use std::fmt;
use std::future::poll_fn;
use std::task::Poll;

use bytes::Bytes;
use childwire_core::{
    ExitReport, Framing, IdScanner, Message, Oversized, Receive, Received, SendError,
};

use super::Transport;
use crate::runtime::Runtime;
use childwire_core::jsonrpc::is_response_to;

/// Why [`Transport::request`] has no answer.
#[derive(Debug)]
#[non_exhaustive]
pub enum RequestError {
    /// The payload is not a JSON-RPC request: no top-level `method` and
    /// usable `id`.
    NotARequest,
    /// It could not be sent.
    Send(SendError<Bytes>),
    /// The answer was over the size limit and dropped (its notice).
    Oversized(Oversized),
    /// The child ended before it answered (its report, if known), or the
    /// channel's peer closed its end.
    Ended(Option<Box<ExitReport>>),
}

impl fmt::Display for RequestError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            RequestError::NotARequest => {
                f.write_str("not a JSON-RPC request (it needs a `method` and an `id`)")
            }
            RequestError::Send(err) => err.fmt(f),
            RequestError::Oversized(notice) => write!(
                f,
                "the answer ({} bytes) was over the size limit and dropped",
                notice.len
            ),
            RequestError::Ended(Some(report)) => write!(f, "the child {report} before it answered"),
            RequestError::Ended(None) => f.write_str("the peer ended before it answered"),
        }
    }
}

impl std::error::Error for RequestError {}

impl<R: Runtime, F: Framing> Transport<R, F> {
    /// Sends the JSON-RPC request `request` and waits for its answer: the
    /// first message that responds to its `id` (compared as a JSON value,
    /// so `1.0` answers `1`), taken from wherever it is among the items
    /// waiting. Every other item (a log notification the server sent
    /// first, say) stays queued, in order, for [`recv`](Self::recv).
    ///
    /// Fails if `request` is not a request, cannot be sent, its answer was
    /// too large, or the child ends first (with its report). It bounds no
    /// wait: wrap it in the runtime's timeout. Cancel-safe once sent: the
    /// answer stays queued for `recv` if the future is dropped.
    ///
    /// ```no_run
    /// # async fn demo<R: childwire_async::Runtime>() -> Result<(), Box<dyn std::error::Error>> {
    /// use childwire_async::{Command, Config, Transport};
    ///
    /// let mut server = Transport::<R>::spawn(&Command::new("my-mcp-server"), Config::default())?;
    /// let answer = server
    ///     .request(r#"{"jsonrpc":"2.0","id":0,"method":"initialize","params":{}}"#)
    ///     .await?;
    /// println!("{}", String::from_utf8_lossy(&answer));
    /// # Ok(()) }
    /// ```
    pub async fn request<B: AsRef<[u8]>>(&mut self, request: B) -> Result<Message, RequestError> {
        let mut scanner = IdScanner::new();
        scanner.feed(request.as_ref());
        let id = match scanner.id() {
            Some(id) if scanner.has_method() => id,
            _ => return Err(RequestError::NotARequest),
        };
        let body = Bytes::copy_from_slice(request.as_ref());
        self.send(body).await.map_err(RequestError::Send)?;
        let receiver = &mut self.receiver;
        // An answer already taken out with a batch of received messages.
        if let Some(at) = receiver
            .batch
            .iter()
            .position(|message| is_response_to(message, &id))
        {
            let message = receiver.batch.remove(at).expect("found above");
            receiver.shared.holds.handed_out(message.len() as u64);
            return Ok(message);
        }
        poll_fn(|cx| {
            let mut state = receiver.shared.lock();
            loop {
                if let Some(item) = state.session.take_response(&id) {
                    receiver.shared.unlock(state);
                    return Poll::Ready(match item {
                        Received::Message(message) => Ok(message),
                        Received::Oversized(notice) => Err(RequestError::Oversized(notice)),
                        _ => Err(RequestError::Ended(None)),
                    });
                }
                // Nothing more will come: the end is known and stdout read.
                let over = state.session.has_ended() && state.session.channel().is_read_done();
                if over || state.session.is_finished() {
                    receiver.shared.unlock(state);
                    let report = receiver.shared.exit.get().map(Box::new);
                    return Poll::Ready(Err(RequestError::Ended(report)));
                }
                match state.session.poll_wait() {
                    Receive::Read => {
                        let blocked;
                        (state, blocked) = receiver
                            .shared
                            .read_once(state, cx.waker(), || receiver.rt.now());
                        if blocked {
                            receiver.shared.unlock(state);
                            return Poll::Pending;
                        }
                    }
                    Receive::End => {
                        receiver.shared.unlock(state);
                        return Poll::Ready(Err(RequestError::Ended(None)));
                    }
                    _ => {
                        receiver.shared.wait_to_receive(cx.waker());
                        receiver.shared.unlock(state);
                        return Poll::Pending;
                    }
                }
            }
        })
        .await
    }
}
