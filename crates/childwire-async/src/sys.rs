//! The Unix system calls of the containment code, each a safe function over
//! one `libc` call: process IDs and signals, pidfds, `poll`, `waitid`, and
//! what the forked child does before its exec.
//!
//! Through `libc` rather than a safe wrapper crate because every runtime's
//! tree (Tokio's, async-io's) compiles `libc` already, and a wrapper crate
//! was the largest part of a Tokio user's build that childwire added.
//! Errors are `errno`, read at once with [`io::Error::last_os_error`], which
//! allocates nothing (so the functions the forked child calls may return
//! them).
#![allow(unsafe_code)]

use std::io;
#[cfg(target_os = "linux")]
use std::os::fd::{AsFd, FromRawFd, OwnedFd};
use std::os::fd::{AsRawFd, BorrowedFd};
#[cfg(target_os = "linux")]
use std::time::Duration;

/// `-1` (with `errno` set) is the failure of most calls.
fn check(ret: libc::c_int) -> io::Result<libc::c_int> {
    if ret == -1 {
        Err(io::Error::last_os_error())
    } else {
        Ok(ret)
    }
}

/// A process (or process group) ID that names one: positive, so that no
/// `kill` made with it reaches this process's own group (`0`) or every
/// process (`-1`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Pid(libc::pid_t);

impl Pid {
    /// `pid` if it can name a process.
    pub(crate) fn from_u32(pid: u32) -> Option<Self> {
        libc::pid_t::try_from(pid)
            .ok()
            .filter(|&pid| pid > 0)
            .map(Self)
    }

    /// This process's.
    #[cfg(target_os = "linux")]
    pub(crate) fn current() -> Self {
        // SAFETY: getpid takes nothing and cannot fail.
        Self(unsafe { libc::getpid() })
    }

    /// This process's parent's; `None` if it has none in this PID
    /// namespace. Async-signal-safe.
    #[cfg(target_os = "linux")]
    pub(crate) fn parent() -> Option<Self> {
        // SAFETY: getppid takes nothing and cannot fail.
        let ppid = unsafe { libc::getppid() };
        (ppid > 0).then_some(Self(ppid))
    }
}

/// `kill(pid, signal)`: `signal` to the process `pid`.
pub(crate) fn kill_process(pid: Pid, signal: libc::c_int) -> io::Result<()> {
    // SAFETY: kill takes no pointers; `pid` is positive (see `Pid`).
    check(unsafe { libc::kill(pid.0, signal) }).map(drop)
}

/// `kill(-pgid, signal)`: `signal` to every process of the group `pgid`;
/// with signal `0`, whether the group has a member this process may signal.
/// Group 1 (init's, never a child's) is refused as gone (`ESRCH`): `-1`
/// would name every process this one may signal.
pub(crate) fn kill_process_group(pgid: Pid, signal: libc::c_int) -> io::Result<()> {
    if pgid.0 == 1 {
        return Err(io::Error::from_raw_os_error(libc::ESRCH));
    }
    // SAFETY: kill takes no pointers; `pgid` is above 1, so `-pgid` names
    // that one group.
    check(unsafe { libc::kill(-pgid.0, signal) }).map(drop)
}

/// This process's real user ID.
pub(crate) fn getuid() -> u32 {
    // SAFETY: getuid takes nothing and cannot fail.
    unsafe { libc::getuid() }
}

/// `setsid()`: a new session and process group led by this process.
/// Async-signal-safe.
pub(crate) fn setsid() -> io::Result<()> {
    // SAFETY: setsid takes nothing.
    check(unsafe { libc::setsid() }).map(drop)
}

/// The inode number of the file `fd` is open on (`fstat`).
pub(crate) fn inode(fd: BorrowedFd<'_>) -> io::Result<u64> {
    let mut stat = std::mem::MaybeUninit::<libc::stat>::uninit();
    // SAFETY: `fd` is open for the borrow; fstat writes a whole `stat`
    // into the buffer, which is read only after it succeeded.
    check(unsafe { libc::fstat(fd.as_raw_fd(), stat.as_mut_ptr()) })?;
    // SAFETY: fstat succeeded, so it filled `stat`.
    let stat = unsafe { stat.assume_init() };
    // `st_ino` is not 64 bits wide on every Unix.
    #[allow(clippy::unnecessary_cast)]
    Ok(stat.st_ino as u64)
}

