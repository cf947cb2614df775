//! The child's exit report for code that handed its transport away: an MCP
//! SDK owns the transport, the host keeps an [`ExitHandle`] to learn how the
//! server ended. Runtime-independent, so every SDK adapter shares it.

use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::task::{Context, Poll};

use bytes::Bytes;
use childwire_core::ExitReport;

use crate::wake::WakeSet;

/// Where a transport records its child's end, once it learns it (from
/// `Sender::shutdown` or `Received::Exited`). The transport owns it;
/// [`handle`](Self::handle) gives the handles it hands out. Dropping it
/// without a report tells the waiting handles the end will stay unknown.
///
/// ```
/// use std::time::Duration;
/// use childwire_async::{EndedBy, Exit, ExitReport, ExitSlot};
///
/// let slot = ExitSlot::new(); // in the transport
/// let handle = slot.handle(); // given to the host
/// assert!(handle.get().is_none());
/// let report = ExitReport::new(Exit::Code(0), EndedBy::StdinClose, Duration::from_millis(12));
/// slot.set(report.clone()); // the transport learned the child's end
/// drop(slot); // the SDK dropped the transport
/// assert_eq!(handle.get(), Some(report));
/// ```
pub struct ExitSlot {
    shared: Arc<Shared>,
    /// Whether dropping this slot closes it. A slot handed out by a
    /// transport ([`Sender::exit_slot`](crate::Sender::exit_slot)) does
    /// not: the transport fills it, and closes it only when it stops
    /// without learning the end.
    owner: bool,
}

/// A handle to a child's [`ExitReport`], taken before the transport is
/// handed to a client (an MCP SDK's service). Clone it freely.
///
/// The report is there once the child ended: when the transport was closed
/// (the graceful shutdown), or when the child exited on its own and the
/// transport read its end.
///
/// ```
/// use childwire_async::ExitHandle;
///
/// // In the host, on any runtime, after handing the transport away.
/// async fn report_end(exit: ExitHandle) {
///     match exit.wait().await {
///         Some(report) => println!("server {report}"),
///         None => println!("server: its end is unknown"),
///     }
/// }
/// ```
#[derive(Clone)]
pub struct ExitHandle {
    shared: Arc<Shared>,
}

#[derive(Default)]
struct Shared {
    state: Mutex<State>,
    /// The tasks in [`ExitHandle::wait`].
    waiters: WakeSet,
}

#[derive(Default)]
struct State {
    report: Option<ExitReport>,
    /// The slot is gone: no report will come if there is none.
    closed: bool,
    /// The ids of the requests the child's end left unanswered, from
    /// [`ExitSlot::set_unanswered_ids`]: listed in the report, whichever
    /// path recorded it.
    unanswered: Option<Vec<Bytes>>,
}

impl State {
    /// Records `report`, with the unanswered ids known.
    fn record(&mut self, mut report: ExitReport) {
        if let Some(ids) = &self.unanswered {
            report.unanswered_ids.clone_from(ids);
        }
        self.report = Some(report);
    }
}

impl Shared {
    fn state(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

impl ExitSlot {
    /// A slot with no report yet.
    pub fn new() -> Self {
        Self {
            shared: Arc::default(),
            owner: true,
        }
    }

    /// Another slot on the same record, whose drop does not close it.
    pub(crate) fn follower(&self) -> Self {
        Self {
            shared: Arc::clone(&self.shared),
            owner: false,
        }
    }

    /// No report will come: waiting handles get `None`.
    pub(crate) fn close(&self) {
        self.shared.state().closed = true;
        self.shared.waiters.wake_all();
    }

    /// Registers `waker` for the report, or returns it if it is known; `None`
    /// once the slot was closed without one.
    pub(crate) fn poll_report(&self, waker: &std::task::Waker) -> Poll<Option<ExitReport>> {
        Self::poll_shared(&self.shared, waker)
    }

    fn poll_shared(shared: &Shared, waker: &std::task::Waker) -> Poll<Option<ExitReport>> {
        // Registered before looking, so a report set in between wakes us.
        shared.waiters.register(waker);
        let state = shared.state();
        match (&state.report, state.closed) {
            (Some(report), _) => Poll::Ready(Some(report.clone())),
            (None, true) => Poll::Ready(None),
            (None, false) => Poll::Pending,
        }
    }

    /// A handle that sees the report this slot records.
    pub fn handle(&self) -> ExitHandle {
        ExitHandle {
            shared: Arc::clone(&self.shared),
        }
    }

    /// Records the child's end and wakes the waiting handles. A child ends
    /// once: the first report recorded stays.
    pub fn set(&self, report: ExitReport) {
        {
            let mut state = self.shared.state();
            if state.report.is_some() {
                return;
            }
            state.record(report);
        }
        self.shared.waiters.wake_all();
    }

    /// The requests the child's end left unanswered (their ids as raw JSON
    /// text, in the order sent; see
    /// [`PendingRequests`](childwire_core::pending::PendingRequests)): the
    /// report lists them, whether it is recorded already or later, by this
    /// slot or by the transport. A later call replaces the list: an
    /// adapter that lists the requests still waiting when it learns the
    /// end early (a shutdown) gives the final list once it read the end.
    ///
    /// ```
    /// use std::time::Duration;
    /// use bytes::Bytes;
    /// use childwire_async::{EndedBy, Exit, ExitReport, ExitSlot};
    ///
    /// let slot = ExitSlot::new();
    /// slot.set(ExitReport::new(Exit::Code(0), EndedBy::StdinClose, Duration::from_millis(12)));
    /// slot.set_unanswered_ids(vec![Bytes::from_static(b"7")]);
    /// assert_eq!(slot.handle().get().unwrap().unanswered_ids, [&b"7"[..]]);
    /// ```
    pub fn set_unanswered_ids(&self, ids: Vec<Bytes>) {
        let mut state = self.shared.state();
        if let Some(report) = &mut state.report {
            report.unanswered_ids.clone_from(&ids);
        }
        state.unanswered = Some(ids);
    }

    /// The report, if the child's end is known yet.
    pub fn get(&self) -> Option<ExitReport> {
        self.shared.state().report.clone()
    }
}

impl Default for ExitSlot {
    fn default() -> Self {
        Self::new()
    }
}

impl Drop for ExitSlot {
    fn drop(&mut self) {
        if self.owner {
            self.close();
        }
    }
}

impl fmt::Debug for ExitSlot {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_tuple("ExitSlot").field(&self.get()).finish()
    }
}

impl ExitHandle {
    /// The report, if the child's end is known yet; never waits.
    #[doc(alias = "try_wait")]
    pub fn get(&self) -> Option<ExitReport> {
        self.shared.state().report.clone()
    }

