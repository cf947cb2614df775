//! The bundled example MCP server: a small, honest MCP server over stdio.
//!
//! [`McpServer`] is a line-in/line-out state machine with no I/O: give it one
//! line, get back at most one line to write. [`serve`] is the stdio loop the
//! `example_server` binary runs around it.
//!
//! What it answers:
//! - `initialize`: accepts the client's protocol revision if it is one of
//!   [`SUPPORTED_PROTOCOL_VERSIONS`](crate::protocol::SUPPORTED_PROTOCOL_VERSIONS),
//!   else offers [`LATEST_PROTOCOL_VERSION`]; capabilities `{"tools": {}}`.
//! - `ping`, `tools/list` (`echo` and `add`, with JSON Schemas), `tools/call`.
//! - Bad tool arguments are tool errors (a result with `isError: true`); an
//!   unknown tool is JSON-RPC error -32602, an unknown method -32601, an
//!   unparseable line -32700 with a null id, a malformed request -32600.
//! - Notifications (`notifications/initialized` and any other) are never
//!   answered, nor are responses the client sends.

use std::fmt;
use std::io::{self, BufRead, Write};

use serde::Deserialize;
use serde_json::{Map, Value, json};

use crate::protocol::{
    INVALID_PARAMS, INVALID_REQUEST, LATEST_PROTOCOL_VERSION, METHOD_NOT_FOUND, PARSE_ERROR,
    supported_protocol_version,
};
use jsonrpc::{Incoming, failure, success};
use tools::Tool;

mod jsonrpc;
mod tools;

/// The name the server gives in `serverInfo`.
pub const SERVER_NAME: &str = "childwire-example-server";

/// The MCP server's session state.
pub struct McpServer {
    negotiated: Option<&'static str>,
    client_initialized: bool,
    log: Box<dyn FnMut(&str) + Send>,
}

impl McpServer {
    /// A server that logs nothing.
    #[must_use]
    pub fn new() -> Self {
        Self::with_logger(|_| {})
    }

    /// A server that hands one human-readable line per event to `log`.
    ///
    /// The binary sends these to stderr: in MCP's stdio transport, stdout
    /// carries protocol messages only.
    #[must_use]
    pub fn with_logger(log: impl FnMut(&str) + Send + 'static) -> Self {
        Self {
            negotiated: None,
            client_initialized: false,
            log: Box::new(log),
        }
    }

    /// The protocol revision agreed in `initialize`, once it has been answered.
    #[must_use]
    pub fn negotiated_protocol_version(&self) -> Option<&'static str> {
        self.negotiated
    }

    /// Whether the client has sent `notifications/initialized`.
    #[must_use]
    pub fn client_initialized(&self) -> bool {
        self.client_initialized
    }

    /// Handles one line (without its `\n`) and returns the line to write back,
    /// if any (without its `\n`; it never contains one).
    pub fn handle_line(&mut self, line: &str) -> Option<String> {
        self.handle_bytes(line.as_bytes())
    }

    /// Like [`handle_line`](Self::handle_line) for raw bytes: invalid UTF-8
    /// is a parse error, never a crash.
    pub fn handle_bytes(&mut self, line: &[u8]) -> Option<String> {
        if line.iter().all(u8::is_ascii_whitespace) {
            // A blank line is not a message (C01): nothing to answer.
            return None;
        }
        let message = match serde_json::from_slice::<Value>(line) {
            Ok(message) => message,
            Err(error) => {
                self.log(format_args!("unparseable line: {error}"));
                return Some(failure(
                    Value::Null,
                    PARSE_ERROR,
                    format_args!("Parse error: {error}"),
                ));
            }
        };
        match jsonrpc::classify(message) {
            Incoming::Request { id, method, params } => Some(self.request(id, &method, params)),
            Incoming::Notification { method } => {
                self.notification(&method);
                None
            }
            Incoming::Response { id } => {
                self.log(format_args!(
                    "ignored a response (id {id}): this server sends no requests"
                ));
                None
            }
            Incoming::Invalid { id, reason } => {
                self.log(format_args!("invalid request: {reason}"));
                Some(failure(
                    id,
                    INVALID_REQUEST,
                    format_args!("Invalid request: {reason}"),
                ))
            }
        }
    }

    fn request(&mut self, id: Value, method: &str, params: Option<Value>) -> String {
        self.log(format_args!("<- {method} (id {id})"));
        let outcome = match method {
            "initialize" => self.initialize(params),
            "ping" => no_params(params).map(|()| json!({})),
            "tools/list" => no_params(params).map(|()| json!({ "tools": tools::definitions() })),
            "tools/call" => self.call_tool(params),
            _ => Err(Failure(
                METHOD_NOT_FOUND,
                format!("Method not found: {method}"),
            )),
        };
        match outcome {
            Ok(result) => success(id, result),
            Err(Failure(code, message)) => {
                self.log(format_args!("-> error {code} (id {id}): {message}"));
                failure(id, code, message)
            }
        }
    }

    fn notification(&mut self, method: &str) {
        match method {
            "notifications/initialized" => {
                self.client_initialized = true;
                self.log(format_args!("<- {method}: session ready"));
            }
            _ => self.log(format_args!("<- {method} (notification, ignored)")),
        }
    }

    fn initialize(&mut self, params: Option<Value>) -> Result<Value, Failure> {
        if let Some(version) = self.negotiated {
            return Err(Failure(
                INVALID_REQUEST,
                format!("initialize was already answered (protocol {version})"),
            ));
        }
        let params: InitializeParams = parse_params(params)?;
        let version =
            supported_protocol_version(&params.protocol_version).unwrap_or(LATEST_PROTOCOL_VERSION);
        let client = params
            .client_info
            .as_ref()
            .and_then(|info| info.get("name"))
            .and_then(Value::as_str)
            .unwrap_or("an unnamed client");
        self.log(format_args!(
            "{client} asked for protocol {}, answering {version}",
            params.protocol_version
        ));
        self.negotiated = Some(version);
        Ok(json!({
            "protocolVersion": version,
            "capabilities": { "tools": {} },
            "serverInfo": { "name": SERVER_NAME, "version": env!("CARGO_PKG_VERSION") },
            "instructions": "Example server bundled with childwire: `echo` returns its text, `add` sums two numbers.",
        }))
    }

    fn call_tool(&mut self, params: Option<Value>) -> Result<Value, Failure> {
        let params: CallToolParams = parse_params(params)?;
        let Some(tool) = Tool::find(&params.name) else {
            return Err(Failure(
                INVALID_PARAMS,
                format!("Unknown tool: {}", params.name),
            ));
        };
        let (text, is_error) = match tool.call(params.arguments) {
            Ok(text) => (text, false),
            Err(message) => {
                self.log(format_args!("tool {} failed: {message}", tool.name()));
                (message, true)
            }
        };
        Ok(json!({
            "content": [{ "type": "text", "text": text }],
            "isError": is_error,
        }))
    }

    fn log(&mut self, line: fmt::Arguments<'_>) {
        (self.log)(&line.to_string());
    }
}

