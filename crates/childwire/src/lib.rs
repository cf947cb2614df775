#![forbid(unsafe_code)]
#![cfg_attr(docsrs, feature(doc_cfg))]
//! Run a child process and exchange newline-delimited messages (NDJSON,
//! JSON-RPC, MCP's stdio transport) with it: bounded framing, batched and
//! backpressured writes, a drained stderr with a tail for the exit report,
//! and the MCP shutdown sequence (close stdin, SIGTERM, SIGKILL) on the
//! child's whole process group.
//!
//! The runtime is picked by feature. Each one adds a module with the same
//! API (`Transport`, `Sender`, `Receiver`, and the types below again), so
//! switching runtime is a one-line change of the `use`
//! (`use childwire::tokio::{Command, Config, Transport}` →
//! `use childwire::smol::{Command, Config, Transport}`):
//!
//! | Feature             | Module                | Adapter crate         | Pulls in                                  |
//! |---------------------|-----------------------|-----------------------|-------------------------------------------|
//! | `tokio` (default)   | `childwire::tokio`    | `childwire-tokio`     | `tokio` (`process`, `rt`, `time`, `io-util`) |
//! | `smol`              | `childwire::smol`     | `childwire-smol`      | `smol` (`async-process`, `async-io`, its executor) |
//! | `async-std`         | `childwire::async_std` | `childwire-async-std` | `async-std` (discontinued upstream), `async-process`, `async-io` |
//! | none                | —                     | —                     | `childwire-core` and `childwire-async` only: the types below and the [`core`] framer |
//! | `tracing` (default) | —                     | —                     | `tracing`: log events (below) |
//! | `stdio`             | —                     | —                     | `tokio`'s `io-std`, for `childwire::tokio::stdio()`: the server side, over this process's stdin and stdout (smol's and async-std's are always there) |
//!
//! The features are additive: any combination builds, and enabling one
//! never changes another (two crates in one dependency graph may pick
//! different runtimes). To use smol or async-std only, turn the defaults
//! off and name `tracing` again:
//!
//! ```toml
//! [dependencies]
//! childwire = { version = "0.1", default-features = false, features = ["smol", "tracing"] }
//! ```
//!
//! Feature `tracing` (on by default) logs through `tracing`: each stderr
//! line of the child (target `childwire::stderr`, at debug, the level the
//! line names in the field `child_level`), what it writes to stdout that is
//! not a message (`childwire::stdout`), and the transport's own warnings,
//! in a `childwire` span that names the child's pid and program. Without it
//! nothing is logged and nothing else changes: the stderr callback and
//! stream, [`StderrMode::Show`], the exit report and its stderr tail are
//! the same. A program with no `tracing` subscriber (nothing would show the
//! events) can leave it out, and its cold build compiles `tracing`,
//! `tracing-core` and `once_cell` less:
//!
//! ```toml
//! [dependencies]
//! childwire = { version = "0.1", default-features = false, features = ["tokio"] }
//! ```
//!
//! # Tokio
//!
//! `Transport::spawn` must be called from within a Tokio runtime.
//!
//! ```no_run
//! use childwire::{Command, Config, Received};
//!
//! # #[cfg(feature = "tokio")]
//! async fn ping() -> Result<(), Box<dyn std::error::Error>> {
//!     let mut server = childwire::tokio::Transport::spawn(
//!         &Command::new("uvx").arg("mcp-server-time"),
//!         Config::default(),
//!     )?;
//!     server.send(r#"{"jsonrpc":"2.0","id":1,"method":"ping"}"#).await?;
//!     if let Some(Received::Message(reply)) = server.recv().await {
//!         println!("{}", String::from_utf8_lossy(&reply));
//!     }
//!     println!("{}", server.shutdown().await?);
//!     Ok(())
//! }
//! ```
//!
//! # smol
//!
//! The child is driven on smol's global executor; run the future with
//! `smol::block_on` or any executor.
//!
//! ```no_run
//! use childwire::{Command, Config, Received};
//!
//! # #[cfg(feature = "smol")]
//! async fn ping() -> Result<(), Box<dyn std::error::Error>> {
//!     let mut server = childwire::smol::Transport::spawn(
//!         &Command::new("uvx").arg("mcp-server-time"),
//!         Config::default(),
//!     )?;
//!     server.send(r#"{"jsonrpc":"2.0","id":1,"method":"ping"}"#).await?;
//!     if let Some(Received::Message(reply)) = server.recv().await {
//!         println!("{}", String::from_utf8_lossy(&reply));
//!     }
//!     println!("{}", server.shutdown().await?);
//!     Ok(())
//! }
//! ```
//!
//! # async-std
//!
//! For codebases still on async-std (discontinued upstream; smol is its
//! successor). It shares smol's implementation.
//!
//! ```no_run
//! use childwire::{Command, Config, Received};
//!
//! # #[cfg(feature = "async-std")]
//! async fn ping() -> Result<(), Box<dyn std::error::Error>> {
//!     let mut server = childwire::async_std::Transport::spawn(
//!         &Command::new("uvx").arg("mcp-server-time"),
//!         Config::default(),
//!     )?;
//!     server.send(r#"{"jsonrpc":"2.0","id":1,"method":"ping"}"#).await?;
//!     if let Some(Received::Message(reply)) = server.recv().await {
//!         println!("{}", String::from_utf8_lossy(&reply));
//!     }
//!     println!("{}", server.shutdown().await?);
//!     Ok(())
//! }
//! ```
//!
//! # MCP SDKs
//!
//! Two crates put childwire under an MCP SDK, in place of the SDK's own
//! child-process transport; the rest of the client is unchanged:
//!
//! - [`childwire-rmcp`](https://github.com/childwire/childwire/tree/main/crates/childwire-rmcp):
//!   `childwire_rmcp::ChildwireTransport` for [rmcp](https://docs.rs/rmcp)
//!   3.x from 3.11, in place of `TokioChildProcess` (and `stdio()` for the
//!   server role).
//! - [`childwire-turbomcp`](https://github.com/childwire/childwire/tree/main/crates/childwire-turbomcp):
//!   `childwire_turbomcp::ChildwireTransport` for
//!   [TurboMCP](https://docs.rs/turbomcp) 3.x from 3.6, in place of
//!   `ChildProcessTransport`, built from the same `ChildProcessConfig`.
//!
//! The `childwire` command (crate `childwire-cli`) runs an MCP server to see
//! what it does (`childwire probe -- CMD`) or relays a host to it with a log
//! of every message (`childwire relay --log FILE -- CMD`).

