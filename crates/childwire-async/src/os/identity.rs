//! A process as the OS can prove it later: its start time (Linux: clock
//! ticks since boot, with the boot id; Windows: its creation time), its
//! group and session; what a ledger records, and what a clean-up run looks
//! at and signals.
//!
//! macOS and the other Unix systems: no start time is read (it would need
//! `proc_pidinfo`, outside what this crate binds), so an entry recorded
//! there cannot be proved, and a clean-up run leaves it alone.

use std::io;

use childwire_core::Signal;
use childwire_core::ledger::{Identity, Process, Seen};

/// The identity of the child `pid`, for a ledger entry. `group`: whether
/// it leads a process group of its own; `cgroup`: the directory of the
/// cgroup of its own it was put in, if any (Linux). The host (this
/// process) is recorded with it, so that no other host ever ends it while
/// this one runs.
pub fn identity_of(
    pid: u32,
    group: bool,
    cgroup: Option<&std::path::Path>,
) -> io::Result<Identity> {
    let own = std::process::id();
    let identity = Identity::new(pid, None)
        .with_host(Some(own), imp::started(own))
        .with_cgroup(cgroup.map(|dir| dir.to_string_lossy().into_owned()));
    imp::identity(identity, group)
}

/// The boot id start times count from, where they do (Linux).
pub(crate) fn boot_id() -> Option<String> {
    imp::boot_id()
}

/// What the OS shows now of `identity`'s processes.
pub(crate) fn look(identity: &Identity) -> Seen {
    imp::look(identity)
}

/// Sends `signal` to `target` if the process with its PID still has its
/// start time, through a handle that pins that process (so a PID reused
/// since the look is never hit).
pub(crate) fn signal(target: &Process, signal: Signal) {
    imp::signal(target, signal);
}

#[cfg(target_os = "linux")]
pub(crate) mod imp {
    use std::fs;
    use std::io;
    use std::path::Path;

    use childwire_core::Signal;
    use childwire_core::ledger::{Identity, Process, Seen};
    use std::os::fd::AsFd;

    use crate::sys::{Pid, kill_process_group, pidfd_open, pidfd_send_signal};

    /// The fields of `/proc/PID/stat` the ledger and the CPU time read.
    #[derive(Debug, Clone, Copy)]
    pub(crate) struct Stat {
        pub(crate) state: char,
        pub(crate) ppid: u32,
        pub(crate) pgrp: u32,
        pub(crate) session: u32,
        /// utime + stime + cutime + cstime, in clock ticks.
        pub(crate) cpu_ticks: u64,
        /// Clock ticks since boot.
        pub(crate) started: u64,
    }

    impl Stat {
        /// Dead already (a zombie needs no signal and holds nothing).
        pub(crate) fn dead(&self) -> bool {
            matches!(self.state, 'Z' | 'X')
        }
    }

    /// Parses one `/proc/PID/stat` line. The command name may hold spaces
    /// and parentheses: fields are counted from the last `)`.
    pub(crate) fn parse_stat(line: &str) -> Option<Stat> {
        let fields: Vec<&str> = line
            .get(line.rfind(')')? + 1..)?
            .split_whitespace()
            .collect();
        // Field 3 (state) is index 0; utime is field 14, starttime 22.
        let number = |field: usize| fields.get(field - 3)?.parse::<u64>().ok();
        let small = |field: usize| fields.get(field - 3)?.parse::<u32>().ok();
        Some(Stat {
            state: fields.first()?.chars().next()?,
            ppid: small(4)?,
            pgrp: small(5)?,
            session: small(6)?,
            cpu_ticks: (14..=17)
                .map(number)
                .try_fold(0u64, |sum, ticks| Some(sum.saturating_add(ticks?)))?,
            started: number(22)?,
        })
    }

    pub(crate) fn stat(pid: u32) -> Option<Stat> {
        parse_stat(&fs::read_to_string(format!("/proc/{pid}/stat")).ok()?)
    }

    pub(super) fn started(pid: u32) -> Option<u64> {
        stat(pid).map(|stat| stat.started)
    }

    pub(super) fn boot_id() -> Option<String> {
        let id = fs::read_to_string("/proc/sys/kernel/random/boot_id").ok()?;
        Some(id.trim().to_owned())
    }

    pub(super) fn identity(identity: Identity, group: bool) -> io::Result<Identity> {
        let pid = identity.pid;
        let stat = stat(pid).ok_or_else(|| {
            io::Error::new(
                io::ErrorKind::NotFound,
                format!("process {pid} is not in /proc"),
            )
        })?;
        let program = fs::read_to_string(format!("/proc/{pid}/comm"))
            .ok()
            .map(|comm| comm.trim_end().to_owned());
        let mut identity = identity
            .with_boot_id(boot_id())
            .with_group((group && stat.pgrp == pid).then_some(pid))
            .with_session(Some(stat.session))
            .with_program(program);
        identity.started = Some(stat.started);
        Ok(identity)
    }

