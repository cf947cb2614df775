//! The SDK examples (`rmcp_client`, `turbomcp_client`): their command line
//! (which server to run, which tool to call) and their session, written once
//! over [`SdkClient`]; each example implements it with its MCP SDK, with
//! childwire as the SDK's transport.

use std::ffi::OsString;
use std::future::Future;
use std::process::ExitCode;

use childwire::{Command, ExitHandle};
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

/// One MCP SDK's client over childwire, as the SDK examples drive it: what
/// each SDK does its own way (building the client over childwire's
/// transport, the calls in its API). The session and its output are
/// [`run`]'s, the same for every SDK.
pub trait SdkClient: Sized {
    /// Makes the client for the server `command` runs (spawning it now or at
    /// the handshake), with the transport's exit handle.
    fn connect(command: Command) -> Result<(Self, ExitHandle), SdkError>;

    /// The MCP handshake; what the server said about itself, if anything.
    fn initialize(&mut self) -> impl Future<Output = Result<Option<ServerInfo>, SdkError>>;

    /// `tools/list`, every page.
    fn list_tools(&self) -> impl Future<Output = Result<Vec<Tool>, SdkError>>;

    /// `tools/call`.
    fn call_tool(
        &self,
        name: String,
        args: Map<String, Value>,
    ) -> impl Future<Output = Result<ToolResult, SdkError>>;

    /// Ends the session: the SDK closes the transport, which is childwire's
    /// graceful shutdown.
    fn shutdown(self) -> impl Future<Output = Result<(), SdkError>>;
}

/// Whatever error an SDK gives; [`run`] says which step it failed.
pub type SdkError = Box<dyn std::error::Error + Send + Sync>;

/// `err` in words, after what failed.
fn failed(step: &str) -> impl FnOnce(SdkError) -> String + '_ {
    move |err| format!("{step} failed: {err}")
}

/// The server's side of the handshake.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ServerInfo {
    /// The protocol revision agreed on.
    pub protocol: String,
    /// The server's name and version.
    pub server: String,
}

/// A tool the server offers.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Tool {
    /// Its name.
    pub name: String,
    /// Its description (empty when it has none).
    pub description: String,
}

/// What a tool call returned.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ToolResult {
    /// Each content item as printed: a text item's text, anything else as
    /// JSON.
    pub content: Vec<String>,
    /// The tool reported an error.
    pub is_error: bool,
}

impl ToolResult {
    /// A result of `content` (each item as printed), and `isError` as MCP
    /// has it: absent means `false`.
    pub fn new(content: impl IntoIterator<Item = String>, is_error: Option<bool>) -> Self {
        Self {
            content: content.into_iter().collect(),
            is_error: is_error == Some(true),
        }
    }
}

/// An SDK example's session: connects, performs the handshake, lists the
/// tools, makes the call the plan asks for, shuts the server down and prints
/// its exit report. The first failure is the error; the report is printed
/// whatever happened once the client existed.
pub async fn run<C: SdkClient>(plan: Plan) -> Result<(), String> {
    let program = plan.command.get_program().to_string_lossy().into_owned();
    let (mut client, exit) = C::connect(plan.command).map_err(|err| err.to_string())?;
    println!("-> initialize ({program})");
    let result = session(&mut client, plan.call).await;
    let closed = client.shutdown().await.map_err(failed("shutting down"));
    match exit.wait().await {
        Some(report) => println!("server {report}"),
        None => println!("server: its end is unknown"),
    }
    result?;
    closed
}

/// The MCP calls of [`run`], and their output.
async fn session<C: SdkClient>(
    client: &mut C,
    call: Option<(String, Map<String, Value>)>,
) -> Result<(), String> {
    if let Some(info) = client.initialize().await.map_err(failed("the handshake"))? {
        println!(
            "<- initialize: protocol {}; server: {}",
            info.protocol, info.server
        );
    }
    let tools = client.list_tools().await.map_err(failed("tools/list"))?;
    println!("<- {} tools", tools.len());
    for tool in &tools {
        println!("   {}: {}", tool.name, tool.description);
    }
    let Some((name, args)) = call else {
        return Ok(());
    };
    println!("-> tools/call {name} {}", Value::Object(args.clone()));
    let result = client
        .call_tool(name, args)
        .await
        .map_err(failed("tools/call"))?;
    for content in &result.content {
        println!("<- result: {content}");
    }
    if result.is_error {
        return Err("the tool reported an error".into());
    }
    Ok(())
}

/// The `main` of the SDK example `name`, using `sdk` through `C`: parses the
/// arguments, resolves the plan and [`run`]s it on a Tokio runtime; exit
/// code 2 for a usage error, 1 when anything fails.
pub fn sdk_main<C: SdkClient>(name: &str, sdk: &str) -> ExitCode {
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
    match runtime.block_on(run::<C>(plan)) {
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
