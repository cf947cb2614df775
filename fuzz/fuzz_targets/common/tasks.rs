//! The async transport's tasks, played against one `Session` as the async
//! layer plays them: two senders, the receiver and the background task each
//! lock, make one core call, take a pipe when the core hands it out, and do
//! the I/O "outside the lock": here, in a later step of the input, so that
//! any other task's calls can come between the two halves of every I/O, as
//! on two cores. The child is a model too: what it wrote to stdout, what it
//! read of stdin, its stderr, its exit.
//!
//! Checked after every step: one writer and one reader at a time; what the
//! child read is a prefix of the accepted messages, framed, and nothing is
//! written after stdin was dropped; sends refused for the right reason with
//! the payload handed back; a flush (a sender's, the `Sink`'s, a close's)
//! says `Ok` only when everything up to its target reached the child, and
//! an error only when some of it did not; the child's signals only after a
//! shutdown, a kill or an abandon, never after its exit, each at most once,
//! one sweep, after the exit or the driver's stop; after the driver's wake
//! at `now` no deadline is left at or before `now`; the report once, after
//! every stderr line was delivered, with counters that match; when the
//! receive queue is read as the core says, its cost stays within
//! `recv_high_water` plus one read. In the end, with every task run to
//! completion, the report (for a child) or the end of the stream (for a
//! channel) comes, and the frames taken are what the reference model makes
//! of the bytes the child wrote.
//!
//! Wakes: the steps of the input may poll any task at any time (a spurious
//! wake-up is allowed), but the end is played as a runtime plays it: a task
//! whose last poll ended waiting runs again only once something woke it
//! (the core's `Wakes`, a pipe's readiness, its timer, the child's exit).
//! So a wake the core forgot is a task left waiting, which the end names:
//! before the child ends, with stdin open, every accepted message is written
//! and no sender waits for room or its flush; at every quiet point, a
//! waiting receiver has no item queued beside it; and the end comes. (Each
//! of these caught a wake taken out of the core on purpose within two
//! minutes of fuzzing: the background task's for bytes a sender left behind
//! a full pipe, the senders' after a write, the receiver's after another
//! task's read.)

use std::time::{Duration, Instant};

use arbitrary::Arbitrary;
use bytes::Bytes;
use childwire_core::{
    Config, Decoding, Exit, ExitReport, Frame, Output, PollutionKind, PollutionPolicy, Receive,
    Received, SendErrorKind, Sent, Session, Signal, SignalError, Swept, Wakes, WriteOp,
    WriteResult, WriteRound, WriteStep,
};

use childwire_core::pollution::classify;

use super::{Model, QueueLog};

/// Which handle a step is made by.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Arbitrary)]
pub enum SenderId {
    A,
    B,
}

/// A task of the transport.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Arbitrary)]
pub enum Who {
    Sender(SenderId),
    Receiver,
    Driver,
}

/// What the pipe does with the I/O a task holds.
#[derive(Debug, Clone, Copy, Arbitrary)]
pub enum Io {
    /// The call goes through; a write takes up to this many bytes (0: none,
    /// the pipe is full).
    Take(u16),
    /// Nothing now: the pipe wakes the task later.
    Block,
    /// The call fails.
    Fail,
}

/// A payload for `send`.
#[derive(Debug, Arbitrary)]
pub enum Payload {
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

#[derive(Debug, Arbitrary)]
pub enum Op {
    /// A sender sends (`send().await`'s first poll), or, waiting for room,
    /// tries again.
    Send(SenderId, Payload),
    /// The `Sink`'s `start_send`: above the high-water mark by one message.
    Feed(SenderId, Payload),
    /// A sender flushes (`flush()`, the `Sink`'s `poll_flush`).
    Flush(SenderId),
    /// A sender closes (`close()`).
    Close(SenderId),
    /// The task's pipe call completes.
    Io(Who, Io),
    /// The receiver takes up to this many items (plus one).
    Recv(u8),
    /// The read a task holds completes with up to this many bytes of what
    /// the child wrote (or its end, or nothing yet).
    Read(u16),
    /// The background task is woken.
    DriverWake,
    /// The child writes to stdout.
    Stdout(Vec<u8>),
    /// One well-formed frame around this body.
    StdoutFrame(Vec<u8>),
    /// The child's stdout closes.
    StdoutEof,
    Stderr(Vec<u8>),
    StderrEof,
    /// The driver hands on the stderr lines it holds.
    DeliverStderr,
    /// The child closes its stdin: writes fail from now on.
    ChildClosesStdin,
    Exit(Exit),
    /// The next signal the driver sends cannot be delivered.
    FailNextSignal(SignalError),
    /// The clock moves this many milliseconds.
    Advance(u16),
    /// The clock moves to the session's next deadline.
    AdvanceToDeadline,
    Shutdown,
    Kill,
    /// A handle is dropped; for the driver, its task (its runtime shut
    /// down).
    Drop(Who),
}

/// What a task is in the middle of.
#[derive(Debug, Default)]
struct Task {
    /// The write round it runs, and the call it holds the pipe for.
    round: Option<WriteRound>,
    op: Option<WriteOp>,
    /// It holds the reading pipe.
    reading: bool,
    /// A payload refused for want of room, offered again later.
    waiting: Option<Vec<u8>>,
    /// A flush (or a close) waiting for the stream to reach this offset.
    flush: Option<(u64, bool)>,
    /// The handle was dropped.
    dropped: bool,
    /// Its last poll ended waiting: it runs again in `finish` only once
    /// something wakes it. The receiver and the driver; a sender waits
    /// while it holds a payload refused for room or a flush (`waiting`,
    /// `flush`), so it needs no flag of its own.
    parked: bool,
    /// Woken since it parked (by the core's wakes or a pipe's readiness).
    woken: bool,
}

impl Task {
    /// Whether the runtime would poll it now: it is not waiting, or it was
    /// woken.
    fn runnable(&self) -> bool {
        !self.dropped && (!self.parked || self.woken)
    }

