//! Fuzzing of the whole `Session` (channel halves + supervisor), with both
//! framings: arbitrary sequences of stdout bytes in any chunking, EOFs,
//! stderr, writes of any part of `poll_transmit`, stdin broken by the child,
//! exits, failed signals, time (to the next deadline or by any amount),
//! sends of valid and invalid payloads, shutdown and the caller taking items
//! at its own pace. The outputs are drained in the documented order after
//! every input, as an adapter does.
//!
//! Checked after every step: the outbound queue stays within its high-water
//! mark plus one message; what was written is a prefix of the accepted
//! messages, framed, and nothing is written once stdin is closed; sends are
//! refused for the right reason with the payload handed back; no signal
//! after the exit (only the one sweep), none before the shutdown but the
//! SIGKILL of a drop with kill-on-drop, each
//! action at most once; after `handle_timeout(now)` no deadline is left at
//! or before `now`; the exit report comes once, last, after every stderr
//! line was delivered, with counters that match what happened; a drop
//! kills only a child not yet reaped. When the adapter reads stdout only
//! while `wants_stdout()`, the receive queue costs less than
//! `recv_high_water` before every read and at most that plus one read's
//! worth ever (checked once every cost is known). In the end the frames
//! received are what the reference model makes of the stdout bytes.

#![no_main]

mod common;

use std::time::{Duration, Instant};

use arbitrary::Arbitrary;
use childwire_core::Swept;
use childwire_core::{
    Action, Config, ContentLength, Exit, ExitReport, Frame, Lines, PollutionKind, Received,
    Session, Signal, SignalError, StderrTailConfig,
};
use common::{Driver, Model, Payload};
use libfuzzer_sys::fuzz_target;

#[derive(Debug, Arbitrary)]
struct Input {
    /// `Content-Length` framing instead of lines.
    content_length: bool,
    limits: Limits,
    process_group: bool,
    /// The adapter reads stdout only while `wants_stdout()` says so (as the
    /// real ones do); otherwise it feeds whatever comes, and only the
    /// memory bound is not checked.
    respect_backpressure: bool,
    /// Stderr lines are confirmed delivered in every drain; otherwise only
    /// by `Op::DeliverStderr`.
    confirm_stderr: bool,
    ops: Vec<Op>,
}

/// Small limits, so every bound is reached often.
#[derive(Debug, Arbitrary)]
struct Limits {
    max_message_size: u8,
    max_send_size: u8,
    send_high_water: u8,
    recv_high_water: u16,
    /// Milliseconds, plus one (zero is invalid).
    write_timeout: Option<u16>,
    stdin_grace: u16,
    term_grace: u16,
    drain_grace: u16,
    tail_bytes: u8,
    tail_lines: u8,
    tail_pending: u8,
}

impl Limits {
    fn config(&self) -> Config {
        let ms = |n: u16| Duration::from_millis(u64::from(n));
        let mut config = Config::default();
        let mut tail = StderrTailConfig::default();
        tail.max_bytes = 1 + usize::from(self.tail_bytes % 64);
        tail.max_lines = usize::from(self.tail_lines % 8);
        tail.max_pending_bytes = tail.max_bytes + usize::from(self.tail_pending);
        config
            .max_message_size(1 + usize::from(self.max_message_size % 64))
            .max_send_size(1 + usize::from(self.max_send_size % 64))
            .send_high_water(1 + usize::from(self.send_high_water))
            .recv_high_water(1 + usize::from(self.recv_high_water % 2048))
            .write_timeout(self.write_timeout.map(|n| ms(n) + Duration::from_millis(1)))
            .stdin_grace(ms(self.stdin_grace))
            .term_grace(ms(self.term_grace))
            .drain_grace(ms(self.drain_grace))
            .stderr_tail(tail);
        config.validate().expect("the target builds valid configs");
        config
    }
}

