//! The spawn ledger on disk: one file per child in a directory the host
//! names, and the clean-up run a host makes at its next start.
//!
//! The directory is created private (0700 on Unix) and each entry private
//! too (0600), written whole under a temporary name and renamed into
//! place, so a reader never sees half an entry. A clean exit removes its
//! entry; a host that dies leaves it, and [`reap_leftovers`] ends what it
//! left: the child, what is left of its process group and of its cgroup,
//! each only once proved to be the process recorded (its PID *and* its
//! start time; see [`Reaper`]).

use std::ffi::OsStr;
use std::fs::{self, File, OpenOptions};
use std::io::{self, Read, Write};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant, SystemTime};

use childwire_core::ledger::{Identity, MAX_ENTRY_LEN, ReapAction, ReapConfig, Reaped, Reaper};

use super::identity;

/// The extension of an entry file.
const ENTRY: &str = "entry";
/// The extension of an entry being written.
const TEMPORARY: &str = "tmp";
/// How old a temporary file must be before a clean-up run removes it: a
/// host that died while writing it left it; a live one renames it in
/// microseconds.
const STALE_TEMPORARY: Duration = Duration::from_secs(60);

/// A spawn ledger: the directory where a host records each child it
/// spawns, so that the next host can end what this one leaves if it dies.
///
/// ```no_run
/// # fn demo(child_pid: u32) -> std::io::Result<()> {
/// use childwire_async::{Ledger, ReapConfig, reap_leftovers};
///
/// let dir = std::env::temp_dir().join("my-host-ledger");
/// // At start: end what a host that died left.
/// for reaped in reap_leftovers(&dir, &ReapConfig::default())? {
///     eprintln!("{reaped}");
/// }
/// let ledger = Ledger::open(&dir)?;
/// // Right after each spawn (the child leads its own process group).
/// let entry = ledger.record_child(child_pid, true, None)?;
/// // At its clean exit.
/// entry.remove()?;
/// # Ok(()) }
/// ```
#[derive(Debug, Clone)]
pub struct Ledger {
    dir: PathBuf,
}

impl Ledger {
    /// Opens the ledger in `dir`, creating it (and its parents) if needed,
    /// private to this user (mode 0700 on Unix; an existing directory is
    /// made so, and one this user cannot change is refused).
    pub fn open(dir: impl AsRef<Path>) -> io::Result<Self> {
        let dir = dir.as_ref().to_owned();
        let mut builder = fs::DirBuilder::new();
        builder.recursive(true);
        #[cfg(unix)]
        {
            use std::os::unix::fs::{DirBuilderExt, PermissionsExt};
            builder.mode(0o700);
            builder.create(&dir)?;
            let mode = fs::metadata(&dir)?.permissions().mode();
            if mode & 0o077 != 0 {
                fs::set_permissions(&dir, fs::Permissions::from_mode(0o700))?;
            }
        }
        #[cfg(not(unix))]
        builder.create(&dir)?;
        Ok(Self { dir })
    }

    /// Its directory.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// Records `identity` (see [`identity_of`](crate::identity_of)): its
    /// entry file is written whole, private (0600 on Unix), then renamed
    /// into place.
    pub fn record(&self, identity: &Identity) -> io::Result<LedgerEntry> {
        // Only a name for the temporary file, unique within this process
        // (off the data path: once per spawn with a ledger); no cost measured.
        static SEQ: AtomicU64 = AtomicU64::new(0);
        let name = format!("{}-{}", identity.pid, identity.started.unwrap_or(0));
        let path = self.dir.join(format!("{name}.{ENTRY}"));
        let temporary = self.dir.join(format!(
            ".{name}-{}-{}.{TEMPORARY}",
            std::process::id(),
            SEQ.fetch_add(1, Ordering::Relaxed)
        ));
        let mut options = OpenOptions::new();
        options.write(true).create_new(true);
        #[cfg(unix)]
        std::os::unix::fs::OpenOptionsExt::mode(&mut options, 0o600);
        let written = options.open(&temporary).and_then(|mut file| {
            file.write_all(identity.encode().as_bytes())?;
            file.sync_all()
        });
        if let Err(err) = written.and_then(|()| fs::rename(&temporary, &path)) {
            let _ = fs::remove_file(&temporary);
            return Err(err);
        }
        Ok(LedgerEntry { path })
    }

    /// Records the child `pid`, just spawned ([`identity_of`](crate::identity_of)
    /// then [`record`](Self::record)).
    pub fn record_child(
        &self,
        pid: u32,
        group: bool,
        cgroup: Option<&Path>,
    ) -> io::Result<LedgerEntry> {
        self.record(&identity::identity_of(pid, group, cgroup)?)
    }
}

