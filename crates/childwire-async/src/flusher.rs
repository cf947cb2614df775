//! The background task of a channel over a pipe pair: it writes what
//! senders queued and left, and runs the write timeout. Nothing else needs
//! doing while no caller is there.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Instant;

use childwire_core::Framing;

use crate::link::{Link, lock};
use crate::runtime::{Runtime, Timer};

pub(crate) struct Flusher<R: Runtime, F: Framing> {
    link: Arc<Link<F>>,
    rt: R,
    timer: Option<(Instant, Pin<Box<dyn Timer>>)>,
}

impl<R: Runtime, F: Framing> Flusher<R, F> {
    pub(crate) fn new(link: Arc<Link<F>>, rt: R) -> Self {
        Self {
            link,
            rt,
            timer: None,
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
            let deadline = {
                let mut out = lock(&this.link.out);
                out.outbound.handle_timeout(now);
                // Only when there is work: bytes senders left to it (armed),
                // bytes a sender is writing, or sending ended (a stall's
                // close is made by the writer). Registered for the pipe's
                // wake-ups otherwise, this task would be woken by every write
                // a sender makes itself: a wake-up of another thread per
                // request.
                let has_work = out.flush_armed
                    || !out.outbound.is_drained()
                    || out.outbound.closed().is_some();
                let written = if has_work {
                    let written;
                    (out, written) = this.link.poll_write_queued(out, Some(cx.waker()), now);
                    written
                } else {
                    Poll::Ready(())
                };
                if !out.is_pipe_open() || (this.link.is_abandoned() && written.is_ready()) {
                    // Closed, or nobody is left and everything was written.
                    return Poll::Ready(());
                }
                out.outbound.poll_timeout()
            };
            let Some(deadline) = deadline else {
                this.timer = None;
                return Poll::Pending;
            };
            match &mut this.timer {
                Some((at, timer)) if *at != deadline => {
                    timer.as_mut().reset(deadline);
                    *at = deadline;
                }
                Some(_) => {}
                None => this.timer = Some((deadline, this.rt.timer(deadline))),
            }
            let (_, timer) = this.timer.as_mut().expect("armed above");
            if timer.as_mut().poll(cx).is_pending() {
                return Poll::Pending;
            }
        }
    }
}
