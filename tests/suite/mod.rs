//! The conformance suite: the clauses of `DESIGN.md` (C01–C17, C20) checked against a real child
//! process that misbehaves on purpose (the `misbehave` binary of this package).
//!
//! Written once, compiled once per runtime. The including file (e.g. `tests/tokio.rs`) declares a
//! module `rt` next to this one with:
//!
//! - the adapter's items re-exported (`Transport`, `Sender`, `Receiver`, `Command`, `Config`,
//!   `Received`, `ExitReport`, `Exit`, `EndedBy`, `StderrMode`, `EnvPolicy`, `SendErrorKind`,
//!   `Closed`, ...);
//! - `fn block_on<F: Future>(F) -> F::Output`, which runs a test on that runtime;
//! - `async fn timeout<F: Future>(Duration, F) -> Option<F::Output>` (`None`: time ran out, the
//!   future was dropped);
//! - `fn spawn<F>(F) -> impl Future<Output = F::Output>` for `F: Future + Send + 'static`, which
//!   starts a task at once and whose result resumes the task's panic, if any.
//!
//! Tests are named after the clause they check. Every test ends by proving that the child was
//! reaped and that nothing is left alive in its process group ([`support::finish`]).
//!
//! Clauses that cannot hold on Windows (signals, process groups, `/proc`, cgroups) are left out
//! there by `cfg`; `windows.rs` has what only Windows has (batch-file launchers).

use super::rt;

mod api;
mod containment;
mod content_length;
mod end;
#[cfg(unix)]
mod flush;
#[cfg(unix)]
mod goodbye;
mod hatches;
mod hosts;
mod inbound;
mod kill;
mod lifecycle;
mod outbound;
mod pollution;
mod spawn;
mod startup;
mod stderr;
mod supervised;
mod support;
mod tap;
#[cfg(windows)]
mod windows;
