//! Linux: finding what a child left behind, and ending it.
//!
//! The sweep after a child's exit costs what the child's own tree costs:
//! - First, without reading anything of other processes, whether anything
//!   is left at all ([`left_behind`]): a writer still on the child's stdout
//!   or stderr (copies of the host's read ends poll `POLLHUP` once no writer
//!   is left), a reader still on its stdin (a write end polls `POLLERR` once
//!   no reader is left: a copy of the host's own end, kept until the host
//!   closes it while the child may still read, then a write end opened
//!   through an `O_PATH` handle on the pipe, taken at the spawn, and kept
//!   once no reader is left: see [`StdinWatch`]),
//!   both in one `poll`, or a live member of its process group (one
//!   `kill(-pgid, 0)`).
//!   A cgroup's members are listed by the cgroup itself. A child that left
//!   nothing behind, the usual case, is done here, in three system calls
//!   at most.
//! - Only then, [`scan`]: passes over `/proc` that serve every sweep
//!   waiting at that moment (the sweeper thread gathers them), skipping
//!   every process older than the child before reading anything but its
//!   `stat` (nothing older can be its descendant), and reading the
//!   descriptor table of each remaining process once per pass, whichever
//!   sweeps ask. After each pass, once what it ended has died, the first
//!   step is asked again: while something still holds the pipes and the
//!   last passes changed something (ended a process, or found one gone
//!   before it could be ended) or changed nothing for less than
//!   [`STILL_FOR`], another pass runs. A descendant that keeps
//!   changing its PID (it forks, the parent exits, again and again) is
//!   chased this way until it is caught, however often it forks, within
//!   [`CHASE`].
//!
//! A process holding any of the child's pipes, either end, in any access
//! mode (a descendant that reopened `/proc/self/fd/1` read-write counts),
//! is a holder, and the scan finds it. What the first step cannot see: a
//! process that holds a pipe only in the host's direction (the read end of
//! stdout or stderr, the write end of stdin, which only a reopening through
//! `/proc` in that mode gives), since the host's own ends look the same; it
//! is found whenever a scan runs, and always under a cgroup.

use std::collections::BTreeSet;
use std::ffi::CString;
use std::fs;
use std::io;
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::os::unix::fs::OpenOptionsExt;
use std::sync::atomic::{AtomicBool, AtomicU8, AtomicU32, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::task::Waker;
use std::time::{Duration, Instant};

use childwire_core::{Exit, Swept};

use crate::runtime::PipeIds;
use crate::sys::{Pid, PollFd, kill_process_group, pidfd_open, pidfd_send_signal, poll};

/// How long the passes of one scan may go on chasing what keeps the pipes
/// held while it changes (new PIDs, processes gone before they could be
/// ended). Reached only by a descendant that forks faster than a pass can
/// end it, for this long.
pub(super) const CHASE: Duration = Duration::from_secs(10);

/// How long passes that change nothing (end nothing, find nothing gone)
/// go on before what still holds the pipes is taken to be out of reach (a
/// process of another user, one older than the child that was handed a
/// pipe, a spawn of this host before its exec). Counted in time, not in
/// passes: a descendant changing its PID can be missed by a few passes in
/// a row (seen on a loaded machine), so a few quick passes prove nothing.
const STILL_FOR: Duration = Duration::from_millis(200);

/// The pause after the first pass that changes nothing; it doubles after
/// each further one, so that [`STILL_FOR`] costs a handful of passes.
const STILL_PAUSE: Duration = Duration::from_millis(5);

/// How long the processes one pass sent SIGKILL may take to die (and so
/// let go of the pipes) before the pipes are checked again; also how long
/// a stopping driver's child, just sent SIGKILL, may take before the scan
/// begins.
const DEATH_WAIT: Duration = Duration::from_millis(200);

/// Why a process is the child's leftover.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Found {
    /// In the child's process group.
    Group,
    /// In the child's cgroup.
    Cgroup,
    /// Holds one of the child's pipes.
    Pipe,
}

/// What tells, without looking at any process, whether anything but the
/// host still holds the child's end of one of its pipes. Cheap to clone
/// (the handles are shared).
#[derive(Clone, Debug, Default)]
pub(super) struct Holders {
    /// Copies of the host's read ends of the pipes the child writes
    /// (stdout, stderr): a read end polls `POLLHUP` once no writer is left.
    written: Vec<Arc<OwnedFd>>,
    /// A pipe the child writes has no copy: it counts as held.
    unwatched: bool,
    /// The child's stdin pipe.
    stdin: StdinProbe,
}

/// How a reader left on the child's stdin is seen.
#[derive(Clone, Debug, Default)]
enum StdinProbe {
    /// No stdin pipe is known (a runtime that gave no pipe ids).
    #[default]
    None,
    /// Known, but no handle could be taken: it counts as held.
    Unknown,
    /// The watch on the pipe, shared with the host's end.
    Watch(StdinWatch),
}

