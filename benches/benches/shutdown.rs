//! Shutdown (issue 7, item 6), per childwire adapter.
//!
//! - An EOF-obeying child (`bench-child eof-exit`) stamps CLOCK_MONOTONIC
//!   just before it exits; the bench stamps the same clock when
//!   `shutdown()` returns the report. The gap is what childwire adds to the
//!   child's own exit (the kernel's exit and reap included). Target: p50
//!   within 10 ms. Baseline in the same run: `std::process`, drop stdin,
//!   `wait()`.
//! - A SIGTERM-ignoring child (`bench-child ignore-term`), which also ignores
//!   EOF: `shutdown()` should take the two graces (stdin, then SIGTERM) and
//!   end with SIGKILL. Target: p50 within 50 ms over the graces.
//!
//! `cargo xtask bench [--quick] [--check]`, or
//! `cargo bench -p childwire-bench --bench shutdown -- [--quick] [--check]`.

#[macro_use]
#[path = "support/e2e.rs"]
mod e2e;

use std::io::BufReader;
use std::process::ExitCode;
use std::time::Duration;

use childwire_async::{Config, EndedBy, ExitReport, Received, Runtime, Transport};
use childwire_bench::monotonic_nanos;
use e2e::harness::{Args, Json, Table};
use e2e::{Adapter, Bound, Goal, Timings};

const MAX_AFTER_CHILD_EXIT: Duration = Duration::from_millis(10);
const MAX_OVER_GRACES: Duration = Duration::from_millis(50);

/// One shutdown of the EOF-obeying child.
struct EofRun {
    /// From `shutdown()` (or closing stdin) to the report (or `wait()`).
    total: Duration,
    /// From the child's last timestamp to the report.
    after_exit: Duration,
}

fn main() -> ExitCode {
    e2e::main("shutdown", bench)
}

fn bench(args: Args) -> Result<ExitCode, String> {
    let (runs, grace) = if args.quick {
        (5, Duration::from_millis(100))
    } else {
        (20, Duration::from_millis(500))
    };
    let term_runs = if args.quick { 1 } else { 3 };
    eprintln!(
        "shutdown: {runs} EOF-obeying children per contender (interleaved), {term_runs} \
         SIGTERM-ignoring per adapter with stdin_grace = term_grace = {} ms{}",
        grace.as_millis(),
        e2e::quick_note(&args)
    );

    // Index 0 is the baseline, then the adapters.
    let mut totals = vec![Timings::default(); 1 + Adapter::ALL.len()];
    let mut after_exit = totals.clone();
    for _ in 0..runs {
        let mut record = |i: usize, run: Result<EofRun, String>| -> Result<(), String> {
            let run = run?;
            totals[i].push(run.total);
            after_exit[i].push(run.after_exit);
            Ok(())
        };
        let mut result = record(0, std_eof());
        for (i, adapter) in Adapter::ALL.into_iter().enumerate() {
            result = result.and_then(|()| {
                record(i + 1, on_adapter!(adapter, R => childwire_eof::<R>().await))
            });
        }
        result.map_err(|error| format!("EOF child: {error}"))?;
    }

    let mut goals = Vec::new();
    let mut eof_table = Table::new([
        "EOF-obeying child",
        "shutdown p50 ms",
        "shutdown max ms",
        "after child exit p50 ms",
        "after child exit max ms",
    ]);
    let names = std::iter::once("std::process (drop stdin, wait)")
        .chain(Adapter::ALL.iter().map(|a| a.name()));
    for (i, name) in names.enumerate() {
        let (total, after) = (totals[i].sorted(), after_exit[i].sorted());
        eof_table.row([
            name.to_string(),
            e2e::ms(e2e::percentile(&total, 50.0)),
            e2e::ms(e2e::percentile(&total, 100.0)),
            e2e::ms(e2e::percentile(&after, 50.0)),
            e2e::ms(e2e::percentile(&after, 100.0)),
        ]);
        if i > 0 {
            goals.push(Goal::new(
                format!("{name} report after child exit, p50"),
                e2e::percentile(&after, 50.0).as_secs_f64() * 1e3,
                Bound::AtMost(MAX_AFTER_CHILD_EXIT.as_secs_f64() * 1e3),
                " ms",
            ));
        }
    }

    let graces = 2 * grace;
    let mut term_table = Table::new([
        "SIGTERM-ignoring child",
        "graces ms",
        "shutdown p50 ms",
        "over graces p50 ms",
        "ended by",
    ]);
    let mut term_json = Vec::new();
    for adapter in Adapter::ALL {
        let mut timings = Timings::default();
        let mut ended = Vec::new();
        for _ in 0..term_runs {
            let (total, ended_by) =
                on_adapter!(adapter, R => childwire_ignore_term::<R>(grace).await).map_err(
                    |error| format!("{}: SIGTERM-ignoring child: {error}", adapter.name()),
                )?;
            timings.push(total);
            ended.push(ended_by);
        }
        let p50 = timings.median();
        let over = p50.saturating_sub(graces);
        let all_killed = ended.iter().all(|e| *e == EndedBy::Sigkill);
        term_table.row([
            adapter.name().to_string(),
            format!("{}", graces.as_millis()),
            e2e::ms(p50),
            e2e::ms(over),
            ended
                .iter()
                .map(ToString::to_string)
                .collect::<Vec<_>>()
                .join(", "),
        ]);
        goals.push(Goal::new(
            format!(
                "{} ignore-term: shutdown p50 over the graces",
                adapter.name()
            ),
            over.as_secs_f64() * 1e3,
            Bound::AtMost(MAX_OVER_GRACES.as_secs_f64() * 1e3),
            " ms",
        ));
        goals.push(Goal::holds(
            format!(
                "{} ignore-term: at least the graces, ended by SIGKILL",
                adapter.name()
            ),
            all_killed && timings.best() >= graces,
        ));
        term_json.push(Json::object([
            ("adapter", Json::from(adapter.name())),
            ("shutdown_p50_seconds", Json::from(p50)),
            ("shutdown_seconds", Json::from(timings.all())),
            ("all_ended_by_sigkill", Json::Bool(all_killed)),
        ]));
    }

    let eof_json = |t: &[Timings]| Json::Arr(t.iter().map(|t| Json::from(t.all())).collect());
    let results = Json::object([
        ("eof_runs", Json::from(runs)),
        (
            "eof_contenders",
            Json::Arr(
                std::iter::once("std::process")
                    .chain(Adapter::ALL.iter().map(|a| a.name()))
                    .map(Json::from)
                    .collect(),
            ),
        ),
        ("eof_shutdown_seconds", eof_json(&totals)),
        ("eof_after_child_exit_seconds", eof_json(&after_exit)),
        ("grace_seconds", Json::from(grace)),
        ("ignore_term", Json::Arr(term_json)),
    ]);
    Ok(e2e::finish(
        "shutdown",
        &args,
        &[eof_table, term_table],
        &goals,
        results,
    ))
}

