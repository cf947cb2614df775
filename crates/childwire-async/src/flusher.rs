//! The background task of a channel over a pipe pair: it writes what
//! senders queued and left, and runs the write timeout. Nothing else needs
//! doing while no caller is there.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use childwire_core::Framing;

use crate::link::Link;
use crate::runtime::Runtime;
use crate::sync::{Deadline, lock};

pub(crate) struct Flusher<R: Runtime, F: Framing> {
    link: Arc<Link<F>>,
    rt: R,
    timer: Deadline,
}

impl<R: Runtime, F: Framing> Flusher<R, F> {
    pub(crate) fn new(link: Arc<Link<F>>, rt: R) -> Self {
        Self {
            link,
            rt,
            timer: Deadline::default(),
        }
    }
}

impl<R: Runtime, F: Framing> Future for Flusher<R, F> {
    type Output = ();

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        let this = self.get_mut();
        this.link.set_bg_waker(cx.waker());
        loop {
            let now = this.rt.now();
            let mut out = lock(&this.link.out);
            out.outbound.handle_timeout(now);
            // Only when there is work: bytes senders left to it (armed),
            // bytes a sender is writing, or sending ended (a stall's close
            // is made by the writer). Registered for the pipe's wake-ups
            // otherwise, this task would be woken by every write a sender
            // makes itself: a wake-up of another thread per request.
            let mut written = Poll::Ready(());
            if out.flush_armed || !out.outbound.is_drained() || out.outbound.closed().is_some() {
                (out, written) = this.link.out.poll_write_queued(out, Some(cx.waker()), now);
            }
            if !out.is_pipe_open() || (this.link.is_abandoned() && written.is_ready()) {
                // Closed, or nobody is left and everything was written.
                return Poll::Ready(());
            }
            let deadline = out.outbound.poll_timeout();
            drop(out);
            if !this.timer.poll(&this.rt, deadline, cx) {
                return Poll::Pending;
            }
        }
    }
}
