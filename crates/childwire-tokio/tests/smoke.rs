//! A quick end-to-end check of the Tokio binding with system tools; the
//! conformance suite in `tests/` covers every clause.

use std::time::Duration;

use childwire_tokio::{Command, Config, EndedBy, Received, Transport};

#[tokio::test]
async fn c12_cat_echoes_and_shuts_down_on_stdin_close() {
    let mut cat = Transport::spawn(&Command::new("cat"), Config::default()).unwrap();
    cat.send(r#"{"id":1}"#).await.unwrap();
    cat.send(r#"{"id":2}"#).await.unwrap();
    for id in 1..=2 {
        let item = tokio::time::timeout(Duration::from_secs(5), cat.recv())
            .await
            .unwrap();
        let Some(Received::Message(m)) = item else {
            panic!("expected a message, got {item:?}")
        };
        assert_eq!(m.as_str().unwrap(), format!("{{\"id\":{id}}}"));
    }
    let report = tokio::time::timeout(Duration::from_secs(5), cat.shutdown())
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
