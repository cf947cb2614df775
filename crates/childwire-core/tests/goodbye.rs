//! A shutdown's goodbye on a simulated clock: what is written to the child
//! and when, what is awaited, what the receiver gets, and that the graces
//! still bound it all.

use std::time::{Duration, Instant};

use childwire_core::{
    Action, Config, DEFAULT_ANSWER_TIMEOUT, EndedBy, Exit, ExitReport, Goodbye, Output, Received,
    Reply, Session, Signal, Swept, WriteOp, WriteResult, WriteStep,
};

const SHUTDOWN: &[u8] = br#"{"jsonrpc":"2.0","id":"childwire-shutdown","method":"shutdown"}"#;
const EXIT: &[u8] = br#"{"jsonrpc":"2.0","method":"exit"}"#;
const ANSWER: &[u8] = b"{\"jsonrpc\":\"2.0\",\"id\":\"childwire-shutdown\",\"result\":null}\n";

/// A session whose child reads everything written to it; the test plays
/// the background task and the child.
struct Sim {
    session: Session,
    start: Instant,
    now: Instant,
    /// Everything the child read on stdin, as lines.
    written: Vec<Vec<u8>>,
    /// What the driver did to the child, in order, with when.
    actions: Vec<(Action, Duration)>,
    report: Option<ExitReport>,
}

impl Sim {
    fn new(goodbye: Option<Goodbye>) -> Self {
        let mut config = Config::default();
        config.goodbye(goodbye);
        let now = Instant::now();
        let mut session = Session::new(&config, true, now);
        session.handle_stderr_eof(now);
        Self {
            session,
            start: now,
            now,
            written: Vec::new(),
            actions: Vec::new(),
            report: None,
        }
    }

    fn at(&self) -> Duration {
        self.now - self.start
    }

    /// Wakes the driver and carries out its outputs; writes reach the child
    /// whole, reads find nothing.
    fn drive(&mut self) {
        self.session.handle_driver_wake(self.now);
        loop {
            match self.session.poll_output() {
                Output::Signal(signal) => self.actions.push((Action::Signal(signal), self.at())),
                Output::Sweep => {
                    self.actions.push((Action::Sweep, self.at()));
                    self.session.handle_swept(Swept::default(), self.now);
                }
                Output::Report(report) => self.report = Some(*report),
                Output::Write(round) => loop {
                    match self.session.poll_write(&round, self.now) {
                        WriteStep::Io(WriteOp::Write(bytes)) => {
                            self.written.extend(
                                bytes
                                    .split(|&b| b == b'\n')
                                    .filter(|line| !line.is_empty())
                                    .map(<[u8]>::to_vec),
                            );
                            self.session
                                .handle_write(WriteResult::Written(bytes.len()), self.now);
                        }
                        WriteStep::Io(_) => {
                            self.session.handle_write(WriteResult::Done, self.now);
                        }
                        WriteStep::Drop => {
                            self.actions.push((Action::CloseStdin, self.at()));
                        }
                        WriteStep::Done | WriteStep::Busy | WriteStep::Yield => break,
                    }
                },
                Output::Read => self.session.handle_read_blocked(),
                Output::StderrLine(_) => self.session.handle_stderr_delivered(),
                Output::StdoutLine(_) | Output::StdoutNotice(_) => {}
                Output::Timeout(_) | Output::Done => return,
            }
        }
    }

    fn advance(&mut self, by: Duration) {
        self.now += by;
        self.drive();
    }

    /// The child writes `data` on stdout.
    fn child_writes(&mut self, data: &[u8]) {
        self.session.handle_read(data, self.now);
        self.drive();
    }

    /// The child exits with `code`, its stdout at EOF.
    fn child_exits(&mut self, code: i32) {
        self.session.handle_read_eof(self.now);
        self.session.handle_exit(Exit::Code(code), self.now);
        self.drive();
    }

    fn stdin_closed(&self) -> bool {
        self.actions.iter().any(|(a, _)| *a == Action::CloseStdin)
    }

    fn signals(&self) -> Vec<Signal> {
        self.actions
            .iter()
            .filter_map(|(a, _)| match a {
                Action::Signal(s) => Some(*s),
                _ => None,
            })
            .collect()
    }

