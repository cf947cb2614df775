//! A cgroup v2 of the child's own (Linux, opt-in with
//! [`Containment::Cgroup`](childwire_core::Containment::Cgroup)): the child
//! joins it before its program runs, so everything it ever starts is in it
//! too, and `cgroup.kill` ends all of it at once, whatever process group or
//! session a descendant moved to.

use std::collections::BTreeSet;
use std::fs::{self, File, OpenOptions};
use std::io::{self, Write};
use std::os::fd::OwnedFd;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

/// How long a removed cgroup's last processes may take to die before its
/// directory is left behind (logged): SIGKILL takes microseconds, unless a
/// process is stuck in the kernel (uninterruptible I/O).
const EMPTY_WAIT: Duration = Duration::from_secs(10);

/// A child's cgroup: created at spawn, killed and removed when dropped.
#[derive(Debug)]
pub(crate) struct Cgroup {
    dir: PathBuf,
    /// Its `cgroup.procs`, open for writing: the forked child writes `0`
    /// to it to join, and needs no allocation to do so.
    procs: Arc<OwnedFd>,
}

impl Cgroup {
    /// Creates a cgroup under this process's own cgroup v2, or says why it
    /// cannot: no cgroup v2 hierarchy, no `cgroup.kill` (Linux < 5.14), or
    /// no permission (the host's cgroup is not delegated to its user).
    pub(crate) fn create() -> io::Result<Self> {
        let parent = own_cgroup_dir()?;
        // Moving the child from our cgroup into its own needs write access
        // to their common ancestor's `cgroup.procs`: ours.
        crate::sys::access_writable(&parent.join("cgroup.procs")).map_err(
            |err| {
                io::Error::new(
                    err.kind(),
                    format!(
                        "cannot move processes out of the host's cgroup `{}` ({err}); it must be delegated to this user",
                        parent.display()
                    ),
                )
            },
        )?;
        static SEQ: AtomicU64 = AtomicU64::new(0);
        let dir = parent.join(format!(
            "childwire-{}-{}",
            std::process::id(),
            SEQ.fetch_add(1, Ordering::Relaxed)
        ));
        fs::create_dir(&dir).map_err(|err| {
            io::Error::new(
                err.kind(),
                format!("cannot create the cgroup `{}` ({err})", dir.display()),
            )
        })?;
        let procs = match OpenOptions::new()
            .write(true)
            .open(dir.join("cgroup.procs"))
        {
            Ok(file) => OwnedFd::from(file),
            Err(err) => {
                let _ = fs::remove_dir(&dir);
                return Err(err);
            }
        };
        Ok(Self {
            dir,
            procs: Arc::new(procs),
        })
    }

    /// Its `cgroup.procs`, for the forked child to join.
    pub(crate) fn procs(&self) -> Arc<OwnedFd> {
        Arc::clone(&self.procs)
    }

    /// The processes in it now.
    pub(crate) fn members(&self) -> BTreeSet<u32> {
        fs::read_to_string(self.dir.join("cgroup.procs"))
            .map(|list| list.lines().filter_map(|pid| pid.parse().ok()).collect())
            .unwrap_or_default()
    }

    /// SIGKILL to everything in it (the kernel also catches what forks
    /// meanwhile); how many processes were in it.
    pub(crate) fn kill(&self) -> u32 {
        let members = self.members().len();
        if members > 0 {
            if let Err(err) = File::options()
                .write(true)
                .open(self.dir.join("cgroup.kill"))
                .and_then(|mut file| file.write_all(b"1"))
            {
                crate::log::warn!(cgroup = %self.dir.display(), "cgroup.kill failed: {err}");
            }
        }
        u32::try_from(members).unwrap_or(u32::MAX)
    }
}

impl Drop for Cgroup {
    /// Nothing the child started outlives the transport: kill what is
    /// left, and remove the cgroup once it is empty.
    fn drop(&mut self) {
        self.kill();
        if fs::remove_dir(&self.dir).is_ok() {
            return;
        }
        // Killed processes leave the cgroup when they have died, moments
        // later: wait for that on a thread, through `cgroup.events`
        // notifications, not in the caller's task.
        let dir = std::mem::take(&mut self.dir);
        let spawned = crate::job_thread::spawn_named(
            "childwire-cgroup-rm",
            Box::new(move || remove_when_empty(&dir)),
        );
        if let Err(err) = spawned {
            crate::log::warn!("cannot start the thread that removes a cgroup: {err}");
        }
    }
}

/// Removes `dir` once `cgroup.events` says it is no longer populated,
/// waiting on that file's change notifications (`POLLPRI`).
fn remove_when_empty(dir: &Path) {
    use crate::sys::{PollFd, poll};
    let deadline = Instant::now() + EMPTY_WAIT;
    let Ok(events) = File::open(dir.join("cgroup.events")) else {
        let _ = fs::remove_dir(dir);
        return;
    };
    let mut buf = [0u8; 256];
    loop {
        // Each read from the start re-arms the notification.
        let populated = std::os::unix::fs::FileExt::read_at(&events, &mut buf, 0)
            .map(|n| buf[..n].windows(11).any(|w| w == b"populated 1"))
            .unwrap_or(false);
        if !populated && fs::remove_dir(dir).is_ok() {
            return;
        }
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            crate::log::warn!(cgroup = %dir.display(), "the cgroup did not empty in {EMPTY_WAIT:?}; left behind");
            return;
        }
        let _ = poll(&mut [PollFd::new(&events, libc::POLLPRI)], left);
    }
}

/// The cgroup v2 directory of this process: its path from `/proc/self/cgroup`
/// (`0::/path`) under the cgroup2 mount from `/proc/self/mountinfo`.
fn own_cgroup_dir() -> io::Result<PathBuf> {
    let unavailable = |why: &str| io::Error::new(io::ErrorKind::Unsupported, why.to_owned());
    let cgroups = fs::read_to_string("/proc/self/cgroup")?;
    let path = cgroups
        .lines()
        .find_map(|line| line.strip_prefix("0::"))
        .ok_or_else(|| unavailable("this process is in no cgroup v2 hierarchy"))?;
    let mountinfo = fs::read_to_string("/proc/self/mountinfo")?;
    for line in mountinfo.lines() {
        // ID PARENT MAJ:MIN ROOT MOUNTPOINT OPTIONS [OPTIONAL...] - FSTYPE SOURCE SUPER
        let Some((left, right)) = line.split_once(" - ") else {
            continue;
        };
        if right.split_whitespace().next() != Some("cgroup2") {
            continue;
        }
        let mut fields = left.split_whitespace().skip(3);
        let (Some(root), Some(mountpoint)) = (fields.next(), fields.next()) else {
            continue;
        };
        // A mount of a sub-tree (in a container) shows only what is under its root.
        let Some(relative) = path.strip_prefix(root.trim_end_matches('/')) else {
            continue;
        };
        let dir = Path::new(&unescape(mountpoint)).join(relative.trim_start_matches('/'));
        if dir.is_dir() {
            return Ok(dir);
        }
    }
    Err(unavailable(
        "no cgroup v2 filesystem is mounted where this process's cgroup is visible",
    ))
}

/// `mountinfo` escapes spaces and a few other bytes as `\ooo`.
fn unescape(field: &str) -> String {
    let mut out = Vec::with_capacity(field.len());
    let bytes = field.as_bytes();
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'\\' && i + 4 <= bytes.len() {
            if let Some(b) = field
                .get(i + 1..i + 4)
                .and_then(|o| u8::from_str_radix(o, 8).ok())
            {
                out.push(b);
                i += 4;
                continue;
            }
        }
        out.push(bytes[i]);
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}
