//! The OS calls the core's decisions need: delivering signals, sweeping what
//! a child left behind, and reading exit statuses.
//!
//! What each platform covers:
//! - Linux: signals go to the child's process group; the sweep after its
//!   exit ends what is left of the group, every process (in any group or
//!   session) that still holds the child's end of one of its pipes, and,
//!   with [`Containment::Cgroup`], everything in its cgroup. Processes are
//!   signalled through pidfds, so a recycled PID is never hit.
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

#[cfg(windows)]
mod windows;

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
                .then(rustix::process::getpid);
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

/// One child as the OS knows it: what to signal, and how to find what it
/// left behind.
#[derive(Debug)]
pub(crate) struct Tracking {
    pid: Option<u32>,
    group: bool,
    /// Opened right after the spawn, before anything could reap the child:
    /// it names this process and no other, even once its PID is recycled.
    #[cfg(target_os = "linux")]
    pidfd: Option<std::os::fd::OwnedFd>,
    #[cfg(target_os = "linux")]
    pipes: PipeIds,
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
            let pidfd = pid.and_then(linux::pid).and_then(|pid| {
                rustix::process::pidfd_open(pid, rustix::process::PidfdFlags::empty()).ok()
            });
            // Unknown (the child is gone already): scan everything.
            let started = pid.and_then(linux::start_time).unwrap_or(0);
            Ok(Self {
                pid,
                group,
                pidfd,
                pipes,
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
    pub(crate) fn sweep(&self) -> Swept {
        #[cfg(target_os = "linux")]
        {
            let group = self.group.then_some(self.pid).flatten();
            let target = linux::Target {
                child: self.pid,
                group,
                pipes: &self.pipes,
                started: self.started,
            };
            let swept = linux::sweep(&target, self.cgroup.as_ref());
            if let Some(cgroup) = &self.cgroup {
                // Whatever was forked between the scan and now. The count
                // is the scan's: the cgroup's may include the child itself.
                cgroup.kill();
            }
            // The group's late forks, if any; ESRCH is the usual answer.
            if let Some(pgid) = group {
                let _ = send(pgid, Signal::Kill, true);
            }
            swept
        }
        #[cfg(windows)]
        {
            let Some(job) = &self.job else {
                return Swept::default();
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
            Swept {
                ended: u32::try_from(left).unwrap_or(u32::MAX),
                held_pipes: false,
            }
        }
        #[cfg(not(any(target_os = "linux", windows)))]
        {
            // The group only, and no way to count what it held.
            if let (Some(pid), true) = (self.pid, self.group) {
                let _ = send(pid, Signal::Kill, true);
            }
            Swept::default()
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
            linux::wait_exited(self.pidfd.as_ref()?, limit)
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
    use rustix::process::{Pid, Signal as Sig, kill_process, kill_process_group};
    let pid = i32::try_from(pid)
        .ok()
        .and_then(Pid::from_raw)
        .ok_or(SignalError::NoSuchProcess)?;
    let sig = match signal {
        Signal::Term => Sig::TERM,
        Signal::Kill => Sig::KILL,
    };
    let sent = if group {
        kill_process_group(pid, sig)
    } else {
        kill_process(pid, sig)
    };
    sent.map_err(|errno| SignalError::from_io(&errno.into()))
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

#[cfg(target_os = "linux")]
mod linux {
    use std::collections::BTreeSet;
    use std::fs;
    use std::os::fd::{AsFd, OwnedFd};
    use std::time::{Duration, Instant};

    use childwire_core::{Exit, Swept};
    use rustix::process::{Pid, PidfdFlags, Signal, pidfd_open, pidfd_send_signal};

    use crate::cgroup::Cgroup;
    use crate::runtime::PipeIds;

    /// Scans rounds: a holder may fork between a scan and its kill; its
    /// children hold the pipes too and are found by the next round.
    const ROUNDS: usize = 3;

    pub(super) fn pid(pid: u32) -> Option<Pid> {
        Pid::from_raw(i32::try_from(pid).ok()?)
    }

    /// Why a process is the child's leftover.
    #[derive(Clone, Copy, PartialEq, Eq)]
    enum Found {
        /// In the child's process group.
        Group,
        /// In the child's cgroup.
        Cgroup,
        /// Holds the child's end of one of its pipes.
        Pipe,
    }

    /// What the sweep looks for.
    pub(super) struct Target<'a> {
        /// The child itself is no leftover: when the driver stops it is
        /// swept before its own death, and ended by its own SIGKILL.
        pub(super) child: Option<u32>,
        /// The child's process group, if it leads one.
        pub(super) group: Option<u32>,
        pub(super) pipes: &'a PipeIds,
        /// The child's start time: older processes cannot hold its pipes
        /// (they were created with it), so their descriptors are not read.
        pub(super) started: u64,
    }

    /// Finds every live process (other than this one and the child) that
    /// is in the child's group, in its cgroup, or holds the child's end of
    /// one of its pipes, and ends each through a pidfd after checking again,
    /// through that pidfd's process, that it still qualifies (so a PID
    /// recycled between the scan and the kill is never hit).
    pub(super) fn sweep(target: &Target<'_>, cgroup: Option<&Cgroup>) -> Swept {
        let host = Host::me();
        let mut ended = BTreeSet::new();
        let mut held_pipes = false;
        for _ in 0..ROUNDS {
            let in_cgroup: BTreeSet<u32> = cgroup.map(Cgroup::members).unwrap_or_default();
            let mut killed_now = false;
            for pid in processes() {
                if pid == host.pid || Some(pid) == target.child || ended.contains(&pid) {
                    continue;
                }
                let Some(found) = qualifies(pid, target, &in_cgroup, &host) else {
                    continue;
                };
                let Some(fd) = self::pid(pid).and_then(|p| pidfd_open(p, PidfdFlags::empty()).ok())
                else {
                    continue;
                };
                // The pidfd pins the process that had this PID when it was
                // opened; if it still qualifies, the kill hits it and only it.
                if qualifies(pid, target, &in_cgroup, &host) != Some(found) {
                    continue;
                }
                if pidfd_send_signal(&fd, Signal::KILL).is_ok() {
                    held_pipes |= found == Found::Pipe;
                    ended.insert(pid);
                    killed_now = true;
                }
            }
            if !killed_now {
                break;
            }
        }
        Swept {
            ended: u32::try_from(ended.len()).unwrap_or(u32::MAX),
            held_pipes,
        }
    }

    /// Every PID in `/proc` (threads are not listed there, only processes).
    fn processes() -> impl Iterator<Item = u32> {
        fs::read_dir("/proc")
            .into_iter()
            .flatten()
            .filter_map(|entry| entry.ok()?.file_name().to_str()?.parse().ok())
    }

    fn qualifies(
        pid: u32,
        target: &Target<'_>,
        in_cgroup: &BTreeSet<u32>,
        host: &Host,
    ) -> Option<Found> {
        let stat = stat(pid)?;
        if matches!(stat.state, 'Z' | 'X') {
            // Dead already: a zombie holds no pipe and needs no signal.
            return None;
        }
        if host.forked_without_exec(pid, &stat) {
            return None;
        }
        if target.group == Some(stat.pgrp) {
            return Some(Found::Group);
        }
        if in_cgroup.contains(&pid) {
            return Some(Found::Cgroup);
        }
        (stat.started >= target.started && holds_pipe(pid, target.pipes)).then_some(Found::Pipe)
    }

    /// This process, to tell its own spawns in progress from leftovers.
    struct Host {
        pid: u32,
        /// The device and inode of its executable.
        exe: Option<(u64, u64)>,
    }

    impl Host {
        fn me() -> Self {
            let pid = std::process::id();
            Self {
                pid,
                exe: exe_id(pid),
            }
        }

        /// Whether `pid` is a fork of this process that has not exec'd yet:
        /// one of its own spawns in progress (another transport's, or any
        /// other). Until its exec such a fork holds a copy of every
        /// descriptor of this process, the child's ends of the pipes of a
        /// spawn under way in another thread among them, so it can look
        /// like a holder of this child's pipes. Killed, its spawn reports
        /// success for a program that could not run, or a new child dies
        /// at birth. A leftover reparented to this process (a subreaper, or
        /// PID 1 in a container) is spared only if it runs this very
        /// executable.
        fn forked_without_exec(&self, pid: u32, stat: &Stat) -> bool {
            stat.ppid == self.pid && self.exe.is_some() && exe_id(pid) == self.exe
        }
    }

    /// The device and inode of the executable `pid` runs.
    fn exe_id(pid: u32) -> Option<(u64, u64)> {
        use std::os::unix::fs::MetadataExt;
        let exe = fs::metadata(format!("/proc/{pid}/exe")).ok()?;
        Some((exe.dev(), exe.ino()))
    }

    /// The fields of `/proc/PID/stat` the sweep reads.
    struct Stat {
        state: char,
        ppid: u32,
        pgrp: u32,
        /// Clock ticks since boot.
        started: u64,
    }

    fn stat(pid: u32) -> Option<Stat> {
        let line = fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
        // The command name may hold spaces and parentheses: count from the
        // last `)`. Then: state, ppid, pgrp, ... starttime is the 20th.
        let fields: Vec<&str> = line
            .get(line.rfind(')')? + 1..)?
            .split_whitespace()
            .collect();
        Some(Stat {
            state: fields.first()?.chars().next()?,
            ppid: fields.get(1)?.parse().ok()?,
            pgrp: fields.get(2)?.parse().ok()?,
            started: fields.get(19)?.parse().ok()?,
        })
    }

    /// When `pid` started, in clock ticks since boot.
    pub(super) fn start_time(pid: u32) -> Option<u64> {
        stat(pid).map(|stat| stat.started)
    }

    /// Whether `pid` holds the child's end of one of `pipes`. Only the
    /// child's end counts: the parent's ends are close-on-exec, but a
    /// process this host is forking right now holds them until its exec,
    /// and must not be taken for an escaped descendant.
    fn holds_pipe(pid: u32, pipes: &PipeIds) -> bool {
        if pipes.0.is_empty() {
            return false;
        }
        // Unreadable (another user's process): it cannot hold our pipes
        // unless it was given them, and then we may not signal it anyway.
        let Ok(fds) = fs::read_dir(format!("/proc/{pid}/fd")) else {
            return false;
        };
        fds.filter_map(Result::ok).any(|fd| {
            let Ok(target) = fs::read_link(fd.path()) else {
                return false;
            };
            let Some(inode) = target
                .to_str()
                .and_then(|t| t.strip_prefix("pipe:["))
                .and_then(|t| t.strip_suffix(']'))
                .and_then(|t| t.parse::<u64>().ok())
            else {
                return false;
            };
            pipes.0.iter().any(|&(ino, child_writes)| {
                ino == inode && writes(pid, &fd.file_name()) == Some(child_writes)
            })
        })
    }

    /// Whether descriptor `fd` of `pid` is open for writing (`O_WRONLY`).
    fn writes(pid: u32, fd: &std::ffi::OsStr) -> Option<bool> {
        let info = fs::read_to_string(format!("/proc/{pid}/fdinfo/{}", fd.to_str()?)).ok()?;
        let flags = info.lines().find_map(|l| l.strip_prefix("flags:"))?.trim();
        let flags = u32::from_str_radix(flags, 8).ok()?;
        Some(flags & 0o3 == 0o1)
    }

    /// Waits until the process of `pidfd` has exited (its pidfd becomes
    /// readable), then reads its status without reaping it (`WNOWAIT`).
    pub(super) fn wait_exited(pidfd: &OwnedFd, limit: Duration) -> Option<Exit> {
        use rustix::event::{PollFd, PollFlags, Timespec, poll};
        use rustix::process::{WaitId, WaitIdOptions, waitid};
        let deadline = Instant::now() + limit;
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            let timeout = Timespec {
                tv_sec: i64::try_from(left.as_secs()).unwrap_or(i64::MAX),
                tv_nsec: i64::from(left.subsec_nanos()),
            };
            let mut fds = [PollFd::new(pidfd, PollFlags::IN)];
            match poll(&mut fds, Some(&timeout)) {
                Ok(0) => return None,
                Ok(_) => break,
                Err(rustix::io::Errno::INTR) => continue,
                Err(_) => return None,
            }
        }
        let status = waitid(
            WaitId::PidFd(pidfd.as_fd()),
            WaitIdOptions::EXITED | WaitIdOptions::NOWAIT,
        )
        .ok()??;
        if let Some(signal) = status.terminating_signal() {
            return Some(Exit::Signal(signal));
        }
        status.exit_status().map(Exit::Code)
    }

    #[cfg(test)]
    mod tests {
        use std::os::fd::{AsFd, AsRawFd, BorrowedFd};
        use std::os::unix::process::CommandExt;

        use rustix::io::{read, write};
        use rustix::pipe::{PipeFlags, pipe_with};

        use super::*;

        /// A spawn in progress in another thread, forked but held before
        /// its exec, holds the child's end of a pipe the sweep looks for
        /// (as it would hold the pipes of a spawn under way when it
        /// forked). The sweep must leave it be: killed there, its spawn
        /// would report success for a program that never ran.
        #[test]
        fn the_sweep_spares_a_fork_of_this_host_that_has_not_exec_d_yet() {
            // A child's stdin: the host writes, the child's end reads.
            let pipe = || pipe_with(PipeFlags::CLOEXEC).expect("pipe");
            let (child_end, host_end) = pipe();
            let pipes = PipeIds::of(host_end.as_fd(), []);
            let (ready_r, ready_w) = pipe();
            let (go_r, go_w) = pipe();
            let (ready_w_raw, go_r_raw) = (ready_w.as_raw_fd(), go_r.as_raw_fd());
            let mut fork = std::process::Command::new("true");
            #[allow(unsafe_code)]
            // SAFETY: the closure only makes two system calls on descriptors
            // that stay open until the spawn returns.
            unsafe {
                fork.pre_exec(move || {
                    let (ready, go) = (
                        BorrowedFd::borrow_raw(ready_w_raw),
                        BorrowedFd::borrow_raw(go_r_raw),
                    );
                    write(ready, b"r")?;
                    read(go, &mut [0u8; 1])?;
                    Ok(())
                });
            }
            let spawning = std::thread::spawn(move || fork.spawn().and_then(|mut c| c.wait()));
            read(&ready_r, &mut [0u8; 1]).expect("the fork is before its exec");

            let swept = sweep(
                &Target {
                    child: None,
                    group: None,
                    pipes: &pipes,
                    started: 0,
                },
                None,
            );
            write(&go_w, b"g").expect("let the fork go on");
            let status = spawning
                .join()
                .expect("the spawning thread")
                .expect("spawned");
            drop((child_end, ready_w, go_r));

            assert_eq!(
                swept.ended, 0,
                "the host's own fork was taken for a leftover"
            );
            assert!(
                status.success(),
                "the fork went on to run its program: {status}"
            );
        }
    }
}
