#![forbid(unsafe_code)]
//! [childwire] on async-std: run a child process and exchange
//! newline-delimited messages (NDJSON, JSON-RPC, MCP's stdio transport) with
//! it, or talk to a peer over an async-std socket.
//!
//! async-std is discontinued upstream; its maintainers point to smol, its
//! successor. This crate is for codebases still on async-std; new code
//! should prefer `childwire-smol`. Both share one implementation
//! ([`childwire_async::async_process`]): async-std's process module *is*
//! `async-process`, so only the task spawner here is async-std's own.
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
//! [`Transport::spawn`] works from any thread.
//!
//! The runtime-independent names ([`Command`], [`Config`], [`Received`],
//! [`ContentLength`], [`StderrLines`], the error types...) are the same in
//! every runtime's crate: see [`childwire_async::prelude`].
//!
//! [childwire]: https://github.com/childwire/childwire

use std::future::Future;
use std::pin::Pin;

use childwire_async::async_process::{self, AsyncProcess, Executor};
pub use childwire_async::async_process::{FuturesIo, Socket};
pub use childwire_async::prelude::*;

/// async-std's global executor, as childwire spawns on it.
#[derive(Debug)]
pub enum AsyncStdExecutor {}

impl Executor for AsyncStdExecutor {
    const NAME: &'static str = "AsyncStd";

    fn spawn(task: Pin<Box<dyn Future<Output = ()> + Send + 'static>>) {
        // Detached: the handle is dropped, the task runs on.
        async_std::task::spawn(task);
    }
}

/// The [`childwire_async::Runtime`] for async-std: `async-process`
/// children, `async-io` timers, async-std's global executor.
pub type AsyncStd = AsyncProcess<AsyncStdExecutor>;

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

/// A transport talking NDJSON over one socket (async-std's `TcpStream`,
/// `UnixStream`, or any futures-io stream that clones to the same stream).
/// The reading and writing halves are two clones of it, with no lock
/// between them; the stream ends at the peer's EOF. async-std's sockets do
/// not shut their write direction down when closed (their `poll_close`
/// only flushes): the peer reads EOF once the transport is dropped, or
/// after `socket.shutdown(Shutdown::Write)` on a clone you kept.
///
/// ```
/// use async_std::net::{TcpListener, TcpStream};
/// use childwire_async_std::{ChannelConfig, Received};
///
/// # fn main() -> Result<(), Box<dyn std::error::Error>> { async_std::task::block_on(async {
/// let listener = TcpListener::bind("127.0.0.1:0").await?;
/// let client = TcpStream::connect(listener.local_addr()?).await?;
/// let (socket, _) = listener.accept().await?;
///
/// let mut server = childwire_async_std::from_stream(socket, &ChannelConfig::default())?;
/// let client = childwire_async_std::from_stream(client, &ChannelConfig::default())?;
/// client.send(r#"{"jsonrpc":"2.0","id":1,"method":"ping"}"#).await?;
/// let Some(Received::Message(request)) = server.recv().await else { panic!("no request") };
/// assert_eq!(request.as_ref(), br#"{"jsonrpc":"2.0","id":1,"method":"ping"}"#);
/// # Ok(()) }) }
/// ```
pub fn from_stream<S>(stream: S, config: &ChannelConfig) -> Result<Transport, NoRuntime>
where
    S: Socket,
{
    from_stream_with(Lines, stream, config)
}

/// [`from_stream`] with another framing, e.g. [`ContentLength`] for a DAP
/// server listening on a TCP port.
pub fn from_stream_with<F, S>(
    framing: F,
    stream: S,
    config: &ChannelConfig,
) -> Result<Transport<F>, NoRuntime>
where
    F: Framing,
    S: Socket,
{
    async_process::from_stream_with(framing, stream, config)
}

/// Compiles the transport's common code for AsyncStd in this crate, in debug
/// builds, so that programs use it instead of compiling their own copy
/// (see `childwire_async::precompiled`). Never called.
#[cfg(debug_assertions)]
#[doc(hidden)]
pub fn precompiled(command: Command) -> Pin<Box<dyn Future<Output = ()> + Send>> {
    childwire_async::precompiled::<AsyncStd>(command)
}

/// A child process (or a peer) and the message channel to it.
pub type Transport<F = Lines> = childwire_async::Transport<AsyncStd, F>;
/// The cloneable sending half of a [`Transport`].
pub type Sender<F = Lines> = childwire_async::Sender<AsyncStd, F>;
/// The receiving half of a [`Transport`].
pub type Receiver<F = Lines> = childwire_async::Receiver<AsyncStd, F>;
/// A child process restarted when it ends unexpectedly (see
/// [`childwire_async::Supervised`]).
pub type Supervised<F = Lines> = childwire_async::Supervised<AsyncStd, F>;
/// The cloneable sending side of a [`Supervised`] child.
pub type SupervisedSender<F = Lines> = childwire_async::SupervisedSender<AsyncStd, F>;