    /// It is polled: what woke it is used up.
    fn polled(&mut self) {
        self.parked = false;
        self.woken = false;
    }
}

/// The child on the other side of the pipes.
#[derive(Debug, Default)]
struct Child {
    /// What it wrote to stdout and was not read yet.
    stdout: Vec<u8>,
    stdout_eof: bool,
    /// Everything it wrote to stdout, for the model.
    stdout_all: Vec<u8>,
    stdin_closed: bool,
    exit: Option<Exit>,
    exit_at: Option<Instant>,
    stderr_bytes: u64,
    stderr_eof: bool,
}

pub struct Harness<F: Model> {
    session: Session<F>,
    framing: F,
    config: Config,
    has_child: bool,
    now: Instant,
    step: usize,
    senders: [Task; 2],
    receiver: Task,
    driver: Task,
    /// The driver is in the middle of draining its outputs (it took a pipe).
    driver_draining: bool,
    driver_done: bool,
    /// The driver's task was dropped before the session was done (its
    /// runtime shut down): what it left is done by the late reaper.
    driver_stopped: bool,
    /// The deadline the driver's timer waits for.
    driver_deadline: Option<Instant>,
    /// The driver did something in this poll: it polls itself again.
    driver_progress: bool,
    /// The driver waits on the stdin pipe's wakers (its round found the
    /// pipe held, or full) or on the stdout pipe's (its read found nothing).
    driver_on_stdin: bool,
    driver_on_stdout: bool,
    /// A read found stdout empty / a write found stdin full: the pipe
    /// wakes who waits on it once the child writes / reads.
    stdout_armed: bool,
    stdin_armed: bool,
    child: Child,

    /// Every accepted message, framed: what the child may read.
    wire: Vec<u8>,
    /// Where each accepted message ends in `wire`, with its payload length.
    boundaries: Vec<(usize, usize)>,
    /// What the child read: always a prefix of `wire`.
    written: Vec<u8>,
    stdin_dropped: bool,

    items: Vec<F::Item>,
    taken: u64,
    /// Everything the transport read of stdout, and whether it read its end.
    read_all: Vec<u8>,
    read_eof: bool,
    /// Where the decoder goes with the reader holding stdout, as the
    /// shipped reader takes it; `lent`: this read took it (else it reads
    /// the other ways, `handle_read` and `handle_read_bytes`).
    decoding: Decoding<F>,
    lent: bool,
    /// Whether the `Sink`'s readiness mirror said "room" when last written.
    sink_ready: bool,
    /// The instant of the driver's last wake-up.
    woken_at: Instant,
    pollution: Vec<PollutionKind>,
    log: QueueLog,
    largest_read: usize,
    ended: bool,

    stderr_lines: usize,
    /// Stdout lines set aside (not messages) handed to the driver, in order.
    diverted: Vec<Bytes>,
    armed_failure: Option<SignalError>,
    shutdown: bool,
    shutdown_before_exit: bool,
    kill_asked: bool,
    abandoned: bool,
    signals: Vec<Signal>,
    sweeps: u32,
    report: Option<ExitReport>,
    received_report: bool,
}

impl<F: Model> Harness<F> {
    pub fn new(framing: F, config: Config, has_child: bool, process_group: bool) -> Self {
        let now = Instant::now();
        let mut session = if has_child {
            Session::with_framing(framing.clone(), &config, process_group, now)
        } else {
            Session::over_pipes(framing.clone(), &config.channel)
        };
        for _ in 0..3 {
            session.handle_handle_opened();
        }
        let decoding = session.decoding();
        Self {
            session,
            framing,
            config,
            has_child,
            now,
            step: 0,
            senders: [Task::default(), Task::default()],
            receiver: Task::default(),
            driver: Task::default(),
            driver_draining: false,
            driver_done: false,
            driver_stopped: false,
            driver_deadline: None,
            driver_progress: false,
            driver_on_stdin: false,
            driver_on_stdout: false,
            stdout_armed: false,
            stdin_armed: false,
            child: Child::default(),
            wire: Vec::new(),
            boundaries: Vec::new(),
            written: Vec::new(),
            stdin_dropped: false,
            items: Vec::new(),
            taken: 0,
            read_all: Vec::new(),
            read_eof: false,
            decoding,
            lent: false,
            sink_ready: true,
            woken_at: now,
            pollution: Vec::new(),
            log: QueueLog::default(),
            largest_read: 0,
            ended: false,
            stderr_lines: 0,
            diverted: Vec::new(),
            armed_failure: None,
            shutdown: false,
            shutdown_before_exit: false,
            kill_asked: false,
            abandoned: false,
            signals: Vec::new(),
            sweeps: 0,
            report: None,
            received_report: false,
        }
    }

    fn task(&mut self, who: Who) -> &mut Task {
        match who {
            Who::Sender(SenderId::A) => &mut self.senders[0],
            Who::Sender(SenderId::B) => &mut self.senders[1],
            Who::Receiver => &mut self.receiver,
            Who::Driver => &mut self.driver,
        }
    }

    fn max_send(&self) -> usize {
        self.config.channel.max_send_size
    }

