//! The client's steps: spawn, handshake, list tools, call one, shut down,
//! report; and the explanation when a step fails.

use std::time::{Duration, Instant};

use childwire::core::stderr_level::{Level, level_of};
use childwire::{
    Command, Config, EnvPolicy, ExitReport, PollutionPolicy, Runtime, SpawnError, StderrMode,
    Transport,
};
use serde_json::{Map, Value, json};

use super::findings::{Findings, Verdict};
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
    // With --json, stdout is the document's alone.
    crate::set_quiet(options.json);
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
    let mut findings = Findings::new(&shown, &options.runtime.to_string());
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
        restart::session::<R>(&options, &discovery, bundled, &mut findings).await
    } else {
        session::<R>(&options, &discovery, bundled, &mut findings).await
    };
    let Some((outcome, report)) = ended else {
        emit(&options, findings.finish(None, Verdict::Failed));
        return 1;
    };
    say!("server {report}");
    let c = &report.counters;
    say!(
        "traffic: sent {} ({}), received {} ({}), {} dropped for size; stderr {}",
        count(c.messages_out, "message"),
        count(c.bytes_out, "byte"),
        count(c.messages_in, "message"),
        count(c.bytes_in, "byte"),
        count(c.oversized, "message"),
        count(c.stderr_bytes, "byte"),
    );
    match c.polluted {
        0 => {}
        1 => say!("stdout: 1 line that was not a JSON message (named above)"),
        n => say!("stdout: {n} lines that were not JSON messages (named above)"),
    }

    let (code, verdict) = match outcome {
        Outcome::Done if report.shutdown_requested => (0, Verdict::Ok),
        Outcome::Done => {
            note!(
                "{name}: the server ended before it was asked to.{}",
                tail(&report)
            );
            (1, Verdict::EndedEarly)
        }
        Outcome::ToolError(tool) => {
            note!(
                "{}: the tool `{tool}` reported an error (isError: true); its message is above.",
                options.name
            );
            (1, Verdict::ToolError)
        }
        Outcome::Failed(failed) => {
            let explanation = explain(name, &failed, &report, &shown);
            note!("{explanation}");
            findings.error(&failed.step, &failed.failure.to_string(), &explanation);
            (1, Verdict::Failed)
        }
    };
    emit(&options, findings.finish(Some(&report), verdict));
    code
}

/// Writes the `--json` document to stdout, when asked for.
fn emit(options: &ClientOptions, document: Value) {
    if options.json {
        // A closed stdout (`| head`) is not worth a panic.
        let mut text = serde_json::to_string_pretty(&document).unwrap_or_default();
        text.push('\n');
        let _ = std::io::Write::write_all(&mut std::io::stdout().lock(), text.as_bytes());
    }
}

/// `1 message`, `2 messages`.
fn count(n: u64, noun: &str) -> String {
    if n == 1 {
        format!("1 {noun}")
    } else {
        format!("{n} {noun}s")
    }
}

/// The session on one server process: spawned, conversed with, shut down;
/// what came of it and the server's exit report, or `None` when that could
/// not be had (said on stderr).
async fn session<R: Runtime>(
    options: &ClientOptions,
    discovery: &Discovery<'_>,
    bundled: bool,
    findings: &mut Findings,
) -> Option<(Outcome, ExitReport)> {
    let started = Instant::now();
    let transport = match discovery.server.spawn::<R>("") {
        Ok(transport) => transport,
        Err(err) => {
            let explanation = explain_spawn(options.name, &err);
            note!("{explanation}");
            findings.error("spawn", &err.to_string(), &explanation);
            return None;
        }
    };
    findings.time("spawn", started.elapsed());
    findings.pid(transport.id());
    let mut session = Session::new(transport, options.timeout);
    let outcome = match converse(&mut session, options, discovery, bundled, &|_| {}, findings).await
    {
        Ok(outcome) => outcome,
        Err(failed) => Outcome::Failed(failed),
    };
    say_shutdown(&outcome);
    let started = Instant::now();
    let report = session.shutdown().await;
    findings.time("shutdown", started.elapsed());
    match report {
        Ok(report) => Some((outcome, report)),
        Err(stopped) => {
            note!("{}: {stopped}", options.name);
            findings.error("shutdown", &stopped.to_string(), &stopped.to_string());
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

/// The conversation: handshake (or discovery), what the server offers
/// (tools, resources, prompts), then what the options ask for (a tool
/// call, a resource read, a prompt); `opened` hears how the session was
/// opened as soon as the server has answered; `findings` gathers what was
/// found.
async fn converse<L: Link>(
    session: &mut Session<L>,
    options: &ClientOptions,
    discovery: &Discovery<'_>,
    bundled: bool,
    opened: &(dyn Fn(Opened) + Sync),
    findings: &mut Findings,
) -> Result<Outcome, StepFailed> {
    let protocol = options.protocol;
    let started = Instant::now();
    let (init, in_use) = if is_stateless(protocol) {
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
                    tools: has(&result, "tools"),
                });
                (result, chosen)
            }
            Discovered::Handshake(version) => {
                (initialize(session, version, opened).await?, version)
            }
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
                findings.pid(session.link().id());
                (initialize(session, version, opened).await?, version)
            }
        }
    } else {
        (initialize(session, protocol, opened).await?, protocol)
    };
    findings.time("open", started.elapsed());
    let in_use = init
        .get("protocolVersion")
        .and_then(Value::as_str)
        .unwrap_or(in_use);
    findings.server(in_use, &init);

    if has(&init, "tools") {
        let started = Instant::now();
        let tools = list_tools(session).await?;
        findings.time("tools/list", started.elapsed());
        findings.listed("tools", &tools);
    } else {
        say!("   the server declares no tools capability: no tools to list");
    }
    // The list's field is named after the capability.
    for what in ["resources", "prompts"] {
        if !has(&init, what) {
            continue;
        }
        let method = format!("{what}/list");
        let started = Instant::now();
        let items = list_all(session, &method, what).await?;
        findings.time(&method, started.elapsed());
        let noun = &what[..what.len() - 1];
        say!("<- {}", count(items.len() as u64, noun));
        let lines = if what == "resources" {
            describe::resources(&items)
        } else {
            describe::prompts(&items)
        };
        for line in lines {
            say!("   {line}");
        }
        findings.listed(what, &items);
    }

    let mut outcome = Outcome::Done;
    let default_call;
    let call = match options.call.as_ref() {
        Some(call) => Some(call),
        None if bundled && has(&init, "tools") => {
            default_call = ToolCall {
                name: "add".to_owned(),
                arguments: json!({ "a": 2, "b": 40 }),
            };
            Some(&default_call)
        }
        None => {
            if has(&init, "tools") {
                say!(
                    "   no tool called (pass --call NAME --args JSON before the command to call one)"
                );
            }
            None
        }
    };
    if let Some(call) = call {
        say!("-> tools/call {} {}", call.name, call.arguments);
        let request = json!({ "name": call.name, "arguments": call.arguments });
        let result = asked(
            session,
            findings,
            "tools/call",
            &format!("tools/call {}", call.name),
            request,
        )
        .await?;
        let (lines, is_error) = describe::call_result(&result);
        say_lines(if is_error { "tool error" } else { "result" }, &lines);
        if is_error {
            outcome = Outcome::ToolError(call.name.clone());
        }
    }
    if let Some(uri) = &options.read_resource {
        say!("-> resources/read {uri}");
        let result = asked(
            session,
            findings,
            "resources/read",
            &format!("resources/read {uri}"),
            json!({ "uri": uri }),
        )
        .await?;
        say_lines("contents", &describe::read_result(&result));
    }
    if let Some(prompt) = &options.get_prompt {
        say!("-> prompts/get {} {}", prompt.name, prompt.arguments);
        let request = json!({ "name": prompt.name, "arguments": prompt.arguments });
        let result = asked(
            session,
            findings,
            "prompts/get",
            &format!("prompts/get {}", prompt.name),
            request,
        )
        .await?;
        say_lines("prompt", &describe::prompt_result(&result));
    }
    Ok(outcome)
}

