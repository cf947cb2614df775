//! Containment's cost (issue 12): at spawn and at shutdown, per mechanism, on Tokio (the
//! containment code is the same for every runtime).
//!
//! - Spawn: `Transport::spawn` alone, for the default (a process group; std can use
//!   `posix_spawn`), with `kill_on_parent_death` (a `pre_exec` hook, so a fork, and a hop to the
//!   spawner thread), and with `Containment::Cgroup` (mkdir of a cgroup, the child joining it).
//! - Shutdown: an EOF-obeying child (`bench-child eof-exit`) stamps CLOCK_MONOTONIC before it
//!   exits; the gap to the report holds the sweep after the exit (the /proc scan for pipe
//!   holders; with a cgroup, `cgroup.kill` and its removal). Baseline in the same run:
//!   `std::process`, drop stdin, `wait()`.
//!
//! - Shutdown among unrelated processes (issue 28): the same shutdown, alone and then with 2 000
//!   unrelated processes on the machine (`sleep`s in a session of their own, started by a shell,
//!   not by this process; 200 with `--quick`). Target: the report after the child's exit within
//!   2x of alone (p50): the sweep of a child that left nothing behind reads nothing of other
//!   processes.
//!
//! The /proc scan, when something is left behind, grows with the processes on the machine: their
//! count is printed with the table. The rows above the last are costs to know, not limits.
//!
//! `cargo xtask bench [--quick]`, or `cargo bench -p childwire-bench --bench containment`.

#[macro_use]
#[path = "support/e2e.rs"]
mod e2e;

use std::io::BufReader;
use std::process::ExitCode;
use std::time::{Duration, Instant};

use childwire_async::{Config, Containment, EndedBy, Received, Transport};
use childwire_bench::monotonic_nanos;
use childwire_tokio::Tokio;
use e2e::harness::{Args, Json, Table};
use e2e::{Bound, Goal, Timings};

/// Unrelated processes on the machine for the last row (`--quick`: a tenth).
const CROWD: usize = 2_000;

fn main() -> ExitCode {
    e2e::main("containment", bench)
}

/// The ways a child can be held, as rows.
#[derive(Clone, Copy)]
enum Setup {
    Default,
    ParentDeath,
    Cgroup,
}

impl Setup {
    const ALL: [Setup; 3] = [Setup::Default, Setup::ParentDeath, Setup::Cgroup];

    fn name(self) -> &'static str {
        match self {
            Setup::Default => "default (process group, pipe sweep)",
            Setup::ParentDeath => "kill_on_parent_death",
            Setup::Cgroup => "Containment::Cgroup",
        }
    }

    fn command(self, mode: &str) -> childwire_async::Command {
        let mut command = e2e::command(mode, &[]);
        match self {
            Setup::Default => {}
            Setup::ParentDeath => {
                command.kill_on_parent_death(true);
            }
            Setup::Cgroup => {
                command.contain(Containment::Cgroup);
            }
        }
        command
    }
}

