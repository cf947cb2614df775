//! `childwire share` and `childwire connect`: one server process for many
//! host sessions.
//!
//! `childwire share --endpoint PATH -- SERVER ARGS...` runs SERVER once and
//! shares it (with `childwire-share`) among the clients that connect to the
//! Unix socket at PATH. PATH's directory is the access control: it is
//! created `0700`, and one that other users can enter, or that is not the
//! user's own, is refused; on Linux each connecting peer's uid is checked
//! too (`SO_PEERCRED`). When the last client leaves (after `--linger`), the
//! server is shut down the MCP way (stdin closed, then signals), the socket
//! is removed and `share` exits. Its log (one line per event) goes to
//! stderr.
//!
//! `childwire connect --endpoint PATH -- SERVER ARGS...` is what a host's
//! configuration runs instead of SERVER: it relays its stdin and stdout to
//! the share at PATH, starting `childwire share` with the same server
//! (detached, logging to `PATH.log`) when no one listens there. Two
//! connects starting at once start at most one share: a share holds a lock
//! on `PATH.lock` for its whole life, and one that cannot take it leaves.

use std::ffi::OsString;
use std::process::ExitCode;
use std::time::Duration;

use crate::cli::{ArgWalker, ChildCommand, Parsed, UsageError, parse_seconds};

#[cfg(unix)]
mod endpoint;
#[cfg(unix)]
mod run;

/// `childwire share --help`.
pub const SHARE_USAGE: &str = "\
Usage: childwire share --endpoint PATH [OPTIONS] [--] CMD [ARGS...]

Runs CMD (an MCP server over stdio) once and shares it among the clients
that connect to the Unix socket PATH (see `childwire connect`): each client's
request ids are rewritten and its answers routed back, the server is
initialized once, and when the last client leaves the server is shut down
the MCP way and share exits.

PATH's directory is created private (0700); a directory other users can
enter, or that is not yours, is refused. On Linux every connecting process
must run as you.

Options:
  --endpoint PATH   the socket to listen on (required)
  --linger SECS     keep the server this long after the last client leaves,
                    for one that comes back (default: stop at once)
  -h, --help        print this help
";

/// `childwire connect --help`.
pub const CONNECT_USAGE: &str = "\
Usage: childwire connect --endpoint PATH [--] CMD [ARGS...]

What a host's configuration runs instead of CMD: relays this process's
stdin and stdout to the share at PATH, starting `childwire share --endpoint
PATH -- CMD ARGS...` in the background (its log in PATH.log) when no one
listens there. Five host sessions configured this way run one CMD.

Options:
  --endpoint PATH   the share's socket (required)
  -h, --help        print this help

Example (an MCP host's server entry):
  \"command\": \"childwire\",
  \"args\": [\"connect\", \"--endpoint\", \"/run/user/1000/mcp/time.sock\",
           \"--\", \"uvx\", \"mcp-server-time\"]
";

/// What `share` and `connect` are given.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ShareOptions {
    /// The socket.
    pub endpoint: OsString,
    /// How long the server outlives its last client.
    pub linger: Duration,
    /// The server.
    pub server: ChildCommand,
}

/// Parses `share`'s (`linger`: true) or `connect`'s arguments.
pub fn parse(args: Vec<OsString>, linger: bool) -> Result<Parsed<ShareOptions>, UsageError> {
    let mut walker = ArgWalker::new(args);
    let mut endpoint = None;
    let mut linger_for = Duration::ZERO;
    while let Some(option) = walker.next_option()? {
        match option.as_str() {
            "-h" | "--help" => return Ok(Parsed::Help),
            "--endpoint" => endpoint = Some(walker.os_value("--endpoint")?),
            "--linger" if linger => {
                linger_for = parse_seconds("--linger", &walker.value("--linger")?)?;
            }
            other => return Err(UsageError(format!("unknown option `{other}`"))),
        }
    }
    let endpoint = endpoint.ok_or_else(|| UsageError("missing --endpoint PATH".to_owned()))?;
    let server = walker.into_command().ok_or_else(|| {
        UsageError("missing the server's command (… --endpoint PATH -- CMD [ARGS...])".to_owned())
    })?;
    Ok(Parsed::Run(ShareOptions {
        endpoint,
        linger: linger_for,
        server,
    }))
}

/// `childwire share ARGS`.
pub fn share_main(args: Vec<OsString>) -> ExitCode {
    main("childwire share", SHARE_USAGE, args, true)
}

/// `childwire connect ARGS`.
pub fn connect_main(args: Vec<OsString>) -> ExitCode {
    main("childwire connect", CONNECT_USAGE, args, false)
}

fn main(name: &str, usage: &str, args: Vec<OsString>, share: bool) -> ExitCode {
    let options = match parse(args, share) {
        Ok(Parsed::Run(options)) => options,
        Ok(Parsed::Help) => {
            let _ = std::io::Write::write_all(&mut std::io::stdout(), usage.as_bytes());
            return ExitCode::SUCCESS;
        }
        Err(err) => {
            note!("{name}: {err} (see --help)");
            return ExitCode::from(2);
        }
    };
    #[cfg(unix)]
    {
        let result = if share {
            run::share(&options)
        } else {
            run::connect(&options)
        };
        match result {
            Ok(code) => ExitCode::from(code),
            Err(err) => {
                note!("{name}: {err}");
                ExitCode::FAILURE
            }
        }
    }
    #[cfg(not(unix))]
    {
        let _ = options;
        note!("{name}: needs Unix sockets; this platform is not supported yet");
        ExitCode::FAILURE
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(list: &[&str]) -> Vec<OsString> {
        list.iter().map(OsString::from).collect()
    }

    #[test]
    fn options_then_the_server_unchanged() {
        let Ok(Parsed::Run(options)) = parse(
            args(&[
                "--endpoint",
                "/tmp/x/s",
                "--linger",
                "2",
                "--",
                "srv",
                "--linger",
                "9",
            ]),
            true,
        ) else {
            panic!("parsed");
        };
        assert_eq!(options.endpoint, "/tmp/x/s");
        assert_eq!(options.linger, Duration::from_secs(2));
        assert_eq!(options.server.program, "srv");
        assert_eq!(options.server.args, args(&["--linger", "9"]));
    }

    #[test]
    fn what_is_missing_is_named() {
        let err = parse(args(&["--", "srv"]), true).unwrap_err();
        assert!(err.0.contains("--endpoint"), "{err}");
        let err = parse(args(&["--endpoint", "p"]), false).unwrap_err();
        assert!(err.0.contains("server's command"), "{err}");
        // connect has no linger: it is the share's.
        assert!(parse(args(&["--endpoint", "p", "--linger", "1", "srv"]), false).is_err());
    }
}
