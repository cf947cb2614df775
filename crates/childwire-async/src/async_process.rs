//! The child and timer of the futures-io runtimes (smol, async-std), written
//! once: async-std's process module *is* `async-process`, and both run
//! their timers on `async-io`.
//!
//! With these, a runtime crate's [`Runtime`](crate::Runtime) impl is three
//! one-line methods: [`spawn_child`], its own task spawner, and
//! [`sleep_until`].

use std::future::Future;
use std::io;
use std::pin::Pin;
use std::process::ExitStatus;
use std::task::{Context, Poll};
use std::time::Instant;

use async_process::{ChildStderr, ChildStdin, ChildStdout, Stdio};
use childwire_core::Command;
use futures_io::{AsyncRead, AsyncWrite};

use crate::ChildProcess;

/// Spawns `command` with `async-process`.
///
/// `async-process` has no `process_group` on its own command type, so the
/// std command is built first (process group included) and converted. The
/// conversion forgets the std command's stdio (`async_process::Command::spawn`
/// resets any stream not set on the async command to inherit), so all three
/// are set again here.
pub fn spawn_child(command: &Command) -> io::Result<AsyncProcessChild> {
    let mut child = async_process::Command::from(command.to_std())
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(command.stderr_stdio())
        .spawn()?;
    let (stdin, stdout, stderr) = (child.stdin.take(), child.stdout.take(), child.stderr.take());
    let pid = child.id();
    Ok(AsyncProcessChild {
        pid,
        stdin,
        stdout,
        stderr,
        // The pipes are out of `child` first: `status` would close stdin
        // itself, and closing it is a lifecycle step of its own.
        exit: Box::pin(async move { child.status().await }),
    })
}

/// A timer that completes at `deadline`, on `async-io`'s reactor.
pub fn sleep_until(deadline: Instant) -> Sleep {
    Sleep(async_io::Timer::at(deadline))
}

/// An `async-io` timer that yields `()`, as [`Runtime::Sleep`](crate::Runtime::Sleep) wants.
#[derive(Debug)]
pub struct Sleep(async_io::Timer);

impl Future for Sleep {
    type Output = ();

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        Pin::new(&mut self.0).poll(cx).map(drop)
    }
}

/// An `async-process` child with its pipes taken out.
pub struct AsyncProcessChild {
    pid: u32,
    stdin: Option<ChildStdin>,
    stdout: Option<ChildStdout>,
    stderr: Option<ChildStderr>,
    exit: Pin<Box<dyn Future<Output = io::Result<ExitStatus>> + Send>>,
}

impl std::fmt::Debug for AsyncProcessChild {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AsyncProcessChild")
            .field("pid", &self.pid)
            .field("stdin_open", &self.stdin.is_some())
            .finish_non_exhaustive()
    }
}

impl ChildProcess for AsyncProcessChild {
    fn id(&self) -> Option<u32> {
        Some(self.pid)
    }

    fn poll_write_stdin(&mut self, cx: &mut Context<'_>, buf: &[u8]) -> Poll<io::Result<usize>> {
        match &mut self.stdin {
            Some(stdin) => Pin::new(stdin).poll_write(cx, buf),
            None => Poll::Ready(Err(io::ErrorKind::BrokenPipe.into())),
        }
    }

    fn poll_flush_stdin(&mut self, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        match &mut self.stdin {
            Some(stdin) => Pin::new(stdin).poll_flush(cx),
            None => Poll::Ready(Ok(())),
        }
    }

    fn close_stdin(&mut self) {
        self.stdin = None;
    }

    fn poll_read_stdout(
        &mut self,
        cx: &mut Context<'_>,
        buf: &mut [u8],
    ) -> Poll<io::Result<usize>> {
        poll_read(self.stdout.as_mut(), cx, buf)
    }

    fn poll_read_stderr(
        &mut self,
        cx: &mut Context<'_>,
        buf: &mut [u8],
    ) -> Poll<io::Result<usize>> {
        poll_read(self.stderr.as_mut(), cx, buf)
    }

    fn poll_wait(&mut self, cx: &mut Context<'_>) -> Poll<io::Result<ExitStatus>> {
        self.exit.as_mut().poll(cx)
    }
}

fn poll_read<R: AsyncRead + Unpin>(
    pipe: Option<&mut R>,
    cx: &mut Context<'_>,
    buf: &mut [u8],
) -> Poll<io::Result<usize>> {
    match pipe {
        Some(pipe) => Pin::new(pipe).poll_read(cx, buf),
        None => Poll::Ready(Ok(0)),
    }
}
