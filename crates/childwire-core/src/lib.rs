#![forbid(unsafe_code)]
#![cfg_attr(docsrs, feature(doc_cfg))]
//! The sans-IO core of [childwire]: everything a message transport decides,
//! with no I/O, no threads and no clock.
//!
//! childwire runs a child process and exchanges messages (NDJSON for MCP,
//! ACP and JSON-RPC over stdio; `Content-Length` frames for LSP and DAP)
//! with it over stdin and stdout. This crate holds the state machines; the
//! async layer and the runtime adapters only move bytes, time and signals
//! between the OS and them. It reads no clock, no environment and no file.
//!
//! | types | what they decide |
//! |---|---|
//! | the wire formats: [`Framing`], [`Lines`], [`ContentLength`], [`LineDecoder`], [`ContentLengthDecoder`], [`Encoder`], [`Frame`] | what a message is on the wire (NDJSON lines, `Content-Length` frames); over-long or broken frames become notices |
//! | [`jsonrpc`] | the top-level JSON-RPC id of an over-long message, and the error that answers it |
//! | [`Channel`] | a message channel over any byte stream: both directions' queues and bounds, who writes and who reads, the write timeout, the graceful close, whom to wake |
//! | [`Session`] | a whole transport: a channel over a child's stdin and stdout with its lifecycle, stderr and exit report (or over a pipe pair); one owner drives it |
//! | [`Lifecycle`], [`Goodbye`] | close stdin, SIGTERM, SIGKILL, when the end is known; what a shutdown says first (LSP, DAP) |
//! | [`stderr_tail`] | the bounded tail of stderr and its lines |
//! | [`stderr_level`], [`pollution`] | a stderr line's level; a stdout line that is not a JSON message, named |
//! | [`ExitReport`] and the types that say how a child ended ([`Exit`], [`EndedBy`], [`Swept`]) | how a child's end is reported |
//! | [`restart`], [`pending`], [`startup`] | supervision: when to restart a child and when to give up, the JSON-RPC requests it has not answered, whether it started |
//! | [`command`], [`config`] | what to spawn, and the limits, checked before spawning |
//! | `codec` | `tokio_util::codec` bindings for the framings (feature `tokio-util`) |
//! | `share` | one server shared by many clients: ids, routing, initialization, bounds (feature `share`, which `childwire-share` turns on) |
//!
//! The models are quinn-proto and str0m: `handle_*` methods take input with
//! the current time, `poll_*` methods hand out what to do and when to call
//! again, and each type documents the order in which to drain them. Time is
//! always passed in, so every path can be tested on a simulated clock.
//!
//! # Building another transport
//!
//! A transport over a socket, a TCP stream or in-memory pipes needs no
//! process: create a [`Channel`] with a [`Framing`] ([`Lines`] or
//! [`ContentLength`]). Hand what you read to
//! [`handle_read`](Channel::handle_read) (and the end to
//! [`handle_read_eof`](Channel::handle_read_eof)) and frames from
//! [`poll_received`](Channel::poll_received) to your caller; queue messages
//! with [`send`](Channel::send), and write with
//! [`poll_write`](Channel::poll_write) / [`handle_write`](Channel::handle_write)
//! when it says so; call [`handle_timeout`](Channel::handle_timeout) at
//! [`poll_timeout`](Channel::poll_timeout). Behind a lock shared by several
//! tasks, wake the ones [`take_wakes`](Channel::take_wakes) names. A child
//! process adds a [`Lifecycle`] and a [`StderrTail`]: that is [`Session`],
//! which the async transport drives whole.
//!
//! [childwire]: https://github.com/childwire/childwire

mod channel;
pub mod command;
pub mod config;
mod content_length;
mod decoder;
mod decoding;
mod encoder;
mod ending;
mod frame;
mod framing;
mod inbound;
pub mod jsonrpc;
mod lifecycle;
mod lines;
mod outbound;
mod report;
mod session;
// Supervision (restart, unanswered requests, start-up verdict).
mod generations;
mod goodbye;
pub mod pending;
pub mod restart;
pub mod startup;
pub mod stderr_tail;
mod supervisor;

