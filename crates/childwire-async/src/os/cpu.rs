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
/// Reading the tree walks `/proc` once; a few times a second is cheap.
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
    use std::collections::HashMap;
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
        // Every process's parent, once; then the descendants of `pid` are
        // those whose parent chain reaches it. Only processes started no
        // earlier than it can be among them.
        let mut parents: HashMap<u32, (u32, u64)> = HashMap::new();
        for other in processes() {
            if let Some(stat) = stat(other) {
                if stat.started >= root.started && other != pid {
                    parents.insert(other, (stat.ppid, stat.cpu_ticks));
                }
            }
        }
        let mut ticks = root.cpu_ticks;
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
        let per_second = crate::sys::clock_ticks_per_second().max(1);
        Ok(Some(
            Duration::from_secs(ticks / per_second)
                + Duration::from_nanos((ticks % per_second) * 1_000_000_000 / per_second),
        ))
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
