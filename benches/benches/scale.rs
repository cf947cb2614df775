//! Scale (issue 7, item 5): 200 children at once on one runtime, each
//! echoing 1 000 messages through `bench-child cat`, then all shut down the
//! spec way (`shutdown()`: close stdin, the child exits on EOF).
//!
//! Each adapter runs in a process of its own (this binary again,
//! `--probe NAME`), so its peak RSS is its own. Reported: total wall time,
//! the caller's peak RSS growth per child, each child's own peak RSS.
//! Targets: every shutdown succeeds (exit code 0, ended by the stdin close)
//! and no child process is left (checked in `/proc`).
//!
//! Churn (issue 28, item 1), each in a process of its own too:
//! - 10 000 spawns of `bench-child cat`, each transport dropped at once, in
//!   a tight loop on each runtime (1 000 with `--quick`). Targets: every
//!   spawn succeeds, the descriptors open at the end are those open at the
//!   start, at no point more than 1 000 above them (the collapse this
//!   guards against had 17 758 outstanding), and no child is left once the
//!   loop's children are reaped.
//! - 500 running transports dropped at once (100 with `--quick`), timed
//!   until the last child is gone from `/proc` (reaped). Baseline in the
//!   same run: the same children under plain `tokio::process` in process
//!   groups of their own, each group sent SIGKILL and each child waited
//!   for. Target: within 2x of it.
//!
//! `cargo xtask bench [--quick] [--check]`, or
//! `cargo bench -p childwire-bench --bench scale -- [--quick] [--check]`.

#[macro_use]
#[path = "support/e2e.rs"]
mod e2e;

use std::process::ExitCode;
use std::time::{Duration, Instant};

use bytes::Bytes;
use childwire_async::{Config, EndedBy, Received, Runtime, Transport};
use childwire_bench::{live_children, proc_status_kib};
use e2e::harness::{Args, Json, Table};
use e2e::{Adapter, Bound, Goal};

const CHILDREN: usize = 200;
const LINE_LEN: usize = 200;

/// Spawn+drop rounds of the churn row (`--quick`: a tenth).
const CHURN: usize = 10_000;
/// How far above the start the descriptor count may ever go in the churn.
const CHURN_MAX_EXTRA_FDS: f64 = 1_000.0;
/// Transports dropped at once (`--quick`: a fifth).
const DROPPED: usize = 500;
/// How long reaping what a probe started may take before it is a failure.
const DRAIN_LIMIT: Duration = Duration::from_secs(120);
/// How long the descriptors may take to come back once every child is
/// reaped: a leak shows as the count after it.
const FDS_SETTLE: Duration = Duration::from_secs(10);

fn main() -> ExitCode {
    e2e::main("scale", bench)
}

