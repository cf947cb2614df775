//! Caller → child stdin: what may be sent, batching, backpressure, cancellation (C06–C08).

use std::collections::BTreeSet;
use std::time::{Duration, Instant};

use bytes::Bytes;
use childwire_conformance::lines::{numbered_line, parse_numbered};
use futures_util::{FutureExt, SinkExt};

use super::rt::{self, Closed, EncodeErrorKind, Received, SendErrorKind};
use super::support::*;

#[test]
fn c06_c27_empty_payload_or_one_with_newline_or_cr_is_refused_and_handed_back() {
    run(async {
        let mut t = start_misbehave(&["echo"]);
        let invalid = SendErrorKind::Invalid;
        let cases: [(&[u8], SendErrorKind); 4] = [
            (b"{\"a\":\n1}", invalid(EncodeErrorKind::Newline { at: 5 })),
            (
                b"{\"a\":1}\r",
                invalid(EncodeErrorKind::CarriageReturn { at: 7 }),
            ),
            (b"two\nlines\n", invalid(EncodeErrorKind::Newline { at: 3 })),
            (b"", invalid(EncodeErrorKind::Empty)),
        ];
        for (payload, kind) in cases {
            let err = within(STEP, "send", t.send(payload.to_vec()))
                .await
                .expect_err("a payload with a line break must be refused");
            assert_eq!(err.kind(), kind, "{payload:?}");
            assert_eq!(err.into_payload(), payload, "handed back whole");
        }
        // Nothing of the refused payloads reached the child: the next echo is the next message.
        roundtrip(&mut t, "{\"clean\":true}").await;
        let report = finish(t).await;
        assert_eq!(report.counters.messages_out, 1);
        assert_eq!(report.counters.messages_in, 1);
    });
}

#[test]
fn c06_payload_over_the_send_limit_is_refused_and_handed_back() {
    run(async {
        let mut config = config();
        config.max_send_size(1024);
        let mut t = start(&misbehave(&["echo"]), config);
        let exact = numbered_line(0, 1024);
        let over = numbered_line(1, 1025);
        let err = within(STEP, "send", t.send(over.clone()))
            .await
            .expect_err("over the limit");
        assert!(
            matches!(
                err.kind(),
                SendErrorKind::Invalid(EncodeErrorKind::TooLarge {
                    len: 1025,
                    max: 1024
                })
            ),
            "{:?}",
            err.kind()
        );
        assert_eq!(err.into_payload(), Bytes::from(over));
        within(STEP, "send", t.send(exact.clone()))
            .await
            .expect("a payload of exactly the limit is accepted");
        assert_eq!(message(&mut t).await, exact);
        finish(t).await;
    });
}

#[test]
fn c07_a_single_message_is_flushed_without_waiting_for_more() {
    run(async {
        let mut t = start_misbehave(&["echo"]);
        // Ping-pong: each answer needs the previous message written out while nothing else is
        // queued. A writer that waits to fill a batch would stall here.
        for n in 0..300 {
            roundtrip(&mut t, &format!("{{\"ping\":{n}}}")).await;
        }
        finish(t).await;
    });
}

#[test]
fn c07_a_burst_of_messages_arrives_complete_and_in_order() {
    run(async {
        const MESSAGES: u64 = 20_000;
        let t = start_misbehave(&["echo"]);
        let pid = pid_of(&t);
        let (tx, mut rx) = t.split();
        let receiver = rt::spawn(async move {
            for n in 0..MESSAGES {
                match within(STEP, "recv", rx.recv()).await {
                    Some(Received::Message(m)) => assert_eq!(parse_numbered(&m), Some(n)),
                    other => panic!("message {n}: got {other:?}"),
                }
            }
            rx
        });
        for n in 0..MESSAGES {
            within(STEP, "send", tx.send(numbered_line(n, 120)))
                .await
                .expect("send");
        }
        let rx = within(STEP, "the receiver", receiver).await;
        let (rest, report) = finish_split(pid, tx, rx).await;
        assert!(rest.is_empty());
        assert_eq!(report.counters.messages_out, MESSAGES);
    });
}

/// How long a send waits for room before the pipe and queue count as standing still.
const STANDING: Duration = Duration::from_millis(300);

/// Most bytes a child that never reads may be handed before `send` waits: the queue's high-water
/// mark, the pipe buffer (64 KiB by default, up to 1 MiB if an adapter enlarges it) and the one
/// message that crossed the mark.
fn backpressure_bound(high_water: usize, message: usize) -> usize {
    high_water + 1024 * 1024 + message
}

