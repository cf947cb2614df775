//! Fuzzing of a channel over a pipe pair as the async transport drives it
//! (`Session::over_pipes`, a `Channel` inside), with both framings: two
//! senders, the receiver and the background task each make their core calls
//! and hold the pipes for their I/O across other tasks' steps, against a
//! peer that writes in any chunking, reads at its own pace, and closes its
//! end; with time, valid and invalid sends, flushes, the graceful close and
//! dropped handles. See `common/tasks.rs` for what is checked.

#![no_main]

mod common;

use std::time::Duration;

use arbitrary::Arbitrary;
use childwire_core::{Config, ContentLength, Lines, PollutionPolicy};
use common::{Harness, Model, Op};
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
    /// Name stdout pollution (a channel's default is off), and set aside
    /// the lines that are no message (a child's default) rather than
    /// delivering them after their notice.
    pollution: bool,
    divert: bool,
    ops: Vec<Op>,
}

impl Input {
    fn config(&self) -> Config {
        let mut config = Config::default();
        config
            .max_message_size(1 + usize::from(self.max_message_size % 64))
            .max_send_size(1 + usize::from(self.max_send_size % 64))
            .send_high_water(1 + usize::from(self.send_high_water))
            .recv_high_water(1 + usize::from(self.recv_high_water % 2048))
            .write_timeout(
                self.write_timeout
                    .map(|n| Duration::from_millis(u64::from(n) + 1)),
            );
        config.pollution(self.pollution.then_some(if self.divert {
            PollutionPolicy::Divert
        } else {
            PollutionPolicy::Deliver
        }));
        config
    }
}

fn run<F: Model>(framing: F, input: &Input) {
    let mut harness = Harness::new(framing, input.config(), false, false);
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