fn bench(args: Args) -> Result<ExitCode, String> {
    let messages = if args.quick { 100 } else { 1_000 };
    let churn = if args.quick { CHURN / 10 } else { CHURN };
    let dropped = if args.quick { DROPPED / 5 } else { DROPPED };
    if let Some(probe) = e2e::flag_value("--probe") {
        if let Some(name) = probe.strip_prefix("churn-") {
            return churn_probe(name, churn);
        }
        if let Some(name) = probe.strip_prefix("drop-") {
            return drop_probe(name, dropped);
        }
        return run_probe(&probe, messages);
    }
    eprintln!(
        "scale: {CHILDREN} children at once, {messages} echoed messages each, then shutdown(); \
         one process per adapter{}",
        e2e::quick_note(&args)
    );

    let mut table = Table::new([
        "adapter",
        "wall ms",
        "clean shutdowns",
        "left in /proc",
        "caller peak MiB",
        "caller KiB/child",
        "child peak KiB (avg)",
        "child peak KiB (max)",
    ]);
    let mut goals = Vec::new();
    let mut json = Vec::new();
    for adapter in Adapter::ALL {
        let probe = e2e::run_probe(adapter.name(), &args)?;
        let (clean, left) = (probe.num("clean"), probe.num("left"));
        let per_child = (probe.num("peak_kib") - probe.num("start_kib")) / CHILDREN as f64;
        table.row([
            adapter.name().to_string(),
            format!("{:.0}", probe.num("seconds") * 1e3),
            format!("{clean}/{CHILDREN}"),
            format!("{left}"),
            format!("{:.1}", probe.num("peak_kib") / 1024.0),
            format!("{per_child:.0}"),
            format!("{:.0}", probe.num("child_peak_avg_kib")),
            format!("{:.0}", probe.num("child_peak_max_kib")),
        ]);
        goals.push(Goal::holds(
            format!("{} all {CHILDREN} shut down cleanly", adapter.name()),
            clean == CHILDREN as f64,
        ));
        goals.push(Goal::holds(
            format!("{} no process left", adapter.name()),
            left == 0.0,
        ));
        if let Some(note) = probe.text("note").filter(|n| !n.is_empty()) {
            eprintln!("scale: {}: {note}", adapter.name());
        }
        json.push(Json::object([
            ("adapter", Json::from(adapter.name())),
            ("wall_seconds", Json::from(probe.num("seconds"))),
            ("clean_shutdowns", Json::from(clean)),
            ("processes_left", Json::from(left)),
            ("caller_start_rss_kib", Json::from(probe.num("start_kib"))),
            ("caller_peak_rss_kib", Json::from(probe.num("peak_kib"))),
            ("caller_kib_per_child", Json::from(per_child)),
            (
                "child_peak_rss_avg_kib",
                Json::from(probe.num("child_peak_avg_kib")),
            ),
            (
                "child_peak_rss_max_kib",
                Json::from(probe.num("child_peak_max_kib")),
            ),
        ]));
    }
    let (churn_table, churn_json) = churn_rows(&args, churn, &mut goals)?;
    let (drop_table, drop_json) = drop_rows(&args, dropped, &mut goals)?;
    let results = Json::object([
        ("children", Json::from(CHILDREN)),
        ("messages_per_child", Json::from(messages)),
        ("line_bytes", Json::from(LINE_LEN)),
        ("adapters", Json::Arr(json)),
        ("churn_spawns", Json::from(churn)),
        ("churn", Json::Arr(churn_json)),
        ("dropped_at_once", Json::from(dropped)),
        ("drop", Json::Arr(drop_json)),
    ]);
    Ok(e2e::finish(
        "scale",
        &args,
        &[table, churn_table, drop_table],
        &goals,
        results,
    ))
}

/// The spawn+drop churn on each adapter, each in a probe process.
fn churn_rows(
    args: &Args,
    churn: usize,
    goals: &mut Vec<Goal>,
) -> Result<(Table, Vec<Json>), String> {
    eprintln!("scale: {churn} spawn+drop of `cat` in a tight loop, per adapter");
    let mut table = Table::new([
        "spawn+drop churn",
        "spawned",
        "loop s",
        "drained s",
        "fds start",
        "fds max",
        "fds end",
        "children max",
        "left",
    ]);
    let mut json = Vec::new();
    for adapter in Adapter::ALL {
        let probe = e2e::run_probe(&format!("churn-{}", adapter.name()), args)?;
        let name = adapter.name();
        let (start, max, end) = (
            probe.num("fds_start"),
            probe.num("fds_max"),
            probe.num("fds_end"),
        );
        table.row([
            name.to_string(),
            format!("{}/{churn}", probe.num("spawned")),
            format!("{:.2}", probe.num("loop_seconds")),
            format!("{:.2}", probe.num("drain_seconds")),
            format!("{start}"),
            format!("{max}"),
            format!("{end}"),
            format!("{}", probe.num("children_max")),
            format!("{}", probe.num("left")),
        ]);
        goals.push(Goal::holds(
            format!("{name} churn: every spawn succeeded"),
            probe.num("spawned") == churn as f64,
        ));
        goals.push(Goal::new(
            format!("{name} churn: most descriptors over the start"),
            max - start,
            Bound::AtMost(CHURN_MAX_EXTRA_FDS),
            "",
        ));
        goals.push(Goal::holds(
            format!("{name} churn: the descriptors at the end are those at the start"),
            end == start,
        ));
        goals.push(Goal::holds(
            format!("{name} churn: no process left"),
            probe.num("left") == 0.0,
        ));
        if let Some(note) = probe.text("note").filter(|n| !n.is_empty()) {
            eprintln!("scale: churn {name}: {note}");
        }
        json.push(Json::object([
            ("adapter", Json::from(name)),
            ("spawned", Json::from(probe.num("spawned"))),
            ("loop_seconds", Json::from(probe.num("loop_seconds"))),
            ("drain_seconds", Json::from(probe.num("drain_seconds"))),
            ("fds_start", Json::from(start)),
            ("fds_max", Json::from(max)),
            ("fds_end", Json::from(end)),
            ("children_max", Json::from(probe.num("children_max"))),
            ("processes_left", Json::from(probe.num("left"))),
        ]));
    }
    Ok((table, json))
}

