//! MCP protocol revisions and JSON-RPC 2.0 error codes.

/// The MCP protocol revisions the examples speak, newest first.
pub const SUPPORTED_PROTOCOL_VERSIONS: &[&str] = &["2025-06-18", "2025-03-26", "2024-11-05"];

/// The newest revision in [`SUPPORTED_PROTOCOL_VERSIONS`]: what a server
/// answers when a client asks for a revision it does not know (MCP lifecycle,
/// "Version Negotiation").
pub const LATEST_PROTOCOL_VERSION: &str = SUPPORTED_PROTOCOL_VERSIONS[0];

/// Returns the supported revision equal to `version`, if there is one.
///
/// The answer is `'static` so a session can keep the negotiated revision
/// without holding on to the message it came from.
#[must_use]
pub fn supported_protocol_version(version: &str) -> Option<&'static str> {
    SUPPORTED_PROTOCOL_VERSIONS
        .iter()
        .copied()
        .find(|known| *known == version)
}

/// JSON-RPC: the line is not valid JSON. Answered with `"id": null`.
pub const PARSE_ERROR: i64 = -32700;
/// JSON-RPC: valid JSON, but not a valid request object.
pub const INVALID_REQUEST: i64 = -32600;
/// JSON-RPC: the method does not exist.
pub const METHOD_NOT_FOUND: i64 = -32601;
/// JSON-RPC: invalid method parameters (MCP also uses it for an unknown tool).
pub const INVALID_PARAMS: i64 = -32602;
/// JSON-RPC: internal error.
pub const INTERNAL_ERROR: i64 = -32603;