/// A write end of the child's stdin pipe that the host can poll after the
/// exit, to learn whether any reader is left (a write end polls `POLLERR`
/// once none is), without keeping the child from seeing its EOF. Shared by
/// the host's end, which says when it closes, and the sweep, which asks.
///
/// While the host's own end is open, this is a copy of it: one more writer
/// changes nothing then. Beside it, from the spawn, it keeps an `O_PATH`
/// handle on the pipe, which opens nothing (no reader, no writer). When the
/// host closes its end while the child may still read (a shutdown closing
/// stdin, kill-on-drop off), the copy goes: the child sees its EOF, and a
/// write end is opened through the handle at a check after the exit, let go
/// if a reader is left and else kept as the copy (no reader can wait for
/// its end of file then, and the report comes without its `close`). When
/// the host closes its end after the exit (a dropped transport, the usual
/// case), the copy stays until the child's background task and any sweep
/// still running are done with it, and no check opens anything: a dropped
/// transport's sweep costs the `poll` alone.
///
/// A lock, because the host's end closes on whatever thread drops it while
/// the sweeper thread may be checking; it is taken once at that close and
/// once per check, never per message. What the watch pays for: a dropped
/// transport's sweep makes one `openat` and one `close` fewer per child,
/// and the "500 dropped at once" row of `cargo bench -p childwire-bench
/// --bench scale` went from +1.60 ms against 96cbc77 (the median paired
/// difference of 130 rounds) to -0.30 ms (140 rounds; docs/performance.md).
/// What the handle taken at the spawn pays for: made at the host's close,
/// its `openat` came between a graceful shutdown and the child's EOF. The
/// whole shutdown beside 2,000 processes (`cargo bench -p childwire-bench
/// --bench containment`) came out 4.3 µs faster with the handle made at the
/// spawn (the median paired difference of 20 rounds, faster in 16), for one
/// descriptor more per running child (docs/performance.md).
#[derive(Clone, Debug)]
pub(crate) struct StdinWatch(Arc<Mutex<Watched>>);

#[derive(Debug)]
struct Watched {
    /// A copy of the host's write end, until the host closes its end while
    /// the child may still read; after the exit, a write end opened for a
    /// check that found no reader.
    copy: Option<OwnedFd>,
    /// An `O_PATH` handle on the pipe, taken at the spawn (off the way
    /// from a shutdown to the child's EOF); `None` if it could not be had.
    path: Option<PipePath>,
}

/// An `O_PATH` handle on a pipe, with the `/proc/self/fd` it is named in
/// (of the process that took it, so that opening through it asks nothing
/// of the process again) and its name there.
#[derive(Debug)]
struct PipePath {
    /// Kept open for `name` to name it.
    _handle: OwnedFd,
    dir: Arc<OwnedFd>,
    name: CString,
}

impl PipePath {
    /// An `O_PATH` handle on the pipe `end` is an end of: it opens
    /// nothing (no reader, no writer, so the child's end-of-file and the
    /// host's broken pipe come as they would without it), and a write end
    /// opened through it tells whether any reader is left (the watch keeps
    /// that end only when none is).
    fn of(end: BorrowedFd<'_>) -> Option<Self> {
        let dir = ProcFds::current()?;
        let handle = crate::sys::openat(dir.as_fd(), &fd_name(end)?, libc::O_PATH).ok()?;
        let name = fd_name(handle.as_fd())?;
        Some(Self {
            _handle: handle,
            dir,
            name,
        })
    }

    /// A new write end of the pipe. Through `/proc/self/fd`, an `O_PATH`
    /// descriptor opens its file anew; for a pipe that is a new end, which
    /// never blocks.
    fn open_writer(&self) -> Option<OwnedFd> {
        crate::sys::openat(
            self.dir.as_fd(),
            &self.name,
            libc::O_WRONLY | libc::O_NONBLOCK,
        )
        .ok()
    }
}

impl StdinWatch {
    /// A watch on the pipe whose host end is `stdin`, taken at the spawn.
    pub(crate) fn new(stdin: BorrowedFd<'_>) -> Option<Self> {
        let copy = stdin.try_clone_to_owned().ok()?;
        Some(Self(Arc::new(Mutex::new(Watched {
            copy: Some(copy),
            path: PipePath::of(stdin),
        }))))
    }

    /// The host is closing its end. If the child may still read it, the
    /// copy goes now (the `O_PATH` handle stays), so that the child sees
    /// EOF.
    pub(crate) fn host_closed(&self, child_exited: bool) {
        if child_exited {
            return;
        }
        let mut watched = self.0.lock().unwrap_or_else(PoisonError::into_inner);
        watched.copy = None;
    }

    /// Whether anything is left holding the child's pipes, asked after
    /// its exit: `None` if that cannot be told (the write end could not be
    /// had), else what `ask` says of the write end it is given, which it
    /// polls for a reader. A write end opened for the question is kept when
    /// nothing is left: no reader can wait for its end of file then, and a
    /// close on the way to the report is saved (docs/performance.md).
    fn ask(&self, ask: impl FnOnce(BorrowedFd<'_>) -> bool) -> Option<bool> {
        let mut watched = self.0.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some(copy) = &watched.copy {
            return Some(ask(copy.as_fd()));
        }
        let end = watched.path.as_ref()?.open_writer()?;
        let held = ask(end.as_fd());
        if !held {
            watched.copy = Some(end);
        }
        Some(held)
    }
}

impl Holders {
    /// The probes for a child with `pipes`, taken right after its spawn:
    /// the copies of the read ends `pipes` holds, and its watch on the stdin
    /// pipe.
    pub(super) fn new(pipes: &PipeIds) -> Self {
        let written = pipes
            .ids
            .iter()
            .filter(|(_, child_writes)| *child_writes)
            .count();
        let stdin = if !pipes.ids.iter().any(|(_, child_writes)| !child_writes) {
            StdinProbe::None
        } else {
            pipes
                .stdin_watch
                .clone()
                .map_or(StdinProbe::Unknown, StdinProbe::Watch)
        };
        Self {
            written: pipes.watch.clone(),
            unwatched: pipes.watch.len() < written,
            stdin,
        }
    }

