//! MCP protocol revisions and JSON-RPC 2.0 error codes.
//!
//! Two eras of MCP are spoken here. Up to `2025-11-25` a session opens with
//! the `initialize` handshake, which fixes one revision for the connection.
//! From `2026-07-28` on the protocol is stateless: there is no handshake,
//! every request names its revision and the client's capabilities in
//! `params._meta`, and a client learns about the server with a
//! `server/discover` request (see [`META_PROTOCOL_VERSION`]).

/// The revisions that open with the `initialize` handshake, newest first.
pub const HANDSHAKE_PROTOCOL_VERSIONS: &[&str] =
    &["2025-11-25", "2025-06-18", "2025-03-26", "2024-11-05"];

/// The stateless revisions (per-request `_meta`, `server/discover`), newest
/// first.
pub const STATELESS_PROTOCOL_VERSIONS: &[&str] = &["2026-07-28"];

/// Every revision the examples speak, newest first.
pub const SUPPORTED_PROTOCOL_VERSIONS: &[&str] = &[
    "2026-07-28",
    "2025-11-25",
    "2025-06-18",
    "2025-03-26",
    "2024-11-05",
];

/// The newest revision that `initialize` can agree on: what a client
/// offers by default, and what a server answers when a client asks for a
/// revision it does not know (MCP lifecycle, "Version Negotiation").
pub const LATEST_PROTOCOL_VERSION: &str = HANDSHAKE_PROTOCOL_VERSIONS[0];

/// The newest stateless revision.
pub const LATEST_STATELESS_PROTOCOL_VERSION: &str = STATELESS_PROTOCOL_VERSIONS[0];

/// `_meta` key of a stateless request: the revision it speaks (required).
pub const META_PROTOCOL_VERSION: &str = "io.modelcontextprotocol/protocolVersion";
/// `_meta` key of a stateless request: the client's capabilities (required).
pub const META_CLIENT_CAPABILITIES: &str = "io.modelcontextprotocol/clientCapabilities";
/// `_meta` key of a stateless request: the client's name and version
/// (optional).
pub const META_CLIENT_INFO: &str = "io.modelcontextprotocol/clientInfo";

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

/// Whether `version` is a stateless revision (no `initialize`; `_meta` on
/// every request).
#[must_use]
pub fn is_stateless(version: &str) -> bool {
    STATELESS_PROTOCOL_VERSIONS.contains(&version)
}

/// JSON-RPC: the line is not valid JSON. Answered with `"id": null`.
pub const PARSE_ERROR: i64 = -32700;
/// JSON-RPC: valid JSON, but not a valid request object.
pub const INVALID_REQUEST: i64 = -32600;
/// JSON-RPC: the method does not exist. A server from before 2026-07-28
/// answers `server/discover` with it, which is how a stdio client knows to
/// fall back to `initialize`.
pub const METHOD_NOT_FOUND: i64 = -32601;
/// JSON-RPC: invalid method parameters (MCP also uses it for an unknown tool).
pub const INVALID_PARAMS: i64 = -32602;
/// JSON-RPC: internal error.
pub const INTERNAL_ERROR: i64 = -32603;
/// MCP `UnsupportedProtocolVersionError`: a stateless request named a
/// revision the server does not speak. Its `data.supported` lists the ones
/// it does, so the client can retry with one of them.
pub const UNSUPPORTED_PROTOCOL_VERSION: i64 = -32004;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_revision_is_of_exactly_one_era() {
        for version in SUPPORTED_PROTOCOL_VERSIONS {
            assert_ne!(
                HANDSHAKE_PROTOCOL_VERSIONS.contains(version),
                STATELESS_PROTOCOL_VERSIONS.contains(version),
                "{version}"
            );
        }
        assert_eq!(
            SUPPORTED_PROTOCOL_VERSIONS.len(),
            HANDSHAKE_PROTOCOL_VERSIONS.len() + STATELESS_PROTOCOL_VERSIONS.len()
        );
        // Newest first: ISO dates sort as text.
        assert!(SUPPORTED_PROTOCOL_VERSIONS.is_sorted_by(|a, b| a > b));
    }
}
