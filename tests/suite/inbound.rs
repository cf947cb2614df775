//! Child stdout → caller: framing, limits, bytes as they came, nothing lost (C01–C05).

use std::time::Duration;

use childwire_conformance::lines::{numbered_line, parse_numbered};
use futures_util::FutureExt;

use super::rt::{self, Exit, Received};
use super::support::*;

#[test]
fn c01_crlf_line_endings_lose_exactly_one_cr() {
    run(async {
        let mut t = start_misbehave(&["echo-crlf"]);
        roundtrip(&mut t, "{\"jsonrpc\":\"2.0\",\"id\":1}").await;
        roundtrip(&mut t, "plain").await;
        let report = finish(t).await;
        assert_eq!(report.counters.messages_in, 2);
        assert_eq!(report.counters.blank_lines, 0);
    });
}

#[test]
fn c01_blank_lines_are_skipped_and_counted() {
    run(async {
        let mut t = start_misbehave(&["blank-lines"]);
        // "\n\n{"a":1}\n\r\n\n{"b":2}\n": "\r\n" is blank too once its CR is gone.
        assert_eq!(text(&mut t).await, "{\"a\":1}");
        assert_eq!(text(&mut t).await, "{\"b\":2}");
        roundtrip(&mut t, "after").await;
        let report = finish(t).await;
        assert_eq!(report.counters.blank_lines, 4);
        assert_eq!(report.counters.messages_in, 3);
    });
}

/// `long-line LEN` on a default transport: one notice for the whole line, then the session goes on.
async fn survive_long_line(len: u64) {
    let mut t = start_misbehave(&["long-line", &len.to_string()]);
    match within(Duration::from_secs(600), "the oversized notice", t.recv()).await {
        Some(Received::Oversized(o)) => {
            assert_eq!(
                o.len, len,
                "the notice counts every byte before the newline"
            );
            assert_eq!(o.head.len(), 1024, "the head is the line's first KiB");
            assert!(o.head.iter().all(|&b| b == b'a'));
        }
        other => panic!("expected an oversized notice, got {other:?}"),
    }
    assert_eq!(text(&mut t).await, "{\"after\":\"long\"}");
    roundtrip(&mut t, "still talking").await;
    let report = finish(t).await;
    assert_eq!(report.counters.oversized, 1);
    assert_eq!(report.counters.messages_in, 2);
}

#[test]
fn c02_line_over_the_limit_becomes_one_notice_and_the_next_line_arrives() {
    run(survive_long_line(17 * 1024 * 1024));
}

#[test]
fn c02_line_of_256_mib_without_newline_is_survived() {
    // Behaviour only: the memory bound is measured by the benchmark, in a process of its own.
    run_for(
        Duration::from_secs(900),
        survive_long_line(256 * 1024 * 1024),
    );
}

#[test]
fn c02_limit_is_inclusive_and_the_head_carries_the_start_of_the_line() {
    run(async {
        const MAX: usize = 1000;
        for len in [MAX, MAX + 1] {
            let mut config = config();
            config.max_message_size(MAX);
            let mut t = start(&misbehave(&["flood", "3", &len.to_string()]), config);
            for n in 0..3 {
                let line = numbered_line(n, len);
                match recv(&mut t).await {
                    Received::Message(m) if len == MAX => assert_eq!(m.bytes()[..], line[..]),
                    // Shorter than a KiB, so the head is the whole line: enough to find an id.
                    Received::Oversized(o) if len > MAX => {
                        assert_eq!(o.len, len as u64);
                        assert_eq!(o.head[..], line[..]);
                    }
                    other => panic!("line of {len} bytes with limit {MAX}: got {other:?}"),
                }
            }
            roundtrip(&mut t, "next").await;
            finish(t).await;
        }
    });
}

#[test]
fn c03_invalid_utf8_is_delivered_as_bytes_and_the_session_goes_on() {
    run(async {
        let mut t = start_misbehave(&["invalid-utf8"]);
        let expected: [&[u8]; 3] = [
            b"\xff\xfe bad",
            b"{\"s\":\"\xc3\x28\"}",
            b"\xed\xa0\x80 surrogate",
        ];
        for bytes in expected {
            match recv(&mut t).await {
                Received::Message(m) => {
                    assert_eq!(m.bytes()[..], bytes[..]);
                    assert!(m.as_str().is_err(), "the text view is checked");
                }
                other => panic!("expected a message, got {other:?}"),
            }
        }
        match recv(&mut t).await {
            Received::Message(m) => assert_eq!(m.as_str(), Ok("{\"valid\":true}")),
            other => panic!("expected a message, got {other:?}"),
        }
        roundtrip(&mut t, "ok").await;
        finish(t).await;
    });
}

