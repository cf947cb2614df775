//! A spawn ledger: what a host records of each child so that, after the
//! host died without cleaning up, the next host can end what it left, and
//! never a process that only reuses a PID.
//!
//! Two parts, both sans-IO:
//! - [`Identity`], a child as the OS can prove it later (its PID with its
//!   start time, the boot it started in, its process group, its cgroup),
//!   and the text of its ledger file ([`Identity::encode`],
//!   [`Identity::decode`]);
//! - [`Reaper`], the decisions of a clean-up run over the entries a dead
//!   host left: what is still its (a process with the entry's PID *and*
//!   start time, what is left of its group and its cgroup), the
//!   SIGTERM-then-SIGKILL ladder on the clock it is given, and what to
//!   report ([`Reaped`]).
//!
//! The async layer reads the files, looks at the processes and sends the
//! signals (`childwire_async::reap_leftovers`).

use std::collections::{BTreeMap, VecDeque};
use std::fmt;
use std::time::{Duration, Instant};

use crate::ending::Signal;

/// The first line of every ledger file: the format and its version.
pub const LEDGER_HEADER: &str = "childwire-ledger 1";

/// The longest ledger file [`Identity::decode`] accepts; a longer one is
/// not ours.
pub const MAX_ENTRY_LEN: usize = 16 * 1024;

/// A child as the OS can prove it later.
///
/// Its start time is what tells it from a later process that got the same
/// PID: Linux's is in clock ticks since boot (`/proc/PID/stat`, field 22),
/// so the boot id goes with it; Windows' is the creation time
/// (`GetProcessTimes`, 100 ns since 1601); macOS's is in microseconds since
/// the epoch. An entry without a start time cannot be proved and is left
/// alone.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
#[non_exhaustive]
pub struct Identity {
    /// The child's PID.
    pub pid: u32,
    /// When it started, in the platform's unit (see above).
    pub started: Option<u64>,
    /// The boot it started in (Linux `/proc/sys/kernel/random/boot_id`),
    /// where the start time counts from the boot.
    pub boot_id: Option<String>,
    /// The process group it leads, if it leads one.
    pub group: Option<u32>,
    /// Its session (for the report).
    pub session: Option<u32>,
    /// Its cgroup v2 directory, where it was contained in one of its own.
    pub cgroup: Option<String>,
    /// What it runs (for the report).
    pub program: Option<String>,
    /// The host that spawned it: an entry whose host still runs (the same
    /// PID with the same start time) is that host's, and left alone.
    pub host: Option<u32>,
    /// When that host started, in the unit of [`started`](Self::started).
    pub host_started: Option<u64>,
}

impl Identity {
    /// The child `pid`, started at `started` (in the platform's unit).
    #[must_use]
    pub fn new(pid: u32, started: Option<u64>) -> Self {
        Self {
            pid,
            started,
            ..Self::default()
        }
    }

    /// With the boot id its start time counts from.
    #[must_use]
    pub fn with_boot_id(mut self, boot_id: Option<String>) -> Self {
        self.boot_id = boot_id;
        self
    }

    /// With the process group it leads.
    #[must_use]
    pub fn with_group(mut self, group: Option<u32>) -> Self {
        self.group = group;
        self
    }

    /// With its session.
    #[must_use]
    pub fn with_session(mut self, session: Option<u32>) -> Self {
        self.session = session;
        self
    }

    /// With the cgroup it was contained in.
    #[must_use]
    pub fn with_cgroup(mut self, cgroup: Option<String>) -> Self {
        self.cgroup = cgroup;
        self
    }

    /// With the program it runs.
    #[must_use]
    pub fn with_program(mut self, program: Option<String>) -> Self {
        self.program = program;
        self
    }

    /// With the host that spawned it, and when that host started.
    #[must_use]
    pub fn with_host(mut self, host: Option<u32>, started: Option<u64>) -> Self {
        self.host = host;
        self.host_started = started;
        self
    }

