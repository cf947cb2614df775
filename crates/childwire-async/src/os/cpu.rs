//! The CPU time of a child's process tree, for [`Liveness`]: whether a
//! server that does not answer is working.
//!
//! [`Liveness`]: childwire_core::liveness::Liveness

use std::io;
use std::path::Path;
use std::time::Duration;

/// The total CPU time (user and system) of the process tree of `pid`: the
/// process, its live descendants, and the descendants they reaped; or,
/// given `cgroup` (the directory of the cgroup v2 the child was contained
/// in), the cgroup's own count, which also holds what left the tree.
///
/// Linux: `/proc/PID/stat` (`utime + stime + cutime + cstime`) of the
/// process and of every live process whose parent chain leads to it, or
/// the cgroup's `cpu.stat` (`usage_usec`). `Ok(None)` where the OS gives no
/// number here (Windows, where the job object's accounting is the
/// transport's to read; macOS and other Unix). An error if `pid` is gone.
///
/// Reading the tree reads the tree's own processes in `/proc` (their
/// children lists and `stat`), not every process's: a few times a second
/// is cheap however many processes run.
///
/// ```no_run
/// # fn demo(pid: u32) -> std::io::Result<()> {
/// if let Some(cpu) = childwire_async::tree_cpu_time(pid, None)? {
///     println!("the server used {cpu:?} of CPU so far");
/// }
/// # Ok(()) }
/// ```
pub fn tree_cpu_time(pid: u32, cgroup: Option<&Path>) -> io::Result<Option<Duration>> {
    imp::tree_cpu_time(pid, cgroup)
}

#[cfg(target_os = "linux")]
mod imp {
    use std::collections::{HashMap, HashSet};
    use std::fs;
    use std::io;
    use std::path::Path;
    use std::time::Duration;

    use super::super::identity::imp::{processes, stat};

    pub(super) fn tree_cpu_time(pid: u32, cgroup: Option<&Path>) -> io::Result<Option<Duration>> {
        if let Some(dir) = cgroup {
            let text = std::fs::read_to_string(dir.join("cpu.stat"))?;
            let usec = text
                .lines()
                .find_map(|line| line.strip_prefix("usage_usec "))
                .and_then(|value| value.trim().parse::<u64>().ok())
                .ok_or_else(|| {
                    io::Error::new(io::ErrorKind::InvalidData, "cpu.stat has no usage_usec")
                })?;
            return Ok(Some(Duration::from_micros(usec)));
        }
        let root = stat(pid).ok_or_else(|| {
            io::Error::new(
                io::ErrorKind::NotFound,
                format!("process {pid} is not in /proc"),
            )
        })?;
        let ticks = match descendants_ticks(pid, root.started) {
            Some(theirs) => root.cpu_ticks.saturating_add(theirs),
            None => root
                .cpu_ticks
                .saturating_add(scanned_ticks(pid, root.started)),
        };
        let per_second = crate::sys::clock_ticks_per_second().max(1);
        Ok(Some(
            Duration::from_secs(ticks / per_second)
                + Duration::from_nanos((ticks % per_second) * 1_000_000_000 / per_second),
        ))
    }

    /// The CPU ticks of `pid`'s live descendants, found from `pid` down
    /// through the children each thread lists (`/proc/PID/task/TID/children`),
    /// so that only the tree is read, however many other processes run.
    /// Reading every process's `stat` instead, as [`scanned_ticks`] does,
    /// took 15.6 ms beside 2,000 idle processes (0.33 ms beside 65), in
    /// the task that polls a supervised child's `recv`; the walk takes
    /// 9.6 µs for a process with no children, either way (a release build,
    /// medians of 21 calls, docs/performance.md). `None` if the kernel lists no
    /// children (built without `CONFIG_PROC_CHILDREN`). Only processes
    /// started no earlier than the root (`started`) count: a PID reused
    /// meanwhile is not its descendant.
    pub(super) fn descendants_ticks(pid: u32, started: u64) -> Option<u64> {
        let mut next = children(pid)?;
        let mut seen = HashSet::from([pid]);
        let mut ticks = 0u64;
        while let Some(process) = next.pop() {
            if !seen.insert(process) {
                continue;
            }
            let Some(stat) = stat(process).filter(|stat| stat.started >= started) else {
                continue;
            };
            ticks = ticks.saturating_add(stat.cpu_ticks);
            // Gone since: what it reaped is in its parent's count once
            // that parent reaps it.
            next.extend(children(process).unwrap_or_default());
        }
        Some(ticks)
    }

