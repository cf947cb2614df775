//! The client's steps: spawn, handshake, list tools, call one, shut down,
//! report; and the explanation when a step fails.

use std::sync::Arc;

use childwire::{
    Command, Config, EnvPolicy, ExitReport, Runtime, SpawnError, StderrMode, Transport,
};
use serde_json::{Value, json};

use super::options::{ClientOptions, ToolCall};
use super::session::{Failure, Session};
use super::{describe, locate};
use crate::protocol::{
    LATEST_PROTOCOL_VERSION, SUPPORTED_PROTOCOL_VERSIONS, supported_protocol_version,
};

/// The name this client gives in `clientInfo`.
const CLIENT_NAME: &str = "childwire-mcp-client";

/// Stderr lines shown under a failure explanation.
const TAIL_LINES: usize = 10;

/// The step that failed, and why.
struct StepFailed {
    step: String,
    failure: Failure,
}

/// What went wrong, besides a failed step.
enum Outcome {
    /// Every step succeeded.
    Done,
    /// The called tool answered with `isError: true`.
    ToolError(String),
    /// A step failed.
    Failed(StepFailed),
}

pub(super) async fn run<R: Runtime>(options: ClientOptions) -> u8 {
    let bundled = options.server.is_none();
    let (program, args) = match &options.server {
        Some(server) => (server.program.clone(), server.args.clone()),
        None => match locate::bundled_server(|| {
            note!("mcp_client: building the bundled example server (first run only)...");
        }) {
            Ok(path) => (path.into_os_string(), Vec::new()),
            Err(err) => {
                note!("mcp_client: {err}");
                return 1;
            }
        },
    };
    let mut command = Command::new(&program);
    command.args(&args).envs(options.env.iter().cloned());
    command.env_policy(if options.inherit_env {
        EnvPolicy::Inherit
    } else {
        EnvPolicy::Minimal
    });
    command.stderr(StderrMode::Capture);
    let mut config = Config::default();
    if options.show_stderr {
        config.on_stderr_line = Some(Arc::new(|line: &[u8]| {
            note!("   server stderr | {}", String::from_utf8_lossy(line));
        }));
    }

    let shown = shown_command(&program, &args);
    let transport = match Transport::<R>::spawn(&command, config) {
        Ok(transport) => transport,
        Err(err) => {
            note!("{}", explain_spawn(&err));
            return 1;
        }
    };
    say!(
        "spawned {shown} (pid {}) on {}, {} environment",
        transport
            .id()
            .map_or_else(|| "?".to_owned(), |pid| pid.to_string()),
        options.runtime,
        if options.inherit_env {
            "inherited"
        } else {
            "minimal"
        },
    );

    let mut session = Session::new(transport, options.timeout);
    let outcome = match converse(&mut session, options.call.as_ref(), bundled).await {
        Ok(outcome) => outcome,
        Err(failed) => Outcome::Failed(failed),
    };
    if matches!(outcome, Outcome::Done | Outcome::ToolError(_)) {
        say!(
            "-> shutdown: close stdin, SIGTERM if still running 2 s later, SIGKILL 2 s after that"
        );
    }
    let report = match session.shutdown().await {
        Ok(report) => report,
        Err(stopped) => {
            note!("mcp_client: {stopped}");
            return 1;
        }
    };
    say!("server {report}");
    let c = &report.counters;
    say!(
        "traffic: sent {} messages ({} bytes), received {} ({} bytes), {} oversized dropped; stderr {} bytes",
        c.messages_out,
        c.bytes_out,
        c.messages_in,
        c.bytes_in,
        c.oversized,
        c.stderr_bytes
    );

    match outcome {
        Outcome::Done if report.shutdown_requested => 0,
        Outcome::Done => {
            note!(
                "mcp_client: the server ended before it was asked to.{}",
                tail(&report)
            );
            1
        }
        Outcome::ToolError(name) => {
            note!(
                "mcp_client: the tool `{name}` reported an error (isError: true); its message is above."
            );
            1
        }
        Outcome::Failed(failed) => {
            note!("{}", explain(&failed, &report, &shown));
            1
        }
    }
}

