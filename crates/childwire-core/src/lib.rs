#![forbid(unsafe_code)]
//! The sans-IO core of [childwire]: everything a stdio transport decides,
//! with no I/O, no threads and no clock.
//!
//! childwire runs a child process and exchanges newline-delimited messages
//! (NDJSON, JSON-RPC, MCP's stdio transport) with it over stdin and stdout.
//! This crate holds the state machines; the runtime adapters
//! (`childwire-tokio`, `childwire-smol`, `childwire-async-std`) only move
//! bytes, time and signals between the OS and them.
//!
//! | module | what it decides |
//! |---|---|
//! | [`decoder`] | what a message is; over-long lines become notices (C01–C04) |
//! | [`jsonrpc`] | the JSON-RPC id of an over-long message, and its error response (C28) |
//! | [`encoder`] | what may be sent; the bounded write queue (C06–C08) |
//! | [`stderr_tail`] | the bounded tail of stderr and its lines (C09, C10) |
//! | [`lifecycle`] | close stdin, SIGTERM, SIGKILL, when the end is known (C12–C15) |
//! | [`report`] | how the end is reported (C15) |
//! | [`command`] | what to spawn: env policy, process group, stderr mode (C11, C13, C16) |
//! | [`session`] | all of the above as one transport state machine |
//! | `codec` | `tokio_util::codec` bindings for the framer (feature `tokio-util`, C19) |
//!
//! The models are quinn-proto and str0m: `handle_*` methods take input with
//! the current time, `poll_*` methods hand out what to do and when to call
//! again, and each type documents the order in which to drain them. Time is
//! always passed in, so every path can be tested on a simulated clock.
//!
//! [childwire]: https://github.com/childwire/childwire

pub mod command;
pub mod decoder;
pub mod encoder;
pub mod frame;
pub mod framing;
pub mod jsonrpc;
pub mod lifecycle;
pub mod report;
pub mod session;
pub mod stderr_tail;

#[cfg(feature = "tokio-util")]
pub mod codec;

pub use command::{Command, EnvPolicy, SpawnError, StderrMode};
pub use decoder::LineDecoder;
pub use encoder::LineEncoder;
pub use frame::{Frame, Malformed, MalformedReason, Message, Oversized};
pub use framing::{FrameDecoder, Framing, Lines};
pub use jsonrpc::{IdScanner, oversized_error};
pub use lifecycle::{
    Action, EndedBy, Ending, Exit, Lifecycle, LifecycleConfig, Phase, Signal, SignalError,
};
pub use report::{Counters, ExitReport};
pub use session::{Closed, Config, Received, SendError, SendErrorKind, Session};
pub use stderr_tail::{StderrTail, StderrTailConfig};
