//! Where the child's stderr lines go besides the tail: as a stream, for
//! callers who want them in their own task rather than in a callback, and
//! onto this process's stderr, marked with the program's name
//! ([`StderrMode::Show`], the default).

use std::collections::VecDeque;
use std::io::Write;
use std::path::Path;
use std::pin::Pin;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll, Waker};

use bytes::Bytes;
use childwire_core::{Command, StderrLine, StderrMode};
use futures_core::Stream;

use crate::job_thread::{Job, JobThread};
use crate::sync::lock;

/// A function that receives each line the child writes to stderr (without
/// its line terminator), with stderr captured. It runs on the background
/// task: keep it short. If it panics it is not called again, the transport
/// goes on, and the exit report says so.
pub type StderrCallback = Arc<dyn Fn(&[u8]) + Send + Sync>;

/// The callback a child's transport calls with each stderr line: with
/// [`StderrMode::Show`], each line is written to this process's stderr
/// first, then handed to the caller's callback (if any); otherwise the
/// caller's callback alone.
///
/// Shown lines take the SDKs' way (rmcp, the TypeScript and Python SDKs
/// let the child write to the host's stderr) rather than `tracing`'s: a
/// host that installed no subscriber, or one at its default level, would
/// show nothing, which is the silence this default is there to end.
/// Unlike a shared stderr, the tail is still kept for the exit report and
/// each line says which server wrote it.
pub(crate) fn with_shown(
    command: &Command,
    callback: Option<StderrCallback>,
) -> Option<StderrCallback> {
    shown_into(command, callback, |shown| HOST_STDERR.show(shown))
}

/// [`with_shown`], writing each shown line with `write`.
fn shown_into(
    command: &Command,
    callback: Option<StderrCallback>,
    write: fn(Vec<u8>),
) -> Option<StderrCallback> {
    if command.get_stderr() != StderrMode::Show {
        return callback;
    }
    let program = command.get_program();
    let name = Path::new(program)
        .file_name()
        .unwrap_or(program)
        .to_string_lossy();
    let prefix = format!("[{name}] ").into_bytes();
    Some(Arc::new(move |line: &[u8]| {
        write(marked(&prefix, line));
        if let Some(callback) = &callback {
            callback(line);
        }
    }))
}

/// How many bytes of shown lines may wait for this process's stderr while
/// it takes nothing: beyond that, new lines are not shown (they are still
/// in the tail), and a note says how many were not.
const SHOWN_PENDING: usize = 1024 * 1024;

/// Where the shown lines of every child go: this process's stderr.
static HOST_STDERR: HostStderr = HostStderr {
    queued: AtomicUsize::new(0),
    dropped: AtomicU64::new(0),
};

/// The thread that writes the shown lines stderr did not take at once.
static STDERR_WRITER: JobThread = JobThread::new("childwire-stderr");

/// This process's stderr as the shown lines reach it. A line is written on
/// the spot, by the child's background task, when nothing waits before it
/// and stderr takes it without blocking: in order with the host's own
/// writes, and out before the exit report. Otherwise it goes to a thread
/// of its own, so that a stderr nobody reads (a pipe whose reader
/// stopped) blocks that thread and never the background task, which also
/// reads the child's messages: with the line written there, such a host
/// stopped receiving once its stderr pipe was full, and the child once
/// its own stderr pipe was. On Windows, which cannot ask a pipe whether it
/// takes a write now, lines to a pipe always go to the thread.
///
/// The atomics are the bound of what waits for the thread, shared by every
/// child's task without a lock: `queued` bytes handed over and not yet
/// written, `dropped` lines not shown since the last one written. What
/// pays for them is a hang, not a speed: `stderr-host tokio show` with a
/// 20,000-line server and its own stderr unread gave no exit report in
/// 10 s when the task wrote each line, and gives it at once now
/// (`c09_a_host_whose_stderr_nobody_reads_still_gets_the_report`); they
/// are touched once per shown line, never per message.
struct HostStderr {
    queued: AtomicUsize,
    dropped: AtomicU64,
}

impl HostStderr {
    /// Shows `line` (marked, with its newline).
    fn show(&'static self, line: Vec<u8>) {
        if self.queued.load(Ordering::Acquire) == 0 && takes_now(line.len()) {
            self.write(&line);
            return;
        }
        let len = line.len();
        if !self.admit(len) {
            return;
        }
        let job: Job = Box::new(move || {
            self.write(&line);
            self.queued.fetch_sub(len, Ordering::AcqRel);
        });
        if let Err(job) = STDERR_WRITER.submit(job) {
            // No thread: written here, as on Windows.
            job();
        }
    }