#[test]
fn c03_a_flood_arrives_byte_exact_and_in_order() {
    run(async {
        const LINES: u64 = 20_000;
        const LEN: usize = 200;
        let mut t = start_misbehave(&["flood", &LINES.to_string(), &LEN.to_string()]);
        for n in 0..LINES {
            let got = message(&mut t).await;
            if got != numbered_line(n, LEN) {
                panic!("line {n}: got {:?}", String::from_utf8_lossy(&got));
            }
        }
        roundtrip(&mut t, "done").await;
        let report = finish(t).await;
        assert_eq!(report.counters.messages_in, LINES + 1);
    });
}

#[test]
fn c04_unterminated_last_line_is_delivered_and_marked() {
    run(async {
        let mut t = start_misbehave(&["unterminated"]);
        for expected in ["one", "two"] {
            match recv(&mut t).await {
                Received::Message(m) => {
                    assert_eq!(m.as_str(), Ok(expected));
                    assert!(m.is_terminated());
                }
                other => panic!("expected {expected:?}, got {other:?}"),
            }
        }
        match recv(&mut t).await {
            Received::Message(m) => {
                assert_eq!(m.as_str(), Ok("last-without-newline"));
                assert!(!m.is_terminated(), "a final line without newline is marked");
            }
            other => panic!("expected the unterminated line, got {other:?}"),
        }
        let pid = pid_of(&t);
        let (rest, report) = drain_to_exit(&mut t).await;
        assert!(rest.is_empty());
        assert_eq!(report.exit, Exit::Code(0));
        assert_reaped(pid).await;
    });
}

#[test]
fn c04_every_line_written_before_exit_arrives_before_the_report() {
    run(async {
        const LINES: usize = 5000;
        // The child exits with code 3 right after writing, without reading stdin.
        let mut t = start_misbehave(&["exit-after", &LINES.to_string(), "3"]);
        let pid = pid_of(&t);
        let (messages, report) = drain_to_exit(&mut t).await;
        assert_eq!(messages.len(), LINES);
        for (n, line) in messages.iter().enumerate() {
            assert_eq!(parse_numbered(line), Some(n as u64));
        }
        assert_eq!(report.exit, Exit::Code(3));
        assert!(!report.shutdown_requested);
        assert_eq!(report.counters.messages_in, LINES as u64);
        assert_reaped(pid).await;
    });
}

/// Polls `recv` in a way that loses the race often: first a single poll that is dropped if the
/// item is not ready, then a race against a timer well under a millisecond.
async fn racy_recv(t: &mut super::rt::Transport, cancelled: &mut u64) -> Received {
    loop {
        if let Some(item) = t.recv().now_or_never() {
            return item.expect("the stream ended early");
        }
        *cancelled += 1;
        match rt::timeout(Duration::from_micros(200), t.recv()).await {
            Some(item) => return item.expect("the stream ended early"),
            None => *cancelled += 1,
        }
    }
}

#[test]
fn c05_recv_raced_against_a_short_timer_thousands_of_times_loses_nothing() {
    run(async {
        const ROUNDS: u64 = 3000;
        let mut t = start_misbehave(&["echo"]);
        let mut cancelled = 0;
        for n in 0..ROUNDS {
            let msg = format!("{{\"n\":{n}}}");
            // A recv polled (and registered with the pipe) before the message exists, then
            // dropped: whatever it left behind must not swallow what comes next.
            assert!(
                t.recv().now_or_never().is_none(),
                "round {n}: an item before anything was sent"
            );
            cancelled += 1;
            send(&mut t, &msg).await;
            match racy_recv(&mut t, &mut cancelled).await {
                Received::Message(m) => assert_eq!(m.as_str(), Ok(msg.as_str())),
                other => panic!("round {n}: got {other:?}"),
            }
        }
        // Every round cancels at least the recv polled before its send; most lose more races
        // (a round trip through a process takes far longer than one poll).
        assert!(
            cancelled >= ROUNDS,
            "only {cancelled} recv calls were cancelled"
        );
        let report = finish(t).await;
        assert_eq!(
            report.counters.messages_in, ROUNDS,
            "nothing delivered twice"
        );
    });
}

#[test]
fn c05_recv_cancelled_mid_line_loses_no_partial_line() {
    run(async {
        // Lines longer than a pipe buffer arrive in several reads, so many cancellations land
        // while a line is half read.
        const LINES: u64 = 1000;
        const LEN: usize = 50_000;
        let mut t = start_misbehave(&["flood", &LINES.to_string(), &LEN.to_string()]);
        let mut cancelled = 0;
        for n in 0..LINES {
            match racy_recv(&mut t, &mut cancelled).await {
                Received::Message(m) => {
                    if m.bytes()[..] != numbered_line(n, LEN)[..] {
                        panic!(
                            "line {n} damaged: {} bytes, starts {:?}",
                            m.len(),
                            &m[..40.min(m.len())]
                        );
                    }
                }
                other => panic!("line {n}: got {other:?}"),
            }
        }
        assert!(cancelled > 0, "no recv was ever cancelled");
        roundtrip(&mut t, "done").await;
        finish(t).await;
    });
}
