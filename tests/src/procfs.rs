//! `/proc` inspection: which processes exist, in which group, whose zombies they are.
//!
//! Linux only. On other systems every query compiles to "nothing known" (`false`, empty, `None`)
//! and [`SUPPORTED`] is `false`, so a test can skip the assertions that need a real answer instead
//! of passing them vacuously without saying so. The exception is Windows, where [`pid_exists`]
//! and [`process_alive`] ask the OS instead (see [`LIVENESS_SUPPORTED`]).

/// Whether the queries in this module see real processes on this system.
pub const SUPPORTED: bool = cfg!(target_os = "linux");

/// Whether [`pid_exists`] and [`process_alive`] give real answers here: on Linux through
/// `/proc`, on Windows through `OpenProcess`/`GetExitCodeProcess`.
pub const LIVENESS_SUPPORTED: bool = cfg!(any(target_os = "linux", windows));

/// The fields of `/proc/PID/stat` the suite needs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ProcStat {
    /// Process ID.
    pub pid: u32,
    /// State letter: `R`, `S`, `D`, `T`, `Z` (zombie: exited, not yet reaped), `X`, ...
    pub state: char,
    /// Parent process ID.
    pub ppid: u32,
    /// Process group ID.
    pub pgrp: u32,
}

impl ProcStat {
    /// Exited but not reaped (or being torn down).
    pub fn is_zombie(&self) -> bool {
        matches!(self.state, 'Z' | 'X')
    }
}

/// Parses one `/proc/PID/stat` line. The command name (field 2) is in parentheses and may itself
/// contain spaces and parentheses, so fields are counted from the *last* `)`.
pub fn parse_stat(line: &str) -> Option<ProcStat> {
    let open = line.find('(')?;
    let close = line.rfind(')')?;
    let pid = line.get(..open)?.trim().parse().ok()?;
    let mut rest = line.get(close + 1..)?.split_whitespace();
    let state = rest.next()?.chars().next()?;
    let ppid = rest.next()?.parse().ok()?;
    let pgrp = rest.next()?.parse().ok()?;
    Some(ProcStat {
        pid,
        state,
        ppid,
        pgrp,
    })
}

/// The stat of process `pid`, or `None` if it does not exist (reaped) or `/proc` is unavailable.
pub fn proc_stat(pid: u32) -> Option<ProcStat> {
    if !SUPPORTED {
        return None;
    }
    parse_stat(&std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?)
}

/// Every process visible in `/proc` (a process may vanish between listing and reading: skipped).
pub fn all_processes() -> Vec<ProcStat> {
    if !SUPPORTED {
        return Vec::new();
    }
    let Ok(dir) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    dir.filter_map(|entry| entry.ok()?.file_name().to_str()?.parse::<u32>().ok())
        .filter_map(proc_stat)
        .collect()
}

/// Process `pid` exists in any state, zombies included (i.e. it has not been reaped).
///
/// Windows has no zombies: there this is [`process_alive`].
pub fn pid_exists(pid: u32) -> bool {
    #[cfg(windows)]
    {
        crate::windows::running(pid)
    }
    #[cfg(not(windows))]
    {
        proc_stat(pid).is_some()
    }
}

/// Process `pid` exists and is not a zombie.
pub fn process_alive(pid: u32) -> bool {
    #[cfg(windows)]
    {
        crate::windows::running(pid)
    }
    #[cfg(not(windows))]
    {
        proc_stat(pid).is_some_and(|stat| !stat.is_zombie())
    }
}

/// Process `pid` exists and is a zombie (exited, waiting to be reaped by its parent).
pub fn is_zombie(pid: u32) -> bool {
    proc_stat(pid).is_some_and(|stat| stat.is_zombie())
}

/// All processes (zombies included) whose process group is `pgid`, sorted.
pub fn group_members(pgid: u32) -> Vec<u32> {
    let mut pids: Vec<u32> = all_processes()
        .into_iter()
        .filter(|stat| stat.pgrp == pgid)
        .map(|stat| stat.pid)
        .collect();
    pids.sort_unstable();
    pids
}

/// The members of process group `pgid` that are still running (zombies left out), sorted.
///
/// This is the orphan check: a grandchild that was killed becomes a zombie of PID 1, and reaping
/// it is PID 1's job, not ours (some container inits never do it, so a dead grandchild can stay
/// listed as a zombie for good).
pub fn live_group_members(pgid: u32) -> Vec<u32> {
    let mut pids: Vec<u32> = all_processes()
        .into_iter()
        .filter(|stat| stat.pgrp == pgid && !stat.is_zombie())
        .map(|stat| stat.pid)
        .collect();
    pids.sort_unstable();
    pids
}