    /// Every item the receiver gets, to the end.
    fn received(&mut self) -> Vec<Received> {
        std::iter::from_fn(|| self.session.poll_received()).collect()
    }
}

#[test]
fn lsp_goodbye_waits_for_the_answer_to_shutdown_then_sends_exit_then_closes_stdin() {
    let mut sim = Sim::new(Some(Goodbye::lsp()));
    // Queued, and left to the background task (the shutdown writes it).
    let _ = sim
        .session
        .send(r#"{"jsonrpc":"2.0","id":1,"method":"hover"}"#)
        .unwrap();
    sim.session.handle_shutdown(sim.now);
    sim.drive();
    // What was queued first, then `shutdown`; `exit` waits for the answer,
    // and stdin stays open.
    assert_eq!(sim.written.len(), 2, "{:?}", sim.written);
    assert_eq!(sim.written[1], SHUTDOWN);
    assert!(!sim.stdin_closed());

    // Another message first: it is the caller's.
    sim.advance(Duration::from_millis(10));
    sim.child_writes(b"{\"jsonrpc\":\"2.0\",\"id\":1,\"result\":null}\n");
    assert_eq!(sim.written.len(), 2);
    // The answer: `exit` goes, then stdin closes.
    sim.advance(Duration::from_millis(10));
    sim.child_writes(ANSWER);
    assert_eq!(sim.written.len(), 3);
    assert_eq!(sim.written[2], EXIT);
    assert!(sim.stdin_closed());

    sim.advance(Duration::from_millis(5));
    sim.child_exits(0);
    assert!(sim.signals().is_empty(), "{:?}", sim.actions);
    let items = sim.received();
    // The caller's answer, then the report: the goodbye's answer is not
    // handed out.
    assert_eq!(items.len(), 2, "{items:?}");
    assert!(
        matches!(&items[0], Received::Message(m) if m.starts_with(br#"{"jsonrpc":"2.0","id":1,"#))
    );
    let Received::Exited(report) = &items[1] else {
        panic!("{items:?}")
    };
    assert_eq!(report.ended_by, EndedBy::Goodbye);
    assert!(report.to_string().contains("after the goodbye"), "{report}");
}

#[test]
fn an_answer_that_does_not_come_is_given_up_on_and_the_rest_still_goes() {
    let mut sim = Sim::new(Some(Goodbye::lsp()));
    sim.session.handle_shutdown(sim.now);
    sim.drive();
    assert_eq!(sim.written, vec![SHUTDOWN.to_vec()]);
    // Just before the answer's deadline: still waiting.
    assert_eq!(
        sim.session.poll_timeout(),
        Some(sim.start + DEFAULT_ANSWER_TIMEOUT)
    );
    sim.advance(DEFAULT_ANSWER_TIMEOUT - Duration::from_millis(1));
    assert_eq!(sim.written.len(), 1);
    assert!(!sim.stdin_closed());
    // At it: `exit` goes without the answer, and stdin closes.
    sim.advance(Duration::from_millis(1));
    assert_eq!(sim.written, vec![SHUTDOWN.to_vec(), EXIT.to_vec()]);
    assert!(sim.stdin_closed());
    // A late answer is the caller's now (nothing awaits it).
    sim.child_writes(ANSWER);
    sim.child_exits(0);
    let items = sim.received();
    assert!(matches!(&items[0], Received::Message(_)), "{items:?}");
}

#[test]
fn the_graces_still_bound_a_goodbye_that_waits_longer_than_them() {
    let mut config_goodbye = Goodbye::lsp().answer_timeout(Duration::from_secs(60));
    config_goodbye = config_goodbye.notify(r#"{"jsonrpc":"2.0","method":"never-sent"}"#);
    let mut sim = Sim::new(Some(config_goodbye));
    sim.session.handle_shutdown(sim.now);
    sim.drive();
    // Nothing answers: SIGTERM at the stdin grace (2 s), SIGKILL 2 s later.
    while sim.signals().len() < 2 {
        let deadline = sim.session.poll_timeout().expect("a deadline");
        sim.now = deadline;
        sim.drive();
    }
    let at = |signal| {
        sim.actions
            .iter()
            .find(|(a, _)| *a == Action::Signal(signal))
            .map(|(_, at)| *at)
    };
    assert_eq!(at(Signal::Term), Some(Duration::from_secs(2)));
    assert_eq!(at(Signal::Kill), Some(Duration::from_secs(4)));
    // Stdin closed with SIGTERM; what came after the request was never
    // written.
    assert_eq!(sim.written, vec![SHUTDOWN.to_vec()]);
    sim.session.handle_exit(Exit::Signal(9), sim.now);
    sim.session.handle_read_eof(sim.now);
    sim.drive();
    assert_eq!(sim.report.expect("a report").ended_by, EndedBy::Sigkill);
}

#[test]
fn a_child_that_exits_during_the_goodbye_ends_it() {
    let mut sim = Sim::new(Some(Goodbye::lsp()));
    sim.session.handle_shutdown(sim.now);
    sim.drive();
    sim.advance(Duration::from_millis(3));
    sim.child_exits(0);
    assert_eq!(sim.written, vec![SHUTDOWN.to_vec()]);
    assert!(sim.signals().is_empty());
    assert_eq!(
        sim.session.poll_timeout(),
        None,
        "nothing is awaited any more"
    );
    let report = sim.report.expect("a report");
    assert_eq!(report.ended_by, EndedBy::Goodbye);
}

#[test]
fn dap_goodbye_waits_for_the_disconnect_response() {
    let mut sim = Sim::new(Some(Goodbye::dap()));
    sim.session.handle_shutdown(sim.now);
    sim.drive();
    assert_eq!(sim.written.len(), 1);
    assert!(
        sim.written[0].starts_with(br#"{"seq":2147483647,"type":"request","command":"disconnect""#)
    );
    // An event, then a response to another request: not it.
    sim.child_writes(b"{\"seq\":5,\"type\":\"event\",\"event\":\"output\"}\n");
    sim.child_writes(b"{\"seq\":6,\"type\":\"response\",\"request_seq\":3,\"success\":true}\n");
    assert!(!sim.stdin_closed());
    sim.child_writes(b"{\"seq\": 7, \"type\": \"response\", \"request_seq\": 2147483647, \"success\": true, \"command\": \"disconnect\"}\n");
    assert!(sim.stdin_closed());
    sim.child_exits(0);
    let items = sim.received();
    // The event and the other response reach the caller; the disconnect's
    // answer does not.
    assert_eq!(items.len(), 3, "{items:?}");
}

#[test]
fn without_a_goodbye_stdin_closes_once_the_queue_is_written() {
    let mut sim = Sim::new(None);
    let _ = sim.session.send("{}").unwrap();
    sim.session.handle_shutdown(sim.now);
    sim.drive();
    assert_eq!(sim.written, vec![b"{}".to_vec()]);
    assert!(sim.stdin_closed());
    sim.child_exits(0);
    assert_eq!(sim.report.expect("a report").ended_by, EndedBy::StdinClose);
}

#[test]
fn a_kill_stops_the_goodbye() {
    let mut sim = Sim::new(Some(Goodbye::lsp()));
    sim.session.handle_shutdown(sim.now);
    sim.drive();
    sim.session.handle_kill(sim.now);
    sim.drive();
    assert_eq!(sim.signals(), vec![Signal::Kill]);
    // The answer comes after all: nothing more is written.
    sim.child_writes(ANSWER);
    assert_eq!(sim.written, vec![SHUTDOWN.to_vec()]);
    sim.session.handle_exit(Exit::Signal(9), sim.now);
    sim.session.handle_read_eof(sim.now);
    sim.drive();
    assert_eq!(sim.report.expect("a report").ended_by, EndedBy::Sigkill);
}

#[test]
fn reply_matching() {
    let id = Reply::JsonRpcId(r#""childwire-shutdown""#.into());
    assert!(id.is_answered_by(&ANSWER[..ANSWER.len() - 1]));
    // A request with that id is not its answer.
    assert!(!id.is_answered_by(SHUTDOWN));
    let seq = Reply::DapRequestSeq(12);
    assert!(seq.is_answered_by(br#"{"type":"response","request_seq":12}"#));
    assert!(!seq.is_answered_by(br#"{"type":"response","request_seq":123}"#));
    assert!(!seq.is_answered_by(br#"{"type":"response","request_seq":"12"}"#));
    assert!(!seq.is_answered_by(br#"{"type":"response","request_seq":99999999999999999999999}"#));
}