    pub fn apply(&mut self, op: &Op) {
        self.step += 1;
        match op {
            Op::Send(id, payload) => self.send(Who::Sender(*id), payload, false),
            Op::Feed(id, payload) => self.send(Who::Sender(*id), payload, true),
            Op::Flush(id) => self.flush(Who::Sender(*id), false),
            Op::Close(id) => self.flush(Who::Sender(*id), true),
            Op::Io(who, io) => self.io(*who, *io),
            Op::Recv(n) => self.recv(usize::from(*n) + 1),
            Op::Read(max) => self.read(usize::from(*max)),
            Op::DriverWake => self.driver_wake(),
            Op::Stdout(bytes) => self.child_writes(bytes),
            Op::StdoutFrame(body) => {
                let frame = self.framing.frame(body);
                self.child_writes(&frame);
            }
            Op::StdoutEof => {
                self.child.stdout_eof = true;
                self.stdout_ready();
            }
            Op::Stderr(bytes) => {
                // Read by the driver: nobody reads it once the driver stopped.
                if self.has_child && !self.child.stderr_eof && !self.driver_stopped {
                    self.child.stderr_bytes += bytes.len() as u64;
                    self.session.handle_stderr(bytes, self.now);
                    // Read by the driver, woken by the pipe.
                    self.driver.woken = true;
                }
            }
            Op::StderrEof => {
                if self.has_child && !self.child.stderr_eof && !self.driver_stopped {
                    self.child.stderr_eof = true;
                    self.session.handle_stderr_eof(self.now);
                    self.driver.woken = true;
                }
            }
            Op::DeliverStderr => self.deliver_stderr(),
            Op::ChildClosesStdin => {
                self.child.stdin_closed = true;
                self.stdin_ready();
            }
            Op::Exit(exit) => self.exit(*exit),
            Op::FailNextSignal(err) => self.armed_failure = Some(*err),
            Op::Advance(ms) => {
                self.now += Duration::from_millis(u64::from(*ms));
                self.timer_fires();
            }
            Op::AdvanceToDeadline => {
                if let Some(at) = self.session.poll_timeout() {
                    self.now = self.now.max(at);
                }
                self.timer_fires();
            }
            Op::Shutdown => {
                self.apply_shutdown_model();
                self.session.handle_shutdown(self.now);
            }
            Op::Kill => {
                if self.has_child && self.child.exit.is_none() {
                    self.kill_asked = true;
                }
                self.session.handle_kill(self.now);
            }
            Op::Drop(who) => self.drop_handle(*who),
        }
        let wakes = self.session.take_wakes();
        self.wake(wakes);
        self.check_queues();
    }

    /// The core's wakes, as the async layer's wake sets deliver them: the
    /// senders' set (where the driver waits too when its round found the
    /// pipe busy or full), the receiver's (where the driver waits too when
    /// its read found nothing), the driver.
    fn wake(&mut self, wakes: Wakes) {
        if wakes.contains(Wakes::SENDERS) {
            self.wake_stdin_waiters();
        }
        if wakes.contains(Wakes::RECEIVER) {
            self.wake_stdout_waiters();
        }
        if wakes.contains(Wakes::DRIVER) {
            self.driver.woken = true;
        }
    }

    fn wake_stdin_waiters(&mut self) {
        for sender in &mut self.senders {
            sender.woken = true;
        }
        if std::mem::take(&mut self.driver_on_stdin) {
            self.driver.woken = true;
        }
    }

    fn wake_stdout_waiters(&mut self) {
        self.receiver.woken = true;
        if std::mem::take(&mut self.driver_on_stdout) {
            self.driver.woken = true;
        }
    }

    /// The child wrote to stdout or closed it: a read that found nothing
    /// armed the pipe, which wakes who waits on it.
    fn stdout_ready(&mut self) {
        if std::mem::take(&mut self.stdout_armed) {
            self.wake_stdout_waiters();
        }
    }

    /// The child read stdin or closed it: a write that found the pipe full
    /// armed it, and it wakes who waits on it.
    fn stdin_ready(&mut self) {
        if std::mem::take(&mut self.stdin_armed) {
            self.wake_stdin_waiters();
        }
    }

    /// The clock moved: the driver's timer fires at its deadline.
    fn timer_fires(&mut self) {
        if self.driver_deadline.is_some_and(|at| at <= self.now) {
            self.driver.woken = true;
        }
    }

    /// The model's record of a shutdown asked now.
    fn apply_shutdown_model(&mut self) {
        self.shutdown = true;
        // (Once the driver stopped, the child is already being killed: the
        // end is not the caller's.)
        self.shutdown_before_exit |= self.has_child
            && self.child.exit.is_none()
            && !self.kill_asked
            && !self.abandoned
            && !self.driver_stopped;
    }

    // ---- the senders ----

