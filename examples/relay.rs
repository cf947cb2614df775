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

use std::process::ExitCode;

use childwire_examples::cli::run_main;
use childwire_examples::relay::{Relay, USAGE, parse};

fn main() -> ExitCode {
    run_main("relay", USAGE, parse, |options| {
        (options.runtime, Relay(options))
    })
}
