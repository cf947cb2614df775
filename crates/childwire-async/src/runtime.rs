//! What a runtime must provide: its clock, a resettable timer, spawning a
//! task, spawning a child, and pipes to poll. Everything else is written
//! once, in this crate.

use std::fmt;
use std::future::Future;
use std::io;
use std::pin::Pin;
use std::process::ExitStatus;
use std::task::{Context, Poll};
use std::time::Instant;

use childwire_core::StderrMode;

/// An async runtime as childwire needs it: a value, so a transport keeps the
/// runtime it was created on, and tests can run on a simulated clock.
///
/// Every reading of time in childwire goes through [`now`](Self::now), so a
/// runtime with a virtual clock (Tokio's paused time) is respected.
///
/// Implemented by `childwire-tokio`, `childwire-smol` and
/// `childwire-async-std`; implement it to run childwire on another runtime.
pub trait Runtime: Clone + fmt::Debug + Send + Sync + Unpin + 'static {
    /// The runtime of the calling context, or why there is none (for
    /// example, "a Tokio runtime" outside one). Transports call it before
    /// anything is spawned.
    fn current() -> Result<Self, NoRuntime>;

    /// The runtime's current time.
    fn now(&self) -> Instant;

    /// A timer that fires at `deadline`, and can be moved.
    fn timer(&self, deadline: Instant) -> Pin<Box<dyn Timer>>;

    /// Runs `task` in the background until it completes.
    fn spawn(&self, task: Pin<Box<dyn Future<Output = ()> + Send + 'static>>);

    /// Spawns `command` (stdin and stdout piped, stderr as `stderr` says,
    /// already set on it: runtimes whose command type forgets stdio set them
    /// again) and hands out its pipes and its exit.
    fn spawn_child(
        &self,
        command: std::process::Command,
        stderr: StderrMode,
    ) -> io::Result<SpawnedChild>;
}

/// A runtime's timer.
pub trait Timer: Send + Sync {
    /// Moves the deadline.
    fn reset(self: Pin<&mut Self>, deadline: Instant);

    /// Ready once the deadline has passed.
    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()>;
}

/// Why there is no runtime to spawn on: names the runtime that was needed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct NoRuntime(pub &'static str);

impl fmt::Display for NoRuntime {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "not called from within {}", self.0)
    }
}

impl std::error::Error for NoRuntime {}

/// The reading end of a byte stream (a child's stdout or stderr, a socket),
/// as a poll function.
pub trait PipeRead: Send + Unpin + 'static {
    /// Reads into `buf`; `Ok(0)` at EOF.
    fn poll_read(&mut self, cx: &mut Context<'_>, buf: &mut [u8]) -> Poll<io::Result<usize>>;
}

