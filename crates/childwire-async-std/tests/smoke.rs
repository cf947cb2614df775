//! A quick end-to-end check of the async-std binding with system tools; the
//! conformance suite in `tests/` covers every clause.

use std::time::Duration;

use async_std::future::timeout;
use childwire_async_std::{Command, Config, EndedBy, Received, Transport};

#[test]
fn c12_cat_echoes_and_shuts_down_on_stdin_close() {
    async_std::task::block_on(cat_echoes());
}

async fn cat_echoes() {
    let mut cat = Transport::spawn(&Command::new("cat"), Config::default()).unwrap();
    cat.send(r#"{"id":1}"#).await.unwrap();
    cat.send(r#"{"id":2}"#).await.unwrap();
    for id in 1..=2 {
        let item = timeout(Duration::from_secs(5), cat.recv()).await.unwrap();
        let Some(Received::Message(m)) = item else {
            panic!("expected a message, got {item:?}")
        };
        assert_eq!(m.as_str().unwrap(), format!("{{\"id\":{id}}}"));
    }
    let report = timeout(Duration::from_secs(5), cat.shutdown())
        .await
        .unwrap()
        .unwrap();
    assert_eq!(report.ended_by, EndedBy::StdinClose);
    assert!(report.success(), "{report}");
    assert!(report.elapsed < Duration::from_millis(500), "{report}");
    assert_eq!(report.counters.messages_in, 2);
    assert!(matches!(cat.recv().await, Some(Received::Exited(_))));
    assert!(cat.recv().await.is_none());
}

#[test]
fn c12_child_ignoring_stdin_eof_is_terminated() {
    async_std::task::block_on(sleeper_is_terminated());
}

async fn sleeper_is_terminated() {
    // `sleep` never reads stdin: shutdown must escalate to SIGTERM after the
    // stdin grace, driven by the shared async-io timer.
    let mut config = Config::default();
    config.stdin_grace = Duration::from_millis(100);
    let sleeper = Transport::spawn(Command::new("sleep").arg("30"), config).unwrap();
    let report = timeout(Duration::from_secs(5), sleeper.shutdown())
        .await
        .unwrap()
        .unwrap();
    assert_eq!(report.ended_by, EndedBy::Sigterm, "{report}");
    assert!(report.elapsed >= Duration::from_millis(100), "{report}");
}