    /// The text of its ledger file: [`LEDGER_HEADER`], then one `key value`
    /// line per known field. Backslashes and line breaks in values are
    /// escaped.
    ///
    /// ```
    /// use childwire_core::ledger::Identity;
    ///
    /// let child = Identity::new(4242, Some(987_654)).with_group(Some(4242));
    /// assert_eq!(Identity::decode(&child.encode()), Ok(child));
    /// ```
    #[must_use]
    pub fn encode(&self) -> String {
        use fmt::Write as _;
        let mut out = format!("{LEDGER_HEADER}\npid {}\n", self.pid);
        let numbers = [
            ("started", self.started),
            ("group", self.group.map(u64::from)),
            ("session", self.session.map(u64::from)),
            ("host", self.host.map(u64::from)),
            ("host-started", self.host_started),
        ];
        for (key, value) in numbers {
            if let Some(value) = value {
                let _ = writeln!(out, "{key} {value}");
            }
        }
        let texts = [
            ("boot", &self.boot_id),
            ("cgroup", &self.cgroup),
            ("program", &self.program),
        ];
        for (key, value) in texts {
            if let Some(value) = value {
                let _ = writeln!(out, "{key} {}", escape(value));
            }
        }
        out
    }

    /// Reads a ledger file's text. Keys it does not know are skipped (a
    /// later version may add some); a file without the header or the PID,
    /// with a number that does not parse, or over [`MAX_ENTRY_LEN`] is
    /// refused, with the reason.
    pub fn decode(text: &str) -> Result<Self, BadEntry> {
        if text.len() > MAX_ENTRY_LEN {
            return Err(BadEntry("longer than a ledger entry can be"));
        }
        let mut lines = text.lines();
        if lines.next() != Some(LEDGER_HEADER) {
            return Err(BadEntry("no `childwire-ledger 1` header"));
        }
        let mut pid = None;
        let mut identity = Self::default();
        for line in lines {
            let (key, value) = line.split_once(' ').unwrap_or((line, ""));
            let number = || {
                value
                    .parse::<u64>()
                    .map_err(|_| BadEntry("a number is not one"))
            };
            let small = || {
                value
                    .parse::<u32>()
                    .map_err(|_| BadEntry("a PID is not one"))
            };
            match key {
                "pid" => pid = Some(small()?),
                "started" => identity.started = Some(number()?),
                "group" => identity.group = Some(small()?),
                "session" => identity.session = Some(small()?),
                "host" => identity.host = Some(small()?),
                "host-started" => identity.host_started = Some(number()?),
                "boot" => identity.boot_id = Some(unescape(value)),
                "cgroup" => identity.cgroup = Some(unescape(value)),
                "program" => identity.program = Some(unescape(value)),
                _ => {}
            }
        }
        identity.pid = pid.ok_or(BadEntry("no `pid` line"))?;
        Ok(identity)
    }
}

impl fmt::Display for Identity {
    /// `npx (pid 4242)`, or `pid 4242` without a program.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.program {
            Some(program) => write!(f, "`{program}` (pid {})", self.pid),
            None => write!(f, "pid {}", self.pid),
        }
    }
}

fn escape(value: &str) -> String {
    value
        .replace('\\', "\\\\")
        .replace('\n', "\\n")
        .replace('\r', "\\r")
}

fn unescape(value: &str) -> String {
    let mut out = String::with_capacity(value.len());
    let mut chars = value.chars();
    while let Some(c) = chars.next() {
        if c != '\\' {
            out.push(c);
            continue;
        }
        match chars.next() {
            Some('n') => out.push('\n'),
            Some('r') => out.push('\r'),
            Some(other) => out.push(other),
            None => out.push('\\'),
        }
    }
    out
}

/// A ledger file that is not one [`Identity::decode`] can read, and why.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BadEntry(&'static str);

impl fmt::Display for BadEntry {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "not a ledger entry: {}", self.0)
    }
}

impl std::error::Error for BadEntry {}

/// One process as the OS shows it now: its PID and, if it could be read,
/// its start time.
#[cfg_attr(feature = "arbitrary", derive(arbitrary::Arbitrary))]
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Process {
    /// Its PID.
    pub pid: u32,
    /// When it started, in the unit of [`Identity::started`].
    pub started: Option<u64>,
}

/// What the OS shows now of one entry, for [`Reaper::handle_look`]: only
/// live processes (a zombie is dead: it needs no signal).
#[cfg_attr(feature = "arbitrary", derive(arbitrary::Arbitrary))]
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Seen {
    /// The live process with the PID of the entry's host, if there is one.
    pub host: Option<Process>,
    /// The live process with the entry's PID, if there is one.
    pub leader: Option<Process>,
    /// The live members of the entry's process group (the leader may be
    /// among them), if it has one.
    pub group: Vec<Process>,
    /// The live members of the entry's cgroup, if it has one and it still
    /// exists.
    pub cgroup: Vec<Process>,
}

