//! Memory under attack. Each contender runs in a process of its own (this
//! binary again, `--probe NAME`), which reports its peak RSS (`VmHWM`).
//!
//! The long line: the child writes 1 GiB with no newline, then `\n` and one
//! valid line. Target per childwire adapter (default 16 MiB limit): peak
//! RSS <= 2 x 16 MiB + 16 MiB, and the valid line arrives. For comparison,
//! the same for tokio-util's `LinesCodec` in a `FramedRead`, with a 16 MiB
//! `max_length` and without one; their behaviour is reported as observed.
//!
//! The receive bound (DESIGN.md C25), with 1-byte lines, the most messages
//! per byte, so per-message overhead the bound failed to count would show:
//! - `unread`: the child prints 1-byte lines as fast as it can; the caller
//!   waits, receives one message, and waits again;
//! - `escaped writer`: the child starts a grandchild in a process group of
//!   its own that holds stdout and prints 1-byte lines, then exits; the
//!   caller, which never received, awaits `shutdown()` (the drain grace
//!   ends it), then receives what is left.
//!
//! Target for both: peak RSS <= `recv_high_water` + 16 MiB.
//!
//! `cargo xtask bench [--quick] [--check]`, or
//! `cargo bench -p childwire-bench --bench attack -- [--quick] [--check]`.

#[macro_use]
#[path = "support/e2e.rs"]
mod e2e;

use std::process::ExitCode;
use std::time::Duration;

use childwire_async::{Config, Received, Runtime};
use childwire_bench::VALID_LINE;
use e2e::harness::{Args, Json, Table};
use e2e::{Adapter, Bound, Goal};
use futures_util::StreamExt;
use tokio_util::codec::{FramedRead, LinesCodec};

const MIB: u64 = 1024 * 1024;
const GIB: u64 = 1024 * MIB;

/// The memory target: twice the limit plus 16 MiB of everything else.
const MAX_PEAK_KIB: u64 = (2 * e2e::MAX_MESSAGE_SIZE as u64 + 16 * MIB) / 1024;

/// The default receive bound, which the probes run with.
fn recv_high_water() -> u64 {
    Config::default().channel.recv_high_water as u64
}

/// The receive-bound target: the bound plus 16 MiB of everything else.
fn max_bound_peak_mib() -> f64 {
    (recv_high_water() + 16 * MIB) as f64 / MIB as f64
}

/// A probe that cannot finish within this is reported as failed.
const PROBE_LIMIT: Duration = Duration::from_secs(30);

/// The receive-bound probes, each run as `--probe "ADAPTER PROBE"`.
const UNREAD: &str = "unread";
const ESCAPED: &str = "escaped writer";

/// The contenders, each run as `--probe NAME`.
const LINES_CODEC_MAX: &str = "LinesCodec max_length 16 MiB";
const LINES_CODEC: &str = "LinesCodec unbounded";

/// What a probe found.
#[derive(Default)]
struct Outcome {
    /// Length reported by the oversized notice, if one came.
    oversized: Option<u64>,
    /// The valid line after the flood arrived.
    valid: bool,
    /// What happened, in words.
    note: String,
}

fn main() -> ExitCode {
    e2e::main("attack", bench)
}

