//! The sweeper thread (Linux): where the `/proc` scans run, one at a time,
//! each serving every sweep that waits when it starts.
//!
//! Many children ending together (a host dropping hundreds of transports,
//! a runtime shutting down) cost one scan, not one each. A sweep handed
//! over by a driver that stops ([`detach`]) is never waited for: the drop
//! goes on at once. One thread for the process, started at the first scan
//! and idle (blocked on a condition variable) between them.
//!
//! A driver never waits for a scan: [`start`] hands it over and returns a
//! [`Pending`], which the driver's task is woken to read after each pass
//! and once the result is in. How long the exit report waits for it is the
//! core's decision (its sweep deadline); a scan that chases a descendant
//! changing its PID may go on longer (up to [`CHASE`](super::linux::CHASE)),
//! and what it ends after the report is logged.

use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::{Arc, Condvar, Mutex, OnceLock, PoisonError};
use std::task::Waker;

use childwire_core::Swept;

use super::SweepState;
use super::linux::{self, Progress, Sweep};

/// The sweeps waiting for the thread. Whether a driver waits for one's
/// result is its `Progress`'s to say: a detached sweep is abandoned from
/// the start, and its result logged.
///
/// A lock and a condition variable because drivers on any thread hand
/// sweeps to the one sweeper thread. Off the data path: taken once per
/// sweep that has to scan `/proc` (a child that left something holding its
/// pipes), never per message, so no cost was measured for it.
static QUEUE: Mutex<Vec<Sweep>> = Mutex::new(Vec::new());
static QUEUED: Condvar = Condvar::new();
/// Whether the thread runs (it could not be started: scans run inline).
static STARTED: OnceLock<bool> = OnceLock::new();

fn started() -> bool {
    *STARTED.get_or_init(|| {
        crate::job_thread::spawn_named("childwire-sweeper", Box::new(serve))
            .map_err(|err| {
                crate::log::warn!("cannot start the sweeper thread ({err}); sweeps run in place")
            })
            .is_ok()
    })
}

/// A scan handed to the sweeper thread, as its driver sees it.
#[derive(Debug)]
pub(crate) struct Pending {
    progress: Arc<Progress>,
    /// Whether the pipes were held when the sweep began.
    pipes_held: bool,
}

impl Pending {
    /// Where the scan is now. Once it is done, dropping this hands what it
    /// ends later to the log.
    pub(crate) fn state(&self) -> SweepState {
        let so_far = || {
            let swept = self.progress.swept();
            Swept {
                ended: swept.ended,
                held_pipes: swept.held_pipes || self.pipes_held,
            }
        };
        match self.progress.over() {
            Some(false) => SweepState::Done(self.progress.swept()),
            None => SweepState::Running {
                so_far: so_far(),
                passed: self.progress.passed(),
            },
            // The scan panicked: what it ended before.
            Some(true) => SweepState::Done(so_far()),
        }
    }
}

impl Drop for Pending {
    /// What the scan ends from now on goes to the log.
    fn drop(&mut self) {
        self.progress.abandon();
    }
}

/// Hands `sweep`'s scan to the thread (shared with whatever others wait
/// then) and returns at once: `waker` is woken after each pass and once the
/// result is in. `pipes_held` (whether the pipes were held when the sweep
/// began) is part of every answer. Where the thread cannot run, the scan
/// runs here and its result comes back as `Err`.
pub(super) fn start(sweep: Sweep, pipes_held: bool, waker: &Waker) -> Result<Pending, Swept> {
    if !started() {
        return Err(inline(sweep));
    }
    let progress = sweep.progress();
    progress.wake_on_progress(waker);
    enqueue(sweep);
    Ok(Pending {
        progress,
        pipes_held,
    })
}

/// Hands `sweep` over to the thread and returns at once: what it ends is
/// logged, not reported.
pub(super) fn detach(sweep: Sweep) {
    if started() {
        sweep.progress().abandon();
        enqueue(sweep);
    } else {
        log(&inline(sweep));
    }
}

fn inline(sweep: Sweep) -> Swept {
    let mut sweeps = [sweep];
    linux::scan(&mut sweeps);
    sweeps[0].kill_group();
    sweeps[0].swept()
}

fn enqueue(sweep: Sweep) {
    QUEUE
        .lock()
        .unwrap_or_else(PoisonError::into_inner)
        .push(sweep);
    QUEUED.notify_one();
}

fn serve() {
    loop {
        let mut sweeps = {
            let mut queue = QUEUE.lock().unwrap_or_else(PoisonError::into_inner);
            while queue.is_empty() {
                queue = QUEUED.wait(queue).unwrap_or_else(PoisonError::into_inner);
            }
            std::mem::take(&mut *queue)
        };
        // A panic must not stop the thread: the callers would wait forever.
        // They are told the scan is over, with what it ended before.
        let panicked = catch_unwind(AssertUnwindSafe(|| {
            linux::scan(&mut sweeps);
            sweeps.iter().for_each(Sweep::kill_group);
        }))
        .is_err();
        if panicked {
            crate::log::error!("the sweep of /proc panicked");
        }
        for sweep in &sweeps {
            let progress = sweep.progress();
            // Nobody waits (detached, or its driver stopped): it is logged.
            if !progress.finish(panicked) {
                log(&sweep.swept());
            }
            progress.wake();
        }
    }
}

/// The result of a sweep nobody waits for (its driver stopped, or the
/// report was made without it): logged.
fn log(swept: &Swept) {
    if swept.ended > 0 {
        crate::log::warn!(
            "ended {} process(es) a child left behind, after its report was made",
            swept.ended
        );
    }
}
