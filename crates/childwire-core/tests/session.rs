//! The whole transport state machine on a simulated clock: what an adapter
//! sees when it feeds a child's pipes, exit and time into a `Session`.

use std::time::{Duration, Instant};

use childwire_core::inbound::ITEM_OVERHEAD;
use childwire_core::{Action, Swept};
use childwire_core::{Closed, Config, EndedBy, Exit, Received, SendErrorKind, Session, Signal};

/// A session and its simulated clock.
struct Sim {
    session: Session,
    now: Instant,
    /// Actions carried out so far, in order.
    actions: Vec<Action>,
}

impl Sim {
    fn new(config: Config) -> Self {
        let now = Instant::now();
        Self {
            session: Session::new(&config, true, now),
            now,
            actions: Vec::new(),
        }
    }

    /// Drains actions the way an adapter does; closing stdin succeeds.
    fn drain_actions(&mut self) {
        while let Some(action) = self.session.poll_action() {
            self.actions.push(action);
            match action {
                Action::CloseStdin => self.session.handle_stdin_closed(self.now),
                Action::Sweep => self.session.handle_swept(Swept::default(), self.now),
                Action::Signal(_) => {}
            }
        }
    }

    /// Advances the clock to the next deadline and fires it.
    fn advance_to_deadline(&mut self) -> Duration {
        let deadline = self.session.poll_timeout().expect("a deadline is pending");
        let waited = deadline.saturating_duration_since(self.now);
        self.now = self.now.max(deadline);
        self.session.handle_timeout(self.now);
        self.drain_actions();
        waited
    }

    fn write_everything(&mut self) -> Vec<u8> {
        let bytes = self
            .session
            .poll_transmit(self.now)
            .unwrap_or_default()
            .to_vec();
        self.session.handle_written(bytes.len(), self.now);
        self.drain_actions();
        bytes
    }

    /// Receives up to the exit report, which must be there.
    fn take_report(&mut self) -> childwire_core::ExitReport {
        loop {
            match self.session.poll_received() {
                Some(Received::Exited(report)) => return *report,
                Some(_) => {}
                None => panic!("no exit report yet"),
            }
        }
    }

    fn received(&mut self) -> Vec<Received> {
        std::iter::from_fn(|| self.session.poll_received()).collect()
    }
}

fn text(item: &Received) -> String {
    match item {
        Received::Message(m) => String::from_utf8_lossy(m).into_owned(),
        Received::Oversized(o) => format!("<oversized {}>", o.len),
        Received::Malformed(m) => format!("<malformed {}>", m.reason),
        Received::Exited(report) => format!("<exited: {}>", report.exit),
        other => format!("<{other:?}>"),
    }
}

#[test]
fn c04_every_line_written_before_exit_comes_before_the_report() {
    let mut sim = Sim::new(plain_config());
    sim.session.handle_stdout(b"{\"a\":1}\n{\"b\"", sim.now);
    // The exit is observed while the pipe still holds the child's last bytes.
    sim.session.handle_exit(Exit::Code(3), sim.now);
    sim.drain_actions();
    assert!(
        !sim.session.report_ready(),
        "the report waits for stdout EOF"
    );
    sim.session.handle_stdout(b":2}\nlast", sim.now);
    sim.session.handle_stdout_eof(sim.now);
    sim.session
        .handle_stderr(b"Error: Cannot find module 'x'\n", sim.now);
    sim.session.handle_stderr_eof(sim.now);
    let items = sim.received();
    let texts: Vec<_> = items.iter().map(text).collect();
    assert_eq!(
        texts,
        [
            "{\"a\":1}",
            "{\"b\":2}",
            "last",
            "<exited: exited with code 3>"
        ]
    );
    let Some(Received::Exited(report)) = items.last() else {
        unreachable!()
    };
    assert!(report.unexpected());
    assert_eq!(report.counters.messages_in, 3);
    assert!(
        report.stderr_tail.contains("Cannot find module"),
        "{report}"
    );
    assert!(sim.session.is_finished());
    assert_eq!(sim.session.poll_received(), None);
}