/// The graces of a clean-up run.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct ReapConfig {
    /// Time from SIGTERM until SIGKILL. Default 2 s, the transport's
    /// `term_grace`.
    pub term_grace: Duration,
    /// Time from SIGKILL until what is still alive is reported as
    /// surviving (a process stuck in the kernel). Default 2 s.
    pub kill_grace: Duration,
    /// How often to look again while waiting for the processes to die.
    /// Default 20 ms; zero is taken as 1 ms, so that a run never looks
    /// again and again at one instant.
    pub look_every: Duration,
}

impl Default for ReapConfig {
    fn default() -> Self {
        Self {
            term_grace: Duration::from_secs(2),
            kill_grace: Duration::from_secs(2),
            look_every: Duration::from_millis(20),
        }
    }
}

/// What the adapter must do now, from [`Reaper::poll_action`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ReapAction {
    /// Look at entry `entry` (its index in the list given to
    /// [`Reaper::new`]) and call [`Reaper::handle_look`] with what the OS
    /// shows.
    Look(usize),
    /// Send `signal` to each of `targets`, each only if the process with
    /// that PID still has that start time (through a handle that pins it,
    /// a pidfd on Linux); with `cgroup`, also end everything in the entry's
    /// cgroup (`cgroup.kill`, for SIGKILL only). Failures are not reported:
    /// the next look shows what is left.
    Signal {
        /// The entry.
        entry: usize,
        /// SIGTERM or SIGKILL.
        signal: Signal,
        /// The processes, each with the start time it must still have.
        targets: Vec<Process>,
        /// Whether to kill the entry's cgroup too.
        cgroup: bool,
    },
}

/// How one entry was settled.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ReapVerdict {
    /// What was left is dead now; the last signal it took.
    Ended(Signal),
    /// Nothing of it was alive.
    AlreadyGone,
    /// Its PID belongs to another, later process now: left alone.
    PidReused,
    /// It was recorded in an earlier boot: nothing of it can be alive.
    EarlierBoot,
    /// Its identity cannot be proved (no start time was recorded, or the
    /// process with its PID cannot be read): left alone.
    Unprovable,
    /// Still alive after SIGKILL and the kill grace: these PIDs.
    Survived(Vec<u32>),
    /// The host that recorded it still runs: the entry is that host's,
    /// left alone and kept.
    HostAlive,
}

/// One entry settled, from [`Reaper::poll_outcome`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Reaped {
    /// Its index in the list given to [`Reaper::new`].
    pub entry: usize,
    /// The entry.
    pub identity: Identity,
    /// How it was settled.
    pub verdict: ReapVerdict,
    /// The processes it ended (the child and what was left of its group
    /// and cgroup), sorted.
    pub ended: Vec<u32>,
}

impl Reaped {
    /// Whether its ledger file should be removed: always, unless something
    /// survived (the next run tries again) or its host still runs.
    #[must_use]
    pub fn remove_entry(&self) -> bool {
        !matches!(
            self.verdict,
            ReapVerdict::Survived(_) | ReapVerdict::HostAlive
        )
    }
}

impl fmt::Display for Reaped {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let pids = |pids: &[u32]| {
            pids.iter()
                .map(u32::to_string)
                .collect::<Vec<_>>()
                .join(", ")
        };
        let who = &self.identity;
        match &self.verdict {
            ReapVerdict::Ended(signal) => write!(
                f,
                "{who}: ended {} process(es) left by a host that died ({}), by {}",
                self.ended.len(),
                pids(&self.ended),
                crate::signal_name(signal.number()).unwrap_or("a signal")
            ),
            ReapVerdict::AlreadyGone => write!(f, "{who}: nothing left running"),
            ReapVerdict::PidReused => write!(
                f,
                "{who}: its PID belongs to a process started later; left alone"
            ),
            ReapVerdict::EarlierBoot => write!(f, "{who}: recorded before the last boot"),
            ReapVerdict::Unprovable => write!(
                f,
                "{who}: cannot be proved to be the process recorded; left alone"
            ),
            ReapVerdict::HostAlive => write!(
                f,
                "{who}: the host that recorded it (pid {}) still runs; left alone",
                who.host.unwrap_or_default()
            ),
            ReapVerdict::Survived(left) => write!(
                f,
                "{who}: still alive after SIGKILL: {}; the entry is kept",
                pids(left)
            ),
        }
    }
}

