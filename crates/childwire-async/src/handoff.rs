//! One value handed from a thread to the one that waits for it: the
//! spawner's child, the login shell's environment.
//!
//! `std::sync::mpsc` would do, but each type sent through it compiles its
//! three channel kinds again: with four such types they were a sixth of this
//! crate's code to compile, in every cold build of a program that uses it
//! (`docs/performance.md`). This is a lock, a condition variable and a slot.

use std::sync::{Arc, Condvar, Mutex, MutexGuard, PoisonError};
use std::time::Instant;

/// A new hand-off: the giving end, for the thread that makes the value, and
/// the taking end, for the one that waits for it.
pub(crate) fn handoff<T>() -> (Giver<T>, Taker<T>) {
    let shared = Arc::new(Handoff {
        slot: Mutex::new(Slot::Empty),
        changed: Condvar::new(),
    });
    (Giver(Arc::clone(&shared)), Taker(shared))
}

struct Handoff<T> {
    /// The lock and condition variable are what a channel would have used;
    /// what pays for them instead of `mpsc` is the compile time above. Taken
    /// once per spawn with parent-death and per login-shell lookup.
    slot: Mutex<Slot<T>>,
    changed: Condvar,
}

enum Slot<T> {
    Empty,
    Full(T),
    /// Given, or the giver went without giving.
    Over,
}

impl<T> Handoff<T> {
    fn lock(&self) -> MutexGuard<'_, Slot<T>> {
        self.slot.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

/// The giving end. Dropped without [`give`](Self::give) (a panic, a job
/// that never ran), it tells the taker at once.
pub(crate) struct Giver<T>(Arc<Handoff<T>>);

impl<T> Giver<T> {
    pub(crate) fn give(self, value: T) {
        let mut slot = self.0.lock();
        if matches!(*slot, Slot::Empty) {
            *slot = Slot::Full(value);
        }
        drop(slot);
        self.0.changed.notify_all();
    }
}

impl<T> Drop for Giver<T> {
    fn drop(&mut self) {
        let mut slot = self.0.lock();
        if matches!(*slot, Slot::Empty) {
            *slot = Slot::Over;
            drop(slot);
            self.0.changed.notify_all();
        }
    }
}

/// The taking end.
pub(crate) struct Taker<T>(Arc<Handoff<T>>);

/// Why [`Taker::take`] has no value.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Missing {
    /// The giver went without giving.
    Gone,
    /// The deadline passed first.
    TimedOut,
}

impl<T> Taker<T> {
    /// Waits for the value until `deadline` (for ever with `None`).
    pub(crate) fn take(&self, deadline: Option<Instant>) -> Result<T, Missing> {
        let mut slot = self.0.lock();
        loop {
            match std::mem::replace(&mut *slot, Slot::Over) {
                Slot::Full(value) => return Ok(value),
                Slot::Over => return Err(Missing::Gone),
                Slot::Empty => *slot = Slot::Empty,
            }
            slot = match deadline {
                None => self
                    .0
                    .changed
                    .wait(slot)
                    .unwrap_or_else(PoisonError::into_inner),
                Some(deadline) => {
                    let left = deadline.saturating_duration_since(Instant::now());
                    if left.is_zero() {
                        return Err(Missing::TimedOut);
                    }
                    self.0
                        .changed
                        .wait_timeout(slot, left)
                        .unwrap_or_else(PoisonError::into_inner)
                        .0
                }
            };
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn a_value_given_on_another_thread_is_taken() {
        let (giver, taker) = handoff();
        let thread = std::thread::spawn(move || giver.give(7));
        let deadline = Instant::now() + Duration::from_secs(10);
        assert_eq!(taker.take(Some(deadline)), Ok(7));
        thread.join().expect("the giver");
        // Taken once: after it, the hand-off is over.
        assert_eq!(taker.take(Some(deadline)), Err(Missing::Gone));
    }

    #[test]
    fn a_giver_dropped_without_giving_ends_the_wait_at_once() {
        let (giver, taker) = handoff::<u8>();
        let thread = std::thread::spawn(move || drop(giver));
        // No deadline: a lost wake-up would hang here.
        assert_eq!(taker.take(None), Err(Missing::Gone));
        thread.join().expect("the giver");
    }

    #[test]
    fn nothing_given_by_the_deadline_is_a_timeout() {
        let (giver, taker) = handoff::<u8>();
        let deadline = Instant::now() + Duration::from_millis(20);
        assert_eq!(taker.take(Some(deadline)), Err(Missing::TimedOut));
        assert!(Instant::now() >= deadline);
        // Still given later.
        giver.give(1);
        assert_eq!(taker.take(None), Ok(1));
    }
}