#[test]
fn c04_pipes_held_open_by_a_grandchild_delay_the_report_only_for_drain_grace() {
    let mut config = plain_config();
    config.drain_grace(Duration::from_millis(300));
    let mut sim = Sim::new(config);
    sim.session.handle_exit(Exit::Code(0), sim.now);
    sim.drain_actions();
    assert_eq!(
        sim.actions,
        [Action::Sweep],
        "leftovers of the group are swept"
    );
    assert_eq!(sim.advance_to_deadline(), Duration::from_millis(300));
    assert!(matches!(sim.received().as_slice(), [Received::Exited(_)]));
}

#[test]
fn c07_receive_backpressure_pauses_stdout_until_the_caller_catches_up() {
    let mut config = plain_config();
    config.recv_high_water(ITEM_OVERHEAD + 10);
    let mut sim = Sim::new(config);
    assert!(sim.session.wants_stdout());
    sim.session.handle_stdout(b"012345678\n", sim.now);
    assert!(
        sim.session.wants_stdout(),
        "9 bytes and one item: below the mark"
    );
    sim.session.handle_stdout(b"9\n", sim.now);
    assert!(
        !sim.session.wants_stdout(),
        "two items cost their bytes and their overhead"
    );
    assert!(sim.session.poll_received().is_some());
    assert!(sim.session.wants_stdout());
    // After the exit the bound still holds: a grandchild holding the pipe
    // cannot grow the host while the caller does not receive.
    sim.session.handle_stdout(b"0123456789\n", sim.now);
    sim.session.handle_exit(Exit::Code(0), sim.now);
    assert!(!sim.session.wants_stdout());
    while sim.session.poll_received().is_some() {}
    assert!(sim.session.wants_stdout());
}

/// A caller that never drains: the receive bound stops reading stdout, so
/// its EOF never comes; the drain grace ends the wait, and the report says
/// how much the caller had not received and that stdout was held back (not
/// that something held the pipes).
#[test]
fn c25_the_report_says_what_a_caller_that_never_drains_left_unreceived() {
    let mut config = plain_config();
    config
        .recv_high_water(2 * (ITEM_OVERHEAD + 5))
        .drain_grace(Duration::from_millis(300));
    let mut sim = Sim::new(config);
    sim.session.handle_stderr_eof(sim.now);
    sim.session.handle_stdout(
        b"hello
world
",
        sim.now,
    );
    assert!(!sim.session.wants_stdout(), "the bound is reached");
    sim.session.handle_exit(Exit::Code(0), sim.now);
    sim.drain_actions();
    assert_eq!(sim.advance_to_deadline(), Duration::from_millis(300));
    let items = sim.received();
    let [
        Received::Message(_),
        Received::Message(_),
        Received::Exited(report),
    ] = items.as_slice()
    else {
        panic!("two messages, then the report: {items:?}");
    };
    assert_eq!(report.unreceived_messages, 2);
    assert_eq!(report.unreceived_bytes, 10);
    assert!(report.stdout_held_back);
    assert!(!report.pipes_drained);
    assert_eq!(
        report.to_string(),
        "exited with code 0 on its own after 0 ms; 2 messages (10 B) not yet received, more held back in stdout"
    );
}

/// The same backlog with stdout at EOF: what waits for the caller is
/// counted, nothing was held back, and the pipes count as drained.
#[test]
fn c25_the_report_counts_what_waits_for_the_caller_when_stdout_reached_eof() {
    let mut sim = Sim::new(plain_config());
    sim.session.handle_stderr_eof(sim.now);
    sim.session.handle_stdout(
        b"hello
", sim.now,
    );
    sim.session.handle_stdout_eof(sim.now);
    sim.session.handle_exit(Exit::Code(0), sim.now);
    sim.drain_actions();
    let report = sim.take_report();
    assert_eq!(
        (report.unreceived_messages, report.unreceived_bytes),
        (1, 5)
    );
    assert!(!report.stdout_held_back && report.pipes_drained);
    assert!(
        report
            .to_string()
            .ends_with("; 1 message (5 B) not yet received"),
        "{report}"
    );

    // A caller that kept up: nothing to say.
    let mut sim = Sim::new(plain_config());
    sim.session.handle_stderr_eof(sim.now);
    sim.session.handle_stdout(
        b"hello
", sim.now,
    );
    assert_eq!(sim.received().len(), 1);
    sim.session.handle_stdout_eof(sim.now);
    sim.session.handle_exit(Exit::Code(0), sim.now);
    sim.drain_actions();
    let report = sim.take_report();
    assert_eq!(report.unreceived_messages, 0);
    assert_eq!(
        report.to_string(),
        "exited with code 0 on its own after 0 ms"
    );
}