fn bench(args: Args) -> Result<ExitCode, String> {
    let runs = if args.quick { 10 } else { 50 };
    let processes = std::fs::read_dir("/proc")
        .map(|dir| {
            dir.filter_map(Result::ok)
                .filter(|e| {
                    e.file_name()
                        .to_str()
                        .is_some_and(|n| n.parse::<u32>().is_ok())
                })
                .count()
        })
        .unwrap_or(0);
    eprintln!(
        "containment: {runs} spawns and shutdowns per setup, on Tokio, {processes} processes in /proc{}",
        e2e::quick_note(&args)
    );
    let rt = e2e::tokio_runtime();

    let mut spawn_table = Table::new(["spawn", "p50 µs", "max µs"]);
    let mut shutdown_table = Table::new([
        "shutdown of an EOF-obeying child",
        "report after child exit p50 µs",
        "max µs",
    ]);
    let mut json = Vec::new();

    // The baseline: nothing to sweep.
    let mut std_after = Timings::default();
    for _ in 0..runs {
        std_after.push(std_eof()?);
    }
    shutdown_table.row([
        "std::process (drop stdin, wait)".to_string(),
        e2e::us(std_after.median()),
        e2e::us(*std_after.sorted().last().unwrap_or(&Duration::ZERO)),
    ]);

    for setup in Setup::ALL {
        let mut spawns = Timings::default();
        let mut after = Timings::default();
        let mut unavailable = None;
        for _ in 0..runs {
            let outcome = rt.block_on(async {
                let command = setup.command("eof-exit");
                let start = Instant::now();
                let spawned = Transport::<Tokio>::spawn(&command, plain_text_config());
                let took = start.elapsed();
                let mut transport = match spawned {
                    Ok(t) => t,
                    Err(err) => return Err(Some(err.to_string())),
                };
                match transport.recv().await {
                    Some(Received::Message(m)) if *m == *b"ready" => {}
                    other => return Err(Some(format!("expected `ready`, got {other:?}"))),
                }
                let report = transport
                    .shutdown()
                    .await
                    .map_err(|e| Some(e.to_string()))?;
                let end = monotonic_nanos();
                if report.ended_by != EndedBy::StdinClose || !report.success() {
                    return Err(Some(format!("unexpected end: {report}")));
                }
                let exit = match transport.recv().await {
                    Some(Received::Message(m)) => exit_stamp(&m)?,
                    other => return Err(Some(format!("expected `exit-at`, got {other:?}"))),
                };
                Ok((took, Duration::from_nanos(end.saturating_sub(exit))))
            });
            match outcome {
                Ok((took, gap)) => {
                    spawns.push(took);
                    after.push(gap);
                }
                Err(why) => {
                    unavailable = why;
                    break;
                }
            }
        }
        if let Some(why) = unavailable {
            eprintln!("containment: {}: not measured: {why}", setup.name());
            spawn_table.row([setup.name().to_string(), "n/a".into(), "n/a".into()]);
            continue;
        }
        let max = |t: &Timings| *t.sorted().last().unwrap_or(&Duration::ZERO);
        spawn_table.row([
            setup.name().to_string(),
            e2e::us(spawns.median()),
            e2e::us(max(&spawns)),
        ]);
        shutdown_table.row([
            setup.name().to_string(),
            e2e::us(after.median()),
            e2e::us(max(&after)),
        ]);
        json.push(Json::object([
            ("setup", Json::from(setup.name())),
            ("spawn_seconds", Json::from(spawns.all())),
            ("after_child_exit_seconds", Json::from(after.all())),
        ]));
    }
    let crowd = if args.quick { CROWD / 10 } else { CROWD };
    let (crowd_table, crowd_json, goals) = among_unrelated(runs, crowd)?;
    let results = Json::object([
        ("runs", Json::from(runs)),
        ("processes_in_proc", Json::from(processes)),
        ("std_after_child_exit_seconds", Json::from(std_after.all())),
        ("setups", Json::Arr(json)),
        ("unrelated_processes", Json::from(crowd)),
        ("among_unrelated", crowd_json),
    ]);
    Ok(e2e::finish(
        "containment",
        &args,
        &[spawn_table, shutdown_table, crowd_table],
        &goals,
        results,
    ))
}

/// Processes in `/proc` now.
fn processes_now() -> usize {
    std::fs::read_dir("/proc").map_or(0, |dir| {
        dir.filter_map(Result::ok)
            .filter(|e| {
                e.file_name()
                    .to_str()
                    .is_some_and(|n| n.parse::<u32>().is_ok())
            })
            .count()
    })
}

/// `crowd` sleeping processes in a session of their own, started by a shell (so they are not
/// this process's children), ended when dropped.
struct Crowd {
    shell: std::process::Child,
}

