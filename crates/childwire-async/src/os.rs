//! The OS calls the core's decisions need: delivering signals, sweeping what
//! a child left behind, and reading exit statuses.
//!
//! What each platform covers:
//! - Linux: signals go to the child's process group; the sweep after its
//!   exit ends what is left of the group, every process (in any group or
//!   session) that still holds one of its pipes (either end, any access
//!   mode), and, with [`Containment::Cgroup`], everything in its cgroup.
//!   Processes are signalled through pidfds, so a recycled PID is never
//!   hit, and a descendant that keeps changing its PID is chased for as
//!   long as it holds a pipe. Its cost follows the child's own tree, not the
//!   machine's process count: see `os/linux.rs`.
//! - Other Unix (macOS, BSDs): the process group only. A descendant that
//!   left the group is not found.
//! - Windows: every child in a job object of its own, created with
//!   `JOB_OBJECT_LIMIT_KILL_ON_JOB_CLOSE`; the host holds its only handle
//!   (not inheritable), so the whole tree ends when the host drops the
//!   transport, and when the host dies however it dies (that is what
//!   `kill_on_parent_death` asks for on Linux; on Windows it is always so).
//!   The child is created suspended (`CREATE_SUSPENDED`), opened by PID
//!   right after the spawn (the runtime's child type holds its handle, so
//!   the PID cannot be recycled meanwhile), put in the job, and only then
//!   resumed: nothing it starts can be outside the job. A failure on the
//!   way ends it (or, if it cannot even be opened, resumes it), and the
//!   spawn fails; the creation flags replace any a caller of `spawn_std`
//!   set. One gap: a runtime whose own spawn fails after the OS created the
//!   process (Tokio failing to register its wait, out of resources) never
//!   hands its PID here, and that process stays suspended. Then:
//!   - [`Signal::Term`]: `CTRL_BREAK_EVENT` to the child's console process
//!     group (`CREATE_NEW_PROCESS_GROUP`, from [`Command::process_group`]),
//!     the nearest thing to SIGTERM (console programs exit on it by
//!     default). It fails (and the core keeps its schedule: `term_grace`,
//!     then the kill) without a group, or when the host has no console to
//!     share with the child (a GUI host; its children then get no console
//!     window either, `CREATE_NO_WINDOW`).
//!   - [`Signal::Kill`]: `TerminateJobObject`, the whole tree, exit code 1.
//!   - The sweep: the processes still in the job (but the child, and the
//!     `conhost.exe` Windows adds for a child with a console of its own)
//!     are counted, then the job is terminated; whether they held the pipes
//!     is not known (`held_pipes` is `false`).
//!   - The drop path's wait: on a process handle of our own
//!     (`WaitForSingleObject`, `GetExitCodeProcess`).
//! - Elsewhere: nothing beyond what the runtime's child type does.

use childwire_core::{Action, Command, Containment, Exit, Signal, SignalError, Swept};

#[cfg(target_os = "linux")]
mod linux;
#[cfg(target_os = "linux")]
pub(crate) use linux::StdinWatch;
#[cfg(target_os = "linux")]
mod sweeper;
#[cfg(windows)]
mod windows;
#[cfg(windows)]
pub(crate) use windows::stderr_is_console_or_file;
// Spawn ledger, liveness and login shell (issue 39).
pub(crate) mod cpu;
pub(crate) mod identity;
pub(crate) mod ledger;
pub(crate) mod login_shell;

use crate::runtime::PipeIds;

#[cfg(target_os = "linux")]
use crate::cgroup::Cgroup;

/// What is set up before the spawn for a command's containment: created
/// first, moved into the [`Tracking`] of the child once it runs.
#[derive(Debug, Default)]
pub(crate) struct Prepared {
    #[cfg(target_os = "linux")]
    cgroup: Option<Cgroup>,
    #[cfg(windows)]
    job: Option<windows::Job>,
}

