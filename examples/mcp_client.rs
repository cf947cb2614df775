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

use std::ffi::OsString;
use std::process::ExitCode;

use childwire_examples::cli::run_with_args;
use childwire_examples::mcp_client::{BundledServer, Client, USAGE, parse};

/// The argument that makes this program the bundled server, for the client
/// to run itself as its server: one build gives both.
const SERVE: &str = "serve-bundled";

fn main() -> ExitCode {
    let mut args: Vec<OsString> = std::env::args_os().skip(1).collect();
    if args.first().is_some_and(|arg| arg == SERVE) {
        args.remove(0);
        return childwire_examples::mcp_server::main_with(args);
    }
    run_with_args("mcp_client", USAGE, args, parse, |mut options| {
        options.bundled = std::env::current_exe()
            .ok()
            .map(|exe| BundledServer::new(exe, [SERVE]));
        (options.runtime, Client(options))
    })
}
