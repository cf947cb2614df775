//! `mcp_client`'s command line.

use std::ffi::OsString;
use std::time::Duration;

use serde_json::{Map, Value};

use crate::cli::{self, ArgWalker, ChildCommand, UsageError, parse_env, parse_seconds};
use crate::protocol::{
    LATEST_PROTOCOL_VERSION, LATEST_STATELESS_PROTOCOL_VERSION, SUPPORTED_PROTOCOL_VERSIONS,
    is_stateless, supported_protocol_version,
};
use crate::rt::RuntimeChoice;

/// How long to wait for each answer by default: long enough for `npx -y` or
/// `uvx` to download a server on its first run.
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(60);

/// How long to wait for the answer to `server/discover` by default before
/// taking the server for one from before 2026-07-28 (some never answer an
/// unknown request). Never longer than `--timeout`.
pub const DEFAULT_DISCOVER_TIMEOUT: Duration = Duration::from_secs(10);

/// The name the program's messages start with, as the example; the
/// `childwire` command sets its own (`childwire probe`).
pub const NAME: &str = "mcp_client";

/// The help text.
pub const USAGE: &str = "\
Usage: mcp_client [OPTIONS] [--] [CMD [ARGS...]]

Runs an MCP server over stdio, performs the handshake, lists its tools,
resources and prompts, optionally calls a tool, reads a resource or gets a
prompt, shuts it down the way the MCP spec asks, and prints what it saw and
how the server ended.

Without CMD it runs the bundled example server (in the examples, this
very program started again as `mcp_client serve-bundled`) and calls its
`add` tool. With CMD it runs that server: options end where
CMD begins, and every argument from CMD on goes to the server unchanged.

Options:
  --call NAME        call the tool NAME after listing what the server offers
  --read-resource URI
                     read the resource URI (resources/read)
  --get-prompt NAME  get the prompt NAME (prompts/get)
  --args JSON        the arguments of the --call or --get-prompt just before
                     it, a JSON object (default {}); a prompt's values are
                     strings
  --json             print one JSON document instead of the narration:
                     command, runtime, pid, protocol_version, server_info,
                     capabilities, instructions, tools, resources, prompts,
                     calls (each with its result or error), outcome (ok,
                     tool_error, failed or ended_early), error, exit,
                     traffic and timings_ms; null where nothing was had
  --env KEY=VALUE    set a variable for the server (repeatable); the server
                     otherwise sees only HOME, LOGNAME, PATH, SHELL, TERM, USER
  --inherit-env      pass the whole environment instead
  --protocol REV     the MCP revision to ask for (default 2025-11-25):
                     2024-11-05, 2025-03-26, 2025-06-18 or 2025-11-25
                     open with `initialize`; 2026-07-28 is stateless: it
                     opens with `server/discover`, puts the revision in
                     every request's _meta, and falls back to `initialize`
                     when the server gives any other answer (an error such
                     as -32601 or -32602, no answer in time, or an exit)
  --discover-timeout SECS
                     how long to wait for the answer to server/discover
                     before falling back (default 10, at most --timeout)
  --discover-sibling send server/discover to a disposable second server
                     process, so that a server that exits on an unknown
                     request does not take the session with it
  --restart          keep the session going when the server ends on its
                     own: restart it (with a growing pause, at most 5 times
                     in a row), repeat the handshake, list the tools again;
                     after the conversation, watch the server until stdin
                     ends or Ctrl-C (kill it to see a restart)
  --timeout SECS     how long to wait for each answer (default 60)
  --runtime NAME     tokio (default), smol or async-std, as this build has
                     them (cargo features of the same names)
  --show-stderr      print the server's stderr lines as they come
  -h, --help         print this help

Examples:
  mcp_client
  mcp_client -- npx -y @modelcontextprotocol/server-everything
  mcp_client --protocol 2026-07-28
  mcp_client --protocol 2026-07-28 --discover-sibling -- npx -y some-mcp-server
  mcp_client --restart -- npx -y @modelcontextprotocol/server-everything
  mcp_client --call get_current_time --args '{\"timezone\":\"UTC\"}' uvx mcp-server-time
  mcp_client --json --read-resource example://readme --get-prompt greet --args '{\"name\":\"Ada\"}'
";

/// A tool to call, or a prompt to get: a name and its arguments.
#[derive(Debug, Clone, PartialEq)]
pub struct ToolCall {
    /// The tool's (or prompt's) name.
    pub name: String,
    /// Its arguments: a JSON object.
    pub arguments: Value,
}

