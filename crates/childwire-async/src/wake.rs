//! A waker that wakes every task waiting on one resource, so several tasks
//! can poll the same pipe without stealing each other's wake-up.

use std::sync::{Arc, Mutex, PoisonError};
use std::task::{Wake, Waker};

/// The tasks waiting on one resource. Poll the resource with
/// [`waker`](Self::waker): its wake-up reaches every registered task.
#[derive(Debug, Default)]
pub(crate) struct WakeSet {
    wakers: Mutex<Vec<Waker>>,
}

impl WakeSet {
    pub(crate) fn new() -> Arc<Self> {
        Arc::new(Self::default())
    }

    /// Adds `waker` (once) to the tasks woken next time.
    pub(crate) fn register(&self, waker: &Waker) {
        let mut wakers = self.wakers.lock().unwrap_or_else(PoisonError::into_inner);
        if !wakers.iter().any(|w| w.will_wake(waker)) {
            wakers.push(waker.clone());
        }
    }

    /// Wakes and forgets every registered task.
    pub(crate) fn wake_all(&self) {
        let wakers =
            std::mem::take(&mut *self.wakers.lock().unwrap_or_else(PoisonError::into_inner));
        wakers.into_iter().for_each(Waker::wake);
    }
}

impl Wake for WakeSet {
    fn wake(self: Arc<Self>) {
        self.wake_all();
    }

    fn wake_by_ref(self: &Arc<Self>) {
        self.wake_all();
    }
}

/// The waker that wakes everyone in `set`, for polling a shared pipe.
pub(crate) fn fan_out(set: &Arc<WakeSet>) -> Waker {
    Waker::from(Arc::clone(set))
}