/// Dropping many running transports at once on each adapter, against
/// plain `tokio::process` with a group kill, each in a probe process:
/// interleaved repetitions, medians compared.
fn drop_rows(
    args: &Args,
    dropped: usize,
    goals: &mut Vec<Goal>,
) -> Result<(Table, Vec<Json>), String> {
    let reps = if args.quick { 3 } else { 7 };
    eprintln!(
        "scale: {dropped} running children dropped at once, until all are reaped; \
         {reps} interleaved repetitions"
    );
    let contenders: Vec<&str> = std::iter::once("tokio-process")
        .chain(Adapter::ALL.iter().map(|a| a.name()))
        .collect();
    let mut seconds = vec![Vec::new(); contenders.len()];
    let mut left = vec![0.0; contenders.len()];
    for _ in 0..reps {
        for (i, name) in contenders.iter().enumerate() {
            let probe = e2e::run_probe(&format!("drop-{name}"), args)?;
            if let Some(note) = probe.text("note").filter(|n| !n.is_empty()) {
                eprintln!("scale: drop {name}: {note}");
            }
            seconds[i].push(probe.num("seconds"));
            left[i] += probe.num("left");
        }
    }
    let median = |v: &[f64]| {
        let mut v = v.to_vec();
        v.sort_by(f64::total_cmp);
        v[v.len() / 2]
    };
    let spread = |v: &[f64]| {
        let (min, max) = v
            .iter()
            .fold((f64::INFINITY, f64::NEG_INFINITY), |(lo, hi), &x| {
                (lo.min(x), hi.max(x))
            });
        format!("{:.1}-{:.1}", min * 1e3, max * 1e3)
    };
    let base = median(&seconds[0]);
    let mut table = Table::new([
        "dropped at once",
        "reaped p50 ms",
        "range ms",
        "x baseline",
        "left",
    ]);
    let mut json = Vec::new();
    for (i, name) in contenders.iter().enumerate() {
        let p50 = median(&seconds[i]);
        let ratio = p50 / base;
        let label = if i == 0 {
            "tokio::process + group SIGKILL + wait"
        } else {
            name
        };
        table.row([
            label.to_string(),
            format!("{:.1}", p50 * 1e3),
            spread(&seconds[i]),
            format!("{ratio:.2}"),
            format!("{}", left[i]),
        ]);
        if i > 0 {
            goals.push(Goal::new(
                format!("{name} {dropped} dropped at once: reaped p50, vs tokio::process"),
                ratio,
                Bound::AtMost(2.0),
                "x",
            ));
            goals.push(Goal::holds(
                format!("{name} {dropped} dropped at once: no process left"),
                left[i] == 0.0,
            ));
        }
        json.push(Json::object([
            ("contender", Json::from(*name)),
            (
                "seconds",
                Json::Arr(seconds[i].iter().map(|&s| Json::from(s)).collect()),
            ),
            ("processes_left", Json::from(left[i])),
        ]));
    }
    Ok((table, json))
}

/// Descriptors this process has open now.
fn open_fds() -> usize {
    std::fs::read_dir("/proc/self/fd").map_or(0, Iterator::count)
}

/// Waits on `R`'s clock until no child of this process is left (reaped),
/// within [`DRAIN_LIMIT`]; how long it took, or how many are left.
async fn drain<R: Runtime>() -> Result<Duration, usize> {
    let started = Instant::now();
    loop {
        let left = live_children().map_or(usize::MAX, |pids| pids.len());
        if left == 0 {
            return Ok(started.elapsed());
        }
        if started.elapsed() > DRAIN_LIMIT {
            return Err(left);
        }
        let _ = e2e::sleep::<R>(Duration::from_millis(5)).await;
    }
}

/// The descriptors open once they are back to `start`, or after
/// [`FDS_SETTLE`] if they never are.
async fn settled_fds<R: Runtime>(start: usize) -> usize {
    let started = Instant::now();
    loop {
        let open = open_fds();
        if open <= start || started.elapsed() > FDS_SETTLE {
            return open;
        }
        let _ = e2e::sleep::<R>(Duration::from_millis(5)).await;
    }
}