/// Request `method` with `params` (also what `findings` keeps of what was
/// asked), as step `step`; its result, kept in `findings` with the time it
/// took, or the failure, kept there too.
async fn asked<L: Link>(
    session: &mut Session<L>,
    findings: &mut Findings,
    method: &str,
    step: &str,
    params: Value,
) -> Result<Value, StepFailed> {
    let started = Instant::now();
    let answer = session.request(method, params.clone()).await;
    let elapsed = started.elapsed();
    findings.time(method, elapsed);
    match answer {
        Ok(result) => {
            findings.call(method, params, Ok(&result), elapsed);
            Ok(result)
        }
        Err(failure) => {
            findings.call(method, params, Err(failure.to_string()), elapsed);
            Err(StepFailed {
                step: step.to_owned(),
                failure,
            })
        }
    }
}

/// `<- label: first line`, the others indented below it.
fn say_lines(label: &str, lines: &[String]) {
    for (i, line) in lines.iter().enumerate() {
        if i == 0 {
            say!("<- {label}: {line}");
        } else {
            say!("   {line}");
        }
    }
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

/// Whether an `initialize` (or `server/discover`) result declares the
/// capability `name` (`tools`, `resources`, `prompts`).
fn has(init: &Value, name: &str) -> bool {
    init.get("capabilities")
        .and_then(|capabilities| capabilities.get(name))
        .is_some()
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
        tools: has(&init, "tools"),
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

/// `tools/list`, every page, said as the server's tools.
async fn list_tools<L: Link>(session: &mut Session<L>) -> Result<Vec<Value>, StepFailed> {
    let tools = list_all(session, "tools/list", "tools").await?;
    say!("<- {}", count(tools.len() as u64, "tool"));
    for line in describe::tools(&tools) {
        say!("   {line}");
    }
    Ok(tools)
}

/// A list request (`tools/list`, `resources/list`, `prompts/list`),
/// following `nextCursor` through every page: the items of `field`.
async fn list_all<L: Link>(
    session: &mut Session<L>,
    method: &str,
    field: &str,
) -> Result<Vec<Value>, StepFailed> {
    let mut items = Vec::new();
    let mut cursor: Option<String> = None;
    loop {
        say!(
            "-> {method}{}",
            if cursor.is_some() { " (next page)" } else { "" }
        );
        let params = match &cursor {
            Some(cursor) => json!({ "cursor": cursor }),
            None => json!({}),
        };
        let page = step(method, session.request(method, params)).await?;
        if let Some(Value::Array(page_items)) = page.get(field) {
            items.extend(page_items.iter().cloned());
        }
        match page.get("nextCursor").and_then(Value::as_str) {
            Some(next) if cursor.as_deref() != Some(next) => cursor = Some(next.to_owned()),
            _ => break,
        }
    }
    Ok(items)
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
        Failure::Echoed(method) => format!(
            "{name}: the server sent the {method} request back unchanged instead of answering \
             it: it echoes what it reads (is it `cat`?), it is not an MCP server. Command: {shown}"
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