/// The live processes (zombies left out) whose environment holds `KEY=VALUE`, sorted: what a test
/// started, however far it went (another group, another session, re-parented to init), found by
/// a variable it inherits. Processes whose environment cannot be read are left out.
pub fn live_processes_with_env(key: &str, value: &str) -> Vec<u32> {
    let wanted = format!("{key}={value}").into_bytes();
    let mut pids: Vec<u32> = all_processes()
        .into_iter()
        .filter(|stat| !stat.is_zombie() && stat.pid != std::process::id())
        .filter(|stat| {
            std::fs::read(format!("/proc/{}/environ", stat.pid))
                .is_ok_and(|env| env.split(|&b| b == 0).any(|var| var == wanted))
        })
        .map(|stat| stat.pid)
        .collect();
    pids.sort_unstable();
    pids
}

/// The cgroup v2 path of `pid` (`0::PATH` in `/proc/PID/cgroup`), if known.
pub fn cgroup_of(pid: u32) -> Option<String> {
    if !SUPPORTED {
        return None;
    }
    let text = std::fs::read_to_string(format!("/proc/{pid}/cgroup")).ok()?;
    text.lines()
        .find_map(|line| line.strip_prefix("0::"))
        .map(str::to_owned)
}

/// Zombie children of `ppid`, sorted: children it has not reaped.
pub fn zombie_children_of(ppid: u32) -> Vec<u32> {
    let mut pids: Vec<u32> = all_processes()
        .into_iter()
        .filter(|stat| stat.ppid == ppid && stat.is_zombie())
        .map(|stat| stat.pid)
        .collect();
    pids.sort_unstable();
    pids
}

/// The process group of this (test) process, or `None` if unknown.
pub fn own_pgid() -> Option<u32> {
    proc_stat(std::process::id()).map(|stat| stat.pgrp)
}

/// How many file descriptors this process has open, or `None` if unknown. For leak checks, which
/// must allow for other tests of the same binary opening descriptors concurrently.
pub fn open_fds() -> Option<usize> {
    if !SUPPORTED {
        return None;
    }
    Some(std::fs::read_dir("/proc/self/fd").ok()?.count())
}

/// The processes other than this one that have `link` (as `/proc/PID/fd/N` reads, e.g.
/// `pipe:[12345]`) open; empty where `/proc` is unavailable.
pub fn holders_of(link: &str) -> Vec<u32> {
    if !SUPPORTED {
        return Vec::new();
    }
    let me = std::process::id();
    all_processes()
        .into_iter()
        .map(|stat| stat.pid)
        .filter(|&pid| pid != me)
        .filter(|pid| {
            std::fs::read_dir(format!("/proc/{pid}/fd")).is_ok_and(|fds| {
                fds.flatten().any(|fd| {
                    std::fs::read_link(fd.path()).is_ok_and(|target| target.as_os_str() == link)
                })
            })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_stat_lines_with_awkward_command_names() {
        let line = "4242 (evil) name (x)) S 17 4242 4242 0 -1 4194560 0 0";
        assert_eq!(
            parse_stat(line),
            Some(ProcStat {
                pid: 4242,
                state: 'S',
                ppid: 17,
                pgrp: 4242
            })
        );
        let zombie = parse_stat("7 (sh) Z 1 6 6 0").expect("parses");
        assert!(zombie.is_zombie());
        assert_eq!(parse_stat("7 (sh) Z"), None);
        assert_eq!(parse_stat(""), None);
        assert_eq!(parse_stat("x (sh) S 1 1"), None);
    }

    #[cfg(target_os = "linux")]
    #[test]
    fn sees_this_process_and_a_reaped_child_disappears() {
        let me = std::process::id();
        assert!(process_alive(me));
        assert!(!is_zombie(me));
        let pgid = own_pgid().expect("own pgid");
        assert!(group_members(pgid).contains(&me));
        assert!(live_group_members(pgid).contains(&me));
        assert!(open_fds().expect("fd count") >= 3);

        let mut child = std::process::Command::new("true")
            .spawn()
            .expect("spawn true");
        let pid = child.id();
        assert!(
            crate::wait_until(std::time::Duration::from_secs(10), || is_zombie(pid)),
            "an exited, unreaped child shows as a zombie"
        );
        assert!(zombie_children_of(me).contains(&pid));
        child.wait().expect("reap");
        assert!(!pid_exists(pid));
        assert!(!zombie_children_of(me).contains(&pid));
    }
}
