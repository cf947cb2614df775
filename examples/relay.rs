//! A transparent stdio proxy, built on childwire.
//!
//! ```text
//! cargo run --example relay -- --log /tmp/mcp.ndjson npx -y @modelcontextprotocol/server-everything
//! ```
//!
//! Lines from stdin go to the child, the child's messages go to stdout,
//! byte for byte; `--log FILE` records both directions as NDJSON. Exits
//! with the child's exit code and prints how it ended to stderr. The
//! program is `childwire_examples::relay`; `--help` lists the options.

use std::io::Write;
use std::process::ExitCode;

use childwire_examples::relay::{Parsed, Relay, USAGE, parse};
use childwire_examples::rt::run_on;

fn main() -> ExitCode {
    let options = match parse(std::env::args_os().skip(1)) {
        Ok(Parsed::Run(options)) => options,
        Ok(Parsed::Help) => {
            let _ = std::io::stdout().write_all(USAGE.as_bytes());
            return ExitCode::SUCCESS;
        }
        Err(err) => {
            eprintln!("relay: {err} (see --help)");
            return ExitCode::from(2);
        }
    };
    match run_on(options.runtime, Relay(options)) {
        Ok(code) => ExitCode::from(code),
        Err(err) => {
            eprintln!("relay: {err}");
            ExitCode::FAILURE
        }
    }
}