/// `exit-at NANOS` → NANOS.
fn exit_stamp(line: &[u8]) -> Result<u64, String> {
    std::str::from_utf8(line)
        .ok()
        .and_then(|l| l.trim_end().strip_prefix("exit-at "))
        .and_then(|n| n.parse().ok())
        .ok_or_else(|| {
            format!(
                "expected `exit-at NANOS`, got {:?}",
                String::from_utf8_lossy(line)
            )
        })
}

fn nanos(from: u64, to: u64) -> Duration {
    Duration::from_nanos(to.saturating_sub(from))
}

fn std_eof() -> Result<EofRun, String> {
    let (mut child, stdin, stdout) = e2e::std_spawn("eof-exit", &[])?;
    let mut stdout = BufReader::new(stdout);
    let mut line = Vec::new();
    e2e::read_line(&mut stdout, &mut line)?;
    let start = monotonic_nanos();
    drop(stdin);
    child.wait().map_err(|e| format!("wait: {e}"))?;
    let end = monotonic_nanos();
    e2e::read_line(&mut stdout, &mut line)?;
    let exit = exit_stamp(&line)?;
    Ok(EofRun {
        total: nanos(start, end),
        after_exit: nanos(exit, end),
    })
}

/// A `shutdown()` of a child that said `ready`, timed on CLOCK_MONOTONIC.
struct TimedShutdown<R: Runtime> {
    /// Still readable: the child's last words come after the report.
    transport: Transport<R>,
    report: ExitReport,
    start: u64,
    end: u64,
}

async fn timed_shutdown<R: Runtime>(
    mode: &str,
    config: Config,
) -> Result<TimedShutdown<R>, String> {
    let mut transport = e2e::spawn::<R>(mode, &[], config)?;
    match transport.recv().await {
        Some(Received::Message(m)) if *m == *b"ready" => {}
        other => return Err(format!("expected `ready`, got {other:?}")),
    }
    let start = monotonic_nanos();
    let report = transport
        .shutdown()
        .await
        .map_err(|e| format!("shutdown: {e}"))?;
    let end = monotonic_nanos();
    Ok(TimedShutdown {
        transport,
        report,
        start,
        end,
    })
}

async fn childwire_eof<R: Runtime>() -> Result<EofRun, String> {
    let mut shutdown = timed_shutdown::<R>("eof-exit", Config::default()).await?;
    let report = &shutdown.report;
    if !report.success() || report.ended_by != EndedBy::StdinClose {
        return Err(format!("unexpected end: {report}"));
    }
    let exit = match shutdown.transport.recv().await {
        Some(Received::Message(m)) => exit_stamp(&m)?,
        other => return Err(format!("expected `exit-at`, got {other:?}")),
    };
    Ok(EofRun {
        total: nanos(shutdown.start, shutdown.end),
        after_exit: nanos(exit, shutdown.end),
    })
}

async fn childwire_ignore_term<R: Runtime>(grace: Duration) -> Result<(Duration, EndedBy), String> {
    let mut config = Config::default();
    config.stdin_grace(grace);
    config.term_grace(grace);
    let shutdown = timed_shutdown::<R>("ignore-term", config).await?;
    Ok((
        nanos(shutdown.start, shutdown.end),
        shutdown.report.ended_by,
    ))
}