impl Prepared {
    /// Sets `std` up for `command`'s containment and parent-death options:
    /// creates its cgroup, and installs what the forked child does before
    /// it runs the program. Fails, before anything is spawned, if the
    /// containment asked for is not available here.
    pub(crate) fn new(command: &Command, std: &mut std::process::Command) -> std::io::Result<Self> {
        #[cfg(target_os = "linux")]
        {
            let cgroup = match command.get_containment() {
                Containment::Cgroup => Some(Cgroup::create()?),
                _ => None,
            };
            let parent = command
                .get_kill_on_parent_death()
                .then(crate::sys::Pid::current);
            crate::pre_exec::install(
                std,
                crate::pre_exec::ChildSetup {
                    cgroup_procs: cgroup.as_ref().map(Cgroup::procs),
                    parent,
                },
            );
            Ok(Self { cgroup })
        }
        #[cfg(windows)]
        {
            use std::os::windows::process::CommandExt;
            if command.get_containment() == Containment::Cgroup {
                return Err(std::io::Error::new(
                    std::io::ErrorKind::Unsupported,
                    "cgroups exist on Linux only; on Windows every child is held in a job \
                     object of its own already",
                ));
            }
            let job = windows::Job::new()?;
            std.creation_flags(windows::creation_flags(command.get_process_group()));
            Ok(Self { job: Some(job) })
        }
        #[cfg(not(any(target_os = "linux", windows)))]
        {
            let _ = std;
            match command.get_containment() {
                Containment::Cgroup => Err(std::io::Error::new(
                    std::io::ErrorKind::Unsupported,
                    "cgroups exist on Linux only",
                )),
                _ => Ok(Self {}),
            }
        }
    }
}

/// Elsewhere no watch is kept on the child's stdin: this is never made.
#[cfg(not(target_os = "linux"))]
#[derive(Clone, Debug)]
pub(crate) enum StdinWatch {}

#[cfg(not(target_os = "linux"))]
impl StdinWatch {
    pub(crate) fn host_closed(&self, _child_exited: bool) {
        match *self {}
    }
}

/// Enough of a child to send it a signal from outside its background task
/// (the last handle's drop, see [`Shared::close_handle`]): its PID and
/// whether it leads a group. Unix only: on Windows the child's job belongs
/// to the background task, which delivers every signal there.
///
/// [`Shared::close_handle`]: crate::shared::Shared::close_handle
#[derive(Debug, Clone, Copy)]
#[cfg_attr(not(unix), allow(dead_code))]
pub(crate) struct SignalTarget {
    pid: u32,
    group: bool,
}

impl SignalTarget {
    /// Sends `signal` as [`Tracking::signal`] does. Asked only before the
    /// session knows of the exit; the background task may have reaped the
    /// child a moment before it hands the exit in, and then this reaches
    /// what is left of the child's group, as the sweep's group kill after
    /// the reap does.
    pub(crate) fn send(self, signal: Signal) -> Result<(), SignalError> {
        #[cfg(unix)]
        {
            send(self.pid, signal, self.group)
        }
        #[cfg(not(unix))]
        {
            let _ = signal;
            Err(SignalError::Other { errno: None })
        }
    }
}

/// One child as the OS knows it: what to signal, and how to find what it
/// left behind.
#[derive(Debug)]
pub(crate) struct Tracking {
    pid: Option<u32>,
    group: bool,
    /// Opened right after the spawn, before anything could reap the child:
    /// it names this process and no other, even once its PID is recycled.
    #[cfg(target_os = "linux")]
    pidfd: Option<std::sync::Arc<std::os::fd::OwnedFd>>,
    /// The inode numbers of the child's pipes.
    #[cfg(target_os = "linux")]
    pipes: Vec<u64>,
    /// What tells whether anything still holds them.
    #[cfg(target_os = "linux")]
    holders: linux::Holders,
    /// When the child started (clock ticks since boot): nothing older can
    /// be its descendant, so older processes are never scanned for pipes.
    #[cfg(target_os = "linux")]
    started: u64,
    #[cfg(target_os = "linux")]
    cgroup: Option<Cgroup>,
    /// The child's job; `None` only if the spawn did not go through
    /// [`Prepared::new`].
    #[cfg(windows)]
    job: Option<windows::Job>,
    /// The child's process, opened right after the spawn.
    #[cfg(windows)]
    process: Option<windows::Process>,
}

