use std::sync::{Arc, Mutex};

use bytes::Bytes;
use childwire_core::pollution::PollutionDetector;
use childwire_core::{EndedBy, Malformed, MalformedReason, Oversized};
use serde_json::{Value, json};

use super::*;

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
    fn text(&self) -> String {
        String::from_utf8(self.0.lock().unwrap().clone()).expect("a recording is UTF-8")
    }

    /// Each line, read by serde_json.
    fn records(&self) -> Vec<Value> {
        self.text()
            .lines()
            .map(|line| serde_json::from_str(line).unwrap_or_else(|err| panic!("{err}: {line}")))
            .collect()
    }
}

/// A recorder of one event of each kind, flushed.
fn record(events: &[TapEvent<'_>]) -> (Shared, Vec<Value>) {
    let out = Shared::default();
    let recorder = Recorder::new(out.clone());
    let at = Instant::now();
    for (i, event) in events.iter().enumerate() {
        recorder.event(at + Duration::from_micros(1500 * i as u64), *event);
    }
    recorder.flush().unwrap();
    let records = out.records();
    (out, records)
}

#[test]
fn a_json_message_is_embedded_byte_for_byte_both_ways() {
    let sent = br#"{"jsonrpc":"2.0", "id":1,"method":"ping"}"#;
    let received = br#"{"jsonrpc":"2.0","id":1,"result":{"x":[1,2.5e3,null]}}"#;
    let (out, records) = record(&[TapEvent::Sent(sent), TapEvent::Received(received)]);
    assert_eq!(records[0]["dir"], "to_child");
    assert_eq!(records[0]["msg"]["method"], "ping");
    assert_eq!(records[1]["dir"], "from_child");
    assert_eq!(records[1]["msg"]["result"]["x"], json!([1, 2500.0, null]));
    let text = out.text();
    let lines: Vec<&str> = text.lines().collect();
    assert!(lines[0].ends_with(r#","msg":{"jsonrpc":"2.0", "id":1,"method":"ping"}}"#));
    assert!(lines[1].contains(std::str::from_utf8(received).unwrap()));
}

#[test]
fn anything_else_is_a_string_escaped_and_made_valid_utf8() {
    let nasty = b"say \"hi\" \\ \x01\x1f\t\x7f \xff\xfe end";
    let (_, records) = record(&[
        TapEvent::Received(nasty),
        TapEvent::Received(b"Starting server on stdio..."),
        TapEvent::Sent(b""),
    ]);
    assert_eq!(
        records[0]["text"],
        "say \"hi\" \\ \u{1}\u{1f}\t\u{7f} \u{fffd}\u{fffd} end"
    );
    assert!(records[0].get("msg").is_none());
    assert_eq!(records[1]["text"], "Starting server on stdio...");
    assert_eq!(records[2]["text"], "");
}

#[test]
fn a_pretty_printed_message_stays_one_record_with_the_same_value() {
    let pretty = b"{\r\n  \"id\": 1,\n  \"result\": {\"text\": \"a\\nb\"}\n}";
    let (out, records) = record(&[TapEvent::Received(pretty)]);
    assert_eq!(out.text().lines().count(), 1);
    assert_eq!(
        records[0]["msg"],
        json!({"id": 1, "result": {"text": "a\nb"}})
    );
}

#[test]
fn json_that_strict_readers_refuse_goes_as_text() {
    let deep = format!("{}{}", "[".repeat(200), "]".repeat(200));
    let huge = r#"{"x":1e400}"#;
    let (_, records) = record(&[
        TapEvent::Received(deep.as_bytes()),
        TapEvent::Received(huge.as_bytes()),
        TapEvent::Received(br#"{"small":1e-7}"#),
    ]);
    assert_eq!(records[0]["text"], deep);
    assert_eq!(records[1]["text"], huge);
    assert_eq!(records[2]["msg"]["small"], 1e-7);
}

#[test]
fn notices_stderr_and_the_exit_have_their_fields() {
    let oversized = Oversized::new(5_000_000, Bytes::from_static(b"{\"id\":7"));
    let malformed = Malformed::new(
        MalformedReason::MissingLength,
        Bytes::from_static(b"X-Other: 1"),
    );
    let pollution = PollutionDetector::default()
        .observe(b"Starting \"server\"\x01")
        .notice
        .expect("a banner is named");
    let report = ExitReport::new(Exit::Code(3), EndedBy::OnItsOwn, Duration::from_millis(500));
    let killed = ExitReport::new(Exit::Signal(9), EndedBy::Sigkill, Duration::from_secs(2));
    let (_, records) = record(&[
        TapEvent::Notice(Notice::Oversized(&oversized)),
        TapEvent::Notice(Notice::Malformed(&malformed)),
        TapEvent::Notice(Notice::Pollution(&pollution)),
        TapEvent::Stderr {
            line: b"INFO: ready",
            level: Some(Level::Info),
        },
        TapEvent::Stderr {
            line: b"panic: \"x\"",
            level: Some(Level::Fatal),
        },
        TapEvent::Stderr {
            line: b"plain \xff",
            level: None,
        },
        TapEvent::Exited(&report),
        TapEvent::Exited(&killed),
    ]);
    assert_eq!(records[0]["dir"], "from_child");
    assert_eq!(records[0]["oversized"], 5_000_000);
    assert!(records[0].get("msg").is_none() && records[0].get("text").is_none());

    assert_eq!(records[1]["dir"], "notice");
    assert_eq!(records[1]["kind"], "malformed");
    assert_eq!(records[1]["text"], malformed.to_string());

    assert_eq!(records[2]["dir"], "notice");
    assert_eq!(records[2]["kind"], "pollution");
    assert_eq!(records[2]["text"], pollution.to_string());
    assert_eq!(records[2]["bytes"], "Starting \"server\"\u{1}");

    assert_eq!(records[3]["dir"], "stderr");
    assert_eq!(records[3]["line"], "INFO: ready");
    assert_eq!(records[3]["level"], "info");
    assert_eq!(records[4]["line"], "panic: \"x\"");
    assert_eq!(records[4]["level"], "error");
    assert_eq!(records[5]["line"], "plain \u{fffd}");
    assert_eq!(records[5]["level"], Value::Null);

    assert_eq!(records[6]["dir"], "exit");
    assert_eq!(records[6]["exit_code"], 3);
    assert_eq!(records[6]["signal"], Value::Null);
    assert_eq!(records[6]["report"], report.to_string());
    // A second exit is a second child's.
    assert_eq!(records[7]["dir"], "generation");
    assert_eq!(records[7]["generation"], 2);
    assert_eq!(records[8]["exit_code"], Value::Null);
    assert_eq!(records[8]["signal"], 9);
    assert_eq!(records[8]["report"], killed.to_string());
}

#[test]
fn t_counts_from_the_first_record_in_microseconds_and_never_goes_back() {
    let out = Shared::default();
    let recorder = Recorder::new(out.clone());
    let start = Instant::now();
    let late = start + Duration::from_micros(2_004_512);
    recorder.event(start, TapEvent::Sent(b"{}"));
    recorder.event(late, TapEvent::Received(b"{}"));
    // Taken before the last one, written after it.
    recorder.event(start + Duration::from_secs(1), TapEvent::Received(b"{}"));
    recorder.flush().unwrap();
    let text = out.text();
    let t: Vec<&str> = text
        .lines()
        .map(|line| &line[line.find("\"t\":").unwrap() + 4..line.find(",\"ts\"").unwrap()])
        .collect();
    assert_eq!(t, ["0.000000", "2.004512", "2.004512"]);
    let ts: Vec<String> = out
        .records()
        .iter()
        .map(|r| r["ts"].as_str().unwrap().to_owned())
        .collect();
    assert_eq!(ts[0].len(), "2026-11-25T09:30:00.000100Z".len());
    assert!(
        ts[0].ends_with('Z') && ts[0] < ts[1] && ts[1] == ts[2],
        "{ts:?}"
    );
}

#[test]
fn what_is_queued_is_written_on_drop() {
    let out = Shared::default();
    let recorder = Recorder::new(out.clone());
    let at = Instant::now();
    recorder.event(at, TapEvent::Sent(b"{}"));
    let report = ExitReport::new(Exit::Code(0), EndedBy::StdinClose, Duration::ZERO);
    recorder.event(at, TapEvent::Exited(&report));
    recorder.event(at, TapEvent::Received(b"{}"));
    drop(recorder);
    assert_eq!(out.text().lines().count(), 4, "{}", out.text());
}

/// A writer that blocks until the test opens its gate: a pipe nobody reads.
#[derive(Clone, Default)]
struct Gated {
    out: Shared,
    open: Arc<(Mutex<bool>, std::sync::Condvar)>,
    /// A write waits at the gate.
    blocked: Arc<(Mutex<bool>, std::sync::Condvar)>,
}

impl Gated {
    fn open(&self) {
        *self.open.0.lock().unwrap() = true;
        self.open.1.notify_all();
    }

    /// Waits (10 s at most) until the recorder's writer waits at the gate.
    fn wait_until_blocked(&self) {
        let deadline = Instant::now() + std::time::Duration::from_secs(10);
        let mut blocked = self.blocked.0.lock().unwrap();
        while !*blocked {
            let left = deadline.saturating_duration_since(Instant::now());
            assert!(!left.is_zero(), "the writer never reached the gate");
            blocked = self.blocked.1.wait_timeout(blocked, left).unwrap().0;
        }
    }
}

impl Write for Gated {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        let mut open = self.open.0.lock().unwrap();
        if !*open {
            *self.blocked.0.lock().unwrap() = true;
            self.blocked.1.notify_all();
        }
        while !*open {
            open = self.open.1.wait(open).unwrap();
        }
        self.out.write(buf)
    }

    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

#[test]
fn a_blocked_writer_costs_the_caller_nothing_and_the_recording_counts_what_was_dropped() {
    let gated = Gated::default();
    let recorder = Recorder::with_queue_limit(gated.clone(), 64 * 1024);
    let at = Instant::now();
    let message = format!(r#"{{"id":1,"result":"{}"}}"#, "x".repeat(1000));
    let started = Instant::now();
    for _ in 0..10_000 {
        recorder.event(at, TapEvent::Received(message.as_bytes()));
    }
    // 10 MB of records against a 64 KiB queue: most are dropped, at once.
    assert!(
        started.elapsed() < RECORDER_STALL,
        "{:?}",
        started.elapsed()
    );
    let dropped = recorder.dropped();
    assert!((9_000..10_000).contains(&dropped), "{dropped}");
    // A flush waits for a writer that moves, not for one that takes nothing.
    let err = recorder.flush().unwrap_err();
    assert_eq!(err.kind(), io::ErrorKind::TimedOut);

    gated.open();
    recorder.event(at, TapEvent::Sent(b"{}"));
    recorder.flush().unwrap();
    let records = gated.out.records();
    let kept = records.iter().filter(|r| r["dir"] == "from_child").count() as u64;
    assert_eq!(kept + dropped, 10_000);
    // Each notice counts a run of dropped records (one per time the queue
    // filled up: the writer may have taken a batch before it blocked).
    let notices: Vec<&Value> = records.iter().filter(|r| r["dir"] == "notice").collect();
    assert!(!notices.is_empty());
    assert!(notices.iter().all(|notice| notice["kind"] == "dropped"));
    let counted: u64 = notices.iter().map(|n| n["records"].as_u64().unwrap()).sum();
    assert_eq!(counted, dropped);
    // It stands where the records are missing: after the last one kept,
    // before the next.
    let last = records.len() - 1;
    assert_eq!(records[last]["dir"], "to_child");
    assert_eq!(records[last - 1]["kind"], "dropped");
}

#[test]
fn records_dropped_at_the_end_are_counted_on_drop() {
    let gated = Gated::default();
    let recorder = Recorder::with_queue_limit(gated.clone(), 1024);
    let at = Instant::now();
    // The writer takes the first record and waits at the gate: from then on
    // the queue only fills, and the records past its limit, the last ones,
    // are dropped.
    recorder.event(at, TapEvent::Received(&[b'1'; 100]));
    gated.wait_until_blocked();
    for _ in 1..100 {
        recorder.event(at, TapEvent::Received(&[b'1'; 100]));
    }
    assert!(recorder.dropped() > 0);
    let opener = gated.clone();
    let open = std::thread::spawn(move || opener.open());
    drop(recorder);
    open.join().unwrap();
    let records = gated.out.records();
    let last = records.last().unwrap();
    assert_eq!(last["kind"], "dropped", "{records:?}");
    let kept = records.iter().filter(|r| r["dir"] == "from_child").count() as u64;
    assert_eq!(kept + last["records"].as_u64().unwrap(), 100);
}

#[test]
fn the_exit_record_is_queued_without_waiting_for_a_stuck_writer_and_a_flush_writes_it() {
    let gated = Gated::default();
    let recorder = Recorder::new(gated.clone());
    let at = Instant::now();
    recorder.event(at, TapEvent::Sent(b"{}"));
    gated.wait_until_blocked();
    let report = ExitReport::new(Exit::Code(0), EndedBy::StdinClose, Duration::ZERO);
    // The tap is called from the receiver's poll: the exit record waits for
    // nothing there, whatever the writer does (it took nothing, and would
    // have been waited for up to the stall).
    let started = Instant::now();
    recorder.event(at, TapEvent::Exited(&report));
    assert!(
        started.elapsed() < RECORDER_STALL / 2,
        "{:?}",
        started.elapsed()
    );
    assert_eq!(gated.out.text(), "");
    gated.open();
    recorder.flush().unwrap();
    let records = gated.out.records();
    assert_eq!(records.len(), 2, "{records:?}");
    assert_eq!(records[1]["dir"], "exit", "{records:?}");
}

#[test]
fn a_writer_that_never_moves_does_not_hold_the_drop_past_the_stall() {
    let gated = Gated::default();
    let recorder = Recorder::new(gated.clone());
    let at = Instant::now();
    recorder.event(at, TapEvent::Sent(b"{}"));
    let report = ExitReport::new(Exit::Code(0), EndedBy::StdinClose, Duration::ZERO);
    let started = Instant::now();
    recorder.event(at, TapEvent::Exited(&report));
    drop(recorder);
    let waited = started.elapsed();
    assert!(waited < 3 * RECORDER_STALL, "{waited:?}");
    // Its thread is still there: it writes once the writer moves.
    gated.open();
    let deadline = Instant::now() + Duration::from_secs(30);
    while gated.out.text().lines().count() < 2 {
        assert!(Instant::now() < deadline, "{}", gated.out.text());
        std::thread::yield_now();
    }
}

#[test]
fn a_new_child_after_an_exit_starts_a_generation() {
    let out = Shared::default();
    let recorder = Recorder::new(out.clone());
    let at = Instant::now();
    let ended = ExitReport::new(Exit::Code(1), EndedBy::OnItsOwn, Duration::ZERO);
    recorder.event(at, TapEvent::Sent(b"{}"));
    recorder.event(at, TapEvent::Exited(&ended));
    recorder.event(at, TapEvent::Sent(b"{}"));
    recorder.event(at, TapEvent::Exited(&ended));
    recorder.event(
        at,
        TapEvent::Stderr {
            line: b"x",
            level: None,
        },
    );
    recorder.flush().unwrap();
    let records = out.records();
    let dirs: Vec<&str> = records.iter().map(|r| r["dir"].as_str().unwrap()).collect();
    assert_eq!(
        dirs,
        [
            "to_child",
            "exit",
            "generation",
            "to_child",
            "exit",
            "generation",
            "stderr"
        ]
    );
    assert_eq!(records[2]["generation"], 2);
    assert_eq!(records[5]["generation"], 3);
}

#[test]
fn a_failed_write_stops_recording_and_flush_says_so() {
    struct Broken;
    impl Write for Broken {
        fn write(&mut self, _: &[u8]) -> io::Result<usize> {
            Err(io::Error::new(io::ErrorKind::BrokenPipe, "gone"))
        }
        fn flush(&mut self) -> io::Result<()> {
            Ok(())
        }
    }
    let recorder = Recorder::new(Broken);
    let at = Instant::now();
    recorder.event(at, TapEvent::Sent(b"{}"));
    let err = recorder.flush().unwrap_err();
    assert_eq!(err.kind(), io::ErrorKind::BrokenPipe);
    recorder.event(at, TapEvent::Sent(b"{}"));
    assert_eq!(
        recorder.flush().unwrap_err().kind(),
        io::ErrorKind::BrokenPipe
    );
}

#[test]
fn records_written_for_a_proxy_name_their_direction() {
    let out = Shared::default();
    let recorder = Recorder::new(out.clone());
    let at = Instant::now();
    recorder.message(at, Direction::ToChild, br#"{"id":1}"#);
    recorder.oversized(at, Direction::ToChild, 42);
    recorder.flush().unwrap();
    let records = out.records();
    assert_eq!(records[0]["dir"], "to_child");
    assert_eq!(records[0]["msg"]["id"], 1);
    assert_eq!(records[1]["dir"], "to_child");
    assert_eq!(records[1]["oversized"], 42);
}

#[test]
fn timestamps_are_rfc3339_utc() {
    let at = |secs, micros| UNIX_EPOCH + Duration::from_secs(secs) + Duration::from_micros(micros);
    assert_eq!(rfc3339(at(0, 0)), "1970-01-01T00:00:00.000000Z");
    assert_eq!(
        rfc3339(at(1_700_000_000, 42)),
        "2023-11-14T22:13:20.000042Z"
    );
    // A leap day, and the last second of a year.
    assert_eq!(rfc3339(at(951_782_400, 0)), "2000-02-29T00:00:00.000000Z");
    assert_eq!(rfc3339(at(1_735_689_599, 0)), "2024-12-31T23:59:59.000000Z");
}
