// Denied, not forbidden: `pre_exec` (Linux) and `os::windows` (the Win32 FFI)
// are the modules allowed it.
#![deny(unsafe_code)]
#![cfg_attr(docsrs, feature(doc_cfg))]
//! childwire's async transport, written once for every runtime.
//!
//! [`Transport`] runs a child process and exchanges messages with it, or
//! talks to a peer over any pipe pair (a socket, the process's own stdio).
//! The caller's task does the I/O: [`Receiver::recv`] reads and decodes,
//! [`Sender::send`] frames and writes, with no hand-off to another thread on
//! the common path. A background task does only what must happen while no
//! caller is there: draining stderr, watching the exit, the shutdown timers,
//! and writing what a sender queued and left.
//!
//! It is generic over a small [`Runtime`] value (its clock, a timer, spawn,
//! pipes); `childwire-tokio`, `childwire-smol` and `childwire-async-std`
//! implement it. Every decision is made by the sans-IO parts of
//! `childwire-core`.
//!
//! Use it through the `childwire` crate, which picks the runtime by feature.

#[cfg(feature = "async-process")]
#[cfg_attr(docsrs, doc(cfg(feature = "async-process")))]
pub mod async_process;
#[cfg(target_os = "linux")]
mod cgroup;
mod config;
mod driver;
mod exit_handle;
mod handoff;
mod job_thread;
#[cfg(feature = "serde")]
#[cfg_attr(docsrs, doc(cfg(feature = "serde")))]
mod json;
mod log;
mod os;
#[cfg(target_os = "linux")]
mod pre_exec;
mod precompiled;
pub mod prelude;
mod receiver;
mod runtime;
mod sender;
mod shared;
pub mod spawn;
mod spawner;
mod stderr_lines;
mod supervised;
mod sync;
#[cfg(unix)]
mod sys;
pub mod tap;
mod transport;
mod wake;

pub use exit_handle::{ExitHandle, ExitSlot};
#[cfg(feature = "serde")]
pub use json::{RecvJsonError, SendJsonError};
#[doc(hidden)]
pub use precompiled::precompiled;
// The names the runtime crates and the `childwire` facade re-export, listed
// once (with the core's types this crate's API uses).
pub use config::Config;
pub use prelude::*;
pub use runtime::{
    NoRuntime, PipeIds, PipeRead, PipeWrite, Runtime, SpawnedChild, Timer, child_pipes,
};
pub use stderr_lines::{STDERR_LINES_PENDING, StderrCallback, StderrLines};
pub use supervised::{
    DEFAULT_SEED, ReinitError, ReinitFuture, Supervised, SupervisedEvent, SupervisedSender,
    Supervision,
};
pub use transport::{Receiver, RequestError, Sender, ShutdownError, Transport};
// Hosts that never leak and never hang: the spawn ledger, the CPU time
// liveness reads, the login shell's environment.
pub use childwire_core::ledger::{Identity, ReapConfig, ReapVerdict, Reaped};
pub use childwire_core::liveness::{Liveness, LivenessConfig, Verdict};
pub use os::cpu::tree_cpu_time;
pub use os::identity::identity_of;
pub use os::ledger::{Ledger, LedgerEntry, reap_leftovers};
pub use os::login_shell::{LOGIN_SHELL_TIMEOUT, LoginEnv, LoginShellError, login_shell_env};
