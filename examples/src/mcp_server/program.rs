//! The bundled server as a program: its arguments, a Tokio runtime, and the
//! stdio loop.

use std::io::{self, Write};
use std::process::ExitCode;

use childwire::ChannelConfig;

use super::{McpServer, USAGE, parse_args, serve};
use crate::cli::Parsed;

/// The bundled server's whole program, over its arguments (without the
/// program's name): what `cargo run --example example_server` runs, and
/// `mcp_client serve-bundled`.
pub fn main_with(args: impl IntoIterator<Item = std::ffi::OsString>) -> ExitCode {
    let versions = match parse_args(args) {
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
