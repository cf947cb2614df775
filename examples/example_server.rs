//! The bundled example MCP server, over stdio.
//!
//! ```text
//! cargo run --example example_server
//! cargo run --example example_server -- --legacy   # no server/discover
//! ```
//!
//! Reads JSON-RPC messages from stdin, one per line, and answers on stdout,
//! one per line; logs go to stderr. Exits with code 0 when stdin closes,
//! which is how an MCP client shuts a stdio server down. The protocol logic
//! is `childwire_examples::mcp_server`, tested there.

use std::process::ExitCode;

fn main() -> ExitCode {
    childwire_examples::mcp_server::main_with(std::env::args_os().skip(1))
}
