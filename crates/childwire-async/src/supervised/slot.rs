//! What the receiving side of a [`Supervised`](super::Supervised) shares
//! with its senders: the core's [`Generations`] and the running
//! generation's sender (none while the child is down or initializing).

use std::collections::VecDeque;
use std::future::poll_fn;
use std::sync::{Arc, Mutex, MutexGuard};
use std::task::{Poll, Waker};
use std::time::Instant;

use childwire_core::{
    AfterSend, Closed, ExitReport, Framing, Generations, SendError, SendErrorKind, SendStep,
};

use super::{SupervisedEvent, event_of};
use crate::runtime::Runtime;
use crate::sync::lock;
use crate::transport::{Sender, ShutdownError};

/// The state behind one lock, never held across an await.
pub(super) struct State<R: Runtime, F: Framing> {
    /// Restart, request tracking and re-sending: every decision.
    pub(super) core: Generations,
    /// The running generation's sender, published once it is initialized;
    /// `None` while the child is down. In an `Arc`: a send takes it out of
    /// the lock with a reference count, where cloning a `Sender` would
    /// also lock its transport when the clone is dropped.
    pub(super) sender: Option<Arc<Sender<R, F>>>,
    /// Events made here (a failed spawn), handed out before the core's.
    events: VecDeque<SupervisedEvent>,
    /// Tasks waiting for a new generation, the end, or a stop.
    waiters: Vec<Waker>,
}

pub(super) struct Shared<R: Runtime, F: Framing> {
    /// One lock a send takes twice (before and after its transport's send)
    /// on top of the transport's. Measured for the lock before request
    /// tracking moved in: 57 CPU instructions per send for the lock, the
    /// checks and the `Arc` count (callgrind, the same `Mutex<Option<Arc<_>>>`
    /// pattern alone, 100,000 vs 200,000 calls), against 400 for
    /// `Sender::send` itself; uncontended unless a send meets a restart.
    state: Mutex<State<R, F>>,
    /// The framing and its size limit, to refuse a payload it cannot carry
    /// before the tracker records it.
    framing: F,
    max_send_size: usize,
}

impl<R: Runtime, F: Framing> Shared<R, F> {
    pub(super) fn new(core: Generations, framing: F, max_send_size: usize) -> Arc<Self> {
        Arc::new(Self {
            state: Mutex::new(State {
                core,
                sender: None,
                events: VecDeque::new(),
                waiters: Vec::new(),
            }),
            framing,
            max_send_size,
        })
    }

    pub(super) fn lock(&self) -> MutexGuard<'_, State<R, F>> {
        lock(&self.state)
    }

    pub(super) fn running_sender(&self) -> Option<Arc<Sender<R, F>>> {
        self.lock().sender.clone()
    }

    /// The next event for `recv`: made here, then the core's.
    pub(super) fn poll_event(&self) -> Option<SupervisedEvent> {
        let mut state = self.lock();
        state
            .events
            .pop_front()
            .or_else(|| state.core.poll_event().map(event_of))
    }
}

impl<R: Runtime, F: Framing> State<R, F> {
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

