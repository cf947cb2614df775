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

use std::io::Write;
use std::process::ExitCode;

use childwire_examples::mcp_client::{Client, Parsed, USAGE, parse};
use childwire_examples::rt::run_on;

fn main() -> ExitCode {
    let options = match parse(std::env::args_os().skip(1)) {
        Ok(Parsed::Run(options)) => options,
        Ok(Parsed::Help) => {
            let _ = std::io::stdout().write_all(USAGE.as_bytes());
            return ExitCode::SUCCESS;
        }
        Err(err) => {
            eprintln!("mcp_client: {err} (see --help)");
            return ExitCode::from(2);
        }
    };
    match run_on(options.runtime, Client(options)) {
        Ok(code) => ExitCode::from(code),
        Err(err) => {
            eprintln!("mcp_client: {err}");
            ExitCode::FAILURE
        }
    }
}