    fn send(&mut self, who: Who, payload: &Payload, anyway: bool) {
        if self.task(who).dropped || self.task(who).round.is_some() {
            return;
        }
        // A wake is used up by this poll, unless it is for a flush that
        // still waits beside it (polled together, as in a `join`).
        if self.task(who).flush.is_none() {
            self.task(who).polled();
        }
        if anyway && !self.sink_ready && !self.session.send_ready() {
            // `poll_ready` waits: the `Sink` writes meanwhile.
            let round = self.session.drain_round();
            self.task(who).round = Some(round);
            self.step_round(who);
            return;
        }
        let bytes = match self.task(who).waiting.take() {
            Some(waiting) => waiting,
            None => payload.bytes(self.max_send()),
        };
        let closed = self.session.send_closed();
        let ready = self.session.send_ready();
        let queued = self.session.queued();
        let result = if anyway {
            self.session.send_anyway(bytes.clone())
        } else {
            self.session.send(bytes.clone())
        };
        match result {
            Ok(sent) => {
                assert_eq!(closed, None, "accepted after sending was closed");
                assert!(ready || anyway, "accepted while the queue said wait");
                assert_eq!(self.framing.check(&bytes, self.max_send()), Ok(()));
                let framed = super::encode(&self.framing, &bytes);
                assert_eq!(self.session.queued(), queued + framed.len());
                self.wire.extend_from_slice(&framed);
                self.boundaries.push((self.wire.len(), bytes.len()));
                assert_eq!(self.session.queue_end(), self.wire.len() as u64);
                if anyway {
                    self.sink_ready = self.session.send_ready();
                }
                if let Sent::Write(round) = sent {
                    self.task(who).round = Some(round);
                    self.step_round(who);
                }
            }
            Err(err) => {
                assert_eq!(self.session.queued(), queued, "a refused send queued bytes");
                let kind = err.kind();
                assert_eq!(
                    err.into_payload(),
                    bytes,
                    "the payload is handed back whole"
                );
                match (closed, self.framing.check(&bytes, self.max_send())) {
                    (Some(closed), _) => assert_eq!(kind, SendErrorKind::Closed(closed)),
                    (None, Err(invalid)) => assert_eq!(kind, SendErrorKind::Invalid(invalid)),
                    (None, Ok(())) => {
                        assert_eq!(kind, SendErrorKind::Full);
                        assert!(!ready, "refused as full while ready");
                        // It waits for room, writing meanwhile.
                        self.task(who).waiting = Some(bytes);
                        let round = self.session.drain_round();
                        self.task(who).round = Some(round);
                        self.step_round(who);
                    }
                }
            }
        }
    }

    fn flush(&mut self, who: Who, close: bool) {
        if self.task(who).dropped || self.task(who).round.is_some() {
            return;
        }
        if self.task(who).waiting.is_none() {
            self.task(who).polled();
        }
        if self.task(who).flush.is_some() {
            // Woken: it writes again and looks at the answer.
            let round = self.session.drain_round();
            self.task(who).round = Some(round);
            self.step_round(who);
            return;
        }
        if close {
            // For a child, closing is its graceful shutdown.
            self.apply_shutdown_model();
            self.session.close(self.now);
        }
        let target = self.session.queue_end();
        self.task(who).flush = Some((target, close));
        let round = self.session.drain_round();
        self.task(who).round = Some(round);
        self.step_round(who);
    }

    /// A flush's answer, checked against what the child read.
    fn check_flush(&mut self, who: Who) {
        let Some((target, close)) = self.task(who).flush else {
            return;
        };
        let answer = if close {
            self.session.closed(target)
        } else {
            self.session.flushed(target)
        };
        let reached = self.written.len() as u64 >= target;
        match answer {
            Some(Ok(())) => {
                assert!(reached, "a flush said Ok for bytes the child never read");
                if close {
                    assert!(self.stdin_dropped, "a close said done with stdin open");
                }
                self.task(who).flush = None;
            }
            Some(Err(_)) => {
                assert!(!reached, "a flush failed although everything was read");
                self.task(who).flush = None;
            }
            None => {}
        }
    }

    // ---- write rounds ----

    /// The task's round goes on until it holds the pipe for a call, or ends.
    fn step_round(&mut self, who: Who) {
        loop {
            let Some(round) = self.task(who).round else {
                return;
            };
            let step = self.session.poll_write(&round, self.now);
            match step {
                WriteStep::Io(op) => {
                    let holders = [
                        &self.senders[0],
                        &self.senders[1],
                        &self.receiver,
                        &self.driver,
                    ];
                    assert!(
                        holders.iter().all(|task| task.op.is_none()),
                        "two writers hold the pipe"
                    );
                    assert!(!self.stdin_dropped, "a call on stdin after it was dropped");
                    if matches!(op, WriteOp::Write(_)) {
                        assert!(
                            self.child.exit.is_none() || !self.has_child,
                            "a write to a child that exited"
                        );
                    }
                    self.task(who).op = Some(op);
                    return;
                }
                WriteStep::Drop => {
                    assert!(!self.stdin_dropped, "stdin dropped twice");
                    self.stdin_dropped = true;
                }
                WriteStep::Done | WriteStep::Busy | WriteStep::Yield => {
                    if who == Who::Driver && step == WriteStep::Busy {
                        self.driver_on_stdin = true;
                    }
                    self.task(who).round = None;
                    self.round_ended(who);
                    return;
                }
            }
        }
    }

    /// A task's round ended: a sender waiting for room sends again if there
    /// is room; a flush looks at its answer; the driver goes on draining.
    fn round_ended(&mut self, who: Who) {
        self.check_flush(who);
        if who == Who::Driver && self.driver_draining {
            self.drain_outputs();
        }
    }

    fn io(&mut self, who: Who, io: Io) {
        let Some(op) = self.task(who).op.take() else {
            return;
        };
        let result = match (&op, io) {
            (_, Io::Fail) => WriteResult::Failed,
            (WriteOp::Write(_), _) if self.child.stdin_closed => WriteResult::Failed,
            (_, Io::Block) | (WriteOp::Write(_), Io::Take(0)) => WriteResult::WouldBlock,
            (WriteOp::Write(bytes), Io::Take(n)) => {
                let n = usize::from(n).min(bytes.len());
                self.written.extend_from_slice(&bytes[..n]);
                assert!(
                    self.wire.starts_with(&self.written),
                    "the child read something else than the accepted messages"
                );
                WriteResult::Written(n)
            }
            (_, Io::Take(_)) => WriteResult::Done,
        };
        self.session.handle_write(result, self.now);
        self.check_written(&self.session.counters());
        if who == Who::Driver && result != WriteResult::WouldBlock {
            self.driver_progress = true;
        }
        if result == WriteResult::WouldBlock {
            self.stdin_armed = true;
            if who == Who::Driver {
                self.driver_on_stdin = true;
            }
            self.task(who).round = None;
            self.round_ended(who);
        } else {
            self.step_round(who);
        }
        if who != Who::Driver {
            self.retry_waiting(who);
        }
    }

