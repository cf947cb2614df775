//! Fuzzing of the spawn ledger's clean-up run (`Reaper`) against a reference model, in a
//! simulated world of processes: entries with arbitrary identities (no start time, another boot,
//! a host still running, a PID reused by a later process or unreadable, a group with members
//! older and younger than the child, a cgroup), processes that die at SIGTERM, only at SIGKILL,
//! or never, and arbitrary graces. The driver answers each look from the world and carries out
//! each signal as the OS layer does (only on a process with the target's PID *and* start time).
//!
//! Held: each entry settled exactly once, with the verdict and the list of ended processes the
//! model gives; no signal ever aimed at a process the entry cannot claim; SIGKILL never before
//! `term_grace` after SIGTERM; the cgroup killed with SIGKILL only and only for an entry with
//! one; the whole run over within `term_grace + kill_grace`; an entry's file decodes to itself.

#![no_main]

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use arbitrary::Arbitrary;
use childwire_core::Signal;
use childwire_core::ledger::{
    Identity, Process, ReapAction, ReapConfig, ReapVerdict, Reaper, Seen,
};
use libfuzzer_sys::fuzz_target;

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Arbitrary)]
enum Fate {
    DiesAtTerm,
    DiesAtKill,
    Unkillable,
}

#[derive(Debug, Clone, Copy, Arbitrary)]
enum Leader {
    Gone,
    Matched(Fate),
    /// A later process holds the PID.
    Reused,
    /// A process holds the PID, and its start time cannot be read.
    Unreadable,
}

#[derive(Debug, Clone, Copy, Arbitrary)]
enum Boot {
    Same,
    Earlier,
    NotRecorded,
}

#[derive(Debug, Arbitrary)]
struct EntryInput {
    recorded_start: bool,
    boot: Boot,
    host_alive: bool,
    leader: Leader,
    group: bool,
    /// Members of the group: how much later than the child each started (negative: earlier,
    /// so not its own), and its fate.
    members: Vec<(i8, Fate)>,
    cgroup: Option<Vec<Fate>>,
}

#[derive(Debug, Arbitrary)]
struct Input {
    entries: Vec<EntryInput>,
    machine_boot_known: bool,
    term_grace: u8,
    kill_grace: u8,
    look_every: u8,
}

const START: u64 = 10_000;
const BOOT: &str = "boot-now";

/// A simulated process.
#[derive(Debug, Clone)]
struct Proc {
    started: Option<u64>,
    pgrp: u32,
    cgroup: Option<usize>,
    fate: Fate,
    alive: bool,
}

struct World {
    procs: BTreeMap<u32, Proc>,
}

impl World {
    fn live(&self, pid: u32) -> Option<Process> {
        let p = self.procs.get(&pid).filter(|p| p.alive)?;
        Some(Process {
            pid,
            started: p.started,
        })
    }

    fn look(&self, entry: usize, identity: &Identity) -> Seen {
        let members = |keep: &dyn Fn(&Proc) -> bool| {
            self.procs
                .iter()
                .filter(|(_, p)| p.alive && keep(p))
                .map(|(&pid, p)| Process {
                    pid,
                    started: p.started,
                })
                .collect()
        };
        Seen {
            host: identity.host.and_then(|host| self.live(host)),
            leader: self.live(identity.pid),
            group: identity
                .group
                .map(|pgid| members(&|p| p.pgrp == pgid))
                .unwrap_or_default(),
            cgroup: if identity.cgroup.is_some() {
                members(&|p| p.cgroup == Some(entry))
            } else {
                Vec::new()
            },
        }
    }

    fn signal(&mut self, target: &Process, signal: Signal) {
        if let Some(p) = self.procs.get_mut(&target.pid) {
            if p.alive && p.started == target.started {
                hit(p, signal);
            }
        }
    }

    fn kill_cgroup(&mut self, entry: usize) {
        for p in self.procs.values_mut() {
            if p.cgroup == Some(entry) && p.alive {
                hit(p, Signal::Kill);
            }
        }
    }
}