/// A sweep carried out, or under way.
#[derive(Debug)]
pub(crate) enum Sweeping {
    /// Done: what it ended.
    Done(Swept),
    /// The scan runs on the sweeper thread.
    #[cfg(target_os = "linux")]
    Running(sweeper::Pending),
}

/// Where a sweep is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum SweepState {
    /// Done: what it ended.
    Done(Swept),
    /// Still running: what it ended so far, and whether it has been
    /// through the processes once. (Only Linux scans on a thread of its
    /// own.)
    #[cfg_attr(not(target_os = "linux"), allow(dead_code))]
    Running { so_far: Swept, passed: bool },
}

impl Sweeping {
    /// Where the sweep is now. Dropping a sweep still running hands what it
    /// ends later to the log.
    pub(crate) fn state(&self) -> SweepState {
        match self {
            Sweeping::Done(swept) => SweepState::Done(*swept),
            #[cfg(target_os = "linux")]
            Sweeping::Running(pending) => pending.state(),
        }
    }
}

impl Tracking {
    /// Tracks the child just spawned with `prepared`'s setup. On Windows
    /// this also starts it (it was created suspended): an error means it
    /// was not started in its job, and was ended.
    pub(crate) fn new(
        pid: Option<u32>,
        group: bool,
        pipes: PipeIds,
        prepared: Prepared,
    ) -> std::io::Result<Self> {
        #[cfg(target_os = "linux")]
        {
            let pidfd = pid
                .and_then(crate::sys::Pid::from_u32)
                .and_then(|pid| crate::sys::pidfd_open(pid).ok());
            // Unknown (the child is gone already): scan everything.
            let started = pid.and_then(linux::start_time).unwrap_or(0);
            Ok(Self {
                pid,
                group,
                pidfd: pidfd.map(std::sync::Arc::new),
                holders: linux::Holders::new(&pipes),
                pipes: linux::inodes(&pipes),
                started,
                cgroup: prepared.cgroup,
            })
        }
        #[cfg(windows)]
        {
            let _ = pipes;
            let process = match (&prepared.job, pid) {
                (Some(job), Some(pid)) => Some(windows::start(pid, job)?),
                // Exited and waited for already: nothing is suspended.
                _ => None,
            };
            Ok(Self {
                pid,
                group,
                job: prepared.job,
                process,
            })
        }
        #[cfg(not(any(target_os = "linux", windows)))]
        {
            let _ = (pipes, prepared);
            Ok(Self { pid, group })
        }
    }

    /// Where a handle can send the child a signal the session decides, on
    /// Unix; `None` on Windows or without a PID.
    pub(crate) fn signal_target(&self) -> Option<SignalTarget> {
        #[cfg(unix)]
        {
            self.pid.map(|pid| SignalTarget {
                pid,
                group: self.group,
            })
        }
        #[cfg(not(unix))]
        {
            None
        }
    }