    /// Whether anything but the host still holds the child's end of a pipe:
    /// a writer on stdout or stderr, a reader on stdin. One `poll` asks both
    /// (with, once the host closed stdin before the exit, a write end opened
    /// for it), whatever runs on the machine. Asked only after the exit.
    pub(super) fn held(&self) -> bool {
        if self.unwatched {
            return true;
        }
        match &self.stdin {
            StdinProbe::None => self.poll(None),
            StdinProbe::Unknown => true,
            StdinProbe::Watch(watch) => watch.ask(|end| self.poll(Some(end))).unwrap_or(true),
        }
    }

    /// [`held`](Self::held)'s `poll`, with `stdin` a write end of the
    /// child's stdin pipe if it is known.
    fn poll(&self, stdin: Option<BorrowedFd<'_>>) -> bool {
        if self.written.is_empty() && stdin.is_none() {
            return false;
        }
        let mut fds: Vec<PollFd<'_>> = self
            .written
            .iter()
            .map(|fd| PollFd::new(fd.as_ref(), libc::POLLIN))
            .collect();
        // A write end polls `POLLERR` once no reader is left.
        fds.extend(stdin.as_ref().map(|end| PollFd::new(end, libc::POLLOUT)));
        if poll_now(&mut fds).is_err() {
            return true;
        }
        let (written, stdin) = fds.split_at(self.written.len());
        // A read end polls `POLLHUP` once no writer is left.
        written.iter().any(|fd| fd.revents() & libc::POLLHUP == 0)
            || stdin.iter().any(|fd| fd.revents() & libc::POLLERR == 0)
    }
}

/// The name of `fd` in `/proc/self/fd`.
fn fd_name(fd: BorrowedFd<'_>) -> Option<CString> {
    CString::new(std::os::fd::AsRawFd::as_raw_fd(&fd).to_string()).ok()
}

/// This process's `/proc/self/fd`, opened once (an `O_PATH` directory
/// handle) so that a reopening walks one name instead of four: `proc`,
/// `self` (which reads this process's PID and looks it up), `fd` and the
/// descriptor. Kept with the PID it was opened by, since a process forked
/// from this one without an exec inherits the handle, which still names
/// its parent's descriptors there: that process opens its own. A watch
/// takes it at the spawn (where the PID is asked), so the probe after the
/// exit asks nothing of the process.
///
/// What it pays for: the stdin probe's reopening is the whole cost that
/// the probe adds to a graceful shutdown's report after the child's exit
/// (`cargo bench -p childwire-bench --bench containment`, "alone", medians
/// of ten interleaved runs: 108.6 µs with the probe, 103.0 µs without).
/// Through the handle that median came down by 0.9 µs (the median of 29
/// paired runs against the whole path, faster in 19; beside 2,000
/// processes 1.3 µs, in 18); in a loop on this machine a reopening, its
/// `poll` and its close take 1.4 µs through the handle, 2.0 µs by the
/// whole path.
struct ProcFds;

impl ProcFds {
    /// The directory handle, or `None` if `/proc` cannot be had.
    fn current() -> Option<Arc<OwnedFd>> {
        static DIR: Mutex<Option<(crate::sys::Pid, Arc<OwnedFd>)>> = Mutex::new(None);
        let pid = crate::sys::Pid::current();
        let mut dir = DIR.lock().unwrap_or_else(PoisonError::into_inner);
        if dir.as_ref().is_none_or(|(opened_by, _)| *opened_by != pid) {
            // `O_PATH` with read access, which is `O_RDONLY`, 0 (std adds
            // `O_CLOEXEC`).
            let fd = fs::OpenOptions::new()
                .read(true)
                .custom_flags(libc::O_PATH | libc::O_DIRECTORY)
                .open("/proc/self/fd")
                .ok()?;
            *dir = Some((pid, Arc::new(fd.into())));
        }
        dir.as_ref().map(|(_, fd)| Arc::clone(fd))
    }
}

/// What one sweep looks for: owned, so that it can wait for the sweeper
/// thread.
#[derive(Debug)]
pub(super) struct Target {
    /// The child itself is no leftover: when the driver stops it is
    /// swept before its own death, and ended by its own SIGKILL.
    pub(super) child: Option<u32>,
    /// The child's pidfd: whether it has exited (until then it holds the
    /// pipes itself).
    pub(super) child_fd: Option<Arc<OwnedFd>>,
    /// The child's process group, if it leads one.
    pub(super) group: Option<u32>,
    /// The inode numbers of the child's pipes.
    pub(super) pipes: Vec<u64>,
    /// Whether anything still holds them.
    pub(super) holders: Holders,
    /// The child's start time (clock ticks since boot): older processes
    /// cannot be its descendants, so nothing of them but their `stat` is
    /// read.
    pub(super) started: u64,
    /// The members of the child's cgroup when the sweep began.
    pub(super) in_cgroup: BTreeSet<u32>,
}

impl Target {
    /// Why `pid` (whose `stat` is `stat`) is this child's leftover, if it
    /// is; `held` caches the pipes it holds, read at most once per process
    /// however many sweeps ask.
    fn claims(&self, pid: u32, stat: &Stat, held: &mut Option<Vec<u64>>) -> Option<Found> {
        if stat.started < self.started {
            return None;
        }
        if self.group == Some(stat.pgrp) {
            return Some(Found::Group);
        }
        if self.in_cgroup.contains(&pid) {
            return Some(Found::Cgroup);
        }
        if self.pipes.is_empty() {
            return None;
        }
        held.get_or_insert_with(|| pipes_held_by(pid))
            .iter()
            .any(|inode| self.pipes.contains(inode))
            .then_some(Found::Pipe)
    }