    pub(super) fn push_event(&mut self, event: SupervisedEvent) {
        self.events.push_back(event);
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
    /// [`Sender::send`], once it is initialized. While the child is down it
    /// waits for the next generation (up to the write timeout, if one is
    /// set) or fails, as [`WhileDown`](childwire_core::WhileDown) says; after
    /// the verdict or a shutdown it fails with the last exit report.
    ///
    /// With request tracking on, a request is recorded before it is sent: if
    /// its generation dies first, the error response
    /// ([`SupervisedEvent::Unanswered`]) is its answer and the send returns
    /// `Ok`; if the send failed before that death was known, the request is
    /// sent again to the next generation. Either way it is answered once.
    pub async fn send<B: AsRef<[u8]>>(&self, payload: B) -> Result<(), SendError<B>> {
        if let Err(kind) = self
            .shared
            .framing
            .check(payload.as_ref(), self.shared.max_send_size)
        {
            return Err(SendError::new(SendErrorKind::Invalid(kind), payload));
        }
        let mut payload = payload;
        // When this send was first told to wait: the core counts its wait
        // from there.
        let mut waiting_since = None;
        loop {
            let (step, sender, now) = {
                let mut state = self.shared.lock();
                let now = self.rt.now();
                let step = state.core.handle_send(payload.as_ref(), now, waiting_since);
                if matches!(step, SendStep::Wait { .. }) && state.core.restart_due(now) {
                    // A send woke an idle child: `recv` starts it.
                    state.wake_all();
                }
                (step, state.sender.clone(), now)
            };
            match step {
                SendStep::Send { ticket, .. } => {
                    let Some(sender) = sender else {
                        // Published with the generation: cannot be missing.
                        let _ = self
                            .shared
                            .lock()
                            .core
                            .handle_sent(ticket, Err(Closed::Exited));
                        continue;
                    };
                    let result = sender.send(payload).await;
                    let closed = match &result {
                        Ok(()) => Ok(()),
                        Err(err) => match err.kind() {
                            SendErrorKind::Closed(closed) => Err(closed),
                            _ => Err(Closed::Closing),
                        },
                    };
                    let after = self.shared.lock().core.handle_sent(ticket, closed);
                    match (result, after) {
                        (Ok(()), _) | (Err(_), AfterSend::Done) => return Ok(()),
                        (Err(err), AfterSend::Retry) => payload = err.into_payload(),
                        (Err(err), AfterSend::Fail) => return Err(self.listed(&sender, err)),
                    }
                }
                SendStep::Wait { after, until } => {
                    waiting_since.get_or_insert(now);
                    self.next_generation(after, until).await;
                }
                SendStep::Refuse(closed, report) => {
                    return Err(refused(closed, payload, report.map(|r| *r)));
                }
            }
        }
    }

    /// Waits until there is something to ask the core again: a generation
    /// after `seen` runs, the supervision is over or stopped, or `until`
    /// came. The core's answer to the last is the refusal.
    async fn next_generation(&self, seen: u32, until: Option<Instant>) {
        let mut timer = until.map(|at| self.rt.timer(at));
        poll_fn(|cx| {
            let mut state = self.shared.lock();
            let started = state.core.running().is_some_and(|running| running > seen);
            if started || state.core.is_over() || state.core.is_stopped() {
                return Poll::Ready(());
            }
            state.register(cx.waker());
            drop(state);
            match timer.as_mut() {
                Some(timer) => timer.as_mut().poll(cx),
                None => Poll::Pending,
            }
        })
        .await;
    }

    /// `err` with the requests still waiting listed in its exit report, if
    /// it has one.
    fn listed<B>(&self, sender: &Arc<Sender<R, F>>, err: SendError<B>) -> SendError<B> {
        let Some(report) = err.exit_report() else {
            return err;
        };
        let mut report = report.clone();
        self.list_unanswered(sender, &mut report);
        err.with_exit_report(report)
    }

    /// `report`, the end of the generation `sender` sends to, learnt by a
    /// shutdown or a refused send, lists the requests never answered as the
    /// report `recv` hands out does: while that generation runs, the ones
    /// still waiting; once `recv` read its end, that report's list.
    fn list_unanswered(&self, sender: &Arc<Sender<R, F>>, report: &mut ExitReport) {
        let state = self.shared.lock();
        let running = state
            .sender
            .as_ref()
            .is_some_and(|running| Arc::ptr_eq(running, sender));
        if running {
            report.unanswered_ids = state.core.pending_ids();
        } else if let Some(last) = state.core.last_report() {
            report.unanswered_ids.clone_from(&last.unanswered_ids);
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
        let (sender, last) = self.stop();
        match sender {
            Some(sender) => {
                let mut report = sender.shutdown().await?;
                self.list_unanswered(&sender, &mut report);
                Ok(report)
            }
            None => last.ok_or(ShutdownError::NoChild),
        }
    }

    /// Ends the supervision like [`shutdown`](Self::shutdown), closing the
    /// running child's stdin ([`Sender::close`]); its end, which is not
    /// restarted, comes through `recv`.
    pub async fn close(&self) -> Result<(), ShutdownError> {
        match self.stop().0 {
            Some(sender) => sender.close().await,
            None => Ok(()),
        }
    }

    fn stop(&self) -> (Option<Arc<Sender<R, F>>>, Option<ExitReport>) {
        let mut state = self.shared.lock();
        state.core.handle_stop();
        state.wake_all();
        (state.sender.clone(), state.core.last_report().cloned())
    }
}

fn refused<B>(closed: Closed, payload: B, report: Option<ExitReport>) -> SendError<B> {
    let err = SendError::new(SendErrorKind::Closed(closed), payload);
    match report {
        Some(report) => err.with_exit_report(report),
        None => err,
    }
}
