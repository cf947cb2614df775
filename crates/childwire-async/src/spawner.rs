//! One long-lived thread that spawns the children whose life is tied to the
//! host's (Linux's parent-death signal).
//!
//! `PR_SET_PDEATHSIG` fires when the *thread* that forked the child exits,
//! not the process: a child spawned from a pool thread that is retired (a
//! runtime's blocking pool, a short-lived `std::thread`) would be killed
//! while the host lives on. This thread never exits before the process, so
//! the signal comes exactly when the host dies, however it dies.

use std::any::Any;
use std::io;
use std::panic::{AssertUnwindSafe, catch_unwind, resume_unwind};

use crate::handoff::handoff;
use crate::job_thread::{Job, JobThread};

/// What a job made, its type erased.
type Made = Box<dyn Any + Send>;

/// Runs `spawn` on the spawner thread and hands its result back; its panic
/// is resumed here, on the caller's thread.
///
/// Generic only in this wrapper: the channels and the thread are
/// [`run_erased`]'s, compiled once in this crate rather than in every
/// crate that names a runtime (in a Tokio user's program they were a
/// quarter of its code to compile, `std`'s channels for each result type).
pub(crate) fn run<T: Send + 'static>(spawn: impl FnOnce() -> T + Send + 'static) -> io::Result<T> {
    let made = run_erased(Box::new(move || Box::new(spawn()) as Made))?;
    made.downcast::<T>()
        .map(|made| *made)
        .map_err(|_| io::Error::other("the childwire spawner returned another type"))
}

fn run_erased(spawn: Box<dyn FnOnce() -> Made + Send>) -> io::Result<Made> {
    static SPAWNER: JobThread = JobThread::new("childwire-spawner");
    let (done, made) = handoff();
    let job: Job = Box::new(move || done.give(catch_unwind(AssertUnwindSafe(spawn))));
    SPAWNER
        .submit(job)
        .map_err(|_| io::Error::other("the childwire spawner thread cannot run"))?;
    match made.take(None) {
        Ok(Ok(made)) => Ok(made),
        Ok(Err(panic)) => resume_unwind(panic),
        Err(_) => Err(io::Error::other("the childwire spawner thread is gone")),
    }
}
