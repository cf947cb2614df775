//! Wakers for the pipes: one that wakes every task waiting on one resource,
//! so several tasks can poll the same pipe without stealing each other's
//! wake-up; and one that marks a pipe the background task polls as worth
//! polling again.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::task::{Wake, Waker};

#[cfg(test)]
use std::sync::atomic::AtomicUsize;

use crate::sync::BgWaker;

/// The tasks waiting on one resource. Poll the resource with
/// [`fan_out`]'s waker: its wake-up reaches every registered task.
///
/// A plain mutex: taken once per read or per batch written, not per
/// message (counted under callgrind at 7a69531, 65,536 messages of
/// 200 B: the `send().await` row takes it 177 times, the `recv()` row 401
/// times), so a lock-free set would buy nothing measurable.
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
    /// A wake-up came while no task was registered: one that registers
    /// just after waiting on the resource may have missed it.
    missed: bool,
}

impl WakeSet {
    pub(crate) fn new() -> Arc<Self> {
        Arc::new(Self::default())
    }

    /// Adds `waker` (once) to the tasks woken next time, for a task that
    /// registers before polling the resource, or that decided to wait
    /// under a lock its wake-up's cause must take: a wake-up that found
    /// no one before is of no concern to it, and is forgotten.
    pub(crate) fn register(&self, waker: &Waker) {
        self.register_after_wait(waker);
    }

    /// Adds `waker` (once) to the tasks woken next time, for a task that
    /// polled the resource before registering: returns whether a wake-up
    /// came while no task was registered since the last registration,
    /// which that task may have missed (it then polls again).
    pub(crate) fn register_after_wait(&self, waker: &Waker) -> bool {
        let mut wakers = self.wakers.lock().unwrap_or_else(PoisonError::into_inner);
        let Wakers {
            first,
            more,
            missed,
        } = &mut *wakers;
        let missed = std::mem::take(missed);
        if first
            .iter()
            .flatten()
            .chain(more.iter())
            .any(|w| same_task(w, waker))
        {
            return missed;
        }
        match first.iter_mut().find(|slot| slot.is_none()) {
            Some(slot) => *slot = Some(waker.clone()),
            None => more.push(waker.clone()),
        }
        missed
    }

