//! The few process-level calls std does not offer (on Unix, and their Windows counterparts).

use std::io;

/// Ignores SIGTERM from now on, so only SIGKILL can end this process.
#[cfg(unix)]
pub(crate) fn ignore_sigterm() -> io::Result<()> {
    // SAFETY: installing SIG_IGN runs no code of ours in signal context; it only changes the
    // disposition, and no other thread of this program touches SIGTERM.
    let previous = unsafe { libc::signal(libc::SIGTERM, libc::SIG_IGN) };
    if previous == libc::SIG_ERR {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// Windows' closest thing to SIGTERM is a console control event (`CTRL_BREAK_EVENT`, which a
/// host sends to a child it started in a process group of its own, or `CTRL_C_EVENT`): a handler
/// that claims every event makes this process ignore them, so only termination can end it.
#[cfg(windows)]
pub(crate) fn ignore_sigterm() -> io::Result<()> {
    use windows_sys::Win32::System::Console::SetConsoleCtrlHandler;
    use windows_sys::core::BOOL;
    /// Runs on a thread the system starts for each event; TRUE says "handled, do not exit".
    unsafe extern "system" fn ignore(_event: u32) -> BOOL {
        1
    }
    // SAFETY: `ignore` is a valid handler for the life of the process (a plain function that
    // touches nothing).
    if unsafe { SetConsoleCtrlHandler(Some(ignore), 1) } == 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// Without SIGTERM there is nothing to ignore.
#[cfg(not(any(unix, windows)))]
pub(crate) fn ignore_sigterm() -> io::Result<()> {
    Ok(())
}

/// Makes `cmd`'s child start a new session (`setsid`), leaving our process group and session.
#[cfg(unix)]
pub(crate) fn setsid_on_spawn(cmd: &mut std::process::Command) {
    use std::os::unix::process::CommandExt;
    // SAFETY: the hook runs between fork and exec; setsid is async-signal-safe, and the closure
    // allocates nothing (its error is built from the raw errno).
    unsafe {
        cmd.pre_exec(|| {
            if libc::setsid() == -1 {
                return Err(io::Error::last_os_error());
            }
            Ok(())
        });
    }
}

/// This process's process group ID.
#[cfg(unix)]
pub(crate) fn pgid() -> io::Result<u32> {
    // SAFETY: getpgid takes a plain integer and touches no memory of ours; 0 means "this process".
    let pgid = unsafe { libc::getpgid(0) };
    u32::try_from(pgid).map_err(|_| io::Error::last_os_error())
}

/// Closes stdin, stdout and stderr: what a daemon does once it holds what it needs.
#[cfg(unix)]
pub(crate) fn close_stdio() {
    for fd in 0..=2 {
        // SAFETY: closing descriptors 0-2, which no Rust value of this program owns (std's
        // handles only name them); nothing reads or writes them after this.
        unsafe {
            libc::close(fd);
        }
    }
}

/// Forks and exits, over and over, `pause` apart: each new process is the one that goes on, so
/// this process's PID keeps changing (an escapee a scan of `/proc` must chase). Only SIGKILL
/// ends the line early; it ends itself after `lifetime` (counted from the first hop), so that a
/// test that failed to end it does not leave it churning PIDs for ever. Every process of the line
/// stays in the process group it started in: a test cleaning up after a failure kills the group.
#[cfg(unix)]
pub(crate) fn hop_forever(pause: std::time::Duration, lifetime: std::time::Duration) -> ! {
    let until = std::time::Instant::now() + lifetime;
    while std::time::Instant::now() < until {
        std::thread::sleep(pause);
        // SAFETY: this process is single-threaded here (the sleeper starts no thread), so the
        // child of the fork may go on running Rust code; the parent only exits.
        match unsafe { libc::fork() } {
            0 => {}
            -1 => std::thread::sleep(std::time::Duration::from_millis(1)),
            // SAFETY: `_exit` ends this process at once, running no handler of ours.
            _ => unsafe { libc::_exit(0) },
        }
    }
    // SAFETY: as above.
    unsafe { libc::_exit(0) }
}

/// Forking is Unix's: the scenario refuses `hop` elsewhere.
#[cfg(not(unix))]
pub(crate) fn hop_forever(_pause: std::time::Duration, _lifetime: std::time::Duration) -> ! {
    loop {
        std::thread::park();
    }
}

/// Without stdio descriptors to close there is nothing to do.
#[cfg(not(unix))]
pub(crate) fn close_stdio() {}

/// Process groups are a Unix notion.
#[cfg(not(unix))]
pub(crate) fn pgid() -> io::Result<u32> {
    Err(io::Error::new(
        io::ErrorKind::Unsupported,
        "no process groups",
    ))
}

/// The raw bytes of an OS string (lossy where the platform has no byte view).
pub(crate) fn os_bytes(s: &std::ffi::OsStr) -> Vec<u8> {
    #[cfg(unix)]
    {
        std::os::unix::ffi::OsStrExt::as_bytes(s).to_vec()
    }
    #[cfg(not(unix))]
    {
        s.to_string_lossy().into_owned().into_bytes()
    }
}