/// Waits on `R`'s clock until none of `pids` is in `/proc` (reaped).
async fn gone<R: Runtime>(pids: &[u32]) -> Result<Duration, usize> {
    let started = Instant::now();
    let mut left: Vec<u32> = pids.to_vec();
    loop {
        left.retain(|pid| std::path::Path::new(&format!("/proc/{pid}")).exists());
        if left.is_empty() {
            return Ok(started.elapsed());
        }
        if started.elapsed() > DRAIN_LIMIT {
            return Err(left.len());
        }
        let _ = e2e::sleep::<R>(Duration::from_millis(1)).await;
    }
}

fn churn_probe(name: &str, churn: usize) -> Result<ExitCode, String> {
    let adapter = Adapter::from_name(name).ok_or_else(|| format!("unknown probe `{name}`"))?;
    let line = on_adapter!(adapter, R => churn_loop::<R>(churn).await);
    println!("probe-result {line}");
    Ok(ExitCode::SUCCESS)
}

/// The churn on `R`: its `probe-result` fields.
async fn churn_loop<R: Runtime>(churn: usize) -> String {
    // One round first: the runtime's own descriptors (signal pipes, the
    // reaper) are open before the count starts.
    if let Ok(t) = e2e::spawn::<R>("cat", &[], Config::default()) {
        drop(t);
    }
    let _ = drain::<R>().await;
    let fds_start = open_fds();
    let (mut fds_max, mut children_max, mut spawned) = (fds_start, 0, 0);
    let mut note = String::new();
    let started = Instant::now();
    for i in 0..churn {
        match e2e::spawn::<R>("cat", &[], Config::default()) {
            Ok(transport) => drop(transport),
            Err(error) => {
                note = format!("spawn {i} failed: {error}");
                break;
            }
        }
        spawned += 1;
        if i % 50 == 0 {
            fds_max = fds_max.max(open_fds());
        }
        if i % 500 == 0 {
            children_max = children_max.max(live_children().map_or(0, |c| c.len()));
        }
    }
    let loop_seconds = started.elapsed().as_secs_f64();
    let (drain_seconds, left) = match drain::<R>().await {
        Ok(took) => (took.as_secs_f64(), 0),
        Err(left) => (f64::NAN, left),
    };
    // A child is reaped before its driver has closed its descriptors (on
    // smol and async-std the reaper is another thread): wait for them to
    // come back to the start, on the runtime's clock, a while at most.
    let fds_end = settled_fds::<R>(fds_start).await;
    format!(
        "spawned={spawned} loop_seconds={loop_seconds:.3} drain_seconds={drain_seconds:.3} \
         fds_start={fds_start} fds_max={fds_max} fds_end={fds_end} children_max={children_max} \
         left={left} note={note}"
    )
}

fn drop_probe(name: &str, dropped: usize) -> Result<ExitCode, String> {
    let line = if name == "tokio-process" {
        e2e::tokio_runtime().block_on(drop_tokio_process(dropped))
    } else {
        let adapter = Adapter::from_name(name).ok_or_else(|| format!("unknown probe `{name}`"))?;
        on_adapter!(adapter, R => drop_transports::<R>(dropped).await)
    };
    println!("probe-result {line}");
    Ok(ExitCode::SUCCESS)
}

/// `dropped` running transports, dropped at once: how long until every
/// child is reaped.
async fn drop_transports<R: Runtime>(dropped: usize) -> String {
    let mut transports = Vec::with_capacity(dropped);
    for _ in 0..dropped {
        match e2e::spawn::<R>("cat", &[], Config::default()) {
            Ok(t) => transports.push(t),
            Err(error) => return format!("seconds=nan left=nan note=spawn: {error}"),
        }
    }
    let pids: Vec<u32> = transports.iter().filter_map(Transport::id).collect();
    let started = Instant::now();
    drop(transports);
    let reaped = gone::<R>(&pids).await;
    let seconds = started.elapsed().as_secs_f64();
    let left = drain::<R>().await.err().unwrap_or(0);
    match reaped {
        Ok(_) => format!("seconds={seconds:.4} left={left}"),
        Err(n) => format!("seconds=nan left={left} note={n} children not reaped"),
    }
}