    /// Counts a line of `len` bytes as waiting for the thread if there is
    /// room (one line always goes in: a stderr line is bounded by the
    /// transport's line limit); else counts it as not shown. Whether it
    /// was taken.
    fn admit(&self, len: usize) -> bool {
        let before = self.queued.fetch_add(len, Ordering::AcqRel);
        if before > 0 && before + len > SHOWN_PENDING {
            self.queued.fetch_sub(len, Ordering::AcqRel);
            self.dropped.fetch_add(1, Ordering::Relaxed);
            return false;
        }
        true
    }

    /// Writes `line` to this process's stderr: see [`write_into`](Self::write_into).
    fn write(&self, line: &[u8]) {
        self.write_into(&mut std::io::stderr().lock(), line);
    }

    /// Writes `line` to `out`, after a note of the lines not shown before
    /// it, if any. A failed write (a closed stderr) is ignored: the lines
    /// are still in the tail.
    fn write_into(&self, out: &mut impl Write, line: &[u8]) {
        let dropped = self.dropped.swap(0, Ordering::Relaxed);
        if dropped > 0 {
            let _ = writeln!(
                out,
                "[childwire] {dropped} stderr line(s) of child processes not shown: this process's stderr took nothing for a while"
            );
        }
        let _ = out.write_all(line);
    }
}

/// Whether this process's stderr takes `len` bytes now without blocking.
#[cfg(unix)]
fn takes_now(len: usize) -> bool {
    crate::sys::stderr_takes(len)
}

/// Windows cannot ask a pipe whether a write would wait: written on the
/// spot to a console or a file, which take it, and by the thread to a
/// pipe, whose reader may never read.
#[cfg(windows)]
fn takes_now(_len: usize) -> bool {
    crate::os::stderr_is_console_or_file()
}

/// Elsewhere: written on the spot.
#[cfg(not(any(unix, windows)))]
fn takes_now(_len: usize) -> bool {
    true
}

/// `prefix`, `line` and a newline in one buffer, written in one call so
/// that lines from several children (or the host's own) never mix.
fn marked(prefix: &[u8], line: &[u8]) -> Vec<u8> {
    let mut shown = Vec::with_capacity(prefix.len() + line.len() + 1);
    shown.extend_from_slice(prefix);
    shown.extend_from_slice(line);
    shown.push(b'\n');
    shown
}

/// What the stream holds when its reader falls behind: the oldest lines are
/// dropped first, and counted.
pub const STDERR_LINES_PENDING: usize = 1024 * 1024;

#[derive(Default)]
struct Shared {
    lines: VecDeque<Bytes>,
    bytes: usize,
    dropped: u64,
    /// The writing side (the transport's callback) is gone: the stream ends
    /// once drained.
    closed: bool,
    waker: Option<Waker>,
}

/// The child's stderr lines, each without its line terminator, in order,
/// ending when the transport is done with stderr. From
/// [`Config::stderr_stream`](crate::Config::stderr_stream).
///
/// Bounded: if the reader falls more than [`STDERR_LINES_PENDING`] bytes
/// behind, the oldest lines are dropped and counted
/// ([`dropped`](Self::dropped)); the child never waits for it.
pub struct StderrLines {
    shared: Arc<Mutex<Shared>>,
}

impl StderrLines {
    /// Lines dropped so far because the reader fell behind.
    pub fn dropped(&self) -> u64 {
        lock(&self.shared).dropped
    }

    /// The next line, or `None` once stderr is over.
    pub async fn next_line(&mut self) -> Option<Bytes> {
        std::future::poll_fn(|cx| Pin::new(&mut *self).poll_next(cx)).await
    }

    /// The next line with its level, or `None` once stderr is over: the
    /// level a JSON-lines log (`level`, `lvl`, `severity`, pino's numbers)
    /// or a prefix (`INFO:`, `[warn]`, `npm ERR!`) names, the raw line
    /// kept. Stderr is where servers log: most lines are not errors.
    ///
    /// ```no_run
    /// # async fn demo<R: childwire_async::Runtime>() -> Result<(), Box<dyn std::error::Error>> {
    /// use childwire_async::{Command, Config, Transport};
    /// use childwire_core::stderr_level::Level;
    ///
    /// let mut config = Config::default();
    /// let mut stderr = config.stderr_stream();
    /// let server = Transport::<R>::spawn(&Command::new("npx"), config)?;
    /// while let Some(line) = stderr.next_leveled().await {
    ///     let text = String::from_utf8_lossy(line.raw());
    ///     match line.level() {
    ///         Some(level) if level >= Level::Error => eprintln!("server error: {text}"),
    ///         _ => eprintln!("server: {text}"),
    ///     }
    /// }
    /// # Ok(()) }
    /// ```
    pub async fn next_leveled(&mut self) -> Option<StderrLine> {
        self.next_line().await.map(StderrLine::new)
    }
}

