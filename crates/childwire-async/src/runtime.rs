//! What a runtime must provide: spawning a task, a timer, and a child with
//! pollable pipes. Everything else is written once, in this crate.

use std::future::Future;
use std::io;
use std::pin::Pin;
use std::process::ExitStatus;
use std::task::{Context, Poll};
use std::time::Instant;

use childwire_core::Command;

/// An async runtime as childwire needs it.
///
/// Implemented by `childwire-tokio`, `childwire-smol` and
/// `childwire-async-std`; implement it to run childwire on another runtime.
pub trait Runtime: Send + Sync + 'static {
    /// The runtime's child process, with its pipes.
    type Child: ChildProcess;
    /// The runtime's timer.
    type Sleep: Future<Output = ()> + Send + 'static;

    /// Spawns `command`, with stdin and stdout piped and stderr as its mode
    /// says: build it with [`Command::to_std`] and convert it to the
    /// runtime's own type.
    fn spawn_child(command: &Command) -> io::Result<Self::Child>;

    /// Runs `task` in the background until it completes.
    fn spawn_task(task: Pin<Box<dyn Future<Output = ()> + Send + 'static>>);

    /// A timer that completes at `deadline`.
    fn sleep_until(deadline: Instant) -> Self::Sleep;
}

/// A spawned child's pipes and exit, as poll functions.
///
/// Pipe methods on a pipe that is absent (not captured, or closed) return
/// `Poll::Ready(Ok(0))` for reads and an error for writes.
pub trait ChildProcess: Send + Unpin + 'static {
    /// The child's PID, taken at spawn. With a process group it is the
    /// group's ID too.
    fn id(&self) -> Option<u32>;

    /// Writes to the child's stdin.
    fn poll_write_stdin(&mut self, cx: &mut Context<'_>, buf: &[u8]) -> Poll<io::Result<usize>>;

    /// Flushes the child's stdin.
    fn poll_flush_stdin(&mut self, cx: &mut Context<'_>) -> Poll<io::Result<()>>;

    /// Closes the child's stdin, so it reads EOF.
    fn close_stdin(&mut self);

    /// Reads from the child's stdout; `Ok(0)` at EOF.
    fn poll_read_stdout(&mut self, cx: &mut Context<'_>, buf: &mut [u8])
    -> Poll<io::Result<usize>>;

    /// Reads from the child's stderr; `Ok(0)` at EOF or when it is not piped.
    fn poll_read_stderr(&mut self, cx: &mut Context<'_>, buf: &mut [u8])
    -> Poll<io::Result<usize>>;

    /// Completes when the child has exited and been reaped.
    fn poll_wait(&mut self, cx: &mut Context<'_>) -> Poll<io::Result<ExitStatus>>;
}
