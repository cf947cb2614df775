//! Fuzzing of `Lifecycle` with arbitrary sequences of inputs and clock steps
//! (stale times included), held after every drain to the contract model the
//! property test uses (`lifecycle_model.rs`).

#![no_main]

use std::time::Duration;

use arbitrary::Arbitrary;
use childwire_core::lifecycle::{Exit, LifecycleConfig, Signal, SignalError};
use libfuzzer_sys::fuzz_target;

#[path = "../../crates/childwire-core/tests/support/lifecycle_model.rs"]
mod lifecycle_model;

use lifecycle_model::{Checker, Op};

#[derive(Debug, Arbitrary)]
struct Input {
    /// Graces in milliseconds; zero is the interesting edge.
    stdin_grace: u16,
    term_grace: u16,
    drain_grace: u16,
    process_group: bool,
    ops: Vec<FuzzOp>,
}

// The core's types do not implement `Arbitrary`, so the fuzzer generates
// these mirrors and maps them onto the model's `Op`.

#[derive(Debug, Clone, Copy, Arbitrary)]
enum FuzzSignal {
    Term,
    Kill,
}

#[derive(Debug, Clone, Copy, Arbitrary)]
enum FuzzError {
    NoSuchProcess,
    PermissionDenied,
    Other(Option<i32>),
}

#[derive(Debug, Clone, Copy, Arbitrary)]
enum FuzzOp {
    Shutdown,
    OutboundDrained,
    OutboundPending,
    StdinClosed,
    ExitCode(i32),
    ExitSignal(i32),
    StdoutEof,
    StderrEof,
    SignalFailed(FuzzSignal, FuzzError),
    Timeout,
    /// Milliseconds into the past.
    StaleTimeout(u16),
    /// Milliseconds forward.
    Advance(u16),
    AdvanceToDeadline,
}

fn ms(n: u16) -> Duration {
    Duration::from_millis(u64::from(n))
}

impl From<FuzzOp> for Op {
    fn from(op: FuzzOp) -> Self {
        match op {
            FuzzOp::Shutdown => Op::Shutdown,
            FuzzOp::OutboundDrained => Op::OutboundDrained,
            FuzzOp::OutboundPending => Op::OutboundPending,
            FuzzOp::StdinClosed => Op::StdinClosed,
            FuzzOp::ExitCode(code) => Op::Exit(Exit::Code(code)),
            FuzzOp::ExitSignal(signo) => Op::Exit(Exit::Signal(signo)),
            FuzzOp::StdoutEof => Op::StdoutEof,
            FuzzOp::StderrEof => Op::StderrEof,
            FuzzOp::SignalFailed(signal, error) => Op::SignalFailed(
                match signal {
                    FuzzSignal::Term => Signal::Term,
                    FuzzSignal::Kill => Signal::Kill,
                },
                match error {
                    FuzzError::NoSuchProcess => SignalError::NoSuchProcess,
                    FuzzError::PermissionDenied => SignalError::PermissionDenied,
                    FuzzError::Other(errno) => SignalError::Other { errno },
                },
            ),
            FuzzOp::Timeout => Op::Timeout,
            FuzzOp::StaleTimeout(back) => Op::StaleTimeout(ms(back)),
            FuzzOp::Advance(by) => Op::Advance(ms(by)),
            FuzzOp::AdvanceToDeadline => Op::AdvanceToDeadline,
        }
    }
}

fuzz_target!(|input: Input| {
    let mut checker = Checker::new(LifecycleConfig {
        stdin_grace: ms(input.stdin_grace),
        term_grace: ms(input.term_grace),
        process_group: input.process_group,
        drain_grace: ms(input.drain_grace),
    });
    let run = || {
        for op in input.ops {
            checker.apply(&op.into())?;
        }
        checker.finish()
    };
    if let Err(violation) = run() {
        panic!("{violation}");
    }
});