#[cfg(feature = "tokio-util")]
#[cfg_attr(docsrs, doc(cfg(feature = "tokio-util")))]
pub mod codec;

#[cfg(feature = "testing")]
#[cfg_attr(docsrs, doc(cfg(feature = "testing")))]
pub mod testing;

pub use channel::{Channel, ReadStep, Sent, Wakes};
pub use command::{Command, Containment, EnvPolicy, SpawnError, StderrMode};
pub use config::{ChannelConfig, Config, ConfigError};
// The wire formats: their modules are private, each type has one path.
pub use content_length::{ContentLength, ContentLengthDecoder, MAX_HEADER_LEN};
pub use decoder::{DEFAULT_MAX_MESSAGE_SIZE, LineDecoder};
pub use decoding::{Decoding, LEND_FROM};
pub use encoder::{DEFAULT_HIGH_WATER, EncodeError, Encoder, LineEncoder};
pub use ending::{EndedBy, Exit, Signal, Swept, ntstatus_name, signal_name};
pub use frame::{
    DecoderStats, Frame, Malformed, MalformedReason, Message, OVERSIZED_HEAD_LEN, Oversized,
    PollutionKind, PollutionNotice,
};
pub use framing::{EncodeErrorKind, FrameDecoder, Framing};
pub use inbound::{Backlog, ITEM_OVERHEAD};
pub use jsonrpc::{IdScanner, oversized_error};
pub use lifecycle::{
    Action, Lifecycle, LifecycleConfig, Phase, SWEEP_FIRST_END_WAIT, SWEEP_WAIT, SignalError,
};
pub use lines::{Lines, check_message};
pub use outbound::{
    Closed, SendError, SendErrorKind, WRITE_BATCH, WriteOp, WriteResult, WriteRound, WriteStep,
};
pub use report::{Counters, ExitReport};
pub use session::{Output, Receive, Received, Session};
pub use stderr_tail::{StderrTail, StderrTailConfig};
pub use supervisor::ReportWait;
// Supervision (restart, unanswered requests, start-up verdict).
pub use generations::{
    AfterSend, GaveUp, GenerationEvent, Generations, GenerationsConfig, SendStep, WhileDown,
};
pub use goodbye::{
    DAP_DISCONNECT_SEQ, DEFAULT_ANSWER_TIMEOUT, Farewell, Goodbye, LSP_SHUTDOWN_ID, Reply,
};
pub use pending::{EndCause, OversizedAction, PendingRequests, SendOutcome, Ticket, Unanswered};
pub use restart::{Generation, GiveUpReason, RestartConfig, RestartPolicy, RestartVerdict};
pub use startup::{ReadyOn, Startup, StartupConfig, StartupVerdict};

// The wire explains itself (C39): stdout pollution and framing mismatch
// named, stderr lines with levels.
mod json_shape;
pub mod pollution;
pub mod stderr_level;
pub use pollution::{PollutionDetector, PollutionPolicy};
pub use stderr_level::StderrLine;

// Hosts that never leak and never hang: the spawn ledger's decisions, and
// whether a running server answers, works or hangs.
pub mod ledger;
pub mod liveness;
pub use ledger::{Identity, ReapConfig, Reaper};
pub use liveness::{Liveness, LivenessConfig, Verdict};

// One server shared by many clients: ids, routing, initialization, bounds.
// Behind a feature: a quarter of this crate's code, which a transport alone
// never runs (`childwire-share` turns it on).
#[cfg(feature = "share")]
#[cfg_attr(docsrs, doc(cfg(feature = "share")))]
pub mod share;
#[cfg(feature = "share")]
pub use share::{ClientId, Share, ShareConfig};