    /// Whether the child has exited (or is not known).
    fn child_exited(&self) -> bool {
        self.child_fd.as_deref().is_none_or(exited)
    }
}

/// What a sweep ended so far, shared with whoever waits for it: a caller
/// that stops waiting reads what was ended by then.
///
/// Atomics and a lock because the scan thread writes them while the caller
/// may read them at any moment; off the data path (after a child's exit,
/// and only when something still holds its pipes), so no cost was measured.
#[derive(Debug, Default)]
pub(super) struct Progress {
    ended: AtomicU32,
    held_pipes: AtomicBool,
    /// Whether one pass over `/proc` went through for this sweep.
    passed: AtomicBool,
    /// How it ended, and whether its driver stopped waiting: [`OVER`],
    /// [`PANICKED`], [`ABANDONED`]. One word, so that the scan thread and a
    /// driver that drops its wait agree on who logs the result. It replaced
    /// a channel of results, which compiled `std`'s channels once more in
    /// every cold build (docs/performance.md); read once per sweep round.
    end: AtomicU8,
    /// The task to wake after each pass, and once the result is in.
    waker: Mutex<Option<Waker>>,
}

/// The scan is done: what `Progress` holds is the result.
const OVER: u8 = 1;
/// The scan panicked: what `Progress` holds is what it ended before.
const PANICKED: u8 = 2;
/// Nobody waits for the result any more.
const ABANDONED: u8 = 4;

impl Progress {
    /// Wakes `waker` after each pass from now on, and once the result is
    /// sent.
    pub(super) fn wake_on_progress(&self, waker: &Waker) {
        *self.waker.lock().unwrap_or_else(PoisonError::into_inner) = Some(waker.clone());
    }

    /// Wakes the task waiting for this sweep, if any.
    pub(super) fn wake(&self) {
        let waker = self
            .waker
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone();
        if let Some(waker) = waker {
            waker.wake();
        }
    }

    /// Whether one pass over `/proc` went through for this sweep: what it
    /// ended then is counted.
    pub(super) fn passed(&self) -> bool {
        self.passed.load(Ordering::Acquire)
    }

    /// Marks the sweep over (`panicked`: its scan did not finish); whether
    /// its driver still waits for the result (else it is the log's).
    pub(super) fn finish(&self, panicked: bool) -> bool {
        let end = if panicked { OVER | PANICKED } else { OVER };
        self.end.fetch_or(end, Ordering::AcqRel) & ABANDONED == 0
    }

    /// The driver stops waiting.
    pub(super) fn abandon(&self) {
        self.end.fetch_or(ABANDONED, Ordering::AcqRel);
    }

    /// Whether the sweep is over, and if so whether its scan panicked.
    pub(super) fn over(&self) -> Option<bool> {
        let end = self.end.load(Ordering::Acquire);
        (end & OVER != 0).then_some(end & PANICKED != 0)
    }

    /// What it ended, for the report.
    pub(super) fn swept(&self) -> Swept {
        Swept {
            ended: self.ended.load(Ordering::Acquire),
            held_pipes: self.held_pipes.load(Ordering::Acquire),
        }
    }
}

/// One sweep: its target, and what it ended so far.
#[derive(Debug)]
pub(super) struct Sweep {
    pub(super) target: Target,
    ended: BTreeSet<u32>,
    progress: Arc<Progress>,
    /// Whether the scan still looks for this sweep's leftovers.
    looking: bool,
}

impl Sweep {
    pub(super) fn new(target: Target) -> Self {
        Self {
            target,
            ended: BTreeSet::new(),
            progress: Arc::default(),
            looking: true,
        }
    }

    /// What it ended, for the report.
    pub(super) fn swept(&self) -> Swept {
        self.progress.swept()
    }

    /// Its progress, to read while the scan goes on.
    pub(super) fn progress(&self) -> Arc<Progress> {
        Arc::clone(&self.progress)
    }

    /// SIGKILL to what the group forked since the scan, if any; ESRCH is
    /// the usual answer.
    pub(super) fn kill_group(&self) {
        if let Some(pgid) = self.target.group.and_then(Pid::from_u32) {
            let _ = kill_process_group(pgid, libc::SIGKILL);
        }
    }

