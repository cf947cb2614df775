//! What the receiving side of a [`Supervised`](super::Supervised) shares
//! with its senders: the running generation's sender (none while the child
//! is down), whether the caller ended the supervision, and the in-flight
//! requests.

use std::future::poll_fn;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::task::{Poll, Waker};
use std::time::Duration;

use childwire_core::pending::{Outgoing, PendingRequests};
use childwire_core::{Closed, ExitReport, Framing, SendError, SendErrorKind};

use super::config::WhileDown;
use crate::runtime::Runtime;
use crate::transport::{Sender, ShutdownError};

/// The state behind one lock. Lock order: never held across an await.
pub(super) struct Slot<R: Runtime, F: Framing> {
    /// The running generation's sender, published once it is
    /// re-initialized; `None` while the child is down. In an `Arc`: a send
    /// takes it out of the lock with a reference count, where cloning a
    /// `Sender` would also lock its queue when the clone is dropped.
    pub(super) sender: Option<Arc<Sender<R, F>>>,
    /// Bumped each time a generation is published.
    pub(super) generation: u32,
    /// The caller asked for the end (shutdown or close): no restart.
    pub(super) stopped: bool,
    /// No generation will come any more (stopped, or the verdict).
    pub(super) over: bool,
    /// The last generation's report, for sends refused while down.
    pub(super) last_report: Option<ExitReport>,
    /// In-flight requests, when tracking is on.
    pub(super) pending: Option<PendingRequests>,
    /// Tasks waiting for a new generation, the end, or a stop.
    waiters: Vec<Waker>,
}

pub(super) struct Shared<R: Runtime, F: Framing> {
    /// One lock a send takes once (twice with request tracking) on top of
    /// the transport's. Measured: 57 CPU instructions per send for the
    /// lock, the checks and the `Arc` count (callgrind, the same
    /// `Mutex<Option<Arc<_>>>` pattern alone, 100,000 vs 200,000 calls),
    /// against 405 for `Sender::send` itself (docs/performance.md), and
    /// 20-30 ns of wall time; uncontended unless a send meets a restart.
    slot: Mutex<Slot<R, F>>,
    pub(super) while_down: WhileDown,
    /// How long a send waits for the next generation.
    pub(super) wait_limit: Option<Duration>,
}

impl<R: Runtime, F: Framing> Shared<R, F> {
    pub(super) fn new(
        sender: Arc<Sender<R, F>>,
        while_down: WhileDown,
        wait_limit: Option<Duration>,
        track: bool,
    ) -> Arc<Self> {
        Arc::new(Self {
            slot: Mutex::new(Slot {
                sender: Some(sender),
                generation: 1,
                stopped: false,
                over: false,
                last_report: None,
                pending: track.then(PendingRequests::default),
                waiters: Vec::new(),
            }),
            while_down,
            wait_limit,
        })
    }

    pub(super) fn lock(&self) -> MutexGuard<'_, Slot<R, F>> {
        self.slot.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

impl<R: Runtime, F: Framing> Slot<R, F> {
    pub(super) fn register(&mut self, waker: &Waker) {
        if !self.waiters.iter().any(|w| w.will_wake(waker)) {
            self.waiters.push(waker.clone());
        }
    }

    pub(super) fn wake_all(&mut self) {
        for waker in self.waiters.drain(..) {
            waker.wake();
        }
    }

    /// `report`, the end of the generation `sender` sends to, learnt by a
    /// shutdown or a refused send, lists the requests never answered as
    /// the report `recv` hands out does. Before `recv` reads that end (and
    /// fails them, at the stream's end, where an answer the child wrote
    /// before it ended has been read) they are the requests still waiting;
    /// after, its report's list.
    pub(super) fn list_unanswered(&self, sender: &Arc<Sender<R, F>>, report: &mut ExitReport) {
        let Some(pending) = &self.pending else {
            return;
        };
        let running = self
            .sender
            .as_ref()
            .is_some_and(|running| Arc::ptr_eq(running, sender));
        if running {
            report.unanswered_ids = pending.ids();
        } else if let Some(last) = &self.last_report {
            report.unanswered_ids.clone_from(&last.unanswered_ids);
        }
    }
}

/// The sending side of a [`Supervised`](super::Supervised): sends to
/// whichever generation is running. Clone it to send from several tasks.
pub struct SupervisedSender<R: Runtime, F: Framing> {
    pub(super) shared: Arc<Shared<R, F>>,
    pub(super) rt: R,
}

impl<R: Runtime, F: Framing> Clone for SupervisedSender<R, F> {
    fn clone(&self) -> Self {
        Self {
            shared: Arc::clone(&self.shared),
            rt: self.rt.clone(),
        }
    }
}

impl<R: Runtime, F: Framing> std::fmt::Debug for SupervisedSender<R, F> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SupervisedSender").finish_non_exhaustive()
    }
}

