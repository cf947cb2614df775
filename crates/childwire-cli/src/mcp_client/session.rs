//! The client side of a JSON-RPC session over a childwire transport:
//! requests matched to responses by id, with a deadline, and everything
//! else the server sends handled on the way.
//!
//! The session talks through a [`Link`]: one server process, or a
//! [`Supervised`] one that is restarted when it ends (`--restart`), whose
//! end is then an event of the session rather than its end.

use std::fmt;
use std::future::Future;
use std::time::{Duration, Instant};

use bytes::Bytes;
use childwire::{
    Closed, ExitReport, GaveUp, Received, Runtime, SendError, SendErrorKind, ShutdownError,
    SpawnError, Supervised, SupervisedEvent, Transport,
};
use serde_json::{Map, Value, json};

use super::describe;
use crate::protocol::METHOD_NOT_FOUND;
use crate::rt::timeout_at;

/// What a [`Session`] talks through.
pub trait Link {
    /// The runtime of its timers.
    type Rt: Runtime;
    /// Whether the server is restarted when it ends: its end is then an
    /// event the session reports and goes on from.
    const SUPERVISED: bool;

    /// Sends one message.
    fn send_line(&self, line: String) -> impl Future<Output = Result<(), SendError<String>>>;

    /// The next item from the server, or event of its supervision.
    fn next_event(&mut self) -> impl Future<Output = Option<SupervisedEvent>>;

    /// The server ended and a new process is needed: `spawn` one, or, under
    /// supervision, leave it to the supervisor (then `spawn` is not called).
    fn renew(
        &mut self,
        spawn: impl FnOnce() -> Result<Transport<Self::Rt>, SpawnError>,
    ) -> Result<(), SpawnError>;

    /// The running server's process ID.
    fn id(&self) -> Option<u32>;
}

impl<R: Runtime> Link for Transport<R> {
    type Rt = R;
    const SUPERVISED: bool = false;

    fn send_line(&self, line: String) -> impl Future<Output = Result<(), SendError<String>>> {
        self.send(line)
    }

    async fn next_event(&mut self) -> Option<SupervisedEvent> {
        self.recv().await.map(SupervisedEvent::Received)
    }

    fn renew(
        &mut self,
        spawn: impl FnOnce() -> Result<Transport<R>, SpawnError>,
    ) -> Result<(), SpawnError> {
        *self = spawn()?;
        Ok(())
    }

    fn id(&self) -> Option<u32> {
        Transport::id(self)
    }
}

/// A borrowed link, as a re-initialization step's session: the new
/// generation's transport, lent by the supervisor until traffic resumes.
impl<L: Link> Link for &mut L {
    type Rt = L::Rt;
    const SUPERVISED: bool = L::SUPERVISED;

    fn send_line(&self, line: String) -> impl Future<Output = Result<(), SendError<String>>> {
        (**self).send_line(line)
    }

    fn next_event(&mut self) -> impl Future<Output = Option<SupervisedEvent>> {
        (**self).next_event()
    }

    fn renew(
        &mut self,
        spawn: impl FnOnce() -> Result<Transport<Self::Rt>, SpawnError>,
    ) -> Result<(), SpawnError> {
        (**self).renew(spawn)
    }

    fn id(&self) -> Option<u32> {
        (**self).id()
    }
}

impl<R: Runtime> Link for Supervised<R> {
    type Rt = R;
    const SUPERVISED: bool = true;

    fn send_line(&self, line: String) -> impl Future<Output = Result<(), SendError<String>>> {
        self.send(line)
    }

    fn next_event(&mut self) -> impl Future<Output = Option<SupervisedEvent>> {
        self.recv()
    }

    fn renew(
        &mut self,
        _spawn: impl FnOnce() -> Result<Transport<R>, SpawnError>,
    ) -> Result<(), SpawnError> {
        // The supervisor restarts it; a request sent meanwhile waits for
        // the new generation.
        Ok(())
    }