    /// The children that `pid`'s threads list; `None` if its main
    /// thread's list cannot be read. A thread that ends meanwhile lists
    /// nothing.
    fn children(pid: u32) -> Option<Vec<u32>> {
        let mut found = Vec::new();
        let mut list = |text: &str| {
            found.extend(
                text.split_ascii_whitespace()
                    .filter_map(|id| id.parse::<u32>().ok()),
            );
        };
        list(&fs::read_to_string(format!("/proc/{pid}/task/{pid}/children")).ok()?);
        let threads = fs::read_dir(format!("/proc/{pid}/task")).ok()?;
        for thread in threads.flatten() {
            let main = thread.file_name().to_str().and_then(|tid| tid.parse().ok()) == Some(pid);
            if main {
                continue;
            }
            if let Ok(text) = fs::read_to_string(thread.path().join("children")) {
                list(&text);
            }
        }
        Some(found)
    }

    /// The CPU ticks of `pid`'s live descendants, by every process's
    /// parent: each process's `stat` read once, then the descendants are
    /// those whose parent chain reaches `pid`. Only processes started no
    /// earlier than it (`started`) can be among them.
    pub(super) fn scanned_ticks(pid: u32, started: u64) -> u64 {
        let mut parents: HashMap<u32, (u32, u64)> = HashMap::new();
        for other in processes() {
            if let Some(stat) = stat(other) {
                if stat.started >= started && other != pid {
                    parents.insert(other, (stat.ppid, stat.cpu_ticks));
                }
            }
        }
        let mut ticks = 0u64;
        for (&process, &(_, own)) in &parents {
            let mut parent = parents.get(&process).map(|&(ppid, _)| ppid);
            // A chain is never longer than the processes listed.
            for _ in 0..=parents.len() {
                match parent {
                    Some(p) if p == pid => {
                        ticks = ticks.saturating_add(own);
                        break;
                    }
                    Some(p) => parent = parents.get(&p).map(|&(ppid, _)| ppid),
                    None => break,
                }
            }
        }
        ticks
    }
}

#[cfg(not(target_os = "linux"))]
mod imp {
    use std::io;
    use std::path::Path;
    use std::time::Duration;

    pub(super) fn tree_cpu_time(_pid: u32, _cgroup: Option<&Path>) -> io::Result<Option<Duration>> {
        Ok(None)
    }
}

#[cfg(all(test, target_os = "linux"))]
mod tests {
    use std::os::unix::process::CommandExt;
    use std::process::Command;
    use std::time::{Duration, Instant};

    use super::super::identity::imp::stat;
    use super::imp::{descendants_ticks, scanned_ticks};
    use crate::sys::{Pid, kill_process_group};

    /// A shell whose child spins: the shell itself computes nothing, its
    /// tree does. Walking the children lists finds the spinner, as
    /// scanning every process does.
    #[test]
    fn a_spinning_grandchild_counts_found_either_way() {
        let mut shell = Command::new("sh")
            .args(["-c", "sh -c 'while :; do :; done' & wait"])
            .process_group(0)
            .spawn()
            .expect("sh");
        let pid = shell.id();
        let started = stat(pid).expect("the shell's stat").started;
        // A fifth of a second of CPU, in clock ticks.
        let enough = crate::sys::clock_ticks_per_second() / 5;
        let deadline = Instant::now() + Duration::from_secs(30);
        let result = loop {
            let walked = descendants_ticks(pid, started).expect("this kernel lists children");
            if walked >= enough {
                break Ok((walked, scanned_ticks(pid, started)));
            }
            if Instant::now() > deadline {
                break Err(walked);
            }
            std::thread::sleep(Duration::from_millis(10));
        };
        let group = Pid::from_u32(pid).expect("a pid");
        kill_process_group(group, libc::SIGKILL).expect("end the tree");
        let _ = shell.wait();
        let (walked, scanned) = result.unwrap_or_else(|walked| {
            panic!("the spinner's {walked} ticks never reached {enough} in 30 s")
        });
        assert!(
            scanned >= walked,
            "the scan, read after the walk, found less: {scanned} < {walked}"
        );
    }
}