/// `openat(dir, name, flags | O_CLOEXEC)`: the file `name` in the
/// directory `dir` is open on.
#[cfg(target_os = "linux")]
pub(crate) fn openat(
    dir: BorrowedFd<'_>,
    name: &std::ffi::CStr,
    flags: libc::c_int,
) -> io::Result<OwnedFd> {
    // SAFETY: `dir` is open for the borrow and `name` is a NUL-terminated
    // string that outlives the call; no mode is passed, as `flags` creates
    // nothing.
    let fd =
        check(unsafe { libc::openat(dir.as_raw_fd(), name.as_ptr(), flags | libc::O_CLOEXEC) })?;
    // SAFETY: openat succeeded, so `fd` is a new descriptor owned by no one
    // else.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

/// Whether this process's stderr takes a write of `len` bytes now without
/// blocking: `len` is at most `PIPE_BUF` and `poll` says it is writable
/// (a pipe then has room for that much; a file always does).
pub(crate) fn stderr_takes(len: usize) -> bool {
    if len > libc::PIPE_BUF {
        return false;
    }
    let mut fd = libc::pollfd {
        fd: libc::STDERR_FILENO,
        events: libc::POLLOUT,
        revents: 0,
    };
    // SAFETY: one valid `pollfd`, read and written during the call only;
    // a zero timeout: it does not wait.
    let ready = unsafe { libc::poll(&mut fd, 1, 0) };
    ready == 1 && fd.revents & libc::POLLOUT != 0
}

/// `access(path, W_OK)`: whether this process may write to `path`.
#[cfg(target_os = "linux")]
pub(crate) fn access_writable(path: &std::path::Path) -> io::Result<()> {
    use std::os::unix::ffi::OsStrExt;
    let path = std::ffi::CString::new(path.as_os_str().as_bytes())
        .map_err(|_| io::Error::from_raw_os_error(libc::EINVAL))?;
    // SAFETY: `path` is a NUL-terminated string that outlives the call.
    check(unsafe { libc::access(path.as_ptr(), libc::W_OK) }).map(drop)
}

/// `write(fd, bytes)`, once: how many bytes went. Async-signal-safe.
#[cfg(target_os = "linux")]
pub(crate) fn write(fd: BorrowedFd<'_>, bytes: &[u8]) -> io::Result<usize> {
    // SAFETY: `fd` is open for the borrow and `bytes` is valid for reads of
    // its length during the call.
    let written = unsafe { libc::write(fd.as_raw_fd(), bytes.as_ptr().cast(), bytes.len()) };
    usize::try_from(written).map_err(|_| io::Error::last_os_error())
}

/// `prctl(PR_SET_PDEATHSIG, signal)`: `signal` to this process when the
/// thread that forked it ends. Async-signal-safe.
#[cfg(target_os = "linux")]
pub(crate) fn set_parent_death_signal(signal: libc::c_int) -> io::Result<()> {
    let signal =
        libc::c_ulong::try_from(signal).map_err(|_| io::Error::from_raw_os_error(libc::EINVAL))?;
    // SAFETY: PR_SET_PDEATHSIG reads one integer argument and no pointer.
    check(unsafe { libc::prctl(libc::PR_SET_PDEATHSIG, signal) }).map(drop)
}

/// `pidfd_open(pid, 0)`: a descriptor that pins the process `pid` (its PID
/// cannot name another process while the descriptor is open), close-on-exec
/// (as every pidfd is). Linux 5.3 and later.
#[cfg(target_os = "linux")]
pub(crate) fn pidfd_open(pid: Pid) -> io::Result<OwnedFd> {
    // SAFETY: pidfd_open takes a PID and flags, no pointers.
    let fd = unsafe { libc::syscall(libc::SYS_pidfd_open, pid.0, 0 as libc::c_uint) };
    if fd < 0 {
        return Err(io::Error::last_os_error());
    }
    let fd = libc::c_int::try_from(fd).map_err(|_| io::Error::from_raw_os_error(libc::EBADF))?;
    // SAFETY: the kernel returned a new descriptor, which nothing else owns.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

/// `pidfd_send_signal(pidfd, signal, NULL, 0)`: `signal` to the process the
/// pidfd pins, never to another that took its PID since.
#[cfg(target_os = "linux")]
pub(crate) fn pidfd_send_signal(pidfd: BorrowedFd<'_>, signal: libc::c_int) -> io::Result<()> {
    // SAFETY: the siginfo pointer may be null (then the kernel fills in
    // what `kill` would); `pidfd` is open for the borrow.
    let ret = unsafe {
        libc::syscall(
            libc::SYS_pidfd_send_signal,
            pidfd.as_raw_fd(),
            signal,
            std::ptr::null::<libc::siginfo_t>(),
            0 as libc::c_uint,
        )
    };
    if ret < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// One descriptor to [`poll`] and what to wait for on it (`libc::POLLIN`,
/// ...), borrowed for as long as the entry lives.
#[cfg(target_os = "linux")]
#[repr(transparent)]
pub(crate) struct PollFd<'fd> {
    raw: libc::pollfd,
    fd: std::marker::PhantomData<BorrowedFd<'fd>>,
}

#[cfg(target_os = "linux")]
impl<'fd> PollFd<'fd> {
    pub(crate) fn new<F: AsFd>(fd: &'fd F, events: libc::c_short) -> Self {
        Self {
            raw: libc::pollfd {
                fd: fd.as_fd().as_raw_fd(),
                events,
                revents: 0,
            },
            fd: std::marker::PhantomData,
        }
    }

    /// The events the last [`poll`] found.
    pub(crate) fn revents(&self) -> libc::c_short {
        self.raw.revents
    }
}

/// `ppoll(fds, timeout)`: how many of `fds` have events, waiting up to
/// `timeout` for one. An interrupted wait is an error (`Interrupted`).
#[cfg(target_os = "linux")]
pub(crate) fn poll(fds: &mut [PollFd<'_>], timeout: Duration) -> io::Result<usize> {
    // SAFETY: `timespec` is a plain C struct (some targets have padding
    // fields, hence no literal), for which all zeroes is a valid value.
    let mut limit: libc::timespec = unsafe { std::mem::zeroed() };
    limit.tv_sec = libc::time_t::try_from(timeout.as_secs()).unwrap_or(libc::time_t::MAX);
    // Below 10^9: fits the field everywhere (a fallible conversion only
    // where it is 32 bits wide).
    #[allow(clippy::unnecessary_fallible_conversions)]
    {
        limit.tv_nsec = timeout.subsec_nanos().try_into().unwrap_or(0);
    }
    let len = libc::nfds_t::try_from(fds.len())
        .map_err(|_| io::Error::from_raw_os_error(libc::EINVAL))?;
    // SAFETY: `PollFd` is a `pollfd` (repr(transparent)), so `fds` is an
    // array of `len` of them, whose descriptors are open for their borrows;
    // `limit` outlives the call; a null signal mask keeps this thread's.
    let ready = check(unsafe {
        libc::ppoll(
            fds.as_mut_ptr().cast::<libc::pollfd>(),
            len,
            &raw const limit,
            std::ptr::null(),
        )
    })?;
    Ok(usize::try_from(ready).unwrap_or(0))
}

/// `waitid(P_PIDFD, pidfd, WEXITED | WNOWAIT)`: how the process the pidfd
/// pins (a child of this one) ended, without reaping it; `None` if it has
/// not (or reports no status).
#[cfg(target_os = "linux")]
pub(crate) fn exit_of_pidfd(pidfd: BorrowedFd<'_>) -> io::Result<Option<childwire_core::Exit>> {
    use childwire_core::Exit;
    let id = libc::id_t::try_from(pidfd.as_raw_fd())
        .map_err(|_| io::Error::from_raw_os_error(libc::EBADF))?;
    // SAFETY: `siginfo_t` is a plain C struct for which all zeroes is a
    // valid value; waitid may return without filling it (then `si_pid`
    // stays 0, which is checked).
    let mut info: libc::siginfo_t = unsafe { std::mem::zeroed() };
    // SAFETY: `info` is valid for writes for the call; `pidfd` is open.
    check(unsafe {
        libc::waitid(
            libc::P_PIDFD,
            id,
            &raw mut info,
            libc::WEXITED | libc::WNOWAIT,
        )
    })?;
    // SAFETY: waitid succeeded, so `info` is a SIGCHLD siginfo, or still
    // zeroes: either way the union members read are initialized.
    let (pid, status) = unsafe { (info.si_pid(), info.si_status()) };
    if pid == 0 {
        return Ok(None);
    }
    Ok(match info.si_code {
        libc::CLD_EXITED => Some(Exit::Code(status)),
        libc::CLD_KILLED | libc::CLD_DUMPED => Some(Exit::Signal(status)),
        _ => None,
    })
}

/// The clock tick `/proc`'s CPU times count in, per second.
#[cfg(target_os = "linux")]
pub(crate) fn clock_ticks_per_second() -> u64 {
    // SAFETY: sysconf takes a constant and no pointer.
    let ticks = unsafe { libc::sysconf(libc::_SC_CLK_TCK) };
    // Linux has said 100 on every architecture for decades.
    u64::try_from(ticks).unwrap_or(100)
}
