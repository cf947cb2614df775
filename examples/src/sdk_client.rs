//! The command line of the SDK examples (`rmcp_client`, `turbomcp_client`):
//! which server to run and which tool to call. They drive the server through
//! an MCP SDK with childwire as its transport.

use std::ffi::OsString;

use childwire::Command;
use serde_json::{Map, Value};

use crate::cli::{ArgWalker, Parsed, UsageError};
use crate::mcp_client::locate::bundled_server;

/// The usage of an SDK example named `name` using `sdk`.
pub fn usage(name: &str, sdk: &str) -> String {
    format!(
        "\
{name}: an MCP client built on {sdk}, with childwire as its stdio transport.

Usage: {name} [OPTIONS] [--] [COMMAND [ARGS...]]

Runs COMMAND (the bundled example server when none is given), performs the
handshake through {sdk}, lists the tools, calls one, shuts the server down
the MCP way (close stdin, SIGTERM, SIGKILL) and prints its exit report.

Options:
  --call NAME    the tool to call (default with the bundled server: add)
  --args JSON    its arguments, a JSON object (default: {{\"a\":2,\"b\":40}}
                 for the bundled server's add, {{}} otherwise)
  -h, --help     this text
"
    )
}

/// What an SDK example was asked to do.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct SdkOptions {
    /// `--call`.
    pub call: Option<String>,
    /// `--args`.
    pub args: Option<String>,
    /// The server's command line; `None` for the bundled server.
    pub command: Option<(OsString, Vec<OsString>)>,
}

/// Parses an SDK example's arguments (without the program name).
pub fn parse(args: Vec<OsString>) -> Result<Parsed<SdkOptions>, UsageError> {
    let mut walker = ArgWalker::new(args);
    let mut options = SdkOptions::default();
    while let Some(option) = walker.next_option()? {
        match option.as_str() {
            "-h" | "--help" => return Ok(Parsed::Help),
            "--call" => options.call = Some(walker.value("--call")?),
            "--args" => options.args = Some(walker.value("--args")?),
            other => return Err(UsageError(format!("unknown option `{other}`"))),
        }
    }
    options.command = walker
        .into_command()
        .map(|command| (command.program, command.args));
    Ok(Parsed::Run(options))
}

/// The server to run and the tool call to make.
#[derive(Debug)]
pub struct Plan {
    /// The server's command.
    pub command: Command,
    /// The tool to call and its arguments, if any.
    pub call: Option<(String, Map<String, Value>)>,
}

/// Resolves the options: finds (or builds) the bundled server when no
/// command was given, and parses `--args`.
pub fn plan(options: SdkOptions) -> Result<Plan, String> {
    let bundled = options.command.is_none();
    let command = match options.command {
        Some((program, args)) => {
            let mut command = Command::new(program);
            command.args(args);
            command
        }
        None => {
            let server = bundled_server(|| {
                eprintln!("building the bundled example server (once)...");
            })
            .map_err(|err| err.to_string())?;
            Command::new(server)
        }
    };
    let name = match options.call {
        Some(name) => Some(name),
        None if bundled => Some("add".to_owned()),
        None => None,
    };
    let call = match name {
        None => None,
        Some(name) => {
            let args = match options.args {
                Some(json) => serde_json::from_str::<Map<String, Value>>(&json)
                    .map_err(|err| format!("--args must be a JSON object: {err}"))?,
                None if bundled && name == "add" => {
                    let mut args = Map::new();
                    args.insert("a".into(), 2.into());
                    args.insert("b".into(), 40.into());
                    args
                }
                None => Map::new(),
            };
            Some((name, args))
        }
    };
    Ok(Plan { command, call })
}

/// The `main` of an SDK example: parses the arguments, resolves the plan
/// and runs `program` on a Tokio runtime; exit code 2 for a usage error, 1
/// when the program (or anything before it) fails.
pub fn sdk_main<F>(name: &str, sdk: &str, program: impl FnOnce(Plan) -> F) -> std::process::ExitCode
where
    F: std::future::Future<Output = Result<(), String>>,
{
    use std::process::ExitCode;
    let options = match parse(std::env::args_os().skip(1).collect()) {
        Ok(Parsed::Run(options)) => options,
        Ok(Parsed::Help) => {
            print!("{}", usage(name, sdk));
            return ExitCode::SUCCESS;
        }
        Err(err) => {
            eprintln!("{name}: {err} (see --help)");
            return ExitCode::from(2);
        }
    };
    let plan = match plan(options) {
        Ok(plan) => plan,
        Err(err) => {
            eprintln!("{name}: {err}");
            return ExitCode::FAILURE;
        }
    };
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(runtime) => runtime,
        Err(err) => {
            eprintln!("{name}: could not start Tokio: {err}");
            return ExitCode::FAILURE;
        }
    };
    match runtime.block_on(program(plan)) {
        Ok(()) => ExitCode::SUCCESS,
        Err(err) => {
            eprintln!("{name}: {err}");
            ExitCode::FAILURE
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(list: &[&str]) -> Vec<OsString> {
        list.iter().map(OsString::from).collect()
    }

    #[test]
    fn options_come_before_the_command_which_is_passed_on_unchanged() {
        let Ok(Parsed::Run(options)) = parse(args(&[
            "--call",
            "echo",
            "--args={\"text\":\"hi\"}",
            "npx",
            "-y",
            "server",
            "--call",
        ])) else {
            panic!("parsed")
        };
        assert_eq!(options.call.as_deref(), Some("echo"));
        assert_eq!(options.args.as_deref(), Some("{\"text\":\"hi\"}"));
        let (program, rest) = options.command.unwrap();
        assert_eq!(program, "npx");
        assert_eq!(rest, args(&["-y", "server", "--call"]));
    }

    #[test]
    fn a_command_without_call_calls_nothing() {
        let plan = plan(SdkOptions {
            command: Some(("cat".into(), Vec::new())),
            ..SdkOptions::default()
        })
        .unwrap();
        assert!(plan.call.is_none());
    }

    #[test]
    fn args_must_be_an_object() {
        let err = plan(SdkOptions {
            call: Some("x".into()),
            args: Some("[1]".into()),
            command: Some(("cat".into(), Vec::new())),
        })
        .unwrap_err();
        assert!(err.contains("JSON object"), "{err}");
    }
}
