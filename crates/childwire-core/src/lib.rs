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
//! | module (or types) | what it decides |
//! |---|---|
//! | the wire formats, at the root: [`Framing`], [`Lines`], [`ContentLength`], [`LineDecoder`], [`ContentLengthDecoder`], [`Encoder`], [`Frame`] | what a message is on the wire (NDJSON lines, `Content-Length` frames); over-long or broken frames become notices |
//! | [`jsonrpc`] | the top-level JSON-RPC id of an over-long message, and the error that answers it |
//! | [`inbound`], [`outbound`] | the two halves of a channel: queues, backpressure, write timeout, why sending stopped |
//! | [`channel`] | both halves over one byte stream, no process in it |
//! | [`lifecycle`] | close stdin, SIGTERM, SIGKILL, when the end is known |
//! | [`stderr_tail`] | the bounded tail of stderr and its lines |
//! | [`stderr_level`], [`pollution`] | a stderr line's level; a stdout line that is not a JSON message, named |
//! | [`report`] | how a child's end is reported, and the few types that say how it ended |
//! | [`supervisor`] | a child's lifecycle, stderr tail and report, with no channel |
//! | [`session`] | a child transport: a channel plus a supervisor |
//! | [`restart`], [`pending`], [`startup`] | supervision: when to restart a child and when to give up, the JSON-RPC requests it has not answered, whether it started |
//! | [`command`], [`config`] | what to spawn, and the limits, checked before spawning |
//! | `codec` | `tokio_util::codec` bindings for the framings (feature `tokio-util`) |
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
//! [`ContentLength`]), then loop: feed what you read to
//! [`handle_read`](Channel::handle_read) (and EOF to
//! [`handle_read_eof`](Channel::handle_read_eof)); after every input drain
//! [`poll_close_write`](Channel::poll_close_write),
//! [`poll_transmit`](Channel::poll_transmit) (write it, then report
//! [`handle_written`](Channel::handle_written)), [`wants_read`](Channel::wants_read)
//! and [`poll_timeout`](Channel::poll_timeout); hand
//! [`poll_received`](Channel::poll_received) frames to your caller. To drive
//! each direction from its own task, split it with
//! [`Channel::into_parts`]. A child process adds a [`Lifecycle`] and a
//! [`StderrTail`]: that is [`Session`].
//!
//! [childwire]: https://github.com/childwire/childwire

pub mod channel;
pub mod command;
pub mod config;
mod content_length;
mod decoder;
mod encoder;
mod ending;
mod frame;
mod framing;
pub mod inbound;
pub mod joint;
pub mod jsonrpc;
pub mod lifecycle;
mod lines;
pub mod outbound;
pub mod report;
pub mod session;
// Supervision (restart, unanswered requests, start-up verdict).
pub mod pending;
pub mod restart;
pub mod startup;
pub mod stderr_tail;
pub mod supervisor;

#[cfg(feature = "tokio-util")]
#[cfg_attr(docsrs, doc(cfg(feature = "tokio-util")))]
pub mod codec;

#[cfg(feature = "testing")]
#[cfg_attr(docsrs, doc(cfg(feature = "testing")))]
pub mod testing;

pub use channel::Channel;
pub use command::{Command, Containment, EnvPolicy, SpawnError, StderrMode};
pub use config::{ChannelConfig, Config, ConfigError};
// The wire formats: their modules are private, each type has one path.
pub use content_length::{ContentLength, ContentLengthDecoder, MAX_HEADER_LEN};
pub use decoder::{DEFAULT_MAX_MESSAGE_SIZE, LineDecoder};
pub use encoder::{DEFAULT_HIGH_WATER, EncodeError, Encoder, LineEncoder};
pub use ending::{EndedBy, Exit, Signal, Swept, ntstatus_name, signal_name};
pub use frame::{
    DecoderStats, Frame, Malformed, MalformedReason, Message, OVERSIZED_HEAD_LEN, Oversized,
    PollutionKind, PollutionNotice,
};
pub use framing::{EncodeErrorKind, FrameDecoder, Framing};
pub use inbound::Inbound;
pub use jsonrpc::{IdScanner, oversized_error};
pub use lifecycle::{Action, Lifecycle, LifecycleConfig, Phase, SignalError};
pub use lines::{Lines, check_message};
pub use outbound::{Closed, Outbound, SendError, SendErrorKind, WRITE_BATCH};
pub use report::{Counters, ExitReport};
pub use session::{Received, Session};
pub use stderr_tail::{StderrTail, StderrTailConfig};
pub use supervisor::{ReportWait, Supervisor};
// Supervision (restart, unanswered requests, start-up verdict).
pub use pending::{EndCause, OversizedAction, PendingRequests, Unanswered};
pub use restart::{Generation, GiveUpReason, RestartConfig, RestartPolicy, RestartVerdict};
pub use startup::{ReadyOn, Startup, StartupConfig, StartupVerdict};

// The wire explains itself (C39): stdout pollution and framing mismatch
// named, stderr lines with levels.
mod json_shape;
pub mod pollution;
pub mod stderr_level;
pub use pollution::{PollutionDetector, PollutionPolicy};
pub use stderr_level::StderrLine;

// One server shared by many clients: ids, routing, initialization, bounds.
pub mod share;
pub use share::{ClientId, Share, ShareConfig};
