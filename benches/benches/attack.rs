//! Memory under attack (issue 7, item 4): the child writes 1 GiB with no
//! newline, then `\n` and one valid line. Each contender runs in a process
//! of its own (this binary again, `--probe NAME`), which reports its peak
//! RSS (`VmHWM`) and whether the valid line arrived.
//!
//! Target per childwire adapter (default 16 MiB limit): peak RSS <=
//! 2 x 16 MiB + 16 MiB, and the valid line arrives. For comparison, the
//! same for tokio-util's `LinesCodec` in a `FramedRead`, with a 16 MiB
//! `max_length` and without one; their behaviour is reported as observed.
//!
//! `cargo xtask bench [--quick] [--check]`, or
//! `cargo bench -p childwire-bench --bench attack -- [--quick] [--check]`.

#[macro_use]
#[path = "support/e2e.rs"]
mod e2e;

use std::process::ExitCode;

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
    if let Some(probe) = e2e::flag_value("--probe") {
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
    let results = Json::object([
        ("flood_bytes", Json::Num(flood as f64)),
        ("max_message_size", Json::from(e2e::MAX_MESSAGE_SIZE)),
        ("max_peak_rss_kib", Json::Num(MAX_PEAK_KIB as f64)),
        ("contenders", Json::Arr(json)),
    ]);
    Ok(e2e::finish("attack", &args, &[table], &goals, results))
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
