//! Using the transport from several tasks and as a `Stream`/`Sink`; errors (C17, C20).

use std::collections::BTreeMap;
use std::time::Duration;

use bytes::Bytes;
use childwire_conformance::lines::numbered_line;
use futures_util::{SinkExt, StreamExt};

use super::rt::{self, Exit, Received, Transport};
use super::support::*;

#[test]
fn c17_split_halves_work_from_different_tasks() {
    run(async {
        const PER_SENDER: u64 = 500;
        let t = start_misbehave(&["echo"]);
        let pid = pid_of(&t);
        let (tx, mut rx) = t.split();
        let receiver = rt::spawn(async move {
            let mut per_sender: BTreeMap<String, Vec<u64>> = BTreeMap::new();
            for _ in 0..2 * PER_SENDER {
                match within(STEP, "recv", rx.recv()).await {
                    Some(Received::Message(m)) => {
                        let text = m.as_str().expect("utf-8");
                        let (who, n) = text.split_once(':').expect("WHO:N");
                        let n = n.parse().expect("a number");
                        per_sender.entry(who.to_owned()).or_default().push(n);
                    }
                    other => panic!("expected an echo, got {other:?}"),
                }
            }
            (per_sender, rx)
        });
        let senders: Vec<_> = ["a", "b"]
            .into_iter()
            .map(|who| {
                let tx = tx.clone();
                rt::spawn(async move {
                    for n in 0..PER_SENDER {
                        within(STEP, "send", tx.send(format!("{who}:{n}")))
                            .await
                            .expect("send from a task");
                    }
                })
            })
            .collect();
        for sender in senders {
            within(STEP, "a sender task", sender).await;
        }
        let (per_sender, rx) = within(STEP, "the receiver task", receiver).await;
        let in_order: Vec<u64> = (0..PER_SENDER).collect();
        assert_eq!(per_sender.len(), 2);
        for (who, got) in &per_sender {
            assert_eq!(got, &in_order, "sender {who}: each sender's order is kept");
        }
        finish_split(pid, tx, rx).await;
    });
}

#[test]
fn c17_the_transport_is_a_stream_and_a_sink() {
    run(async {
        let mut t = start_misbehave(&["echo"]);
        let pid = pid_of(&t);
        for n in 0..50 {
            within(
                STEP,
                "sink send",
                SinkExt::send(&mut t, Bytes::from(numbered_line(n, 40))),
            )
            .await
            .expect("sink send");
        }
        for n in 0..50 {
            match within(STEP, "stream next", t.next()).await {
                Some(Received::Message(m)) => assert_eq!(m.bytes()[..], numbered_line(n, 40)[..]),
                other => panic!("expected echo {n}, got {other:?}"),
            }
        }
        // Closing the sink begins the graceful shutdown; the stream then ends with the report.
        within(STEP, "sink close", SinkExt::<Bytes>::close(&mut t))
            .await
            .expect("close");
        match within(STEP, "stream next", t.next()).await {
            Some(Received::Exited(report)) => assert_eq!(report.exit, Exit::Code(0)),
            other => panic!("expected the exit report, got {other:?}"),
        }
        assert!(within(STEP, "stream end", t.next()).await.is_none());
        assert_reaped(pid).await;
    });
}

#[test]
fn c17_split_halves_are_a_sink_and_a_stream() {
    run(async {
        let t = start_misbehave(&["echo"]);
        let pid = pid_of(&t);
        let (mut tx, rx) = t.split();
        let collected = rt::spawn(async move { rx.collect::<Vec<Received>>().await });
        let mut items =
            futures_util::stream::iter((0..100).map(|n| Ok(Bytes::from(numbered_line(n, 60)))));
        within(STEP, "send_all", tx.send_all(&mut items))
            .await
            .expect("send_all");
        within(STEP, "close", SinkExt::<Bytes>::close(&mut tx))
            .await
            .expect("close");
        let items = within(STEP, "the stream ends", collected).await;
        assert_eq!(items.len(), 101, "100 echoes and the report");
        for (n, item) in items[..100].iter().enumerate() {
            match item {
                Received::Message(m) => assert_eq!(m.bytes()[..], numbered_line(n as u64, 60)[..]),
                other => panic!("item {n}: {other:?}"),
            }
        }
        assert!(matches!(&items[100], Received::Exited(r) if r.exit == Exit::Code(0)));
        assert_reaped(pid).await;
    });
}

