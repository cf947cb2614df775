//! `relay`'s command line.

use std::path::PathBuf;
use std::time::Duration;

use crate::cli::{self, ArgWalker, ChildCommand, UsageError, parse_seconds};
use crate::rt::RuntimeChoice;

/// The help text.
pub const USAGE: &str = "\
Usage: relay [OPTIONS] [--] CMD [ARGS...]

Runs CMD and relays messages: each line from stdin goes to CMD's stdin,
each line CMD writes goes to stdout, unchanged, in order. When stdin
closes, or relay gets SIGTERM, SIGINT or SIGHUP, CMD is shut down the MCP
way (close its stdin, then SIGTERM, then SIGKILL; a second signal kills it
at once); relay exits with CMD's exit code (128 + N if signal N killed it)
and writes how CMD ended to stderr and to the log. Blank lines are not
messages and are not relayed. Options end where CMD begins.

Options:
  --log FILE       append every message, both ways, CMD's stderr lines and
                   its exit to FILE as NDJSON:
                   {\"t\":..., \"ts\":..., \"dir\":\"to_child\"|..., \"msg\":...}
                   a message to CMD is logged before CMD gets it
  --max-message-size BYTES
                   longest message relayed, either way (default 64 MiB;
                   KiB, MiB and GiB suffixes work). Longer lines are
                   dropped, said on stderr and logged. The default lets a
                   25 MB tool result through (a screenshot or a file read,
                   inflated by base64) with room to spare, while memory
                   stays bounded: about this much per direction at worst.
                   A line from stdin over 1 MiB goes to CMD as it comes
                   (not with --log or --restart, which need it whole): if
                   it then proves too long, or holds a carriage return,
                   CMD gets its start as a line of its own, and the rest
                   is dropped as a longer line is
  --stdin-grace SECS
                   how long CMD may take to exit once its stdin is closed
                   before SIGTERM (default 1)
  --term-grace SECS
                   how long after SIGTERM before SIGKILL (default 0.5)
                   Hosts give their server 2 s after closing its stdin and
                   2 s after SIGTERM; relay's steps together (1.5 s) fit in
                   either window, so CMD is gone before the host escalates
                   to the next step against relay
  --restart        keep the host's session when CMD ends on its own:
                   start it again (with a growing pause, at most 5 times
                   in a row), replay the host's initialize and
                   notifications/initialized to it (the host does not see
                   a second answer), and answer the host's requests that
                   CMD never answered with JSON-RPC errors saying why;
                   lines go to CMD whole, so a restart never cuts one
  --stdout-noise pass|drop|log
                   what to do with a line CMD writes to stdout that is not
                   a JSON message (a banner, a log line), which would break
                   the host's parser: log it with CMD's stderr lines, marked
                   `(stdout)`, and keep it from the host (log, the default);
                   relay it like a message (pass); drop it (drop). Each kind
                   is named once on stderr
  --quiet          do not copy CMD's stderr lines to stderr
  --runtime NAME   tokio (default), smol or async-std
  -h, --help       print this help

Example:
  relay --log /tmp/mcp.ndjson npx -y @modelcontextprotocol/server-everything
";

/// Longest message relayed by default: 64 MiB. A 25 MB tool result (a
/// screenshot or a file, base64 adding a third) fits with room to spare,
/// and each direction still buffers at most about this much.
pub const DEFAULT_MAX_MESSAGE_SIZE: usize = 64 * 1024 * 1024;

/// From closing the child's stdin to SIGTERM, by default: half the 2 s
/// hosts allow, so that with [`DEFAULT_TERM_GRACE`] the child is gone
/// before a host that closed relay's stdin sends its own SIGTERM, and
/// before a host that sent SIGTERM first sends SIGKILL.
pub const DEFAULT_STDIN_GRACE: Duration = Duration::from_secs(1);

/// From SIGTERM to SIGKILL, by default; see [`DEFAULT_STDIN_GRACE`].
pub const DEFAULT_TERM_GRACE: Duration = Duration::from_millis(500);

/// The name the program's messages start with, as the example; the
/// `childwire` command sets its own (`childwire relay`).
pub const NAME: &str = "relay";

/// What relay does with a line the child writes to stdout that is not a
/// JSON message (`--stdout-noise`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum StdoutNoise {
    /// Relayed to the host like a message.
    Pass,
    /// Dropped (counted in the report).
    Drop,
    /// Kept from the host, logged with the child's stderr lines.
    #[default]
    Log,
}

