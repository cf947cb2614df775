//! The sweeper thread (Linux): where the `/proc` scans run, one at a time,
//! each serving every sweep that waits when it starts.
//!
//! Many children ending together (a host dropping hundreds of transports,
//! a runtime shutting down) cost one scan, not one each. A sweep handed
//! over by a driver that stops ([`detach`]) is never waited for: the drop
//! goes on at once. One thread for the process, started at the first scan
//! and idle (blocked on a condition variable) between them.

use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::mpsc;
use std::sync::{Condvar, Mutex, OnceLock, PoisonError};

use childwire_core::Swept;

use super::linux::{self, Sweep};

struct Job {
    sweep: Sweep,
    /// Where the caller waits for the result; `None` for a detached sweep.
    reply: Option<mpsc::Sender<Swept>>,
}

static QUEUE: Mutex<Vec<Job>> = Mutex::new(Vec::new());
static QUEUED: Condvar = Condvar::new();
/// Whether the thread runs (it could not be started: scans run inline).
static STARTED: OnceLock<bool> = OnceLock::new();

fn started() -> bool {
    *STARTED.get_or_init(|| {
        std::thread::Builder::new()
            .name("childwire-sweeper".into())
            .spawn(serve)
            .map_err(|err| {
                tracing::warn!("cannot start the sweeper thread ({err}); sweeps run in place")
            })
            .is_ok()
    })
}

/// Runs `sweep`'s scan (with whatever others wait) and returns what it
/// ended: the caller waits for the scan, which it shares.
pub(super) fn run(sweep: Sweep) -> Swept {
    if !started() {
        return inline(sweep);
    }
    let (reply, result) = mpsc::channel();
    enqueue(Job {
        sweep,
        reply: Some(reply),
    });
    // Only a panic in the thread drops the sender: held, as far as known.
    result.recv().unwrap_or(Swept {
        ended: 0,
        held_pipes: true,
    })
}

/// Hands `sweep` over to the thread and returns at once: what it ends is
/// logged, not reported.
pub(super) fn detach(sweep: Sweep) {
    if started() {
        enqueue(Job { sweep, reply: None });
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

fn enqueue(job: Job) {
    QUEUE
        .lock()
        .unwrap_or_else(PoisonError::into_inner)
        .push(job);
    QUEUED.notify_one();
}

fn serve() {
    loop {
        let jobs = {
            let mut queue = QUEUE.lock().unwrap_or_else(PoisonError::into_inner);
            while queue.is_empty() {
                queue = QUEUED.wait(queue).unwrap_or_else(PoisonError::into_inner);
            }
            std::mem::take(&mut *queue)
        };
        let (mut sweeps, replies): (Vec<Sweep>, Vec<_>) =
            jobs.into_iter().map(|job| (job.sweep, job.reply)).unzip();
        // A panic must not stop the thread: the callers would wait forever.
        // Their senders drop with it, so they learn it at once.
        let scanned = catch_unwind(AssertUnwindSafe(|| {
            linux::scan(&mut sweeps);
            sweeps.iter().for_each(Sweep::kill_group);
        }));
        if scanned.is_err() {
            tracing::error!("the sweep of /proc panicked");
            continue;
        }
        for (sweep, reply) in sweeps.iter().zip(replies) {
            let swept = sweep.swept();
            match reply {
                Some(reply) => {
                    let _ = reply.send(swept);
                }
                None => log(&swept),
            }
        }
    }
}

/// A detached sweep's result: nobody waits for it.
fn log(swept: &Swept) {
    if swept.ended > 0 {
        tracing::warn!(
            "ended {} process(es) a child left behind, after its driver stopped",
            swept.ended
        );
    }
}
