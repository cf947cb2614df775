//! The child's stderr lines as a stream, for callers who want them in their
//! own task rather than in a callback.

use std::collections::VecDeque;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll, Waker};

use bytes::Bytes;
use futures_core::Stream;

use crate::link::lock;

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
