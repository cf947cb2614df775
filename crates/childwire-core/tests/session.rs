//! The whole transport state machine on a simulated clock: what an adapter
//! sees when it feeds a child's pipes, exit and time into a `Session`.

use std::time::{Duration, Instant};

use bytes::Bytes;
use childwire_core::{
    Action, ITEM_OVERHEAD, Output, Receive, Sent, Swept, Wakes, WriteOp, WriteResult, WriteRound,
    WriteStep,
};
use childwire_core::{
    Closed, Config, EndedBy, Exit, ExitReport, Received, SendErrorKind, Session, Signal,
};

/// A session, its simulated clock, and a background task's part played by
/// the test: [`Sim::drive`] drains the outputs as the async driver does.
struct Sim {
    session: Session,
    now: Instant,
    /// What the driver did to the child, in order (stdin's close included).
    actions: Vec<Action>,
    /// Stderr lines handed out and not yet confirmed delivered.
    lines: Vec<Bytes>,
    /// Confirm stderr lines at once (as a driver does after handing them on).
    confirm_stderr: bool,
    /// The report, as published.
    report: Option<ExitReport>,
}

impl Sim {
    fn new(config: Config) -> Self {
        let now = Instant::now();
        Self {
            session: Session::new(&config, true, now),
            now,
            actions: Vec::new(),
            lines: Vec::new(),
            confirm_stderr: true,
            report: None,
        }
    }

    /// Wakes the driver at `now` and drains its outputs: signals are
    /// recorded, the sweep finds nothing, a write round writes nothing (the
    /// child reads nothing unless [`write_everything`](Self::write_everything)),
    /// a read finds nothing.
    fn drive(&mut self) {
        self.session.handle_driver_wake(self.now);
        loop {
            match self.session.poll_output() {
                Output::Signal(signal) => self.actions.push(Action::Signal(signal)),
                Output::Sweep => {
                    self.actions.push(Action::Sweep);
                    self.session.handle_swept(Swept::default(), self.now);
                }
                Output::StderrLine(line) => self.lines.push(line),
                Output::StdoutLine(_) | Output::StdoutNotice(_) => {}
                Output::Report(report) => self.report = Some(*report),
                Output::Write(round) => {
                    self.write(&round, false);
                }
                Output::Read => self.session.handle_read_blocked(),
                Output::Timeout(_) | Output::Done => {
                    if self.confirm_stderr && !self.lines.is_empty() {
                        self.lines.clear();
                        self.session.handle_stderr_delivered();
                        continue;
                    }
                    return;
                }
            }
        }
    }

    /// Runs a write round: the child takes everything (`reads`) or nothing.
    fn write(&mut self, round: &WriteRound, reads: bool) -> Vec<u8> {
        let mut written = Vec::new();
        loop {
            match self.session.poll_write(round, self.now) {
                WriteStep::Io(WriteOp::Write(bytes)) if reads => {
                    written.extend_from_slice(&bytes);
                    self.session
                        .handle_write(WriteResult::Written(bytes.len()), self.now);
                }
                WriteStep::Io(WriteOp::Write(_)) => {
                    self.session.handle_write(WriteResult::WouldBlock, self.now);
                    return written;
                }
                WriteStep::Io(_) => self.session.handle_write(WriteResult::Done, self.now),
                WriteStep::Drop => self.actions.push(Action::CloseStdin),
                WriteStep::Done | WriteStep::Busy | WriteStep::Yield => return written,
            }
        }
    }

    /// Advances the clock to the next deadline and wakes the driver there.
    fn advance_to_deadline(&mut self) -> Duration {
        let deadline = self.session.poll_timeout().expect("a deadline is pending");
        let waited = deadline.saturating_duration_since(self.now);
        self.now = self.now.max(deadline);
        self.drive();
        waited
    }

    /// The child reads everything queued; then the driver runs.
    fn write_everything(&mut self) -> Vec<u8> {
        let round = self.session.drain_round();
        let bytes = self.write(&round, true);
        self.drive();
        bytes
    }

    /// Receives up to the exit report, which must be there.
    fn take_report(&mut self) -> ExitReport {
        self.drive();
        loop {
            match self.session.poll_received() {
                Some(Received::Exited(report)) => return *report,
                Some(_) => {}
                None => panic!("no exit report yet"),
            }
        }
    }

    /// What the receiver gets now, reading as it does (the pipe has
    /// nothing more).
    fn received(&mut self) -> Vec<Received> {
        self.drive();
        let mut items = Vec::new();
        loop {
            match self.session.poll_receive() {
                Receive::Item(item) => items.push(item),
                Receive::Read => {
                    self.session.handle_read_blocked();
                    if let Some(item) = self.session.poll_received() {
                        items.push(item);
                        continue;
                    }
                    return items;
                }
                Receive::Wait | Receive::End => return items,
            }
        }
    }