/// The baseline: the same children under `tokio::process`, each the
/// leader of its group, the groups sent SIGKILL and each child waited for.
async fn drop_tokio_process(dropped: usize) -> String {
    use rustix::process::{Pid, Signal, kill_process_group};
    let mut children = Vec::with_capacity(dropped);
    for _ in 0..dropped {
        let mut command = tokio::process::Command::new(e2e::CHILD);
        command
            .arg("cat")
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .process_group(0);
        match command.spawn() {
            Ok(child) => children.push(child),
            Err(error) => return format!("seconds=nan left=nan note=spawn: {error}"),
        }
    }
    let pids: Vec<u32> = children
        .iter()
        .filter_map(tokio::process::Child::id)
        .collect();
    let started = Instant::now();
    for pid in &pids {
        if let Some(group) = i32::try_from(*pid).ok().and_then(Pid::from_raw) {
            let _ = kill_process_group(group, Signal::KILL);
        }
    }
    futures_util::future::join_all(children.iter_mut().map(tokio::process::Child::wait)).await;
    let reaped = gone::<childwire_tokio::Tokio>(&pids).await;
    let seconds = started.elapsed().as_secs_f64();
    drop(children);
    match reaped {
        Ok(_) => format!("seconds={seconds:.4} left=0"),
        Err(n) => format!("seconds=nan left={n} note={n} children not reaped"),
    }
}

/// What one child's run ended with.
struct ChildOutcome {
    clean: bool,
    peak_kib: u64,
    problem: Option<String>,
}

fn run_probe(name: &str, messages: usize) -> Result<ExitCode, String> {
    let adapter = Adapter::from_name(name).ok_or_else(|| format!("unknown probe `{name}`"))?;
    let payloads = e2e::payloads(messages, LINE_LEN);
    let (outcomes, footprint) =
        e2e::footprint(|| on_adapter!(adapter, R => run_all::<R>(&payloads).await));
    // Every report came after its child was reaped: nothing may be left.
    let left = live_children().map_or(usize::MAX, |pids| pids.len());

    let clean = outcomes.iter().filter(|o| o.clean).count();
    let peaks: Vec<u64> = outcomes.iter().map(|o| o.peak_kib).collect();
    let problems: Vec<&str> = outcomes
        .iter()
        .filter_map(|o| o.problem.as_deref())
        .take(3)
        .collect();
    println!(
        "probe-result seconds={:.3} clean={clean} left={left} start_kib={} \
         peak_kib={} child_peak_avg_kib={} child_peak_max_kib={} note={}",
        footprint.seconds,
        footprint.start_kib,
        footprint.peak_kib,
        peaks.iter().sum::<u64>() / peaks.len().max(1) as u64,
        peaks.iter().max().copied().unwrap_or(0),
        problems.join("; "),
    );
    Ok(ExitCode::SUCCESS)
}

async fn run_all<R: Runtime>(payloads: &[Bytes]) -> Vec<ChildOutcome> {
    let mut transports = Vec::with_capacity(CHILDREN);
    for _ in 0..CHILDREN {
        transports.push(e2e::spawn::<R>("cat", &[], Config::default()));
    }
    futures_util::future::join_all(transports.into_iter().map(|t| async move {
        match t {
            Ok(transport) => echo_and_shut_down(transport, payloads).await,
            Err(error) => ChildOutcome {
                clean: false,
                peak_kib: 0,
                problem: Some(error),
            },
        }
    }))
    .await
}

async fn echo_and_shut_down<R: Runtime>(
    transport: Transport<R>,
    payloads: &[Bytes],
) -> ChildOutcome {
    let pid = transport.id();
    let (sender, mut receiver) = transport.split();
    let writer = async {
        for payload in payloads {
            sender
                .send(payload.clone())
                .await
                .map_err(|e| format!("send: {e}"))?;
        }
        Ok::<_, String>(())
    };
    let reader = async {
        for payload in payloads {
            match receiver.recv().await {
                Some(Received::Message(echo)) if *echo == **payload => {}
                other => return Err(format!("expected the echo, got {other:?}")),
            }
        }
        Ok(())
    };
    let (written, read) = futures_util::future::join(writer, reader).await;
    // Read while the child is alive: its own peak RSS.
    let peak_kib = pid
        .and_then(|pid| proc_status_kib(Some(pid), "VmHWM").ok())
        .unwrap_or(0);
    let shutdown = sender.shutdown().await;
    let problem = match (written, read, shutdown) {
        (Err(e), _, _) | (_, Err(e), _) => Some(e),
        (_, _, Err(e)) => Some(format!("shutdown: {e}")),
        (_, _, Ok(report)) if !report.success() || report.ended_by != EndedBy::StdinClose => {
            Some(format!("unclean end: {report}"))
        }
        _ => None,
    };
    ChildOutcome {
        clean: problem.is_none(),
        peak_kib,
        problem,
    }
}
