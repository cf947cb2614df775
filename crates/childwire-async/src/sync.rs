//! The small pieces every part of the transport's machinery shares: how a
//! lock is taken, where the background task's waker is kept, its timer,
//! and a cache line of one's own. A leaf: it uses no other module of the
//! crate.

use std::ops::Deref;
use std::pin::Pin;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::task::{Context, Waker};
use std::time::Instant;

use crate::runtime::{Runtime, Timer};

/// Takes `mutex`. A panic elsewhere while holding a lock leaves these
/// states consistent (their own methods keep them so): go on with them.
pub(crate) fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(PoisonError::into_inner)
}

/// `T` on cache lines of its own: aligned to (and so padded to a multiple
/// of) the line size, so that writes to its neighbours do not invalidate
/// it. 128 bytes where a core fetches lines in pairs (x86-64's adjacent-line
/// prefetcher) or has 128-byte lines (Apple's and other big ARM cores,
/// POWER), 256 on s390x, 64 elsewhere: crossbeam's `CachePadded`, which is
/// all this crate used of it, for the targets childwire runs on.
#[cfg_attr(
    any(
        target_arch = "x86_64",
        target_arch = "aarch64",
        target_arch = "arm64ec",
        target_arch = "powerpc64",
    ),
    repr(align(128))
)]
#[cfg_attr(target_arch = "s390x", repr(align(256)))]
#[cfg_attr(
    not(any(
        target_arch = "x86_64",
        target_arch = "aarch64",
        target_arch = "arm64ec",
        target_arch = "powerpc64",
        target_arch = "s390x",
    )),
    repr(align(64))
)]
pub(crate) struct CachePadded<T>(T);

impl<T> CachePadded<T> {
    pub(crate) const fn new(value: T) -> Self {
        Self(value)
    }
}

impl<T> Deref for CachePadded<T> {
    type Target = T;

    fn deref(&self) -> &T {
        &self.0
    }
}

/// Where the background task's waker is kept, for whoever has work for it.
/// A lock taken only to wake that task, not per message: 173 times for
/// 65,536 messages of the `send().await` row (counted under callgrind when
/// the layer was made lean, this session's issue 26 work).
pub(crate) type BgWaker = Arc<Mutex<Option<Waker>>>;

/// Wakes the background task, if it was polled yet.
pub(crate) fn wake_bg(bg: &BgWaker) {
    if let Some(waker) = lock(bg).as_ref() {
        waker.wake_by_ref();
    }
}

/// The background task's one timer, moved to each new deadline.
#[derive(Default)]
pub(crate) struct Deadline {
    timer: Option<(Instant, Pin<Box<dyn Timer>>)>,
}

impl Deadline {
    /// Arms the timer for `at` (none: disarmed); `true` if it already
    /// passed.
    pub(crate) fn poll<R: Runtime>(
        &mut self,
        rt: &R,
        at: Option<Instant>,
        cx: &mut Context<'_>,
    ) -> bool {
        let Some(at) = at else {
            self.timer = None;
            return false;
        };
        let (armed, timer) = self.timer.get_or_insert_with(|| (at, rt.timer(at)));
        if *armed != at {
            timer.as_mut().reset(at);
            *armed = at;
        }
        timer.as_mut().poll(cx).is_ready()
    }
}
