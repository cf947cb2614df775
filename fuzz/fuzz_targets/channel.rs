//! Fuzzing of `Channel` (no process in it) with both framings: arbitrary
//! sequences of reads in any chunking, the end of the peer's stream, writes
//! of any part of `poll_transmit`, failed writes, time, valid and invalid
//! sends, the graceful close and the caller taking frames at its own pace,
//! drained in the documented order after every input.
//!
//! Checked after every step: the outbound queue stays within its high-water
//! mark plus one message; what was written is a prefix of the accepted
//! messages, framed, and the counters agree with it; sends are refused for
//! the right reason with the payload handed back; the write side is closed
//! once, nothing is written after, and it closes before everything queued
//! was written only after a failed write or a stall; after
//! `handle_timeout(now)` no deadline is left at or before `now`. When reads
//! follow `wants_read()`, the receive queue costs less than
//! `recv_high_water` before every read and at most that plus one read's
//! worth ever. In the end the frames are what the reference model makes of
//! the bytes read, and the channel is finished.

#![no_main]

mod common;

use std::time::{Duration, Instant};

use arbitrary::Arbitrary;
use bytes::Bytes;
use childwire_core::{Channel, ChannelConfig, Closed, ContentLength, Lines, SendErrorKind};
use common::{Model, QueueLog};
use libfuzzer_sys::fuzz_target;

#[derive(Debug, Arbitrary)]
struct Input {
    /// `Content-Length` framing instead of lines.
    content_length: bool,
    max_message_size: u8,
    max_send_size: u8,
    send_high_water: u8,
    recv_high_water: u16,
    /// Milliseconds, plus one (zero is invalid).
    write_timeout: Option<u16>,
    /// Reads only while `wants_read()` says so; otherwise whatever comes,
    /// and only the receive bound is not checked.
    respect_backpressure: bool,
    ops: Vec<Op>,
}

impl Input {
    fn config(&self) -> ChannelConfig {
        let mut config = ChannelConfig::default();
        config.max_message_size = 1 + usize::from(self.max_message_size % 64);
        config.max_send_size = 1 + usize::from(self.max_send_size % 64);
        config.send_high_water = 1 + usize::from(self.send_high_water);
        config.recv_high_water = 1 + usize::from(self.recv_high_water % 2048);
        config.write_timeout = self
            .write_timeout
            .map(|n| Duration::from_millis(u64::from(n) + 1));
        config
    }
}

#[derive(Debug, Arbitrary)]
enum Op {
    /// Bytes from the peer, copied in.
    Read(Vec<u8>),
    /// Bytes from the peer, handed over as `Bytes`.
    ReadBytes(Vec<u8>),
    /// One well-formed frame around this body from the peer.
    ReadFrame(Vec<u8>),
    ReadEof,
    /// The peer reads up to this many bytes of `poll_transmit`.
    Write(u16),
    /// A write failed: the peer stopped reading.
    WriteFailed,
    /// The clock moves this many milliseconds, then `handle_timeout`.
    Advance(u16),
    /// The clock moves to `poll_timeout`, then `handle_timeout`.
    AdvanceToDeadline,
    /// `handle_timeout` now (early or spurious).
    Timeout,
    Send(Payload),
    Close,
    /// The caller takes up to this many frames (plus one).
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
    channel: Channel<F>,
    framing: F,
    config: ChannelConfig,
    respect_backpressure: bool,
    now: Instant,
    step: usize,

    read: Vec<u8>,
    eof: bool,
    largest_read: usize,

    /// Every accepted message, framed, in order: what the peer may get.
    wire: Vec<u8>,
    /// Where each accepted message ends in `wire`, with its payload length.
    boundaries: Vec<(usize, usize)>,
    written: Vec<u8>,
    write_failed: bool,
    /// The last input was `handle_timeout`.
    timed_out: bool,
    write_closed: bool,

    items: Vec<F::Item>,
    taken: u64,
    log: QueueLog,
}

