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
//! after the exit (only the one sweep), none before the shutdown, each
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
use bytes::Bytes;
use childwire_core::lifecycle::Swept;
use childwire_core::{
    Action, Config, ContentLength, Exit, ExitReport, Frame, Lines, Received, SendErrorKind,
    Session, Signal, SignalError, StderrTailConfig,
};
use common::{Model, QueueLog};
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
    /// The caller takes up to this many items (plus one).
    Receive(u8),
}

#[derive(Debug, Arbitrary)]
enum Payload {
    /// Any bytes: line framing refuses those with `\n` or `\r`.
    Raw(Vec<u8>),
    /// Bytes without `\n` or `\r`.
    Text(Vec<u8>),
    Empty,
    /// This much over `max_send_size`.
    OverLimit(u8),
}

impl Payload {
    fn bytes(&self, max_send_size: usize) -> Vec<u8> {
        match self {
            Payload::Raw(bytes) => bytes.clone(),
            Payload::Text(bytes) => bytes
                .iter()
                .copied()
                .filter(|&b| b != b'\n' && b != b'\r')
                .collect(),
            Payload::Empty => Vec::new(),
            Payload::OverLimit(extra) => vec![b'x'; max_send_size + 1 + usize::from(*extra)],
        }
    }
}

struct Harness<F: Model> {
    session: Session<F>,
    framing: F,
    config: Config,
    respect_backpressure: bool,
    confirm_stderr: bool,
    now: Instant,
    step: usize,

    stdout: Vec<u8>,
    stdout_eof: bool,
    largest_read: usize,
    stderr_bytes: u64,
    stderr_eof: bool,
    stderr_unconfirmed: bool,

    /// Every accepted message, framed, in order: what stdin may carry.
    wire: Vec<u8>,
    /// Where each accepted message ends in `wire`, with its payload length.
    boundaries: Vec<(usize, usize)>,
    written: Vec<u8>,
    stdin_closed: bool,

    shutdown: bool,
    /// A shutdown asked after the exit changes nothing.
    shutdown_before_exit: bool,
    exit: Option<Exit>,
    exit_at: Option<Instant>,
    armed_failure: Option<SignalError>,
    closes: u32,
    terms: u32,
    kills: u32,
    sweeps: u32,

    items: Vec<F::Item>,
    taken: u64,
    report: Option<ExitReport>,
    log: QueueLog,
}

impl<F: Model> Harness<F> {
    fn new(framing: F, config: Config, input: &Input) -> Self {
        let now = Instant::now();
        let session = Session::with_framing(framing.clone(), &config, input.process_group, now);
        Self {
            session,
            framing,
            config,
            respect_backpressure: input.respect_backpressure,
            confirm_stderr: input.confirm_stderr,
            now,
            step: 0,
            stdout: Vec::new(),
            stdout_eof: false,
            largest_read: 0,
            stderr_bytes: 0,
            stderr_eof: false,
            stderr_unconfirmed: false,
            wire: Vec::new(),
            boundaries: Vec::new(),
            written: Vec::new(),
            stdin_closed: false,
            shutdown: false,
            shutdown_before_exit: false,
            exit: None,
            exit_at: None,
            armed_failure: None,
            closes: 0,
            terms: 0,
            kills: 0,
            sweeps: 0,
            items: Vec::new(),
            taken: 0,
            report: None,
            log: QueueLog::default(),
        }
    }

    fn finished(&self) -> bool {
        self.report.is_some()
    }

    fn max_message_size(&self) -> usize {
        self.config.channel.max_message_size
    }

    /// Whether the adapter reads stdout now.
    fn may_read(&self) -> bool {
        !self.stdout_eof && (!self.respect_backpressure || self.session.wants_stdout())
    }

    /// One input, then the drain. Nothing once the report was received: the
    /// adapter is done.
    fn apply(&mut self, op: &Op) {
        if self.finished() {
            return;
        }
        self.step += 1;
        match op {
            Op::Stdout(bytes) => self.read(bytes, false),
            Op::StdoutBytes(bytes) => self.read(bytes, true),
            Op::StdoutFrame(body) => {
                let frame = self.framing.frame(body);
                self.read(&frame, false);
            }
            Op::StdoutEof => {
                if self.may_read() {
                    self.before_read();
                    self.stdout_eof = true;
                    self.session.handle_stdout_eof(self.now);
                }
            }
            Op::Stderr(bytes) => {
                if !self.stderr_eof {
                    self.stderr_bytes += bytes.len() as u64;
                    self.session.handle_stderr(bytes, self.now);
                }
            }
            Op::StderrEof => {
                if !self.stderr_eof {
                    self.stderr_eof = true;
                    self.session.handle_stderr_eof(self.now);
                }
            }
            Op::DeliverStderr => self.deliver_stderr(),
            Op::Write(n) => self.write(usize::from(*n)),
            Op::StdinBroken => {
                if !self.stdin_closed {
                    self.stdin_closed = true;
                    self.session.handle_stdin_closed(self.now);
                }
            }
            Op::Exit(exit) => self.exit(*exit),
            Op::FailNextSignal(err) => self.armed_failure = Some(*err),
            Op::Advance(ms) => {
                self.now += Duration::from_millis(u64::from(*ms));
                self.timeout();
            }
            Op::AdvanceToDeadline => self.advance_to_deadline(),
            Op::Timeout => self.timeout(),
            Op::Send(payload) => self.send(payload),
            Op::Shutdown => {
                self.shutdown = true;
                self.shutdown_before_exit |= self.exit.is_none();
                self.session.shutdown(self.now);
            }
            Op::Receive(n) => self.receive(usize::from(*n) + 1),
        }
        self.drain();
    }

