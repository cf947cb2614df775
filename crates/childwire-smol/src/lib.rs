#![forbid(unsafe_code)]
//! [childwire] on smol: run a child process and exchange newline-delimited
//! messages (NDJSON, JSON-RPC, MCP's stdio transport) with it, or talk to a
//! peer over a smol socket.
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

/// smol's global executor, as childwire spawns on it.
#[derive(Debug)]
pub enum SmolExecutor {}

impl Executor for SmolExecutor {
    const NAME: &'static str = "Smol";

    fn spawn(task: Pin<Box<dyn Future<Output = ()> + Send + 'static>>) {
        smol::spawn(task).detach();
    }
}

/// The [`childwire_async::Runtime`] for smol: `async-process` children,
/// `async-io` timers, smol's global executor.
pub type Smol = AsyncProcess<SmolExecutor>;

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

/// A transport talking NDJSON over one socket (smol's `TcpStream`,
/// `UnixStream`, or any futures-io stream that clones to the same stream).
/// The reading and writing halves are two clones of it, with no lock
/// between them; the stream ends at the peer's EOF. Closing the
/// transport's write side shuts the socket's write direction down.
///
/// ```
/// use childwire_smol::{ChannelConfig, Received};
/// use smol::net::{TcpListener, TcpStream};
///
/// # fn main() -> Result<(), Box<dyn std::error::Error>> { smol::block_on(async {
/// let listener = TcpListener::bind("127.0.0.1:0").await?;
/// let client = TcpStream::connect(listener.local_addr()?).await?;
/// let (socket, _) = listener.accept().await?;
///
/// let mut server = childwire_smol::from_stream(socket, &ChannelConfig::default())?;
/// let client = childwire_smol::from_stream(client, &ChannelConfig::default())?;
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

/// Compiles the transport's common code for Smol in this crate, in debug
/// builds, so that programs use it instead of compiling their own copy
/// (see `childwire_async::precompiled`). Never called.
#[cfg(debug_assertions)]
#[doc(hidden)]
pub fn precompiled(command: Command) -> Pin<Box<dyn Future<Output = ()> + Send>> {
    childwire_async::precompiled::<Smol>(command)
}

/// A child process (or a peer) and the message channel to it.
pub type Transport<F = Lines> = childwire_async::Transport<Smol, F>;
/// The cloneable sending half of a [`Transport`].
pub type Sender<F = Lines> = childwire_async::Sender<Smol, F>;
/// The receiving half of a [`Transport`].
pub type Receiver<F = Lines> = childwire_async::Receiver<Smol, F>;
/// A child process restarted when it ends unexpectedly (see
/// [`childwire_async::Supervised`]).
pub type Supervised<F = Lines> = childwire_async::Supervised<Smol, F>;
/// The cloneable sending side of a [`Supervised`] child.
pub type SupervisedSender<F = Lines> = childwire_async::SupervisedSender<Smol, F>;
