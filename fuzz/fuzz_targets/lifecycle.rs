//! Fuzzing of `Lifecycle` with arbitrary sequences of inputs and clock steps
//! (stale times included), held after every drain to the contract model the
//! property test uses (`childwire_core::testing::lifecycle`). Every input is
//! generated: shutdown, the caller's kill, every handle dropped (with and
//! without kill-on-drop), the driver stopping, a stalled stdin write, the
//! write queue's state, stdin closed, the exit, both EOFs, failed signals
//! and the sweep's outcome. The operations and the exits, signals and
//! errors in them are the core's own types, generated through its
//! `arbitrary` feature.

#![no_main]

use std::time::{Duration, Instant};

use arbitrary::Arbitrary;
use childwire_core::LifecycleConfig;
use childwire_core::testing::lifecycle::{Checker, Op};
use libfuzzer_sys::fuzz_target;

#[derive(Debug, Arbitrary)]
struct Input {
    /// Graces in milliseconds; zero is the interesting edge.
    stdin_grace: u16,
    term_grace: u16,
    drain_grace: u16,
    process_group: bool,
    ops: Vec<Op>,
}

fn ms(n: u16) -> Duration {
    Duration::from_millis(u64::from(n))
}

fuzz_target!(|input: Input| {
    let mut config = LifecycleConfig::default();
    config.stdin_grace = ms(input.stdin_grace);
    config.term_grace = ms(input.term_grace);
    config.drain_grace = ms(input.drain_grace);
    let mut checker = Checker::new(config, input.process_group, Instant::now());
    let mut run = || {
        for op in &input.ops {
            checker.apply(op)?;
        }
        checker.finish()
    };
    if let Err(violation) = run() {
        panic!("{violation}");
    }
});
