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
//! `cargo xtask bench [--quick] [--check]`, or
//! `cargo bench -p childwire-bench --bench scale -- [--quick] [--check]`.

#[macro_use]
#[path = "support/e2e.rs"]
mod e2e;

use std::process::ExitCode;

use bytes::Bytes;
use childwire_async::{Config, EndedBy, Received, Runtime, Transport};
use childwire_bench::{live_children, proc_status_kib};
use e2e::harness::{Args, Json, Table};
use e2e::{Adapter, Goal};

const CHILDREN: usize = 200;
const LINE_LEN: usize = 200;

fn main() -> ExitCode {
    e2e::main("scale", bench)
}

fn bench(args: Args) -> Result<ExitCode, String> {
    let messages = if args.quick { 100 } else { 1_000 };
    if let Some(probe) = e2e::flag_value("--probe") {
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
    let results = Json::object([
        ("children", Json::from(CHILDREN)),
        ("messages_per_child", Json::from(messages)),
        ("line_bytes", Json::from(LINE_LEN)),
        ("adapters", Json::Arr(json)),
    ]);
    Ok(e2e::finish("scale", &args, &[table], &goals, results))
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
