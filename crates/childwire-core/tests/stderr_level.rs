//! C39: stderr lines carry a level, read from the shapes servers log in,
//! and JSON-lines records their message and fields; the exit report's
//! summary prefers the line that says what failed.

use std::time::Duration;

use childwire_core::stderr_level::{Level, LogRecord, level_of, prefix_level};
use childwire_core::stderr_tail::summary_line;
use childwire_core::{EndedBy, Exit, ExitReport, StderrTail};
use proptest::prelude::*;

#[test]
fn c39_json_lines_records_get_their_level_message_and_fields() {
    let cases: &[(&str, Level, &str)] = &[
        // pino
        (
            r#"{"level":30,"time":1764049641000,"pid":7,"hostname":"h","msg":"server started"}"#,
            Level::Info,
            "server started",
        ),
        (
            r#"{"level":50,"time":1764049641000,"pid":7,"hostname":"h","err":{"type":"Error","message":"x"},"msg":"listen EADDRINUSE"}"#,
            Level::Error,
            "listen EADDRINUSE",
        ),
        (
            r#"{"level":60,"msg":"out of memory"}"#,
            Level::Fatal,
            "out of memory",
        ),
        (r#"{"level":10,"msg":"tick"}"#, Level::Trace, "tick"),
        // tracing-subscriber's JSON format
        (
            r#"{"timestamp":"2026-11-25T05:47:21.000000Z","level":"WARN","fields":{"message":"slow tool call","ms":912},"target":"server::tools"}"#,
            Level::Warn,
            "slow tool call",
        ),
        // structlog
        (
            r#"{"event": "tool failed", "level": "error", "timestamp": "2026-11-25T05:47:21Z"}"#,
            Level::Error,
            "tool failed",
        ),
        // python-json-logger, GCP, ECS, zap
        (
            r#"{"levelname": "WARNING", "message": "deprecated"}"#,
            Level::Warn,
            "deprecated",
        ),
        (
            r#"{"severity":"CRITICAL","message":"disk full"}"#,
            Level::Fatal,
            "disk full",
        ),
        (
            r#"{"log.level":"debug","message":"x=1"}"#,
            Level::Debug,
            "x=1",
        ),
        (
            r#"{"lvl":"dpanic","msg":"bad state"}"#,
            Level::Fatal,
            "bad state",
        ),
        // escapes in the message are decoded
        (
            r#"{"level":"info","msg":"line\none \"q\" \u00e9\ud83d\ude00"}"#,
            Level::Info,
            "line\none \"q\" é😀",
        ),
    ];
    for &(line, level, message) in cases {
        let record = LogRecord::parse(line.as_bytes()).expect(line);
        assert_eq!(record.level, Some(level), "{line}");
        assert_eq!(record.message.as_deref(), Some(message), "{line}");
        assert_eq!(level_of(line.as_bytes()), Some(level), "{line}");
    }
    let pino = br#"{"level":30,"time":1,"pid":7,"hostname":"h","req":{"id":"a,b}"},"msg":"ok"}"#;
    let record = LogRecord::parse(pino).unwrap();
    let keys: Vec<_> = record.fields.iter().map(|(k, _)| *k).collect();
    assert_eq!(
        keys,
        [&b"level"[..], b"time", b"pid", b"hostname", b"req", b"msg"]
    );
    assert_eq!(record.field("req"), Some(&br#"{"id":"a,b}"}"#[..]));
    assert_eq!(record.field("hostname"), Some(&br#""h""#[..]));
}

#[test]
fn c39_json_without_a_level_or_not_an_object_has_none() {
    for line in [
        r#"{"msg":"hello"}"#,
        r#"{"level":{"n":50},"msg":"nested"}"#,
        r#"{"level":"loud","msg":"unknown word"}"#,
        r#"{"level":5,"msg":"syslog numbers are ambiguous"}"#,
        r#"[{"level":"error"}]"#,
        r#"{"level":"error""#,
    ] {
        assert_eq!(level_of(line.as_bytes()), None, "{line}");
    }
    assert!(LogRecord::parse(br#"{"level":"error""#).is_none());
    assert!(LogRecord::parse(b"not json").is_none());
}

#[test]
fn c39_prefixed_lines_get_their_level() {
    let cases: &[(&str, Option<Level>)] = &[
        ("INFO: server listening", Some(Level::Info)),
        ("info: server listening", Some(Level::Info)),
        ("[warn] cache is cold", Some(Level::Warn)),
        ("[ERROR] boom", Some(Level::Error)),
        ("ERROR boom", Some(Level::Error)),
        ("WARNING:root:no config file", Some(Level::Warn)),
        ("CRITICAL:app.db:connection lost", Some(Level::Fatal)),
        (
            "DEBUG:asyncio:Using selector: EpollSelector",
            Some(Level::Debug),
        ),
        (
            "[2026-11-25T05:47:21Z INFO  my_server] ready",
            Some(Level::Info),
        ),
        (
            "2026-11-25T05:47:21.123456Z  WARN my_server::tools: slow",
            Some(Level::Warn),
        ),
        (
            "2026-11-25 05:47:21,123 ERROR worker died",
            Some(Level::Error),
        ),
        ("npm error code E404", Some(Level::Error)),
        ("npm ERR! code E404", Some(Level::Error)),
        ("npm warn deprecated inflight@1.0.6", Some(Level::Warn)),
        ("error: could not compile `x`", Some(Level::Error)),
        ("Error: Cannot find module 'x'", Some(Level::Error)),
        (
            "ModuleNotFoundError: No module named 'mcp'",
            Some(Level::Error),
        ),
        (
            "java.lang.IllegalStateException: closed",
            Some(Level::Error),
        ),
        (
            "thread 'main' panicked at src/main.rs:2:5:",
            Some(Level::Error),
        ),
        (
            "panic: runtime error: index out of range",
            Some(Level::Fatal),
        ),
        // No level: plain text is not an error.
        ("Info about the weather", None),
        ("Errors are counted below", None),
        ("Traceback (most recent call last):", None),
        ("server ready, error count 0", None),
        ("  File \"/srv/server.py\", line 3, in <module>", None),
        ("", None),
    ];
    for &(line, level) in cases {
        assert_eq!(level_of(line.as_bytes()), level, "{line:?}");
    }
}

#[test]
fn c39_tail_lines_carry_their_level_and_raw_bytes() {
    let mut tail = StderrTail::default();
    tail.handle_data(b"INFO: up\r\n{\"level\":50,\"msg\":\"bad\"}\nplain\n[warn] cut");
    tail.handle_eof();
    let lines: Vec<_> = std::iter::from_fn(|| tail.poll_leveled_line()).collect();
    let seen: Vec<_> = lines
        .iter()
        .map(|l| (String::from_utf8_lossy(l.raw()).into_owned(), l.level()))
        .collect();
    assert_eq!(
        seen,
        [
            ("INFO: up".to_owned(), Some(Level::Info)),
            (r#"{"level":50,"msg":"bad"}"#.to_owned(), Some(Level::Error)),
            ("plain".to_owned(), None),
            ("[warn] cut".to_owned(), Some(Level::Warn)),
        ]
    );
    assert_eq!(
        lines[1]
            .record()
            .and_then(|r| r.message.map(|m| m.into_owned())),
        Some("bad".to_owned())
    );
}

const NPX_404: &str = "\
npm error code E404
npm error 404 Not Found - GET https://registry.npmjs.org/@modelcontextprotocol%2fserver-nope - Not found
npm error 404
npm error 404  '@modelcontextprotocol/server-nope@*' is not in this registry.
npm error 404
npm error 404 Note that you can also install from a
npm error 404 tarball, folder, http url, or git url.
npm error A complete log of this run can be found in: /root/.npm/_logs/2026-11-25T05_47_21_000Z-debug-0.log";

fn report_with(stderr: &str) -> ExitReport {
    let mut report = ExitReport::new(
        Exit::Code(1),
        EndedBy::OnItsOwn,
        Duration::from_millis(1500),
    );
    report.stderr_tail = stderr.to_owned();
    report
}

#[test]
fn c39_npx_404_summary_quotes_the_404_not_the_log_pointer() {
    let expected = "npm error 404 Not Found - GET https://registry.npmjs.org/@modelcontextprotocol%2fserver-nope - Not found";
    assert_eq!(summary_line(NPX_404), Some(expected));
    let report = report_with(NPX_404);
    assert_eq!(report.stderr_summary(), Some(expected));
    assert!(
        report
            .to_string()
            .ends_with(&format!("; last stderr: {expected}")),
        "{report}"
    );
    // npm before v10 wrote `npm ERR!`.
    let old = NPX_404.replace("npm error", "npm ERR!");
    assert_eq!(
        summary_line(&old),
        Some(expected.replace("npm error", "npm ERR!").as_str())
    );
}

#[test]
fn c39_python_traceback_summary_is_the_exception() {
    let traceback = "\
INFO:server:starting
Traceback (most recent call last):
  File \"/srv/server.py\", line 3, in <module>
    import mcp_missing
ModuleNotFoundError: No module named 'mcp_missing'";
    assert_eq!(
        summary_line(traceback),
        Some("ModuleNotFoundError: No module named 'mcp_missing'")
    );
}

#[test]
fn c39_json_lines_summary_prefers_the_error_record() {
    let log = r#"{"level":30,"time":1,"msg":"server started"}
{"level":50,"time":2,"msg":"listen EADDRINUSE: address already in use"}
{"level":30,"time":3,"msg":"config not found, using defaults"}
{"level":30,"time":4,"msg":"shutting down"}"#;
    assert_eq!(
        summary_line(log),
        Some(r#"{"level":50,"time":2,"msg":"listen EADDRINUSE: address already in use"}"#)
    );
}

#[test]
fn c39_summary_falls_back_to_the_last_line_and_skips_pointers() {
    assert_eq!(summary_line("starting\nbye\n\n"), Some("bye"));
    assert_eq!(summary_line("\n  \n"), None);
    assert_eq!(summary_line(""), None);
    // A pointer alone is still better than nothing.
    assert_eq!(
        summary_line("ok\nnpm error A complete log of this run can be found in: /x.log"),
        Some("npm error A complete log of this run can be found in: /x.log")
    );
    // Rust: the panic, not the backtrace hint.
    let rust = "thread 'main' panicked at src/main.rs:2:5:\nboom\n\
                note: run with `RUST_BACKTRACE=1` environment variable to display a backtrace";
    assert_eq!(
        summary_line(rust),
        Some("thread 'main' panicked at src/main.rs:2:5:")
    );
    // An error line outranks a later info line with alarming words.
    assert_eq!(
        summary_line("ERROR: boom\nINFO: cache not found, rebuilding"),
        Some("ERROR: boom")
    );
    // Only the last lines are looked at.
    let mut long = String::from("Error: early failure\n");
    for i in 0..30 {
        long.push_str(&format!("line {i}\n"));
    }
    assert_eq!(summary_line(&long), Some("line 29"));
}

// ---- Stack traces: the line that says what went wrong, never a frame ----

/// A pg client that could not connect, node 20: the frames mention errors
/// (`_handleErrorEvent`, `emitErrorNT`) after the line that says what
/// happened.
const NODE_ECONNREFUSED: &str = "\
node:events:497
      throw er; // Unhandled 'error' event
      ^

Error: connect ECONNREFUSED 127.0.0.1:5432
    at TCPConnectWrap.afterConnect [as oncomplete] (node:net:1607:16)
Emitted 'error' event on Client instance at:
    at Client._handleErrorEvent (/srv/node_modules/pg/lib/client.js:336:10)
    at Client._handleErrorWhileConnecting (/srv/node_modules/pg/lib/client.js:318:19)
    at Object.onceWrapper (node:events:634:26)
    at Connection.emit (node:events:519:28)
    at Socket.reportStreamError (/srv/node_modules/pg/lib/connection.js:57:12)
    at Socket.emit (node:events:519:28)
    at emitErrorNT (node:internal/streams/destroy:169:8)
    at emitErrorCloseNT (node:internal/streams/destroy:128:3)
    at process.processTicksAndRejections (node:internal/process/task_queues:82:21) {
  errno: -111,
  code: 'ECONNREFUSED',
  syscall: 'connect',
  address: '127.0.0.1',
  port: 5432
}

Node.js v20.11.1";

/// An unhandled rejection in an ES module server: a deep async stack.
const NODE_TYPE_ERROR: &str = "\
file:///srv/build/index.js:41
    const tools = config.tools.map((t) => t.name);
                               ^

TypeError: Cannot read properties of undefined (reading 'map')
    at loadTools (file:///srv/build/index.js:41:32)
    at main (file:///srv/build/index.js:88:19)
    at async Promise.all (index 0)
    at async startServer (file:///srv/build/server.js:12:5)
    at async handleErrors (file:///srv/build/server.js:30:9)

Node.js v22.3.0";

/// httpx's exception has no `Error` suffix and no telling words, and the
/// frames above it say `map_httpcore_exceptions`; the traceback is chained.
const PYTHON_CHAINED: &str = "\
INFO:server:fetching the tool registry
Traceback (most recent call last):
  File \"/srv/.venv/lib/python3.12/site-packages/httpx/_transports/default.py\", line 69, in map_httpcore_exceptions
    yield
  File \"/srv/.venv/lib/python3.12/site-packages/httpx/_transports/default.py\", line 233, in handle_request
    resp = self._pool.handle_request(req)
           ^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^
httpcore.ConnectTimeout: timed out

The above exception was the direct cause of the following exception:

Traceback (most recent call last):
  File \"/srv/server.py\", line 18, in <module>
    tools = fetch_tools()
            ^^^^^^^^^^^^^
  File \"/srv/server.py\", line 11, in fetch_tools
    r = httpx.get(REGISTRY_URL, timeout=5)
        ^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^
  File \"/srv/.venv/lib/python3.12/site-packages/httpx/_api.py\", line 198, in get
    return request(
           ^^^^^^^^
  File \"/srv/.venv/lib/python3.12/site-packages/httpx/_transports/default.py\", line 86, in map_httpcore_exceptions
    raise mapped_exc(message) from exc
httpx.ConnectTimeout: timed out";

/// An exception group from anyio (MCP's Python SDK runs its server in a
/// task group), drawn with `|`.
const PYTHON_GROUP: &str = "\
  + Exception Group Traceback (most recent call last):
  |   File \"/srv/server.py\", line 30, in <module>
  |     anyio.run(main)
  |   File \"/srv/.venv/lib/python3.12/site-packages/anyio/_core/_exceptions.py\", line 17, in run
  |     raise exceptions[0]
  | ExceptionGroup: unhandled errors in a TaskGroup (1 sub-exception)
  +-+---------------- 1 ----------------
    | Traceback (most recent call last):
    |   File \"/srv/server.py\", line 22, in main
    |     await server.run(read, write, options)
    |   File \"/srv/.venv/lib/python3.12/site-packages/mcp/server/lowlevel/server.py\", line 500, in _handle_exceptions
    |     raise err
    | PermissionError: [Errno 13] Permission denied: '/var/lib/notes.db'
    +------------------------------------";

/// A Rust server's `unwrap` with `RUST_BACKTRACE=1`: the frames say
/// `unwrap_failed` and `panic_fmt`.
const RUST_BACKTRACE: &str = "\
thread 'main' panicked at src/main.rs:10:5:
called `Result::unwrap()` on an `Err` value: Os { code: 2, kind: NotFound, message: \"No such file or directory\" }
stack backtrace:
   0: rust_begin_unwind
             at /rustc/90b35a6239c3d8bdabc530a6a0816f7ff89a0aaf/library/std/src/panicking.rs:665:5
   1: core::panicking::panic_fmt
             at /rustc/90b35a6239c3d8bdabc530a6a0816f7ff89a0aaf/library/core/src/panicking.rs:74:14
   2: core::result::unwrap_failed
             at /rustc/90b35a6239c3d8bdabc530a6a0816f7ff89a0aaf/library/core/src/result.rs:1700:5
   3: core::result::Result<T,E>::unwrap
             at /rustc/90b35a6239c3d8bdabc530a6a0816f7ff89a0aaf/library/core/src/result.rs:1104:23
   4: notes_server::main
             at ./src/main.rs:10:5
   5: <fn() as core::ops::function::FnOnce<()>>::call_once
             at /rustc/90b35a6239c3d8bdabc530a6a0816f7ff89a0aaf/library/core/src/ops/function.rs:250:5
note: Some details are omitted, run with `RUST_BACKTRACE=full` for a verbose backtrace.";

/// A panic whose message names nothing, with a full backtrace (whose
/// frames say `panicking`, `begin_panic_handler`, `error`).
const RUST_PANIC_FULL: &str = "\
thread 'tokio-runtime-worker' panicked at src/handler.rs:88:17:
index out of bounds: the len is 3 but the index is 7
stack backtrace:
   0:     0x55d1c0a1b2c3 - std::backtrace_rs::backtrace::libunwind::trace::h1b2c3d4e5f6a7b8c
                               at /rustc/90b35a6239c3d8bdabc530a6a0816f7ff89a0aaf/library/std/src/../../backtrace/src/backtrace/libunwind.rs:116:5
   1:     0x55d1c0a1b2c4 - std::panicking::begin_panic_handler::{{closure}}::h2c3d4e5f6a7b8c9d
                               at /rustc/90b35a6239c3d8bdabc530a6a0816f7ff89a0aaf/library/std/src/panicking.rs:665:13
   2:     0x55d1c0a1b2c5 - core::panicking::panic_bounds_check::h3d4e5f6a7b8c9d0e
   3:     0x55d1c0a1b2c6 - notes_server::handler::on_error::h4e5f6a7b8c9d0e1f
                               at ./src/handler.rs:88:17";

#[test]
fn c39_node_traces_summary_is_the_error_not_a_frame() {
    assert_eq!(
        summary_line(NODE_ECONNREFUSED),
        Some("Error: connect ECONNREFUSED 127.0.0.1:5432")
    );
    assert_eq!(
        summary_line(NODE_TYPE_ERROR),
        Some("TypeError: Cannot read properties of undefined (reading 'map')")
    );
    // The report quotes it too.
    let report = report_with(NODE_ECONNREFUSED);
    assert!(
        report
            .to_string()
            .ends_with("; last stderr: Error: connect ECONNREFUSED 127.0.0.1:5432"),
        "{report}"
    );
}

#[test]
fn c39_python_traces_summary_is_the_final_exception_not_a_frame() {
    assert_eq!(
        summary_line(PYTHON_CHAINED),
        Some("httpx.ConnectTimeout: timed out")
    );
    assert_eq!(
        summary_line(PYTHON_GROUP),
        Some("| PermissionError: [Errno 13] Permission denied: '/var/lib/notes.db'")
    );
}

#[test]
fn c39_rust_backtraces_summary_is_the_panic_not_a_frame() {
    // The panic's message, which says what failed, rather than the frame
    // `core::result::unwrap_failed`.
    assert_eq!(
        summary_line(RUST_BACKTRACE),
        Some(
            "called `Result::unwrap()` on an `Err` value: Os { code: 2, kind: NotFound, message: \"No such file or directory\" }"
        )
    );
    // A message without telling words: the panic line above it.
    assert_eq!(
        summary_line(RUST_PANIC_FULL),
        Some("thread 'tokio-runtime-worker' panicked at src/handler.rs:88:17:")
    );
}

#[test]
fn c39_frames_do_not_count_against_the_lookback_and_win_only_alone() {
    // Forty frames between the error and the end.
    let mut deep = String::from("Error: listen EADDRINUSE: address already in use :::3000\n");
    for n in 0..40 {
        deep.push_str(&format!("    at handleError{n} (/srv/server.js:{n}:1)\n"));
    }
    deep.push_str("\nNode.js v20.11.1\n");
    assert_eq!(
        summary_line(&deep),
        Some("Error: listen EADDRINUSE: address already in use :::3000")
    );
    // Nothing but frames: the last one, rather than nothing.
    assert_eq!(
        summary_line("    at a (x.js:1:1)\n    at b (x.js:2:1)"),
        Some("at b (x.js:2:1)")
    );
    // A line that merely starts with "at" is not a frame.
    assert_eq!(
        summary_line("Error: cannot bind\nat least one listener failed"),
        Some("at least one listener failed")
    );
    // Node's note that precedes a second stack is not what failed.
    assert_eq!(
        summary_line(
            "Error: boom\n    at a (x.js:1:1)\nEmitted 'error' event at:\n    at b (x.js:2:1)"
        ),
        Some("Error: boom")
    );
}

proptest! {
    #[test]
    fn c39_level_reading_never_panics_and_prefix_is_bounded(
        line in prop::collection::vec(any::<u8>(), 0..300),
        tail in prop::collection::vec(any::<u8>(), 0..200),
    ) {
        let _ = level_of(&line);
        let _ = LogRecord::parse(&line);
        // Bytes past the window never change a prefix verdict.
        let mut longer = line.clone();
        longer.extend_from_slice(&tail);
        if line.len() >= childwire_core::stderr_level::PREFIX_WINDOW {
            prop_assert_eq!(prefix_level(&line), prefix_level(&longer));
        }
        let text = String::from_utf8_lossy(&line);
        if let Some(picked) = summary_line(&text) {
            prop_assert!(text.lines().any(|l| l.trim() == picked));
        }
    }
}
