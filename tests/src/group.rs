//! Process groups, asked and ended through `kill` (Unix): one system call each, so a process
//! that keeps changing its PID cannot slip past them as it can past a listing of `/proc`.

// The workspace denies unsafe code; `kill` is what std does not offer for a group.
#![allow(unsafe_code)]

/// Whether process group `pgid` has any member, a zombie not yet reaped included (`kill -0`).
/// Elsewhere than Unix: never.
pub fn group_exists(pgid: u32) -> bool {
    #[cfg(unix)]
    {
        let Ok(pgid) = libc::pid_t::try_from(pgid) else {
            return false;
        };
        // SAFETY: signal 0 sends nothing; `kill` only checks that the group exists.
        unsafe { libc::kill(-pgid, 0) == 0 }
    }
    #[cfg(not(unix))]
    {
        let _ = pgid;
        false
    }
}

/// SIGKILL to every member of process group `pgid` (none left: nothing happens). Elsewhere than
/// Unix: nothing.
pub fn kill_group(pgid: u32) {
    #[cfg(unix)]
    {
        if let Ok(pgid) = libc::pid_t::try_from(pgid) {
            // SAFETY: a signal to a process group; an absent group is an error we ignore.
            unsafe { libc::kill(-pgid, libc::SIGKILL) };
        }
    }
    #[cfg(not(unix))]
    {
        let _ = pgid;
    }
}

/// Sends SIGKILL to process group `.0` when dropped, pass or fail: a test that starts a process
/// group which must not outlive it (one that keeps forking) holds one.
#[derive(Debug)]
pub struct KillGroupOnDrop(pub u32);

impl Drop for KillGroupOnDrop {
    fn drop(&mut self) {
        kill_group(self.0);
    }
}
