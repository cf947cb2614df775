//! An MCP client over stdio, built on childwire.
//!
//! ```text
//! cargo run --example mcp_client                       # the bundled server
//! cargo run --example mcp_client -- npx -y @modelcontextprotocol/server-everything
//! cargo run --example mcp_client -- --call get_current_time \
//!     --args '{"timezone":"UTC"}' uvx mcp-server-time
//! ```
//!
//! Performs the handshake, lists the tools, calls one, shuts the server
//! down the MCP way and prints what it saw and the exit report. The program
//! is `childwire_examples::mcp_client`; `--help` lists the options.

use std::process::ExitCode;

use childwire_examples::cli::run_main;
use childwire_examples::mcp_client::{Client, USAGE, parse};

fn main() -> ExitCode {
    run_main("mcp_client", USAGE, parse, |options| {
        (options.runtime, Client(options))
    })
}