    /// Waits for the report. `None` if the transport was dropped without
    /// learning the child's end (dropped unclosed: the child was killed).
    /// The future borrows nothing: it can be spawned, or outlive the handle.
    pub fn wait(&self) -> impl Future<Output = Option<ExitReport>> + Send + use<> {
        Wait {
            shared: Arc::clone(&self.shared),
        }
    }
}

impl fmt::Debug for ExitHandle {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_tuple("ExitHandle").field(&self.get()).finish()
    }
}

/// [`ExitHandle::wait`]'s future.
struct Wait {
    shared: Arc<Shared>,
}

impl Future for Wait {
    type Output = Option<ExitReport>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        ExitSlot::poll_shared(&self.shared, cx.waker())
    }
}

#[cfg(test)]
mod tests {
    use std::task::Waker;

    use std::time::Duration;

    use childwire_core::{EndedBy, Exit};

    use super::*;
    use crate::wake::Counting;

    fn poll(
        future: &mut Pin<Box<impl Future<Output = Option<ExitReport>>>>,
        count: &Arc<Counting>,
    ) -> Poll<Option<ExitReport>> {
        let waker = Waker::from(Arc::clone(count));
        future.as_mut().poll(&mut Context::from_waker(&waker))
    }

    fn report_of(code: i32) -> ExitReport {
        ExitReport::new(
            Exit::Code(code),
            EndedBy::OnItsOwn,
            Duration::from_millis(5),
        )
    }

    fn report() -> ExitReport {
        report_of(0)
    }

    /// A wait on `handle`, polled once: pending, its waker registered.
    fn waiting(
        handle: &ExitHandle,
    ) -> (
        Pin<Box<impl Future<Output = Option<ExitReport>> + use<>>>,
        Arc<Counting>,
    ) {
        let count = Arc::new(Counting::default());
        let mut wait = Box::pin(handle.wait());
        assert!(poll(&mut wait, &count).is_pending());
        (wait, count)
    }

    #[test]
    fn a_waiter_is_woken_by_the_report_and_gets_it() {
        let slot = ExitSlot::new();
        let handle = slot.handle();
        let (mut wait, count) = waiting(&handle);
        slot.set(report());
        assert_eq!(count.count(), 1);
        assert_eq!(poll(&mut wait, &count), Poll::Ready(Some(report())));
        assert_eq!(handle.get(), Some(report()));
    }

    #[test]
    fn dropping_the_slot_unreported_ends_the_wait_with_none() {
        let slot = ExitSlot::new();
        let (mut wait, count) = waiting(&slot.handle());
        drop(slot);
        assert_eq!(count.count(), 1);
        assert_eq!(poll(&mut wait, &count), Poll::Ready(None));
    }

    #[test]
    fn the_unanswered_ids_reach_the_report_recorded_before_or_after_and_the_last_list_stays() {
        let ids = |list: &[&'static [u8]]| -> Vec<bytes::Bytes> {
            list.iter()
                .map(|id| bytes::Bytes::from_static(id))
                .collect()
        };
        let slot = ExitSlot::new();
        slot.set_unanswered_ids(ids(&[b"1", b"2"]));
        slot.set(report());
        assert_eq!(slot.get().unwrap().unanswered_ids, ids(&[b"1", b"2"]));
        // The final list, once the end was read, replaces the early one.
        slot.set_unanswered_ids(ids(&[b"2"]));
        assert_eq!(slot.handle().get().unwrap().unanswered_ids, ids(&[b"2"]));
    }

    #[test]
    fn a_known_report_outlives_the_slot_and_the_first_one_stays() {
        let slot = ExitSlot::new();
        let handle = slot.handle();
        slot.set(report());
        slot.set(report_of(1));
        drop(slot);
        let count = Arc::new(Counting::default());
        assert_eq!(
            poll(&mut Box::pin(handle.wait()), &count),
            Poll::Ready(Some(report()))
        );
    }
}