    fn record(&mut self, pid: u32, found: Found) {
        self.ended.insert(pid);
        let ended = u32::try_from(self.ended.len()).unwrap_or(u32::MAX);
        self.progress.ended.store(ended, Ordering::Release);
        if found == Found::Pipe {
            self.progress.held_pipes.store(true, Ordering::Release);
        }
    }
}

/// Whether the child left anything behind that the scan must look for: a
/// holder of its end of a pipe, or a live member of its group. Costs three
/// system calls at most (an `openat` for stdin's probe, the `poll`, the
/// group's `kill`), whatever runs on the machine.
pub(super) fn left_behind(holders: &Holders, group: Option<u32>) -> bool {
    holders.held() || group_alive(group)
}

/// Whether the process group `group` has a live member (one system call).
pub(super) fn group_alive(group: Option<u32>) -> bool {
    group
        .and_then(Pid::from_u32)
        .is_some_and(|pgid| kill_process_group(pgid, 0).is_ok())
}

/// `poll` without waiting, again if interrupted.
fn poll_now(fds: &mut [PollFd<'_>]) -> io::Result<usize> {
    loop {
        match poll(fds, Duration::ZERO) {
            Err(err) if err.kind() == io::ErrorKind::Interrupted => continue,
            done => return done,
        }
    }
}

/// The members of the cgroup in `target` that are alive (not the child,
/// not zombies): what `cgroup.kill` is about to end, counted without
/// looking at any other process.
pub(super) fn live_cgroup_members(target: &Target) -> u32 {
    let live = target
        .in_cgroup
        .iter()
        .filter(|&&pid| Some(pid) != target.child)
        .filter(|&&pid| stat(pid).is_some_and(|stat| !stat.dead()))
        .count();
    u32::try_from(live).unwrap_or(u32::MAX)
}

/// Finds every live process (other than this one and each child) that is
/// in a child's group, in its cgroup, or holds one of its pipes, for every
/// sweep in `sweeps`, in passes over `/proc`, and ends each through a
/// pidfd, after checking that the pidfd's process is the one found (so a
/// PID recycled between the look and the kill is never hit). Passes go on
/// while a sweep's pipes are still held and the last passes changed
/// something (see the module's notes), within [`CHASE`].
pub(super) fn scan(sweeps: &mut [Sweep]) {
    if sweeps.is_empty() {
        return;
    }
    let host = Host::me();
    let until = Instant::now() + CHASE;
    // A stopping driver's child was just sent SIGKILL: once it is gone,
    // what still holds its pipes is a leftover, and the pipes tell.
    let children = sweeps
        .iter()
        .filter_map(|sweep| sweep.target.child_fd.as_deref());
    wait_all_exited(children, Instant::now() + DEATH_WAIT);
    // Since when the passes changed nothing, and the pause before the next.
    let mut still: Option<(Instant, Duration)> = None;
    loop {
        let mut pass = Pass::default();
        pass.run(sweeps, &host, until);
        for sweep in sweeps.iter() {
            sweep.progress.passed.store(true, Ordering::Release);
            sweep.progress.wake();
        }
        sweeps.iter().for_each(Sweep::kill_group);
        wait_all_exited(&pass.killed, until.min(Instant::now() + DEATH_WAIT));
        let mut looking = false;
        for sweep in sweeps.iter_mut().filter(|sweep| sweep.looking) {
            sweep.looking = sweep.target.child_exited() && sweep.target.holders.held();
            looking |= sweep.looking;
        }
        if !looking || Instant::now() >= until {
            break;
        }
        if pass.changed() {
            still = None;
            continue;
        }
        let (since, pause) = *still.get_or_insert((Instant::now(), STILL_PAUSE));
        if Instant::now() + pause >= (since + STILL_FOR).min(until) {
            break;
        }
        std::thread::sleep(pause);
        still = Some((since, pause * 2));
    }
}

/// One pass over `/proc`: what it ended, and whether it found a leftover
/// gone before it could be ended.
#[derive(Default)]
struct Pass {
    /// The pidfds of the processes sent SIGKILL.
    killed: Vec<OwnedFd>,
    vanished: bool,
}

impl Pass {
    fn changed(&self) -> bool {
        !self.killed.is_empty() || self.vanished
    }

    /// Examines every process `/proc` lists, then lists it again for the
    /// processes that appeared meanwhile, until a listing shows none (or
    /// `until`): one listing is taken at once, and a descendant that changes
    /// its PID while the pass reads the others is only in a later one.
    fn run(&mut self, sweeps: &mut [Sweep], host: &Host, until: Instant) {
        let mut listed = BTreeSet::new();
        loop {
            let fresh: Vec<u32> = processes().filter(|&pid| listed.insert(pid)).collect();
            if fresh.is_empty() || Instant::now() >= until {
                return;
            }
            self.examine(fresh, sweeps, host);
        }
    }

    fn examine(&mut self, pids: Vec<u32>, sweeps: &mut [Sweep], host: &Host) {
        for pid in pids {
            if pid == host.pid {
                continue;
            }
            let Some(stat) = stat(pid) else {
                continue;
            };
            if stat.dead() || host.forked_without_exec(pid, &stat) {
                continue;
            }
            let mut held = None;
            // Ended once, for the first sweep that claims it; counted by
            // every sweep that does.
            let mut ended: Option<bool> = None;
            for sweep in sweeps.iter_mut().filter(|sweep| sweep.looking) {
                if Some(pid) == sweep.target.child || sweep.ended.contains(&pid) {
                    continue;
                }
                let Some(found) = sweep.target.claims(pid, &stat, &mut held) else {
                    continue;
                };
                let killed = *ended.get_or_insert_with(|| match end(pid, &stat, host) {
                    Ended::Killed(fd) => {
                        self.killed.push(fd);
                        true
                    }
                    Ended::Vanished => {
                        self.vanished = true;
                        false
                    }
                    Ended::Refused => false,
                });
                if !killed {
                    break;
                }
                sweep.record(pid, found);
            }
        }
    }
}

/// How [`end`] went.
enum Ended {
    /// Sent SIGKILL through this pidfd.
    Killed(OwnedFd),
    /// Gone (or dead) before the signal: the tree changed.
    Vanished,
    /// Not ours to end.
    Refused,
}

/// SIGKILL to `pid`, found as `seen`, through a pidfd, if the process that
/// pidfd pins is the one seen (same start time) and still alive.
fn end(pid: u32, seen: &Stat, host: &Host) -> Ended {
    let fd = match Pid::from_u32(pid).map(pidfd_open) {
        Some(Ok(fd)) => fd,
        Some(Err(err)) if err.raw_os_error() == Some(libc::ESRCH) => return Ended::Vanished,
        _ => return Ended::Refused,
    };
    let Some(stat) = stat(pid) else {
        return Ended::Vanished;
    };
    // A PID recycled since the look has another start time: a process
    // cannot be forked, exit and have its PID handed out again within one
    // clock tick.
    if stat.dead() || stat.started != seen.started {
        return Ended::Vanished;
    }
    if host.forked_without_exec(pid, &stat) {
        return Ended::Refused;
    }
    match pidfd_send_signal(fd.as_fd(), libc::SIGKILL) {
        Ok(()) => Ended::Killed(fd),
        Err(err) if err.raw_os_error() == Some(libc::ESRCH) => Ended::Vanished,
        Err(_) => Ended::Refused,
    }
}

/// Waits until every process of `pidfds` has exited, or `until`.
fn wait_all_exited<'a>(pidfds: impl IntoIterator<Item = &'a OwnedFd>, until: Instant) {
    for fd in pidfds {
        if !wait_readable(fd, until.saturating_duration_since(Instant::now())) {
            return;
        }
    }
}

/// Every PID in `/proc` (threads are not listed there, only processes).
fn processes() -> impl Iterator<Item = u32> {
    fs::read_dir("/proc")
        .into_iter()
        .flatten()
        .filter_map(|entry| entry.ok()?.file_name().to_str()?.parse().ok())
}

/// This process, to tell its own spawns in progress from leftovers.
struct Host {
    pid: u32,
    /// The device and inode of its executable.
    exe: Option<(u64, u64)>,
}

impl Host {
    fn me() -> Self {
        let pid = std::process::id();
        Self {
            pid,
            exe: exe_id(pid),
        }
    }

