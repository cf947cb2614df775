//! Whether a send refused because sending ended waits for the exit report (C33): the core
//! decides, so every driver lets a failed send carry the report the same way.

use std::time::Instant;

use childwire_core::{Action, Closed, Config, Counters, Exit, ReportWait, Supervisor, Swept};

#[test]
fn c33_a_failed_send_waits_for_the_report_while_it_is_coming_and_not_once_it_was_taken() {
    let now = Instant::now();
    let config = Config::default();
    let lifecycle = &config.lifecycle;
    let mut sup = Supervisor::new(&config, true, now);

    // Stdin broke, the child not reaped yet: its end is expected within stdin_grace.
    assert_eq!(
        sup.report_wait(Closed::PeerClosed, now),
        ReportWait::Until(now + lifecycle.stdin_grace + lifecycle.drain_grace)
    );
    assert_eq!(sup.report_wait(Closed::Closing, now), ReportWait::No);

    sup.handle_exit(Exit::Code(3), now);
    assert_eq!(
        sup.report_wait(Closed::PeerClosed, now),
        ReportWait::Certain
    );
    assert_eq!(sup.report_wait(Closed::Exited, now), ReportWait::Certain);

    sup.handle_stdout_eof(now);
    sup.handle_stderr_eof(now);
    while let Some(action) = sup.poll_action() {
        if action == Action::Sweep {
            sup.handle_swept(Swept::default(), now);
        }
    }
    assert!(sup.report_ready());
    assert_eq!(
        sup.report_wait(Closed::PeerClosed, now),
        ReportWait::Certain,
        "decided and not taken yet: it comes"
    );

    let report = sup.take_report(Counters::default()).expect("the report");
    assert_eq!(report.exit, Exit::Code(3));
    assert_eq!(
        sup.report_wait(Closed::Exited, now),
        ReportWait::No,
        "taken: whoever took it recorded it where the sender looks"
    );
}