/// A clean-up run over a dead host's ledger entries, as a pure state
/// machine.
///
/// # How to drive it
///
/// Create it with the entries, the current boot id (Linux) and `now`.
/// Then, after every input, drain:
///
/// 1. [`poll_action`](Self::poll_action) until `None`, carrying out each
///    [`ReapAction`] ([`ReapAction::Look`] is answered with
///    [`handle_look`](Self::handle_look), an input again);
/// 2. [`poll_outcome`](Self::poll_outcome) until `None`: each entry once,
///    when settled;
/// 3. [`poll_timeout`](Self::poll_timeout): call
///    [`handle_timeout`](Self::handle_timeout) then (early or repeated
///    calls are harmless). `None` with [`is_done`](Self::is_done) means
///    the run is over.
///
/// # What it ends
///
/// Nothing of an entry whose host still runs. Otherwise an entry's processes are its own only if the process with its PID has
/// its start time (then that process, the live members of its group that
/// started no earlier, and its cgroup's members), or if no process has its
/// PID any more (then what is left of its group, which keeps the PID from
/// being reused while any member lives, and its cgroup). A PID now held by
/// a process with another start time, or one whose start time cannot be
/// read, is left alone with everything around it, and the entry dropped.
/// Each process gets SIGTERM, then SIGKILL `term_grace` later if it is
/// still alive; what outlives `kill_grace` after that is reported.
#[derive(Debug, Clone)]
pub struct Reaper {
    config: ReapConfig,
    boot_id: Option<String>,
    slots: Vec<Slot>,
    queue: VecDeque<ReapAction>,
    outcomes: VecDeque<Reaped>,
}

#[derive(Debug, Clone)]
struct Slot {
    identity: Identity,
    stage: Stage,
    /// Every process of the entry seen alive so far, by PID.
    seen: BTreeMap<u32, Option<u64>>,
    /// A look was asked and not answered yet.
    looking: bool,
    /// When to look again (in the ladder).
    look_at: Option<Instant>,
    /// What the last look showed alive.
    alive: Vec<Process>,
    /// The kill grace is over: the look asked last decides what survived.
    last_look: bool,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Stage {
    /// The first look is asked.
    First,
    /// SIGTERM sent; SIGKILL at the deadline (`None`: never).
    Terminating {
        deadline: Option<Instant>,
    },
    /// SIGKILL sent; at the deadline, what one more look still shows
    /// alive is reported as surviving.
    Killing {
        deadline: Option<Instant>,
    },
    Settled,
}

impl Reaper {
    /// A run over `entries`, on the machine whose boot id is `boot_id`
    /// (Linux; `None` elsewhere): each entry is looked at first, and
    /// entries that need no look (recorded in an earlier boot, or without
    /// a start time) are settled at once.
    #[must_use]
    pub fn new(
        entries: impl IntoIterator<Item = Identity>,
        boot_id: Option<&str>,
        mut config: ReapConfig,
    ) -> Self {
        config.look_every = config.look_every.max(Duration::from_millis(1));
        let mut reaper = Self {
            config,
            boot_id: boot_id.map(str::to_owned),
            slots: Vec::new(),
            queue: VecDeque::new(),
            outcomes: VecDeque::new(),
        };
        for identity in entries {
            let entry = reaper.slots.len();
            reaper.slots.push(Slot {
                identity,
                stage: Stage::First,
                seen: BTreeMap::new(),
                looking: false,
                look_at: None,
                alive: Vec::new(),
                last_look: false,
            });
            reaper.first_look(entry);
        }
        reaper
    }

    /// Settles at once what needs no look (earlier boot, nothing to prove
    /// it with); asks a look at the rest.
    fn first_look(&mut self, entry: usize) {
        let slot = &self.slots[entry];
        let identity = &slot.identity;
        let verdict = if identity.started.is_none() {
            Some(ReapVerdict::Unprovable)
        } else {
            match (&identity.boot_id, &self.boot_id) {
                (Some(then), Some(now)) if then != now => Some(ReapVerdict::EarlierBoot),
                // Counted from a boot that cannot be compared.
                (Some(_), None) => Some(ReapVerdict::Unprovable),
                _ => None,
            }
        };
        match verdict {
            Some(verdict) => self.settle(entry, verdict),
            None => {
                self.slots[entry].looking = true;
                self.queue.push_back(ReapAction::Look(entry));
            }
        }
    }

    // ---- getters ----

    /// Whether every entry is settled.
    #[must_use]
    pub fn is_done(&self) -> bool {
        self.slots.iter().all(|slot| slot.stage == Stage::Settled)
    }

    /// The entries, in the order given.
    pub fn entries(&self) -> impl ExactSizeIterator<Item = &Identity> {
        self.slots.iter().map(|slot| &slot.identity)
    }

    // ---- inputs ----