/// One child's entry in a [`Ledger`]: remove it when the child has ended
/// cleanly. Dropping it leaves the file (the host may be going down).
#[derive(Debug)]
pub struct LedgerEntry {
    path: PathBuf,
}

impl LedgerEntry {
    /// The entry's file.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Removes the entry: the child ended and left nothing behind. An
    /// entry already gone is no error.
    pub fn remove(self) -> io::Result<()> {
        match fs::remove_file(&self.path) {
            Err(err) if err.kind() != io::ErrorKind::NotFound => Err(err),
            _ => Ok(()),
        }
    }
}

/// Ends what hosts that died left in the ledger `dir`, and says what it
/// ended: one [`Reaped`] per entry (it displays as a sentence).
///
/// Each entry's child, and what is left of its process group and its
/// cgroup, gets SIGTERM, then SIGKILL after `config.term_grace` if still
/// alive; nothing is signalled unless the process with the entry's PID
/// still has the recorded start time (or no process has that PID any
/// more, and its group or cgroup is left). Entries of a host that still
/// runs, and of processes that survived SIGKILL, are kept; the others are
/// removed, and so are files that are not entries (logged).
///
/// Blocking: it waits for the processes to die, at most
/// `config.term_grace + config.kill_grace` (plus a look) in all, whatever
/// the number of entries. Call it at start, before the runtime, or on a
/// blocking thread. A `dir` that does not exist holds nothing to do.
///
/// On Linux the start time is `/proc/PID/stat`'s (with the boot id, so an
/// entry from an earlier boot is only removed). On Windows it is the
/// creation time; a dead host's children are normally ended already by
/// their job object, and only SIGKILL (`TerminateProcess`) is carried out.
/// Elsewhere no start time is recorded, and entries are removed without
/// touching any process.
pub fn reap_leftovers(dir: impl AsRef<Path>, config: &ReapConfig) -> io::Result<Vec<Reaped>> {
    let dir = dir.as_ref();
    let entries = match read_entries(dir) {
        Err(err) if err.kind() == io::ErrorKind::NotFound => return Ok(Vec::new()),
        other => other?,
    };
    let boot_id = identity::boot_id();
    let (paths, identities): (Vec<PathBuf>, Vec<Identity>) = entries.into_iter().unzip();
    let mut reaper = Reaper::new(
        identities.iter().cloned(),
        boot_id.as_deref(),
        config.clone(),
    );
    let mut reaped = Vec::new();
    loop {
        while let Some(action) = reaper.poll_action() {
            match action {
                ReapAction::Look(entry) => {
                    let seen = identity::look(&identities[entry]);
                    reaper.handle_look(entry, &seen, Instant::now());
                }
                ReapAction::Signal {
                    entry,
                    signal,
                    targets,
                    cgroup,
                } => {
                    for target in &targets {
                        identity::signal(target, signal);
                    }
                    #[cfg(target_os = "linux")]
                    if let (true, Some(dir)) = (cgroup, &identities[entry].cgroup) {
                        identity::imp::kill_cgroup(Path::new(dir));
                    }
                    #[cfg(not(target_os = "linux"))]
                    let _ = (entry, cgroup);
                }
            }
        }
        while let Some(outcome) = reaper.poll_outcome() {
            settle(&paths[outcome.entry], &outcome);
            reaped.push(outcome);
        }
        if reaper.is_done() {
            return Ok(reaped);
        }
        let Some(at) = reaper.poll_timeout() else {
            return Ok(reaped);
        };
        std::thread::sleep(at.saturating_duration_since(Instant::now()));
        reaper.handle_timeout(Instant::now());
    }
}

/// Removes `path` and the entry's cgroup if `outcome` says so, and logs it.
fn settle(path: &Path, outcome: &Reaped) {
    crate::log::info!(target: "childwire::ledger", "{outcome}");
    if !outcome.remove_entry() {
        return;
    }
    #[cfg(target_os = "linux")]
    if let Some(dir) = outcome.identity.cgroup.as_deref().map(Path::new) {
        remove_cgroup(dir);
    }
    if let Err(err) = fs::remove_file(path) {
        if err.kind() != io::ErrorKind::NotFound {
            crate::log::warn!(entry = %path.display(), "cannot remove a ledger entry: {err}");
        }
    }
}