#[test]
fn c07_full_queue_says_wait_and_a_stalled_child_fails_sends_after_the_write_timeout() {
    let mut config = plain_config();
    config.send_high_water(8);
    config.write_timeout(Some(Duration::from_secs(5)));
    let mut sim = Sim::new(config);
    sim.session.send("0123456789").unwrap();
    let err = sim.session.send("x").unwrap_err();
    assert_eq!(err.kind(), SendErrorKind::Full);
    assert!(!sim.session.send_ready());
    // The child takes 3 bytes after 4 s: progress restarts the clock.
    sim.now += Duration::from_secs(4);
    sim.session.handle_written(3, sim.now);
    assert_eq!(
        sim.session.poll_timeout(),
        Some(sim.now + Duration::from_secs(5))
    );
    assert_eq!(sim.advance_to_deadline(), Duration::from_secs(5));
    assert_eq!(
        sim.actions,
        [Action::CloseStdin],
        "a stalled child's stdin is closed"
    );
    let err = sim.session.send("x").unwrap_err();
    let SendErrorKind::Closed(Closed::Stalled { after }) = err.kind() else {
        panic!("expected a stall, got {:?}", err.kind());
    };
    assert_eq!(after, Duration::from_secs(5));
    assert!(err.to_string().contains("write timeout"), "{err}");
    assert_eq!(err.into_payload(), "x");
    assert!(
        sim.session.send_ready(),
        "senders waiting for room are released"
    );
    // The child then exits on the EOF it was given: the report says so.
    sim.session.handle_stderr_eof(sim.now);
    sim.session.handle_stdout_eof(sim.now);
    sim.session.handle_exit(Exit::Code(0), sim.now);
    sim.drain_actions();
    let report = sim.take_report();
    assert_eq!(report.ended_by, EndedBy::StdinClose);
    assert!(!report.shutdown_requested);
}

#[test]
fn c08_send_after_shutdown_is_refused_whole() {
    let mut sim = Sim::new(plain_config());
    sim.session.send("queued").unwrap();
    sim.session.shutdown(sim.now);
    let err = sim.session.send("late").unwrap_err();
    assert_eq!(err.kind(), SendErrorKind::Closed(Closed::Closing));
    assert_eq!(err.into_payload(), "late");
    assert_eq!(
        sim.write_everything(),
        b"queued\n",
        "what was queued before is flushed"
    );
}

#[test]
fn c12_shutdown_flushes_then_closes_stdin_and_reports_the_step() {
    let mut sim = Sim::new(plain_config());
    sim.session.send("bye").unwrap();
    sim.session.shutdown(sim.now);
    sim.drain_actions();
    assert!(
        sim.actions.is_empty(),
        "stdin stays open until the queue is flushed"
    );
    sim.write_everything();
    assert_eq!(sim.actions, [Action::CloseStdin]);
    sim.now += Duration::from_millis(20);
    sim.session.handle_exit(Exit::Code(0), sim.now);
    sim.session.handle_stdout_eof(sim.now);
    sim.session.handle_stderr_eof(sim.now);
    sim.drain_actions();
    let report = sim.take_report();
    assert_eq!(report.ended_by, EndedBy::StdinClose);
    assert_eq!(report.elapsed, Duration::from_millis(20));
    assert_eq!(
        (report.counters.messages_out, report.counters.bytes_out),
        (1, 3)
    );
}

