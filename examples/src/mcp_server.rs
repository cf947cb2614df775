//! The bundled example MCP server: a small, honest MCP server over stdio.
//!
//! [`McpServer`] is a line-in/line-out state machine with no I/O: give it one
//! line, get back at most one line to write. [`serve`] is the stdio loop the
//! `example_server` binary runs around it.
//!
//! What it answers:
//! - `initialize`: accepts the client's protocol revision if it is one of
//!   the handshake revisions it speaks, else offers the newest of those;
//!   capabilities `{"tools": {}, "resources": {}, "prompts": {}}`.
//! - `server/discover` (MCP 2026-07-28): its revisions, capabilities,
//!   identity and instructions. A request whose `params._meta` names a
//!   stateless revision is checked (a revision it does not speak is error
//!   -32004 listing the ones it does; missing client capabilities are
//!   -32602) and its result says `"resultType": "complete"`.
//! - Told to speak only older revisions ([`McpServer::speaking`], the
//!   binary's `--legacy`), it acts like a server from before 2026-07-28:
//!   `server/discover` is an unknown method and `_meta` is not looked at.
//! - `ping`, `tools/list` (`echo` and `add`, with JSON Schemas), `tools/call`;
//!   `resources/list` and `resources/read` (one text resource,
//!   `example://readme`); `prompts/list` and `prompts/get` (one prompt,
//!   `greet`, with a required `name` argument).
//! - Bad tool arguments are tool errors (a result with `isError: true`); an
//!   unknown tool is JSON-RPC error -32602, an unknown method -32601, an
//!   unparseable line -32700 with a null id, a malformed request -32600.
//! - Notifications (`notifications/initialized` and any other) are never
//!   answered, nor are responses the client sends.

use bytes::Bytes;
use childwire::{Closed, Received, Runtime, SendError, SendErrorKind, ShutdownError, Transport};
use childwire_core::jsonrpc::oversized_error;
use std::fmt;

use serde_json::{Map, Value, json};

use crate::cli::{ArgWalker, Parsed, UsageError};
use crate::protocol::{
    INVALID_PARAMS, INVALID_REQUEST, LATEST_PROTOCOL_VERSION, META_CLIENT_CAPABILITIES,
    META_PROTOCOL_VERSION, METHOD_NOT_FOUND, PARSE_ERROR, SUPPORTED_PROTOCOL_VERSIONS,
    UNSUPPORTED_PROTOCOL_VERSION, is_stateless, supported_protocol_version,
};
use jsonrpc::{Incoming, failure, failure_with_data, success};
use tools::Tool;

mod catalog;
mod jsonrpc;
mod program;
mod tools;

pub use program::main_with;

/// The name the server gives in `serverInfo`.
pub const SERVER_NAME: &str = "childwire-example-server";

/// Instructions for the model, in `initialize` and `server/discover` results.
const INSTRUCTIONS: &str =
    "Example server bundled with childwire: `echo` returns its text, `add` sums two numbers.";

