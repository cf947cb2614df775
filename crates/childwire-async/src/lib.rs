#![forbid(unsafe_code)]
#![cfg_attr(docsrs, feature(doc_cfg))]
//! childwire's async transport, written once for every runtime.
//!
//! [`Transport`] runs a child process and exchanges newline-delimited
//! messages with it. It is generic over a small [`Runtime`] trait (spawn a
//! task, a timer, a child with pollable pipes); `childwire-tokio`,
//! `childwire-smol` and `childwire-async-std` implement it and export
//! `Transport` for their runtime. Every decision is made by the sans-IO
//! [`Session`](childwire_core::Session) of `childwire-core`; the driver task
//! here only carries bytes, time and signals.
//!
//! Use it through the `childwire` crate, which picks the runtime by feature.

#[cfg(feature = "async-process")]
#[cfg_attr(docsrs, doc(cfg(feature = "async-process")))]
pub mod async_process;
mod driver;
mod os;
mod runtime;
mod shared;
mod transport;

pub use childwire_core::{
    Closed, Command, Config, Counters, EndedBy, EnvPolicy, Exit, ExitReport, Message, Oversized,
    Received, SendError, SendErrorKind, SpawnError, StderrMode,
};
pub use runtime::{ChildProcess, Runtime};
pub use transport::{DriverStopped, Receiver, Sender, Transport};
