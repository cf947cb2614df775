//! The client side of a JSON-RPC session over a childwire transport:
//! requests matched to responses by id, with a deadline, and everything
//! else the server sends handled on the way.

use std::fmt;
use std::time::{Duration, Instant};

use bytes::Bytes;
use childwire::{
    Closed, ExitReport, Received, Runtime, SendError, SendErrorKind, ShutdownError, Transport,
};
use serde_json::{Map, Value, json};

use super::describe;
use crate::protocol::METHOD_NOT_FOUND;
use crate::rt::timeout_at;

/// Why a request got no result.
#[derive(Debug)]
pub enum Failure {
    /// The server ended before answering (boxed, as the receiver hands it
    /// out: a report is large next to the other reasons).
    Exited(Box<ExitReport>),
    /// No answer within the timeout.
    Timeout(Duration),
    /// The server answered with a JSON-RPC error.
    Error {
        /// The error code.
        code: i64,
        /// The error message.
        message: String,
        /// The error's data, if any.
        data: Option<Value>,
    },
    /// The server speaks no protocol revision this client knows.
    NoCommonVersion(Vec<String>),
    /// The message could not be sent.
    Send(SendError<bytes::Bytes>),
    /// The answer was dropped for being over the size limit.
    Oversized(u64),
    /// The task driving the server stopped (its runtime is shutting down).
    Gone,
    /// The server could not be started again (why, in words).
    Spawn(String),
}

impl Failure {
    /// Sending failed because the server has exited.
    fn is_exit(&self) -> bool {
        matches!(self, Failure::Send(err) if err.kind() == SendErrorKind::Closed(Closed::Exited))
    }
}

impl fmt::Display for Failure {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Failure::Exited(report) => write!(f, "the server {report}"),
            Failure::Timeout(after) => {
                write!(f, "no answer within {}", describe::seconds(*after))
            }
            Failure::Error { code, message, .. } => {
                write!(f, "the server answered with error {code}: {message}")
            }
            Failure::NoCommonVersion(offered) => write!(
                f,
                "the server speaks protocol {}, none of which this client knows",
                offered.join(", ")
            ),
            Failure::Send(err) => write!(f, "sending failed: {err}"),
            Failure::Oversized(len) => write!(
                f,
                "the answer was {len} bytes, over the message size limit, and was dropped"
            ),
            Failure::Gone => f.write_str("the connection to the server is gone"),
            Failure::Spawn(why) => write!(f, "the server could not be started again: {why}"),
        }
    }
}

/// A JSON-RPC client talking to one server.
pub struct Session<R: Runtime> {
    transport: Transport<R>,
    next_id: u64,
    timeout: Duration,
    /// The server's exit report, once [`recv`](Transport::recv) handed it
    /// out: it comes only once.
    exited: Option<ExitReport>,
    /// Put in every request's `params._meta`: what a stateless MCP revision
    /// asks of each request instead of a handshake.
    meta: Option<Map<String, Value>>,
}

impl<R: Runtime> Session<R> {
    /// A session over `transport`, waiting at most `timeout` for each answer.
    pub fn new(transport: Transport<R>, timeout: Duration) -> Self {
        Self {
            transport,
            next_id: 1,
            timeout,
            exited: None,
            meta: None,
        }
    }

    /// From now on, every request carries `meta`'s entries in its
    /// `params._meta` (entries the request sets itself win).
    pub fn set_meta(&mut self, meta: Map<String, Value>) {
        self.meta = Some(meta);
    }

    /// The transport.
    pub fn transport(&self) -> &Transport<R> {
        &self.transport
    }

    /// Moves the session to a new server process (the old one ended): the
    /// old one's exit report, if it was received, is handed back. Request
    /// ids go on counting, so a late answer from the old process cannot be
    /// taken for a new one's.
    pub fn replace_transport(&mut self, transport: Transport<R>) -> Option<ExitReport> {
        self.transport = transport;
        self.exited.take()
    }

    /// Sends a request and waits for its result, handling whatever else the
    /// server sends meanwhile.
    pub async fn request(&mut self, method: &str, params: Value) -> Result<Value, Failure> {
        self.request_within(method, params, self.timeout).await
    }

