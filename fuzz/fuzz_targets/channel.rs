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
use childwire_core::{Channel, ChannelConfig, Closed, ContentLength, Lines};
use common::{Driver, Model, Payload};
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

struct Harness<F: Model> {
    io: Driver<F, Channel<F>>,
    /// The last input was `handle_timeout`.
    timed_out: bool,
    write_failed: bool,
    write_closed: bool,
}

impl<F: Model> Harness<F> {
    fn new(framing: F, config: ChannelConfig, respect_backpressure: bool) -> Self {
        let channel = Channel::new(framing.clone(), &config);
        Self {
            io: Driver::new(
                channel,
                framing,
                config,
                respect_backpressure,
                Instant::now(),
            ),
            timed_out: false,
            write_failed: false,
            write_closed: false,
        }
    }

    fn apply(&mut self, op: &Op) {
        self.io.step += 1;
        self.timed_out = false;
        match op {
            Op::Read(bytes) => self.io.read(bytes, false),
            Op::ReadBytes(bytes) => self.io.read(bytes, true),
            Op::ReadFrame(body) => self.io.read_frame(body),
            Op::ReadEof => self.io.read_eof(),
            Op::Write(n) => self.io.write(usize::from(*n), self.write_closed),
            Op::WriteFailed => {
                if !self.write_closed {
                    self.write_failed = true;
                    self.io.endpoint.handle_write_failed(self.io.now);
                }
            }
            Op::Advance(ms) => {
                self.io.advance(*ms);
                self.timeout();
            }
            Op::AdvanceToDeadline => {
                self.io.advance_to_deadline();
                self.timeout();
            }
            Op::Timeout => self.timeout(),
            Op::Send(payload) => self.io.send(payload),
            Op::Close => {
                self.io.endpoint.close();
                assert!(self.io.endpoint.send_closed().is_some());
            }
            Op::Receive(n) => self.receive(usize::from(*n) + 1),
        }
        self.drain();
    }

    fn timeout(&mut self) {
        self.io.handle_timeout();
        self.timed_out = true;
        self.io.check_deadline();
    }

    fn receive(&mut self, n: usize) {
        for _ in 0..n {
            let Some(frame) = self.io.endpoint.poll_received() else {
                return;
            };
            self.io.take(frame);
        }
    }

    /// The outputs, in the order the channel documents.
    fn drain(&mut self) {
        let io = &mut self.io;
        // 1. Close the write side.
        if io.endpoint.poll_close_write() {
            assert!(!self.write_closed, "the write side closed twice");
            self.write_closed = true;
            if io.written.len() < io.wire.len() {
                let stalled = self.timed_out
                    && io.limits.write_timeout.is_some()
                    && matches!(
                        io.endpoint.send_closed(),
                        Some(Closed::Stalled { .. } | Closed::Closing)
                    );
                assert!(
                    self.write_failed || stalled,
                    "closed with {} of {} bytes written, neither failed nor stalled",
                    io.written.len(),
                    io.wire.len()
                );
            }
        }
        // 2. What to write (the peer takes it with `Op::Write`).
        let _ = io.poll_transmit(self.write_closed);
        // 3. and 4. `wants_read` and `poll_timeout` are read where used.

        io.check_queues();
    }

    fn receive_all(&mut self) {
        while self.io.endpoint.inbound().has_received() {
            self.apply(&Op::Receive(u8::MAX));
        }
    }

    /// The caller takes everything, the peer's stream ends, the channel is
    /// closed and the peer reads everything.
    fn finish(mut self) {
        self.receive_all();
        self.apply(&Op::ReadEof);
        self.receive_all();
        assert!(self.io.eof, "the end of the stream was read");
        assert!(self.io.endpoint.is_finished());
        self.io.check_frames();

        self.apply(&Op::Close);
        while !self.write_closed && self.io.endpoint.outbound().queued() > 0 {
            self.apply(&Op::Write(u16::MAX));
        }
        assert!(
            self.write_closed,
            "a written-out close closes the write side"
        );
        assert!(self.io.wire.starts_with(&self.io.written));
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
