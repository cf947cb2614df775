//! The client's steps: spawn, handshake, list tools, call one, shut down,
//! report; and the explanation when a step fails.

use std::time::Duration;

use childwire::core::stderr_level::{Level, level_of};
use childwire::{
    Command, Config, EnvPolicy, ExitReport, PollutionPolicy, Runtime, SpawnError, StderrMode,
    Transport,
};
use serde_json::{Map, Value, json};

use super::options::{ClientOptions, ToolCall};
use super::session::{Failure, Link, Session, pid_text};
use super::{describe, locate};
use crate::protocol::{
    HANDSHAKE_PROTOCOL_VERSIONS, INTERNAL_ERROR, INVALID_PARAMS, INVALID_REQUEST,
    LATEST_PROTOCOL_VERSION, META_CLIENT_CAPABILITIES, META_CLIENT_INFO, META_PROTOCOL_VERSION,
    METHOD_NOT_FOUND, PARSE_ERROR, SUPPORTED_PROTOCOL_VERSIONS, UNSUPPORTED_PROTOCOL_VERSION,
    is_stateless, supported_protocol_version,
};
use crate::rt::RuntimeChoice;

mod restart;
mod stop;

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
    let name = options.name;
    let bundled = options.server.is_none();
    let (program, args) = match (&options.server, &options.bundled) {
        (Some(server), _) => (server.program.clone(), server.args.clone()),
        (None, Some(bundled)) => (bundled.program.clone(), bundled.args.clone()),
        (None, None) => match locate::bundled_server(|| {
            note!("{name}: building the bundled example server (first run only)...");
        }) {
            Ok(path) => (path.into_os_string(), Vec::new()),
            Err(err) => {
                note!("{name}: {err}");
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
    // A banner or the other framing on stdout is named, not just misread.
    config.pollution(Some(PollutionPolicy::Deliver));
    if options.show_stderr {
        config.on_stderr_line(|line: &[u8]| {
            // The level the line names (JSON-lines logs, pino, `INFO:`):
            // stderr is logs, and most of it is not an error.
            let level = level_of(line).map_or("", Level::as_str);
            note!(
                "   server stderr {level:>5} | {}",
                String::from_utf8_lossy(line)
            );
        });
    }

    let shown = shown_command(&program, &args);
    let server = Server {
        command: &command,
        config: &config,
        shown: &shown,
        runtime: options.runtime,
        inherit_env: options.inherit_env,
    };
    let discovery = Discovery {
        timeout: options.discover_timeout.min(options.timeout),
        sibling: options.discover_sibling,
        server: &server,
    };
    let ended = if options.restart {
        restart::session::<R>(&options, &discovery, bundled).await
    } else {
        session::<R>(&options, &discovery, bundled).await
    };
    let Some((outcome, report)) = ended else {
        return 1;
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
    if c.polluted > 0 {
        say!(
            "stdout lines that were not JSON messages: {} (named above)",
            c.polluted
        );
    }

    match outcome {
        Outcome::Done if report.shutdown_requested => 0,
        Outcome::Done => {
            note!(
                "{name}: the server ended before it was asked to.{}",
                tail(&report)
            );
            1
        }
        Outcome::ToolError(tool) => {
            note!(
                "{}: the tool `{tool}` reported an error (isError: true); its message is above.",
                options.name
            );
            1
        }
        Outcome::Failed(failed) => {
            note!("{}", explain(name, &failed, &report, &shown));
            1
        }
    }
}

/// The session on one server process: spawned, conversed with, shut down;
/// what came of it and the server's exit report, or `None` when that could
/// not be had (said on stderr).
async fn session<R: Runtime>(
    options: &ClientOptions,
    discovery: &Discovery<'_>,
    bundled: bool,
) -> Option<(Outcome, ExitReport)> {
    let transport = match discovery.server.spawn::<R>("") {
        Ok(transport) => transport,
        Err(err) => {
            note!("{}", explain_spawn(options.name, &err));
            return None;
        }
    };
    let mut session = Session::new(transport, options.timeout);
    let outcome = match converse(
        &mut session,
        options.protocol,
        discovery,
        options.call.as_ref(),
        bundled,
        &|_| {},
    )
    .await
    {
        Ok(outcome) => outcome,
        Err(failed) => Outcome::Failed(failed),
    };
    say_shutdown(&outcome);
    match session.shutdown().await {
        Ok(report) => Some((outcome, report)),
        Err(stopped) => {
            note!("{}: {stopped}", options.name);
            None
        }
    }
}

/// Says how the server is shut down, after a session that went well.
fn say_shutdown(outcome: &Outcome) {
    if matches!(outcome, Outcome::Done | Outcome::ToolError(_)) {
        say!(
            "-> shutdown: close stdin, SIGTERM if still running 2 s later, SIGKILL 2 s after that"
        );
    }
}

/// How to start the server: for the session, again after it exited on
/// `server/discover`, or as a disposable sibling.
struct Server<'a> {
    command: &'a Command,
    config: &'a Config,
    shown: &'a str,
    runtime: RuntimeChoice,
    inherit_env: bool,
}

impl Server<'_> {
    /// Spawns it and says so; `what` names a process other than the first
    /// (" again", " as a disposable sibling").
    fn spawn<R: Runtime>(&self, what: &str) -> Result<Transport<R>, SpawnError> {
        let transport = Transport::<R>::spawn(self.command, self.config.clone())?;
        self.say_spawned(what, transport.id());
        Ok(transport)
    }

    /// Says that the server runs as process `pid`.
    fn say_spawned(&self, what: &str, pid: Option<u32>) {
        say!(
            "spawned {}{what} (pid {}) on {}, {} environment",
            self.shown,
            pid_text(pid),
            self.runtime,
            if self.inherit_env {
                "inherited"
            } else {
                "minimal"
            },
        );
    }
}

/// How `server/discover` is sent.
struct Discovery<'a> {
    /// How long to wait for its answer.
    timeout: Duration,
    /// On a disposable sibling process rather than the session's.
    sibling: bool,
    /// To start the sibling, or the server again.
    server: &'a Server<'a>,
}