    /// What the OS shows now of entry `entry`, answering a
    /// [`ReapAction::Look`]. An answer for an entry that asked none, or is
    /// settled, is ignored.
    pub fn handle_look(&mut self, entry: usize, seen: &Seen, now: Instant) {
        let Some(slot) = self.slots.get_mut(entry) else {
            return;
        };
        if !slot.looking || slot.stage == Stage::Settled {
            return;
        }
        slot.looking = false;
        let first = slot.stage == Stage::First;
        let identity = &slot.identity;
        if first
            && identity.host_started.is_some()
            && seen.host.is_some_and(|host| {
                Some(host.pid) == identity.host && host.started == identity.host_started
            })
        {
            return self.settle(entry, ReapVerdict::HostAlive);
        }
        let alive = match claim(&slot.identity, seen) {
            Claim::Ours(alive) => alive,
            Claim::Reused if first => return self.settle(entry, ReapVerdict::PidReused),
            Claim::Unprovable if first => return self.settle(entry, ReapVerdict::Unprovable),
            // The leader died and its PID was taken meanwhile (or cannot be
            // read): what is left of its group and cgroup is still the
            // entry's, the PID's new holder is not.
            Claim::Reused | Claim::Unprovable => claim_without_leader(&slot.identity, seen),
        };
        let newcomers: Vec<Process> = alive
            .iter()
            .filter(|process| !slot.seen.contains_key(&process.pid))
            .copied()
            .collect();
        for process in &alive {
            slot.seen.insert(process.pid, process.started);
        }
        let signal = match slot.stage {
            Stage::First if alive.is_empty() => {
                return self.settle(entry, ReapVerdict::AlreadyGone);
            }
            Stage::First => {
                slot.stage = Stage::Terminating {
                    deadline: now.checked_add(self.config.term_grace),
                };
                Signal::Term
            }
            Stage::Terminating { .. } => Signal::Term,
            Stage::Killing { .. } => Signal::Kill,
            Stage::Settled => return,
        };
        if alive.is_empty() {
            return self.settle(entry, ReapVerdict::Ended(signal));
        }
        if slot.last_look {
            let left = alive.iter().map(|process| process.pid).collect();
            return self.settle(entry, ReapVerdict::Survived(left));
        }
        slot.alive = alive;
        slot.look_at = now.checked_add(self.config.look_every);
        if !newcomers.is_empty() {
            let cgroup = signal == Signal::Kill && slot.identity.cgroup.is_some();
            self.queue.push_back(ReapAction::Signal {
                entry,
                signal,
                targets: newcomers,
                cgroup,
            });
        }
        // A zero grace escalates within the same drain.
        self.fire(entry, now);
    }

    /// The time has come (or not: early and repeated calls are harmless).
    pub fn handle_timeout(&mut self, now: Instant) {
        for entry in 0..self.slots.len() {
            self.fire(entry, now);
        }
    }

    /// Escalates, gives up or asks a look for `entry`, whichever `now`
    /// has reached.
    fn fire(&mut self, entry: usize, now: Instant) {
        let reached = |deadline: Option<Instant>| deadline.is_some_and(|d| now >= d);
        let slot = &mut self.slots[entry];
        if let Stage::Terminating { deadline } = slot.stage {
            if reached(deadline) {
                slot.stage = Stage::Killing {
                    deadline: now.checked_add(self.config.kill_grace),
                };
                self.queue.push_back(ReapAction::Signal {
                    entry,
                    signal: Signal::Kill,
                    targets: slot.alive.clone(),
                    cgroup: slot.identity.cgroup.is_some(),
                });
                // SIGKILL takes microseconds: look again at once.
                slot.look_at = Some(now);
            }
        }
        if let Stage::Killing { deadline } = slot.stage {
            if reached(deadline) && !slot.last_look {
                // One more look says what survived, whenever the last was.
                slot.last_look = true;
                slot.look_at = Some(now);
            }
        }
        let in_ladder = matches!(
            slot.stage,
            Stage::Terminating { .. } | Stage::Killing { .. }
        );
        if in_ladder && !slot.looking && reached(slot.look_at) {
            slot.looking = true;
            self.queue.push_back(ReapAction::Look(entry));
        }
    }

    fn settle(&mut self, entry: usize, verdict: ReapVerdict) {
        let slot = &mut self.slots[entry];
        slot.stage = Stage::Settled;
        slot.looking = false;
        let ended = match &verdict {
            ReapVerdict::Ended(_) => slot.seen.keys().copied().collect(),
            ReapVerdict::Survived(left) => slot
                .seen
                .keys()
                .copied()
                .filter(|pid| !left.contains(pid))
                .collect(),
            _ => Vec::new(),
        };
        self.outcomes.push_back(Reaped {
            entry,
            identity: slot.identity.clone(),
            verdict,
            ended,
        });
    }

