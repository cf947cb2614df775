//! Tokio's process and timer types behind childwire's runtime traits.

use std::future::Future;
use std::io;
use std::pin::Pin;
use std::process::ExitStatus;
use std::task::{Context, Poll};
use std::time::Instant;

use childwire_async::{ChildProcess, Command, Runtime};
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::process::{ChildStderr, ChildStdin, ChildStdout};

use crate::Tokio;

impl Runtime for Tokio {
    type Child = TokioChild;
    type Sleep = tokio::time::Sleep;

    fn spawn_child(command: &Command) -> io::Result<TokioChild> {
        let mut child = tokio::process::Command::from(command.to_std()).spawn()?;
        let (stdin, stdout, stderr) =
            (child.stdin.take(), child.stdout.take(), child.stderr.take());
        let pid = child.id();
        Ok(TokioChild {
            pid,
            stdin,
            stdout,
            stderr,
            // The pipes are out of `child`: `wait` would close stdin itself,
            // and closing it is a lifecycle step of its own.
            exit: Box::pin(async move { child.wait().await }),
        })
    }

    fn spawn_task(task: Pin<Box<dyn Future<Output = ()> + Send + 'static>>) {
        tokio::spawn(task);
    }

    fn sleep_until(deadline: Instant) -> tokio::time::Sleep {
        tokio::time::sleep_until(deadline.into())
    }
}

/// A Tokio child with its pipes taken out.
pub struct TokioChild {
    pid: Option<u32>,
    stdin: Option<ChildStdin>,
    stdout: Option<ChildStdout>,
    stderr: Option<ChildStderr>,
    exit: Pin<Box<dyn Future<Output = io::Result<ExitStatus>> + Send>>,
}

impl ChildProcess for TokioChild {
    fn id(&self) -> Option<u32> {
        self.pid
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
    let Some(pipe) = pipe else {
        return Poll::Ready(Ok(0));
    };
    let mut buf = ReadBuf::new(buf);
    match Pin::new(pipe).poll_read(cx, &mut buf) {
        Poll::Ready(Ok(())) => Poll::Ready(Ok(buf.filled().len())),
        Poll::Ready(Err(err)) => Poll::Ready(Err(err)),
        Poll::Pending => Poll::Pending,
    }
}