    /// A sender that waited for room sends its payload once its round ended.
    fn retry_waiting(&mut self, who: Who) {
        if self.task(who).round.is_none() && self.task(who).waiting.is_some() {
            if self.session.send_ready() {
                self.send(who, &Payload::Empty, false);
            } else {
                // Still no room: it stays waiting (offered again on its
                // next step).
            }
        }
    }

    fn check_written(&self, counters: &childwire_core::Counters) {
        let done = self
            .boundaries
            .iter()
            .take_while(|&&(end, _)| end <= self.written.len());
        assert_eq!(counters.messages_out, done.clone().count() as u64);
        assert_eq!(
            counters.bytes_out,
            done.map(|&(_, len)| len as u64).sum::<u64>()
        );
    }

    // ---- the receiver ----

    fn recv(&mut self, n: usize) {
        if self.receiver.dropped || self.receiver.reading || self.ended {
            return;
        }
        self.receiver.polled();
        for _ in 0..n {
            match self.session.poll_receive() {
                Receive::Item(item) => self.take(item),
                Receive::Read => {
                    self.start_read(Who::Receiver);
                    return;
                }
                Receive::Wait => {
                    self.receiver.parked = true;
                    return;
                }
                Receive::End => {
                    self.receiver.parked = true;
                    assert!(
                        self.received_report || !self.has_child || self.report.is_none(),
                        "the end before the report"
                    );
                    self.ended = true;
                    return;
                }
            }
        }
    }

    fn take(&mut self, item: Received) {
        assert!(
            !self.received_report,
            "an item after the exit report: {item:?}"
        );
        match item {
            Received::Message(m) => self.take_frame(Frame::Message(m)),
            Received::Oversized(o) => self.take_frame(Frame::Oversized(o)),
            Received::Malformed(m) => self.take_frame(Frame::Malformed(m)),
            Received::Pollution(notice) => {
                assert!(
                    !self.pollution.contains(&notice.kind),
                    "a pollution kind named twice: {notice:?}"
                );
                self.pollution.push(notice.kind);
            }
            Received::Exited(report) => {
                assert!(self.has_child, "a report from a channel");
                assert_eq!(
                    Some(&*report),
                    self.report.as_ref(),
                    "one report, published first"
                );
                assert_eq!(
                    super::decoded(&self.session.counters()),
                    self.taken,
                    "the report before every frame"
                );
                self.received_report = true;
            }
            other => panic!("an item kind this target does not know: {other:?}"),
        }
    }

    fn take_frame(&mut self, frame: Frame) {
        self.log.taken(super::cost(&frame));
        self.taken += 1;
        self.items.push(F::item(frame));
    }

    // ---- reading ----

    fn start_read(&mut self, who: Who) {
        assert!(
            !self.receiver.reading && !self.driver.reading,
            "two readers hold stdout"
        );
        let decoded = super::decoded(&self.session.counters());
        let bound = self.config.channel.recv_high_water - 1;
        self.log.record(decoded, self.taken, bound, self.step);
        self.task(who).reading = true;
        // Most reads ask for the decoder, as the shipped reader does (it is
        // lent once reads carry several frames); the rest keep the two
        // other ways in.
        if !self.step.is_multiple_of(4) {
            self.lent = self.session.lend_decoder(&mut self.decoding);
            if self.lent {
                assert!(
                    !self.session.lend_decoder(&mut self.decoding),
                    "a decoder lent twice"
                );
            }
        }
    }

    fn read(&mut self, max: usize) {
        let who = if self.receiver.reading {
            Who::Receiver
        } else if self.driver.reading {
            Who::Driver
        } else {
            return;
        };
        self.task(who).reading = false;
        let n = max.min(self.child.stdout.len());
        if n > 0 {
            let bytes: Vec<u8> = self.child.stdout.drain(..n).collect();
            self.largest_read = self.largest_read.max(n);
            self.read_all.extend_from_slice(&bytes);
            self.driver_progress |= who == Who::Driver;
            if std::mem::take(&mut self.lent) {
                // Decoded away from the session, then handed back.
                self.decoding.handle_data(&bytes);
                self.session.handle_decoded(&mut self.decoding, self.now);
            } else if max.is_multiple_of(2) {
                self.session.handle_read(&bytes, self.now);
            } else {
                self.session.handle_read_bytes(Bytes::from(bytes), self.now);
            }
            self.read_done(who);
            return;
        }
        if std::mem::take(&mut self.lent) {
            // Nothing read: the decoder comes back untouched.
            self.session.handle_decoded(&mut self.decoding, self.now);
        }
        if self.child.stdout_eof {
            self.read_eof = true;
            self.driver_progress |= who == Who::Driver;
            self.session.handle_read_eof(self.now);
        } else {
            self.session.handle_read_blocked();
            // It waits for the pipe, which the child's next write wakes.
            self.stdout_armed = true;
            match who {
                Who::Driver => self.driver_on_stdout = true,
                _ => self.receiver.parked = true,
            }
        }
        self.read_done(who);
    }

    /// A driver that read while draining its outputs goes on with them.
    fn read_done(&mut self, who: Who) {
        if who == Who::Driver && self.driver_draining {
            self.drain_outputs();
        }
    }

