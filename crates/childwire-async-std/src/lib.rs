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
//!         Received::Oversized(notice) => eprintln!("{notice}"),
//!         Received::Malformed(notice) => eprintln!("{notice}"),
//!         Received::Exited(report) => eprintln!("server {report}"),
//!     }
//!     break;
//! }
//! let report = server.shutdown().await?;
//! println!("{report}");
//! # Ok(()) }
//! ```
//!
//! The child is driven by a task spawned with [`async_std::task::spawn`], so
//! [`Transport::spawn`] works from any thread.
//!
//! [childwire]: https://github.com/childwire/childwire

use std::future::Future;
use std::pin::Pin;
use std::time::Instant;

use childwire_async::async_process::{self, AsyncProcessChild};

pub use childwire_async::{
    Closed, Command, Config, Counters, DriverStopped, EndedBy, EnvPolicy, Exit, ExitReport,
    Message, Oversized, Received, SendError, SendErrorKind, SpawnError, StderrMode,
};

/// The [`childwire_async::Runtime`] for async-std.
#[derive(Debug, Clone, Copy)]
pub struct AsyncStd;

impl childwire_async::Runtime for AsyncStd {
    type Child = AsyncProcessChild;
    type Sleep = async_process::Sleep;

    fn spawn_child(command: &Command) -> std::io::Result<AsyncProcessChild> {
        async_process::spawn_child(command)
    }

    fn spawn_task(task: Pin<Box<dyn Future<Output = ()> + Send + 'static>>) {
        // Detached: the handle is dropped, the task runs on.
        async_std::task::spawn(task);
    }

    fn sleep_until(deadline: Instant) -> async_process::Sleep {
        async_process::sleep_until(deadline)
    }
}

/// A child process and the message channel to it, on async-std.
pub type Transport = childwire_async::Transport<AsyncStd>;
/// The cloneable sending half of a [`Transport`].
pub type Sender = childwire_async::Sender<AsyncStd>;
/// The receiving half of a [`Transport`].
pub type Receiver = childwire_async::Receiver<AsyncStd>;