fn hit(p: &mut Proc, signal: Signal) {
    p.alive = match (p.fate, signal) {
        (Fate::Unkillable, _) | (Fate::DiesAtKill, Signal::Term) => p.alive,
        _ => false,
    };
}

/// What the model expects of an entry: its verdict, and the processes it may signal.
struct Expected {
    verdict: ReapVerdict,
    ended: Vec<u32>,
    claimable: Vec<u32>,
}

fn ms(n: u8) -> Duration {
    Duration::from_millis(u64::from(n))
}

fuzz_target!(|input: Input| {
    let config = {
        let mut config = ReapConfig::default();
        config.term_grace = ms(input.term_grace);
        config.kill_grace = ms(input.kill_grace);
        config.look_every = ms(input.look_every);
        config
    };
    let mut world = World {
        procs: BTreeMap::new(),
    };
    let mut identities = Vec::new();
    let mut expected = Vec::new();
    for (i, e) in input.entries.iter().take(6).enumerate() {
        let pid = 100 * (i as u32 + 1);
        let host = 9000 + i as u32;
        let started = e.recorded_start.then_some(START);
        let mut identity = Identity::new(pid, started)
            .with_boot_id(match e.boot {
                Boot::Same => Some(BOOT.into()),
                Boot::Earlier => Some("boot-before".into()),
                Boot::NotRecorded => None,
            })
            .with_group(e.group.then_some(pid))
            .with_cgroup(e.cgroup.as_ref().map(|_| format!("/cg/childwire-{i}")))
            .with_host(Some(host), Some(7));
        identity.program = Some(format!("program {i}"));
        assert_eq!(Identity::decode(&identity.encode()).as_ref(), Ok(&identity));
        if e.host_alive {
            world.procs.insert(
                host,
                Proc {
                    started: Some(7),
                    pgrp: host,
                    cgroup: None,
                    fate: Fate::Unkillable,
                    alive: true,
                },
            );
        }
        let mut claimed: Vec<(u32, Fate)> = Vec::new();
        match e.leader {
            Leader::Gone => {}
            Leader::Matched(_) | Leader::Reused | Leader::Unreadable => {
                let (started, fate) = match e.leader {
                    Leader::Matched(fate) => (Some(START), fate),
                    Leader::Reused => (Some(START + 1), Fate::Unkillable),
                    _ => (None, Fate::Unkillable),
                };
                world.procs.insert(
                    pid,
                    Proc {
                        started,
                        pgrp: pid,
                        cgroup: None,
                        fate,
                        alive: true,
                    },
                );
                if let Leader::Matched(fate) = e.leader {
                    claimed.push((pid, fate));
                }
            }
        }
        for (j, &(offset, fate)) in e.members.iter().take(8).enumerate() {
            let member = pid + 1 + j as u32;
            let started = START.checked_add_signed(i64::from(offset)).expect("small");
            world.procs.insert(
                member,
                Proc {
                    started: Some(started),
                    pgrp: pid,
                    cgroup: None,
                    fate,
                    alive: true,
                },
            );
            if e.group && started >= START {
                claimed.push((member, fate));
            }
        }
        for (j, &fate) in e.cgroup.iter().flatten().take(8).enumerate() {
            let member = pid + 50 + j as u32;
            // Another group, in the entry's cgroup.
            world.procs.insert(
                member,
                Proc {
                    started: Some(START + 5),
                    pgrp: member,
                    cgroup: Some(i),
                    fate,
                    alive: true,
                },
            );
            claimed.push((member, fate));
        }
        claimed.sort_unstable();
        let machine_boot = input.machine_boot_known;
        let verdict = if started.is_none() {
            ReapVerdict::Unprovable
        } else if matches!(e.boot, Boot::Earlier) && machine_boot {
            ReapVerdict::EarlierBoot
        } else if !matches!(e.boot, Boot::NotRecorded) && !machine_boot {
            ReapVerdict::Unprovable
        } else if e.host_alive {
            ReapVerdict::HostAlive
        } else if matches!(e.leader, Leader::Reused) {
            ReapVerdict::PidReused
        } else if matches!(e.leader, Leader::Unreadable) {
            ReapVerdict::Unprovable
        } else if claimed.is_empty() {
            ReapVerdict::AlreadyGone
        } else if claimed.iter().any(|&(_, fate)| fate == Fate::Unkillable) {
            ReapVerdict::Survived(
                claimed
                    .iter()
                    .filter(|&&(_, fate)| fate == Fate::Unkillable)
                    .map(|&(pid, _)| pid)
                    .collect(),
            )
        } else if claimed.iter().all(|&(_, fate)| fate == Fate::DiesAtTerm)
            && config.look_every.max(Duration::from_millis(1)) < config.term_grace
        {
            ReapVerdict::Ended(Signal::Term)
        } else {
            ReapVerdict::Ended(Signal::Kill)
        };
        let acts = matches!(verdict, ReapVerdict::Ended(_) | ReapVerdict::Survived(_));
        let ended = if acts {
            claimed
                .iter()
                .filter(|&&(_, fate)| fate != Fate::Unkillable)
                .map(|&(pid, _)| pid)
                .collect()
        } else {
            Vec::new()
        };
        expected.push(Expected {
            verdict,
            ended,
            claimable: if acts {
                claimed.iter().map(|&(pid, _)| pid).collect()
            } else {
                Vec::new()
            },
        });
        identities.push(identity);
    }

    let start = Instant::now();
    let boot = input.machine_boot_known.then_some(BOOT);
    let mut reaper = Reaper::new(identities.iter().cloned(), boot, config.clone());
    let mut now = start;
    let mut settled: Vec<Option<(Duration, ReapVerdict, Vec<u32>)>> = vec![None; identities.len()];
    let mut term_at: Vec<Option<Instant>> = vec![None; identities.len()];
    let mut steps = 0;
    loop {
        steps += 1;
        assert!(steps < 100_000, "the run does not end");
        while let Some(action) = reaper.poll_action() {
            match action {
                ReapAction::Look(entry) => {
                    let seen = world.look(entry, &identities[entry]);
                    reaper.handle_look(entry, &seen, now);
                }
                ReapAction::Signal {
                    entry,
                    signal,
                    targets,
                    cgroup,
                } => {
                    for target in &targets {
                        assert!(
                            expected[entry].claimable.contains(&target.pid),
                            "entry {entry} signals {} which it cannot claim",
                            target.pid
                        );
                        world.signal(target, signal);
                    }
                    match signal {
                        Signal::Term => {
                            assert!(!cgroup, "cgroup.kill is SIGKILL");
                            term_at[entry].get_or_insert(now);
                        }
                        Signal::Kill => {
                            let term = term_at[entry].expect("SIGTERM came first");
                            assert!(now - term >= config.term_grace, "SIGKILL too early");
                            assert_eq!(cgroup, identities[entry].cgroup.is_some());
                            if cgroup {
                                world.kill_cgroup(entry);
                            }
                        }
                    }
                }
            }
        }
        while let Some(outcome) = reaper.poll_outcome() {
            let slot = &mut settled[outcome.entry];
            assert!(slot.is_none(), "entry {} settled twice", outcome.entry);
            assert_eq!(outcome.identity, identities[outcome.entry]);
            *slot = Some((now - start, outcome.verdict, outcome.ended));
        }
        match reaper.poll_timeout() {
            Some(at) => {
                assert!(!reaper.is_done());
                assert!(at >= now, "the timeout went back");
                now = at;
                reaper.handle_timeout(now);
            }
            None => break,
        }
    }
    assert!(reaper.is_done(), "no timeout, and not done");
    for (entry, (outcome, want)) in settled.into_iter().zip(&expected).enumerate() {
        let (at, verdict, ended) = outcome.unwrap_or_else(|| panic!("entry {entry} unsettled"));
        assert_eq!(
            verdict, want.verdict,
            "entry {entry}: {:?}",
            input.entries[entry]
        );
        assert_eq!(ended, want.ended, "entry {entry}");
        assert!(
            at <= config.term_grace + config.kill_grace,
            "entry {entry} settled only after {at:?}"
        );
    }
});
