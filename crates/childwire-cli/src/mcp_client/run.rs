//! The client's steps: spawn, handshake, list tools, call one, shut down,
//! report; and the explanation when a step fails.

use childwire::{
    Command, Config, EnvPolicy, ExitReport, Runtime, SpawnError, StderrMode, Transport,
};
use serde_json::{Map, Value, json};

use super::options::{ClientOptions, ToolCall};
use super::session::{Failure, Session};
use super::{describe, locate};
use crate::protocol::{
    HANDSHAKE_PROTOCOL_VERSIONS, LATEST_PROTOCOL_VERSION, META_CLIENT_CAPABILITIES,
    META_CLIENT_INFO, META_PROTOCOL_VERSION, METHOD_NOT_FOUND, SUPPORTED_PROTOCOL_VERSIONS,
    UNSUPPORTED_PROTOCOL_VERSION, is_stateless, supported_protocol_version,
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
        config.on_stderr_line(|line: &[u8]| {
            note!("   server stderr | {}", String::from_utf8_lossy(line));
        });
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
    let outcome = match converse(
        &mut session,
        options.protocol,
        options.call.as_ref(),
        bundled,
    )
    .await
    {
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

/// The conversation: handshake (or discovery), tools, one call.
async fn converse<R: Runtime>(
    session: &mut Session<R>,
    protocol: &'static str,
    call: Option<&ToolCall>,
    bundled: bool,
) -> Result<Outcome, StepFailed> {
    let init = if is_stateless(protocol) {
        match discover(session, protocol).await? {
            Discovered::Stateless(result) => result,
            Discovered::Handshake(version) => initialize(session, version).await?,
        }
    } else {
        initialize(session, protocol).await?
    };

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

/// What `server/discover` led to.
enum Discovered {
    /// The stateless revision is in use; the discovery result describes
    /// the server as an `initialize` result would.
    Stateless(Value),
    /// The server needs the `initialize` handshake, with this revision.
    Handshake(&'static str),
}

/// Opens a stateless session (MCP 2026-07-28): `server/discover` with the
/// revision in `_meta`, then the same `_meta` on every request. A server
/// from before that revision answers -32601 (method not found): it gets the
/// `initialize` handshake instead, as the spec's stdio fallback says.
async fn discover<R: Runtime>(
    session: &mut Session<R>,
    protocol: &'static str,
) -> Result<Discovered, StepFailed> {
    say!("-> server/discover (protocol {protocol}, in _meta)");
    let answer = session
        .request("server/discover", json!({ "_meta": meta(protocol) }))
        .await;
    let offered = match answer {
        Ok(result) => {
            let offered = versions(result.get("supportedVersions"));
            let chosen = choose(protocol, &offered).ok_or_else(|| StepFailed {
                step: "server/discover".to_owned(),
                failure: Failure::NoCommonVersion(offered.clone()),
            })?;
            say!(
                "<- server/discover: protocol {chosen} (the server speaks {})",
                offered.join(", ")
            );
            if is_stateless(chosen) {
                for line in describe::server(&result) {
                    say!("   {line}");
                }
                say!("   no handshake: every request carries protocol {chosen} in _meta");
                session.set_meta(meta(chosen));
                return Ok(Discovered::Stateless(result));
            }
            return Ok(Discovered::Handshake(chosen));
        }
        Err(Failure::Error {
            code: METHOD_NOT_FOUND,
            ..
        }) => {
            say!(
                "<- server/discover: error {METHOD_NOT_FOUND} (method not found): the server \
                 predates {protocol}; falling back to initialize"
            );
            return Ok(Discovered::Handshake(LATEST_PROTOCOL_VERSION));
        }
        // The server is of the stateless era but not of this revision: its
        // list says which to use instead.
        Err(Failure::Error {
            code: UNSUPPORTED_PROTOCOL_VERSION,
            data,
            ..
        }) => versions(data.as_ref().and_then(|data| data.get("supported"))),
        Err(failure) => {
            return Err(StepFailed {
                step: "server/discover".to_owned(),
                failure,
            });
        }
    };
    say!(
        "<- server/discover: error {UNSUPPORTED_PROTOCOL_VERSION} (unsupported protocol \
         version), the server speaks {}",
        offered.join(", ")
    );
    // Only handshake revisions are worth a try here: the one stateless
    // revision this client knows was just refused.
    match choose(protocol, &offered).filter(|chosen| !is_stateless(chosen)) {
        Some(chosen) => Ok(Discovered::Handshake(chosen)),
        None => Err(StepFailed {
            step: "server/discover".to_owned(),
            failure: Failure::NoCommonVersion(offered),
        }),
    }
}

/// `initialize` offering `protocol`, then `notifications/initialized`;
/// returns the `initialize` result.
async fn initialize<R: Runtime>(
    session: &mut Session<R>,
    protocol: &str,
) -> Result<Value, StepFailed> {
    say!("-> initialize (protocol {protocol})");
    let init = step(
        "initialize",
        session.request(
            "initialize",
            json!({
                "protocolVersion": protocol,
                "capabilities": {},
                "clientInfo": client_info(),
            }),
        ),
    )
    .await?;
    let version = init
        .get("protocolVersion")
        .and_then(Value::as_str)
        .unwrap_or("(none)");
    // Whatever the server picks among the handshake revisions this client
    // knows is fine (MCP lifecycle, "Version Negotiation").
    match supported_protocol_version(version).filter(|version| !is_stateless(version)) {
        Some(version) if version == protocol => say!("<- initialize: protocol {version}"),
        Some(version) => {
            say!("<- initialize: protocol {version} (the server's choice; it is known here)")
        }
        None => say!(
            "<- initialize: protocol {version}, which this client does not know (it speaks {}); \
             the spec lets a client disconnect here, this one goes on to show what the server offers",
            HANDSHAKE_PROTOCOL_VERSIONS.join(", ")
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
    Ok(init)
}

/// The `_meta` of a stateless request: revision, capabilities, identity.
fn meta(protocol: &str) -> Map<String, Value> {
    let mut meta = Map::new();
    meta.insert(META_PROTOCOL_VERSION.to_owned(), json!(protocol));
    meta.insert(META_CLIENT_CAPABILITIES.to_owned(), json!({}));
    meta.insert(META_CLIENT_INFO.to_owned(), client_info());
    meta
}

fn client_info() -> Value {
    json!({ "name": CLIENT_NAME, "version": env!("CARGO_PKG_VERSION") })
}

/// The strings of a JSON array of revisions.
fn versions(list: Option<&Value>) -> Vec<String> {
    list.and_then(Value::as_array)
        .map(|list| {
            list.iter()
                .filter_map(Value::as_str)
                .map(str::to_owned)
                .collect()
        })
        .unwrap_or_default()
}

/// `wanted` if the server offers it, else the newest revision both sides
/// know.
fn choose(wanted: &'static str, offered: &[String]) -> Option<&'static str> {
    if offered.iter().any(|version| version == wanted) {
        return Some(wanted);
    }
    SUPPORTED_PROTOCOL_VERSIONS
        .iter()
        .copied()
        .find(|known| offered.iter().any(|version| version == known))
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

/// The command as a shell would need it typed: each argument quoted when
/// it holds anything but plain characters, so what is shown can be pasted.
fn shown_command(program: &std::ffi::OsStr, args: &[std::ffi::OsString]) -> String {
    std::iter::once(program)
        .chain(args.iter().map(|arg| arg.as_os_str()))
        .map(|part| shell_quote(&part.to_string_lossy()))
        .collect::<Vec<_>>()
        .join(" ")
}

/// `word` as one POSIX shell word: unchanged when nothing in it is special
/// to a shell, else in single quotes (a `'` inside becomes `'\''`).
fn shell_quote(word: &str) -> String {
    let plain = |c: char| c.is_ascii_alphanumeric() || "@%+=:,./_-".contains(c);
    if !word.is_empty() && word.chars().all(plain) {
        word.to_owned()
    } else {
        format!("'{}'", word.replace('\'', r"'\''"))
    }
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
    let tail = tail(report);
    // The report's own one-line stderr summary would repeat what the tail
    // shows in full.
    let mut brief = report.clone();
    brief.stderr_tail.clear();
    let report = &brief;
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
    format!("{paragraph}{tail}")
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn commands_are_shown_as_they_would_be_typed() {
        let args: Vec<std::ffi::OsString> = vec![
            "-c".into(),
            "echo oops >&2; exit 3".into(),
            "it's".into(),
            "".into(),
        ];
        assert_eq!(
            shown_command("sh".as_ref(), &args),
            r#"sh -c 'echo oops >&2; exit 3' 'it'\''s' ''"#
        );
        assert_eq!(
            shell_quote("@modelcontextprotocol/server-everything"),
            "@modelcontextprotocol/server-everything"
        );
    }

    #[test]
    fn the_wanted_revision_wins_else_the_newest_both_know() {
        let offered = |list: &[&str]| list.iter().map(|v| (*v).to_owned()).collect::<Vec<_>>();
        assert_eq!(
            choose("2026-07-28", &offered(&["2025-06-18", "2026-07-28"])),
            Some("2026-07-28")
        );
        assert_eq!(
            choose(
                "2026-07-28",
                &offered(&["2099-01-01", "2025-03-26", "2025-06-18"])
            ),
            Some("2025-06-18")
        );
        assert_eq!(choose("2026-07-28", &offered(&["2099-01-01"])), None);
    }
}