fn bench(args: Args) -> Result<ExitCode, String> {
    let flood = if args.quick { 64 * MIB } else { GIB };
    let wait = Duration::from_millis(if args.quick { 200 } else { 1_000 });
    if let Some(probe) = e2e::flag_value("--probe") {
        if let Some((adapter, kind)) = bound_probe(&probe) {
            return run_bound_probe(adapter, kind, wait);
        }
        return run_probe(&probe, flood);
    }
    eprintln!(
        "attack: child writes {} MiB without newline, then `\\n` and a valid line; one process per contender{}",
        flood / MIB,
        e2e::quick_note(&args)
    );

    let mut names: Vec<&str> = Adapter::ALL.iter().map(|a| a.name()).collect();
    names.extend([LINES_CODEC_MAX, LINES_CODEC]);
    let mut table = Table::new([
        "contender",
        "peak RSS MiB",
        "RSS at start MiB",
        "oversized notice",
        "valid line",
        "seconds",
        "what happened",
    ]);
    let mut goals = Vec::new();
    let mut json = Vec::new();
    for name in names {
        let probe = e2e::run_probe(name, &args)?;
        let peak_mib = probe.num("peak_kib") / 1024.0;
        let oversized = probe.text("oversized").unwrap_or("-").to_string();
        let valid = probe.text("valid") == Some("true");
        let note = probe.text("note").unwrap_or("").to_string();
        table.row([
            name.to_string(),
            format!("{peak_mib:.1}"),
            format!("{:.1}", probe.num("start_kib") / 1024.0),
            oversized.clone(),
            if valid { "arrived" } else { "LOST" }.to_string(),
            format!("{:.2}", probe.num("seconds")),
            note.clone(),
        ]);
        if Adapter::from_name(name).is_some() {
            goals.push(Goal::new(
                format!("{name} peak RSS"),
                peak_mib,
                Bound::AtMost((MAX_PEAK_KIB / 1024) as f64),
                " MiB",
            ));
            goals.push(Goal::holds(format!("{name} valid line arrives"), valid));
        }
        json.push(Json::object([
            ("name", Json::from(name)),
            ("peak_rss_kib", Json::from(probe.num("peak_kib"))),
            ("start_rss_kib", Json::from(probe.num("start_kib"))),
            ("oversized", Json::from(oversized.as_str())),
            ("valid_line_arrived", Json::Bool(valid)),
            ("seconds", Json::from(probe.num("seconds"))),
            ("note", Json::from(note.as_str())),
        ]));
    }
    let (bound_table, bound_json) = bound_probes(&args, wait, &mut goals)?;
    let results = Json::object([
        ("flood_bytes", Json::Num(flood as f64)),
        ("max_message_size", Json::from(e2e::MAX_MESSAGE_SIZE)),
        ("max_peak_rss_kib", Json::Num(MAX_PEAK_KIB as f64)),
        ("contenders", Json::Arr(json)),
        ("recv_high_water", Json::Num(recv_high_water() as f64)),
        ("max_bound_peak_rss_mib", Json::Num(max_bound_peak_mib())),
        ("receive_bound", Json::Arr(bound_json)),
    ]);
    Ok(e2e::finish(
        "attack",
        &args,
        &[table, bound_table],
        &goals,
        results,
    ))
}

/// `"childwire-tokio unread"` → the adapter and the probe.
fn bound_probe(name: &str) -> Option<(Adapter, &'static str)> {
    let (adapter, kind) = name.split_once(' ')?;
    let kind = [UNREAD, ESCAPED].into_iter().find(|k| *k == kind)?;
    Some((Adapter::from_name(adapter)?, kind))
}

/// Runs the receive-bound probes: their table, with goals added to `goals`.
fn bound_probes(
    args: &Args,
    wait: Duration,
    goals: &mut Vec<Goal>,
) -> Result<(Table, Vec<Json>), String> {
    eprintln!(
        "attack: 1-byte lines to a caller that does not receive (`unread`: waits {wait:?}, one recv, \
         waits again; `escaped writer`: a grandchild floods after the child exits, the caller \
         awaits shutdown()); recv_high_water {} MiB",
        recv_high_water() / MIB
    );
    let mut table = Table::new([
        "receive bound",
        "peak RSS MiB",
        "RSS at start MiB",
        "messages decoded",
        "seconds",
        "what happened",
    ]);
    let mut json = Vec::new();
    for kind in [UNREAD, ESCAPED] {
        for adapter in Adapter::ALL {
            let name = format!("{} {kind}", adapter.name());
            let probe = e2e::run_probe(&name, args)?;
            let peak_mib = probe.num("peak_kib") / 1024.0;
            let ok = probe.text("ok") == Some("true");
            let note = probe.text("note").unwrap_or("").to_string();
            table.row([
                name.clone(),
                format!("{peak_mib:.1}"),
                format!("{:.1}", probe.num("start_kib") / 1024.0),
                format!("{}", probe.num("decoded")),
                format!("{:.2}", probe.num("seconds")),
                note.clone(),
            ]);
            goals.push(Goal::new(
                format!("{name} peak RSS"),
                peak_mib,
                Bound::AtMost(max_bound_peak_mib()),
                " MiB",
            ));
            goals.push(Goal::holds(format!("{name} completes"), ok));
            json.push(Json::object([
                ("name", Json::from(name.as_str())),
                ("peak_rss_kib", Json::from(probe.num("peak_kib"))),
                ("start_rss_kib", Json::from(probe.num("start_kib"))),
                ("messages_decoded", Json::from(probe.num("decoded"))),
                ("completed", Json::Bool(ok)),
                ("seconds", Json::from(probe.num("seconds"))),
                ("note", Json::from(note.as_str())),
            ]));
        }
    }
    Ok((table, json))
}