#[derive(Debug, Arbitrary)]
enum Op {
    /// Bytes on stdout, copied in.
    Stdout(Vec<u8>),
    /// Bytes on stdout, handed over as `Bytes`.
    StdoutBytes(Vec<u8>),
    /// One well-formed frame around this body on stdout.
    StdoutFrame(Vec<u8>),
    StdoutEof,
    Stderr(Vec<u8>),
    StderrEof,
    /// The caller confirms the stderr lines it was given.
    DeliverStderr,
    /// The child reads up to this many bytes of `poll_transmit`.
    Write(u16),
    /// A write failed: the child closed its stdin.
    StdinBroken,
    Exit(Exit),
    /// The next signal the session asks for cannot be delivered.
    FailNextSignal(SignalError),
    /// The clock moves this many milliseconds, then `handle_timeout`.
    Advance(u16),
    /// The clock moves to `poll_timeout`, then `handle_timeout`.
    AdvanceToDeadline,
    /// `handle_timeout` now (early or spurious).
    Timeout,
    Send(Payload),
    Shutdown,
    /// Every handle is dropped without a shutdown; kill on drop or not.
    Abandon(bool),
    /// The caller takes up to this many items (plus one).
    Receive(u8),
}

struct Harness<F: Model> {
    io: Driver<F, Session<F>>,
    config: Config,
    confirm_stderr: bool,

    stderr_bytes: u64,
    stderr_eof: bool,
    stderr_unconfirmed: bool,
    stdin_closed: bool,

    shutdown: bool,
    /// Every handle was dropped (with kill on drop, or not) before any
    /// shutdown and the exit.
    abandoned: Option<bool>,
    /// A shutdown asked after the exit changes nothing.
    shutdown_before_exit: bool,
    exit: Option<Exit>,
    exit_at: Option<Instant>,
    armed_failure: Option<SignalError>,
    closes: u32,
    terms: u32,
    kills: u32,
    sweeps: u32,

    report: Option<ExitReport>,
    /// The kinds of stdout pollution named so far: each at most once (a
    /// child's config names pollution by default, every line still
    /// delivered, so the frames still match the model).
    pollution_kinds: Vec<PollutionKind>,
}

impl<F: Model> Harness<F> {
    fn new(framing: F, config: Config, input: &Input) -> Self {
        let now = Instant::now();
        let session = Session::with_framing(framing.clone(), &config, input.process_group, now);
        Self {
            io: Driver::new(
                session,
                framing,
                config.channel.clone(),
                input.respect_backpressure,
                now,
            ),
            config,
            confirm_stderr: input.confirm_stderr,
            stderr_bytes: 0,
            stderr_eof: false,
            stderr_unconfirmed: false,
            stdin_closed: false,
            shutdown: false,
            abandoned: None,
            shutdown_before_exit: false,
            exit: None,
            exit_at: None,
            armed_failure: None,
            closes: 0,
            terms: 0,
            kills: 0,
            sweeps: 0,
            report: None,
            pollution_kinds: Vec::new(),
        }
    }

    fn finished(&self) -> bool {
        self.report.is_some()
    }

    /// Nothing is written to stdin once it is closed or the child exited.
    fn stdin_done(&self) -> bool {
        self.stdin_closed || self.exit.is_some()
    }

