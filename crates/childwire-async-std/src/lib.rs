#![forbid(unsafe_code)]
//! [childwire] on async-std: run a child process and exchange
//! newline-delimited messages (NDJSON, JSON-RPC, MCP's stdio transport) with
//! it.
//!
//! async-std is discontinued upstream; its maintainers point to smol, its
//! successor. This crate is for codebases still on async-std; new code
//! should prefer `childwire-smol`. Both share one implementation: async-std's
//! process module *is* `async-process`, so only the task spawner here is
//! async-std's own.
//!
//! ```no_run
//! use childwire_async_std::{Command, Config, Received, Transport};
//!
//! # async fn run() -> Result<(), Box<dyn std::error::Error>> {
//! let mut server = Transport::spawn(&Command::new("uvx").arg("mcp-server-time"), Config::default())?;
//! server.send(r#"{"jsonrpc":"2.0","id":1,"method":"ping"}"#).await?;
//! while let Some(item) = server.recv().await {
//!     match item {
//!         Received::Message(m) => println!("{}", String::from_utf8_lossy(&m)),
//!         Received::Exited(report) => eprintln!("server {report}"),
//!         other => eprintln!("{other:?}"),
//!     }
//!     break;
//! }
//! let report = server.shutdown().await?;
//! println!("{report}");
//! # Ok(()) }
//! ```
//!
//! The background task runs on [`async_std::task::spawn`], so
//! [`Transport::spawn`] works from any thread. async-std is discontinued
//! upstream; prefer smol in new code.
//!
//! [childwire]: https://github.com/childwire/childwire

use std::future::Future;
use std::io;
use std::pin::Pin;
use std::time::Instant;

use childwire_async::async_process::{self, FuturesIo};
pub use childwire_async::{
    ChannelConfig, Closed, Command, Config, Containment, Counters, EncodeErrorKind, EndedBy,
    EnvPolicy, Exit, ExitReport, Framing, Lines, Malformed, Message, NoRuntime, Oversized,
    Received, SendError, SendErrorKind, ShutdownError, SpawnError, StderrMode,
};
use childwire_async::{Runtime, SpawnedChild, Timer};

/// The [`childwire_async::Runtime`] for async-std.
#[derive(Debug, Clone, Copy, Default)]
pub struct AsyncStd;

impl Runtime for AsyncStd {
    fn current() -> Result<Self, NoRuntime> {
        // A global executor: there is always one.
        Ok(AsyncStd)
    }

    fn now(&self) -> Instant {
        Instant::now()
    }

    fn timer(&self, deadline: Instant) -> Pin<Box<dyn Timer>> {
        async_process::timer(deadline)
    }

    fn spawn(&self, task: Pin<Box<dyn Future<Output = ()> + Send + 'static>>) {
        // Detached: the handle is dropped, the task runs on.
        async_std::task::spawn(task);
    }

    fn spawn_child(
        &self,
        command: std::process::Command,
        stderr: StderrMode,
    ) -> io::Result<SpawnedChild> {
        async_process::spawn_child(command, stderr)
    }
}

/// A transport over this process's own stdin and stdout: the server side of
/// stdio, for a program that is the child (an MCP server). NDJSON with the
/// given limits; the stream ends at stdin's EOF.
pub fn stdio(config: &ChannelConfig) -> Result<Transport, NoRuntime> {
    Transport::from_pipes(
        FuturesIo(async_std::io::stdin()),
        FuturesIo(async_std::io::stdout()),
        config,
    )
}

/// A child process (or a peer) and the message channel to it.
pub type Transport<F = Lines> = childwire_async::Transport<AsyncStd, F>;
/// The cloneable sending half of a [`Transport`].
pub type Sender<F = Lines> = childwire_async::Sender<AsyncStd, F>;
/// The receiving half of a [`Transport`].
pub type Receiver<F = Lines> = childwire_async::Receiver<AsyncStd, F>;