// The names every runtime module has too (listed and explained in
// `childwire_async::prelude`): one list, so the facade and the runtime
// modules cannot drift apart. No doc comment here: rustdoc would put it at
// the top of every item's page.
pub use childwire_async::prelude::*;
// The runtime-generic handles and the trait to bind another runtime: write
// `fn serve<R: Runtime>(t: Transport<R>)` once and call it with any runtime
// module's transport.
pub use childwire_async::{
    PipeIds, Receiver, Runtime, Sender, SpawnedChild, Supervised, SupervisedSender, Timer,
    Transport,
};
// For hosts: the spawn ledger that ends what a crashed host left, the CPU
// time of a child's tree, the login shell's environment.
pub use childwire_async::{
    LOGIN_SHELL_TIMEOUT, Ledger, LedgerEntry, LoginEnv, LoginShellError, ReapConfig, ReapVerdict,
    Reaped, identity_of, login_shell_env, reap_leftovers, tree_cpu_time,
};
/// The sans-IO core: the framer on its own (usable over any byte stream),
/// the encoder, the lifecycle and session state machines.
pub use childwire_core as core;

/// childwire on Tokio (feature `tokio`, on by default).
#[cfg(feature = "tokio")]
#[cfg_attr(docsrs, doc(cfg(feature = "tokio")))]
pub mod tokio {
    pub use childwire_tokio::*;
}

/// childwire on smol (feature `smol`).
#[cfg(feature = "smol")]
#[cfg_attr(docsrs, doc(cfg(feature = "smol")))]
pub mod smol {
    pub use childwire_smol::*;
}

/// childwire on async-std (feature `async-std`). async-std is discontinued
/// upstream; prefer `childwire::smol` (feature `smol`) in new code.
#[cfg(feature = "async-std")]
#[cfg_attr(docsrs, doc(cfg(feature = "async-std")))]
pub mod async_std {
    pub use childwire_async_std::*;
}