    // ---- outputs ----

    /// The next thing to do, in the order decided.
    #[must_use]
    pub fn poll_action(&mut self) -> Option<ReapAction> {
        self.queue.pop_front()
    }

    /// The next entry settled.
    #[must_use]
    pub fn poll_outcome(&mut self) -> Option<Reaped> {
        self.outcomes.pop_front()
    }

    /// When to call [`handle_timeout`](Self::handle_timeout): the earliest
    /// deadline, or look not already asked, of an entry in the ladder.
    #[must_use]
    pub fn poll_timeout(&self) -> Option<Instant> {
        self.slots
            .iter()
            .filter_map(|slot| {
                let (Stage::Terminating { deadline } | Stage::Killing { deadline }) = slot.stage
                else {
                    return None;
                };
                let deadline = deadline.filter(|_| !slot.last_look);
                let look = if slot.looking { None } else { slot.look_at };
                [deadline, look].into_iter().flatten().min()
            })
            .min()
    }
}

/// Whose the processes of `seen` are.
enum Claim {
    /// The entry's, these (none: nothing is left).
    Ours(Vec<Process>),
    /// The PID belongs to a later process.
    Reused,
    /// The PID's process cannot be read.
    Unprovable,
}

fn claim(identity: &Identity, seen: &Seen) -> Claim {
    match seen.leader {
        Some(leader) if leader.started.is_none() => Claim::Unprovable,
        Some(leader) if leader.started != identity.started => Claim::Reused,
        Some(leader) => {
            let mut alive = claim_without_leader(identity, seen);
            if !alive.iter().any(|process| process.pid == leader.pid) {
                alive.push(leader);
            }
            alive.sort_unstable();
            Claim::Ours(alive)
        }
        None => Claim::Ours(claim_without_leader(identity, seen)),
    }
}

/// The group's members that started no earlier than the entry, and the
/// cgroup's members, when the leader is no longer there to prove it; the
/// leader's PID never among them.
fn claim_without_leader(identity: &Identity, seen: &Seen) -> Vec<Process> {
    let mut alive: Vec<Process> = Vec::new();
    if identity.group.is_some() {
        alive.extend(seen.group.iter().filter(|process| {
            process.pid != identity.pid
                && matches!((process.started, identity.started), (Some(s), Some(e)) if s >= e)
        }));
    }
    if identity.cgroup.is_some() {
        alive.extend(
            seen.cgroup
                .iter()
                .filter(|process| process.pid != identity.pid),
        );
    }
    alive.sort_unstable();
    alive.dedup_by_key(|process| process.pid);
    alive
}

#[cfg(test)]
mod tests {
    use super::*;

    const MS: Duration = Duration::from_millis(1);

    fn config() -> ReapConfig {
        ReapConfig {
            term_grace: 100 * MS,
            kill_grace: 100 * MS,
            look_every: 10 * MS,
        }
    }

    fn process(pid: u32, started: u64) -> Process {
        Process {
            pid,
            started: Some(started),
        }
    }

    fn child() -> Identity {
        Identity::new(100, Some(5000))
            .with_boot_id(Some("boot-a".into()))
            .with_group(Some(100))
            .with_program(Some("sh".into()))
    }

    /// Everything the reaper asked, in order, and its outcomes; `look`
    /// answers each look from what `world` says at that time.
    fn drive(
        reaper: &mut Reaper,
        start: Instant,
        mut look: impl FnMut(usize, Duration, &[ReapAction]) -> Seen,
    ) -> (Vec<(Duration, ReapAction)>, Vec<Reaped>) {
        let mut actions = Vec::new();
        let mut outcomes = Vec::new();
        let mut now = start;
        for _ in 0..10_000 {
            let mut looks = Vec::new();
            while let Some(action) = reaper.poll_action() {
                if let ReapAction::Look(entry) = action {
                    looks.push(entry);
                }
                actions.push((now - start, action));
            }
            while let Some(outcome) = reaper.poll_outcome() {
                outcomes.push(outcome);
            }
            if !looks.is_empty() {
                let done: Vec<ReapAction> = actions.iter().map(|(_, a)| a.clone()).collect();
                for entry in looks {
                    let seen = look(entry, now - start, &done);
                    reaper.handle_look(entry, &seen, now);
                }
                continue;
            }
            match reaper.poll_timeout() {
                Some(at) => {
                    assert!(at >= now, "the timeout went back");
                    now = at;
                    reaper.handle_timeout(now);
                }
                None => break,
            }
        }
        assert!(reaper.is_done());
        (actions, outcomes)
    }