    /// The live process `pid`, with its start time.
    fn live(pid: u32) -> Option<Process> {
        let stat = stat(pid)?;
        (!stat.dead()).then_some(Process {
            pid,
            started: Some(stat.started),
        })
    }

    pub(super) fn look(identity: &Identity) -> Seen {
        let group = identity
            .group
            .filter(|&pgid| {
                // One system call says whether the group has anyone left;
                // only then is `/proc` scanned.
                Pid::from_u32(pgid).is_some_and(|pgid| kill_process_group(pgid, 0).is_ok())
            })
            .map(|pgid| {
                processes()
                    .filter_map(|pid| Some((pid, stat(pid)?)))
                    .filter(|(_, stat)| stat.pgrp == pgid && !stat.dead())
                    .map(|(pid, stat)| Process {
                        pid,
                        started: Some(stat.started),
                    })
                    .collect()
            })
            .unwrap_or_default();
        let cgroup = identity
            .cgroup
            .as_deref()
            .filter(|dir| is_ours(Path::new(dir)))
            .map(|dir| cgroup_members(Path::new(dir)))
            .unwrap_or_default();
        Seen {
            host: identity.host.and_then(live),
            leader: live(identity.pid),
            group,
            cgroup,
        }
    }

    /// Whether `dir` is a cgroup childwire made (its name says so): a
    /// ledger file never makes a clean-up run touch any other.
    pub(crate) fn is_ours(dir: &Path) -> bool {
        dir.file_name()
            .and_then(|name| name.to_str())
            .is_some_and(|name| name.starts_with("childwire-"))
            && dir.join("cgroup.procs").is_file()
    }

    fn cgroup_members(dir: &Path) -> Vec<Process> {
        fs::read_to_string(dir.join("cgroup.procs"))
            .map(|list| {
                list.lines()
                    .filter_map(|pid| live(pid.parse().ok()?))
                    .collect()
            })
            .unwrap_or_default()
    }

    /// Every PID in `/proc`.
    pub(crate) fn processes() -> impl Iterator<Item = u32> {
        fs::read_dir("/proc")
            .into_iter()
            .flatten()
            .filter_map(|entry| entry.ok()?.file_name().to_str()?.parse().ok())
    }

    pub(super) fn signal(target: &Process, signal: Signal) {
        let Some(pid) = Pid::from_u32(target.pid) else {
            return;
        };
        // The pidfd pins the process: checked, then signalled, with no
        // other process able to take its PID in between.
        let Ok(fd) = pidfd_open(pid) else {
            return;
        };
        if live(target.pid).is_none_or(|now| now.started != target.started) {
            return;
        }
        let sig = match signal {
            Signal::Term => libc::SIGTERM,
            Signal::Kill => libc::SIGKILL,
        };
        if let Err(err) = pidfd_send_signal(fd.as_fd(), sig) {
            crate::log::debug!(pid = target.pid, "cannot signal a leftover: {err}");
        }
    }

    /// `cgroup.kill` on `dir`, if it is one of ours.
    pub(crate) fn kill_cgroup(dir: &Path) {
        if is_ours(dir) {
            if let Err(err) = fs::write(dir.join("cgroup.kill"), b"1") {
                crate::log::warn!(cgroup = %dir.display(), "cgroup.kill failed: {err}");
            }
        }
    }

    #[cfg(test)]
    mod tests {
        use super::*;

        #[test]
        fn stat_lines_with_awkward_names_parse() {
            let line = "42 (a) b (c)) S 1 42 40 0 -1 4194560 0 0 0 0 7 3 2 1 20 0 1 0 98765 0 0";
            let stat = parse_stat(line).expect("parses");
            assert_eq!(
                (stat.state, stat.ppid, stat.pgrp, stat.session),
                ('S', 1, 42, 40)
            );
            assert_eq!(stat.cpu_ticks, 13);
            assert_eq!(stat.started, 98765);
            assert!(parse_stat("42 (a) S 1 42").is_none());
        }

        #[test]
        fn this_process_is_seen_with_its_start_time() {
            let me = std::process::id();
            let identity = identity(Identity::new(me, None), false).expect("self");
            assert!(identity.started.is_some() && identity.boot_id.is_some());
            assert_eq!(identity.group, None, "a test does not lead its group");
            let seen = look(&identity);
            assert_eq!(
                seen.leader,
                Some(Process {
                    pid: me,
                    started: identity.started
                })
            );
        }
    }
}