/// What the user asked for.
#[derive(Debug, Clone, PartialEq)]
pub struct ClientOptions {
    /// The name its messages start with ([`NAME`] unless set).
    pub name: &'static str,
    /// The server to run; `None` for the bundled example server.
    pub server: Option<ChildCommand>,
    /// The tool to call, if any.
    pub call: Option<ToolCall>,
    /// The resource to read, by URI, if any.
    pub read_resource: Option<String>,
    /// The prompt to get, if any.
    pub get_prompt: Option<ToolCall>,
    /// One JSON document on stdout instead of the narration.
    pub json: bool,
    /// Variables set for the server.
    pub env: Vec<(OsString, OsString)>,
    /// Pass the whole environment rather than the minimal one.
    pub inherit_env: bool,
    /// How long to wait for each answer.
    pub timeout: Duration,
    /// The async runtime to run on.
    pub runtime: RuntimeChoice,
    /// Print the server's stderr lines as they come.
    pub show_stderr: bool,
    /// The protocol revision to ask for.
    pub protocol: &'static str,
    /// How long to wait for the answer to `server/discover`.
    pub discover_timeout: Duration,
    /// Probe with `server/discover` on a disposable second process.
    pub discover_sibling: bool,
    /// Restart the server when it ends on its own, re-initialize it, and
    /// watch it until stdin ends or a signal comes.
    pub restart: bool,
    /// How to run the bundled example server when no server is given;
    /// `None`: build `cargo run --example example_server`'s binary and run
    /// that.
    pub bundled: Option<BundledServer>,
}

/// How a program that carries the bundled example server in itself runs it
/// (`mcp_client serve-bundled`): one build gives the client and its server.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BundledServer {
    /// The program.
    pub program: OsString,
    /// Its arguments.
    pub args: Vec<OsString>,
}

impl BundledServer {
    /// `program` with `args`.
    pub fn new(
        program: impl Into<OsString>,
        args: impl IntoIterator<Item = impl Into<OsString>>,
    ) -> Self {
        Self {
            program: program.into(),
            args: args.into_iter().map(Into::into).collect(),
        }
    }
}

/// The outcome of parsing the command line; `Help` prints [`USAGE`].
pub type Parsed = cli::Parsed<ClientOptions>;

/// Parses the arguments (without the program name).
pub fn parse(args: impl IntoIterator<Item = OsString>) -> Result<Parsed, UsageError> {
    let mut args = ArgWalker::new(args);
    // What the next --args belongs to: the --call or --get-prompt before it.
    enum Named {
        Nothing,
        Tool,
        Prompt,
    }
    let mut last = Named::Nothing;
    let named = |name: String| ToolCall {
        name,
        arguments: Value::Object(Map::new()),
    };
    let mut options = ClientOptions {
        name: NAME,
        server: None,
        call: None,
        read_resource: None,
        get_prompt: None,
        json: false,
        env: Vec::new(),
        inherit_env: false,
        timeout: DEFAULT_TIMEOUT,
        runtime: RuntimeChoice::default(),
        show_stderr: false,
        protocol: LATEST_PROTOCOL_VERSION,
        discover_timeout: DEFAULT_DISCOVER_TIMEOUT,
        discover_sibling: false,
        restart: false,
        bundled: None,
    };
    while let Some(option) = args.next_option()? {
        let previous = std::mem::replace(&mut last, Named::Nothing);
        match option.as_str() {
            "-h" | "--help" => return Ok(Parsed::Help),
            "--call" => {
                options.call = Some(named(args.value(&option)?));
                last = Named::Tool;
            }
            "--get-prompt" => {
                options.get_prompt = Some(named(args.value(&option)?));
                last = Named::Prompt;
            }
            "--args" => {
                let arguments = parse_arguments(&args.value(&option)?)?;
                let target = match previous {
                    Named::Tool => options.call.as_mut(),
                    Named::Prompt => options.get_prompt.as_mut(),
                    Named::Nothing => None,
                };
                let Some(target) = target else {
                    return Err(UsageError(
                        "--args goes right after the --call NAME or --get-prompt NAME it is for"
                            .to_owned(),
                    ));
                };
                target.arguments = arguments;
            }
            "--read-resource" => options.read_resource = Some(args.value(&option)?),
            "--json" => options.json = true,
            "--env" => options.env.push(parse_env(&args.os_value(&option)?)?),
            "--inherit-env" => options.inherit_env = true,
            "--timeout" => options.timeout = parse_seconds(&option, &args.value(&option)?)?,
            "--runtime" => options.runtime = args.value(&option)?.parse().map_err(UsageError)?,
            "--show-stderr" => options.show_stderr = true,
            "--protocol" => options.protocol = parse_protocol(&args.value(&option)?)?,
            "--discover-timeout" => {
                options.discover_timeout = parse_seconds(&option, &args.value(&option)?)?;
            }
            "--discover-sibling" => options.discover_sibling = true,
            "--restart" => options.restart = true,
            other => return Err(UsageError(format!("unknown option `{other}`"))),
        }
    }
    if options.discover_sibling && !is_stateless(options.protocol) {
        return Err(UsageError(format!(
            "--discover-sibling needs --protocol {LATEST_STATELESS_PROTOCOL_VERSION}: only it \
             opens with server/discover"
        )));
    }
    options.server = args.into_command();
    Ok(Parsed::Run(options))
}

fn parse_protocol(text: &str) -> Result<&'static str, UsageError> {
    supported_protocol_version(text).ok_or_else(|| {
        UsageError(format!(
            "--protocol: unknown revision `{text}` (known: {})",
            SUPPORTED_PROTOCOL_VERSIONS.join(", ")
        ))
    })
}

