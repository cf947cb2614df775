//! A tap sees every message both ways, the notices, the stderr lines and the exit, with the
//! runtime's timestamps; a recorder writes them as a recording (C40).

use std::io::{self, Write};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Instant;

use bytes::Bytes;
use futures_util::SinkExt;
use serde_json::Value;

use super::rt::tap::{self, Recorder, TapEvent};
use super::rt::{Exit, Received};
use super::support::*;

/// A writer whose bytes the test reads while the recorder still holds it.
#[derive(Clone, Default)]
struct Shared(Arc<Mutex<Vec<u8>>>);

impl Write for Shared {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        self.0.lock().unwrap().extend_from_slice(buf);
        Ok(buf.len())
    }

    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

impl Shared {
    /// Each line of the recording, read by serde_json.
    fn records(&self) -> Vec<Value> {
        let bytes = self.0.lock().unwrap().clone();
        String::from_utf8(bytes)
            .expect("a recording is UTF-8")
            .lines()
            .map(|line| serde_json::from_str(line).unwrap_or_else(|err| panic!("{err}: {line}")))
            .collect()
    }
}

/// What a tap saw, one line per event, and when; and whether the transport let the tap go.
#[derive(Clone, Default)]
struct Seen {
    events: Arc<Mutex<Vec<(Instant, String)>>>,
    gone: Arc<AtomicBool>,
}

/// Says when it is dropped.
struct OnDrop(Arc<AtomicBool>);

impl Drop for OnDrop {
    fn drop(&mut self) {
        self.0.store(true, Ordering::SeqCst);
    }
}

impl Seen {
    fn tap(&self) -> impl tap::Tap {
        let seen = self.clone();
        let guard = OnDrop(Arc::clone(&self.gone));
        tap::from_fn(move |at, event| {
            let _held = &guard;
            let line = match event {
                TapEvent::Sent(m) => format!("sent {}", String::from_utf8_lossy(m)),
                TapEvent::Received(m) => format!("received {}", String::from_utf8_lossy(m)),
                TapEvent::Notice(notice) => format!("notice {notice:?}"),
                TapEvent::Stderr { line, level } => {
                    format!("stderr {level:?} {}", String::from_utf8_lossy(line))
                }
                TapEvent::Exited(report) => format!("exited {:?}", report.exit),
                other => format!("other {other:?}"),
            };
            seen.events.lock().unwrap().push((at, line));
        })
    }

    fn lines(&self) -> Vec<String> {
        let events = self.events.lock().unwrap();
        events.iter().map(|(_, l)| l.clone()).collect()
    }

    /// Waits until the transport (its handles and its background task) let the tap go: nothing
    /// more can come.
    async fn until_let_go(&self) {
        eventually(STEP, "the transport lets the tap go", || {
            self.gone.load(Ordering::SeqCst)
        })
        .await;
    }
}