    /// Wakes and forgets every registered task.
    pub(crate) fn wake_all(&self) {
        // Taken out first: a task's wake-up may register it again.
        let (first, more) = {
            let mut wakers = self.wakers.lock().unwrap_or_else(PoisonError::into_inner);
            let first = [wakers.first[0].take(), wakers.first[1].take()];
            let more = std::mem::take(&mut wakers.more);
            wakers.missed = first.iter().all(Option::is_none) && more.is_empty();
            (first, more)
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

/// Whether `a` and `b` wake the same task.
///
/// `will_wake` alone is not enough here: it compares the vtables' addresses,
/// and a runtime whose vtable is a constant in generic code can hand out a
/// clone with another copy of it (Tokio's `block_on` waker does: same data,
/// same functions, another address). A task polled again before its wake-up
/// (a `select!` loop, a pipe that never makes it wait) would then be added
/// once more on every poll, and the set would grow without bound. Equal
/// data and equal functions wake the same task, so that counts as the same.
fn same_task(a: &Waker, b: &Waker) -> bool {
    a.will_wake(b) || (a.data() == b.data() && *a.vtable() == *b.vtable())
}

/// Whether a pipe the background task polls may have something: its
/// waker marks it and wakes the task. The task polls the pipe only when
/// marked, not on every round: on `async-io`, a read that finds nothing is
/// a system call and a re-registration with the reactor.
#[derive(Debug)]
pub(crate) struct Readiness {
    ready: AtomicBool,
    task: BgWaker,
}

impl Readiness {
    /// Marked at first: a pipe is polled once before it is waited on.
    pub(crate) fn new(task: BgWaker) -> Arc<Self> {
        Arc::new(Self {
            ready: AtomicBool::new(true),
            task,
        })
    }

    /// Whether to poll the pipe now; clears the mark, which the pipe's
    /// waker (or [`mark`](Self::mark)) sets again.
    pub(crate) fn take(&self) -> bool {
        self.ready.swap(false, Ordering::AcqRel)
    }

    /// Polls again next round: the pipe gave something, and more may be
    /// there without a wake-up.
    pub(crate) fn mark(&self) {
        self.ready.store(true, Ordering::Release);
    }
}

impl Wake for Readiness {
    fn wake(self: Arc<Self>) {
        self.wake_by_ref();
    }

    fn wake_by_ref(self: &Arc<Self>) {
        self.mark();
        if let Some(task) = self
            .task
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .as_ref()
        {
            task.wake_by_ref();
        }
    }
}

/// The waker that wakes everyone in `set`, for polling a shared pipe.
pub(crate) fn fan_out(set: &Arc<WakeSet>) -> Waker {
    Waker::from(Arc::clone(set))
}

/// A task's waker that counts its wake-ups, for this crate's unit tests.
#[cfg(test)]
#[derive(Debug, Default)]
pub(crate) struct Counting(pub(crate) AtomicUsize);

#[cfg(test)]
impl Counting {
    /// How many times it was woken.
    pub(crate) fn count(&self) -> usize {
        self.0.load(Ordering::SeqCst)
    }
}

#[cfg(test)]
impl Wake for Counting {
    fn wake(self: Arc<Self>) {
        self.0.fetch_add(1, Ordering::SeqCst);
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

    #[test]
    fn a_wake_up_that_found_no_one_is_told_to_the_next_registration_once() {
        let set = WakeSet::new();
        let task = Arc::new(Counting::default());
        let waker = Waker::from(Arc::clone(&task));
        assert!(!set.register_after_wait(&waker), "nothing came yet");
        set.wake_all();
        assert_eq!(task.count(), 1);

        // The resource woke the set while the task was away (it had polled
        // the resource and not registered yet): its registration hears it.
        set.wake_all();
        assert!(set.register_after_wait(&waker), "the wake-up it missed");
        assert!(!set.register_after_wait(&waker), "told once");
        set.wake_all();
        assert_eq!(task.count(), 2, "and it is registered");
    }

    #[test]
    fn a_pipe_is_polled_again_only_once_its_waker_said_so() {
        let task = Arc::new(Counting::default());
        let slot = BgWaker::default();
        *slot.lock().expect("slot") = Some(Waker::from(Arc::clone(&task)));
        let ready = Readiness::new(slot);
        let pipe_waker = Waker::from(Arc::clone(&ready));

        assert!(ready.take(), "polled once before any wait");
        assert!(!ready.take(), "it said nothing since: not polled");
        assert_eq!(task.count(), 0);

        pipe_waker.wake_by_ref();
        assert_eq!(task.count(), 1, "the task is woken");
        assert!(ready.take(), "and polls the pipe");
        assert!(!ready.take());

        // The pipe gave something: poll again without a wake-up.
        ready.mark();
        assert!(ready.take());
    }

    /// A waker whose clones carry another copy of its vtable (same
    /// functions, another address), as Tokio's `block_on` waker's do; waking
    /// it counts in `WOKEN`.
    mod copied_vtable {
        use std::sync::atomic::{AtomicUsize, Ordering};
        use std::task::{RawWaker, RawWakerVTable, Waker};

        pub(super) static WOKEN: AtomicUsize = AtomicUsize::new(0);

        fn clone(data: *const ()) -> RawWaker {
            RawWaker::new(data, &CLONED)
        }

        fn wake(_: *const ()) {
            WOKEN.fetch_add(1, Ordering::SeqCst);
        }

        fn drop(_: *const ()) {}

        static ORIGINAL: RawWakerVTable = RawWakerVTable::new(clone, wake, wake, drop);
        static CLONED: RawWakerVTable = RawWakerVTable::new(clone, wake, wake, drop);

        pub(super) fn waker() -> Waker {
            #[allow(unsafe_code)]
            // SAFETY: the functions ignore the data pointer, and every
            // `RawWakerVTable` contract holds for functions that do nothing
            // but count.
            unsafe {
                Waker::from_raw(RawWaker::new(std::ptr::null(), &ORIGINAL))
            }
        }
    }

    #[test]
    fn a_task_registering_again_before_its_wake_up_is_kept_once_even_when_its_clones_differ() {
        let set = WakeSet::new();
        let waker = copied_vtable::waker();
        assert!(
            !waker.clone().will_wake(&waker),
            "the clone's vtable is another copy"
        );
        for _ in 0..1000 {
            set.register(&waker);
        }
        {
            let wakers = set.wakers.lock().unwrap();
            let held = wakers.first.iter().flatten().count() + wakers.more.len();
            assert_eq!(held, 1, "one task, one entry");
        }
        set.wake_all();
        assert_eq!(copied_vtable::WOKEN.load(Ordering::SeqCst), 1);
    }
}
