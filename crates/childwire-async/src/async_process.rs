//! The futures-io runtimes (smol, async-std), written once: async-std's
//! process module *is* `async-process`, both run their timers on
//! `async-io`, and their sockets are futures-io streams. All that differs
//! between them is how a task is spawned ([`Executor`]), so
//! `childwire-smol` and `childwire-async-std` are a name, a spawn function
//! and their own stdio each.

use std::fmt;
use std::future::Future;
use std::io;
use std::marker::PhantomData;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Instant;

use async_process::Stdio;
use childwire_core::{ChannelConfig, Framing, StderrMode};
use futures_io::{AsyncRead, AsyncWrite};

use crate::runtime::{NoRuntime, PipeRead, PipeWrite, Runtime, SpawnedChild, Timer, child_pipes};
use crate::transport::Transport;

/// How a futures-io runtime runs a background task: the one thing smol and
/// async-std do differently. Both have a global executor, so there is
/// always one to spawn on.
pub trait Executor: Send + Sync + Unpin + 'static {
    /// The runtime's name, for `Debug`.
    const NAME: &'static str;

    /// Runs `task` in the background, detached, until it completes.
    fn spawn(task: Pin<Box<dyn Future<Output = ()> + Send + 'static>>);
}

/// The [`Runtime`] of a futures-io executor `E`: children from
/// `async-process`, timers from `async-io`, the system clock, and `E`'s
/// global executor for the background task. `childwire-smol`'s `Smol` and
/// `childwire-async-std`'s `AsyncStd` are this with their executor.
pub struct AsyncProcess<E>(PhantomData<fn() -> E>);

impl<E> AsyncProcess<E> {
    /// The runtime (it holds nothing: the executor is global).
    pub const fn new() -> Self {
        Self(PhantomData)
    }
}

impl<E> Clone for AsyncProcess<E> {
    fn clone(&self) -> Self {
        *self
    }
}

impl<E> Copy for AsyncProcess<E> {}

impl<E> Default for AsyncProcess<E> {
    fn default() -> Self {
        Self::new()
    }
}

impl<E: Executor> fmt::Debug for AsyncProcess<E> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(E::NAME)
    }
}

impl<E: Executor> Runtime for AsyncProcess<E> {
    fn current() -> Result<Self, NoRuntime> {
        // A global executor: there is always one.
        Ok(Self::new())
    }

    fn now(&self) -> Instant {
        Instant::now()
    }

    fn timer(&self, deadline: Instant) -> Pin<Box<dyn Timer>> {
        timer(deadline)
    }

    fn spawn(&self, task: Pin<Box<dyn Future<Output = ()> + Send + 'static>>) {
        E::spawn(task);
    }

    fn spawn_child(
        &self,
        command: std::process::Command,
        stderr: StderrMode,
    ) -> io::Result<SpawnedChild> {
        spawn_child(command, stderr)
    }
}

/// A bidirectional futures-io stream whose clones are the same stream, as
/// smol's and async-std's `TcpStream` and `UnixStream` are: what
/// [`from_stream_with`] takes.
pub trait Socket: AsyncRead + AsyncWrite + Clone + Send + Unpin + 'static {}

impl<S: AsyncRead + AsyncWrite + Clone + Send + Unpin + 'static> Socket for S {}

/// A transport talking `framing` over one bidirectional futures-io stream
/// (a TCP or Unix socket of smol or async-std). Their sockets are cheap
/// clones of one socket, so the reading and the writing half are two
/// clones: no lock between them. The stream ends at the peer's EOF.
/// Closing the transport's write side closes the writing clone as its
/// `poll_close` does: smol's sockets shut their write direction down (the
/// peer reads EOF), async-std's only flush (the peer reads EOF once the
/// transport is dropped, or after the caller's own
/// `shutdown(Shutdown::Write)` on a clone of the socket).
///
/// # Errors
///
/// If `R` has no runtime to run on (never for smol and async-std).
pub fn from_stream_with<R, F, S>(
    framing: F,
    stream: S,
    config: &ChannelConfig,
) -> Result<Transport<R, F>, NoRuntime>
where
    R: Runtime,
    F: Framing,
    S: Socket,
{
    Transport::from_pipes_with(
        framing,
        FuturesIo(stream.clone()),
        FuturesIo(stream),
        config,
    )
}

/// Spawns `command` with `async-process`.
///
/// `async-process` has no `process_group` on its own command type, so the
/// std command is converted. The conversion forgets the std command's stdio
/// (`async_process::Command::spawn` resets any stream not set on the async
/// command to inherit), so all three are set again here.
pub fn spawn_child(command: std::process::Command, stderr: StderrMode) -> io::Result<SpawnedChild> {
    let mut child = async_process::Command::from(command)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(match stderr {
            StderrMode::Show | StderrMode::Capture => Stdio::piped(),
            StderrMode::Inherit => Stdio::inherit(),
            StderrMode::Discard => Stdio::null(),
        })
        .spawn()?;
    let stderr = child.stderr.take();
    let (stdin, stdout, pipes) =
        child_pipes(child.stdin.take(), child.stdout.take(), stderr.as_ref())?;
    let pid = child.id();
    Ok(SpawnedChild {
        pid: Some(pid),
        pipes,
        stdin: Box::new(FuturesIo(stdin)),
        stdout: Box::new(FuturesIo(stdout)),
        stderr: stderr.map(|pipe| Box::new(FuturesIo(pipe)) as Box<dyn PipeRead>),
        // The pipes are out of `child` first: `status` would close stdin
        // itself, and closing it is a lifecycle step of its own.
        exit: Box::pin(async move { child.status().await }),
    })
}

/// A futures-io reader or writer as a childwire pipe: wrap a socket, a
/// file or the process's own stdio to build a [`Transport`]
/// over it.
#[derive(Debug)]
pub struct FuturesIo<T>(pub T);

impl<T: AsyncRead + Send + Unpin + 'static> PipeRead for FuturesIo<T> {
    fn poll_read(&mut self, cx: &mut Context<'_>, buf: &mut [u8]) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.0).poll_read(cx, buf)
    }
}

impl<T: AsyncWrite + Send + Unpin + 'static> PipeWrite for FuturesIo<T> {
    fn poll_write(&mut self, cx: &mut Context<'_>, buf: &[u8]) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.0).poll_write(cx, buf)
    }

    fn poll_flush(&mut self, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.0).poll_flush(cx)
    }

    fn poll_shutdown(&mut self, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.0).poll_close(cx)
    }
}

/// An `async-io` timer at `deadline`.
pub fn timer(deadline: Instant) -> Pin<Box<dyn Timer>> {
    Box::pin(AsyncIoTimer(async_io::Timer::at(deadline)))
}

struct AsyncIoTimer(async_io::Timer);

impl Timer for AsyncIoTimer {
    fn reset(mut self: Pin<&mut Self>, deadline: Instant) {
        self.0.set_at(deadline);
    }

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        Pin::new(&mut self.0).poll(cx).map(drop)
    }
}