fn parse_arguments(text: &str) -> Result<Value, UsageError> {
    match serde_json::from_str::<Value>(text) {
        Ok(value @ Value::Object(_)) => Ok(value),
        Ok(_) => Err(UsageError(format!(
            "--args must be a JSON object, got `{text}`"
        ))),
        Err(err) => Err(UsageError(format!(
            "--args is not valid JSON ({err}): `{text}`"
        ))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse_strs(args: &[&str]) -> Result<Parsed, UsageError> {
        parse(args.iter().map(OsString::from))
    }

    fn run(args: &[&str]) -> ClientOptions {
        match parse_strs(args).unwrap() {
            Parsed::Run(options) => options,
            Parsed::Help => panic!("expected options"),
        }
    }

    #[test]
    fn no_arguments_means_the_bundled_server_with_defaults() {
        let options = run(&[]);
        assert_eq!(options.server, None);
        assert_eq!(options.call, None);
        assert_eq!(options.timeout, DEFAULT_TIMEOUT);
        assert_eq!(options.runtime, RuntimeChoice::Tokio);
        assert!(!options.inherit_env);
        assert_eq!(options.protocol, "2025-11-25");
        assert_eq!(run(&["--protocol", "2026-07-28"]).protocol, "2026-07-28");
        assert_eq!(options.discover_timeout, DEFAULT_DISCOVER_TIMEOUT);
        assert!(!options.discover_sibling);
        assert!(!options.restart);
        assert!(run(&["--restart"]).restart);
        let sibling = run(&[
            "--protocol",
            "2026-07-28",
            "--discover-sibling",
            "--discover-timeout",
            "0.5",
        ]);
        assert!(sibling.discover_sibling);
        assert_eq!(sibling.discover_timeout, Duration::from_millis(500));
    }

    #[test]
    fn server_arguments_that_look_like_options_go_to_the_server() {
        let options = run(&[
            "--call",
            "echo",
            "--args",
            r#"{"text":"hi"}"#,
            "--env",
            "K=V",
            "--timeout",
            "2",
            "npx",
            "-y",
            "pkg",
            "--call",
            "x",
        ]);
        let server = options.server.unwrap();
        assert_eq!(server.program, "npx");
        assert_eq!(server.args, ["-y", "pkg", "--call", "x"]);
        let call = options.call.unwrap();
        assert_eq!(call.name, "echo");
        assert_eq!(call.arguments["text"], "hi");
        assert_eq!(options.env, [("K".into(), "V".into())]);
        assert_eq!(options.timeout, Duration::from_secs(2));
    }

    #[test]
    fn bad_input_is_a_usage_error_that_says_what_is_wrong() {
        let cases: [(&[&str], &str); 7] = [
            (&["--discover-sibling"], "needs --protocol 2026-07-28"),
            (&["--args", "{}"], "--call"),
            (&["--call", "x", "--args", "[1]"], "JSON object"),
            (&["--call", "x", "--args", "{"], "not valid JSON"),
            (&["--runtime", "glommio"], "unknown runtime"),
            (&["--frobnicate"], "unknown option"),
            (&["--protocol", "2099-01-01"], "unknown revision"),
        ];
        for (args, expected) in cases {
            let err = parse_strs(args).unwrap_err();
            assert!(err.0.contains(expected), "{args:?}: {err}");
        }
    }

    #[test]
    fn args_go_with_the_call_or_prompt_right_before_them() {
        let options = run(&[
            "--get-prompt",
            "greet",
            "--args",
            r#"{"name":"Ada"}"#,
            "--call",
            "add",
            "--args",
            r#"{"a":1,"b":2}"#,
            "--read-resource",
            "example://readme",
            "--json",
        ]);
        let prompt = options.get_prompt.unwrap();
        assert_eq!(
            (prompt.name.as_str(), &prompt.arguments["name"]),
            ("greet", &Value::from("Ada"))
        );
        let call = options.call.unwrap();
        assert_eq!(
            (call.name.as_str(), &call.arguments["b"]),
            ("add", &Value::from(2))
        );
        assert_eq!(options.read_resource.as_deref(), Some("example://readme"));
        assert!(options.json);
        // Without --args, no arguments.
        assert_eq!(
            run(&["--get-prompt", "p"]).get_prompt.unwrap().arguments,
            Value::Object(Map::new())
        );
        for misplaced in [
            &["--args", "{}", "--call", "x"][..],
            &["--call", "x", "--args", "{}", "--args", "{}"],
            &["--call", "x", "--read-resource", "u", "--args", "{}"],
        ] {
            let err = parse_strs(misplaced).unwrap_err();
            assert!(
                err.0
                    .contains("right after the --call NAME or --get-prompt NAME"),
                "{misplaced:?}: {err}"
            );
        }
    }

    #[test]
    fn help_wins() {
        assert_eq!(parse_strs(&["--timeout", "3", "-h"]).unwrap(), Parsed::Help);
    }
}