impl Crowd {
    fn start(crowd: usize) -> Result<Self, String> {
        use std::os::unix::process::CommandExt;
        let before = processes_now();
        let shell = std::process::Command::new("sh")
            .arg("-c")
            .arg(format!(
                "i=0; while [ $i -lt {crowd} ]; do sleep 3600 & i=$((i+1)); done; wait"
            ))
            .stdin(std::process::Stdio::null())
            .stdout(std::process::Stdio::null())
            .process_group(0)
            .spawn()
            .map_err(|e| format!("sh: {e}"))?;
        let crowd_up = Instant::now();
        // Started and quiet: every sleep (and the shell, in `wait`) asleep in the shell's group,
        // so the rows compare a busy /proc, not a machine still forking.
        while processes_now() < before + crowd || asleep_in_group(shell.id()) < crowd + 1 {
            if crowd_up.elapsed() > Duration::from_secs(120) {
                return Err(format!("{crowd} sleeps did not start in 120 s"));
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        Ok(Self { shell })
    }
}

/// Processes of process group `pgid` that are asleep (state `S`).
fn asleep_in_group(pgid: u32) -> usize {
    let Ok(dir) = std::fs::read_dir("/proc") else {
        return 0;
    };
    dir.filter_map(Result::ok)
        .filter_map(|e| std::fs::read_to_string(e.path().join("stat")).ok())
        .filter(|stat| {
            // `pid (comm) state ppid pgrp ...`
            let mut fields = stat
                .rsplit_once(')')
                .map(|(_, rest)| rest.split_whitespace());
            let state = fields.as_mut().and_then(Iterator::next);
            let pgrp = fields.as_mut().and_then(|f| f.nth(1));
            state == Some("S") && pgrp.and_then(|g| g.parse().ok()) == Some(pgid)
        })
        .count()
}

impl Drop for Crowd {
    fn drop(&mut self) {
        use rustix::process::{Pid, Signal, kill_process_group};
        if let Some(group) = i32::try_from(self.shell.id()).ok().and_then(Pid::from_raw) {
            let _ = kill_process_group(group, Signal::KILL);
        }
        let _ = self.shell.wait();
    }
}

/// One default shutdown of the EOF-obeying child on Tokio: (`shutdown()` to the report, the
/// child's exit to the report).
fn timed_shutdown() -> Result<(Duration, Duration), String> {
    e2e::tokio_runtime().block_on(async {
        let mut transport =
            Transport::<Tokio>::spawn(&e2e::command("eof-exit", &[]), plain_text_config())
                .map_err(|e| e.to_string())?;
        match transport.recv().await {
            Some(Received::Message(m)) if *m == *b"ready" => {}
            other => return Err(format!("expected `ready`, got {other:?}")),
        }
        let start = monotonic_nanos();
        let report = transport.shutdown().await.map_err(|e| e.to_string())?;
        let end = monotonic_nanos();
        if report.ended_by != EndedBy::StdinClose || !report.success() {
            return Err(format!("unexpected end: {report}"));
        }
        let exit = match transport.recv().await {
            Some(Received::Message(m)) => exit_stamp(&m).map_err(Option::unwrap_or_default)?,
            other => return Err(format!("expected `exit-at`, got {other:?}")),
        };
        Ok((
            Duration::from_nanos(end.saturating_sub(start)),
            Duration::from_nanos(end.saturating_sub(exit)),
        ))
    })
}

/// The shutdown alone, then with `crowd` unrelated processes: its table, results and target.
fn among_unrelated(runs: usize, crowd: usize) -> Result<(Table, Json, Vec<Goal>), String> {
    let mut table = Table::new([
        "default shutdown",
        "processes in /proc",
        "shutdown p50 µs",
        "report after child exit p50 µs",
        "max µs",
        "std::process after exit p50 µs",
    ]);
    let mut measure = |label: String| -> Result<(Timings, Timings), String> {
        let (mut totals, mut after) = (Timings::default(), Timings::default());
        let mut std_after = Timings::default();
        let processes = processes_now();
        for _ in 0..runs {
            let (total, gap) = timed_shutdown()?;
            totals.push(total);
            after.push(gap);
            std_after.push(std_eof()?);
        }
        table.row([
            label,
            processes.to_string(),
            e2e::us(totals.median()),
            e2e::us(after.median()),
            e2e::us(*after.sorted().last().unwrap_or(&Duration::ZERO)),
            e2e::us(std_after.median()),
        ]);
        Ok((totals, after))
    };
    let alone = measure("alone".into())?;
    let crowded = {
        let _crowd = Crowd::start(crowd)?;
        measure(format!("with {crowd} unrelated processes"))?
    };
    let ratio = crowded.1.median().as_secs_f64() / alone.1.median().as_secs_f64();
    let goals = vec![Goal::new(
        format!("report after child exit with {crowd} unrelated processes, p50 vs alone"),
        ratio,
        Bound::AtMost(2.0),
        "x",
    )];
    let json = Json::object([
        ("alone_shutdown_seconds", Json::from(alone.0.all())),
        ("alone_after_child_exit_seconds", Json::from(alone.1.all())),
        ("crowded_shutdown_seconds", Json::from(crowded.0.all())),
        (
            "crowded_after_child_exit_seconds",
            Json::from(crowded.1.all()),
        ),
    ]);
    Ok((table, json, goals))
}

/// `exit-at NANOS` → NANOS.
fn exit_stamp(line: &[u8]) -> Result<u64, Option<String>> {
    std::str::from_utf8(line)
        .ok()
        .and_then(|l| l.trim_end().strip_prefix("exit-at "))
        .and_then(|n| n.parse().ok())
        .ok_or_else(|| Some(format!("expected `exit-at NANOS`, got {line:?}")))
}

/// The baseline: from the child's exit stamp to `wait()` returning.
fn std_eof() -> Result<Duration, String> {
    let (mut child, stdin, stdout) = e2e::std_spawn("eof-exit", &[])?;
    let mut stdout = BufReader::new(stdout);
    let mut line = Vec::new();
    e2e::read_line(&mut stdout, &mut line)?;
    drop(stdin);
    child.wait().map_err(|e| format!("wait: {e}"))?;
    let end = monotonic_nanos();
    e2e::read_line(&mut stdout, &mut line)?;
    let exit = exit_stamp(&line).map_err(|e| e.unwrap_or_default())?;
    Ok(Duration::from_nanos(end.saturating_sub(exit)))
}

/// The default config without pollution notices: the bench children speak
/// plain-text lines ("ready", exit stamps).
fn plain_text_config() -> Config {
    let mut config = Config::default();
    config.pollution(None);
    config
}