    /// Whether `pid` is a fork of this process that has not exec'd yet:
    /// one of its own spawns in progress (another transport's, or any
    /// other). Until its exec such a fork holds a copy of every descriptor
    /// of this process, the pipes of a spawn under way in another thread
    /// among them, so it can look like a holder of this child's pipes.
    /// Killed, its spawn reports success for a program that could not run,
    /// or a new child dies at birth. A leftover reparented to this process
    /// (a subreaper, or PID 1 in a container) is spared only if it runs
    /// this very executable.
    fn forked_without_exec(&self, pid: u32, stat: &Stat) -> bool {
        stat.ppid == self.pid && self.exe.is_some() && exe_id(pid) == self.exe
    }
}

/// The device and inode of the executable `pid` runs.
fn exe_id(pid: u32) -> Option<(u64, u64)> {
    use std::os::unix::fs::MetadataExt;
    let exe = fs::metadata(format!("/proc/{pid}/exe")).ok()?;
    Some((exe.dev(), exe.ino()))
}

/// The fields of `/proc/PID/stat` the sweep reads.
struct Stat {
    state: char,
    ppid: u32,
    pgrp: u32,
    /// Clock ticks since boot.
    started: u64,
}

impl Stat {
    /// Dead already: a zombie holds no pipe and needs no signal.
    fn dead(&self) -> bool {
        matches!(self.state, 'Z' | 'X')
    }
}

fn stat(pid: u32) -> Option<Stat> {
    let line = fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // The command name may hold spaces and parentheses: count from the
    // last `)`. Then: state, ppid, pgrp, ... starttime is the 20th.
    let mut fields = line.get(line.rfind(')')? + 1..)?.split_whitespace();
    let state = fields.next()?.chars().next()?;
    let ppid = fields.next()?.parse().ok()?;
    let pgrp = fields.next()?.parse().ok()?;
    let started = fields.nth(16)?.parse().ok()?;
    Some(Stat {
        state,
        ppid,
        pgrp,
        started,
    })
}

/// When `pid` started, in clock ticks since boot.
pub(super) fn start_time(pid: u32) -> Option<u64> {
    stat(pid).map(|stat| stat.started)
}

/// The inode numbers of the pipes `pid` holds, whatever end and access
/// mode. Unreadable (another user's process): none; it cannot hold our
/// pipes unless it was given them, and then we may not signal it anyway.
fn pipes_held_by(pid: u32) -> Vec<u64> {
    let Ok(fds) = fs::read_dir(format!("/proc/{pid}/fd")) else {
        return Vec::new();
    };
    fds.filter_map(|fd| {
        let target = fs::read_link(fd.ok()?.path()).ok()?;
        target
            .to_str()?
            .strip_prefix("pipe:[")?
            .strip_suffix(']')?
            .parse()
            .ok()
    })
    .collect()
}

/// Whether the process of `pidfd` has exited (its pidfd is readable).
pub(super) fn exited(pidfd: &OwnedFd) -> bool {
    let mut fds = [PollFd::new(pidfd, libc::POLLIN)];
    matches!(poll_now(&mut fds), Ok(n) if n > 0)
}

/// Waits up to `limit` until `fd` is readable (a pidfd: its process has
/// exited); whether it is.
fn wait_readable(fd: &OwnedFd, limit: Duration) -> bool {
    let deadline = Instant::now() + limit;
    loop {
        let left = deadline.saturating_duration_since(Instant::now());
        let mut fds = [PollFd::new(fd, libc::POLLIN)];
        match poll(&mut fds, left) {
            Ok(0) => return false,
            Ok(_) => return true,
            Err(err) if err.kind() == io::ErrorKind::Interrupted => continue,
            Err(_) => return false,
        }
    }
}

/// Waits until the process of `pidfd` has exited (its pidfd becomes
/// readable), then reads its status without reaping it (`WNOWAIT`).
pub(super) fn wait_exited(pidfd: &OwnedFd, limit: Duration) -> Option<Exit> {
    if !wait_readable(pidfd, limit) {
        return None;
    }
    crate::sys::exit_of_pidfd(pidfd.as_fd()).ok()?
}

/// The inode numbers of `pipes`, for a [`Target`].
pub(super) fn inodes(pipes: &PipeIds) -> Vec<u64> {
    pipes.ids.iter().map(|&(inode, _)| inode).collect()
}

#[cfg(test)]
mod tests {
    use std::os::fd::{AsRawFd, BorrowedFd};
    use std::os::unix::process::CommandExt;

