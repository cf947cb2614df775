//! What only the smol binding needs checking: its driver runs on smol's
//! global executor. The conformance suite in `tests/` covers every clause
//! on every runtime.

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
fn c18_spawn_works_outside_block_on() {
    // The driver runs on smol's global executor, not on the caller's
    // `block_on`: spawning from a plain thread must work.
    let mut cat = Transport::spawn(&Command::new("cat"), Config::default()).unwrap();
    smol::block_on(async {
        // JSON: the default config names a plain-text line as pollution.
        cat.send(r#"{"hello":1}"#).await.unwrap();
        let item = timeout(Duration::from_secs(5), cat.recv()).await.unwrap();
        assert!(
            matches!(&item, Some(Received::Message(m)) if &m[..] == br#"{"hello":1}"#),
            "{item:?}"
        );
        let report = timeout(Duration::from_secs(5), cat.shutdown())
            .await
            .unwrap()
            .unwrap();
        assert_eq!(report.ended_by, EndedBy::StdinClose);
    });
}