impl<F: Model> Harness<F> {
    fn new(framing: F, config: ChannelConfig, respect_backpressure: bool) -> Self {
        Self {
            channel: Channel::new(framing.clone(), &config),
            framing,
            config,
            respect_backpressure,
            now: Instant::now(),
            step: 0,
            read: Vec::new(),
            eof: false,
            largest_read: 0,
            wire: Vec::new(),
            boundaries: Vec::new(),
            written: Vec::new(),
            write_failed: false,
            timed_out: false,
            write_closed: false,
            items: Vec::new(),
            taken: 0,
            log: QueueLog::default(),
        }
    }

    fn may_read(&self) -> bool {
        !self.eof && (!self.respect_backpressure || self.channel.wants_read())
    }

    fn apply(&mut self, op: &Op) {
        self.step += 1;
        self.timed_out = false;
        match op {
            Op::Read(bytes) => self.read(bytes, false),
            Op::ReadBytes(bytes) => self.read(bytes, true),
            Op::ReadFrame(body) => {
                let frame = self.framing.frame(body);
                self.read(&frame, false);
            }
            Op::ReadEof => {
                if self.may_read() {
                    self.before_read();
                    self.eof = true;
                    self.channel.handle_read_eof(self.now);
                }
            }
            Op::Write(n) => self.write(usize::from(*n)),
            Op::WriteFailed => {
                if !self.write_closed {
                    self.write_failed = true;
                    self.channel.handle_write_failed(self.now);
                }
            }
            Op::Advance(ms) => {
                self.now += Duration::from_millis(u64::from(*ms));
                self.timeout();
            }
            Op::AdvanceToDeadline => {
                if let Some(deadline) = self.channel.poll_timeout() {
                    self.now = self.now.max(deadline);
                }
                self.timeout();
            }
            Op::Timeout => self.timeout(),
            Op::Send(payload) => self.send(payload),
            Op::Close => {
                self.channel.close();
                assert!(self.channel.send_closed().is_some());
            }
            Op::Receive(n) => self.receive(usize::from(*n) + 1),
        }
        self.drain();
    }

    /// The log entry before a read: the adapter reads only below the mark.
    fn before_read(&mut self) {
        if self.respect_backpressure {
            let decoded = common::decoded(&self.channel.counters());
            let bound = self.config.recv_high_water - 1;
            self.log.record(decoded, self.taken, bound, self.step);
        }
    }

    fn read(&mut self, bytes: &[u8], by_bytes: bool) {
        if !self.may_read() {
            return;
        }
        self.before_read();
        self.largest_read = self.largest_read.max(bytes.len());
        self.read.extend_from_slice(bytes);
        if by_bytes {
            self.channel
                .handle_read_bytes(Bytes::copy_from_slice(bytes), self.now);
        } else {
            self.channel.handle_read(bytes, self.now);
        }
    }

