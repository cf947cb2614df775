#![forbid(unsafe_code)]
//! [childwire] on Tokio: run a child process and exchange newline-delimited
//! messages (NDJSON, JSON-RPC, MCP's stdio transport) with it.
//!
//! ```no_run
//! use childwire_tokio::{Command, Config, Received, Transport};
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
//! [`Transport::spawn`] must be called from within a Tokio runtime; the
//! child is driven by a task on it.
//!
//! [childwire]: https://github.com/childwire/childwire

mod child;

pub use childwire_async::{
    Closed, Command, Config, Counters, DriverStopped, EndedBy, EnvPolicy, Exit, ExitReport,
    Message, Oversized, Received, SendError, SendErrorKind, SpawnError, StderrMode,
};

/// The [`childwire_async::Runtime`] for Tokio.
#[derive(Debug, Clone, Copy)]
pub struct Tokio;

/// A child process and the message channel to it, on Tokio.
pub type Transport = childwire_async::Transport<Tokio>;
/// The cloneable sending half of a [`Transport`].
pub type Sender = childwire_async::Sender<Tokio>;
/// The receiving half of a [`Transport`].
pub type Receiver = childwire_async::Receiver<Tokio>;
