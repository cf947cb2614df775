//! A shutdown's goodbye against a real child: LSP's `shutdown` answered and `exit` obeyed, DAP's
//! `disconnect` answered, with no signal sent; and the same child, without a goodbye, ended by its
//! stdin's close instead. (The goodbye's decisions are tested on a simulated clock in the core:
//! `crates/childwire-core/tests/goodbye.rs`.)

use std::time::Duration;

use super::rt::{EndedBy, Exit, Goodbye};
use super::support::*;

/// The `polite` child with `goodbye`, one message echoed, then shut down without the receiver
/// reading: the report.
async fn shut_down_politely(protocol: &str, goodbye: Option<Goodbye>) -> super::rt::ExitReport {
    let mut config = config();
    config.goodbye(goodbye);
    // Longer than any answer needs, so a goodbye that did not work shows as SIGTERM.
    config.stdin_grace(Duration::from_secs(10));
    let mut t = start(&misbehave(&["polite", protocol]), config);
    roundtrip(&mut t, r#"{"jsonrpc":"2.0","id":1,"method":"hover"}"#).await;
    finish(t).await
}

#[test]
fn lsp_goodbye_gets_its_answer_and_the_server_exits_on_exit_with_no_signal() {
    run(async {
        let report = shut_down_politely("lsp", Some(Goodbye::lsp())).await;
        // Exit code 0: `exit` came after an answered `shutdown` (1 without, 3 at stdin's EOF).
        assert_eq!(report.exit, Exit::Code(0), "{report}");
        assert_eq!(report.ended_by, EndedBy::Goodbye, "{report}");
        assert!(report.elapsed < Duration::from_secs(10), "{report}");
        assert!(report.to_string().contains("after the goodbye"), "{report}");
    });
}

#[test]
fn dap_goodbye_gets_the_disconnect_response_and_the_adapter_exits() {
    run(async {
        let report = shut_down_politely("dap", Some(Goodbye::dap())).await;
        assert_eq!(report.exit, Exit::Code(0), "{report}");
        assert_eq!(report.ended_by, EndedBy::Goodbye, "{report}");
    });
}

#[test]
fn without_a_goodbye_the_same_server_sees_only_its_stdin_close() {
    run(async {
        let report = shut_down_politely("lsp", None).await;
        assert_eq!(report.exit, Exit::Code(3), "{report}");
        assert_eq!(report.ended_by, EndedBy::StdinClose, "{report}");
    });
}

#[test]
fn a_goodbye_nobody_answers_is_given_up_on_in_its_answer_timeout() {
    run(async {
        // `echo` answers nothing: `shutdown` comes back as a request, not an answer.
        let mut config = config();
        config.goodbye(Some(
            Goodbye::lsp().answer_timeout(Duration::from_millis(200)),
        ));
        config.stdin_grace(Duration::from_secs(10));
        let t = start(&misbehave(&["echo"]), config);
        let report = finish(t).await;
        // Given up on after 200 ms: `exit` and stdin's close follow; echo exits 0 at EOF, long
        // before SIGTERM would come.
        assert_eq!(report.exit, Exit::Code(0), "{report}");
        assert_eq!(report.ended_by, EndedBy::Goodbye, "{report}");
        assert!(report.elapsed >= Duration::from_millis(200), "{report}");
        assert!(report.elapsed < Duration::from_secs(10), "{report}");
    });
}

/// The pyright release the test runs (`npx` fetches it once).
const PYRIGHT: &str = "pyright@1.1.414";

/// pyright, a real language server, through `Content-Length` framing: after `initialize`, the
/// LSP goodbye ends it with no signal: it answers `shutdown` and exits 0 on `exit`. Skipped where
/// `npx` or the npm registry is not reachable.
#[test]
fn pyright_answers_the_lsp_goodbye_and_exits_on_its_own() {
    if let Err(why) = npm_has(PYRIGHT) {
        eprintln!("skipped: {why}");
        return;
    }
    run_for(Duration::from_secs(300), async {
        let mut config = config();
        config.goodbye(Some(Goodbye::lsp()));
        let mut command = super::rt::Command::new("npx");
        command.args(["-y", "-p", PYRIGHT, "pyright-langserver", "--stdio"]);
        let mut t =
            super::rt::Transport::spawn_with(childwire_core::ContentLength, &command, config)
                .expect("spawn npx");
        let initialize = r#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"processId":null,"rootUri":null,"capabilities":{}}}"#;
        within(Duration::from_secs(240), "initialize", t.send(initialize))
            .await
            .expect("send initialize");
        loop {
            match within(
                Duration::from_secs(240),
                "the answer to initialize",
                t.recv(),
            )
            .await
            {
                Some(super::rt::Received::Message(m))
                    if m.starts_with(br#"{"jsonrpc":"2.0","id":1,"#) =>
                {
                    break;
                }
                Some(super::rt::Received::Message(_)) => {}
                other => panic!("pyright did not answer initialize: {other:?}"),
            }
        }
        t.send(r#"{"jsonrpc":"2.0","method":"initialized","params":{}}"#)
            .await
            .expect("send initialized");
        let report = within(STEP, "shutdown", t.shutdown())
            .await
            .expect("shutdown");
        assert_eq!(report.exit, Exit::Code(0), "{report}");
        assert_eq!(report.ended_by, EndedBy::Goodbye, "{report}");
    });
}

/// Whether `npx` runs here and the npm registry knows `package` (asked within a minute).
fn npm_has(package: &str) -> Result<(), String> {
    let package = package.to_owned();
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let out = std::process::Command::new("npm")
            .args(["view", &package, "version"])
            .stdin(std::process::Stdio::null())
            .output();
        let _ = tx.send(out);
    });
    match rx.recv_timeout(Duration::from_secs(60)) {
        Ok(Ok(out)) if out.status.success() && !out.stdout.is_empty() => Ok(()),
        Ok(Ok(out)) => Err(format!(
            "the npm registry did not answer: {}",
            String::from_utf8_lossy(&out.stderr).trim()
        )),
        Ok(Err(err)) => Err(format!("`npm` does not run here: {err}")),
        Err(_) => Err("the npm registry did not answer within a minute".to_owned()),
    }
}
