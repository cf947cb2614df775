//! JSON-RPC bookkeeping for the SDK adapters (feature `serde`): the requests
//! this side sent and the peer has not answered, so that a response the
//! transport had to drop (over the size limit) or will never get (the server
//! exited) becomes an error for its request instead of a hang.

use std::collections::HashSet;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use bytes::Bytes;
use childwire_core::jsonrpc::oversized_error;
use childwire_core::{ExitReport, Oversized};

/// The JSON-RPC error code of the responses made up for requests a server
/// will never answer because it exited: -32000, which the MCP SDKs use for
/// "connection closed".
pub const SERVER_EXITED_ERROR_CODE: i32 = -32000;

/// Request ids as compact JSON text (`7`, `"abc"`), shared by the sending
/// futures and the receiver. Clones share the set.
///
/// ```
/// use childwire_async::requests::{Pending, canonical_id};
///
/// let pending = Pending::default();
/// pending.insert(canonical_id(br#" "req-1" "#).unwrap());
/// assert!(pending.remove(r#""req-1""#));
/// assert!(pending.take_all().is_empty());
/// ```
#[derive(Debug, Clone, Default)]
pub struct Pending(Arc<Mutex<HashSet<String>>>);

impl Pending {
    fn lock(&self) -> MutexGuard<'_, HashSet<String>> {
        self.0.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// A request with this id (compact JSON) was sent.
    pub fn insert(&self, id: String) {
        self.lock().insert(id);
    }

    /// The request with this id is answered; whether it was pending.
    pub fn remove(&self, id: &str) -> bool {
        self.lock().remove(id)
    }

    /// What a message the transport dropped for its size means here: the
    /// answer to one of our requests (which then fails with an error at
    /// once instead of waiting for its timeout), a request from the peer
    /// (which gets an error answer), or neither. `limit` is the transport's
    /// message size limit, for the error's wording. Logs what it decided.
    ///
    /// ```
    /// use childwire_async::requests::{OversizedAction, Pending};
    /// use childwire_core::{Frame, LineDecoder};
    ///
    /// let pending = Pending::default();
    /// pending.insert("7".to_string());
    /// let mut decoder = LineDecoder::new(16);
    /// decoder.handle_data(b"{\"jsonrpc\":\"2.0\",\"id\":7,\"result\":\"far too long\"}\n");
    /// let Some(Frame::Oversized(notice)) = decoder.poll_frame() else { panic!() };
    /// let OversizedAction::FailRequest(error) = pending.oversized(&notice, 16) else { panic!() };
    /// assert!(error.starts_with(br#"{"jsonrpc":"2.0","id":7,"error":"#));
    /// assert!(!pending.remove("7"), "no longer pending");
    /// ```
    pub fn oversized(&self, notice: &Oversized, limit: usize) -> OversizedAction {
        let Some(raw) = notice.json_rpc_id() else {
            tracing::warn!("{notice}; it had no JSON-RPC id, so no request fails for it");
            return OversizedAction::Nothing;
        };
        let error = oversized_error(raw, notice.len, limit);
        match canonical_id(raw) {
            Some(key) if self.remove(&key) => {
                tracing::warn!("{notice}; its request fails with an error");
                OversizedAction::FailRequest(error)
            }
            // A request has a `method`; a response does not.
            _ if notice.head.windows(8).any(|w| w == b"\"method\"") => {
                tracing::warn!("{notice}; answering the peer's request with an error");
                OversizedAction::AnswerPeer(error)
            }
            _ => {
                tracing::warn!("{notice}; no request of ours waits for it");
                OversizedAction::Nothing
            }
        }
    }

    /// Every pending id, forgotten.
    pub fn take_all(&self) -> Vec<String> {
        let mut ids: Vec<String> = self.lock().drain().collect();
        ids.sort_unstable();
        ids
    }
}

/// What [`Pending::oversized`] decided for a dropped over-long message.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum OversizedAction {
    /// It answered one of our requests: hand the client this JSON-RPC error
    /// response as that request's answer.
    FailRequest(Bytes),
    /// It was the peer's request: send the peer this error response.
    AnswerPeer(Bytes),
    /// Nothing to do: it had no id, or answered no request of ours.
    Nothing,
}

/// `id` (raw JSON text, as `Oversized::json_rpc_id` gives it) in the
/// compact form [`Pending`] keys on, if it is JSON.
pub fn canonical_id(raw: &[u8]) -> Option<String> {
    let value: serde_json::Value = serde_json::from_slice(raw).ok()?;
    serde_json::to_string(&value).ok()
}

/// A JSON-RPC error response to request `id` (compact JSON) saying the
/// server ended before it answered, with the exit report in words.
pub fn exited_error(id: &str, report: &ExitReport) -> Bytes {
    let message = format!("the MCP server ended before it answered: it {report}");
    let body = serde_json::json!({
        "code": SERVER_EXITED_ERROR_CODE,
        "message": message,
        "data": {
            "exit": report.exit.to_string(),
            "stderr": report.stderr_summary(),
        },
    });
    Bytes::from(format!(r#"{{"jsonrpc":"2.0","id":{id},"error":{body}}}"#))
}

#[cfg(test)]
mod tests {
    use childwire_core::{Frame, LineDecoder};

    use super::*;

    /// The notice for `line`, dropped over a 16-byte limit.
    fn dropped(line: &[u8]) -> Oversized {
        let mut decoder = LineDecoder::new(16);
        decoder.handle_data(line);
        decoder.handle_eof();
        match decoder.poll_frame() {
            Some(Frame::Oversized(notice)) => notice,
            other => panic!("expected an oversized notice, got {other:?}"),
        }
    }

    #[test]
    fn c28_a_dropped_answer_fails_its_request_and_a_dropped_request_is_answered() {
        let pending = Pending::default();
        pending.insert(r#""a""#.to_string());
        let answer = dropped(br#"{"jsonrpc":"2.0","id":"a","result":"far too long"}"#);
        let OversizedAction::FailRequest(error) = pending.oversized(&answer, 16) else {
            panic!("our request fails");
        };
        assert!(error.starts_with(br#"{"jsonrpc":"2.0","id":"a","error":"#));
        // Answered once: the same answer again is nobody's.
        assert_eq!(pending.oversized(&answer, 16), OversizedAction::Nothing);

        let request = dropped(br#"{"jsonrpc":"2.0","id":9,"method":"sampling/createMessage"}"#);
        let OversizedAction::AnswerPeer(error) = pending.oversized(&request, 16) else {
            panic!("the peer's request is answered");
        };
        assert!(error.starts_with(br#"{"jsonrpc":"2.0","id":9,"error":"#));

        let notification = dropped(br#"{"jsonrpc":"2.0","method":"notifications/progress"}"#);
        assert_eq!(
            pending.oversized(&notification, 16),
            OversizedAction::Nothing
        );
    }
}
