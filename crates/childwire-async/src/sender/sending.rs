//! What [`Sender::send`] returns, written out as a future rather than an
//! `async fn`: a message is one `poll` that queues (and maybe writes) it
//! and returns, with nothing kept for the rare wait that follows a refusal
//! by the child's end.
//!
//! Measured (`cargo xtask bench`, row `send 200 B: childwire send().await`,
//! instructions per message, least of three runs, at 8c08d0a): 429.3 as an
//! `async fn` awaiting the attempt and then, on a refusal,
//! [`Sender::with_end`]; 387.3 as this future. The `async fn` kept the
//! attempt's result in its state across that second `.await` (written
//! there and copied out on every message), rebuilt the attempt's closure in
//! its state on every call, and `Transport::send` wrapped it in a state
//! machine of its own. The future for a `&str` payload is 40 bytes; it was
//! 248 (280 through `Transport::send`).

use std::future::{Future, poll_fn};
use std::pin::Pin;
use std::task::{Context, Poll};

use childwire_core::{ExitReport, Framing, ReportWait, SendError, SendErrorKind};

use super::Sender;
use crate::runtime::{Runtime, Timer};

/// The future of [`Sender::send`]: one message, checked, queued and maybe
/// written at its first poll; a refused one waits for the child's exit
/// report if the core says it comes.
pub(super) struct Sending<'a, R: Runtime, F: Framing, B> {
    sender: &'a Sender<R, F>,
    /// The message, until queued or refused.
    payload: Option<B>,
    /// The message was refused for want of room: see `Sender::poll_send`.
    refused_full: bool,
    /// A refusal by the child's end waiting for its report. Boxed: rare,
    /// and larger than the rest.
    ending: Option<Box<Ending<B>>>,
}

/// A send refused by the child's end, waiting for the exit report.
struct Ending<B> {
    err: SendError<B>,
    /// Fires when the core stops waiting; `None`: the report is certain.
    timer: Option<Pin<Box<dyn Timer>>>,
}

impl<'a, R: Runtime, F: Framing, B> Sending<'a, R, F, B> {
    pub(super) fn new(sender: &'a Sender<R, F>, payload: B) -> Self {
        Self {
            sender,
            payload: Some(payload),
            refused_full: false,
            ending: None,
        }
    }
}

// Nothing of it is pinned: the payload is moved out by value, never
// reached through a `Pin`, so it need not be `Unpin` itself.
impl<R: Runtime, F: Framing, B> Unpin for Sending<'_, R, F, B> {}

impl<R: Runtime, F: Framing, B: AsRef<[u8]>> Future for Sending<'_, R, F, B> {
    type Output = Result<(), SendError<B>>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let this = self.get_mut();
        if let Some(item) = this.payload.take() {
            let err = match this.sender.poll_send(cx, item, &mut this.refused_full) {
                Ok(Ok(())) => return Poll::Ready(Ok(())),
                Ok(Err(err)) => err,
                Err(item) => {
                    this.payload = Some(item);
                    return Poll::Pending;
                }
            };
            match this.sender.end_report(err.kind()) {
                EndReport::Now(report) => return Poll::Ready(Err(with_report(err, report))),
                EndReport::Wait(timer) => this.ending = Some(Box::new(Ending { err, timer })),
            }
        }
        let ending = this.ending.as_mut().expect("polled after completion");
        let kind = ending.err.kind();
        let report = std::task::ready!(this.sender.poll_end_report(cx, kind, &mut ending.timer));
        let Ending { err, .. } = *this.ending.take().expect("waited for above");
        Poll::Ready(Err(with_report(err, report)))
    }
}

/// How a send refused by the child's end gets the exit report.
enum EndReport {
    /// Now: the report, or `None` if it will not come.
    Now(Option<ExitReport>),
    /// It comes: wait for it, until this timer fires if there is one.
    Wait(Option<Pin<Box<dyn Timer>>>),
}

fn with_report<B>(err: SendError<B>, report: Option<ExitReport>) -> SendError<B> {
    match report {
        Some(report) => err.with_exit_report(report),
        None => err,
    }
}

impl<R: Runtime, F: Framing> Sender<R, F> {
    /// `err` with the child's exit report, if sending ended with the child:
    /// at once if it is known, after waiting for it if the core says it
    /// comes ([`Session::report_wait`](childwire_core::Session::report_wait)).
    pub(super) async fn with_end<B>(&self, err: SendError<B>) -> SendError<B> {
        let kind = err.kind();
        let report = match self.end_report(kind) {
            EndReport::Now(report) => report,
            EndReport::Wait(mut timer) => {
                poll_fn(|cx| self.poll_end_report(cx, kind, &mut timer)).await
            }
        };
        with_report(err, report)
    }

    /// Whether a send refused with `kind` gets an exit report, and when: the
    /// core's answer ([`Session::report_wait`](childwire_core::Session::report_wait)).
    fn end_report(&self, kind: SendErrorKind) -> EndReport {
        let SendErrorKind::Closed(closed) = kind else {
            return EndReport::Now(None);
        };
        // Under the lock: a report handed out was published under it too.
        let state = self.shared.lock();
        let wait = state.session.report_wait(closed, self.rt.now());
        drop(state);
        match wait {
            ReportWait::No => EndReport::Now(self.shared.exit.get()),
            ReportWait::Certain => EndReport::Wait(None),
            ReportWait::Until(deadline) => EndReport::Wait(Some(self.rt.timer(deadline))),
        }
    }

    /// The exit report once it is known; `None` if it will never come, or
    /// if the core says at its deadline that the wait is over. The timer
    /// only sends the question back to the core: a child that exited just
    /// before the deadline is waited for, as a send refused after its exit
    /// would wait (the report is certain, or the core names a later
    /// deadline).
    fn poll_end_report(
        &self,
        cx: &mut Context<'_>,
        kind: SendErrorKind,
        timer: &mut Option<Pin<Box<dyn Timer>>>,
    ) -> Poll<Option<ExitReport>> {
        if let Poll::Ready(report) = self.shared.exit.poll_report(cx.waker()) {
            return Poll::Ready(report);
        }
        let expired = timer
            .as_mut()
            .is_some_and(|timer| timer.as_mut().poll(cx).is_ready());
        if !expired {
            return Poll::Pending;
        }
        match self.end_report(kind) {
            EndReport::Now(report) => Poll::Ready(report),
            // A later deadline: the core waits on until then.
            EndReport::Wait(later) => {
                *timer = later;
                self.poll_end_report(cx, kind, timer)
            }
        }
    }
}
