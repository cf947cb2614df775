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