    /// Carries out a signal [`Action`] on the child: to its group when it
    /// leads one, else to the process alone. Must not be called once
    /// the child was reaped (the core never asks it then).
    pub(crate) fn signal(&self, action: Action) -> Result<(), SignalError> {
        let Action::Signal(signal) = action else {
            return Ok(());
        };
        let Some(pid) = self.pid else {
            return Err(SignalError::NoSuchProcess);
        };
        #[cfg(windows)]
        {
            let (Some(process), Some(job)) = (&self.process, &self.job) else {
                return Err(SignalError::NoSuchProcess);
            };
            // Exited, not yet waited for: like ESRCH on Unix. It also keeps
            // the break from reaching a group whose leader is gone.
            if process.exited() {
                return Err(SignalError::NoSuchProcess);
            }
            let sent = match signal {
                Signal::Term if self.group => windows::ctrl_break(pid),
                // The break could not be aimed at the child alone.
                Signal::Term => return Err(SignalError::Other { errno: None }),
                Signal::Kill => job.terminate(),
            };
            sent.map_err(|err| SignalError::Other {
                errno: err.raw_os_error(),
            })
        }
        #[cfg(not(windows))]
        send(pid, signal, self.group)
    }

    /// Carries out [`Action::Sweep`]: SIGKILL to everything the child left
    /// behind that this platform can find, each process counted once.
    ///
    /// On Linux its cost follows the child's own tree: when nothing is left
    /// (no writer on the child's stdout or stderr, no reader on its stdin,
    /// nobody in its group), it reads nothing of any other process and is
    /// done here. Otherwise the `/proc` scan runs on the sweeper thread,
    /// shared with every sweep waiting then, and this returns at once with
    /// the scan to follow: `waker` is woken after each of its passes and
    /// once it is done. A sweep asked before the child's exit is handed over
    /// as by [`sweep_stopping`](Self::sweep_stopping). `reaped`: the session
    /// has the child's exit, so it need not be asked of the pidfd (one
    /// `poll` less after the exit).
    pub(crate) fn start_sweep(&self, reaped: bool, waker: &std::task::Waker) -> Sweeping {
        #[cfg(target_os = "linux")]
        {
            let target = self.target();
            let exited = reaped || self.pidfd.as_deref().is_none_or(linux::exited);
            if !exited {
                return Sweeping::Done(self.sweep_stopping());
            }
            let pipes_held = target.holders.held();
            let nothing_left = !pipes_held && !linux::group_alive(target.group);
            let sweeping = if !nothing_left {
                match sweeper::start(linux::Sweep::new(target), pipes_held, waker) {
                    Ok(pending) => Sweeping::Running(pending),
                    Err(swept) => Sweeping::Done(swept),
                }
            } else {
                // Nothing holds the pipes and the group is empty: only the
                // cgroup, which lists its own members, may hold anything.
                Sweeping::Done(Swept {
                    ended: linux::live_cgroup_members(&target),
                    held_pipes: false,
                })
            };
            self.kill_late_forks(nothing_left);
            sweeping
        }
        #[cfg(windows)]
        {
            let _ = (reaped, waker);
            let Some(job) = &self.job else {
                return Sweeping::Done(Swept::default());
            };
            // Counted before the kill; the child itself is no leftover.
            let left = job
                .members()
                .unwrap_or_default()
                .into_iter()
                .filter(|&pid| Some(pid) != self.pid)
                .count();
            // Late starts too: nothing leaves the job.
            let _ = job.terminate();
            Sweeping::Done(Swept {
                ended: u32::try_from(left).unwrap_or(u32::MAX),
                held_pipes: false,
            })
        }
        #[cfg(not(any(target_os = "linux", windows)))]
        {
            let _ = (reaped, waker);
            // The group only, and no way to count what it held.
            if let (Some(pid), true) = (self.pid, self.group) {
                let _ = send(pid, Signal::Kill, true);
            }
            Sweeping::Done(Swept::default())
        }
    }