    /// [`request`](Self::request), waiting at most `timeout` for the answer.
    pub async fn request_within(
        &mut self,
        method: &str,
        mut params: Value,
        timeout: Duration,
    ) -> Result<Value, Failure> {
        if let (Some(meta), Value::Object(params)) = (&self.meta, &mut params) {
            let entry = params
                .entry("_meta")
                .or_insert_with(|| Value::Object(Map::new()));
            if let Value::Object(entry) = entry {
                for (key, value) in meta {
                    entry.entry(key.clone()).or_insert_with(|| value.clone());
                }
            }
        }
        let id = self.next_id;
        self.next_id += 1;
        let request = json!({ "jsonrpc": "2.0", "id": id, "method": method, "params": params });
        match self.send(&request).await {
            Ok(()) => {}
            // It may have written something before it went: read on to the
            // exit report, which says why it ended.
            Err(failure) if failure.is_exit() => {}
            Err(failure) => return Err(failure),
        }
        let deadline = Instant::now() + timeout;
        loop {
            let item = match timeout_at::<R, _>(deadline, self.transport.recv()).await {
                Some(item) => item,
                None => return Err(Failure::Timeout(timeout)),
            };
            match item {
                Some(Received::Message(message)) => {
                    if let Some(answer) = self.dispatch(&message, id).await {
                        return answer;
                    }
                }
                Some(Received::Oversized(notice)) => {
                    say!("<- {notice}");
                    // The notice names the top-level id of the line it
                    // dropped, wherever it stood in it.
                    if notice
                        .json_rpc_id()
                        .is_some_and(|found| &found[..] == id.to_string().as_bytes())
                    {
                        return Err(Failure::Oversized(notice.len));
                    }
                }
                Some(Received::Pollution(notice)) => {
                    // A banner, a log line or the other framing on stdout:
                    // named once; the line itself follows.
                    say!("<- {notice}");
                }
                Some(Received::Exited(report)) => {
                    self.exited = Some((*report).clone());
                    return Err(Failure::Exited(report));
                }
                // Malformed frames: line framing never has them.
                Some(other) => say!("<- {other:?}"),
                None => {
                    return Err(match &self.exited {
                        Some(report) => Failure::Exited(Box::new(report.clone())),
                        None => Failure::Gone,
                    });
                }
            }
        }
    }

    /// Sends a notification.
    pub async fn notify(&mut self, method: &str) -> Result<(), Failure> {
        self.send(&json!({ "jsonrpc": "2.0", "method": method }))
            .await
    }

    /// Shuts the server down the MCP way and returns its exit report (or
    /// the one already received, if it ended on its own).
    pub async fn shutdown(self) -> Result<ExitReport, ShutdownError> {
        match self.exited {
            Some(report) => Ok(report),
            None => self.transport.shutdown().await,
        }
    }

    async fn send(&self, message: &Value) -> Result<(), Failure> {
        // `Value`'s Display is compact JSON: one line, no raw newline.
        self.transport
            .send(message.to_string())
            .await
            .map_err(|err| Failure::Send(err.map_payload(Bytes::from)))
    }

    /// Handles one message while waiting for the answer to `id`; returns
    /// the answer if this was it.
    async fn dispatch(&mut self, message: &[u8], id: u64) -> Option<Result<Value, Failure>> {
        let Ok(Value::Object(mut message)) = serde_json::from_slice::<Value>(message) else {
            say!(
                "<- (ignored, not a JSON-RPC object) {}",
                describe::clip(&String::from_utf8_lossy(message))
            );
            return None;
        };
        let method = message
            .get("method")
            .and_then(Value::as_str)
            .map(str::to_owned);
        match (method, message.remove("id")) {
            (Some(method), Some(request_id)) => {
                self.answer_server_request(&method, request_id).await;
                None
            }
            (Some(method), None) => {
                say!(
                    "<- notification {}",
                    describe::notification(&method, message.get("params"))
                );
                None
            }
            (None, Some(response_id)) if response_id == json!(id) => Some(response(message)),
            (None, response_id) => {
                say!(
                    "<- (ignored) a response to id {}, which is not pending",
                    response_id.unwrap_or(Value::Null)
                );
                None
            }
        }
    }

    /// Servers may ask the client things (`ping`, `roots/list`,
    /// `sampling/createMessage`); this client answers `ping` and says
    /// "method not found" to the rest, so the server is never left waiting.
    async fn answer_server_request(&mut self, method: &str, id: Value) {
        let answer = if method == "ping" {
            say!("<- server request ping (id {id}): answered");
            json!({ "jsonrpc": "2.0", "id": id, "result": {} })
        } else {
            say!(
                "<- server request {method} (id {id}): answered {METHOD_NOT_FOUND}, not supported"
            );
            json!({
                "jsonrpc": "2.0",
                "id": id,
                "error": { "code": METHOD_NOT_FOUND, "message": format!("Method not found: {method} (this client does not support it)") },
            })
        };
        if let Err(err) = self.send(&answer).await {
            say!("   could not answer: {err}");
        }
    }
}

/// The result of a response object, or its error.
fn response(mut message: Map<String, Value>) -> Result<Value, Failure> {
    if let Some(result) = message.remove("result") {
        return Ok(result);
    }
    let error = message.remove("error").unwrap_or(Value::Null);
    Err(Failure::Error {
        data: error.get("data").cloned(),
        code: error.get("code").and_then(Value::as_i64).unwrap_or(0),
        message: error
            .get("message")
            .and_then(Value::as_str)
            .unwrap_or("(no message)")
            .to_owned(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn responses_yield_their_result_or_their_error() {
        let ok = json!({"jsonrpc":"2.0","id":1,"result":{"x":1}});
        let Value::Object(ok) = ok else {
            unreachable!()
        };
        assert_eq!(response(ok).unwrap(), json!({"x":1}));

        let err = json!({"jsonrpc":"2.0","id":1,"error":{"code":-32601,"message":"nope"}});
        let Value::Object(err) = err else {
            unreachable!()
        };
        match response(err) {
            Err(Failure::Error { code, message, .. }) => {
                assert_eq!((code, message.as_str()), (-32601, "nope"));
            }
            other => panic!("{other:?}"),
        }
    }
}