impl std::fmt::Debug for StderrLines {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("StderrLines").finish_non_exhaustive()
    }
}

impl Stream for StderrLines {
    type Item = Bytes;

    fn poll_next(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Bytes>> {
        let mut shared = lock(&self.shared);
        if let Some(line) = shared.lines.pop_front() {
            shared.bytes -= line.len();
            return Poll::Ready(Some(line));
        }
        if shared.closed {
            return Poll::Ready(None);
        }
        shared.waker = Some(cx.waker().clone());
        Poll::Pending
    }
}

/// The transport's end: a line in, the reader woken. Dropped with the
/// transport's callback, which ends the stream.
pub(crate) struct LineSink {
    shared: Arc<Mutex<Shared>>,
}

impl LineSink {
    pub(crate) fn push(&self, line: &[u8]) {
        let mut shared = lock(&self.shared);
        shared.lines.push_back(Bytes::copy_from_slice(line));
        shared.bytes += line.len();
        while shared.bytes > STDERR_LINES_PENDING && shared.lines.len() > 1 {
            if let Some(old) = shared.lines.pop_front() {
                shared.bytes -= old.len();
                shared.dropped += 1;
            }
        }
        if let Some(waker) = shared.waker.take() {
            waker.wake();
        }
    }
}

impl Drop for LineSink {
    fn drop(&mut self) {
        let mut shared = lock(&self.shared);
        shared.closed = true;
        if let Some(waker) = shared.waker.take() {
            waker.wake();
        }
    }
}

/// A connected pair.
pub(crate) fn pair() -> (LineSink, StderrLines) {
    let shared = Arc::new(Mutex::new(Shared::default()));
    (
        LineSink {
            shared: Arc::clone(&shared),
        },
        StderrLines { shared },
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    /// What the test sink was given.
    static WRITTEN: Mutex<Vec<u8>> = Mutex::new(Vec::new());

    #[test]
    fn lines_beyond_the_bound_are_not_shown_and_the_next_one_written_says_how_many() {
        let stderr = HostStderr {
            queued: AtomicUsize::new(0),
            dropped: AtomicU64::new(0),
        };
        // One line always goes in, however long; then only what fits.
        assert!(stderr.admit(SHOWN_PENDING + 1));
        assert!(!stderr.admit(1));
        stderr.queued.store(SHOWN_PENDING - 10, Ordering::Relaxed);
        assert!(stderr.admit(10));
        assert!(!stderr.admit(1));
        assert!(!stderr.admit(1));
        let mut out = Vec::new();
        stderr.write_into(&mut out, b"[server] next\n");
        stderr.write_into(&mut out, b"[server] after\n");
        assert_eq!(
            String::from_utf8(out).unwrap(),
            "[childwire] 3 stderr line(s) of child processes not shown: this process's stderr took nothing for a while\n[server] next\n[server] after\n"
        );
    }

    #[test]
    fn a_shown_line_is_marked_with_the_program_and_ends_its_line() {
        assert_eq!(
            marked(b"[npx] ", b"Starting server"),
            b"[npx] Starting server\n"
        );
        assert_eq!(marked(b"[npx] ", b""), b"[npx] \n");
    }

    #[test]
    fn only_the_show_mode_adds_the_shown_line_and_the_callback_still_runs() {
        let calls = Arc::new(Mutex::new(0));
        let counted = Arc::clone(&calls);
        let callback: StderrCallback = Arc::new(move |_: &[u8]| *lock(&counted) += 1);
        let sink = |shown: Vec<u8>| lock(&WRITTEN).extend_from_slice(&shown);
        let mut command = Command::new("/usr/local/bin/server");
        for quiet in [
            StderrMode::Capture,
            StderrMode::Inherit,
            StderrMode::Discard,
        ] {
            command.stderr(quiet);
            let same = shown_into(&command, Some(Arc::clone(&callback)), sink).expect("kept");
            assert!(Arc::ptr_eq(&same, &callback), "{quiet:?}: the caller's own");
            assert!(shown_into(&command, None, sink).is_none(), "{quiet:?}");
        }
        command.stderr(StderrMode::Show);
        shown_into(&command, Some(callback), sink).expect("a callback")(b"listening");
        shown_into(&command, None, sink).expect("a callback")(b"ready");
        assert_eq!(*lock(&calls), 1, "the caller's callback still runs");
        assert_eq!(*lock(&WRITTEN), b"[server] listening\n[server] ready\n");
    }
}