/// What the user asked for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RelayOptions {
    /// The child to run.
    pub command: ChildCommand,
    /// Where to log every message.
    pub log: Option<PathBuf>,
    /// Keep the child's stderr lines off our stderr.
    pub quiet: bool,
    /// Longest message relayed, either way.
    pub max_message_size: usize,
    /// From closing the child's stdin to SIGTERM.
    pub stdin_grace: Duration,
    /// From SIGTERM to SIGKILL.
    pub term_grace: Duration,
    /// The async runtime to run on.
    pub runtime: RuntimeChoice,
    /// What to do with a stdout line of the child's that is not a message.
    pub stdout_noise: StdoutNoise,
    /// Restart the child when it ends on its own, keeping the host's
    /// session: its `initialize` is replayed, its unanswered requests get
    /// errors.
    pub restart: bool,
    /// The name its messages start with ([`NAME`] unless set).
    pub name: &'static str,
}

/// The outcome of parsing the command line; `Help` prints [`USAGE`].
pub type Parsed = cli::Parsed<RelayOptions>;

/// Parses the arguments (without the program name).
pub fn parse(args: impl IntoIterator<Item = std::ffi::OsString>) -> Result<Parsed, UsageError> {
    let mut args = ArgWalker::new(args);
    let (mut log, mut quiet, mut runtime) = (None, false, RuntimeChoice::default());
    let mut restart = false;
    let mut stdout_noise = StdoutNoise::default();
    let mut max_message_size = DEFAULT_MAX_MESSAGE_SIZE;
    let (mut stdin_grace, mut term_grace) = (DEFAULT_STDIN_GRACE, DEFAULT_TERM_GRACE);
    while let Some(option) = args.next_option()? {
        match option.as_str() {
            "-h" | "--help" => return Ok(Parsed::Help),
            "--log" => log = Some(PathBuf::from(args.os_value(&option)?)),
            "--max-message-size" => max_message_size = parse_size(&option, &args.value(&option)?)?,
            "--stdin-grace" => stdin_grace = parse_seconds(&option, &args.value(&option)?)?,
            "--term-grace" => term_grace = parse_seconds(&option, &args.value(&option)?)?,
            "--quiet" | "-q" => quiet = true,
            "--restart" => restart = true,
            "--stdout-noise" => {
                stdout_noise = match args.value(&option)?.as_str() {
                    "pass" => StdoutNoise::Pass,
                    "drop" => StdoutNoise::Drop,
                    "log" => StdoutNoise::Log,
                    other => {
                        return Err(UsageError(format!(
                            "--stdout-noise expects pass, drop or log, got `{other}`"
                        )));
                    }
                }
            }
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
        max_message_size,
        stdin_grace,
        term_grace,
        runtime,
        restart,
        stdout_noise,
        name: NAME,
    }))
}

/// Parses a size in bytes: `1000`, `512KiB`, `64MiB`, `1GiB`.
pub(crate) fn parse_size(name: &str, text: &str) -> Result<usize, UsageError> {
    let (digits, unit) = text
        .find(|c: char| !c.is_ascii_digit())
        .map_or((text, ""), |at| text.split_at(at));
    let scale: usize = match unit.trim() {
        "" | "B" => 1,
        "KiB" => 1 << 10,
        "MiB" => 1 << 20,
        "GiB" => 1 << 30,
        _ => 0,
    };
    digits
        .parse::<usize>()
        .ok()
        .and_then(|n| n.checked_mul(scale))
        .filter(|&bytes| bytes > 0)
        .ok_or_else(|| {
            UsageError(format!(
                "{name} expects a positive number of bytes (KiB, MiB, GiB allowed), got `{text}`"
            ))
        })
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
    fn sizes_take_binary_suffixes_and_refuse_nonsense() {
        assert_eq!(parse_size("--m", "1000").unwrap(), 1000);
        assert_eq!(parse_size("--m", "64MiB").unwrap(), 64 << 20);
        assert_eq!(parse_size("--m", "2 KiB").unwrap(), 2048);
        for bad in ["0", "", "-1", "1MB", "x", "99999999999999999999GiB"] {
            assert!(parse_size("--m", bad).is_err(), "{bad}");
        }
        let Parsed::Run(options) = parse_strs(&["cat"]).unwrap() else {
            panic!("expected options")
        };
        assert_eq!(options.max_message_size, DEFAULT_MAX_MESSAGE_SIZE);
        assert!(DEFAULT_STDIN_GRACE + DEFAULT_TERM_GRACE < Duration::from_secs(2));
    }

    #[test]
    fn a_command_is_required() {
        let err = parse_strs(&["--quiet"]).unwrap_err();
        assert!(err.0.contains("CMD"), "{err}");
    }
}
