//! Fuzzing of the share (`childwire_core::share::Share`) against the
//! reference model the core's property test runs
//! (`crates/childwire-core/tests/share/model.rs`): clients joining,
//! leaving, sending requests, cancellations, initializations, garbage and
//! answers; a server answering, sending progress, notifications, requests
//! of its own, pings, and ending or restarting; clients reading or not.
//! After every operation: every answer reaches exactly the client that
//! asked, with its own id; no message of one client reaches another; the
//! server sees each id once and cancellations only from the client whose
//! request they name; at the end every request was answered once.

#![no_main]

use libfuzzer_sys::fuzz_target;

#[path = "../../crates/childwire-core/tests/share/model.rs"]
mod model;

fuzz_target!(|ops: &[u8]| {
    if let Err(violation) = model::run(ops) {
        panic!("{violation}");
    }
});