/// Removes a dead host's cgroup once its killed members have left it: at
/// once as a rule (their parent is gone, so they are reaped at once), or
/// within half a second.
#[cfg(target_os = "linux")]
fn remove_cgroup(dir: &Path) {
    if !identity::imp::is_ours(dir) {
        return;
    }
    let deadline = Instant::now() + Duration::from_millis(500);
    loop {
        match fs::remove_dir(dir) {
            Ok(()) => return,
            Err(err) if err.kind() == io::ErrorKind::NotFound => return,
            Err(err) if Instant::now() >= deadline => {
                crate::log::warn!(cgroup = %dir.display(), "cannot remove a dead host's cgroup: {err}");
                return;
            }
            Err(_) => std::thread::sleep(Duration::from_millis(10)),
        }
    }
}

/// The entries in `dir`, each with its file. Files that are not entries
/// are logged and removed, and so are stale temporary files.
fn read_entries(dir: &Path) -> io::Result<Vec<(PathBuf, Identity)>> {
    let mut entries = Vec::new();
    for file in fs::read_dir(dir)? {
        let path = file?.path();
        match path.extension().and_then(OsStr::to_str) {
            Some(ENTRY) => match read_entry(&path) {
                Ok(identity) => entries.push((path, identity)),
                Err(err) => {
                    crate::log::warn!(entry = %path.display(), "removed: {err}");
                    let _ = fs::remove_file(&path);
                }
            },
            Some(TEMPORARY) => {
                let stale = fs::metadata(&path)
                    .and_then(|meta| meta.modified())
                    .ok()
                    .and_then(|at| SystemTime::now().duration_since(at).ok())
                    .is_some_and(|age| age >= STALE_TEMPORARY);
                if stale {
                    let _ = fs::remove_file(&path);
                }
            }
            _ => {}
        }
    }
    // In the order recorded, as far as names tell: PID, then start.
    entries.sort_by(|(a, _), (b, _)| a.cmp(b));
    Ok(entries)
}

fn read_entry(path: &Path) -> io::Result<Identity> {
    let mut text = String::new();
    File::open(path)?
        .take(MAX_ENTRY_LEN as u64 + 1)
        .read_to_string(&mut text)?;
    Identity::decode(&text).map_err(|err| io::Error::new(io::ErrorKind::InvalidData, err))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn scratch(name: &str) -> PathBuf {
        let dir =
            std::env::temp_dir().join(format!("childwire-ledger-{name}-{}", std::process::id()));
        let _ = fs::remove_dir_all(&dir);
        dir
    }

    #[test]
    fn entries_are_private_whole_and_removed_on_a_clean_exit() {
        let dir = scratch("private");
        let ledger = Ledger::open(dir.join("nested")).expect("open");
        let identity = Identity::new(4242, Some(77)).with_program(Some("npx".into()));
        let entry = ledger.record(&identity).expect("record");
        assert_eq!(read_entry(entry.path()).expect("read"), identity);
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            let mode = |path: &Path| fs::metadata(path).expect("meta").permissions().mode() & 0o777;
            assert_eq!(mode(ledger.dir()), 0o700);
            assert_eq!(mode(entry.path()), 0o600);
        }
        let names: Vec<_> = fs::read_dir(ledger.dir())
            .expect("list")
            .map(|file| file.expect("file").file_name())
            .collect();
        assert_eq!(names, ["4242-77.entry"], "no temporary file is left");
        let path = entry.path().to_owned();
        entry.remove().expect("remove");
        assert!(!path.exists());
        fs::remove_dir_all(&dir).expect("clean up");
    }

    #[test]
    fn a_run_over_a_missing_dir_or_bad_files_ends_nothing() {
        let dir = scratch("bad");
        assert!(
            reap_leftovers(&dir, &ReapConfig::default())
                .expect("missing")
                .is_empty()
        );
        let ledger = Ledger::open(&dir).expect("open");
        fs::write(dir.join("junk.entry"), "not a ledger entry").expect("write");
        fs::write(dir.join("notes.txt"), "left alone").expect("write");
        // An entry without a start time proves nothing; this process's own
        // is its live host's.
        ledger.record(&Identity::new(1, None)).expect("record");
        let me = std::process::id();
        let own = identity::identity_of(me, false, None).expect("self");
        let own = ledger.record(&own).expect("record");
        let reaped = reap_leftovers(&dir, &ReapConfig::default()).expect("run");
        let verdicts: Vec<String> = reaped.iter().map(ToString::to_string).collect();
        assert!(!dir.join("junk.entry").exists());
        assert!(dir.join("notes.txt").exists());
        if cfg!(any(target_os = "linux", windows)) {
            assert_eq!(reaped.len(), 2, "{verdicts:?}");
            assert!(verdicts[0].contains("cannot be proved"), "{verdicts:?}");
            assert!(verdicts[1].contains("still runs"), "{verdicts:?}");
            assert!(own.path().exists(), "the live host's entry is kept");
        }
        fs::remove_dir_all(&dir).expect("clean up");
    }
}