/// The MCP server's session state.
pub struct McpServer {
    /// The revisions it speaks, newest first.
    versions: Vec<&'static str>,
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
            versions: SUPPORTED_PROTOCOL_VERSIONS.to_vec(),
            negotiated: None,
            client_initialized: false,
            log: Box::new(log),
        }
    }

    /// Speaks only `versions` (each one of
    /// [`SUPPORTED_PROTOCOL_VERSIONS`]; others are ignored). Without a
    /// stateless revision among them the server acts like one from before
    /// 2026-07-28, which never heard of `server/discover` or `_meta`.
    #[must_use]
    pub fn speaking(mut self, versions: &[&str]) -> Self {
        self.versions = SUPPORTED_PROTOCOL_VERSIONS
            .iter()
            .copied()
            .filter(|known| versions.contains(known))
            .collect();
        self
    }

    /// The revisions it speaks, newest first.
    #[must_use]
    pub fn protocol_versions(&self) -> &[&'static str] {
        &self.versions
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
        let stateless = self.stateless_revision(params.as_ref());
        match &stateless {
            Ok(Some(version)) => self.log(format_args!(
                "<- {method} (id {id}, protocol {version} in _meta)"
            )),
            _ => self.log(format_args!("<- {method} (id {id})")),
        }
        let outcome = stateless.and_then(|stateless| {
            let result = self.dispatch(method, params, stateless)?;
            Ok(match (stateless, result) {
                // Every stateless result says it is whole (2026-07-28:
                // "Results carry a resultType"); this server never answers
                // in parts.
                (Some(_), Value::Object(mut result)) => {
                    result.insert("resultType".to_owned(), json!("complete"));
                    Value::Object(result)
                }
                (_, result) => result,
            })
        });
        match outcome {
            Ok(result) => success(id, result),
            Err(Failure(code, message, data)) => {
                self.log(format_args!("-> error {code} (id {id}): {message}"));
                match data {
                    Some(data) => failure_with_data(id, code, message, data),
                    None => failure(id, code, message),
                }
            }
        }
    }

    fn dispatch(
        &mut self,
        method: &str,
        params: Option<Value>,
        stateless: Option<&'static str>,
    ) -> Result<Value, Failure> {
        match method {
            "initialize" if self.handshake_versions().next().is_some() => self.initialize(params),
            "server/discover" if self.speaks_stateless() => Ok(self.discover(stateless)),
            "ping" => no_params(params).map(|()| json!({})),
            "tools/list" => no_params(params).map(|()| json!({ "tools": tools::definitions() })),
            "tools/call" => self.call_tool(params),
            "resources/list" => {
                no_params(params).map(|()| json!({ "resources": catalog::resources() }))
            }
            "resources/read" => read_resource(params),
            "prompts/list" => no_params(params).map(|()| json!({ "prompts": catalog::prompts() })),
            "prompts/get" => get_prompt(params),
            _ => Err(Failure(
                METHOD_NOT_FOUND,
                format!("Method not found: {method}"),
                None,
            )),
        }
    }

    /// The stateless revision a request speaks, from its `params._meta`;
    /// `None` for a request of the handshake era. A server that speaks no
    /// stateless revision never looks: `_meta` was free-form before.
    fn stateless_revision(&self, params: Option<&Value>) -> Result<Option<&'static str>, Failure> {
        if !self.speaks_stateless() {
            return Ok(None);
        }
        let Some(meta) = params.and_then(|params| params.get("_meta")) else {
            return Ok(None);
        };
        let Some(requested) = meta.get(META_PROTOCOL_VERSION) else {
            return Ok(None);
        };
        let Some(version) = requested
            .as_str()
            .and_then(|requested| self.versions.iter().copied().find(|v| *v == requested))
        else {
            return Err(Failure(
                UNSUPPORTED_PROTOCOL_VERSION,
                format!("Unsupported protocol version: {requested}"),
                Some(json!({ "supported": self.versions, "requested": requested })),
            ));
        };
        if !is_stateless(version) {
            // A handshake revision named in `_meta`: the request belongs to
            // an `initialize`d session, where `_meta` has no such rule.
            return Ok(None);
        }
        if !meta
            .get(META_CLIENT_CAPABILITIES)
            .is_some_and(Value::is_object)
        {
            return Err(Failure(
                INVALID_PARAMS,
                format!(
                    "Invalid params: _meta must carry {META_CLIENT_CAPABILITIES} (an object) in protocol {version}"
                ),
                None,
            ));
        }
        Ok(Some(version))
    }

    fn speaks_stateless(&self) -> bool {
        self.versions.iter().any(|version| is_stateless(version))
    }

    fn handshake_versions(&self) -> impl Iterator<Item = &'static str> + '_ {
        self.versions
            .iter()
            .copied()
            .filter(|version| !is_stateless(version))
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
                None,
            ));
        }
        let params = InitializeParams::parse(params)?;
        // The client's revision if this server speaks it in a handshake,
        // else its newest handshake revision (a stateless one cannot be
        // agreed in `initialize`).
        let version = self
            .handshake_versions()
            .find(|known| *known == params.protocol_version)
            .or_else(|| self.handshake_versions().next())
            // Unreachable: `initialize` is an unknown method without one.
            .unwrap_or(LATEST_PROTOCOL_VERSION);
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
            "capabilities": capabilities(),
            "serverInfo": server_info(),
            "instructions": INSTRUCTIONS,
        }))
    }

    /// `server/discover`: what `initialize` would say, for every revision
    /// at once, with no session behind it.
    fn discover(&mut self, stateless: Option<&'static str>) -> Value {
        self.log(format_args!(
            "discovery ({}), answering with protocols {}",
            stateless.map_or_else(
                || "no protocol named in _meta".to_owned(),
                |version| format!("protocol {version}")
            ),
            self.versions.join(", ")
        ));
        json!({
            "supportedVersions": self.versions,
            "capabilities": capabilities(),
            "serverInfo": server_info(),
            "instructions": INSTRUCTIONS,
        })
    }

    fn call_tool(&mut self, params: Option<Value>) -> Result<Value, Failure> {
        let params = CallToolParams::parse(params)?;
        let Some(tool) = Tool::find(&params.name) else {
            return Err(Failure(
                INVALID_PARAMS,
                format!("Unknown tool: {}", params.name),
                None,
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
            .field("versions", &self.versions)
            .field("negotiated", &self.negotiated)
            .field("client_initialized", &self.client_initialized)
            .finish_non_exhaustive()
    }
}

/// A JSON-RPC error: code, message and data.
struct Failure(i64, String, Option<Value>);

/// What it offers, in `initialize` and `server/discover` results.
fn capabilities() -> Value {
    json!({ "tools": {}, "resources": {}, "prompts": {} })
}

struct ReadResourceParams {
    uri: String,
}

impl ReadResourceParams {
    fn parse(params: Option<Value>) -> Result<Self, Failure> {
        let params = Params::of(params)?;
        Ok(Self {
            uri: params.string("uri")?,
        })
    }
}

/// `resources/read`: an unknown URI is error -32002, as the MCP spec asks.
fn read_resource(params: Option<Value>) -> Result<Value, Failure> {
    let params = ReadResourceParams::parse(params)?;
    catalog::read(&params.uri).ok_or_else(|| {
        Failure(
            RESOURCE_NOT_FOUND,
            format!("Resource not found: {}", params.uri),
            Some(json!({ "uri": params.uri })),
        )
    })
}

struct GetPromptParams {
    name: String,
    arguments: Option<Map<String, Value>>,
}

impl GetPromptParams {
    fn parse(params: Option<Value>) -> Result<Self, Failure> {
        let params = Params::of(params)?;
        Ok(Self {
            name: params.string("name")?,
            arguments: params.object("arguments")?,
        })
    }
}

/// `prompts/get`: an unknown prompt or a missing argument is -32602.
fn get_prompt(params: Option<Value>) -> Result<Value, Failure> {
    let params = GetPromptParams::parse(params)?;
    catalog::get(&params.name, params.arguments.as_ref())
        .map_err(|catalog::PromptError(message)| Failure(INVALID_PARAMS, message, None))
}

/// The MCP error code for a resource URI the server does not have.
const RESOURCE_NOT_FOUND: i64 = -32002;

fn server_info() -> Value {
    json!({ "name": SERVER_NAME, "version": env!("CARGO_PKG_VERSION") })
}

struct InitializeParams {
    protocol_version: String,
    // Read only for the log: an older or sloppier client still gets served.
    client_info: Option<Map<String, Value>>,
}

impl InitializeParams {
    fn parse(params: Option<Value>) -> Result<Self, Failure> {
        let params = Params::of(params)?;
        Ok(Self {
            protocol_version: params.string("protocolVersion")?,
            client_info: params.object("clientInfo").unwrap_or(None),
        })
    }
}

struct CallToolParams {
    name: String,
    arguments: Option<Value>,
}

impl CallToolParams {
    fn parse(params: Option<Value>) -> Result<Self, Failure> {
        let mut params = Params::of(params)?;
        Ok(Self {
            name: params.string("name")?,
            arguments: params
                .0
                .remove("arguments")
                .filter(|value| !value.is_null()),
        })
    }
}

/// A request's params object, read member by member (a few members each: no
/// derive needed); absent params count as `{}` so a missing member is
/// reported by name.
struct Params(Map<String, Value>);

impl Params {
    fn of(params: Option<Value>) -> Result<Self, Failure> {
        match params {
            None => Ok(Self(Map::new())),
            Some(Value::Object(members)) => Ok(Self(members)),
            Some(other) => Err(not_an_object(&other)),
        }
    }

    /// A string member that must be there.
    fn string(&self, name: &str) -> Result<String, Failure> {
        match self.0.get(name) {
            Some(Value::String(text)) => Ok(text.clone()),
            Some(other) => Err(invalid_params(format!(
                "invalid type: {other}, expected a string for `{name}`"
            ))),
            None => Err(invalid_params(format!("missing field `{name}`"))),
        }
    }

    /// An object member that may be absent (or null).
    fn object(&self, name: &str) -> Result<Option<Map<String, Value>>, Failure> {
        match self.0.get(name) {
            None | Some(Value::Null) => Ok(None),
            Some(Value::Object(members)) => Ok(Some(members.clone())),
            Some(other) => Err(invalid_params(format!(
                "invalid type: {other}, expected an object for `{name}`"
            ))),
        }
    }
}

fn invalid_params(error: String) -> Failure {
    Failure(INVALID_PARAMS, format!("Invalid params: {error}"), None)
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
        None,
    )
}

/// Serves `peer` until its input ends: each request is answered (if it
/// wants an answer) as soon as it was handled, through childwire's own
/// transport, so framing and limits are the library's: a request over the
/// peer's `max_message_size` is never held whole; it is answered with a
/// JSON-RPC error for its id (found while it was dropped), and the server
/// goes on with the next line.
///
/// Returns `Ok(())` at end of input, which is how an MCP stdio client shuts
/// the server down, after every answer was written; returns the reason if
/// an answer cannot be sent (the client went away).
pub async fn serve<R: Runtime>(
    server: &mut McpServer,
    mut peer: Transport<R>,
    max_message_size: usize,
) -> Result<(), SendError<Bytes>> {
    while let Some(item) = peer.recv().await {
        let answer = match item {
            Received::Message(request) => server.handle_bytes(&request).map(Bytes::from),
            Received::Oversized(notice) => {
                server.log(format_args!("dropped a request: {notice}"));
                notice
                    .json_rpc_id()
                    .filter(|id| &id[..] != b"null")
                    .map(|id| oversized_error(id, notice.len, max_message_size))
            }
            _ => None,
        };
        if let Some(answer) = answer {
            peer.send(answer).await?;
        }
    }
    // Every answer out before the server exits.
    let closed = match peer.close().await {
        Ok(()) => return Ok(()),
        Err(ShutdownError::PeerClosed) => Closed::PeerClosed,
        Err(_) => Closed::DriverStopped,
    };
    Err(SendError::new(SendErrorKind::Closed(closed), Bytes::new()))
}

/// `example_server --help`.
pub const USAGE: &str = "\
Usage: example_server [OPTIONS]

A small MCP server over stdio with an `echo` and an `add` tool, a
resource (example://readme) and a prompt (greet): JSON-RPC requests on
stdin, one per line, answers on stdout, logs on stderr. Exits when stdin
closes.

Options:
  --protocol-versions LIST  speak only these revisions (comma-separated);
                            default: 2026-07-28, 2025-11-25, 2025-06-18,
                            2025-03-26, 2024-11-05
  --legacy                  act like a server from before 2026-07-28: no
                            `server/discover` (-32601), `_meta` not looked at
                            (the same as every default revision but 2026-07-28)
  -h, --help                print this help
";

/// Parses `example_server`'s arguments (without the program name) into
/// the revisions it is to speak, newest first.
pub fn parse_args(
    args: impl IntoIterator<Item = std::ffi::OsString>,
) -> Result<Parsed<Vec<&'static str>>, UsageError> {
    let mut args = ArgWalker::new(args);
    let mut versions = SUPPORTED_PROTOCOL_VERSIONS.to_vec();
    while let Some(option) = args.next_option()? {
        match option.as_str() {
            "-h" | "--help" => return Ok(Parsed::Help),
            "--legacy" => versions.retain(|version| !is_stateless(version)),
            "--protocol-versions" => {
                let list = args.value(&option)?;
                versions = list
                    .split(',')
                    .map(|version| {
                        supported_protocol_version(version.trim()).ok_or_else(|| {
                            UsageError(format!(
                                "unknown protocol revision `{version}` (known: {})",
                                SUPPORTED_PROTOCOL_VERSIONS.join(", ")
                            ))
                        })
                    })
                    .collect::<Result<_, _>>()?;
            }
            other => return Err(UsageError(format!("unknown option `{other}`"))),
        }
    }
    if let Some(command) = args.into_command() {
        return Err(UsageError(format!(
            "unexpected argument `{}`",
            command.program.to_string_lossy()
        )));
    }
    Ok(Parsed::Run(versions))
}

#[cfg(test)]
mod tests;
