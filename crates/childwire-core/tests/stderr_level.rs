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
