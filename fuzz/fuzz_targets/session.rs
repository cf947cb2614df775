//! Fuzzing of the whole `Session` as the async transport drives it, with both
//! framings: two senders, the receiver and the background task each make
//! their core calls and hold the pipes for their I/O across other tasks'
//! steps, against a child that writes stdout in any chunking, reads stdin at
//! its own pace, writes stderr, closes its stdin, exits; with time, sends of
//! valid and invalid payloads, flushes, closes, shutdown, kill, dropped
//! handles, a dropped background task (its runtime shut down, the rest left
//! to the late reaper) and failed signals. See `common/tasks.rs` for what is
//! checked.

#![no_main]

mod common;

use std::time::Duration;

use arbitrary::Arbitrary;
use childwire_core::{Config, ContentLength, Lines, PollutionPolicy, StderrTailConfig};
use common::{Harness, Model, Op};
use libfuzzer_sys::fuzz_target;

#[derive(Debug, Arbitrary)]
struct Input {
    /// `Content-Length` framing instead of lines.
    content_length: bool,
    limits: Limits,
    process_group: bool,
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
    /// A child's default for stdout pollution (lines that are no message
    /// go where stderr lines go) rather than every line as an item.
    divert: bool,
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
            .stderr_tail(tail)
            .pollution(Some(if self.divert {
                PollutionPolicy::Divert
            } else {
                PollutionPolicy::Deliver
            }));
        config.validate().expect("the target builds valid configs");
        config
    }
}

fn run<F: Model>(framing: F, input: &Input) {
    let mut harness = Harness::new(framing, input.limits.config(), true, input.process_group);
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
