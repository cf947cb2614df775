//! JSON-RPC bookkeeping for the SDK adapters (feature `serde`): the requests
//! this side sent and the peer has not answered, so that a response the
//! transport had to drop (over the size limit) or will never get (the server
//! exited) becomes an error for its request instead of a hang.

use std::collections::HashSet;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use bytes::Bytes;
use childwire_core::ExitReport;

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

    /// Every pending id, forgotten.
    pub fn take_all(&self) -> Vec<String> {
        let mut ids: Vec<String> = self.lock().drain().collect();
        ids.sort_unstable();
        ids
    }
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