/// `err` is a proper error: `std::error::Error`, shareable across threads, says something.
fn describe<E: std::error::Error + Send + Sync + 'static>(err: &E) -> String {
    let shown = err.to_string();
    assert!(!shown.is_empty());
    // It converts into the boxed error type applications use.
    let boxed: Box<dyn std::error::Error + Send + Sync> = shown.clone().into();
    assert_eq!(boxed.to_string(), shown);
    shown
}

#[test]
fn c20_errors_are_std_errors_that_say_what_happened() {
    run(async {
        let spawn_err = Transport::spawn(&super::rt::Command::new("childwire-nope"), config())
            .expect_err("no such program");
        let shown = describe(&spawn_err);
        assert!(shown.contains("childwire-nope"), "{shown}");

        let mut config = config();
        config.max_send_size(10);
        let t = start(&misbehave(&["echo"]), config);
        let err = t.send("0123456789AB").await.expect_err("too large");
        let shown = describe(&err);
        assert!(
            shown.contains("12") && shown.contains("10"),
            "says both sizes: {shown}"
        );
        let err = t.send("a\nb").await.expect_err("newline");
        assert!(!describe(&err).is_empty());

        let report = finish(t).await;
        assert!(!report.to_string().is_empty());
    });
}

#[test]
fn c20_garbage_from_the_child_never_breaks_the_session() {
    run(async {
        for (seed, max) in [(1, 64), (2, 1024), (3, 16 * 1024 * 1024)] {
            let mut config = config();
            config.max_message_size(max);
            let mut t = start(
                &misbehave(&["garbage", "4000000", &seed.to_string()]),
                config,
            );
            let mut items = 0u64;
            loop {
                match within(Duration::from_secs(60), "recv", t.recv()).await {
                    Some(Received::Message(m))
                        if m.bytes()[..] == b"{\"after\":\"garbage\"}"[..] =>
                    {
                        break;
                    }
                    Some(Received::Message(m)) => assert!(!m.is_empty() && !m.contains(&b'\n')),
                    Some(Received::Oversized(o)) => assert!(o.len > max as u64),
                    other => panic!("seed {seed}: the session broke: {other:?}"),
                }
                items += 1;
            }
            assert!(items > 1000, "seed {seed}: only {items} items");
            roundtrip(&mut t, "still fine").await;
            finish(t).await;
        }
    });
}

#[test]
fn c08_messages_fed_to_the_sink_go_before_a_later_send_and_survive_a_drop() {
    run(async {
        let t = start_misbehave(&["echo"]);
        let pid = pid_of(&t);
        let (mut tx, mut rx) = t.split();
        // Fed, not flushed: they sit in the sender's batch.
        for n in 0..3 {
            within(STEP, "feed", tx.feed(Bytes::from(format!("fed {n}"))))
                .await
                .expect("feed");
        }
        within(STEP, "send", tx.send("sent".to_owned()))
            .await
            .expect("send after feed");
        within(STEP, "feed", tx.feed(Bytes::from("fed last")))
            .await
            .expect("feed");
        // Dropping the sender without a flush loses nothing it accepted.
        let second = tx.clone();
        drop(tx);
        let mut seen = Vec::new();
        for _ in 0..5 {
            match within(STEP, "recv", rx.recv()).await {
                Some(Received::Message(m)) => seen.push(m.as_str().expect("utf-8").to_owned()),
                other => panic!("expected an echo, got {other:?}"),
            }
        }
        assert_eq!(seen, ["fed 0", "fed 1", "fed 2", "sent", "fed last"]);
        let report = finish_split(pid, second, rx).await.1;
        assert_eq!(report.exit, Exit::Code(0));
    });
}

/// A receiver takes the messages ready at once out together, and hands them out one by one: a
/// request whose answer was among them when it was sent still gets it. Here the "answer" is a
/// response-shaped line `cat` echoes, queued with the line before it.
#[test]
fn c17_a_request_gets_an_answer_already_taken_out_with_earlier_messages() {
    run(async {
        let mut t = start_misbehave(&["echo"]);
        let answer = r#"{"jsonrpc":"2.0","id":5,"result":{}}"#;
        within(
            STEP,
            "send_many",
            t.send_many([r#"{"jsonrpc":"2.0","method":"first"}"#, answer]),
        )
        .await
        .expect("send_many");
        assert_eq!(text(&mut t).await, r#"{"jsonrpc":"2.0","method":"first"}"#);
        let got = within(
            STEP,
            "request",
            t.request(r#"{"jsonrpc":"2.0","id":5,"method":"m"}"#),
        )
        .await
        .expect("the answer");
        assert_eq!(&got[..], answer.as_bytes());
        finish(t).await;
    });
}