/// How the session was opened: what a restarted server's re-initialization
/// repeats (`--restart`).
#[derive(Debug, Clone, Copy)]
struct Opened {
    /// The revision offered in `initialize`, or the stateless one in use.
    protocol: &'static str,
    /// No handshake: the revision goes in every request's `_meta`.
    stateless: bool,
    /// The server declared tools: they are listed again.
    tools: bool,
}

/// The conversation: handshake (or discovery), tools, one call; `opened`
/// hears how the session was opened as soon as the server has answered.
async fn converse<L: Link>(
    session: &mut Session<L>,
    protocol: &'static str,
    discovery: &Discovery<'_>,
    call: Option<&ToolCall>,
    bundled: bool,
    opened: &(dyn Fn(Opened) + Sync),
) -> Result<Outcome, StepFailed> {
    let init = if is_stateless(protocol) {
        let discovered = if discovery.sibling {
            discover_on_sibling::<L::Rt>(discovery, protocol).await?
        } else {
            discover(session, protocol, discovery.timeout, "").await?
        };
        match discovered {
            Discovered::Stateless(result, chosen) => {
                say!("   no handshake: every request carries protocol {chosen} in _meta");
                session.set_meta(meta(chosen));
                opened(Opened {
                    protocol: chosen,
                    stateless: true,
                    tools: has_tools(&result),
                });
                result
            }
            Discovered::Handshake(version) => initialize(session, version, opened).await?,
            Discovered::ServerGone(version) => {
                if L::SUPERVISED {
                    say!(
                        "   the server is restarted, as --restart asks; initialize goes to the new process"
                    );
                }
                session
                    .renew(|| discovery.server.spawn::<L::Rt>(" again"))
                    .map_err(|err| StepFailed {
                        step: "initialize".to_owned(),
                        failure: Failure::Spawn(err.to_string()),
                    })?;
                initialize(session, version, opened).await?
            }
        }
    } else {
        initialize(session, protocol, opened).await?
    };
    let tools = has_tools(&init);

    if !tools {
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
    /// The stateless revision (the second field) is in use; the discovery
    /// result describes the server as an `initialize` result would.
    Stateless(Value, &'static str),
    /// The server needs the `initialize` handshake, with this revision.
    Handshake(&'static str),
    /// The server exited instead of answering: it needs the handshake, with
    /// this revision, on a new process.
    ServerGone(&'static str),
}

/// Opens a stateless session (MCP 2026-07-28): `server/discover` with the
/// revision in `_meta`, then the same `_meta` on every request.
///
/// The spec's backward-compatibility rule: anything but a modern answer
/// (a result listing `supportedVersions`, or an
/// unsupported-protocol-version error listing the revisions the server
/// does speak) means a server from before that revision, which gets the
/// `initialize` handshake instead. Legacy servers answer an unknown
/// request with -32601 or -32602, another error, an empty result, nothing
/// at all, or by exiting, so the fallback is not keyed to one code, and
/// waits at most `timeout`.
async fn discover<L: Link>(
    session: &mut Session<L>,
    protocol: &'static str,
    timeout: Duration,
    place: &str,
) -> Result<Discovered, StepFailed> {
    say!("-> server/discover (protocol {protocol}, in _meta){place}");
    let answer = session
        .request_within(
            "server/discover",
            json!({ "_meta": meta(protocol) }),
            timeout,
        )
        .await;
    let fallback = |why: String| {
        say!(
            "<- server/discover: {why}: the server predates {protocol}; falling back to initialize"
        );
        Discovered::Handshake(LATEST_PROTOCOL_VERSION)
    };
    let offered = match answer {
        Ok(result) => {
            let Some(offered) = result.get("supportedVersions").and_then(Value::as_array) else {
                return Ok(fallback("a result without supportedVersions".to_owned()));
            };
            let offered = versions(Some(&Value::Array(offered.clone())));
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
                return Ok(Discovered::Stateless(result, chosen));
            }
            return Ok(Discovered::Handshake(chosen));
        }
        // The server is of the stateless era but not of this revision: its
        // list says which to use instead.
        Err(Failure::Error {
            code: UNSUPPORTED_PROTOCOL_VERSION,
            data: Some(data),
            ..
        }) if data.get("supported").is_some_and(Value::is_array) => versions(data.get("supported")),
        Err(Failure::Error { code, .. }) => {
            return Ok(fallback(format!("error {code} ({})", error_name(code))));
        }
        Err(Failure::Timeout(after)) => {
            return Ok(fallback(format!(
                "no answer within {}",
                describe::seconds(after)
            )));
        }
        Err(Failure::Oversized(len)) => {
            return Ok(fallback(format!(
                "a {len}-byte answer, dropped for its size"
            )));
        }
        Err(Failure::Exited(report)) => {
            say!(
                "<- server/discover: the server {} instead of answering: it predates \
                 {protocol}; falling back to initialize on a new server process",
                report.exit
            );
            // Under supervision the session showed it as it came.
            if place.is_empty() && !L::SUPERVISED {
                say!("   server {report}");
            }
            return Ok(Discovered::ServerGone(LATEST_PROTOCOL_VERSION));
        }
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

/// `server/discover` on a disposable second process of the same server,
/// as the TypeScript SDK 2.4 does: a legacy server that exits on an unknown
/// request then takes only the sibling with it, and the session's process
/// never sees the probe. The sibling is shut down before the session goes
/// on.
async fn discover_on_sibling<R: Runtime>(
    discovery: &Discovery<'_>,
    protocol: &'static str,
) -> Result<Discovered, StepFailed> {
    let transport = match discovery.server.spawn::<R>(" as a disposable sibling") {
        Ok(transport) => transport,
        Err(err) => {
            say!("   the sibling could not be started ({err}); falling back to initialize");
            return Ok(Discovered::Handshake(LATEST_PROTOCOL_VERSION));
        }
    };
    let mut sibling = Session::new(transport, discovery.timeout);
    let discovered = discover(&mut sibling, protocol, discovery.timeout, " on the sibling").await;
    match sibling.shutdown().await {
        Ok(report) => say!("   sibling {report}"),
        Err(stopped) => say!("   sibling: {stopped}"),
    }
    Ok(match discovered? {
        // The session's own process is untouched: it gets the handshake.
        Discovered::ServerGone(version) => Discovered::Handshake(version),
        other => other,
    })
}

/// The name JSON-RPC gives an error code, or a description of its range.
fn error_name(code: i64) -> &'static str {
    match code {
        PARSE_ERROR => "parse error",
        INVALID_REQUEST => "invalid request",
        METHOD_NOT_FOUND => "method not found",
        INVALID_PARAMS => "invalid params",
        INTERNAL_ERROR => "internal error",
        -32099..=-32000 => "a server error",
        _ => "an application error",
    }
}

/// Whether an `initialize` (or `server/discover`) result declares tools.
fn has_tools(init: &Value) -> bool {
    init.pointer("/capabilities/tools").is_some()
}

/// `initialize` offering `protocol`, then `notifications/initialized`;
/// returns the `initialize` result. `opened` hears of the handshake once
/// the server has answered, before the notification.
async fn initialize<L: Link>(
    session: &mut Session<L>,
    protocol: &'static str,
    opened: &(dyn Fn(Opened) + Sync),
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
    opened(Opened {
        protocol,
        stateless: false,
        tools: has_tools(&init),
    });
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
async fn list_tools<L: Link>(session: &mut Session<L>) -> Result<(), StepFailed> {
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

fn explain_spawn(name: &str, err: &SpawnError) -> String {
    format!(
        "{name}: {err}. Check the command and that its program is installed: servers \
         published on npm run with `npx` (Node.js), Python ones with `uvx` (uv)."
    )
}

/// One paragraph: which step failed, why, how the server ended, what to
/// try; then the server's last stderr lines.
fn explain(name: &str, failed: &StepFailed, report: &ExitReport, shown: &str) -> String {
    let StepFailed { step, failure } = failed;
    let tail = tail(report);
    // The report's own one-line stderr summary would repeat what the tail
    // shows in full.
    let mut brief = report.clone();
    brief.stderr_tail.clear();
    let report = &brief;
    let paragraph = match failure {
        Failure::Exited(_) => format!(
            "{name}: the server ended during {step}: {report}. It may have crashed on \
             start-up or may not be an MCP stdio server; its stderr is below."
        ),
        Failure::Timeout(after) => format!(
            "{name}: the server did not answer {step} within {}, so it was shut down \
             ({report}). A first `npx -y` or `uvx` run may still be downloading the server \
             (raise --timeout); a program that is not an MCP stdio server never answers. \
             Command: {shown}",
            describe::seconds(*after)
        ),
        Failure::GaveUp(verdict) => format!(
            "{name}: the server kept ending during {step} and is not restarted again: {}; the \
             last time it {report}. It may crash on start-up or may not be an MCP stdio server; \
             its stderr is below.",
            verdict.reason
        ),
        other => format!("{name}: {step} failed: {other}. The server was shut down: {report}."),
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
