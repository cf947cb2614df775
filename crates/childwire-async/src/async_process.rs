//! The child, pipes and timer of the futures-io runtimes (smol, async-std),
//! written once: async-std's process module *is* `async-process`, and both
//! run their timers on `async-io`.

use std::future::Future;
use std::io;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Instant;

use async_process::Stdio;
use childwire_core::StderrMode;
use futures_io::{AsyncRead, AsyncWrite};

use crate::runtime::{PipeRead, PipeWrite, SpawnedChild, Timer, child_pipes};

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
            StderrMode::Capture => Stdio::piped(),
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
/// file or the process's own stdio to build a [`Transport`](crate::Transport)
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
