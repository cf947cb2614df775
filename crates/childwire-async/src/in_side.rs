//! The receiving half and the reading pipe: read in the caller's task
//! (`recv`), or by the background task after the child's exit.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::task::{Context, Poll, Waker};

use childwire_core::{Frame, Framing, Inbound};

use crate::runtime::PipeRead;
use crate::wake::{WakeSet, fan_out};

/// One read's worth: what a Linux pipe holds.
const READ_CHUNK: usize = 64 * 1024;

/// The receiving half, the reading pipe, and the end of the stream.
pub(crate) struct InSide<F: Framing> {
    pub(crate) inbound: Inbound<F>,
    pipe: Option<Box<dyn PipeRead>>,
    buf: Box<[u8]>,
    /// Where the stream is, after its last frame.
    pub(crate) end: StreamEnd,
    /// Tasks waiting for frames, the report, or the pipe.
    waiters: Arc<WakeSet>,
    pipe_waker: Waker,
}

/// Where the stream is, after its last frame.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum StreamEnd {
    /// Frames may come.
    Open,
    /// The child's report (in the link's exit slot) is the receiver's next
    /// item.
    ReportDue,
    /// Nothing more: the report or the end of a channel's stream was
    /// delivered, or the task driving the child stopped without a report.
    Over,
}

/// What one attempt to read brought.
pub(crate) enum ReadOutcome {
    /// Frames may be waiting.
    Progress,
    /// The pipe reached EOF (or failed): the supervisor's input. Frames
    /// may be waiting (a last line without its `\n`).
    Eof,
    /// Nothing to read now; the waiter is registered.
    Pending,
    /// No more reading: EOF seen, the pipe gone, or the queue at its bound.
    Stopped,
}

impl<F: Framing> InSide<F> {
    pub(crate) fn new(inbound: Inbound<F>, pipe: Box<dyn PipeRead>) -> Self {
        let waiters = WakeSet::new();
        Self {
            inbound,
            pipe: Some(pipe),
            buf: vec![0; READ_CHUNK].into_boxed_slice(),
            end: StreamEnd::Open,
            pipe_waker: fan_out(&waiters),
            waiters,
        }
    }

    pub(crate) fn wait(&self, waker: &Waker) {
        self.waiters.register(waker);
    }

    pub(crate) fn wake_waiters(&self) {
        self.waiters.wake_all();
    }

    /// Reads once and decodes what came, within the receive bound; each
    /// read that brought bytes counts one of the peer's `turns`.
    pub(crate) fn read_once(&mut self, waiter: &Waker, turns: &AtomicU64) -> ReadOutcome {
        if !self.inbound.wants_read() {
            return ReadOutcome::Stopped;
        }
        let Some(pipe) = self.pipe.as_mut() else {
            return ReadOutcome::Stopped;
        };
        self.waiters.register(waiter);
        let pipe_waker = self.pipe_waker.clone();
        let mut cx = Context::from_waker(&pipe_waker);
        match pipe.poll_read(&mut cx, &mut self.buf) {
            Poll::Ready(Ok(n)) if n > 0 => {
                turns.fetch_add(1, Ordering::Relaxed);
                self.inbound.handle_data(&self.buf[..n]);
                ReadOutcome::Progress
            }
            Poll::Ready(result) => {
                if let Err(err) = result {
                    tracing::warn!("reading from the peer failed: {err}");
                }
                self.pipe = None;
                self.inbound.handle_eof();
                ReadOutcome::Eof
            }
            Poll::Pending => ReadOutcome::Pending,
        }
    }

    /// Reading is stopped by the receive bound alone: the pipe may hold
    /// more, to read once the caller makes room.
    pub(crate) fn is_held_back(&self) -> bool {
        self.pipe.is_some() && !self.inbound.wants_read() && !self.inbound.is_eof()
    }

    /// The next frame for the caller, and whether taking it made room
    /// below the receive bound.
    pub(crate) fn take_frame(&mut self) -> (Option<Frame>, bool) {
        let held_back = self.is_held_back();
        let frame = self.inbound.poll_received();
        (frame, held_back && self.inbound.wants_read())
    }

    /// Stops reading: the pipe is dropped (a grandchild may still hold it).
    pub(crate) fn stop_reading(&mut self) {
        self.pipe = None;
    }
}