/// The writing end of a byte stream (a child's stdin, a socket), as poll
/// functions. Dropping it closes it.
pub trait PipeWrite: Send + Unpin + 'static {
    /// Writes from `buf`; how many bytes were taken.
    fn poll_write(&mut self, cx: &mut Context<'_>, buf: &[u8]) -> Poll<io::Result<usize>>;

    /// Flushes what was written.
    fn poll_flush(&mut self, cx: &mut Context<'_>) -> Poll<io::Result<()>>;

    /// Shuts the write direction down (a socket's half-close); dropping the
    /// pipe then closes it. The default does nothing.
    fn poll_shutdown(&mut self, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let _ = cx;
        Poll::Ready(Ok(()))
    }
}

/// A child just spawned: its PID, its pipes, and its exit.
pub struct SpawnedChild {
    /// The child's PID (its process group's too, with a group).
    pub pid: Option<u32>,
    /// Its stdin.
    pub stdin: Box<dyn PipeWrite>,
    /// Its stdout.
    pub stdout: Box<dyn PipeRead>,
    /// Its stderr, when piped.
    pub stderr: Option<Box<dyn PipeRead>>,
    /// Which pipes are the child's, so that whatever still holds them after
    /// its exit can be found ([`PipeIds::of`] on the parent's ends, before
    /// they are boxed). Empty if unknown: then only the process group (and a
    /// cgroup) is swept.
    pub pipes: PipeIds,
    /// Completes when the child has exited and been reaped. Dropping it
    /// before must not leave a zombie (the runtimes' process types reap in
    /// the background).
    pub exit: Pin<Box<dyn Future<Output = io::Result<ExitStatus>> + Send>>,
}

/// The identities of a child's pipes: for each, its inode number and
/// whether the child's end is the writing one. Processes holding one of
/// them (either end, in any access mode) are the child's (or escaped from
/// it) and are ended after its exit (Linux).
///
/// On Unix it also keeps a copy of the parent's end of each pipe the child
/// writes (stdout, stderr): after the exit, that copy tells with one `poll`
/// whether any writer is left, so the search for holders runs only when
/// something still holds them. The copies are read ends: they never keep
/// the child from seeing its stdin close. On Linux it keeps a watch on the
/// stdin pipe, through which the sweep asks after the exit whether a reader
/// is left (a copy of the host's write end until the host closes its end
/// while the child may still read, then a handle that is no end of it).
#[derive(Debug, Clone, Default)]
pub struct PipeIds {
    pub(crate) ids: Vec<(u64, bool)>,
    #[cfg(unix)]
    // Read by Linux's leftover check; elsewhere the copies only ride along.
    #[cfg_attr(not(target_os = "linux"), allow(dead_code))]
    pub(crate) watch: Vec<std::sync::Arc<std::os::fd::OwnedFd>>,
    /// The watch on the stdin pipe, if one could be taken.
    #[cfg(target_os = "linux")]
    pub(crate) stdin_watch: Option<crate::os::StdinWatch>,
}

/// Two `PipeIds` are equal when they name the same pipes.
impl PartialEq for PipeIds {
    fn eq(&self, other: &Self) -> bool {
        self.ids == other.ids
    }
}

impl Eq for PipeIds {}

impl PipeIds {
    /// The pipes of a child from the parent's ends of them: `stdin` (the
    /// child reads it) and the pipes it writes (`stdout`, `stderr`).
    /// Descriptors that cannot be inspected are left out.
    #[cfg(unix)]
    pub fn of<'a>(
        stdin: std::os::fd::BorrowedFd<'a>,
        written_by_child: impl IntoIterator<Item = std::os::fd::BorrowedFd<'a>>,
    ) -> Self {
        let inode = |fd| crate::sys::inode(fd).ok();
        let mut ids = Vec::with_capacity(3);
        let mut watch = Vec::with_capacity(2);
        ids.extend(inode(stdin).map(|ino| (ino, false)));
        // Taken from the host's own end, not from the child's descriptor
        // 0: no race with a child that replaces it, and no `fstat` to tell
        // that it is the same pipe.
        #[cfg(target_os = "linux")]
        let stdin_watch = crate::os::StdinWatch::new(stdin);
        for fd in written_by_child {
            let Some(ino) = inode(fd) else { continue };
            ids.push((ino, true));
            // A duplicate shares the open file: it sees the writers leave.
            if let Ok(copy) = fd.try_clone_to_owned() {
                watch.push(std::sync::Arc::new(copy));
            }
        }
        Self {
            ids,
            watch,
            #[cfg(target_os = "linux")]
            stdin_watch,
        }
    }

    /// The watch on the stdin pipe, for the host's end to say when it
    /// closes (Linux; elsewhere there is none).
    pub(crate) fn stdin_watch(&self) -> Option<crate::os::StdinWatch> {
        #[cfg(target_os = "linux")]
        {
            self.stdin_watch.clone()
        }
        #[cfg(not(target_os = "linux"))]
        {
            None
        }
    }
}

/// A runtime's just-spawned child's pipes, checked: stdin and stdout must
/// be there (childwire pipes both), and the ids of all of them are taken
/// for the sweep after the exit (on Unix; elsewhere there are none). For a
/// [`Runtime::spawn_child`]: `stderr` stays the caller's.
///
/// # Errors
///
/// If stdin or stdout was not piped.
#[cfg(unix)]
pub fn child_pipes<I, O, E>(
    stdin: Option<I>,
    stdout: Option<O>,
    stderr: Option<&E>,
) -> io::Result<(I, O, PipeIds)>
where
    I: std::os::fd::AsFd,
    O: std::os::fd::AsFd,
    E: std::os::fd::AsFd,
{
    use std::os::fd::AsFd;
    let (stdin, stdout) = (piped(stdin, "stdin")?, piped(stdout, "stdout")?);
    let pipes = PipeIds::of(
        stdin.as_fd(),
        std::iter::once(stdout.as_fd()).chain(stderr.map(AsFd::as_fd)),
    );
    Ok((stdin, stdout, pipes))
}

/// A runtime's just-spawned child's pipes, checked: stdin and stdout must
/// be there (childwire pipes both). Pipes are not told apart here, so
/// their ids are empty. For a [`Runtime::spawn_child`].
///
/// # Errors
///
/// If stdin or stdout was not piped.
#[cfg(not(unix))]
pub fn child_pipes<I, O, E>(
    stdin: Option<I>,
    stdout: Option<O>,
    stderr: Option<&E>,
) -> io::Result<(I, O, PipeIds)> {
    let _ = stderr;
    Ok((
        piped(stdin, "stdin")?,
        piped(stdout, "stdout")?,
        PipeIds::default(),
    ))
}

fn piped<T>(pipe: Option<T>, name: &str) -> io::Result<T> {
    pipe.ok_or_else(|| io::Error::other(format!("{name} not piped")))
}

impl fmt::Debug for SpawnedChild {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SpawnedChild")
            .field("pid", &self.pid)
            .finish_non_exhaustive()
    }
}