#[test]
fn c12_a_child_that_never_reads_gets_sigterm_then_sigkill_on_schedule() {
    let mut config = plain_config();
    config.stdin_grace(Duration::from_millis(100));
    config.term_grace(Duration::from_millis(200));
    let mut sim = Sim::new(config);
    sim.session.send("never read").unwrap();
    sim.session.shutdown(sim.now);
    sim.drain_actions();
    assert_eq!(sim.advance_to_deadline(), Duration::from_millis(100));
    assert_eq!(
        sim.actions,
        [Action::CloseStdin, Action::Signal(Signal::Term)]
    );
    assert_eq!(
        sim.session.poll_transmit(sim.now),
        None,
        "unflushed output is dropped at the deadline"
    );
    assert_eq!(sim.advance_to_deadline(), Duration::from_millis(200));
    assert_eq!(sim.actions.last(), Some(&Action::Signal(Signal::Kill)));
    sim.session.handle_exit(Exit::Signal(9), sim.now);
    sim.session.handle_stdout_eof(sim.now);
    sim.session.handle_stderr_eof(sim.now);
    sim.drain_actions();
    let report = sim.take_report();
    assert_eq!(report.ended_by, EndedBy::Sigkill);
    assert_eq!(report.elapsed, Duration::from_millis(300));
}

#[test]
fn c09_stderr_lines_are_handed_out_and_kept_in_the_tail() {
    let mut sim = Sim::new(plain_config());
    sim.session.handle_stderr(b"warn: one\nwarn: t", sim.now);
    sim.session.handle_stderr(b"wo\n", sim.now);
    let lines: Vec<_> = std::iter::from_fn(|| sim.session.poll_stderr_line()).collect();
    assert_eq!(lines, ["warn: one", "warn: two"]);
    assert_eq!(sim.session.counters().stderr_bytes, 20);
}

#[test]
fn c09_without_a_stderr_pipe_the_end_does_not_wait_for_stderr() {
    // Without a stderr pipe the adapter reports stderr's end at spawn.
    let now = Instant::now();
    let mut session = Session::new(&plain_config(), true, now);
    session.handle_stderr_eof(now);
    session.handle_exit(Exit::Code(0), now);
    session.handle_stdout_eof(now);
    while let Some(action) = session.poll_action() {
        if action == Action::Sweep {
            session.handle_swept(Swept::default(), now);
        }
    }
    assert!(session.report_ready());
}

#[test]
fn c14_drop_kills_a_live_child_and_leaves_a_reaped_one_alone() {
    let mut sim = Sim::new(plain_config());
    assert_eq!(
        sim.session.drop_action(),
        Some(Action::Signal(Signal::Kill))
    );
    sim.session.handle_exit(Exit::Code(0), sim.now);
    assert_eq!(
        sim.session.drop_action(),
        None,
        "a reaped PID may belong to someone else"
    );
}

#[test]
fn c09_the_report_waits_until_stderr_lines_are_delivered() {
    let mut sim = Sim::new(plain_config());
    sim.session.handle_stderr(b"last words\n", sim.now);
    sim.session.handle_stderr_eof(sim.now);
    sim.session.handle_stdout_eof(sim.now);
    sim.session.handle_exit(Exit::Code(1), sim.now);
    sim.drain_actions();
    assert_eq!(
        sim.session.poll_stderr_line().as_deref(),
        Some(&b"last words"[..])
    );
    assert!(
        !sim.session.report_ready(),
        "held until the line is handed on"
    );
    assert_eq!(sim.session.poll_received(), None);
    sim.session.handle_stderr_delivered();
    assert!(sim.session.report_ready());
    assert!(matches!(
        sim.session.poll_received(),
        Some(Received::Exited(_))
    ));
}

/// The default config without pollution notices: these tests speak plain
/// text to check framing and lifecycle; `Config::default()` would name the
/// first line as pollution.
fn plain_config() -> Config {
    let mut config = Config::default();
    config.pollution(None);
    config
}
