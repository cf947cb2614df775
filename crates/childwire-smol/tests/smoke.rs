//! A quick end-to-end check of the smol binding with system tools; the
//! conformance suite in `tests/` covers every clause.

use std::future::Future;
use std::time::Duration;

use childwire_smol::{Command, Config, EndedBy, Received, Transport};

/// `None` when `limit` ran out first.
async fn timeout<F: Future>(limit: Duration, fut: F) -> Option<F::Output> {
    smol::future::or(async { Some(fut.await) }, async {
        smol::Timer::after(limit).await;
        None
    })
    .await
}

#[test]
fn c12_cat_echoes_and_shuts_down_on_stdin_close() {
    smol::block_on(async {
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
    });
}

#[test]
fn c18_spawn_works_outside_block_on() {
    // The driver runs on smol's global executor, not on the caller's
    // `block_on`: spawning from a plain thread must work.
    let mut cat = Transport::spawn(&Command::new("cat"), Config::default()).unwrap();
    smol::block_on(async {
        cat.send("hello").await.unwrap();
        let item = timeout(Duration::from_secs(5), cat.recv()).await.unwrap();
        assert!(
            matches!(&item, Some(Received::Message(m)) if &m[..] == b"hello"),
            "{item:?}"
        );
        let report = timeout(Duration::from_secs(5), cat.shutdown())
            .await
            .unwrap()
            .unwrap();
        assert_eq!(report.ended_by, EndedBy::StdinClose);
    });
}
