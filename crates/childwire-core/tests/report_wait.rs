//! Whether a send refused because sending ended waits for the exit report (C33): the core
//! decides, so every driver lets a failed send carry the report the same way.

use std::time::{Duration, Instant};

use childwire_core::{
    Closed, Config, Exit, Output, ReportWait, Sent, Session, Swept, WriteResult, WriteStep,
};

#[test]
fn c33_a_failed_send_waits_for_the_report_while_it_is_coming_and_not_once_it_was_taken() {
    let now = Instant::now();
    let config = Config::default();
    let lifecycle = &config.lifecycle;
    let mut session = Session::new(&config, true, now);

    // Stdin broke, the child not reaped yet: its end is expected within stdin_grace.
    assert_eq!(
        session.report_wait(Closed::PeerClosed, now),
        ReportWait::Until(now + lifecycle.stdin_grace + lifecycle.drain_grace)
    );
    assert_eq!(session.report_wait(Closed::Closing, now), ReportWait::No);

    session.handle_exit(Exit::Code(3), now);
    assert_eq!(
        session.report_wait(Closed::PeerClosed, now),
        ReportWait::Certain
    );
    assert_eq!(
        session.report_wait(Closed::Exited, now),
        ReportWait::Certain
    );

    session.handle_read_eof(now);
    session.handle_stderr_eof(now);
    session.handle_driver_wake(now);
    let report = loop {
        match session.poll_output() {
            Output::Sweep => session.handle_swept(Swept::default(), now),
            Output::Report(report) => break report,
            Output::Write(_) | Output::Signal(_) => {}
            other => {
                assert_eq!(
                    session.report_wait(Closed::PeerClosed, now),
                    ReportWait::Certain,
                    "decided and not taken yet: it comes"
                );
                panic!("the report was due, got {other:?}");
            }
        }
    };
    assert_eq!(report.exit, Exit::Code(3));
    assert_eq!(
        session.report_wait(Closed::Exited, now),
        ReportWait::No,
        "handed out: the driver published it where the sender looks"
    );
}

/// The wait runs from when stdin was seen closed, not from each question: asked again at its
/// deadline, the core says the wait is over rather than naming a new one, so no driver's timer
/// decides it, and a child that runs on with its stdin closed costs one wait, not one per send.
#[test]
fn c33_the_wait_for_a_child_that_closed_its_stdin_runs_from_the_close_and_ends_there() {
    let start = Instant::now();
    let config = Config::default();
    let grace = config.lifecycle.stdin_grace + config.lifecycle.drain_grace;
    let mut session = Session::new(&config, true, start);
    let Ok(Sent::Write(round)) = session.send("{}") else {
        panic!("the first message is its sender's to write")
    };
    let WriteStep::Io(_) = session.poll_write(&round, start) else {
        panic!("a write")
    };
    let closed_at = start + Duration::from_millis(10);
    session.handle_write(WriteResult::Failed, closed_at);

    let later = closed_at + grace / 2;
    assert_eq!(
        session.report_wait(Closed::PeerClosed, later),
        ReportWait::Until(closed_at + grace),
        "the deadline is the close's, whenever asked"
    );
    assert_eq!(
        session.report_wait(Closed::PeerClosed, closed_at + grace),
        ReportWait::No,
        "at the deadline the wait is over"
    );
    session.handle_exit(Exit::Code(0), closed_at + grace);
    assert_eq!(
        session.report_wait(Closed::PeerClosed, closed_at + grace),
        ReportWait::Certain,
        "exited: the report comes"
    );
}

/// Graces too long to count (`Duration::MAX`, "wait as long as it takes" elsewhere) make no
/// deadline: the core says no end is near, and does not overflow the clock.
#[test]
fn c33_graces_too_long_to_count_make_no_deadline_for_a_refused_send() {
    let start = Instant::now();
    let mut config = Config::default();
    config.lifecycle.stdin_grace = Duration::MAX;
    let mut session = Session::new(&config, true, start);
    let Ok(Sent::Write(round)) = session.send("{}") else {
        panic!("the first message is its sender's to write")
    };
    let WriteStep::Io(_) = session.poll_write(&round, start) else {
        panic!("a write")
    };
    session.handle_write(WriteResult::Failed, start);
    assert_eq!(
        session.report_wait(Closed::PeerClosed, start),
        ReportWait::No
    );
}

/// The background task stopped (its runtime shut down) while the child still ran: no new message
/// is taken, since nothing will write it, and a refused send waits for the report, which comes
/// once the exit is seen, or learns at once that none will (the task is gone).
#[test]
fn c33_once_the_driver_stopped_sends_are_refused_and_wait_for_the_report() {
    let now = Instant::now();
    let config = Config::default();
    let mut session = Session::new(&config, true, now);
    assert!(session.send(&b"{}"[..]).is_ok(), "open before");

    session.handle_driver_stopped(now);
    let refused = session
        .send(&b"{}"[..])
        .expect_err("nothing will write it: refused");
    assert_eq!(
        refused.kind(),
        childwire_core::SendErrorKind::Closed(Closed::DriverStopped)
    );
    assert_eq!(
        session.report_wait(Closed::DriverStopped, now),
        ReportWait::Certain
    );
    // Whoever reaps the child now waits for its death, for a bounded time.
    let wait = session.reap_wait().expect("not exited: waited for");
    assert!(
        wait > std::time::Duration::ZERO && wait <= std::time::Duration::from_secs(10),
        "{wait:?}"
    );

    // The exit is seen (by whatever waited for it): the report comes.
    session.handle_exit(Exit::Signal(9), now);
    assert_eq!(session.reap_wait(), None, "exited: nothing to wait for");
    let report = loop {
        match session.poll_output() {
            Output::Sweep => session.handle_swept(Swept::default(), now),
            Output::Report(report) => break report,
            Output::Write(_) | Output::Signal(_) | Output::Read => {}
            other => panic!("the report was due, got {other:?}"),
        }
    };
    assert_eq!(report.exit, Exit::Signal(9));
    assert_eq!(
        session.report_wait(Closed::DriverStopped, now),
        ReportWait::No,
        "handed out"
    );
}