    /// Queues `payload`; whoever writes it, the test writes it later
    /// ([`write_everything`](Self::write_everything)).
    fn queue(&mut self, payload: &str) {
        let _sent = self.session.send(payload).expect("queued");
    }

    /// Whether stdout is read now (not held back by the receive bound).
    fn wants_stdout(&self) -> bool {
        !self.session.channel().is_held_back() && !self.session.channel().is_read_done()
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
    sim.session.handle_read(b"{\"a\":1}\n{\"b\"", sim.now);
    // The exit is observed while the pipe still holds the child's last bytes.
    sim.session.handle_exit(Exit::Code(3), sim.now);
    sim.drive();
    assert!(sim.report.is_none(), "the report waits for stdout EOF");
    sim.session.handle_read(b":2}\nlast", sim.now);
    sim.session.handle_read_eof(sim.now);
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
    sim.drive();
    assert_eq!(
        sim.actions,
        [Action::Sweep, Action::CloseStdin],
        "leftovers of the group are swept, stdin dropped, nothing signalled"
    );
    assert_eq!(sim.advance_to_deadline(), Duration::from_millis(300));
    assert!(matches!(sim.received().as_slice(), [Received::Exited(_)]));
}

/// The same grandchild, seen by the background task's reads after the exit:
/// a read that found nothing wakes no one. The task waits among the
/// receiver's waiters for the pipe; a wake-up for nothing new woke it at
/// once, and it read again, round after round, until the grace ran out.
#[test]
fn c04_a_read_after_the_exit_that_finds_nothing_wakes_no_one() {
    let mut sim = Sim::new(plain_config());
    sim.session.handle_exit(Exit::Code(0), sim.now);
    sim.session.handle_driver_wake(sim.now);
    let mut reads = 0;
    loop {
        match sim.session.poll_output() {
            Output::Read => {
                reads += 1;
                let _ = sim.session.take_wakes();
                sim.session.handle_read_blocked();
                assert_eq!(sim.session.take_wakes(), Wakes::NONE, "nothing is new");
            }
            Output::Sweep => sim.session.handle_swept(Swept::default(), sim.now),
            Output::Timeout(Some(_)) => break,
            output => assert!(
                !matches!(
                    output,
                    Output::Timeout(None) | Output::Done | Output::Report(_)
                ),
                "the drain grace is still running"
            ),
        }
    }
    assert_eq!(reads, 1, "one read per wake-up of the background task");
}

/// A grandchild keeps stdout open past the report, and the background task
/// is done: a banner it prints then has nobody to be handed to, so it is
/// dropped and counted as dropped, not counted as handed on and left
/// waiting (found by the `session` fuzz target with a child's default
/// pollution policy). The messages still reach the receiver.
#[test]
fn c45_a_line_set_aside_after_the_background_task_is_done_is_counted_as_dropped() {
    let mut config = Config::default();
    config.drain_grace(Duration::from_millis(300));
    let mut sim = Sim::new(config);
    sim.session.handle_exit(Exit::Code(0), sim.now);
    sim.drive();
    sim.advance_to_deadline();
    assert!(sim.report.is_some(), "the report is out");
    assert!(matches!(sim.session.poll_output(), Output::Done));
    sim.session
        .handle_read(b"late banner\n{\"id\":1}\n", sim.now);
    let counters = sim.session.counters();
    assert_eq!(
        (counters.polluted_diverted, counters.polluted_dropped),
        (0, 1)
    );
    let items: Vec<_> = std::iter::from_fn(|| sim.session.poll_received()).collect();
    assert!(
        items
            .iter()
            .any(|item| matches!(item, Received::Message(m) if &m[..] == b"{\"id\":1}")),
        "{items:?}"
    );
}

#[test]
fn c07_receive_backpressure_pauses_stdout_until_the_caller_catches_up() {
    let mut config = plain_config();
    config.recv_high_water(ITEM_OVERHEAD + 10);
    let mut sim = Sim::new(config);
    assert!(sim.wants_stdout());
    sim.session.handle_read(b"012345678\n", sim.now);
    assert!(sim.wants_stdout(), "9 bytes and one item: below the mark");
    sim.session.handle_read(b"9\n", sim.now);
    assert!(
        !sim.wants_stdout(),
        "two items cost their bytes and their overhead"
    );
    assert!(sim.session.poll_received().is_some());
    assert!(sim.wants_stdout());
    // After the exit the bound still holds: a grandchild holding the pipe
    // cannot grow the host while the caller does not receive.
    sim.session.handle_read(b"0123456789\n", sim.now);
    sim.session.handle_exit(Exit::Code(0), sim.now);
    assert!(!sim.wants_stdout());
    while sim.session.poll_received().is_some() {}
    assert!(sim.wants_stdout());
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
    sim.session.handle_read(
        b"hello
world
",
        sim.now,
    );
    assert!(!sim.wants_stdout(), "the bound is reached");
    sim.session.handle_exit(Exit::Code(0), sim.now);
    sim.drive();
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
        "exited with code 0 on its own after 0 ms; at its end 2 messages (10 B) had not been received, and more waited in stdout"
    );
}