    fn id(&self) -> Option<u32> {
        Supervised::id(self)
    }
}

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
    /// The server kept ending and is no longer restarted (`--restart`).
    GaveUp(Box<GaveUp>),
    /// The "server" sent this request of ours back unchanged instead of
    /// answering it: it echoes what it reads (`cat`), it is no MCP server.
    Echoed(String),
}

impl Failure {
    /// Sending failed because the server has ended: it exited, or its
    /// stdin broke as it did (the write's EPIPE may come before the exit is
    /// known; the error then carries the exit report all the same).
    fn is_exit(&self) -> bool {
        matches!(self, Failure::Send(err) if match err.kind() {
            SendErrorKind::Closed(Closed::Exited) => true,
            SendErrorKind::Closed(Closed::PeerClosed) => err.exit_report().is_some(),
            _ => false,
        })
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
            Failure::GaveUp(verdict) => write!(f, "{verdict}"),
            Failure::Echoed(method) => write!(
                f,
                "the server echoed the {method} request back instead of answering it (is it `cat`?)"
            ),
        }
    }
}

/// A JSON-RPC client talking to one server.
pub struct Session<L: Link> {
    link: L,
    next_id: u64,
    timeout: Duration,
    /// The server's exit report, once [`recv`](Transport::recv) handed it
    /// out: it comes only once. Under supervision, the last generation's.
    exited: Option<ExitReport>,
    /// Put in every request's `params._meta`: what a stateless MCP revision
    /// asks of each request instead of a handshake.
    meta: Option<Map<String, Value>>,
    /// The method of the request last sent: the one waited for. The same
    /// request coming back (method and id) is an echo, not a request of the
    /// server's.
    last_method: String,
}

/// What one item from the server meant to the session.
pub enum Handled {
    /// Nothing the caller waits for.
    Nothing,
    /// The answer to the request waited for.
    Answer(Result<Value, Failure>),
    /// The server ended before answering the request waited for; it is
    /// restarted when the flag says so.
    Unanswered(Failure, bool),
    /// A new generation of the server is up and re-initialized.
    Restarted,
    /// Nothing more will come.
    Over(Failure),
}

impl<L: Link> Session<L> {
    /// A session over `link`, waiting at most `timeout` for each answer.
    pub fn new(link: L, timeout: Duration) -> Self {
        Self {
            link,
            next_id: 1,
            timeout,
            exited: None,
            meta: None,
            last_method: String::new(),
        }
    }

    /// From now on, every request carries `meta`'s entries in its
    /// `params._meta` (entries the request sets itself win).
    pub fn set_meta(&mut self, meta: Map<String, Value>) {
        self.meta = Some(meta);
    }

    /// What the session talks through.
    pub fn link(&self) -> &L {
        &self.link
    }

    /// Moves the session to a new server process (the old one ended):
    /// `spawn` starts it, or under supervision the supervisor does. The
    /// old one's exit report, if it was received, is handed back. Request
    /// ids go on counting, so a late answer from the old process cannot be
    /// taken for a new one's.
    pub fn renew(
        &mut self,
        spawn: impl FnOnce() -> Result<Transport<L::Rt>, SpawnError>,
    ) -> Result<Option<ExitReport>, SpawnError> {
        self.link.renew(spawn)?;
        Ok(self.exited.take())
    }

    /// Sends a request and waits for its result, handling whatever else the
    /// server sends meanwhile. Under supervision, a request the server
    /// ended before answering is sent again once it is back.
    pub async fn request(&mut self, method: &str, params: Value) -> Result<Value, Failure> {
        self.exchange(method, params, self.timeout, true).await
    }

    /// [`request`](Self::request), waiting at most `timeout` for the
    /// answer, and not sent again: the server's end is the answer.
    pub async fn request_within(
        &mut self,
        method: &str,
        params: Value,
        timeout: Duration,
    ) -> Result<Value, Failure> {
        self.exchange(method, params, timeout, false).await
    }

