//! `relay`'s command line.

use std::path::PathBuf;

use crate::cli::{self, ArgWalker, ChildCommand, UsageError};
use crate::rt::RuntimeChoice;

/// The help text.
pub const USAGE: &str = "\
Usage: relay [OPTIONS] [--] CMD [ARGS...]

Runs CMD and relays messages: each line from stdin goes to CMD's stdin,
each line CMD writes goes to stdout, unchanged, in order. When stdin
closes, CMD is shut down the MCP way (close its stdin, then SIGTERM, then
SIGKILL); relay exits with CMD's exit code (128 + N if signal N killed it)
and writes how CMD ended to stderr. Blank lines are not messages and are
not relayed. Options end where CMD begins.

Options:
  --log FILE       append every message, both ways, to FILE as NDJSON:
                   {\"ts\":..., \"dir\":\"to_child\"|\"from_child\", \"msg\":...}
  --quiet          do not copy CMD's stderr lines to stderr
  --runtime NAME   tokio (default), smol or async-std
  -h, --help       print this help

Example:
  relay --log /tmp/mcp.ndjson npx -y @modelcontextprotocol/server-everything
";

/// What the user asked for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RelayOptions {
    /// The child to run.
    pub command: ChildCommand,
    /// Where to log every message.
    pub log: Option<PathBuf>,
    /// Keep the child's stderr lines off our stderr.
    pub quiet: bool,
    /// The async runtime to run on.
    pub runtime: RuntimeChoice,
}

/// The outcome of parsing the command line; `Help` prints [`USAGE`].
pub type Parsed = cli::Parsed<RelayOptions>;

/// Parses the arguments (without the program name).
pub fn parse(args: impl IntoIterator<Item = std::ffi::OsString>) -> Result<Parsed, UsageError> {
    let mut args = ArgWalker::new(args);
    let (mut log, mut quiet, mut runtime) = (None, false, RuntimeChoice::default());
    while let Some(option) = args.next_option()? {
        match option.as_str() {
            "-h" | "--help" => return Ok(Parsed::Help),
            "--log" => log = Some(PathBuf::from(args.os_value(&option)?)),
            "--quiet" | "-q" => quiet = true,
            "--runtime" => runtime = args.value(&option)?.parse().map_err(UsageError)?,
            other => return Err(UsageError(format!("unknown option `{other}`"))),
        }
    }
    let command = args
        .into_command()
        .ok_or_else(|| UsageError("missing the command to run (CMD)".to_owned()))?;
    Ok(Parsed::Run(RelayOptions {
        command,
        log,
        quiet,
        runtime,
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse_strs(args: &[&str]) -> Result<Parsed, UsageError> {
        parse(args.iter().map(std::ffi::OsString::from))
    }

    #[test]
    fn options_then_the_command_unchanged() {
        let Parsed::Run(options) =
            parse_strs(&["--log", "/tmp/x.ndjson", "--quiet", "cat", "--log", "-"]).unwrap()
        else {
            panic!("expected options")
        };
        assert_eq!(options.log, Some(PathBuf::from("/tmp/x.ndjson")));
        assert!(options.quiet);
        assert_eq!(options.command.program, "cat");
        assert_eq!(options.command.args, ["--log", "-"]);
    }

    #[test]
    fn a_command_is_required() {
        let err = parse_strs(&["--quiet"]).unwrap_err();
        assert!(err.0.contains("CMD"), "{err}");
    }
}