/// The same backlog with stdout at EOF: what waits for the caller is
/// counted, nothing was held back, and the pipes count as drained.
#[test]
fn c25_the_report_counts_what_waits_for_the_caller_when_stdout_reached_eof() {
    let mut sim = Sim::new(plain_config());
    sim.session.handle_stderr_eof(sim.now);
    sim.session.handle_read(
        b"hello
", sim.now,
    );
    sim.session.handle_read_eof(sim.now);
    sim.session.handle_exit(Exit::Code(0), sim.now);
    sim.drive();
    let report = sim.take_report();
    assert_eq!(
        (report.unreceived_messages, report.unreceived_bytes),
        (1, 5)
    );
    assert!(!report.stdout_held_back && report.pipes_drained);
    assert!(
        report
            .to_string()
            .ends_with("; at its end 1 message (5 B) had not been received"),
        "{report}"
    );

    // A caller that kept up: nothing to say.
    let mut sim = Sim::new(plain_config());
    sim.session.handle_stderr_eof(sim.now);
    sim.session.handle_read(
        b"hello
", sim.now,
    );
    assert_eq!(sim.received().len(), 1);
    sim.session.handle_read_eof(sim.now);
    sim.session.handle_exit(Exit::Code(0), sim.now);
    sim.drive();
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
    sim.queue("0123456789");
    let err = sim.session.send("x").unwrap_err();
    assert_eq!(err.kind(), SendErrorKind::Full);
    assert!(!sim.session.send_ready());
    // The child takes 3 bytes after 4 s: progress restarts the clock.
    let WriteStep::Io(WriteOp::Write(_)) =
        sim.session.poll_write(&sim.session.drain_round(), sim.now)
    else {
        panic!("the queue is written")
    };
    sim.now += Duration::from_secs(4);
    sim.session.handle_write(WriteResult::Written(3), sim.now);
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
    sim.session.handle_read_eof(sim.now);
    sim.session.handle_exit(Exit::Code(0), sim.now);
    sim.drive();
    let report = sim.take_report();
    assert_eq!(report.ended_by, EndedBy::StdinClose);
    assert!(!report.shutdown_requested);
}

#[test]
fn c08_send_after_shutdown_is_refused_whole() {
    let mut sim = Sim::new(plain_config());
    sim.queue("queued");
    sim.session.handle_shutdown(sim.now);
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
    sim.queue("bye");
    sim.session.handle_shutdown(sim.now);
    sim.drive();
    assert!(
        sim.actions.is_empty(),
        "stdin stays open until the queue is flushed"
    );
    sim.write_everything();
    assert_eq!(sim.actions, [Action::CloseStdin]);
    sim.now += Duration::from_millis(20);
    sim.session.handle_exit(Exit::Code(0), sim.now);
    sim.session.handle_read_eof(sim.now);
    sim.session.handle_stderr_eof(sim.now);
    sim.drive();
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
    sim.queue("never read");
    sim.session.handle_shutdown(sim.now);
    sim.drive();
    assert_eq!(sim.advance_to_deadline(), Duration::from_millis(100));
    assert_eq!(
        sim.actions,
        [Action::CloseStdin, Action::Signal(Signal::Term)]
    );
    assert_eq!(
        sim.session.poll_write(&sim.session.drain_round(), sim.now),
        WriteStep::Done,
        "unflushed output is dropped at the deadline"
    );
    assert_eq!(sim.advance_to_deadline(), Duration::from_millis(200));
    assert_eq!(sim.actions.last(), Some(&Action::Signal(Signal::Kill)));
    sim.session.handle_exit(Exit::Signal(9), sim.now);
    sim.session.handle_read_eof(sim.now);
    sim.session.handle_stderr_eof(sim.now);
    sim.drive();
    let report = sim.take_report();
    assert_eq!(report.ended_by, EndedBy::Sigkill);
    assert_eq!(report.elapsed, Duration::from_millis(300));
}

