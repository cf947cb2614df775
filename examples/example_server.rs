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

use std::io::{self, Write};
use std::process::ExitCode;

use childwire::ChannelConfig;
use childwire_examples::cli::Parsed;
use childwire_examples::mcp_server::{McpServer, USAGE, parse_args, serve};

fn main() -> ExitCode {
    let versions = match parse_args(std::env::args_os().skip(1)) {
        Ok(Parsed::Run(versions)) => versions,
        Ok(Parsed::Help) => {
            let _ = io::stdout().write_all(USAGE.as_bytes());
            return ExitCode::SUCCESS;
        }
        Err(err) => {
            log(format_args!("{err} (see --help)"));
            return ExitCode::from(2);
        }
    };
    let mut server = McpServer::with_logger(|line| log(format_args!("{line}"))).speaking(&versions);
    log(format_args!(
        "ready, reading JSON-RPC from stdin (protocols {})",
        versions.join(", ")
    ));
    // The server side of stdio on childwire's own transport: bounded
    // framing both ways, one thread.
    let runtime = match tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    {
        Ok(runtime) => runtime,
        Err(error) => {
            log(format_args!("cannot start Tokio: {error}"));
            return ExitCode::FAILURE;
        }
    };
    let config = ChannelConfig::default();
    let served = runtime.block_on(async {
        let peer = childwire::tokio::stdio(&config).map_err(|err| err.to_string())?;
        serve(&mut server, peer, config.max_message_size)
            .await
            .map_err(|err| err.to_string())
    });
    match served {
        Ok(()) => {
            log(format_args!("stdin closed, exiting"));
            ExitCode::SUCCESS
        }
        Err(error) => {
            log(format_args!("stdio failed, exiting: {error}"));
            ExitCode::FAILURE
        }
    }
}

/// Writes one line to stderr. Unlike `eprintln!`, a closed stderr is not a
/// panic: the server keeps answering on stdout.
fn log(line: std::fmt::Arguments<'_>) {
    let _ = writeln!(io::stderr().lock(), "example_server: {line}");
}
