//! Linux: finding what a child left behind, and ending it.
//!
//! The sweep after a child's exit costs what the child's own tree costs:
//! - First, without reading anything of other processes, whether anything
//!   is left at all ([`left_behind`]): a writer still on the child's stdout
//!   or stderr (one `poll` of copies of the host's read ends: `POLLHUP`
//!   means no writer is left) or a live member of its process group (one
//!   `kill(-pgid, 0)`). A cgroup's members are listed by the cgroup itself.
//!   A child that left nothing behind, the usual case, is done here.
//! - Only then, [`scan`]: one pass over `/proc` that serves every sweep
//!   waiting at that moment (the sweeper thread gathers them), skipping
//!   every process older than the child before reading anything but its
//!   `stat` (nothing older can be its descendant), and reading the
//!   descriptor table of each remaining process once, whichever sweeps ask.
//!
//! A process holding any of the child's pipes, either end, in any access
//! mode (a descendant that reopened `/proc/self/fd/1` read-write counts),
//! is a holder. What the first step cannot see: a descendant that left the
//! group and holds only the child's stdin (none of its stdout or stderr);
//! it is found whenever a scan runs, and always under a cgroup.

use std::collections::BTreeSet;
use std::fs;
use std::os::fd::{AsFd, OwnedFd};
use std::time::{Duration, Instant};

use childwire_core::{Exit, Swept};
use rustix::event::{PollFd, PollFlags, Timespec, poll};
use rustix::process::{
    Pid, PidfdFlags, Signal, kill_process_group, pidfd_open, pidfd_send_signal,
    test_kill_process_group,
};

use crate::runtime::PipeIds;

/// Scans rounds: a holder may fork between a scan and its kill; its
/// children hold the pipes too and are found by the next round.
const ROUNDS: usize = 3;

pub(super) fn pid(pid: u32) -> Option<Pid> {
    Pid::from_raw(i32::try_from(pid).ok()?)
}

/// Why a process is the child's leftover.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Found {
    /// In the child's process group.
    Group,
    /// In the child's cgroup.
    Cgroup,
    /// Holds one of the child's pipes.
    Pipe,
}

/// What one sweep looks for: owned, so that it can wait for the sweeper
/// thread.
#[derive(Debug)]
pub(super) struct Target {
    /// The child itself is no leftover: when the driver stops it is
    /// swept before its own death, and ended by its own SIGKILL.
    pub(super) child: Option<u32>,
    /// The child's process group, if it leads one.
    pub(super) group: Option<u32>,
    /// The inode numbers of the child's pipes.
    pub(super) pipes: Vec<u64>,
    /// The child's start time (clock ticks since boot): older processes
    /// cannot be its descendants, so nothing of them but their `stat` is
    /// read.
    pub(super) started: u64,
    /// The members of the child's cgroup when the sweep began.
    pub(super) in_cgroup: BTreeSet<u32>,
}

impl Target {
    /// Why `pid` (whose `stat` is `stat`) is this child's leftover, if it
    /// is; `held` caches the pipes it holds, read at most once per process
    /// however many sweeps ask.
    fn claims(&self, pid: u32, stat: &Stat, held: &mut Option<Vec<u64>>) -> Option<Found> {
        if stat.started < self.started {
            return None;
        }
        if self.group == Some(stat.pgrp) {
            return Some(Found::Group);
        }
        if self.in_cgroup.contains(&pid) {
            return Some(Found::Cgroup);
        }
        if self.pipes.is_empty() {
            return None;
        }
        held.get_or_insert_with(|| pipes_held_by(pid))
            .iter()
            .any(|inode| self.pipes.contains(inode))
            .then_some(Found::Pipe)
    }
}

/// One sweep: its target, and what it ended so far.
#[derive(Debug)]
pub(super) struct Sweep {
    pub(super) target: Target,
    ended: BTreeSet<u32>,
    held_pipes: bool,
}

impl Sweep {
    pub(super) fn new(target: Target) -> Self {
        Self {
            target,
            ended: BTreeSet::new(),
            held_pipes: false,
        }
    }

    /// What it ended, for the report.
    pub(super) fn swept(&self) -> Swept {
        Swept {
            ended: u32::try_from(self.ended.len()).unwrap_or(u32::MAX),
            held_pipes: self.held_pipes,
        }
    }

    /// SIGKILL to what the group forked since the scan, if any; ESRCH is
    /// the usual answer.
    pub(super) fn kill_group(&self) {
        if let Some(pgid) = self.target.group.and_then(pid) {
            let _ = kill_process_group(pgid, Signal::KILL);
        }
    }
}

/// Whether the child left anything behind that the scan must look for: a
/// writer on its stdout or stderr, or a live member of its group. Costs
/// two system calls, whatever runs on the machine.
pub(super) fn left_behind(pipes: &PipeIds, group: Option<u32>) -> bool {
    writers_left(pipes)
        || group
            .and_then(pid)
            .is_some_and(|pgid| test_kill_process_group(pgid).is_ok())
}

