//! What the forked child does before it runs the program (Linux): join its
//! cgroup, and tie its life to the host's. Unsafe because
//! `CommandExt::pre_exec` is.
#![allow(unsafe_code)]

use std::io;
use std::os::fd::{AsFd, OwnedFd};
use std::sync::Arc;

use crate::sys::{self, Pid};

/// The steps, decided in the parent; the child only carries them out.
pub(crate) struct ChildSetup {
    /// `cgroup.procs` of the child's cgroup, open for writing.
    pub(crate) cgroup_procs: Option<Arc<OwnedFd>>,
    /// The host's PID, with parent-death safety on.
    pub(crate) parent: Option<Pid>,
}

impl ChildSetup {
    /// Runs in the forked child: only raw system calls on values prepared
    /// before the fork (no allocation, no lock), as the fork of a
    /// multi-threaded process requires. A failure fails the spawn.
    fn run(&self) -> io::Result<()> {
        if let Some(procs) = &self.cgroup_procs {
            // `0` is "the writing process": the child joins before its
            // program runs, so nothing it starts can be outside.
            sys::write(procs.as_fd(), b"0")?;
        }
        if let Some(parent) = self.parent {
            sys::set_parent_death_signal(libc::SIGKILL)?;
            // The host may have died before the line above: then the signal
            // never comes, and the child was re-parented already.
            if Pid::parent() != Some(parent) {
                return Err(io::Error::from_raw_os_error(libc::ESRCH));
            }
        }
        Ok(())
    }
}

/// Makes `command`'s child carry `setup` out between fork and exec.
pub(crate) fn install(command: &mut std::process::Command, setup: ChildSetup) {
    use std::os::unix::process::CommandExt;
    if setup.cgroup_procs.is_none() && setup.parent.is_none() {
        // Leaves std free to use posix_spawn.
        return;
    }
    // SAFETY: `ChildSetup::run` is async-signal-safe: it makes three system
    // calls (write, prctl, getppid) through libc on a descriptor and a PID
    // prepared before the fork, allocates nothing and takes no lock; the
    // error it may return is built from a raw errno, without allocating.
    // The descriptor stays open until the spawn returns: `command` holds
    // the closure, and the closure holds it.
    unsafe {
        command.pre_exec(move || setup.run());
    }
}