    fn write(&mut self, n: usize) {
        let transmit = self.channel.poll_transmit(self.now);
        if self.write_closed {
            assert_eq!(
                transmit, None,
                "bytes handed out after the write side closed"
            );
            return;
        }
        let Some(bytes) = transmit else { return };
        assert!(!bytes.is_empty(), "an empty transmit");
        let n = n.min(bytes.len());
        self.written.extend_from_slice(&bytes[..n]);
        assert!(
            self.wire.starts_with(&self.written),
            "the peer gets something else than the accepted messages"
        );
        self.channel.handle_written(n, self.now);
        let counters = self.channel.counters();
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

    fn timeout(&mut self) {
        self.channel.handle_timeout(self.now);
        self.timed_out = true;
        if let Some(deadline) = self.channel.poll_timeout() {
            assert!(
                deadline > self.now,
                "a deadline at or before the time it was just handled"
            );
        }
    }

    fn send(&mut self, payload: &Payload) {
        let max_send = self.config.max_send_size;
        let bytes = payload.bytes(max_send);
        let closed = self.channel.send_closed();
        match self.channel.send(bytes.clone()) {
            Ok(()) => {
                assert_eq!(closed, None, "accepted after sending was closed");
                assert_eq!(self.framing.check(&bytes, max_send), Ok(()));
                let framed = common::encode(&self.framing, &bytes);
                self.wire.extend_from_slice(&framed);
                self.boundaries.push((self.wire.len(), bytes.len()));
            }
            Err(err) => {
                let kind = err.kind();
                assert_eq!(
                    err.into_payload(),
                    bytes,
                    "the payload is handed back whole"
                );
                match (closed, self.framing.check(&bytes, max_send)) {
                    (Some(closed), _) => assert_eq!(kind, SendErrorKind::Closed(closed)),
                    (None, Err(invalid)) => assert_eq!(kind, SendErrorKind::Invalid(invalid)),
                    (None, Ok(())) => assert_eq!(kind, SendErrorKind::Full),
                }
            }
        }
    }

    fn receive(&mut self, n: usize) {
        for _ in 0..n {
            let Some(frame) = self.channel.poll_received() else {
                return;
            };
            self.log.taken(common::cost(&frame));
            self.taken += 1;
            self.items.push(F::item(frame));
        }
    }

    /// The outputs, in the order the channel documents.
    fn drain(&mut self) {
        // 1. Close the write side.
        if self.channel.poll_close_write() {
            assert!(!self.write_closed, "the write side closed twice");
            self.write_closed = true;
            if self.written.len() < self.wire.len() {
                let stalled = self.timed_out
                    && self.config.write_timeout.is_some()
                    && matches!(
                        self.channel.send_closed(),
                        Some(Closed::Stalled { .. } | Closed::Closing)
                    );
                assert!(
                    self.write_failed || stalled,
                    "closed with {} of {} bytes written, neither failed nor stalled",
                    self.written.len(),
                    self.wire.len()
                );
            }
        }
        // 2. What to write (the peer takes it with `Op::Write`).
        let transmit = self.channel.poll_transmit(self.now);
        if self.write_closed {
            assert_eq!(
                transmit, None,
                "bytes handed out after the write side closed"
            );
        }
        // 3. and 4. `wants_read` and `poll_timeout` are read where used.

        let config = &self.config;
        let one_message = config.max_send_size + self.framing.overhead(config.max_send_size);
        let queued = self.channel.outbound().queued();
        assert!(
            queued <= config.send_high_water + one_message,
            "outbound queue {queued} over {} + one message",
            config.send_high_water
        );
        if self.respect_backpressure {
            let bound = config.recv_high_water
                + common::one_read(self.largest_read, config.max_message_size);
            let decoded = common::decoded(&self.channel.counters());
            self.log.record(decoded, self.taken, bound, self.step);
        }
    }

    fn receive_all(&mut self) {
        while self.channel.inbound().has_received() {
            self.apply(&Op::Receive(u8::MAX));
        }
    }

    /// The caller takes everything, the peer's stream ends, the channel is
    /// closed and the peer reads everything.
    fn finish(mut self) {
        self.receive_all();
        self.apply(&Op::ReadEof);
        self.receive_all();
        assert!(self.eof, "the end of the stream was read");
        assert!(self.channel.is_finished());
        self.log.check();
        let max = self.config.max_message_size;
        assert_eq!(self.items, F::expected(&self.read, max));

        self.apply(&Op::Close);
        while !self.write_closed && self.channel.outbound().queued() > 0 {
            self.apply(&Op::Write(u16::MAX));
        }
        assert!(
            self.write_closed,
            "a written-out close closes the write side"
        );
        assert!(self.wire.starts_with(&self.written));
    }
}

fn run<F: Model>(framing: F, input: &Input) {
    let mut harness = Harness::new(framing, input.config(), input.respect_backpressure);
    harness.drain();
    for op in &input.ops {
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