#[test]
fn c09_stderr_lines_are_handed_out_and_kept_in_the_tail() {
    let mut sim = Sim::new(plain_config());
    sim.session.handle_stderr(b"warn: one\nwarn: t", sim.now);
    sim.session.handle_stderr(b"wo\n", sim.now);
    sim.confirm_stderr = false;
    sim.drive();
    assert_eq!(sim.lines, ["warn: one", "warn: two"]);
    assert_eq!(sim.session.counters().stderr_bytes, 20);
}

#[test]
fn c09_without_a_stderr_pipe_the_end_does_not_wait_for_stderr() {
    // Without a stderr pipe the adapter reports stderr's end at spawn.
    let mut sim = Sim::new(plain_config());
    sim.session.handle_stderr_eof(sim.now);
    sim.session.handle_exit(Exit::Code(0), sim.now);
    sim.session.handle_read_eof(sim.now);
    sim.drive();
    assert!(sim.report.is_some());
}

#[test]
fn c14_drop_kills_a_live_child_and_leaves_a_reaped_one_alone() {
    let mut sim = Sim::new(plain_config());
    sim.session.handle_handle_opened();
    sim.session.handle_handle_closed(sim.now);
    sim.drive();
    assert_eq!(sim.actions, [Action::Signal(Signal::Kill)]);

    let mut sim = Sim::new(plain_config());
    sim.session.handle_handle_opened();
    sim.session.handle_exit(Exit::Code(0), sim.now);
    sim.drive();
    sim.session.handle_handle_closed(sim.now);
    sim.drive();
    assert!(
        !sim.actions.contains(&Action::Signal(Signal::Kill)),
        "a reaped PID may belong to someone else: {:?}",
        sim.actions
    );
}

#[test]
fn c09_the_report_waits_until_stderr_lines_are_delivered() {
    let mut sim = Sim::new(plain_config());
    sim.session.handle_stderr(b"last words\n", sim.now);
    sim.session.handle_stderr_eof(sim.now);
    sim.session.handle_read_eof(sim.now);
    sim.session.handle_exit(Exit::Code(1), sim.now);
    sim.confirm_stderr = false;
    sim.drive();
    assert_eq!(sim.lines, ["last words"]);
    assert!(sim.report.is_none(), "held until the line is handed on");
    assert_eq!(sim.session.poll_received(), None);
    sim.session.handle_stderr_delivered();
    sim.drive();
    assert!(sim.report.is_some());
    assert!(matches!(
        sim.session.poll_received(),
        Some(Received::Exited(_))
    ));
}

/// Bytes a sender leaves behind a full pipe become the background task's to
/// wait for, though their flush was armed (and that task woken) before: it
/// may have run while the sender held the pipe, found nothing to do, and
/// gone to sleep, and the sender itself goes on once it has room.
#[test]
fn c07_bytes_a_sender_leaves_behind_a_full_pipe_wake_the_background_task() {
    let now = Instant::now();
    let mut session = Session::new(&plain_config(), true, now);
    let Ok(Sent::Write(round)) = session.send("one") else {
        panic!("the first message is its sender's to write");
    };
    assert!(matches!(session.send("two"), Ok(Sent::Queued)));
    assert!(
        session.take_wakes().contains(Wakes::DRIVER),
        "the flush armed"
    );
    // The sender takes the pipe; the background task runs meanwhile.
    assert!(matches!(session.poll_write(&round, now), WriteStep::Io(_)));
    session.handle_driver_wake(now);
    loop {
        match session.poll_output() {
            Output::Write(_) => panic!("no write is offered while the sender holds the pipe"),
            Output::Timeout(_) | Output::Done => break,
            _ => {}
        }
    }
    let _ = session.take_wakes();
    // The pipe is full: the sender goes on without it.
    session.handle_write(WriteResult::WouldBlock, now);
    assert!(
        session.take_wakes().contains(Wakes::DRIVER),
        "nobody else comes back for the bytes"
    );
    session.handle_driver_wake(now);
    let offered = std::iter::from_fn(|| match session.poll_output() {
        Output::Timeout(_) | Output::Done => None,
        output => Some(output),
    })
    .any(|output| matches!(output, Output::Write(_)));
    assert!(offered, "the background task writes the rest");
}

/// The default config without pollution notices: these tests speak plain
/// text to check framing and lifecycle; `Config::default()` would name the
/// first line as pollution.
fn plain_config() -> Config {
    let mut config = Config::default();
    config.pollution(None);
    config
}
