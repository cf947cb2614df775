//! What a probe found, gathered as it goes, for `--json`: one JSON document
//! per run, written to stdout at the end, with field names that stay.
//!
//! ```text
//! {
//!   "command": "npx -y @modelcontextprotocol/server-everything",
//!   "runtime": "tokio",
//!   "pid": 4242,
//!   "protocol_version": "2025-11-25",
//!   "server_info": {"name": "...", "version": "..."},
//!   "capabilities": {"tools": {}, ...},
//!   "instructions": "...",
//!   "tools": [...],          // as the server listed them; null: not listed
//!   "resources": [...],
//!   "prompts": [...],
//!   "calls": [{"method": "tools/call", "name": "add", "arguments": {...},
//!              "result": {...}, "ms": 1.2}, ...],
//!   "outcome": "ok",         // "tool_error", "failed", "ended_early"
//!   "error": null,           // {"step": "...", "message": "...", "explanation": "..."}
//!   "exit": {"code": 0, "signal": null, "description": "exited with code 0 ...",
//!            "shutdown_requested": true, "stderr_tail": "..."},
//!   "traffic": {"messages_out": 4, "bytes_out": 378, "messages_in": 3,
//!               "bytes_in": 914, "oversized": 0, "polluted": 0, "stderr_bytes": 420},
//!   "timings_ms": {"spawn": 1.1, "initialize": 3.2, "tools/list": 0.4, ...,
//!                  "shutdown": 1.0, "total": 9.9}
//! }
//! ```

use std::time::{Duration, Instant};

use childwire::{Exit, ExitReport};
use serde_json::{Map, Value, json};

/// The fields that are `null` until something is found for them.
const UNTIL_FOUND: [&str; 11] = [
    "pid",
    "protocol_version",
    "server_info",
    "capabilities",
    "instructions",
    "tools",
    "resources",
    "prompts",
    "error",
    "exit",
    "traffic",
];

/// How the run ended, in the document's `outcome`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Verdict {
    /// Every step succeeded and the server ended when asked.
    Ok,
    /// The called tool answered with `isError: true`.
    ToolError,
    /// A step failed.
    Failed,
    /// Every step succeeded, but the server ended before it was asked to.
    EndedEarly,
}

impl Verdict {
    fn as_str(self) -> &'static str {
        match self {
            Verdict::Ok => "ok",
            Verdict::ToolError => "tool_error",
            Verdict::Failed => "failed",
            Verdict::EndedEarly => "ended_early",
        }
    }
}

/// The findings of one run.
#[derive(Debug)]
pub(super) struct Findings {
    started: Instant,
    document: Map<String, Value>,
    timings: Map<String, Value>,
    calls: Vec<Value>,
}

impl Findings {
    /// Findings about `command` on `runtime`, timed from now.
    pub(super) fn new(command: &str, runtime: &str) -> Self {
        let mut document = Map::new();
        document.insert("command".to_owned(), json!(command));
        document.insert("runtime".to_owned(), json!(runtime));
        for field in UNTIL_FOUND {
            document.insert(field.to_owned(), Value::Null);
        }
        Self {
            started: Instant::now(),
            document,
            timings: Map::new(),
            calls: Vec::new(),
        }
    }

    fn set(&mut self, field: &str, value: Value) {
        self.document.insert(field.to_owned(), value);
    }

    /// The server's process ID.
    pub(super) fn pid(&mut self, pid: Option<u32>) {
        self.set("pid", json!(pid));
    }

    /// What an `initialize` (or `server/discover`) result says about the
    /// server, and the revision in use.
    pub(super) fn server(&mut self, protocol: &str, result: &Value) {
        self.set("protocol_version", json!(protocol));
        for (field, key) in [
            ("server_info", "serverInfo"),
            ("capabilities", "capabilities"),
            ("instructions", "instructions"),
        ] {
            self.set(field, result.get(key).cloned().unwrap_or(Value::Null));
        }
    }

    /// A list the server gave: `tools`, `resources` or `prompts`.
    pub(super) fn listed(&mut self, field: &str, items: &[Value]) {
        self.set(field, Value::Array(items.to_vec()));
    }