    async fn exchange(
        &mut self,
        method: &str,
        mut params: Value,
        timeout: Duration,
        retry: bool,
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
        let mut id = self.send_request(method, &params).await?;
        let mut deadline = Instant::now() + timeout;
        // The server ended before answering, or was down when it was to be
        // sent, and is being restarted: the request goes once it is back.
        let mut again = id.is_none();
        loop {
            let Some(item) = timeout_at::<L::Rt, _>(deadline, self.link.next_event()).await else {
                return Err(Failure::Timeout(timeout));
            };
            match self.handle(item, id).await {
                Handled::Nothing => {}
                Handled::Answer(answer) => return answer,
                // Not restarted: under supervision the verdict (or the
                // end of the supervision) follows, and says more.
                Handled::Unanswered(_, false) if L::SUPERVISED => {}
                Handled::Unanswered(failure, restarting) => {
                    if !(retry && restarting) {
                        return Err(failure);
                    }
                    say!(
                        "   {method} was not answered ({failure}); it is sent again once the server is back"
                    );
                    again = true;
                }
                Handled::Restarted if again => {
                    say!("-> {method} (again)");
                    id = self.send_request(method, &params).await?;
                    again = id.is_none();
                    // The new process gets the whole time to answer.
                    deadline = Instant::now() + timeout;
                }
                Handled::Restarted => {}
                Handled::Over(failure) => return Err(failure),
            }
        }
    }

    /// Sends request `method` with a new id, which it returns; `None` when
    /// the server is down and restarted (it is to be sent once it is back).
    async fn send_request(&mut self, method: &str, params: &Value) -> Result<Option<u64>, Failure> {
        let id = self.next_id;
        self.next_id += 1;
        let request = json!({ "jsonrpc": "2.0", "id": id, "method": method, "params": params });
        method.clone_into(&mut self.last_method);
        match self.send(&request).await {
            Ok(()) => Ok(Some(id)),
            Err(failure) if failure.is_exit() && L::SUPERVISED => {
                say!("   the server is down: {method} is sent once it is back");
                Ok(None)
            }
            // It may have written something before it went: read on to the
            // exit report, which says why it ended.
            Err(failure) if failure.is_exit() => Ok(Some(id)),
            Err(failure) => Err(failure),
        }
    }

    /// Waits for the next item from the server and handles it, with no
    /// request pending: what the session does between requests (`--restart`
    /// watching the server).
    pub async fn idle(&mut self) -> Handled {
        let item = self.link.next_event().await;
        self.handle(item, None).await
    }

    /// Handles one item from the server while waiting for the answer to
    /// `pending`, if any.
    async fn handle(&mut self, item: Option<SupervisedEvent>, pending: Option<u64>) -> Handled {
        let Some(event) = item else {
            return Handled::Over(match &self.exited {
                Some(report) => Failure::Exited(Box::new(report.clone())),
                None => Failure::Gone,
            });
        };
        let item = match event {
            SupervisedEvent::Received(item) => item,
            SupervisedEvent::Unanswered(request) => {
                let ours = pending.is_some_and(|id| request.id == id.to_string().as_bytes());
                if !ours {
                    say!(
                        "<- (ignored) an error for id {}, which is not pending",
                        String::from_utf8_lossy(&request.id)
                    );
                    return Handled::Nothing;
                }
                let error: Value = serde_json::from_slice(&request.response).unwrap_or(Value::Null);
                let restarting =
                    error.pointer("/error/data/restarting") == Some(&Value::Bool(true));
                // The generation's report came first: it says why.
                let failure = match (&self.exited, error) {
                    (Some(report), _) => Failure::Exited(Box::new(report.clone())),
                    (None, Value::Object(error)) => response(error).err().unwrap_or(Failure::Gone),
                    (None, _) => Failure::Gone,
                };
                return Handled::Unanswered(failure, restarting);
            }
            SupervisedEvent::Restarted { generation } => {
                say!(
                    "   restarted: generation {generation} (pid {}) is up and re-initialized; the session goes on",
                    pid_text(self.link.id())
                );
                return Handled::Restarted;
            }
            SupervisedEvent::ReinitFailed { generation, error } => {
                say!("   the re-initialization of generation {generation} failed: {error}");
                return Handled::Nothing;
            }
            SupervisedEvent::SpawnFailed(err) => {
                say!("   restarting the server failed: {err}");
                return Handled::Nothing;
            }
            SupervisedEvent::GaveUp(verdict) => {
                say!("<- {verdict}");
                return Handled::Over(Failure::GaveUp(verdict));
            }
            other => {
                say!("<- {other:?}");
                return Handled::Nothing;
            }
        };
        match item {
            Received::Message(message) => match self.dispatch(&message, pending).await {
                Some(answer) => Handled::Answer(answer),
                None => Handled::Nothing,
            },
            Received::Oversized(notice) => {
                say!("<- {notice}");
                // The notice names the top-level id of the line it
                // dropped, wherever it stood in it.
                let ours = pending.is_some_and(|id| {
                    notice
                        .json_rpc_id()
                        .is_some_and(|found| &found[..] == id.to_string().as_bytes())
                });
                if ours {
                    Handled::Answer(Err(Failure::Oversized(notice.len)))
                } else {
                    Handled::Nothing
                }
            }
            Received::Pollution(notice) => {
                // A banner, a log line or the other framing on stdout:
                // named once; the line itself follows.
                say!("<- {notice}");
                Handled::Nothing
            }
            Received::Exited(report) => {
                self.exited = Some((*report).clone());
                if !L::SUPERVISED {
                    return Handled::Over(Failure::Exited(report));
                }
                // One generation ended; the supervisor says what follows.
                say!("<- server {report}");
                Handled::Nothing
            }
            // Malformed frames: line framing never has them.
            other => {
                say!("<- {other:?}");
                Handled::Nothing
            }
        }
    }