    /// One input, then the drain. Nothing once the report was received: the
    /// adapter is done.
    fn apply(&mut self, op: &Op) {
        if self.finished() {
            return;
        }
        self.io.step += 1;
        let now = self.io.now;
        match op {
            Op::Stdout(bytes) => self.io.read(bytes, false),
            Op::StdoutBytes(bytes) => self.io.read(bytes, true),
            Op::StdoutFrame(body) => self.io.read_frame(body),
            Op::StdoutEof => self.io.read_eof(),
            Op::Stderr(bytes) => {
                if !self.stderr_eof {
                    self.stderr_bytes += bytes.len() as u64;
                    self.io.endpoint.handle_stderr(bytes, now);
                }
            }
            Op::StderrEof => {
                if !self.stderr_eof {
                    self.stderr_eof = true;
                    self.io.endpoint.handle_stderr_eof(now);
                }
            }
            Op::DeliverStderr => self.deliver_stderr(),
            Op::Write(n) => self.io.write(usize::from(*n), self.stdin_done()),
            Op::StdinBroken => {
                if !self.stdin_closed {
                    self.stdin_closed = true;
                    self.io.endpoint.handle_stdin_closed(now);
                }
            }
            Op::Exit(exit) => self.exit(*exit),
            Op::FailNextSignal(err) => self.armed_failure = Some(*err),
            Op::Advance(ms) => {
                self.io.advance(*ms);
                self.timeout();
            }
            Op::AdvanceToDeadline => {
                self.io.advance_to_deadline();
                self.timeout();
            }
            Op::Timeout => self.timeout(),
            Op::Send(payload) => {
                self.io.send(payload);
                if self.shutdown {
                    assert!(
                        self.io.endpoint.send_closed().is_some(),
                        "sending open after shutdown"
                    );
                }
            }
            Op::Shutdown => {
                self.shutdown = true;
                // After a drop that kills, as after the exit, a shutdown
                // changes nothing.
                self.shutdown_before_exit |= self.exit.is_none() && self.abandoned != Some(true);
                self.io.endpoint.shutdown(now);
            }
            Op::Abandon(kill) => {
                // The handles go once; a drop after a shutdown or the exit
                // changes nothing.
                if self.abandoned.is_none() && !self.shutdown && self.exit.is_none() {
                    self.abandoned = Some(*kill);
                }
                self.io.endpoint.handle_abandoned(*kill, now);
            }
            Op::Receive(n) => self.receive(usize::from(*n) + 1),
        }
        self.drain();
    }

    fn exit(&mut self, exit: Exit) {
        // An adapter reaps once.
        if self.exit.is_none() {
            self.exit = Some(exit);
            self.exit_at = Some(self.io.now);
            self.io.endpoint.handle_exit(exit, self.io.now);
        }
    }

    /// `handle_timeout`, then the drain (a failed signal is an input again)
    /// before the deadline is checked.
    fn timeout(&mut self) {
        self.io.handle_timeout();
        self.drain();
        self.io.check_deadline();
    }

    fn deliver_stderr(&mut self) {
        if std::mem::take(&mut self.stderr_unconfirmed) {
            self.io.endpoint.handle_stderr_delivered();
        }
    }

    fn receive(&mut self, n: usize) {
        for _ in 0..n {
            let Some(item) = self.io.endpoint.poll_received() else {
                return;
            };
            assert!(!self.finished(), "an item after the exit report: {item:?}");
            match item {
                Received::Message(m) => self.io.take(Frame::Message(m)),
                Received::Oversized(o) => self.io.take(Frame::Oversized(o)),
                Received::Malformed(m) => self.io.take(Frame::Malformed(m)),
                Received::Exited(report) => self.report(*report),
                Received::Pollution(notice) => {
                    assert!(
                        !self.pollution_kinds.contains(&notice.kind),
                        "a pollution kind named twice: {notice:?}"
                    );
                    self.pollution_kinds.push(notice.kind);
                }
                other => panic!("an item kind this target does not know: {other:?}"),
            }
        }
    }

    /// The caller takes everything there is.
    fn receive_all(&mut self) {
        while !self.finished() && self.io.endpoint.has_received() {
            self.apply(&Op::Receive(u8::MAX));
        }
    }

    fn report(&mut self, report: ExitReport) {
        assert!(
            !self.stderr_unconfirmed,
            "the report before the stderr lines were delivered"
        );
        assert_eq!(Some(report.exit), self.exit, "a report for another exit");
        assert!(self.io.all_taken(), "the report before every frame");
        let session = &mut self.io.endpoint;
        assert_eq!(session.poll_received(), None, "an item after the report");
        assert!(session.is_finished());
        let counters = &report.counters;
        assert_eq!(counters.stderr_bytes, self.stderr_bytes);
        self.io.check_written(counters);
        assert_eq!(report.shutdown_requested, self.shutdown_before_exit);
        // The end waits for both pipes, or for `drain_grace` after the exit.
        let drained = self.io.eof && self.stderr_eof;
        if report.pipes_drained {
            assert!(drained, "pipes said drained before both EOFs");
        } else {
            let exit_at = self.exit_at.expect("an exit before the report");
            assert!(
                self.io.now >= exit_at + self.config.lifecycle.drain_grace,
                "the report before the pipes closed and before drain_grace"
            );
        }
        self.report = Some(report);
    }