    fn child_writes(&mut self, bytes: &[u8]) {
        if !self.child.stdout_eof {
            self.child.stdout.extend_from_slice(bytes);
            self.child.stdout_all.extend_from_slice(bytes);
            self.stdout_ready();
        }
    }

    // ---- the background task ----

    fn driver_wake(&mut self) {
        if self.driver_done || self.driver_draining || self.driver_stopped {
            return;
        }
        self.driver.polled();
        self.driver_progress = false;
        self.session.handle_driver_wake(self.now);
        self.woken_at = self.now;
        self.driver_draining = true;
        self.drain_outputs();
    }

    /// The driver drains until it holds a pipe, or the session says wait.
    fn drain_outputs(&mut self) {
        while self.driver.op.is_none() && !self.driver.reading && self.driver.round.is_none() {
            let output = self.session.poll_output();
            if !matches!(
                output,
                Output::Timeout(_) | Output::Done | Output::Write(_) | Output::Read
            ) {
                self.driver_progress = true;
            }
            match output {
                Output::Signal(signal) => {
                    assert!(self.has_child);
                    assert!(
                        self.shutdown || self.kill_asked || self.abandoned,
                        "{signal} without a shutdown, a kill or a drop"
                    );
                    self.signal_out(signal);
                }
                Output::Sweep => {
                    assert!(self.child.exit.is_some(), "a sweep before the exit");
                    self.sweep_out();
                }
                Output::StderrLine(line) => self.stderr_line_out(&line),
                Output::StdoutLine(line) => {
                    // A `Content-Length` body set aside is whole, newlines
                    // and all.
                    assert!(!F::ONE_LINE || !line.contains(&b'\n'));
                    self.diverted.push(line);
                }
                Output::StdoutNotice(notice) => {
                    assert!(
                        !self.pollution.contains(&notice.kind),
                        "a pollution kind named twice: {notice:?}"
                    );
                    self.pollution.push(notice.kind);
                }
                Output::Report(report) => self.report(*report),
                Output::Write(round) => {
                    self.driver.round = Some(round);
                    self.step_round(Who::Driver);
                }
                Output::Read => self.start_read(Who::Driver),
                Output::Timeout(at) => {
                    if let Some(at) = at {
                        assert!(at > self.woken_at, "a deadline at or before the wake-up");
                    }
                    self.driver_draining = false;
                    // It waits for its timer or a wake, unless it did
                    // something in this poll: then it goes round again.
                    self.driver_deadline = at;
                    self.driver.parked = true;
                    if std::mem::take(&mut self.driver_progress) {
                        self.driver.woken = true;
                    }
                    return;
                }
                Output::Done => {
                    self.driver_draining = false;
                    self.driver_done = true;
                    return;
                }
            }
        }
    }

    /// A signal the driver sends: at most once, before the exit; a failure
    /// the input armed makes it undelivered (it may be asked again).
    fn signal_out(&mut self, signal: Signal) {
        assert!(self.child.exit.is_none(), "{signal} after the exit");
        assert!(!self.signals.contains(&signal), "{signal} asked twice");
        match self.armed_failure.take() {
            Some(err) => self.session.handle_signal_failed(signal, err, self.now),
            None => self.signals.push(signal),
        }
    }

    /// The sweep the driver runs: once, finding nothing.
    fn sweep_out(&mut self) {
        self.sweeps += 1;
        assert_eq!(self.sweeps, 1, "a second sweep");
        self.session.handle_swept(Swept::default(), self.now);
    }

    /// A stderr line the driver holds until it delivers them.
    fn stderr_line_out(&mut self, line: &[u8]) {
        assert!(!line.contains(&b'\n'));
        self.stderr_lines += 1;
    }

    fn deliver_stderr(&mut self) {
        if std::mem::take(&mut self.stderr_lines) > 0 {
            self.session.handle_stderr_delivered();
            // In the driver's poll, which goes round again after lines.
            self.driver.woken = true;
        }
    }

    fn report(&mut self, report: ExitReport) {
        assert!(self.report.is_none(), "a second report");
        assert_eq!(
            self.stderr_lines, 0,
            "the report before the stderr lines were delivered"
        );
        assert_eq!(
            Some(report.exit),
            self.child.exit,
            "a report for another exit"
        );
        assert_eq!(report.counters.stderr_bytes, self.child.stderr_bytes);
        self.check_written(&report.counters);
        if self.shutdown_before_exit {
            assert!(
                report.shutdown_requested,
                "a shutdown asked before the exit"
            );
        }
        if report.shutdown_requested {
            assert!(self.shutdown || self.kill_asked, "asked for by nobody");
        }
        if report.pipes_drained {
            assert!(
                self.child.stdout_eof && self.child.stderr_eof,
                "pipes said drained before both ends"
            );
        } else if !self.driver_stopped {
            // (A stopped driver's report comes as soon as the exit is known.)
            let exit_at = self.child.exit_at.expect("an exit before the report");
            assert!(
                self.now >= exit_at + self.config.lifecycle.drain_grace,
                "the report before the pipes ended and before drain_grace"
            );
        }
        self.report = Some(report);
    }

    // ---- the child and the handles ----

    fn exit(&mut self, exit: Exit) {
        if self.has_child && self.child.exit.is_none() {
            self.child.exit = Some(exit);
            self.child.exit_at = Some(self.now);
            // A dead child's pipes end with it (nothing it started holds
            // them in this model).
            self.child.stdin_closed = true;
            self.session.handle_exit(exit, self.now);
            if self.driver_stopped {
                // The late reaper saw it.
                self.late_reaper();
                return;
            }
            // The exit is the driver's to see; a closed pipe wakes its
            // writers.
            self.driver.woken = true;
            self.stdin_ready();
        }
    }