/// Whether a writer is left on a pipe the child wrote, through the copies
/// of the host's read ends: a read end polls `POLLHUP` once no writer is
/// left. A pipe without a copy counts as held.
fn writers_left(pipes: &PipeIds) -> bool {
    let written = pipes
        .ids
        .iter()
        .filter(|(_, child_writes)| *child_writes)
        .count();
    if pipes.watch.len() < written {
        return true;
    }
    let mut fds: Vec<PollFd<'_>> = pipes
        .watch
        .iter()
        .map(|fd| PollFd::new(fd.as_ref(), PollFlags::IN))
        .collect();
    let now = Timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    loop {
        match poll(&mut fds, Some(&now)) {
            Ok(_) => break,
            Err(rustix::io::Errno::INTR) => continue,
            Err(_) => return true,
        }
    }
    fds.iter().any(|fd| !fd.revents().contains(PollFlags::HUP))
}

/// The members of the cgroup in `target` that are alive (not the child,
/// not zombies): what `cgroup.kill` is about to end, counted without
/// looking at any other process.
pub(super) fn live_cgroup_members(target: &Target) -> u32 {
    let live = target
        .in_cgroup
        .iter()
        .filter(|&&pid| Some(pid) != target.child)
        .filter(|&&pid| stat(pid).is_some_and(|stat| !stat.dead()))
        .count();
    u32::try_from(live).unwrap_or(u32::MAX)
}

/// Finds every live process (other than this one and each child) that is
/// in a child's group, in its cgroup, or holds one of its pipes, for every
/// sweep in `sweeps` in one pass over `/proc`, and ends each through a
/// pidfd after checking again, through that pidfd's process, that it still
/// qualifies (so a PID recycled between the scan and the kill is never
/// hit).
pub(super) fn scan(sweeps: &mut [Sweep]) {
    if sweeps.is_empty() {
        return;
    }
    let host = Host::me();
    for _ in 0..ROUNDS {
        let mut killed_now = false;
        for pid in processes() {
            if pid == host.pid {
                continue;
            }
            let Some(stat) = stat(pid) else {
                continue;
            };
            if stat.dead() || host.forked_without_exec(pid, &stat) {
                continue;
            }
            let mut held = None;
            for sweep in sweeps.iter_mut() {
                if Some(pid) == sweep.target.child || sweep.ended.contains(&pid) {
                    continue;
                }
                let Some(found) = sweep.target.claims(pid, &stat, &mut held) else {
                    continue;
                };
                if end(pid, found, &sweep.target, &host) {
                    sweep.held_pipes |= found == Found::Pipe;
                    sweep.ended.insert(pid);
                    killed_now = true;
                }
            }
        }
        if !killed_now {
            break;
        }
    }
}

/// SIGKILL to `pid` through a pidfd, if the process that pidfd pins still
/// is `target`'s leftover for the same reason.
fn end(pid: u32, found: Found, target: &Target, host: &Host) -> bool {
    let Some(fd) = self::pid(pid).and_then(|p| pidfd_open(p, PidfdFlags::empty()).ok()) else {
        return false;
    };
    let Some(stat) = stat(pid) else {
        return false;
    };
    if stat.dead() || host.forked_without_exec(pid, &stat) {
        return false;
    }
    if target.claims(pid, &stat, &mut None) != Some(found) {
        return false;
    }
    pidfd_send_signal(&fd, Signal::KILL).is_ok()
}

