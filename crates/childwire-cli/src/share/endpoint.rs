//! The endpoint's directory, lock and peers: what keeps a share private to
//! its user.

use std::fs::{self, DirBuilder, File, OpenOptions};
use std::io;
use std::os::unix::fs::{DirBuilderExt, MetadataExt, OpenOptionsExt, PermissionsExt};
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};

/// The directory that holds `endpoint`: created `0700` when missing;
/// refused when it is not a directory of this user's that only this user
/// can enter (no group or other permission bits, not a symlink).
pub(crate) fn private_dir(endpoint: &Path) -> io::Result<PathBuf> {
    let dir = match endpoint.parent() {
        Some(dir) if !dir.as_os_str().is_empty() => dir.to_path_buf(),
        _ => PathBuf::from("."),
    };
    if fs::symlink_metadata(&dir).is_err() {
        DirBuilder::new().recursive(true).mode(0o700).create(&dir)?;
    }
    check_private(&dir)?;
    Ok(dir)
}

/// Whether `dir` is this user's and no one else's to enter.
pub(crate) fn check_private(dir: &Path) -> io::Result<()> {
    let meta = fs::symlink_metadata(dir)?;
    let refuse = |why: String| {
        Err(io::Error::new(
            io::ErrorKind::PermissionDenied,
            format!("refusing {}: {why}", dir.display()),
        ))
    };
    if !meta.is_dir() {
        return refuse("not a directory (a symlink is not followed)".to_owned());
    }
    let me = rustix::process::geteuid().as_raw();
    if meta.uid() != me {
        return refuse(format!(
            "owned by uid {}, not by you (uid {me})",
            meta.uid()
        ));
    }
    let mode = meta.permissions().mode() & 0o777;
    if mode & 0o077 != 0 {
        return refuse(format!(
            "other users can enter it (mode {mode:03o}); it must be 0700"
        ));
    }
    Ok(())
}

/// The lock a share holds on `ENDPOINT.lock` for its whole life: `None`
/// if another share holds it.
pub(crate) fn lock(endpoint: &Path) -> io::Result<Option<File>> {
    let file = OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .mode(0o600)
        .open(suffixed(endpoint, ".lock"))?;
    match rustix::fs::flock(&file, rustix::fs::FlockOperation::NonBlockingLockExclusive) {
        Ok(()) => Ok(Some(file)),
        Err(rustix::io::Errno::WOULDBLOCK) => Ok(None),
        Err(err) => Err(err.into()),
    }
}

/// `endpoint` with `suffix` added to its file name.
pub(crate) fn suffixed(endpoint: &Path, suffix: &str) -> PathBuf {
    let mut name = endpoint.as_os_str().to_owned();
    name.push(suffix);
    PathBuf::from(name)
}

/// Whether the process at the other end of `stream` runs as this user.
/// Linux asks the kernel (`SO_PEERCRED`); elsewhere the directory's
/// permissions are the only check.
#[cfg(target_os = "linux")]
pub(crate) fn peer_is_me(stream: &impl std::os::fd::AsFd) -> io::Result<bool> {
    let peer = rustix::net::sockopt::socket_peercred(stream)?;
    Ok(peer.uid == rustix::process::geteuid())
}

#[cfg(not(target_os = "linux"))]
pub(crate) fn peer_is_me(_stream: &impl std::os::fd::AsFd) -> io::Result<bool> {
    Ok(true)
}

/// A connection to the share at `endpoint`, if one listens there.
pub(crate) fn try_connect(endpoint: &Path) -> io::Result<Option<UnixStream>> {
    match UnixStream::connect(endpoint) {
        Ok(stream) => Ok(Some(stream)),
        Err(err)
            if matches!(
                err.kind(),
                io::ErrorKind::NotFound | io::ErrorKind::ConnectionRefused
            ) =>
        {
            Ok(None)
        }
        Err(err) => Err(err),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn scratch(name: &str) -> PathBuf {
        let dir =
            std::env::temp_dir().join(format!("childwire-endpoint-{name}-{}", std::process::id()));
        let _ = fs::remove_dir_all(&dir);
        dir
    }

    #[test]
    fn a_missing_directory_is_made_private() {
        let dir = scratch("made");
        let made = private_dir(&dir.join("run/ep.sock")).unwrap();
        let mode = fs::metadata(&made).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o700);
        fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn a_directory_others_can_enter_is_refused() {
        let dir = scratch("open");
        fs::create_dir_all(&dir).unwrap();
        fs::set_permissions(&dir, fs::Permissions::from_mode(0o755)).unwrap();
        let err = private_dir(&dir.join("ep.sock")).unwrap_err();
        assert!(
            err.to_string().contains("other users can enter it"),
            "{err}"
        );
        fs::set_permissions(&dir, fs::Permissions::from_mode(0o700)).unwrap();
        assert!(private_dir(&dir.join("ep.sock")).is_ok());
        fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn one_lock_at_a_time() {
        let dir = scratch("lock");
        let endpoint = private_dir(&dir.join("ep.sock")).unwrap().join("ep.sock");
        let first = lock(&endpoint).unwrap();
        assert!(first.is_some());
        assert!(lock(&endpoint).unwrap().is_none(), "a second share");
        drop(first);
        assert!(lock(&endpoint).unwrap().is_some(), "after the first left");
        fs::remove_dir_all(&dir).unwrap();
    }
}