    /// Sends a notification. Under supervision, one the server is down
    /// for is dropped: the only one this client sends,
    /// `notifications/initialized`, goes with the next process's
    /// re-initialization.
    pub async fn notify(&mut self, method: &str) -> Result<(), Failure> {
        match self
            .send(&json!({ "jsonrpc": "2.0", "method": method }))
            .await
        {
            Err(failure) if failure.is_exit() && L::SUPERVISED => {
                say!("   the server is down: {method} goes with its re-initialization");
                Ok(())
            }
            sent => sent,
        }
    }

    async fn send(&self, message: &Value) -> Result<(), Failure> {
        // `Value`'s Display is compact JSON: one line, no raw newline.
        self.link
            .send_line(message.to_string())
            .await
            .map_err(|err| Failure::Send(err.map_payload(Bytes::from)))
    }

    /// Handles one message while waiting for the answer to `pending`;
    /// returns the answer if this was it.
    async fn dispatch(
        &mut self,
        message: &[u8],
        pending: Option<u64>,
    ) -> Option<Result<Value, Failure>> {
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
            // Our own request, back: the other end echoes its input.
            (Some(method), Some(request_id))
                if method == self.last_method
                    && pending.is_some_and(|id| request_id == json!(id)) =>
            {
                say!("<- {method} (id {request_id}): our own request, sent back unchanged");
                Some(Err(Failure::Echoed(method)))
            }
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
            (None, Some(response_id)) if pending.is_some_and(|id| response_id == json!(id)) => {
                Some(response(message))
            }
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

impl<R: Runtime> Session<Transport<R>> {
    /// Shuts the server down the MCP way and returns its exit report (or
    /// the one already received, if it ended on its own).
    pub async fn shutdown(self) -> Result<ExitReport, ShutdownError> {
        match self.exited {
            Some(report) => Ok(report),
            None => self.link.shutdown().await,
        }
    }
}

impl<R: Runtime> Session<Supervised<R>> {
    /// Ends the supervision and shuts the running server down the MCP way:
    /// its exit report, or the last generation's if none runs.
    pub async fn shutdown(self) -> Result<ExitReport, ShutdownError> {
        self.link.shutdown().await
    }
}

/// A process ID as shown, `?` when unknown.
pub fn pid_text(pid: Option<u32>) -> String {
    pid.map_or_else(|| "?".to_owned(), |pid| pid.to_string())
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
