//! The sweeper thread (Linux): where the `/proc` scans run, one at a time,
//! each serving every sweep that waits when it starts.
//!
//! Many children ending together (a host dropping hundreds of transports,
//! a runtime shutting down) cost one scan, not one each. A sweep handed
//! over by a driver that stops ([`detach`]) is never waited for: the drop
//! goes on at once. One thread for the process, started at the first scan
//! and idle (blocked on a condition variable) between them.
//!
//! A caller waits for its scan [`REPLY_WAIT`], or until it has ended
//! something ([`FIRST_PASS_WAIT`] longer at most): a scan
//! that chases a descendant changing its PID may take longer (up to
//! [`CHASE`](super::linux::CHASE)), and the caller, a runtime's worker
//! thread, must not be held that long. It then reports what was ended so
//! far; the rest is logged.

use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::mpsc::{self, RecvTimeoutError};
use std::sync::{Condvar, Mutex, OnceLock, PoisonError};
use std::time::{Duration, Instant};

use childwire_core::Swept;

use super::linux::{self, Sweep};

/// How long a caller of [`run`] waits for its scan.
const REPLY_WAIT: Duration = Duration::from_millis(250);

/// How long a caller of [`run`] waits, past [`REPLY_WAIT`], while its scan
/// has ended nothing yet (on a loaded machine, behind another scan still
/// chasing, or chasing a descendant that changes its PID): the report
/// counts what was ended by then.
const FIRST_PASS_WAIT: Duration = Duration::from_secs(2);

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
                crate::log::warn!("cannot start the sweeper thread ({err}); sweeps run in place")
            })
            .is_ok()
    })
}

/// Runs `sweep`'s scan (with whatever others wait) and returns what it
/// ended: the caller waits for the scan, which it shares, for
/// [`REPLY_WAIT`] at most; then it gets what was ended by then, and
/// `pipes_held` (whether the pipes were held when the sweep began) says
/// whether they were.
pub(super) fn run(sweep: Sweep, pipes_held: bool) -> Swept {
    if !started() {
        return inline(sweep);
    }
    let progress = sweep.progress();
    let (reply, result) = mpsc::channel();
    enqueue(Job {
        sweep,
        reply: Some(reply),
    });
    let asked = Instant::now();
    let mut wait = REPLY_WAIT;
    loop {
        match result.recv_timeout(wait) {
            Ok(swept) => return swept,
            // Nothing ended yet (no pass yet, or a descendant changing its
            // PID not caught yet): a while longer, a step at a time.
            Err(RecvTimeoutError::Timeout)
                if (!progress.passed() || progress.swept().ended == 0)
                    && asked.elapsed() < REPLY_WAIT + FIRST_PASS_WAIT =>
            {
                wait = Duration::from_millis(10);
            }
            // Still chasing, or a panic in the thread dropped the sender.
            Err(RecvTimeoutError::Timeout | RecvTimeoutError::Disconnected) => {
                let so_far = progress.swept();
                return Swept {
                    ended: so_far.ended,
                    held_pipes: so_far.held_pipes || pipes_held,
                };
            }
        }
    }
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
            crate::log::error!("the sweep of /proc panicked");
            continue;
        }
        for (sweep, reply) in sweeps.iter().zip(replies) {
            let swept = sweep.swept();
            match reply {
                // The caller may have stopped waiting: then it is logged.
                Some(reply) => {
                    if reply.send(swept).is_err() {
                        log(&swept);
                    }
                }
                None => log(&swept),
            }
        }
    }
}

/// The result of a sweep nobody waits for (its driver stopped, or its
/// caller stopped waiting): logged.
fn log(swept: &Swept) {
    if swept.ended > 0 {
        crate::log::warn!(
            "ended {} process(es) a child left behind, after its report was made",
            swept.ended
        );
    }
}