    use rustix::io::{read, write};
    use rustix::pipe::{PipeFlags, pipe_with};

    use super::*;

    /// Who logs a sweep's result: its driver while it waits, the log once
    /// it stopped waiting, whichever of the two comes first.
    #[test]
    fn a_sweep_is_over_once_and_its_result_is_the_logs_once_nobody_waits() {
        let waited = Progress::default();
        assert_eq!(waited.over(), None);
        assert!(
            waited.finish(false),
            "the driver waits: it reads the result"
        );
        assert_eq!(waited.over(), Some(false));
        waited.abandon();
        assert_eq!(
            waited.over(),
            Some(false),
            "stopping after the end changes nothing"
        );

        let abandoned = Progress::default();
        abandoned.abandon();
        assert!(
            !abandoned.finish(false),
            "nobody waits: the result is logged"
        );

        let panicked = Progress::default();
        assert!(panicked.finish(true));
        assert_eq!(panicked.over(), Some(true));
    }

    fn target(pipes: &PipeIds) -> Target {
        Target {
            child: None,
            child_fd: None,
            group: None,
            pipes: inodes(pipes),
            holders: Holders::default(),
            started: 0,
            in_cgroup: BTreeSet::new(),
        }
    }

    /// A spawn in progress in another thread, forked but held before its
    /// exec, holds a pipe the sweep looks for (as it would hold the pipes
    /// of a spawn under way when it forked). The sweep must leave it be:
    /// killed there, its spawn would report success for a program that
    /// never ran.
    #[test]
    fn the_sweep_spares_a_fork_of_this_host_that_has_not_exec_d_yet() {
        // A child's stdin: the host writes, the child's end reads.
        let pipe = || pipe_with(PipeFlags::CLOEXEC).expect("pipe");
        let (child_end, host_end) = pipe();
        let pipes = PipeIds::of(host_end.as_fd(), []);
        let (ready_r, ready_w) = pipe();
        let (go_r, go_w) = pipe();
        let (ready_w_raw, go_r_raw) = (ready_w.as_raw_fd(), go_r.as_raw_fd());
        let mut fork = std::process::Command::new("true");
        #[allow(unsafe_code)]
        // SAFETY: the closure only makes two system calls on descriptors
        // that stay open until the spawn returns.
        unsafe {
            fork.pre_exec(move || {
                let (ready, go) = (
                    BorrowedFd::borrow_raw(ready_w_raw),
                    BorrowedFd::borrow_raw(go_r_raw),
                );
                write(ready, b"r")?;
                read(go, &mut [0u8; 1])?;
                Ok(())
            });
        }
        let spawning = std::thread::spawn(move || fork.spawn().and_then(|mut c| c.wait()));
        read(&ready_r, &mut [0u8; 1]).expect("the fork is before its exec");

        let mut sweeps = [Sweep::new(target(&pipes))];
        scan(&mut sweeps);
        write(&go_w, b"g").expect("let the fork go on");
        let status = spawning
            .join()
            .expect("the spawning thread")
            .expect("spawned");
        drop((child_end, ready_w, go_r));

        assert_eq!(
            sweeps[0].swept().ended,
            0,
            "the host's own fork was taken for a leftover"
        );
        assert!(
            status.success(),
            "the fork went on to run its program: {status}"
        );
    }

    /// Whether `done` holds within 5 s. Another test of this binary that
    /// spawns meanwhile holds a copy of every descriptor from its fork until
    /// its exec closes them (close-on-exec): a close made here is seen once
    /// that fork has exec'd.
    fn soon(mut done: impl FnMut() -> bool) -> bool {
        let until = Instant::now() + Duration::from_secs(5);
        loop {
            if done() {
                return true;
            }
            if Instant::now() >= until {
                return false;
            }
            std::thread::sleep(Duration::from_millis(1));
        }
    }

    /// The copy of the host's read end tells whether a writer is left,
    /// without looking at any process.
    #[test]
    fn a_writer_left_on_a_pipe_the_child_wrote_is_seen_and_its_close_too() {
        let (stdin_child, stdin_host) = pipe_with(PipeFlags::CLOEXEC).expect("pipe");
        let (stdout_host, stdout_child) = pipe_with(PipeFlags::CLOEXEC).expect("pipe");
        let pipes = PipeIds::of(stdin_host.as_fd(), [stdout_host.as_fd()]);
        let holders = Holders::new(&pipes);
        assert!(!holders.unwatched);
        assert!(holders.held(), "the child's ends are open");
        drop(stdout_child);
        assert!(holders.held(), "the child's end of stdin is open");
        drop(stdin_child);
        assert!(soon(|| !holders.held()), "no writer is left");
    }

    /// A stdin pipe (the child's end, the host's), its ids with the watch,
    /// and the probes taken from them.
    fn watched_stdin() -> (OwnedFd, OwnedFd, PipeIds, Holders) {
        let (stdin_child, stdin_host) = pipe_with(PipeFlags::CLOEXEC).expect("pipe");
        let pipes = PipeIds::of(stdin_host.as_fd(), []);
        let holders = Holders::new(&pipes);
        (stdin_child, stdin_host, pipes, holders)
    }