/// Every PID in `/proc` (threads are not listed there, only processes).
fn processes() -> impl Iterator<Item = u32> {
    fs::read_dir("/proc")
        .into_iter()
        .flatten()
        .filter_map(|entry| entry.ok()?.file_name().to_str()?.parse().ok())
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
    /// other). Until its exec such a fork holds a copy of every descriptor
    /// of this process, the pipes of a spawn under way in another thread
    /// among them, so it can look like a holder of this child's pipes.
    /// Killed, its spawn reports success for a program that could not run,
    /// or a new child dies at birth. A leftover reparented to this process
    /// (a subreaper, or PID 1 in a container) is spared only if it runs
    /// this very executable.
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

impl Stat {
    /// Dead already: a zombie holds no pipe and needs no signal.
    fn dead(&self) -> bool {
        matches!(self.state, 'Z' | 'X')
    }
}

fn stat(pid: u32) -> Option<Stat> {
    let line = fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // The command name may hold spaces and parentheses: count from the
    // last `)`. Then: state, ppid, pgrp, ... starttime is the 20th.
    let mut fields = line.get(line.rfind(')')? + 1..)?.split_whitespace();
    let state = fields.next()?.chars().next()?;
    let ppid = fields.next()?.parse().ok()?;
    let pgrp = fields.next()?.parse().ok()?;
    let started = fields.nth(16)?.parse().ok()?;
    Some(Stat {
        state,
        ppid,
        pgrp,
        started,
    })
}

/// When `pid` started, in clock ticks since boot.
pub(super) fn start_time(pid: u32) -> Option<u64> {
    stat(pid).map(|stat| stat.started)
}

/// The inode numbers of the pipes `pid` holds, whatever end and access
/// mode. Unreadable (another user's process): none; it cannot hold our
/// pipes unless it was given them, and then we may not signal it anyway.
fn pipes_held_by(pid: u32) -> Vec<u64> {
    let Ok(fds) = fs::read_dir(format!("/proc/{pid}/fd")) else {
        return Vec::new();
    };
    fds.filter_map(|fd| {
        let target = fs::read_link(fd.ok()?.path()).ok()?;
        target
            .to_str()?
            .strip_prefix("pipe:[")?
            .strip_suffix(']')?
            .parse()
            .ok()
    })
    .collect()
}

/// Whether the process of `pidfd` has exited (its pidfd is readable).
pub(super) fn exited(pidfd: &OwnedFd) -> bool {
    let now = Timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    let mut fds = [PollFd::new(pidfd, PollFlags::IN)];
    loop {
        match poll(&mut fds, Some(&now)) {
            Ok(n) => return n > 0,
            Err(rustix::io::Errno::INTR) => continue,
            Err(_) => return false,
        }
    }
}

/// Waits until the process of `pidfd` has exited (its pidfd becomes
/// readable), then reads its status without reaping it (`WNOWAIT`).
pub(super) fn wait_exited(pidfd: &OwnedFd, limit: Duration) -> Option<Exit> {
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

/// The inode numbers of `pipes`, for a [`Target`].
pub(super) fn inodes(pipes: &PipeIds) -> Vec<u64> {
    pipes.ids.iter().map(|&(inode, _)| inode).collect()
}

#[cfg(test)]
mod tests {
    use std::os::fd::{AsRawFd, BorrowedFd};
    use std::os::unix::process::CommandExt;

    use rustix::io::{read, write};
    use rustix::pipe::{PipeFlags, pipe_with};

    use super::*;

    fn target(pipes: &PipeIds) -> Target {
        Target {
            child: None,
            group: None,
            pipes: inodes(pipes),
            started: 0,
            in_cgroup: BTreeSet::new(),
        }
    }

    /// A spawn in progress in another thread, forked but held before its
    /// exec, holds a pipe the sweep looks for (as it would hold the pipes
    /// of a spawn under way when it forked). The sweep must leave it be:
    /// killed there, its spawn would report success for a program that
    /// never ran.
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

        let mut sweeps = [Sweep::new(target(&pipes))];
        scan(&mut sweeps);
        write(&go_w, b"g").expect("let the fork go on");
        let status = spawning
            .join()
            .expect("the spawning thread")
            .expect("spawned");
        drop((child_end, ready_w, go_r));

        assert_eq!(
            sweeps[0].swept().ended,
            0,
            "the host's own fork was taken for a leftover"
        );
        assert!(
            status.success(),
            "the fork went on to run its program: {status}"
        );
    }

    /// The copy of the host's read end tells whether a writer is left,
    /// without looking at any process.
    #[test]
    fn a_writer_left_on_a_pipe_the_child_wrote_is_seen_and_its_close_too() {
        let (stdin_child, stdin_host) = pipe_with(PipeFlags::CLOEXEC).expect("pipe");
        let (stdout_host, stdout_child) = pipe_with(PipeFlags::CLOEXEC).expect("pipe");
        let pipes = PipeIds::of(stdin_host.as_fd(), [stdout_host.as_fd()]);
        assert!(left_behind(&pipes, None), "the child's end is still open");
        drop(stdout_child);
        assert!(!left_behind(&pipes, None), "no writer is left");
        // The copy is a read end: the host closing stdin still reaches the
        // child as EOF.
        drop(stdin_host);
        assert_eq!(read(&stdin_child, &mut [0u8; 1]), Ok(0));
    }

    /// One scan serves two sweeps: each ends the process holding its pipe,
    /// read-write, and counts it as a pipe holder.
    #[test]
    fn one_scan_ends_the_read_write_holders_of_two_children() {
        let mut holders = Vec::new();
        let mut sweeps = Vec::new();
        let mut keep = Vec::new();
        for _ in 0..2 {
            let (read_end, write_end) = pipe_with(PipeFlags::CLOEXEC).expect("pipe");
            let pipes = PipeIds::of(write_end.as_fd(), []);
            // `sleep` holds the pipe read-write, through /proc.
            let path = format!("/proc/self/fd/{}", read_end.as_raw_fd());
            let rw = fs::OpenOptions::new()
                .read(true)
                .write(true)
                .open(&path)
                .expect("reopen the pipe read-write");
            let holder = std::process::Command::new("sleep")
                .arg("60")
                .stdin(rw)
                .spawn()
                .expect("spawn sleep");
            holders.push(holder);
            sweeps.push(Sweep::new(target(&pipes)));
            keep.push((read_end, write_end));
        }
        scan(&mut sweeps);
        for (sweep, mut holder) in sweeps.iter().zip(holders) {
            let status = holder.wait().expect("reap");
            assert_eq!(
                sweep.swept(),
                Swept {
                    ended: 1,
                    held_pipes: true
                }
            );
            assert!(!status.success(), "{status}");
        }
    }
}