/// The conversation: handshake, tools, one call.
async fn converse<R: Runtime>(
    session: &mut Session<R>,
    call: Option<&ToolCall>,
    bundled: bool,
) -> Result<Outcome, StepFailed> {
    say!("-> initialize (protocol {LATEST_PROTOCOL_VERSION})");
    let init = step(
        "initialize",
        session.request(
            "initialize",
            json!({
                "protocolVersion": LATEST_PROTOCOL_VERSION,
                "capabilities": {},
                "clientInfo": { "name": CLIENT_NAME, "version": env!("CARGO_PKG_VERSION") },
            }),
        ),
    )
    .await?;
    let version = init
        .get("protocolVersion")
        .and_then(Value::as_str)
        .unwrap_or("(none)");
    match supported_protocol_version(version) {
        Some(version) => say!("<- initialize: protocol {version}"),
        None => say!(
            "<- initialize: protocol {version}, which this client does not know (it speaks {}); \
             the spec lets a client disconnect here, this one goes on to show what the server offers",
            SUPPORTED_PROTOCOL_VERSIONS.join(", ")
        ),
    }
    for line in describe::server(&init) {
        say!("   {line}");
    }
    say!("-> notifications/initialized");
    step(
        "notifications/initialized",
        session.notify("notifications/initialized"),
    )
    .await?;

    if init.pointer("/capabilities/tools").is_none() {
        say!("   the server declares no tools capability: nothing to list or call");
        return Ok(Outcome::Done);
    }
    list_tools(session).await?;

    let default_call;
    let call = match call {
        Some(call) => call,
        None if bundled => {
            default_call = ToolCall {
                name: "add".to_owned(),
                arguments: json!({ "a": 2, "b": 40 }),
            };
            &default_call
        }
        None => {
            say!("   no tool called (pass --call NAME --args JSON before the command to call one)");
            return Ok(Outcome::Done);
        }
    };
    say!("-> tools/call {} {}", call.name, call.arguments);
    let result = step(
        &format!("tools/call {}", call.name),
        session.request(
            "tools/call",
            json!({ "name": call.name, "arguments": call.arguments }),
        ),
    )
    .await?;
    let (lines, is_error) = describe::call_result(&result);
    let label = if is_error { "tool error" } else { "result" };
    for (i, line) in lines.iter().enumerate() {
        if i == 0 {
            say!("<- {label}: {line}");
        } else {
            say!("   {line}");
        }
    }
    Ok(if is_error {
        Outcome::ToolError(call.name.clone())
    } else {
        Outcome::Done
    })
}

/// `tools/list`, following `nextCursor` through every page.
async fn list_tools<R: Runtime>(session: &mut Session<R>) -> Result<(), StepFailed> {
    let mut tools = Vec::new();
    let mut cursor: Option<String> = None;
    loop {
        say!(
            "-> tools/list{}",
            if cursor.is_some() { " (next page)" } else { "" }
        );
        let params = match &cursor {
            Some(cursor) => json!({ "cursor": cursor }),
            None => json!({}),
        };
        let page = step("tools/list", session.request("tools/list", params)).await?;
        if let Some(Value::Array(page_tools)) = page.get("tools") {
            tools.extend(page_tools.iter().cloned());
        }
        match page.get("nextCursor").and_then(Value::as_str) {
            Some(next) if cursor.as_deref() != Some(next) => cursor = Some(next.to_owned()),
            _ => break,
        }
    }
    say!(
        "<- {} tool{}",
        tools.len(),
        if tools.len() == 1 { "" } else { "s" }
    );
    for line in describe::tools(&tools) {
        say!("   {line}");
    }
    Ok(())
}

/// Names a failure after its step.
async fn step<T>(
    name: &str,
    request: impl Future<Output = Result<T, Failure>>,
) -> Result<T, StepFailed> {
    request.await.map_err(|failure| StepFailed {
        step: name.to_owned(),
        failure,
    })
}

fn shown_command(program: &std::ffi::OsStr, args: &[std::ffi::OsString]) -> String {
    std::iter::once(program)
        .chain(args.iter().map(|arg| arg.as_os_str()))
        .map(|part| part.to_string_lossy().into_owned())
        .collect::<Vec<_>>()
        .join(" ")
}

fn explain_spawn(err: &SpawnError) -> String {
    format!(
        "mcp_client: {err}. Check the command and that its program is installed: servers \
         published on npm run with `npx` (Node.js), Python ones with `uvx` (uv)."
    )
}

/// One paragraph: which step failed, why, how the server ended, what to
/// try; then the server's last stderr lines.
fn explain(failed: &StepFailed, report: &ExitReport, shown: &str) -> String {
    let StepFailed { step, failure } = failed;
    let paragraph = match failure {
        Failure::Exited(_) => format!(
            "mcp_client: the server ended during {step}: {report}. It may have crashed on \
             start-up or may not be an MCP stdio server; its stderr is below."
        ),
        Failure::Timeout(after) => format!(
            "mcp_client: the server did not answer {step} within {}, so it was shut down \
             ({report}). A first `npx -y` or `uvx` run may still be downloading the server \
             (raise --timeout); a program that is not an MCP stdio server never answers. \
             Command: {shown}",
            describe::seconds(*after)
        ),
        other => format!("mcp_client: {step} failed: {other}. The server was shut down: {report}."),
    };
    format!("{paragraph}{}", tail(report))
}

/// The last lines of the server's stderr, indented, or nothing.
fn tail(report: &ExitReport) -> String {
    let lines: Vec<&str> = report.stderr_tail.lines().collect();
    if lines.is_empty() {
        return String::new();
    }
    let shown = &lines[lines.len().saturating_sub(TAIL_LINES)..];
    let mut text = String::from("\n  server stderr (last lines):");
    for line in shown {
        text.push_str("\n  | ");
        text.push_str(line);
    }
    text
}