    /// The log entry before a read: the adapter reads only below the mark.
    fn before_read(&mut self) {
        if self.respect_backpressure {
            let hw = self.config.channel.recv_high_water;
            let decoded = common::decoded(&self.session.counters());
            self.log.record(decoded, self.taken, hw - 1, self.step);
        }
    }

    fn read(&mut self, bytes: &[u8], by_bytes: bool) {
        if !self.may_read() {
            return;
        }
        self.before_read();
        self.largest_read = self.largest_read.max(bytes.len());
        self.stdout.extend_from_slice(bytes);
        if by_bytes {
            self.session
                .handle_stdout_bytes(Bytes::copy_from_slice(bytes), self.now);
        } else {
            self.session.handle_stdout(bytes, self.now);
        }
    }

    fn write(&mut self, n: usize) {
        let transmit = self.session.poll_transmit(self.now);
        if self.stdin_closed || self.exit.is_some() {
            assert_eq!(transmit, None, "bytes handed out for a closed stdin");
            return;
        }
        let Some(bytes) = transmit else { return };
        assert!(!bytes.is_empty(), "an empty transmit");
        let n = n.min(bytes.len());
        self.written.extend_from_slice(&bytes[..n]);
        assert!(
            self.wire.starts_with(&self.written),
            "stdin carries something else than the accepted messages"
        );
        self.session.handle_written(n, self.now);
    }

    fn exit(&mut self, exit: Exit) {
        // An adapter reaps once.
        if self.exit.is_none() {
            self.exit = Some(exit);
            self.exit_at = Some(self.now);
            self.session.handle_exit(exit, self.now);
        }
    }

    fn timeout(&mut self) {
        self.session.handle_timeout(self.now);
        self.drain();
        if let Some(deadline) = self.session.poll_timeout() {
            assert!(
                deadline > self.now,
                "a deadline at or before the time it was just handled"
            );
        }
    }

    fn advance_to_deadline(&mut self) {
        if let Some(deadline) = self.session.poll_timeout() {
            self.now = self.now.max(deadline);
        }
        self.timeout();
    }

    fn send(&mut self, payload: &Payload) {
        let max_send = self.config.channel.max_send_size;
        let bytes = payload.bytes(max_send);
        let closed = self.session.send_closed();
        let ready = self.session.send_ready();
        let queued = self.session.queued();
        match self.session.send(bytes.clone()) {
            Ok(()) => {
                assert_eq!(closed, None, "accepted after sending was closed");
                assert!(ready, "accepted while the queue said wait");
                assert_eq!(self.framing.check(&bytes, max_send), Ok(()));
                let framed = common::encode(&self.framing, &bytes);
                assert_eq!(self.session.queued(), queued + framed.len());
                self.wire.extend_from_slice(&framed);
                self.boundaries.push((self.wire.len(), bytes.len()));
            }
            Err(err) => {
                assert_eq!(self.session.queued(), queued, "a refused send queued bytes");
                let kind = err.kind();
                assert_eq!(
                    err.into_payload(),
                    bytes,
                    "the payload is handed back whole"
                );
                match (closed, self.framing.check(&bytes, max_send)) {
                    (Some(closed), _) => assert_eq!(kind, SendErrorKind::Closed(closed)),
                    (None, Err(invalid)) => assert_eq!(kind, SendErrorKind::Invalid(invalid)),
                    (None, Ok(())) => {
                        assert_eq!(kind, SendErrorKind::Full);
                        assert!(!ready, "refused as full while the queue said ready");
                    }
                }
            }
        }
        if self.shutdown {
            assert!(
                self.session.send_closed().is_some(),
                "sending open after shutdown"
            );
        }
    }

    fn deliver_stderr(&mut self) {
        if std::mem::take(&mut self.stderr_unconfirmed) {
            self.session.handle_stderr_delivered();
        }
    }

