//! Stdout pollution and framing mismatch are named, once, and the session goes on (C39); by
//! default a child's banner goes with its stderr lines, and the first item is its first message
//! (C42).
//!
//! With notices asked for (`PollutionPolicy::Deliver`), a server that prints a banner before its
//! JSON, an LSP server spoken to as NDJSON, and an NDJSON server on a `Content-Length` channel
//! each give one `Received::Pollution` notice naming the cause, then the transport carries on as
//! before.

use childwire_core::ContentLength;

use std::sync::{Arc, Mutex};

use super::rt::{self, PollutionKind, Received};
use super::support::*;

#[test]
fn c39_a_banner_then_json_server_gives_one_notice_naming_a_banner_then_its_messages() {
    run(async {
        let mut t = start(&misbehave(&["banner"]), polluted_config());
        let Received::Pollution(notice) = recv(&mut t).await else {
            panic!("the banner is named first");
        };
        assert_eq!(notice.kind, PollutionKind::Text);
        assert_eq!(notice.line, 1);
        assert!(notice.to_string().contains("banner"), "{notice}");
        assert!(notice.head.starts_with(b"Starting server"), "{notice}");
        // The default policy still delivers the lines, and names the second one no more.
        assert_eq!(text(&mut t).await, "Starting server on stdio...");
        assert_eq!(text(&mut t).await, "Listening for JSON-RPC on stdin");
        roundtrip(&mut t, r#"{"jsonrpc":"2.0","id":1,"method":"ping"}"#).await;
        let report = finish(t).await;
        assert!(report.success(), "{report}");
        assert_eq!(report.counters.polluted, 2, "{report:?}");
    });
}

/// `Config::default()` as a host writes it, only the graces shortened, with the child's stderr
/// lines (and what goes with them) collected.
fn default_config_collecting() -> (rt::Config, Arc<Mutex<Vec<String>>>) {
    let mut config = rt::Config::default();
    config.stdin_grace(std::time::Duration::from_secs(1));
    config.term_grace(std::time::Duration::from_secs(1));
    let lines = Arc::new(Mutex::new(Vec::new()));
    let seen = Arc::clone(&lines);
    config.on_stderr_line(move |line| {
        seen.lock()
            .unwrap()
            .push(String::from_utf8_lossy(line).into_owned());
    });
    (config, lines)
}

#[test]
fn c42_a_default_config_childs_banner_goes_with_its_stderr_and_the_first_item_is_its_answer() {
    run(async {
        let (config, lines) = default_config_collecting();
        let mut t = start(&misbehave(&["banner"]), config);
        let requests = [
            r#"{"jsonrpc":"2.0","id":1,"method":"initialize"}"#,
            r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#,
            r#"{"jsonrpc":"2.0","id":2,"method":"tools/list"}"#,
        ];
        send(&mut t, requests[0]).await;
        // The README's first loop: the first item is the answer, not the banner.
        let Some(Received::Message(answer)) = within(STEP, "recv", t.recv()).await else {
            panic!("the first item is not the answer");
        };
        assert_eq!(&answer[..], requests[0].as_bytes());
        for request in &requests[1..] {
            send(&mut t, request).await;
        }
        for request in &requests[1..] {
            assert_eq!(text(&mut t).await, *request);
        }
        let report = finish(t).await;
        assert!(report.success(), "{report}");
        let counters = &report.counters;
        assert_eq!(
            (counters.polluted, counters.polluted_diverted),
            (2, 2),
            "{report:?}"
        );
        // The banner went where the stderr lines go, marked as stdout.
        let lines = lines.lock().unwrap().clone();
        assert_eq!(
            lines,
            [
                "(stdout) Starting server on stdio...",
                "(stdout) Listening for JSON-RPC on stdin"
            ]
        );
    });
}

#[test]
fn c42_a_banner_is_a_sign_of_life_not_readiness() {
    run(async {
        let (config, lines) = default_config_collecting();
        let mut t = start(&misbehave(&["banner"]), config);
        // Once the banner was read: no message yet, so no verdict of readiness.
        let mut startup = rt::StartupConfig::default();
        startup.silence = Some(std::time::Duration::from_millis(300));
        let verdict = within(STEP, "the start-up verdict", t.started(startup)).await;
        assert!(!verdict.is_ready(), "ready on a banner: {verdict}");
        assert_eq!(lines.lock().unwrap().len(), 2, "the banner was read");
        // Its first message is.
        send(&mut t, r#"{"jsonrpc":"2.0","id":1,"method":"ping"}"#).await;
        let verdict = within(
            STEP,
            "the start-up verdict",
            t.started(rt::StartupConfig::default()),
        )
        .await;
        assert!(verdict.is_ready(), "{verdict}");
        finish(t).await;
    });
}

#[test]
fn c39_an_lsp_server_spoken_to_as_ndjson_gives_one_notice_naming_content_length_framing() {
    run(async {
        let t = start(&misbehave(&["lsp"]), polluted_config());
        let pid = pid_of(&t);
        let (tx, mut rx) = t.split();
        let Some(Received::Pollution(notice)) = within(STEP, "recv", rx.recv()).await else {
            panic!("the header line is named first");
        };
        assert_eq!(notice.kind, PollutionKind::ContentLengthHeader);
        assert!(
            notice.to_string().contains("`Content-Length:` header"),
            "{notice}"
        );
        // Then only messages: the bodies glued to the next header are not named again.
        let (messages, report) = finish_split(pid, tx, rx).await;
        assert!(report.success(), "{report}");
        assert_eq!(messages.len(), 4, "{messages:?}");
        assert_eq!(
            messages.last().map(Vec::as_slice),
            Some(&br#"{"jsonrpc":"2.0","method":"n","params":2}"#[..])
        );
        assert_eq!(report.counters.polluted, 3, "{report:?}");
    });
}

#[test]
fn c39_an_ndjson_server_on_a_content_length_channel_gives_one_notice_naming_ndjson() {
    run(async {
        // `no-read` prints one JSON line and blocks: the notice must come from that line, not
        // from the end of the stream.
        let cmd = misbehave(&["no-read"]);
        let mut t = rt::Transport::spawn_with(ContentLength, &cmd, polluted_config())
            .unwrap_or_else(|err| panic!("spawn failed: {err}"));
        let pid = t.id().expect("a running child has a pid");
        let Some(Received::Pollution(notice)) = within(STEP, "recv", t.recv()).await else {
            panic!("the JSON line is named while the child runs");
        };
        assert_eq!(notice.kind, PollutionKind::JsonOnContentLength);
        assert!(
            notice.to_string().contains("newline-delimited JSON"),
            "{notice}"
        );
        assert_eq!(&notice.head[..], b"{\"ready\":true}\n");
        // The session goes on: sending works, and shutdown ends the child as usual.
        within(
            STEP,
            "send",
            t.send(r#"{"jsonrpc":"2.0","id":1,"method":"ping"}"#),
        )
        .await
        .expect("send");
        let report = within(STEP, "shutdown", t.shutdown())
            .await
            .expect("shutdown");
        assert_reaped(pid).await;
        assert_ended_after_stdin_grace(&report);
        assert_eq!(report.counters.polluted, 1, "{report:?}");
    });
}