impl<R: Runtime, F: Framing> SupervisedSender<R, F> {
    /// Sends one message to the running generation, like
    /// [`Sender::send`]. While the child is down it waits for the next
    /// generation or fails, as [`WhileDown`] says; after the verdict or a
    /// shutdown it fails with the last exit report.
    ///
    /// With request tracking on, a request is recorded before it is sent,
    /// and forgotten again if the send fails.
    pub async fn send<B: AsRef<[u8]>>(&self, payload: B) -> Result<(), SendError<B>> {
        let mut payload = payload;
        let mut deadline = None;
        loop {
            let (sender, generation) = {
                let slot = self.shared.lock();
                if slot.over || slot.stopped {
                    let closed = if slot.stopped {
                        Closed::Closing
                    } else {
                        Closed::Exited
                    };
                    return Err(refused(closed, payload, slot.last_report.clone()));
                }
                (slot.sender.clone(), slot.generation)
            };
            if let Some(sender) = sender {
                let tracked = self.track(payload.as_ref());
                match sender.send(payload).await {
                    Ok(()) => return Ok(()),
                    Err(err) => {
                        let err = err.map_payload(|body| {
                            if tracked {
                                self.untrack(body.as_ref());
                            }
                            body
                        });
                        let down = matches!(err.kind(), SendErrorKind::Closed(_));
                        if !down || self.shared.while_down == WhileDown::Fail {
                            return Err(self.listed(&sender, err));
                        }
                        payload = err.into_payload();
                    }
                }
            } else if self.shared.while_down == WhileDown::Fail {
                let last = self.shared.lock().last_report.clone();
                return Err(refused(Closed::Exited, payload, last));
            }
            let now = self.rt.now();
            let deadline = *deadline.get_or_insert_with(|| {
                self.shared
                    .wait_limit
                    .and_then(|limit| now.checked_add(limit))
            });
            if !self.next_generation(generation, deadline).await {
                let last = self.shared.lock().last_report.clone();
                return Err(refused(Closed::Exited, payload, last));
            }
        }
    }

    /// Waits until a generation after `seen` is published (true), or the
    /// supervision is over or `deadline` passed (false).
    async fn next_generation(&self, seen: u32, deadline: Option<std::time::Instant>) -> bool {
        let mut timer = deadline.map(|at| self.rt.timer(at));
        poll_fn(|cx| {
            let mut slot = self.shared.lock();
            if slot.generation != seen && slot.sender.is_some() {
                return Poll::Ready(true);
            }
            if slot.over || slot.stopped {
                return Poll::Ready(false);
            }
            slot.register(cx.waker());
            drop(slot);
            let expired = timer
                .as_mut()
                .is_some_and(|timer| timer.as_mut().poll(cx).is_ready());
            if expired {
                Poll::Ready(false)
            } else {
                Poll::Pending
            }
        })
        .await
    }

    /// `err` with the requests still waiting listed in its exit report,
    /// if it has one.
    fn listed<B>(&self, sender: &Arc<Sender<R, F>>, err: SendError<B>) -> SendError<B> {
        let Some(report) = err.exit_report() else {
            return err;
        };
        let mut report = report.clone();
        self.shared.lock().list_unanswered(sender, &mut report);
        err.with_exit_report(report)
    }

    /// Records an outgoing request; whether it is tracked, to forget it
    /// if the send fails.
    fn track(&self, body: &[u8]) -> bool {
        self.shared
            .lock()
            .pending
            .as_mut()
            .is_some_and(|pending| pending.handle_outgoing(body) == Outgoing::Tracked)
    }

    /// The send of `body`, tracked, failed: its request is forgotten.
    fn untrack(&self, body: &[u8]) {
        if let Some(pending) = self.shared.lock().pending.as_mut() {
            pending.handle_unsent(body);
        }
    }

    /// Ends the supervision: no restart from now on. The running child is
    /// shut down the MCP way ([`Sender::shutdown`]) and its report
    /// returned; while it is down, the last generation's report is.
    ///
    /// With request tracking on, the report lists the requests still
    /// waiting for their answer, as the one `recv` hands out lists those
    /// never answered (that one is read to the stream's end: an answer the
    /// child wrote before it ended, still on its way here, counts there).
    pub async fn shutdown(&self) -> Result<ExitReport, ShutdownError> {
        let stopped = self.stop();
        match stopped.sender {
            Some(sender) => {
                let mut report = sender.shutdown().await?;
                self.shared.lock().list_unanswered(&sender, &mut report);
                Ok(report)
            }
            None => stopped.last.ok_or(ShutdownError::NoChild),
        }
    }

    /// Ends the supervision like [`shutdown`](Self::shutdown), closing the
    /// running child's stdin ([`Sender::close`]); its end, which is not
    /// restarted, comes through `recv`.
    pub async fn close(&self) -> Result<(), ShutdownError> {
        match self.stop().sender {
            Some(sender) => sender.close().await,
            None => Ok(()),
        }
    }

    fn stop(&self) -> Stopped<R, F> {
        let mut slot = self.shared.lock();
        slot.stopped = true;
        slot.wake_all();
        Stopped {
            sender: slot.sender.clone(),
            last: slot.last_report.clone(),
        }
    }
}

/// What a shutdown or close finds when it ends the supervision.
struct Stopped<R: Runtime, F: Framing> {
    /// The running generation's sender; `None` while the child is down.
    sender: Option<Arc<Sender<R, F>>>,
    /// The last generation's report.
    last: Option<ExitReport>,
}

fn refused<B>(closed: Closed, payload: B, report: Option<ExitReport>) -> SendError<B> {
    let err = SendError::new(SendErrorKind::Closed(closed), payload);
    match report {
        Some(report) => err.with_exit_report(report),
        None => err,
    }
}