    fn receive(&mut self, n: usize) {
        for _ in 0..n {
            let Some(item) = self.session.poll_received() else {
                return;
            };
            assert!(!self.finished(), "an item after the exit report: {item:?}");
            match item {
                Received::Message(m) => self.take(Frame::Message(m)),
                Received::Oversized(o) => self.take(Frame::Oversized(o)),
                Received::Malformed(m) => self.take(Frame::Malformed(m)),
                Received::Exited(report) => self.report(*report),
                other => panic!("an item kind this target does not know: {other:?}"),
            }
        }
    }

    /// The caller takes everything there is.
    fn receive_all(&mut self) {
        while !self.finished() && self.session.has_received() {
            self.apply(&Op::Receive(u8::MAX));
        }
    }

    fn take(&mut self, frame: Frame) {
        self.log.taken(common::cost(&frame));
        self.taken += 1;
        self.items.push(F::item(frame));
    }

    fn report(&mut self, report: ExitReport) {
        assert!(
            !self.stderr_unconfirmed,
            "the report before the stderr lines were delivered"
        );
        assert_eq!(Some(report.exit), self.exit, "a report for another exit");
        assert_eq!(
            common::decoded(&self.session.counters()),
            self.taken,
            "the report before every frame"
        );
        assert_eq!(
            self.session.poll_received(),
            None,
            "an item after the report"
        );
        assert!(self.session.is_finished());
        let counters = &report.counters;
        assert_eq!(counters.stderr_bytes, self.stderr_bytes);
        let written = self
            .boundaries
            .iter()
            .take_while(|&&(end, _)| end <= self.written.len());
        assert_eq!(counters.messages_out, written.clone().count() as u64);
        assert_eq!(
            counters.bytes_out,
            written.map(|&(_, len)| len as u64).sum::<u64>()
        );
        assert_eq!(report.shutdown_requested, self.shutdown_before_exit);
        // The end waits for both pipes, or for `drain_grace` after the exit.
        let drained = self.stdout_eof && self.stderr_eof;
        if report.pipes_drained {
            assert!(drained, "pipes said drained before both EOFs");
        } else {
            let exit_at = self.exit_at.expect("an exit before the report");
            assert!(
                self.now >= exit_at + self.config.lifecycle.drain_grace,
                "the report before the pipes closed and before drain_grace"
            );
        }
        self.report = Some(report);
    }

    /// The outputs, in the order the session documents.
    fn drain(&mut self) {
        // 1. Actions, carried out; a failed signal is an input again.
        while let Some(action) = self.session.poll_action() {
            match action {
                Action::CloseStdin => {
                    assert!(self.exit.is_none(), "CloseStdin after the exit");
                    self.closes += 1;
                    self.stdin_closed = true;
                    self.session.handle_stdin_closed(self.now);
                }
                Action::Signal(signal) => {
                    assert!(self.exit.is_none(), "{signal} after the exit");
                    assert!(self.shutdown, "{signal} without a shutdown");
                    match signal {
                        Signal::Term => self.terms += 1,
                        Signal::Kill => self.kills += 1,
                    }
                    if let Some(err) = self.armed_failure.take() {
                        self.session.handle_signal_failed(signal, err, self.now);
                    }
                }
                Action::Sweep => {
                    // Asked once after the exit, with or without a group:
                    // what escaped the group is swept too.
                    assert!(self.exit.is_some(), "a sweep before the exit");
                    self.sweeps += 1;
                    self.session.handle_swept(Swept::default(), self.now);
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
        let transmit = self.session.poll_transmit(self.now);
        if self.stdin_closed || self.exit.is_some() {
            assert_eq!(transmit, None, "bytes handed out for a closed stdin");
        }
        // 3. Stderr lines.
        while let Some(line) = self.session.poll_stderr_line() {
            assert!(!line.contains(&b'\n'));
            self.stderr_unconfirmed = true;
        }
        if self.confirm_stderr {
            self.deliver_stderr();
        }
        // 4. and 5. `wants_stdout` and `poll_timeout` are read where used.

        assert_eq!(self.session.has_exited(), self.exit.is_some());
        assert_eq!(
            self.session.drop_action(),
            self.exit.is_none().then_some(Action::Signal(Signal::Kill)),
            "a drop kills a live child and leaves a reaped one alone"
        );

        let channel = &self.config.channel;
        let one_message = channel.max_send_size + self.framing.overhead(channel.max_send_size);
        assert!(
            self.session.queued() <= channel.send_high_water + one_message,
            "outbound queue {} over {} + one message",
            self.session.queued(),
            channel.send_high_water
        );
        if self.respect_backpressure {
            let bound = channel.recv_high_water
                + common::one_read(self.largest_read, channel.max_message_size);
            let decoded = common::decoded(&self.session.counters());
            self.log.record(decoded, self.taken, bound, self.step);
        }
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
        self.log.check();
        let max = self.max_message_size();
        if self.stdout_eof {
            assert_eq!(self.items, F::expected(&self.stdout, max));
        } else {
            F::check_without_eof(&self.items, &self.stdout, max);
        }
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