#[test]
fn c07_a_child_that_never_reads_makes_send_wait_with_bounded_memory() {
    run(async {
        const HIGH_WATER: usize = 64 * 1024;
        let mut config = config();
        config.send_high_water(HIGH_WATER);
        config.stdin_grace(Duration::from_millis(100));
        let mut t = start(&misbehave(&["no-read"]), config);
        assert_eq!(text(&mut t).await, "{\"ready\":true}");
        let payload = numbered_line(0, 16 * 1024);
        let mut accepted = 0;
        loop {
            match rt::timeout(STANDING, t.send(payload.clone())).await {
                Some(Ok(())) => {
                    accepted += payload.len();
                    assert!(
                        accepted <= backpressure_bound(HIGH_WATER, payload.len()),
                        "send never waits: {accepted} bytes accepted for a child that reads nothing"
                    );
                }
                Some(Err(err)) => panic!("without a write timeout, send waits: {err}"),
                // Waiting (and now cancelled, which C08 allows): backpressure works.
                None => break,
            }
        }
        assert!(
            accepted >= HIGH_WATER / 2,
            "only {accepted} bytes were accepted"
        );
        // no-read ignores stdin, so SIGTERM ends it (Windows: the break, or the job terminated).
        let report = finish(t).await;
        assert_ended_after_stdin_grace(&report);
    });
}

#[test]
fn c07_the_sink_goes_past_the_bound_by_one_message_at_most_when_another_sender_took_the_room() {
    run(async {
        const LEN: usize = 16 * 1024;
        const TRIES: usize = 16;
        let mut config = config();
        config.send_high_water(64 * 1024);
        config.stdin_grace(Duration::from_millis(100));
        let mut t = start(&misbehave(&["no-read"]), config);
        assert_eq!(text(&mut t).await, "{\"ready\":true}");
        let pid = pid_of(&t);
        let (tx, rx) = t.split();
        let mut sink = tx.clone();
        // Another sender fills the pipe and the queue, the child reading nothing, until its
        // next send waits for room that does not come. Refused at once is not enough: a writer
        // may still be moving bytes on (Windows writes a child's stdin from a thread, and
        // elsewhere the background flush may hold the pipe), and the room it opens is real.
        // The sink did not look at the room since.
        let payload = numbered_line(0, LEN);
        let mut accepted = 0;
        while let Some(sent) = rt::timeout(STANDING, tx.send(payload.clone())).await {
            sent.expect("send");
            accepted += LEN;
            assert!(
                accepted <= backpressure_bound(64 * 1024, LEN),
                "never refused"
            );
        }
        // Fed now, the sink may queue one message over the bound, as when another sender takes
        // the room between its `poll_ready` and its `start_send`; then it waits, however often
        // it is asked.
        let fed = (0..TRIES)
            .filter(|_| {
                sink.feed(Bytes::from(payload.clone()))
                    .now_or_never()
                    .is_some()
            })
            .count();
        assert!(fed <= 1, "{fed} messages fed past a full queue");
        drop(sink);
        let (_, report) = finish_split(pid, tx, rx).await;
        assert_ended_after_stdin_grace(&report);
    });
}

#[test]
fn c07_write_timeout_turns_a_stalled_child_into_an_error() {
    run(async {
        const TIMEOUT: Duration = Duration::from_millis(200);
        let mut config = config();
        config.send_high_water(64 * 1024);
        config.write_timeout(Some(TIMEOUT));
        config.stdin_grace(Duration::from_millis(100));
        let mut t = start(&misbehave(&["no-read"]), config);
        assert_eq!(text(&mut t).await, "{\"ready\":true}");
        let payload = numbered_line(0, 16 * 1024);
        let mut accepted = 0;
        let started = Instant::now();
        let err = loop {
            match within(
                STEP,
                "a send to a stalled child fails",
                t.send(payload.clone()),
            )
            .await
            {
                Ok(()) => {
                    accepted += payload.len();
                    assert!(accepted <= backpressure_bound(64 * 1024, payload.len()));
                }
                Err(err) => break err,
            }
        };
        match err.kind() {
            SendErrorKind::Closed(Closed::Stalled { after }) => {
                assert!(after >= TIMEOUT, "stalled after only {after:?}");
            }
            other => panic!("expected a stall error, got {other:?}: {err}"),
        }
        // The clock starts at the last write progress, which came after `started`.
        assert!(started.elapsed() >= TIMEOUT);
        assert!(!err.to_string().is_empty());
        let report = finish(t).await;
        assert_ended_after_stdin_grace(&report);
    });
}