    /// [`start_sweep`](Self::start_sweep) for a driver that stops (its
    /// runtime shuts down): nothing here waits for a scan. On Linux, unless
    /// the child has exited and left nothing behind, the search for what it
    /// left is handed to the sweeper thread, which ends and logs it; the
    /// group and the cgroup are sent SIGKILL now. What is ended is not
    /// counted: the report says nothing was.
    pub(crate) fn sweep_stopping(&self) -> Swept {
        #[cfg(target_os = "linux")]
        {
            let target = self.target();
            let exited = self.pidfd.as_deref().is_none_or(linux::exited);
            let nothing_left = exited && !linux::left_behind(&target.holders, target.group);
            if !nothing_left {
                sweeper::detach(linux::Sweep::new(target));
            }
            self.kill_late_forks(nothing_left);
            Swept::default()
        }
        #[cfg(not(target_os = "linux"))]
        {
            match self.start_sweep(false, std::task::Waker::noop()) {
                Sweeping::Done(swept) => swept,
            }
        }
    }

    /// What the sweep looks for.
    #[cfg(target_os = "linux")]
    fn target(&self) -> linux::Target {
        linux::Target {
            child: self.pid,
            child_fd: self.pidfd.clone(),
            group: self.group.then_some(self.pid).flatten(),
            pipes: self.pipes.clone(),
            holders: self.holders.clone(),
            started: self.started,
            in_cgroup: self
                .cgroup
                .as_ref()
                .map(Cgroup::members)
                .unwrap_or_default(),
        }
    }

    /// SIGKILL to the cgroup and the group, for whatever was forked since
    /// the sweep looked; ESRCH is the usual answer. Not to the group when
    /// `group_empty` (the sweep just found it so): a group with no member
    /// forks nothing, and its id is free for a new group to take. That
    /// saves a shutdown a `kill` after the exit, in the usual case.
    #[cfg(target_os = "linux")]
    fn kill_late_forks(&self, group_empty: bool) {
        if let Some(cgroup) = &self.cgroup {
            cgroup.kill();
        }
        if let (Some(pgid), true, false) = (self.pid, self.group, group_empty) {
            let _ = send(pgid, Signal::Kill, true);
        }
    }

    /// Waits up to `limit` for the child (already sent SIGKILL) to exit,
    /// without reaping it: the runtime's child type reaps it when dropped
    /// (it tries once, and an exited child is reaped at once instead of
    /// being left to a reaper that may never run). `None` if it did not
    /// exit in time, or the platform cannot tell.
    pub(crate) fn wait_exited(&self, limit: std::time::Duration) -> Option<Exit> {
        #[cfg(target_os = "linux")]
        {
            linux::wait_exited(self.pidfd.as_deref()?, limit)
        }
        #[cfg(windows)]
        {
            let code = self.process.as_ref()?.wait(limit).ok()??;
            // The DWORD's bits, as `ExitStatus::code` gives them.
            #[allow(clippy::cast_possible_wrap)]
            Some(Exit::Code(code as i32))
        }
        #[cfg(not(any(target_os = "linux", windows)))]
        {
            let _ = limit;
            None
        }
    }
}

#[cfg(unix)]
fn send(pid: u32, signal: Signal, group: bool) -> Result<(), SignalError> {
    use crate::sys::{Pid, kill_process, kill_process_group};
    let pid = Pid::from_u32(pid).ok_or(SignalError::NoSuchProcess)?;
    let sig = match signal {
        Signal::Term => libc::SIGTERM,
        Signal::Kill => libc::SIGKILL,
    };
    let sent = if group {
        kill_process_group(pid, sig)
    } else {
        kill_process(pid, sig)
    };
    sent.map_err(|err| SignalError::from_io(&err))
}

#[cfg(not(any(unix, windows)))]
fn send(_pid: u32, _signal: Signal, _group: bool) -> Result<(), SignalError> {
    // Without signals there is no graceful step to take; the adapters' child
    // handles kill on drop.
    Err(SignalError::Other { errno: None })
}

/// The core's view of an exit status.
pub(crate) fn exit_of(status: std::process::ExitStatus) -> Exit {
    #[cfg(unix)]
    {
        use std::os::unix::process::ExitStatusExt;
        if let Some(signal) = status.signal() {
            return Exit::Signal(signal);
        }
    }
    Exit::Code(status.code().unwrap_or(-1))
}