    /// The outputs, in the order the session documents.
    fn drain(&mut self) {
        let now = self.io.now;
        // 1. Actions, carried out; a failed signal is an input again.
        while let Some(action) = self.io.endpoint.poll_action() {
            let session = &mut self.io.endpoint;
            match action {
                Action::CloseStdin => {
                    assert!(self.exit.is_none(), "CloseStdin after the exit");
                    self.closes += 1;
                    self.stdin_closed = true;
                    session.handle_stdin_closed(now);
                }
                Action::Signal(signal) => {
                    assert!(self.exit.is_none(), "{signal} after the exit");
                    assert!(
                        self.shutdown || (self.abandoned == Some(true) && signal == Signal::Kill),
                        "{signal} without a shutdown or a drop that kills"
                    );
                    match signal {
                        Signal::Term => self.terms += 1,
                        Signal::Kill => self.kills += 1,
                    }
                    if let Some(err) = self.armed_failure.take() {
                        session.handle_signal_failed(signal, err, now);
                    }
                }
                Action::Sweep => {
                    // Asked once after the exit, with or without a group:
                    // what escaped the group is swept too.
                    assert!(self.exit.is_some(), "a sweep before the exit");
                    self.sweeps += 1;
                    session.handle_swept(Swept::default(), now);
                }
            }
            assert!(
                self.closes <= 1 && self.terms <= 1 && self.kills <= 1 && self.sweeps <= 1,
                "an action asked twice: close {}, term {}, kill {}, sweep {}",
                self.closes,
                self.terms,
                self.kills,
                self.sweeps
            );
        }
        // 2. What to write (the child takes it with `Op::Write`).
        let _ = self.io.poll_transmit(self.stdin_done());
        // 3. Stderr lines.
        while let Some(line) = self.io.endpoint.poll_stderr_line() {
            assert!(!line.contains(&b'\n'));
            self.stderr_unconfirmed = true;
        }
        if self.confirm_stderr {
            self.deliver_stderr();
        }
        // 4. and 5. `wants_stdout` and `poll_timeout` are read where used.

        let session = &self.io.endpoint;
        assert_eq!(session.has_exited(), self.exit.is_some());
        assert_eq!(
            session.drop_action(),
            self.exit.is_none().then_some(Action::Signal(Signal::Kill)),
            "a drop kills a live child and leaves a reaped one alone"
        );
        self.io.check_queues();
    }

    /// Runs the child to its end: the caller takes everything, the pipes
    /// close, the clock runs out, and the report must come.
    fn finish(mut self) {
        for _ in 0..4 {
            self.apply(&Op::DeliverStderr);
            self.receive_all();
            self.apply(&Op::StdoutEof);
            self.apply(&Op::StderrEof);
            self.receive_all();
            for _ in 0..4 {
                self.apply(&Op::AdvanceToDeadline);
            }
            self.apply(&Op::Exit(Exit::Signal(9)));
            self.apply(&Op::DeliverStderr);
            self.apply(&Op::AdvanceToDeadline);
            self.receive_all();
        }
        assert!(self.finished(), "no exit report once everything ended");
        self.io.check_frames();
    }
}

fn run<F: Model>(framing: F, input: &Input) {
    let config = input.limits.config();
    let mut harness = Harness::new(framing, config, input);
    harness.drain();
    for op in &input.ops {
        if harness.finished() {
            break;
        }
        harness.apply(op);
    }
    harness.finish();
}

fuzz_target!(|input: Input| {
    if input.content_length {
        run(ContentLength, &input);
    } else {
        run(Lines, &input);
    }
});
