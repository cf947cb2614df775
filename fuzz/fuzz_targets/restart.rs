//! Fuzzing of `RestartPolicy` with arbitrary limits, seeds, and sequences
//! of starts, exits, failed spawns and clock steps, held after every input
//! to the model the property test uses
//! (`childwire_core::testing::restart`): restart exactly when neither the
//! budget nor the window is spent, the backoff for the place in the streak
//! less at most the jitter, the history in order, the restart instant in
//! `poll_timeout`.

#![no_main]

use std::time::{Duration, Instant};

use arbitrary::Arbitrary;
use childwire_core::restart::RestartConfig;
use childwire_core::testing::restart::{Checker, Op};
use libfuzzer_sys::fuzz_target;

#[derive(Debug, Arbitrary)]
struct Input {
    /// Durations in milliseconds; zero is the interesting edge.
    initial_backoff: u16,
    max_backoff: u32,
    /// Tenths: 1.0 to 25.5 (values under 10 count as 1.0 in the policy).
    multiplier_tenths: u8,
    /// 0 to 255 in 255ths, so 0 and 1 both occur.
    jitter: u8,
    budget: u8,
    stable_after: u16,
    max_in_window: u8,
    window: u32,
    seed: u64,
    ops: Vec<Op>,
}

fn ms(n: u64) -> Duration {
    Duration::from_millis(n)
}

fuzz_target!(|input: Input| {
    let mut config = RestartConfig::default();
    config.initial_backoff = ms(u64::from(input.initial_backoff));
    config.max_backoff = ms(u64::from(input.max_backoff));
    config.multiplier = f64::from(input.multiplier_tenths) / 10.0;
    config.jitter = f64::from(input.jitter) / 255.0;
    config.budget = u32::from(input.budget % 16);
    config.stable_after = ms(u64::from(input.stable_after));
    config.max_in_window = u32::from(input.max_in_window % 16);
    config.window = ms(u64::from(input.window));
    let mut checker = Checker::new(config, input.seed, Instant::now());
    for op in &input.ops {
        if let Err(violation) = checker.apply(op) {
            panic!("{violation}");
        }
    }
});