    fn signals(actions: &[(Duration, ReapAction)]) -> Vec<(Duration, Signal, Vec<u32>)> {
        actions
            .iter()
            .filter_map(|(at, action)| match action {
                ReapAction::Signal {
                    signal, targets, ..
                } => Some((*at, *signal, targets.iter().map(|p| p.pid).collect())),
                ReapAction::Look(_) => None,
            })
            .collect()
    }

    fn sent(done: &[ReapAction], wanted: Signal) -> bool {
        done.iter()
            .any(|action| matches!(action, ReapAction::Signal { signal, .. } if *signal == wanted))
    }

    #[test]
    fn the_child_and_its_group_end_at_sigterm_and_are_listed() {
        let start = Instant::now();
        let mut reaper = Reaper::new([child()], Some("boot-a"), config());
        // sh (100) and two sleeps in its group; a process in the group that
        // started before the child is not its own (it cannot be, but the
        // rule is checked); they die at SIGTERM.
        let (actions, outcomes) = drive(&mut reaper, start, |_, _, done| {
            if sent(done, Signal::Term) {
                return Seen::default();
            }
            Seen {
                leader: Some(process(100, 5000)),
                group: vec![
                    process(100, 5000),
                    process(101, 5001),
                    process(102, 5001),
                    process(99, 4000),
                ],
                ..Seen::default()
            }
        });
        assert_eq!(
            signals(&actions),
            [(Duration::ZERO, Signal::Term, vec![100, 101, 102])]
        );
        assert_eq!(outcomes.len(), 1);
        assert_eq!(outcomes[0].verdict, ReapVerdict::Ended(Signal::Term));
        assert_eq!(outcomes[0].ended, [100, 101, 102]);
        assert!(outcomes[0].remove_entry());
        let text = outcomes[0].to_string();
        assert!(
            text.contains("`sh` (pid 100)") && text.contains("100, 101, 102"),
            "{text}"
        );
        assert!(text.contains("SIGTERM"), "{text}");
    }

    #[test]
    fn an_entry_whose_host_still_runs_is_left_alone_and_kept() {
        let start = Instant::now();
        let identity = child().with_host(Some(7), Some(33));
        let mut reaper = Reaper::new([identity.clone(), identity], Some("boot-a"), config());
        // The first entry's host runs; the second's PID 7 is a later one.
        let (actions, outcomes) = drive(&mut reaper, start, |entry, _, done| Seen {
            host: Some(process(7, if entry == 0 { 33 } else { 34 })),
            leader: (!sent(done, Signal::Term)).then_some(process(100, 5000)),
            ..Seen::default()
        });
        assert_eq!(
            signals(&actions),
            [(Duration::ZERO, Signal::Term, vec![100])]
        );
        assert!(matches!(
            actions[..2],
            [(_, ReapAction::Look(0)), (_, ReapAction::Look(1))]
        ));
        assert_eq!(outcomes[0].verdict, ReapVerdict::HostAlive);
        assert!(!outcomes[0].remove_entry());
        assert_eq!(outcomes[1].verdict, ReapVerdict::Ended(Signal::Term));
    }

    #[test]
    fn a_reused_pid_is_left_alone_with_its_group() {
        let start = Instant::now();
        let mut reaper = Reaper::new([child()], Some("boot-a"), config());
        let (actions, outcomes) = drive(&mut reaper, start, |_, _, _| Seen {
            leader: Some(process(100, 9000)),
            group: vec![process(100, 9000), process(130, 9100)],
            ..Seen::default()
        });
        assert!(signals(&actions).is_empty(), "{actions:?}");
        assert_eq!(outcomes[0].verdict, ReapVerdict::PidReused);
        assert!(outcomes[0].ended.is_empty());
        assert!(outcomes[0].remove_entry());
    }