/// What a receive-bound probe found.
struct BoundOutcome {
    /// Messages decoded from stdout (queued or received).
    decoded: u64,
    /// What happened, in words.
    note: String,
}

/// The receive-bound probe process: prints `probe-result ...`.
fn run_bound_probe(adapter: Adapter, kind: &str, wait: Duration) -> Result<ExitCode, String> {
    let (result, footprint) = e2e::footprint(|| {
        if kind == UNREAD {
            on_adapter!(adapter, R => unread::<R>(wait).await)
        } else {
            on_adapter!(adapter, R => escaped::<R>().await)
        }
    });
    let (ok, outcome) = match result {
        Ok(outcome) => (true, outcome),
        Err(note) => (
            false,
            BoundOutcome {
                decoded: 0,
                note: format!("FAILED: {note}"),
            },
        ),
    };
    println!(
        "probe-result peak_kib={} start_kib={} decoded={} ok={ok} seconds={:.3} note={}",
        footprint.peak_kib, footprint.start_kib, outcome.decoded, footprint.seconds, outcome.note,
    );
    Ok(ExitCode::SUCCESS)
}

/// A child printing 1-byte lines; the caller waits, takes one, waits.
async fn unread<R: Runtime>(wait: Duration) -> Result<BoundOutcome, String> {
    let mut transport = e2e::spawn::<R>("ones", &[], Config::default())?;
    e2e::sleep::<R>(wait).await?;
    match e2e::within::<R, _>(PROBE_LIMIT, "the first recv", transport.recv()).await? {
        Some(Received::Message(message)) if *message == *b"1" => {}
        other => return Err(format!("expected `1`, got {other:?}")),
    }
    e2e::sleep::<R>(wait).await?;
    let decoded = transport.counters().messages_in;
    // Dropped without a shutdown: the child is killed (it would never end).
    drop(transport);
    Ok(BoundOutcome {
        decoded,
        note: format!("waited, received 1, waited: {decoded} decoded"),
    })
}

/// A grandchild floods stdout after the child exits; the caller, which
/// never received, awaits `shutdown()`, then receives what is left.
async fn escaped<R: Runtime>() -> Result<BoundOutcome, String> {
    let pidfile =
        std::env::temp_dir().join(format!("childwire-bench-escape-{}.pid", std::process::id()));
    let path = pidfile.to_string_lossy().into_owned();
    let mut transport = e2e::spawn::<R>("escape", &[&path], Config::default())?;
    let shutdown = e2e::within::<R, _>(PROBE_LIMIT, "shutdown()", transport.shutdown()).await;
    // Whatever happened, the grandchild must not outlive the probe; whether
    // it was still there is reported (C26 asks the transport to end it).
    let grandchild = std::fs::read_to_string(&pidfile).unwrap_or_default();
    let _ = std::fs::remove_file(&pidfile);
    let grandchild_alive = !grandchild.is_empty()
        && std::fs::read_to_string(format!("/proc/{}/stat", grandchild.trim()))
            .is_ok_and(|stat| !stat.contains(") Z "));
    if !grandchild.is_empty() {
        let _ = std::process::Command::new("kill")
            .args(["-KILL", grandchild.trim()])
            .stderr(std::process::Stdio::null())
            .status();
    }
    let report = shutdown?.map_err(|e| format!("shutdown: {e}"))?;
    let mut left = 0_u64;
    let drained = e2e::within::<R, _>(PROBE_LIMIT, "receiving the rest", async {
        while let Some(item) = transport.recv().await {
            if matches!(item, Received::Message(_)) {
                left += 1;
            }
        }
    })
    .await;
    drained?;
    Ok(BoundOutcome {
        decoded: report.counters.messages_in,
        note: format!(
            "shutdown: {}, pipes drained: {}; then {left} messages received; \
             grandchild still running right after shutdown(): {grandchild_alive}",
            report.ended_by, report.pipes_drained
        ),
    })
}

