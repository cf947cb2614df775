//! One answer to "did the flush work?": after a write failed on a child's closed stdin, the
//! `Sink`'s `poll_flush`, `Sender::flush` and `close` all say so, and none of them says `Ok` for
//! a message that never reached the child. (The `Sink` used to answer `Ok` for a message fed to
//! a child that had closed its stdin: it was dropped with the queue when the write failed.)

use std::time::Duration;

use bytes::Bytes;
use futures_util::SinkExt;

use childwire_conformance::procfs;

use super::rt::{self, Closed, Command, SendErrorKind, ShutdownError, Transport};
use super::support::*;

/// A child that closes its stdin, says so (naming the pipe it was), and lives on (until its
/// shutdown's SIGTERM).
fn closes_its_stdin() -> Command {
    let mut cmd = Command::new("sh");
    cmd.args([
        "-c",
        "pipe=$(readlink /proc/$$/fd/0); exec 0<&-; echo \"{\\\"stdin\\\":\\\"$pipe\\\"}\"; exec sleep 30",
    ])
    .stderr(rt::StderrMode::Capture);
    if let Some(tag) = tag() {
        cmd.env(TAG_VAR, tag);
    }
    cmd
}

/// That child, once it said its stdin is closed and nothing else reads that pipe: a concurrent
/// test's fork holds a copy of every descriptor of this process until its exec, and one made while
/// the pipe was being set up keeps a read end of it that long, so that a write still succeeds.
async fn child_without_stdin() -> Transport {
    let mut config = config();
    config.stdin_grace(Duration::from_millis(100));
    let mut t = start(&closes_its_stdin(), config);
    let said = text(&mut t).await;
    let pipe = said
        .strip_prefix(r#"{"stdin":""#)
        .and_then(|rest| rest.strip_suffix(r#""}"#))
        .unwrap_or_else(|| panic!("expected the stdin pipe's name, got {said:?}"));
    if procfs::SUPPORTED {
        assert!(pipe.starts_with("pipe:["), "{said}");
        eventually(STEP, "nothing reads the child's stdin pipe", || {
            procfs::holders_of(pipe).is_empty()
        })
        .await;
    }
    t
}

const MESSAGE: &str = r#"{"jsonrpc":"2.0","id":1,"method":"ping"}"#;

/// Whichever way it is asked after a write failed, the flush fails the same way.
#[test]
fn c33_after_a_write_failed_on_a_closed_stdin_every_flush_gives_the_same_answer() {
    run(async {
        let mut t = child_without_stdin().await;
        // Queued whole (a send only fails once sending is known to be over); its write fails.
        within(STEP, "send", t.send(MESSAGE)).await.expect("queued");
        let flushed = within(STEP, "flush", t.flush()).await;
        let err = flushed.expect_err("the message never reached the child");
        assert_eq!(
            err.kind(),
            SendErrorKind::Closed(Closed::PeerClosed),
            "{err}"
        );
        let sink = within(STEP, "the Sink's flush", SinkExt::<Bytes>::flush(&mut t)).await;
        let err = sink.expect_err("the Sink's flush: the same answer");
        assert_eq!(
            err.kind(),
            SendErrorKind::Closed(Closed::PeerClosed),
            "{err}"
        );
        let closed = within(STEP, "close", t.close()).await;
        assert_eq!(
            closed,
            Err(ShutdownError::PeerClosed),
            "close: the same answer"
        );
        finish(t).await;
    });
}

/// A message fed to the `Sink` of that child: the `Sink`'s flush does not say `Ok`.
#[test]
fn c33_a_message_fed_to_the_sink_of_a_child_without_stdin_is_not_flushed_ok() {
    run(async {
        let mut t = child_without_stdin().await;
        let fed = within(STEP, "feed", t.feed(Bytes::from_static(MESSAGE.as_bytes()))).await;
        fed.expect("accepted for sending");
        let flushed = within(STEP, "the Sink's flush", SinkExt::<Bytes>::flush(&mut t)).await;
        let err = flushed.expect_err("the message never reached the child");
        assert_eq!(
            err.kind(),
            SendErrorKind::Closed(Closed::PeerClosed),
            "{err}"
        );
        let flushed = within(STEP, "flush", t.flush()).await;
        assert!(flushed.is_err(), "Sender::flush agrees: {flushed:?}");
        finish(t).await;
    });
}

/// And a message sent then closed: `close` says what `flush` would have said.
#[test]
fn c33_closing_after_a_message_that_never_reached_the_child_fails() {
    run(async {
        let t = child_without_stdin().await;
        within(STEP, "send", t.send(MESSAGE)).await.expect("queued");
        let closed = within(STEP, "close", t.close()).await;
        assert_eq!(closed, Err(ShutdownError::PeerClosed));
        finish(t).await;
    });
}