    /// The driver's task is dropped between its polls, before the session
    /// is done (its runtime shuts down), as `Driver::drop` does it: the
    /// session is told, its outputs are carried out at once (a write or a
    /// read takes what the pipe gives now), and the rest is left to the late
    /// reaper, which runs once the exit is known.
    fn stop_driver(&mut self) {
        let driver = &self.driver;
        if !self.has_child
            || self.driver_done
            || self.driver_stopped
            || self.driver_draining
            || driver.op.is_some()
            || driver.reading
            || driver.round.is_some()
        {
            return;
        }
        self.driver_stopped = true;
        self.driver.dropped = true;
        self.driver_deadline = None;
        self.session.handle_driver_stopped(self.now);
        self.carry_out_stopped();
        // Whether the late reaper waits for the death, and how long, is the
        // session's answer, as `Driver::drop` asks it.
        let reap_wait = self.session.reap_wait();
        assert_eq!(
            reap_wait.is_none(),
            self.child.exit.is_some(),
            "the reaper waits exactly while the child has not exited"
        );
        assert!(reap_wait.is_none_or(|wait| wait <= std::time::Duration::from_secs(10)));
        if reap_wait.is_none() {
            self.late_reaper();
        }
    }

    /// What the late reaper does once the exit was handed in: the outputs,
    /// the stderr lines delivered and the outputs again, then, without a
    /// report by now, the driver is gone.
    fn late_reaper(&mut self) {
        self.carry_out_stopped();
        if std::mem::take(&mut self.stderr_lines) > 0 {
            self.session.handle_stderr_delivered();
            self.carry_out_stopped();
        }
        if !self.session.has_ended() {
            self.session.handle_driver_gone();
        }
        self.driver_done = true;
        let wakes = self.session.take_wakes();
        self.wake(wakes);
    }

    /// A stopped driver's outputs, carried out until the session says wait:
    /// no timer will fire and no pipe will wake it.
    fn carry_out_stopped(&mut self) {
        loop {
            match self.session.poll_output() {
                Output::Signal(signal) => self.signal_out(signal),
                Output::Sweep => self.sweep_out(),
                Output::StderrLine(line) => self.stderr_line_out(&line),
                Output::StdoutLine(line) => self.diverted.push(line),
                Output::StdoutNotice(_) => {}
                Output::Report(report) => self.report(*report),
                Output::Write(round) => {
                    self.driver.round = Some(round);
                    self.step_round(Who::Driver);
                    while self.driver.op.is_some() {
                        self.io(Who::Driver, Io::Take(u16::MAX));
                    }
                }
                Output::Read => {
                    self.start_read(Who::Driver);
                    self.read(usize::from(u16::MAX));
                }
                Output::Timeout(_) | Output::Done => return,
            }
        }
    }

    fn drop_handle(&mut self, who: Who) {
        if who == Who::Driver {
            self.stop_driver();
            return;
        }
        if self.task(who).dropped {
            return;
        }
        // A handle is dropped between its polls: nothing in its hands.
        let task = self.task(who);
        if task.op.is_some() || task.reading {
            return;
        }
        task.dropped = true;
        task.round = None;
        task.waiting = None;
        task.flush = None;
        let all = self.senders.iter().all(|t| t.dropped) && self.receiver.dropped;
        if all && !self.shutdown && self.child.exit.is_none() && !self.kill_asked {
            self.abandoned = true;
        }
        self.session.handle_handle_closed(self.now);
        // The dropping handle sends at once a signal that is due, the kill
        // of kill-on-drop above all (`Shared::close_handle`).
        if self.has_child {
            while let Some(signal) = self.session.poll_signal() {
                assert!(
                    self.shutdown || self.kill_asked || self.abandoned,
                    "{signal} from a handle's drop without a shutdown, a kill or a drop"
                );
                self.signal_out(signal);
            }
        }
    }

    /// The outbound queue within its high-water mark plus one message, and
    /// the receive queue logged for its bound.
    fn check_queues(&mut self) {
        let limits = &self.config.channel;
        let one = limits.max_send_size + self.framing.overhead(limits.max_send_size);
        let queued = self.session.queued();
        // The message that crossed the mark, and one `Sink` message fed on a
        // stale "room".
        assert!(
            queued <= limits.send_high_water + 2 * one,
            "outbound queue {queued} over {} + a message per sender",
            limits.send_high_water
        );
        let bound =
            limits.recv_high_water + super::one_read(self.largest_read, limits.max_message_size);
        let decoded = super::decoded(&self.session.counters());
        self.log.record(decoded, self.taken, bound, self.step);
    }

    /// One turn of the runtime: every pipe call in flight completes (the
    /// child reads all it is given), and every task that is not waiting, or
    /// was woken, is polled; a waiting task nobody woke is not. Whether
    /// anything ran.
    fn run_woken(&mut self) -> bool {
        let mut ran = false;
        for who in [
            Who::Sender(SenderId::A),
            Who::Sender(SenderId::B),
            Who::Receiver,
            Who::Driver,
        ] {
            if self.task(who).op.is_some() {
                self.apply(&Op::Io(who, Io::Take(u16::MAX)));
                ran = true;
            }
        }
        self.stdin_ready();
        if (self.receiver.reading || self.driver.reading)
            && (!self.child.stdout.is_empty() || self.child.stdout_eof)
        {
            self.apply(&Op::Read(u16::MAX));
            ran = true;
        }
        if self.stderr_lines > 0 {
            self.apply(&Op::DeliverStderr);
            ran = true;
        }
        if !self.driver_done && !self.driver_draining && self.driver.runnable() {
            self.apply(&Op::DriverWake);
            ran = true;
        }
        if !self.receiver.reading && !self.ended && self.receiver.runnable() {
            self.apply(&Op::Recv(u8::MAX));
            ran = true;
        }
        for id in [SenderId::A, SenderId::B] {
            let task = self.task(Who::Sender(id));
            // Waiting for room or for its flush, it runs again once woken.
            let waits = task.waiting.is_some() || task.flush.is_some();
            if waits && task.round.is_none() && task.op.is_none() && !task.dropped && task.woken {
                if task.waiting.is_some() {
                    self.apply(&Op::Send(id, Payload::Empty));
                } else {
                    self.apply(&Op::Flush(id));
                }
                ran = true;
            }
        }
        ran
    }