/// The probe process: runs one contender and prints `probe-result ...`.
fn run_probe(name: &str, flood: u64) -> Result<ExitCode, String> {
    let flood_arg = flood.to_string();
    let (result, footprint) = e2e::footprint(|| match Adapter::from_name(name) {
        Some(adapter) => on_adapter!(adapter, R => childwire::<R>(&flood_arg).await),
        None if name == LINES_CODEC_MAX => e2e::tokio_runtime().block_on(lines_codec(
            &flood_arg,
            LinesCodec::new_with_max_length(e2e::MAX_MESSAGE_SIZE),
        )),
        None if name == LINES_CODEC => {
            e2e::tokio_runtime().block_on(lines_codec(&flood_arg, LinesCodec::new()))
        }
        None => Err(format!("unknown probe `{name}`")),
    });
    let outcome = result.map_err(|error| format!("probe {name}: {error}"))?;
    println!(
        "probe-result peak_kib={} start_kib={} oversized={} valid={} seconds={:.3} note={}",
        footprint.peak_kib,
        footprint.start_kib,
        outcome
            .oversized
            .map_or("none".to_string(), |len| format!("{len}B")),
        outcome.valid,
        footprint.seconds,
        outcome.note,
    );
    Ok(ExitCode::SUCCESS)
}

async fn childwire<R: Runtime>(flood: &str) -> Result<Outcome, String> {
    let mut transport = e2e::spawn::<R>("flood", &[flood], Config::default())?;
    let mut outcome = Outcome::default();
    let mut items = Vec::new();
    while let Some(item) = transport.recv().await {
        match item {
            Received::Oversized(notice) => {
                outcome.oversized = Some(notice.len);
                items.push("oversized notice".to_string());
            }
            Received::Message(message) => {
                outcome.valid |= *message == *VALID_LINE;
                items.push("message".to_string());
            }
            Received::Exited(report) => items.push(format!("exit ({})", report.exit)),
            other => items.push(format!("{other:?}")),
        }
    }
    outcome.note = items.join(", ");
    Ok(outcome)
}

async fn lines_codec(flood: &str, codec: LinesCodec) -> Result<Outcome, String> {
    let mut command = e2e::std_command("flood", &[flood]);
    command.stdin(std::process::Stdio::null());
    let mut child = e2e::tokio_spawn(command)?;
    let stdout = child.stdout.take().ok_or("no stdout")?;
    let mut stream = FramedRead::new(stdout, codec);
    let mut outcome = Outcome::default();
    let mut items = Vec::new();
    // What users write: read until the stream ends.
    while let Some(item) = stream.next().await {
        match item {
            Ok(line) if line.as_bytes() == VALID_LINE => {
                outcome.valid = true;
                items.push("valid line".to_string());
            }
            Ok(line) => items.push(format!("a {} B line", line.len())),
            Err(error) => items.push(format!("Err({error})")),
        }
    }
    items.push("stream ended".to_string());
    drop(stream);
    // The child may still be writing into a closed pipe; it then ends.
    let status = child.wait().await.map_err(|e| format!("wait: {e}"))?;
    items.push(format!("child {status}"));
    outcome.note = items.join(", ");
    Ok(outcome)
}