impl Default for McpServer {
    fn default() -> Self {
        Self::new()
    }
}

impl fmt::Debug for McpServer {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("McpServer")
            .field("negotiated", &self.negotiated)
            .field("client_initialized", &self.client_initialized)
            .finish_non_exhaustive()
    }
}

/// A JSON-RPC error: code and message.
struct Failure(i64, String);

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct InitializeParams {
    protocol_version: String,
    // Read only for the log: an older or sloppier client still gets served.
    client_info: Option<Map<String, Value>>,
}

#[derive(Deserialize)]
struct CallToolParams {
    name: String,
    arguments: Option<Value>,
}

/// Parses a params object; absent params count as `{}` so a missing field
/// is reported by name.
fn parse_params<T: serde::de::DeserializeOwned>(params: Option<Value>) -> Result<T, Failure> {
    let params = match params {
        None => Value::Object(Map::new()),
        Some(params @ Value::Object(_)) => params,
        Some(other) => return Err(not_an_object(&other)),
    };
    serde_json::from_value(params)
        .map_err(|error| Failure(INVALID_PARAMS, format!("Invalid params: {error}")))
}

/// For methods without parameters: anything but an object (MCP's `_meta`,
/// a pagination `cursor`) is a malformed request.
fn no_params(params: Option<Value>) -> Result<(), Failure> {
    match params {
        None | Some(Value::Object(_)) => Ok(()),
        Some(other) => Err(not_an_object(&other)),
    }
}

fn not_an_object(params: &Value) -> Failure {
    Failure(
        INVALID_PARAMS,
        format!(
            "Invalid params: expected an object, got {}",
            jsonrpc::kind(params)
        ),
    )
}

/// Runs `server` over a line stream until `input` ends: reads one line,
/// writes its answer (if any) followed by `\n`, and flushes, so a client
/// waiting for a response is never left waiting on a buffer.
///
/// Returns `Ok(())` at end of input, which is how an MCP stdio client shuts
/// the server down; returns the error if reading or writing fails.
pub fn serve(
    server: &mut McpServer,
    mut input: impl BufRead,
    mut output: impl Write,
) -> io::Result<()> {
    let mut line = Vec::new();
    let mut answer = Vec::new();
    loop {
        line.clear();
        if input.read_until(b'\n', &mut line)? == 0 {
            return Ok(());
        }
        if line.last() == Some(&b'\n') {
            line.pop();
        }
        if line.last() == Some(&b'\r') {
            line.pop();
        }
        if let Some(response) = server.handle_bytes(&line) {
            // Response and newline in one buffer: one write call whenever the
            // pipe has room, instead of a second tiny write for the newline.
            answer.clear();
            answer.extend_from_slice(response.as_bytes());
            answer.push(b'\n');
            output.write_all(&answer)?;
            output.flush()?;
        }
    }
}

#[cfg(test)]
mod tests;
