//! Support code for childwire's runnable examples.
//!
//! The examples themselves are thin `main` functions; the logic they share
//! lives here so it can be unit-tested without spawning processes:
//!
//! - [`protocol`]: MCP protocol revisions and JSON-RPC error codes, shared by
//!   the bundled server and the client example.
//! - [`mcp_server`]: the bundled example MCP server (`cargo run --example
//!   example_server`), a line-in/line-out state machine plus a stdio loop.

pub mod mcp_server;
pub mod protocol;