    /// The host closing stdin while the child may still read reaches the
    /// child as EOF: the watch lets go of its copy of the write end then, and
    /// still sees the reader through its `O_PATH` handle.
    #[test]
    fn the_watch_keeps_no_writer_on_stdin_once_the_host_closed_it_before_the_exit() {
        let (stdin_child, stdin_host, pipes, holders) = watched_stdin();
        assert!(holders.held(), "the child's end of stdin is open");
        let watch = pipes.stdin_watch().expect("a watch");
        let handle = |watch: &StdinWatch| {
            let watched = watch.0.lock().expect("watch");
            watched.path.as_ref().map(|path| path.name.clone())
        };
        let taken_at_spawn = handle(&watch);
        assert!(taken_at_spawn.is_some(), "the handle is taken at the spawn");
        watch.host_closed(false);
        assert!(
            watch.0.lock().expect("watch").copy.is_none(),
            "the copy went"
        );
        assert_eq!(handle(&watch), taken_at_spawn, "the close opened nothing");
        drop(stdin_host);
        assert_eq!(read(&stdin_child, &mut [0u8; 1]), Ok(0));
        assert!(holders.held(), "the child's end of stdin is still open");
        assert!(
            watch.0.lock().expect("watch").copy.is_none(),
            "the end opened for a check that found a reader was let go"
        );
        drop(stdin_child);
        assert!(soon(|| !holders.held()), "nobody reads stdin");
        assert!(
            watch.0.lock().expect("watch").copy.is_some(),
            "the end opened for the check that found no reader is kept"
        );
        assert_eq!(handle(&watch), taken_at_spawn, "the handle stays");
    }

    /// Closed after the exit, the host's end leaves the watch its copy: the
    /// checks open nothing, and see the last reader go.
    #[test]
    fn after_the_exit_the_watch_keeps_its_copy_and_sees_the_reader_go() {
        let (stdin_child, stdin_host, pipes, holders) = watched_stdin();
        pipes.stdin_watch().expect("a watch").host_closed(true);
        drop(stdin_host);
        let StdinProbe::Watch(watch) = &holders.stdin else {
            panic!("{:?}", holders.stdin)
        };
        assert!(
            watch.0.lock().expect("watch").copy.is_some(),
            "the copy stays"
        );
        assert!(holders.held(), "the child's end of stdin is open");
        drop(stdin_child);
        assert!(soon(|| !holders.held()), "nobody reads stdin");
    }

    /// A process reading the child's stdin, and nothing else of it, is seen
    /// without looking at any process; once it is gone, it is seen gone. The
    /// probe holds no end of the pipe: the host writing to it after that
    /// learns at once that nobody reads.
    #[test]
    fn a_reader_left_on_stdin_is_seen_and_its_close_too() {
        let (stdin_child, stdin_host) = pipe_with(PipeFlags::CLOEXEC).expect("pipe");
        let pipes = PipeIds::of(stdin_host.as_fd(), []);
        let mut reader = std::process::Command::new("sleep")
            .arg("60")
            .stdin(stdin_child)
            .spawn()
            .expect("spawn sleep");
        let holders = Holders::new(&pipes);
        assert!(
            matches!(holders.stdin, StdinProbe::Watch(_)),
            "{:?}",
            holders.stdin
        );
        // The host closed stdin before the exit: the watch has its `O_PATH`
        // handle.
        pipes.stdin_watch().expect("a watch").host_closed(false);
        assert!(holders.held(), "sleep reads the child's stdin");
        assert!(left_behind(&holders, None));
        reader.kill().expect("kill sleep");
        reader.wait().expect("reap sleep");
        assert!(soon(|| !holders.held()), "no reader is left");
        assert!(
            soon(|| write(&stdin_host, b"x") == Err(rustix::io::Errno::PIPE)),
            "the probe kept a reader on the pipe"
        );
    }

    /// The stdin probe is taken from the host's end: a child that replaced
    /// its descriptor 0 at once is still probed on the pipe it was given,
    /// and a pipe the probe cannot be taken on counts as held.
    #[test]
    fn stdin_is_probed_from_the_hosts_end_and_an_unknown_pipe_counts_as_held() {
        let (stdin_child, _stdin_host, pipes, holders) = watched_stdin();
        assert!(matches!(holders.stdin, StdinProbe::Watch(_)));
        drop(stdin_child);
        // A test beside this one may fork while the pipe exists: its child
        // holds a copy of the read end until its exec.
        assert!(soon(|| !holders.held()), "nobody reads stdin");

        let mut unknown = pipes.clone();
        unknown.stdin_watch = None;
        assert!(matches!(Holders::new(&unknown).stdin, StdinProbe::Unknown));
        assert!(Holders::new(&unknown).held());
    }

    /// One scan serves two sweeps: each ends the process holding its pipe,
    /// read-write, and counts it as a pipe holder.
    #[test]
    fn one_scan_ends_the_read_write_holders_of_two_children() {
        let mut holders = Vec::new();
        let mut sweeps = Vec::new();
        let mut keep = Vec::new();
        for _ in 0..2 {
            let (read_end, write_end) = pipe_with(PipeFlags::CLOEXEC).expect("pipe");
            let pipes = PipeIds::of(write_end.as_fd(), []);
            // `sleep` holds the pipe read-write, through /proc.
            let path = format!("/proc/self/fd/{}", read_end.as_raw_fd());
            let rw = fs::OpenOptions::new()
                .read(true)
                .write(true)
                .open(&path)
                .expect("reopen the pipe read-write");
            let holder = std::process::Command::new("sleep")
                .arg("60")
                .stdin(rw)
                .spawn()
                .expect("spawn sleep");
            holders.push(holder);
            sweeps.push(Sweep::new(target(&pipes)));
            keep.push((read_end, write_end));
        }
        scan(&mut sweeps);
        for (sweep, mut holder) in sweeps.iter().zip(holders) {
            let status = holder.wait().expect("reap");
            assert_eq!(
                sweep.swept(),
                Swept {
                    ended: 1,
                    held_pipes: true
                }
            );
            assert!(!status.success(), "{status}");
        }
    }
}
