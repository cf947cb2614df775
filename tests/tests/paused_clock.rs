//! The transport on Tokio's paused clock (C24: all time is the runtime's). With the clock paused,
//! Tokio moves time forward to the next timer whenever it has nothing else to do, so every grace
//! runs out at once while a signal's effect takes real time to show. Unix only: it signals.
#![cfg(unix)]

use std::time::Duration;

use childwire_tokio::{Command, Config, EndedBy, Exit, Transport};

/// A child that ignores stdin's EOF and dies of SIGTERM (its default action), ended by the
/// shutdown. The term grace runs out before its exit is seen, so SIGKILL is sent too; the report
/// must still say what ended it, never "killed by SIGTERM after SIGKILL".
#[tokio::test(start_paused = true)]
async fn c24_a_child_ended_by_sigterm_on_a_paused_clock_is_reported_as_such() {
    for _ in 0..20 {
        let mut command = Command::new("sleep");
        command.arg("30");
        let mut config = Config::default();
        config.stdin_grace(Duration::from_millis(100));
        config.term_grace(Duration::from_millis(100));
        let t = Transport::spawn(&command, config).expect("spawn");
        let report = t.shutdown().await.expect("shutdown");
        let text = report.to_string();
        assert!(!text.contains("after SIGKILL"), "{text}");
        assert_eq!(report.exit, Exit::Signal(15), "{text}");
        assert_eq!(report.ended_by, EndedBy::Sigterm, "{text}");
    }
}

/// The tap is stamped with the runtime's clock (C40): on a paused clock moved an hour ahead, the
/// events are an hour ahead of the system's monotonic clock.
#[tokio::test(start_paused = true)]
async fn c40_the_tap_is_stamped_with_the_runtime_clock() {
    use std::sync::{Arc, Mutex};

    use childwire_tokio::{Received, TapEvent, tap};

    let stamps = Arc::new(Mutex::new(Vec::new()));
    let seen = Arc::clone(&stamps);
    let mut config = Config::default();
    config.tap(tap::from_fn(move |at, event| {
        if let TapEvent::Sent(_) | TapEvent::Received(_) = event {
            seen.lock().unwrap().push(at);
        }
    }));
    let mut t = Transport::spawn(&Command::new("cat"), config).expect("spawn");
    tokio::time::advance(Duration::from_secs(3600)).await;
    let ahead = tokio::time::Instant::now().into_std();
    t.send("{}").await.expect("send");
    let Some(Received::Message(echo)) = t.recv().await else {
        panic!("cat echoes");
    };
    assert_eq!(&echo[..], b"{}");
    t.shutdown().await.expect("shutdown");
    let stamps = stamps.lock().unwrap().clone();
    assert_eq!(stamps.len(), 2, "{stamps:?}");
    assert!(stamps.iter().all(|at| *at >= ahead), "{stamps:?} {ahead:?}");
    let system = std::time::Instant::now();
    assert!(
        stamps[0] > system + Duration::from_secs(3000),
        "{stamps:?} {system:?}"
    );
}