#[test]
fn c08_a_cancelled_send_queued_all_of_the_message_or_nothing() {
    run(async {
        // A child that reads one line per 10 ms and a small queue: most sends have to wait, and
        // a 2 ms timer cancels many of them while they do.
        const MESSAGES: u64 = 80;
        const LEN: usize = 4096;
        const END: u64 = 1_000_000;
        let mut config = config();
        config.send_high_water(2 * LEN);
        let t = start(&misbehave(&["slow-reader"]), config);
        let pid = pid_of(&t);
        let (tx, mut rx) = t.split();
        let receiver = rt::spawn(async move {
            let mut lines = Vec::new();
            loop {
                match within(STEP, "recv", rx.recv()).await {
                    Some(Received::Message(m)) if parse_numbered(&m) == Some(END) => {
                        return (lines, rx);
                    }
                    Some(Received::Message(m)) => lines.push(m.bytes().to_vec()),
                    other => panic!("expected an echo, got {other:?}"),
                }
            }
        });
        let mut sent = BTreeSet::new();
        let mut cancelled = BTreeSet::new();
        for n in 0..MESSAGES {
            match rt::timeout(Duration::from_millis(2), tx.send(numbered_line(n, LEN))).await {
                Some(Ok(())) => {
                    sent.insert(n);
                }
                Some(Err(err)) => panic!("send {n}: {err}"),
                None => {
                    cancelled.insert(n);
                }
            }
        }
        within(STEP, "the end marker", tx.send(numbered_line(END, LEN)))
            .await
            .expect("send");
        let (lines, rx) = within(STEP, "echoes up to the marker", receiver).await;
        assert!(
            !cancelled.is_empty(),
            "no send was cancelled; the test proved nothing"
        );
        let mut previous = None;
        for line in &lines {
            let n = parse_numbered(line)
                .unwrap_or_else(|| panic!("a torn line reached the child: {line:?}"));
            assert_eq!(line, &numbered_line(n, LEN), "message {n} damaged");
            assert!(previous < Some(n), "message {n} out of order or twice");
            assert!(
                sent.contains(&n) || cancelled.contains(&n),
                "message {n} never sent"
            );
            previous = Some(n);
        }
        let received: BTreeSet<u64> = lines.iter().filter_map(|l| parse_numbered(l)).collect();
        let missing: Vec<_> = sent.difference(&received).collect();
        assert!(
            missing.is_empty(),
            "completed sends never arrived: {missing:?}"
        );
        finish_split(pid, tx, rx).await;
    });
}

/// A flood sent with nobody receiving reaches the child whole: every time the pipe is full, what
/// a send leaves behind it is the background task's to write, though the send that met the full
/// pipe got its room and went on. (It used to stay queued once the last send returned, unless a
/// `recv` came to write it: the child waited for bytes that were never written.)
#[test]
fn c07_a_flood_with_nobody_receiving_reaches_the_child_whole() {
    run_for(Duration::from_secs(300), async {
        // The bytes go missing only when the last send met a full pipe at the wrong moment: in
        // one round of 20 with the fault back in (Tokio, two workers, this machine).
        const MESSAGES: usize = 8_000;
        const ROUNDS: usize = 60;
        // 199 bytes and the newline: 1.6 MB a round, 24 pipe-fulls, 1.5 times the high-water mark.
        let message = format!(r#"{{"data":"{}"}}"#, "x".repeat(199 - 11));
        let total = MESSAGES * (message.len() + 1);
        for round in 0..ROUNDS {
            // Exits once it has read every byte sent, and only then.
            let mut config = config();
            config.send_high_water(1 << 20);
            let t = start(&misbehave(&["read-bytes", &total.to_string()]), config);
            let exit = t.exit_handle();
            for _ in 0..MESSAGES {
                within(STEP, "send", t.send(message.as_bytes().to_vec()))
                    .await
                    .unwrap_or_else(|err| panic!("round {round}: send: {err}"));
            }
            let report = within(STEP, "the child reading every byte sent", exit.wait())
                .await
                .unwrap_or_else(|| panic!("round {round}: no report"));
            assert!(report.success(), "round {round}: {report}");
            assert_eq!(
                report.counters.messages_out as usize, MESSAGES,
                "round {round}"
            );
        }
    });
}
