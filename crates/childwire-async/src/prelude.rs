//! The names every runtime module re-exports: one list, so
//! `childwire::tokio`, `childwire::smol`, `childwire::async_std` and the
//! `childwire` crate itself offer the same ones and cannot drift apart.
//!
//! It holds what a program that spawns a child or talks over a socket
//! reaches for: the command and its policies ([`Command`], [`EnvPolicy`],
//! [`StderrMode`], [`Containment`]), the limits ([`Config`],
//! [`ChannelConfig`], [`StderrTailConfig`], and what a shutdown says first:
//! [`Goodbye`], [`Reply`]), the framings ([`Lines`] for
//! NDJSON, [`ContentLength`] for LSP and DAP), what comes back
//! ([`Received`], [`Message`], [`Oversized`], [`Malformed`], [`ExitReport`]
//! and its parts), the child's stderr as a stream ([`StderrLines`]), the
//! exit report of a transport handed to an SDK ([`ExitHandle`]), the error
//! types ([`SpawnError`], [`SendError`], [`ShutdownError`], [`ConfigError`],
//! [`NoRuntime`], and with the `serde` feature [`SendJsonError`] and
//! [`RecvJsonError`]), the traits a pipe implements ([`PipeRead`],
//! [`PipeWrite`]), [`Bytes`], the type the `Sink` takes, and what a
//! supervised child is configured with and hands out ([`Supervision`],
//! [`RestartConfig`], [`WhileDown`], [`LivenessConfig`], [`SupervisedEvent`], [`GaveUp`],
//! [`UnansweredRequest`]), what a start-up is waited for with and
//! ends in ([`StartupConfig`], [`StartupVerdict`]), and the wire tap
//! ([`Tap`], [`TapEvent`], and the [`tap`] module with its recorder).
//!
//! Each runtime module adds its own `Transport`, `Sender`, `Receiver`,
//! `Supervised` and `SupervisedSender` (the generic ones bound to its
//! runtime) and its constructors.
//!
//! ```
//! use childwire_async::prelude::*;
//!
//! let mut command = Command::new("npx");
//! command.stderr(StderrMode::Capture);
//! let framing: ContentLength = ContentLength::default();
//! # let _ = (command, framing, Bytes::new());
//! ```
// Without the `serde` feature its names are not built: their links go to
// docs.rs, which builds every feature.
#![cfg_attr(
    not(feature = "serde"),
    doc = "[`SendJsonError`]: https://docs.rs/childwire-async/latest/childwire_async/enum.SendJsonError.html"
)]
#![cfg_attr(
    not(feature = "serde"),
    doc = "[`RecvJsonError`]: https://docs.rs/childwire-async/latest/childwire_async/enum.RecvJsonError.html"
)]

pub use bytes::Bytes;
pub use childwire_core::liveness::LivenessConfig;
pub use childwire_core::pending::UnansweredRequest;
pub use childwire_core::{
    ChannelConfig, Closed, Command, ConfigError, Containment, ContentLength, Counters,
    EncodeErrorKind, EndedBy, EnvPolicy, Exit, ExitReport, Framing, Goodbye, Lines, Malformed,
    MalformedReason, Message, Oversized, PollutionKind, PollutionNotice, PollutionPolicy, Received,
    Reply, SendError, SendErrorKind, SpawnError, StderrLine, StderrMode, StderrTailConfig,
};
pub use childwire_core::{
    GaveUp, Generation, GiveUpReason, RestartConfig, StartupConfig, StartupVerdict, WhileDown,
};

#[cfg(feature = "serde")]
pub use crate::json::{RecvJsonError, SendJsonError};
pub use crate::tap::{self, Tap, TapEvent};
pub use crate::{
    Config, ExitHandle, ExitSlot, NoRuntime, PipeRead, PipeWrite, STDERR_LINES_PENDING,
    ShutdownError, StderrCallback, StderrLines,
};
pub use crate::{
    DEFAULT_SEED, ReinitError, ReinitFuture, RequestError, SupervisedEvent, Supervision,
};
