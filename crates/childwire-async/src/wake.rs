//! A waker that wakes every task waiting on one resource, so several tasks
//! can poll the same pipe without stealing each other's wake-up.

use std::sync::{Arc, Mutex, PoisonError};
use std::task::{Wake, Waker};

/// The tasks waiting on one resource. Poll the resource with
/// [`waker`](Self::waker): its wake-up reaches every registered task.
#[derive(Debug, Default)]
pub(crate) struct WakeSet {
    wakers: Mutex<Wakers>,
}

/// The registered wakers. Rarely more than two wait on one resource (a
/// caller and the background task): those are kept in place, so a wait
/// and its wake-up allocate nothing.
#[derive(Debug, Default)]
struct Wakers {
    first: [Option<Waker>; 2],
    more: Vec<Waker>,
}

impl WakeSet {
    pub(crate) fn new() -> Arc<Self> {
        Arc::new(Self::default())
    }

    /// Adds `waker` (once) to the tasks woken next time.
    pub(crate) fn register(&self, waker: &Waker) {
        let mut wakers = self.wakers.lock().unwrap_or_else(PoisonError::into_inner);
        let Wakers { first, more } = &mut *wakers;
        if first
            .iter()
            .flatten()
            .chain(more.iter())
            .any(|w| w.will_wake(waker))
        {
            return;
        }
        match first.iter_mut().find(|slot| slot.is_none()) {
            Some(slot) => *slot = Some(waker.clone()),
            None => more.push(waker.clone()),
        }
    }

    /// Wakes and forgets every registered task.
    pub(crate) fn wake_all(&self) {
        // Taken out first: a task's wake-up may register it again.
        let (first, more) = {
            let mut wakers = self.wakers.lock().unwrap_or_else(PoisonError::into_inner);
            let first = [wakers.first[0].take(), wakers.first[1].take()];
            (first, std::mem::take(&mut wakers.more))
        };
        first.into_iter().flatten().for_each(Waker::wake);
        more.into_iter().for_each(Waker::wake);
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

/// A task's waker that counts its wake-ups, for this crate's unit tests.
#[cfg(test)]
#[derive(Debug, Default)]
pub(crate) struct Counting(pub(crate) std::sync::atomic::AtomicUsize);

#[cfg(test)]
impl Counting {
    /// How many times it was woken.
    pub(crate) fn count(&self) -> usize {
        self.0.load(std::sync::atomic::Ordering::SeqCst)
    }
}

#[cfg(test)]
impl Wake for Counting {
    fn wake(self: Arc<Self>) {
        self.0.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_registered_task_is_woken_once_then_forgotten() {
        let set = WakeSet::new();
        let tasks: Vec<Arc<Counting>> = (0..4).map(|_| Arc::default()).collect();
        let wakers: Vec<Waker> = tasks.iter().map(|t| Waker::from(Arc::clone(t))).collect();
        // Four tasks (two past the ones kept in place), one registered twice.
        for waker in wakers.iter().chain(&wakers[..1]) {
            set.register(waker);
        }
        fan_out(&set).wake_by_ref();
        let woken: Vec<usize> = tasks.iter().map(|t| t.count()).collect();
        assert_eq!(woken, [1, 1, 1, 1]);

        // Forgotten: a second wake-up reaches only who registered again.
        set.register(&wakers[2]);
        set.wake_all();
        let woken: Vec<usize> = tasks.iter().map(|t| t.count()).collect();
        assert_eq!(woken, [1, 1, 2, 1]);
    }
}