    /// The runtime runs what is woken until nothing is: whether it got
    /// there. Then a receiver that waits is not left waiting beside an item
    /// it could take (what another task read and nobody woke it for).
    fn run_until_quiet(&mut self) -> bool {
        for _ in 0..256 {
            if !self.run_woken() {
                let receiver = &self.receiver;
                let waits = receiver.parked && !receiver.woken && !receiver.reading;
                assert!(
                    self.ended
                        || receiver.dropped
                        || !waits
                        || !self.session.channel().has_received(),
                    "the receiver waits beside a queued item, unwoken (a lost wake): {:?}",
                    self.session
                );
                return true;
            }
        }
        false
    }

    /// Before the child ends: the runtime runs what is woken until nothing
    /// is, with a child that reads everything and writes nothing more. Then
    /// nothing may be left waiting that only a wake nobody gave would move
    /// (a lost wake, which in the async layer is a hang): with stdin open,
    /// every accepted message was written, and no sender still waits for
    /// room or for its flush.
    fn settle(&mut self) {
        if !self.run_until_quiet() {
            // Still busy (a driver that keeps finding work): no verdict.
            return;
        }
        let stdin_open = !self.stdin_dropped
            && !self.driver_stopped
            && !self.child.stdin_closed
            && self.child.exit.is_none()
            && !self.kill_asked
            && !self.abandoned
            && !self.shutdown;
        if !stdin_open {
            return;
        }
        assert_eq!(
            self.session.queued(),
            0,
            "accepted bytes left queued, nobody woken to write them (a lost wake): \
             senders {:?}, driver {:?}: {:?}",
            self.senders,
            self.driver,
            self.session
        );
        for sender in &self.senders {
            assert!(
                sender.dropped || (sender.waiting.is_none() && sender.flush.is_none()),
                "a sender still waits with nothing left to write (a lost wake): {sender:?}"
            );
        }
    }

    /// Every task runs to completion: pipes take everything, the child ends,
    /// the clock runs out, the caller takes everything. The end must come,
    /// with only the wakes the core gave (and the pipes', the timer's, the
    /// exit's): a task left waiting for a wake nobody gave is a hang.
    pub fn finish(mut self) {
        self.settle();
        for round in 0..64 {
            self.run_until_quiet();
            if round > 2 {
                self.apply(&Op::StdoutEof);
                self.apply(&Op::StderrEof);
                self.apply(&Op::Exit(Exit::Signal(9)));
                self.apply(&Op::AdvanceToDeadline);
            }
            if self.ended || (self.receiver.dropped && (self.report.is_some() || !self.has_child)) {
                break;
            }
        }
        // The stream may end while the background task holds a pipe: it
        // finishes that and hands on what waits for it (stdout lines set
        // aside), as it would once the caller has the end.
        for _ in 0..8 {
            self.run_woken();
        }
        if self.receiver.dropped {
            // Nobody receives: the child's end is still reported.
            assert!(
                self.report.is_some() || !self.has_child,
                "no report once everything ended (a lost wake?): driver {:?}, deadline {:?} \
                 (now {:?}), done {}: {:?}",
                self.driver,
                self.driver_deadline,
                self.now,
                self.driver_done,
                self.session
            );
            return;
        }
        assert!(
            self.ended,
            "the stream never ended (a lost wake?): receiver {:?}, driver {:?}: {:?}",
            self.receiver, self.driver, self.session
        );
        if self.has_child {
            assert!(self.received_report, "no exit report once everything ended");
        }
        self.log.check();
        let max = self.config.channel.max_message_size;
        // Set aside, a message that does not look like one is not an item.
        let divert = self.config.channel.pollution == Some(PollutionPolicy::Divert);
        let polluting = |item: &F::Item| F::message(item).is_some_and(|m| classify(m).is_some());
        let kept = |item: &F::Item| !(divert && polluting(item));
        if self.read_eof {
            let (items, set_aside): (Vec<_>, Vec<_>) =
                F::expected(&self.read_all, max).into_iter().partition(kept);
            assert_eq!(self.items, items);
            // Every line set aside went to the driver, in order, but those
            // the bound on what waits there dropped, and they are counted.
            let counters = self.session.counters();
            assert_eq!(self.diverted.len() as u64, counters.polluted_diverted);
            assert_eq!(
                set_aside.len() as u64,
                counters.polluted_diverted + if divert { counters.polluted_dropped } else { 0 },
                "lines set aside: {set_aside:?}, diverted: {:?}",
                self.diverted
            );
            let mut set_aside = set_aside.iter().filter_map(F::message);
            for line in &self.diverted {
                assert!(
                    set_aside.any(|m| m == &line[..]),
                    "a diverted line not set aside, or out of order: {line:?}"
                );
            }
        } else {
            // Reading stopped on a quiet pipe after the child's end.
            assert!(self.has_child && self.received_report);
            F::check_without_eof(&self.items, &self.read_all, max, &kept);
        }
    }
}