#[test]
fn c40_a_recording_holds_both_ways_stderr_and_the_exit_in_order() {
    run(async {
        let out = Shared::default();
        let recorder = Arc::new(Recorder::new(out.clone()));
        let mut config = config();
        config.tap(Arc::clone(&recorder));
        let mut t = start(&misbehave(&["echo-then-log", "3"]), config);
        let pid = pid_of(&t);
        let ping = r#"{"jsonrpc":"2.0","id":1,"method":"ping"}"#;
        roundtrip(&mut t, ping).await;
        roundtrip(&mut t, "not json").await;
        within(STEP, "close", t.close()).await.expect("close");
        let (messages, report) = drain_to_exit(&mut t).await;
        assert!(messages.is_empty(), "{messages:?}");
        assert_eq!(report.exit, Exit::Code(3), "{report}");
        assert_reaped(pid).await;

        // The recording is whole once flushed (nothing on the transport's
        // path waits for the recorder's writer).
        recorder.flush().expect("the recording is written");
        let records = out.records();
        let dirs: Vec<&str> = records.iter().map(|r| r["dir"].as_str().unwrap()).collect();
        assert_eq!(
            dirs,
            [
                "to_child",
                "from_child",
                "to_child",
                "from_child",
                "stderr",
                "stderr",
                "exit"
            ],
            "{records:#?}"
        );
        let ping: Value = serde_json::from_str(ping).unwrap();
        assert_eq!(records[0]["msg"], ping);
        assert_eq!(records[1]["msg"], ping);
        assert_eq!(records[2]["text"], "not json");
        assert_eq!(records[3]["text"], "not json");
        assert_eq!(records[4]["line"], "INFO: echoed 2 lines");
        assert_eq!(records[4]["level"], "info");
        assert_eq!(records[5]["line"], r#"{"level":"error","msg":"bye"}"#);
        assert_eq!(records[5]["level"], "error");
        assert_eq!(records[6]["exit_code"], 3);
        assert_eq!(records[6]["signal"], Value::Null);
        assert_eq!(records[6]["report"], report.to_string());
        let t: Vec<f64> = records.iter().map(|r| r["t"].as_f64().unwrap()).collect();
        assert_eq!(t[0], 0.0);
        assert!(t.windows(2).all(|w| w[0] <= w[1]), "{t:?}");
    });
}

#[test]
fn c40_a_tap_sees_notices_and_messages_as_the_receiver_hands_them_out() {
    run(async {
        let seen = Seen::default();
        let mut config = polluted_config();
        config.tap(seen.tap());
        let mut t = start(&misbehave(&["banner"]), config);
        assert!(matches!(recv(&mut t).await, Received::Pollution(_)));
        assert_eq!(text(&mut t).await, "Starting server on stdio...");
        assert_eq!(text(&mut t).await, "Listening for JSON-RPC on stdin");
        roundtrip(&mut t, "{}").await;
        let report = finish(t).await;
        // `finish` dropped the transport without receiving the report: the tap gets it then.
        seen.until_let_go().await;
        let lines = seen.lines();
        assert_eq!(lines.len(), 6, "{lines:#?}");
        assert!(lines[0].starts_with("notice Pollution"), "{lines:#?}");
        assert_eq!(lines[1], "received Starting server on stdio...");
        assert_eq!(lines[2], "received Listening for JSON-RPC on stdin");
        assert_eq!(lines[3], "sent {}");
        assert_eq!(lines[4], "received {}");
        assert_eq!(lines[5], format!("exited {:?}", report.exit));
        let events = seen.events.lock().unwrap();
        assert!(events.windows(2).all(|w| w[0].0 <= w[1].0), "{events:#?}");
    });
}

#[test]
fn c40_every_send_and_receive_path_is_tapped() {
    run(async {
        let seen = Seen::default();
        let mut config = config();
        config.tap(seen.tap());
        let t = start(&misbehave(&["echo"]), config);
        let pid = pid_of(&t);
        let (mut tx, mut rx) = t.split();
        // Refused (a line break in an NDJSON message): not sent, not seen.
        let refused = within(STEP, "a refused send", tx.send("a\nb")).await;
        assert!(refused.is_err(), "{refused:?}");
        within(STEP, "send_many", tx.send_many(["1", "2"]))
            .await
            .expect("send_many");
        within(
            STEP,
            "sink",
            SinkExt::send(&mut tx, Bytes::from_static(b"3")),
        )
        .await
        .expect("the sink");
        let mut batch = Vec::new();
        while batch.len() < 3 {
            within(STEP, "recv_many", rx.recv_many(&mut batch, 3)).await;
        }
        let mut sent: Vec<String> = seen.lines();
        sent.retain(|l| l.starts_with("sent"));
        assert_eq!(sent, ["sent 1", "sent 2", "sent 3"]);
        let mut received = seen.lines();
        received.retain(|l| l.starts_with("received"));
        assert_eq!(received, ["received 1", "received 2", "received 3"]);
        let (_, report) = finish_split(pid, tx, rx).await;
        assert!(report.success(), "{report}");
        seen.until_let_go().await;
        let exits = seen
            .lines()
            .iter()
            .filter(|l| l.starts_with("exited"))
            .count();
        assert_eq!(exits, 1, "the exit is shown once: {:#?}", seen.lines());
    });
}

#[test]
fn c40_a_panicking_tap_leaves_the_transport_working_and_the_child_reaped() {
    run(async {
        let calls = Arc::new(Mutex::new(0));
        let counted = Arc::clone(&calls);
        let mut config = config();
        config.tap(tap::from_fn(move |_, _| {
            *counted.lock().unwrap() += 1;
            panic!("a tap that fails");
        }));
        let mut t = start(&misbehave(&["echo-then-log", "0"]), config);
        roundtrip(&mut t, "{}").await;
        roundtrip(&mut t, "{}").await;
        let report = finish(t).await;
        assert!(report.success(), "{report}");
        assert!(!report.stderr_callback_panicked, "{report}");
        assert_eq!(*calls.lock().unwrap(), 1, "called once, then left alone");
    });
}