    /// One call (`tools/call`, `resources/read`, `prompts/get`): what was
    /// asked (`request`, an object such as `{"name": ..., "arguments": ...}`),
    /// and its result or error, after `elapsed`.
    pub(super) fn call(
        &mut self,
        method: &str,
        request: Value,
        answer: Result<&Value, String>,
        elapsed: Duration,
    ) {
        let mut call = Map::new();
        call.insert("method".to_owned(), json!(method));
        if let Value::Object(request) = request {
            call.extend(request);
        }
        match answer {
            Ok(result) => call.insert("result".to_owned(), result.clone()),
            Err(error) => call.insert("error".to_owned(), json!(error)),
        };
        call.insert("ms".to_owned(), json!(millis(elapsed)));
        self.calls.push(Value::Object(call));
    }

    /// How long step `name` took (the latest time wins for a step done
    /// again).
    pub(super) fn time(&mut self, name: &str, elapsed: Duration) {
        self.timings.insert(name.to_owned(), json!(millis(elapsed)));
    }

    /// The step that failed, why, and the whole explanation given.
    pub(super) fn error(&mut self, step: &str, message: &str, explanation: &str) {
        self.set(
            "error",
            json!({ "step": step, "message": message, "explanation": explanation }),
        );
    }

    /// The finished document, with the server's exit report (if one was had)
    /// and the verdict.
    pub(super) fn finish(mut self, report: Option<&ExitReport>, verdict: Verdict) -> Value {
        if let Some(report) = report {
            let (code, signal) = match report.exit {
                Exit::Code(code) => (Some(code), None),
                Exit::Signal(signal) => (None, Some(signal)),
            };
            let mut brief = report.clone();
            brief.stderr_tail.clear();
            self.set(
                "exit",
                json!({
                    "code": code,
                    "signal": signal,
                    "description": brief.to_string(),
                    "shutdown_requested": report.shutdown_requested,
                    "stderr_tail": report.stderr_tail,
                }),
            );
            let c = &report.counters;
            self.set(
                "traffic",
                json!({
                    "messages_out": c.messages_out,
                    "bytes_out": c.bytes_out,
                    "messages_in": c.messages_in,
                    "bytes_in": c.bytes_in,
                    "oversized": c.oversized,
                    "polluted": c.polluted,
                    "stderr_bytes": c.stderr_bytes,
                }),
            );
        }
        self.set("calls", Value::Array(self.calls.clone()));
        self.set("outcome", json!(verdict.as_str()));
        let total = millis(self.started.elapsed());
        self.timings.insert("total".to_owned(), json!(total));
        self.set("timings_ms", Value::Object(self.timings.clone()));
        Value::Object(self.document)
    }
}

/// A duration in milliseconds, to the microsecond.
fn millis(elapsed: Duration) -> f64 {
    (elapsed.as_secs_f64() * 1_000_000.0).round() / 1000.0
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_field_is_there_even_when_nothing_was_found() {
        let document = Findings::new("cat", "tokio").finish(None, Verdict::Failed);
        let always = ["command", "runtime", "calls", "outcome", "timings_ms"];
        for field in UNTIL_FOUND.iter().chain(&always) {
            assert!(document.get(*field).is_some(), "no `{field}` in {document}");
        }
        assert_eq!(
            document.as_object().map(|o| o.len()),
            Some(16),
            "{document}"
        );
        assert_eq!(document["outcome"], "failed");
        assert_eq!(document["calls"], json!([]));
        assert!(document["timings_ms"]["total"].is_number(), "{document}");
    }

    #[test]
    fn calls_keep_what_was_asked_and_what_came_back() {
        let mut findings = Findings::new("srv", "smol");
        findings.call(
            "tools/call",
            json!({ "name": "add", "arguments": { "a": 1 } }),
            Ok(&json!({ "content": [] })),
            Duration::from_micros(1500),
        );
        findings.call(
            "prompts/get",
            json!({ "name": "x" }),
            Err("error -32602: no".to_owned()),
            Duration::ZERO,
        );
        let document = findings.finish(None, Verdict::Ok);
        assert_eq!(
            document["calls"],
            json!([
                { "method": "tools/call", "name": "add", "arguments": { "a": 1 },
                  "result": { "content": [] }, "ms": 1.5 },
                { "method": "prompts/get", "name": "x", "error": "error -32602: no", "ms": 0.0 }
            ])
        );
    }
}
