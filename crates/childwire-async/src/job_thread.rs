//! A named thread that lives as long as the process and runs the jobs
//! handed to it one at a time, in order: started by the first job, then
//! idle (blocked on its channel) between jobs.

use std::io;
use std::sync::OnceLock;
use std::sync::mpsc;
use std::thread::JoinHandle;

/// Starts a thread named `name` that runs `work`: every thread this crate
/// starts goes through here, so that `std`'s spawning code is compiled once
/// (each closure type handed to `Builder::spawn` compiles a copy of it).
pub(crate) fn spawn_named(
    name: &str,
    work: Box<dyn FnOnce() + Send>,
) -> io::Result<JoinHandle<()>> {
    std::thread::Builder::new().name(name.into()).spawn(work)
}

/// Work for the thread.
pub(crate) type Job = Box<dyn FnOnce() + Send>;

/// One such thread, declared as a `static`.
pub(crate) struct JobThread {
    name: &'static str,
    /// Where jobs go; `mpsc::Sender` is shared by reference, no lock.
    jobs: OnceLock<mpsc::Sender<Job>>,
}

impl JobThread {
    pub(crate) const fn new(name: &'static str) -> Self {
        Self {
            name,
            jobs: OnceLock::new(),
        }
    }

    /// Hands `job` to the thread, starting it the first time. The job comes
    /// back when the thread cannot run (it could not be started, or a job
    /// panicked and ended it): the caller then decides what to do with it.
    pub(crate) fn submit(&self, job: Job) -> Result<(), Job> {
        let jobs = match self.jobs.get() {
            Some(jobs) => jobs,
            None => {
                let (tx, rx) = mpsc::channel::<Job>();
                let started = spawn_named(
                    self.name,
                    Box::new(move || {
                        for job in rx {
                            job();
                        }
                    }),
                );
                if started.is_err() {
                    return Err(job);
                }
                // Another caller may have won the race: its thread serves,
                // ours ends with its channel.
                self.jobs.get_or_init(|| tx)
            }
        };
        jobs.send(job).map_err(|mpsc::SendError(job)| job)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    /// Jobs run in the order they were handed over, on the named thread,
    /// and `submit` returns before its job has run.
    #[test]
    fn jobs_run_in_order_on_the_thread_and_submit_does_not_wait() {
        static THREAD: JobThread = JobThread::new("childwire-job-thread-test");
        let (gate_tx, gate_rx) = mpsc::channel::<()>();
        let (done_tx, done_rx) = mpsc::channel();
        let first = done_tx.clone();
        assert!(
            THREAD
                .submit(Box::new(move || {
                    // Held until the test lets it go: `submit` must not wait for it.
                    let _ = gate_rx.recv();
                    let name = std::thread::current().name().map(str::to_owned);
                    let _ = first.send((1, name));
                }))
                .is_ok()
        );
        assert!(
            THREAD
                .submit(Box::new(move || {
                    let _ = done_tx.send((2, None));
                }))
                .is_ok()
        );
        assert!(
            done_rx.try_recv().is_err(),
            "no job finished before the first was let go"
        );
        gate_tx.send(()).expect("the first job waits");
        let limit = Duration::from_secs(10);
        let (order, name) = done_rx.recv_timeout(limit).expect("the first job ran");
        assert_eq!(order, 1);
        assert_eq!(name.as_deref(), Some("childwire-job-thread-test"));
        assert_eq!(done_rx.recv_timeout(limit).expect("the second ran").0, 2);
    }
}