    #[test]
    fn sigterm_ignored_gets_sigkill_after_the_grace_and_the_unkillable_are_reported() {
        let start = Instant::now();
        let identity = child().with_cgroup(Some("/sys/fs/cgroup/x".into()));
        let mut reaper = Reaper::new([identity], Some("boot-a"), config());
        // The leader ignores SIGTERM and dies at SIGKILL; 7 in the cgroup
        // (another group) never dies.
        let (actions, outcomes) = drive(&mut reaper, start, |_, _, done| {
            let killed = sent(done, Signal::Kill);
            Seen {
                leader: (!killed).then_some(process(100, 5000)),
                group: vec![],
                cgroup: vec![process(7, 6000)],
                ..Seen::default()
            }
        });
        let signals = signals(&actions);
        assert_eq!(signals[0], (Duration::ZERO, Signal::Term, vec![7, 100]));
        assert_eq!(signals[1], (100 * MS, Signal::Kill, vec![7, 100]));
        assert!(
            actions.iter().any(|(_, action)| matches!(
                action,
                ReapAction::Signal {
                    signal: Signal::Kill,
                    cgroup: true,
                    ..
                }
            )),
            "the cgroup is killed with SIGKILL"
        );
        assert_eq!(outcomes[0].verdict, ReapVerdict::Survived(vec![7]));
        assert_eq!(outcomes[0].ended, [100]);
        assert!(!outcomes[0].remove_entry(), "kept for the next run");
    }

    #[test]
    fn a_dead_leader_s_group_is_still_its_own_and_late_forks_are_signalled() {
        let start = Instant::now();
        let mut reaper = Reaper::new([child()], Some("boot-a"), config());
        let mut looks = 0;
        let (actions, outcomes) = drive(&mut reaper, start, |_, _, done| {
            looks += 1;
            if sent(done, Signal::Kill) {
                return Seen::default();
            }
            // The group ignores SIGTERM; a member forks one more after the
            // first look.
            let mut group = vec![process(101, 5001)];
            if looks > 1 {
                group.push(process(140, 7000));
            }
            Seen {
                leader: None,
                group,
                ..Seen::default()
            }
        });
        let signals = signals(&actions);
        assert_eq!(signals[0], (Duration::ZERO, Signal::Term, vec![101]));
        assert_eq!(signals[1], (10 * MS, Signal::Term, vec![140]));
        assert_eq!(signals[2], (100 * MS, Signal::Kill, vec![101, 140]));
        assert_eq!(outcomes[0].verdict, ReapVerdict::Ended(Signal::Kill));
        assert_eq!(outcomes[0].ended, [101, 140]);
    }

    #[test]
    fn entries_of_another_boot_or_without_a_start_time_need_no_look() {
        let mut reaper = Reaper::new(
            [
                child().with_boot_id(Some("boot-old".into())),
                Identity::new(5, None),
                child(),
            ],
            Some("boot-a"),
            config(),
        );
        let verdicts: Vec<_> = std::iter::from_fn(|| reaper.poll_outcome())
            .map(|outcome| (outcome.entry, outcome.verdict))
            .collect();
        assert_eq!(
            verdicts,
            [(0, ReapVerdict::EarlierBoot), (1, ReapVerdict::Unprovable)]
        );
        assert_eq!(reaper.poll_action(), Some(ReapAction::Look(2)));
        // A look nobody asked is ignored; a process that cannot be read is
        // not proved.
        reaper.handle_look(0, &Seen::default(), Instant::now());
        reaper.handle_look(
            2,
            &Seen {
                leader: Some(Process {
                    pid: 100,
                    started: None,
                }),
                ..Seen::default()
            },
            Instant::now(),
        );
        assert_eq!(
            reaper.poll_outcome().map(|outcome| outcome.verdict),
            Some(ReapVerdict::Unprovable)
        );
        assert!(reaper.is_done());
        assert_eq!(reaper.poll_timeout(), None);
    }

    #[test]
    fn an_entry_reads_back_as_written_and_bad_files_are_refused() {
        let identity = child()
            .with_session(Some(90))
            .with_host(Some(7), Some(33))
            .with_cgroup(Some("/sys/fs/cgroup/a b\\c\nd".into()));
        let text = identity.encode();
        assert!(text.starts_with("childwire-ledger 1\npid 100\n"), "{text}");
        assert_eq!(text.lines().count(), 10, "{text}");
        assert_eq!(Identity::decode(&text), Ok(identity.clone()));
        // Unknown keys are skipped.
        let later = format!("{text}future-key whatever\n");
        assert_eq!(Identity::decode(&later), Ok(identity));
        for bad in [
            "",
            "pid 1\n",
            "childwire-ledger 1\nstarted 5\n",
            "childwire-ledger 1\npid -1\n",
            "childwire-ledger 1\npid 1\nstarted x\n",
        ] {
            assert!(Identity::decode(bad).is_err(), "{bad:?}");
        }
        let huge = format!("childwire-ledger 1\npid 1\n{}", "x".repeat(MAX_ENTRY_LEN));
        assert!(Identity::decode(&huge).is_err());
    }
}