#[cfg(windows)]
#[allow(unsafe_code)]
pub(crate) mod imp {
    //! Windows: the creation time (`GetProcessTimes`) proves a process;
    //! there are no groups to look at. A dead host's children are ended
    //! by their job object already (`JOB_OBJECT_LIMIT_KILL_ON_JOB_CLOSE`,
    //! whose only handle the host held): the ledger finds them gone, unless
    //! something kept the job's handle open. There is no SIGTERM for a
    //! process this host did not start in its console: only SIGKILL
    //! (`TerminateProcess`) is carried out.
    use std::io;
    use std::os::windows::io::{AsRawHandle, FromRawHandle, OwnedHandle};

    use childwire_core::Signal;
    use childwire_core::ledger::{Identity, Process, Seen};
    use windows_sys::Win32::Foundation::{FALSE, FILETIME, STILL_ACTIVE};
    use windows_sys::Win32::System::Threading::{
        GetExitCodeProcess, GetProcessTimes, OpenProcess, PROCESS_QUERY_LIMITED_INFORMATION,
        PROCESS_TERMINATE, TerminateProcess,
    };

    fn open(pid: u32, access: u32) -> Option<OwnedHandle> {
        // SAFETY: OpenProcess takes no pointers; a non-null result is a
        // handle we own and close once, through OwnedHandle.
        let raw = unsafe { OpenProcess(access, FALSE, pid) };
        // SAFETY: `raw` is a valid process handle, owned from here on.
        (!raw.is_null()).then(|| unsafe { OwnedHandle::from_raw_handle(raw) })
    }

    /// The creation time of a live process (100 ns since 1601).
    fn created(process: &OwnedHandle) -> Option<u64> {
        let mut code = 0u32;
        // SAFETY: a valid handle and a pointer to a local u32.
        let ok = unsafe { GetExitCodeProcess(process.as_raw_handle(), &mut code) };
        // An exit code of STILL_ACTIVE (259) means it runs.
        #[allow(clippy::cast_sign_loss)]
        if ok == FALSE || code != STILL_ACTIVE as u32 {
            return None;
        }
        let zero = FILETIME {
            dwLowDateTime: 0,
            dwHighDateTime: 0,
        };
        let (mut creation, mut exit, mut kernel, mut user) = (zero, zero, zero, zero);
        // SAFETY: a valid handle and four pointers to local FILETIMEs.
        let ok = unsafe {
            GetProcessTimes(
                process.as_raw_handle(),
                &mut creation,
                &mut exit,
                &mut kernel,
                &mut user,
            )
        };
        (ok != FALSE)
            .then(|| (u64::from(creation.dwHighDateTime) << 32) | u64::from(creation.dwLowDateTime))
    }

    pub(super) fn started(pid: u32) -> Option<u64> {
        created(&open(pid, PROCESS_QUERY_LIMITED_INFORMATION)?)
    }

    pub(super) fn boot_id() -> Option<String> {
        None
    }

    pub(super) fn identity(mut identity: Identity, _group: bool) -> io::Result<Identity> {
        identity.started = Some(started(identity.pid).ok_or_else(|| {
            io::Error::new(
                io::ErrorKind::NotFound,
                format!("process {} cannot be opened", identity.pid),
            )
        })?);
        Ok(identity)
    }

    fn live(pid: u32) -> Option<Process> {
        Some(Process {
            pid,
            started: Some(started(pid)?),
        })
    }

    pub(super) fn look(identity: &Identity) -> Seen {
        Seen {
            host: identity.host.and_then(live),
            leader: live(identity.pid),
            group: Vec::new(),
            cgroup: Vec::new(),
        }
    }

    pub(super) fn signal(target: &Process, signal: Signal) {
        if signal != Signal::Kill {
            return;
        }
        let Some(process) = open(
            target.pid,
            PROCESS_TERMINATE | PROCESS_QUERY_LIMITED_INFORMATION,
        ) else {
            return;
        };
        // The handle pins the process: checked, then terminated.
        if created(&process) != target.started {
            return;
        }
        // SAFETY: a valid handle opened with PROCESS_TERMINATE.
        unsafe { TerminateProcess(process.as_raw_handle(), 1) };
    }
}

#[cfg(not(any(target_os = "linux", windows)))]
pub(crate) mod imp {
    //! No start time is read here: entries cannot be proved, and are left
    //! alone.
    use std::io;

    use childwire_core::Signal;
    use childwire_core::ledger::{Identity, Process, Seen};

    pub(super) fn started(_pid: u32) -> Option<u64> {
        None
    }

    pub(super) fn boot_id() -> Option<String> {
        None
    }

    pub(super) fn identity(identity: Identity, group: bool) -> io::Result<Identity> {
        let pid = identity.pid;
        Ok(identity.with_group(group.then_some(pid)))
    }

    pub(super) fn look(_identity: &Identity) -> Seen {
        Seen::default()
    }

    pub(super) fn signal(_target: &Process, _signal: Signal) {}
}
