#![forbid(unsafe_code)]
//! [childwire] on smol: run a child process and exchange newline-delimited
//! messages (NDJSON, JSON-RPC, MCP's stdio transport) with it.
//!
//! ```no_run
//! use childwire_smol::{Command, Config, Received, Transport};
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
//! The background task runs on smol's global executor ([`smol::spawn`]), with
//! pipes and timers on `async-io`'s reactor, so [`Transport::spawn`] works
//! from any thread, inside `smol::block_on` or not.
//!
//! That executor runs one thread unless the `SMOL_THREADS` environment
//! variable says more, shared by every child's background task and every
//! task you `smol::spawn`. With many children, or a writer and a reader
//! each in a task of its own, set it to the number of cores (the benches
//! do, to give smol the threads Tokio and async-std have by default): 200
//! children echoing at once moved 0.76x the blocking baseline's bytes on
//! one thread and 1.2-1.4x on two.
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

/// The [`childwire_async::Runtime`] for Smol.
#[derive(Debug, Clone, Copy, Default)]
pub struct Smol;

impl Runtime for Smol {
    fn current() -> Result<Self, NoRuntime> {
        // A global executor: there is always one.
        Ok(Smol)
    }

    fn now(&self) -> Instant {
        Instant::now()
    }

    fn timer(&self, deadline: Instant) -> Pin<Box<dyn Timer>> {
        async_process::timer(deadline)
    }

    fn spawn(&self, task: Pin<Box<dyn Future<Output = ()> + Send + 'static>>) {
        smol::spawn(task).detach();
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
        FuturesIo(smol::Unblock::new(std::io::stdin())),
        FuturesIo(smol::Unblock::new(std::io::stdout())),
        config,
    )
}

/// A child process (or a peer) and the message channel to it.
pub type Transport<F = Lines> = childwire_async::Transport<Smol, F>;
/// The cloneable sending half of a [`Transport`].
pub type Sender<F = Lines> = childwire_async::Sender<Smol, F>;
/// The receiving half of a [`Transport`].
pub type Receiver<F = Lines> = childwire_async::Receiver<Smol, F>;
