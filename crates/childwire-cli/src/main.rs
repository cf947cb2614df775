//! `childwire`: probe an MCP server over stdio, relay a host to one, or
//! replay a recorded one.
//!
//! ```text
//! childwire probe -- npx -y @modelcontextprotocol/server-everything
//! childwire relay --log /tmp/mcp.ndjson -- uvx mcp-server-time
//! childwire replay /tmp/mcp.ndjson
//! ```
//!
//! The subcommands are the repository's `mcp_client` and `relay` examples,
//! the same code (`childwire_cli::mcp_client`, `childwire_cli::relay`); only
//! their names and the bundled server differ: an installed command has no
//! example server next to it, so `probe` needs the server's command.

use std::ffi::OsString;
use std::io::Write as _;
use std::process::ExitCode;

use childwire_cli::cli::{Parsed, UsageError, run_with_args};
use childwire_cli::mcp_client::{self, Client, ClientOptions};
use childwire_cli::relay::{self, Relay};

/// The top-level help text.
const USAGE: &str = "\
childwire: run an MCP server (or any NDJSON program) over stdio.

Usage: childwire <COMMAND> [OPTIONS] [--] CMD [ARGS...]
       childwire replay FILE

Commands:
  probe    run CMD, perform the MCP handshake, list its tools, resources
           and prompts, call a tool (--call NAME --args JSON), read a
           resource (--read-resource URI) or get a prompt (--get-prompt
           NAME --args JSON), shut it down the MCP way and say how it
           ended; --json prints it all as one JSON document
  relay    sit between a host (this process's stdin and stdout) and CMD,
           relaying every message unchanged; --log FILE records them
  replay   act as the server recorded in FILE (by relay --log): answer
           each request the way it did, ids rewritten, and exit with its
           exit code
  share    run CMD once for every host that connects to --endpoint PATH
  connect  what a host runs instead of CMD: joins the share at PATH,
           starting one when no one listens there

`childwire <COMMAND> --help` lists a command's options. Options come first;
from CMD on (or after `--`), every argument goes to CMD unchanged.

Options:
  -h, --help       print this help
  -V, --version    print the version

Examples:
  childwire probe -- npx -y @modelcontextprotocol/server-everything
  childwire relay --log /tmp/mcp.ndjson -- uvx mcp-server-time
  childwire replay /tmp/mcp.ndjson
";

fn main() -> ExitCode {
    let mut args = std::env::args_os().skip(1);
    let command = args.next();
    let rest: Vec<OsString> = args.collect();
    match command.as_ref().map(|command| command.to_string_lossy()) {
        Some(name) if name == "probe" => run_with_args(
            "childwire probe",
            &probe_usage(),
            rest,
            parse_probe,
            |mut options| {
                options.name = "childwire probe";
                (options.runtime, Client(options))
            },
        ),
        Some(name) if name == "relay" => run_with_args(
            "childwire relay",
            &relay_usage(),
            rest,
            relay::parse,
            |mut options| {
                options.name = "childwire relay";
                (options.runtime, Relay(options))
            },
        ),
        #[cfg(feature = "replay")]
        Some(name) if name == "replay" => childwire_cli::replay::main(rest),
        #[cfg(not(feature = "replay"))]
        Some(name) if name == "replay" => usage_error("replay needs the `replay` feature"),
        #[cfg(feature = "share")]
        Some(name) if name == "share" => childwire_cli::share::share_main(rest),
        #[cfg(feature = "share")]
        Some(name) if name == "connect" => childwire_cli::share::connect_main(rest),
        #[cfg(not(feature = "share"))]
        Some(name) if name == "share" || name == "connect" => {
            usage_error("share and connect need the `share` feature")
        }
        Some(name) if name == "-h" || name == "--help" || name == "help" => {
            // A closed stdout (`--help | head`) is not worth a panic.
            let _ = std::io::stdout().write_all(USAGE.as_bytes());
            ExitCode::SUCCESS
        }
        Some(name) if name == "-V" || name == "--version" => {
            let _ = writeln!(std::io::stdout(), "childwire {}", env!("CARGO_PKG_VERSION"));
            ExitCode::SUCCESS
        }
        Some(other) => usage_error(&format!("unknown command `{other}`")),
        None => usage_error("missing the command: probe, relay, replay, share or connect"),
    }
}

/// Says what is wrong and where the help is, with the usage-error exit code.
fn usage_error(message: &str) -> ExitCode {
    let _ = writeln!(std::io::stderr(), "childwire: {message} (see --help)");
    ExitCode::from(2)
}

/// `mcp_client`'s options, refusing a missing server: the installed command
/// has no bundled server to fall back on.
fn parse_probe(args: Vec<OsString>) -> Result<Parsed<ClientOptions>, UsageError> {
    match mcp_client::parse(args)? {
        Parsed::Run(options) if options.server.is_none() => Err(UsageError(
            "missing the server's command (childwire probe [OPTIONS] -- CMD [ARGS...])".to_owned(),
        )),
        parsed => Ok(parsed),
    }
}

/// `mcp_client`'s help under the command's name, without the bundled
/// server: its paragraph on running without CMD is replaced, and so are its
/// examples (some of them run the bundled server).
fn probe_usage() -> String {
    let usage = mcp_client::USAGE
        .replace("[--] [CMD [ARGS...]]", "[--] CMD [ARGS...]")
        .replace("mcp_client", "childwire probe");
    let usage = usage.split("\nExamples:\n").next().unwrap_or_default();
    let mut text = String::new();
    let mut skipping = false;
    for line in usage.split_inclusive('\n') {
        if line.starts_with("Without CMD") {
            skipping = true;
            text.push_str(
                "Options end where CMD begins, and every argument from CMD on goes to\n\
                 the server unchanged.\n",
            );
        }
        if skipping && line.trim().is_empty() {
            skipping = false;
        }
        if !skipping {
            text.push_str(line);
        }
    }
    text.push_str(
        "\nExamples:\n  \
         childwire probe -- npx -y @modelcontextprotocol/server-everything\n  \
         childwire probe --call get_current_time --args '{\"timezone\":\"UTC\"}' -- uvx mcp-server-time\n  \
         childwire probe --json --get-prompt args-prompt --args '{\"city\":\"Paris\"}' -- npx -y @modelcontextprotocol/server-everything\n",
    );
    text
}

/// `relay`'s help under the command's name.
fn relay_usage() -> String {
    relay::USAGE
        .replace("Usage: relay ", "Usage: childwire relay ")
        .replace("\n  relay ", "\n  childwire relay ")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn probe_help_names_the_command_and_no_bundled_server() {
        let usage = probe_usage();
        assert!(
            usage.starts_with("Usage: childwire probe [OPTIONS] [--] CMD [ARGS...]\n"),
            "{usage}"
        );
        for stale in ["mcp_client", "bundled", "Without CMD"] {
            assert!(!usage.contains(stale), "`{stale}` in:\n{usage}");
        }
        // The options are all still there.
        assert!(usage.contains("--call NAME") && usage.contains("-h, --help"));
    }

    #[test]
    fn relay_help_names_the_command() {
        let usage = relay_usage();
        assert!(usage.starts_with("Usage: childwire relay "), "{usage}");
        assert!(usage.contains("\n  childwire relay --log"), "{usage}");
    }

    #[test]
    fn probe_without_a_server_is_a_usage_error() {
        let error = parse_probe(vec!["--timeout".into(), "5".into()]).unwrap_err();
        assert!(error.0.contains("missing the server's command"), "{error}");
        assert!(matches!(
            parse_probe(vec!["--".into(), "cat".into()]),
            Ok(Parsed::Run(_))
        ));
    }
}
