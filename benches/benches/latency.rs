//! Round-trip latency (issue 7, item 3): one ~200-byte JSON-RPC line in
//! flight at a time through a `cat`-like child; p50 and p99 per childwire
//! adapter against a blocking `std::process` baseline (unbuffered write of
//! the line, `BufReader::read_until`) on the same child, and tokio-util
//! `LinesCodec` for reference.
//!
//! Target: every adapter's p50 <= 1.5x the blocking p50.
//!
//! The round trips are run in blocks, contenders interleaved block by block,
//! each block on a fresh child after a short warm-up.
//!
//! `cargo xtask bench [--quick] [--check]`, or
//! `cargo bench -p childwire-bench --bench latency -- [--quick] [--check]`.

#[path = "../../crates/childwire-core/benches/support/harness.rs"]
mod harness;
#[macro_use]
#[path = "support/e2e.rs"]
mod e2e;

use std::io::{BufRead, BufReader, Write};
use std::process::ExitCode;
use std::time::{Duration, Instant};

use bytes::Bytes;
use childwire_async::{Config, Received, Runtime, Transport};
use e2e::{Adapter, Goal, Placement, Timings};
use futures_util::{SinkExt, StreamExt};
use harness::{Args, Json, Table};
use tokio_util::codec::{FramedRead, FramedWrite, LinesCodec};

const LINE_LEN: usize = 200;
const WARM_UP: usize = 100;
const MAX_P50_VS_BLOCKING: f64 = 1.5;

#[derive(Clone, Copy, PartialEq, Eq)]
enum Contender {
    Blocking,
    LinesCodec,
    Adapter(Adapter, Placement),
}

impl Contender {
    fn all() -> Vec<Contender> {
        let mut all = vec![Contender::Blocking, Contender::LinesCodec];
        for placement in Placement::ALL {
            all.extend(Adapter::ALL.map(|a| Contender::Adapter(a, placement)));
        }
        all
    }

    fn name(self) -> String {
        match self {
            Contender::Blocking => "blocking std::process".into(),
            Contender::LinesCodec => "tokio LinesCodec".into(),
            Contender::Adapter(adapter, placement) => {
                format!("{}, {}", adapter.name(), placement.name())
            }
        }
    }

    /// One block: `trips` timed round trips after the warm-up.
    fn run(self, payloads: &[Bytes], trips: usize) -> Result<Vec<Duration>, String> {
        match self {
            Contender::Blocking => blocking(payloads, trips),
            Contender::LinesCodec => e2e::tokio_runtime().block_on(lines_codec(payloads, trips)),
            Contender::Adapter(adapter, placement) => {
                let payloads = payloads.to_vec();
                on_adapter!(adapter, placement, R => childwire::<R>(&payloads, trips).await)
            }
        }
    }
}

fn main() -> ExitCode {
    let args = Args::from_env();
    let (trips, blocks) = if args.quick { (1_000, 2) } else { (10_000, 5) };
    let payloads = e2e::payloads(64, LINE_LEN);
    eprintln!(
        "latency: {trips} round trips of {LINE_LEN} B per contender through `bench-child cat`, \
         in {blocks} interleaved blocks{}",
        if args.quick { " (--quick)" } else { "" }
    );

    // `--only NAME` runs one contender, e.g. under `perf record`; its
    // ratios are then meaningless, so no target is judged.
    let only = e2e::flag_value("--only");
    let contenders: Vec<Contender> = Contender::all()
        .into_iter()
        .filter(|c| only.as_deref().is_none_or(|o| c.name() == o))
        .collect();
    let Some(&first) = contenders.first() else {
        eprintln!("latency: no contender named {only:?}");
        return ExitCode::FAILURE;
    };
    let mut timings = vec![Timings::default(); contenders.len()];
    for _ in 0..blocks {
        for (contender, timings) in contenders.iter().zip(&mut timings) {
            match contender.run(&payloads, trips / blocks) {
                Ok(samples) => timings.extend(samples),
                Err(error) => {
                    eprintln!("latency: {}: {error}", contender.name());
                    return ExitCode::FAILURE;
                }
            }
        }
    }

    let sorted: Vec<Vec<Duration>> = timings.iter().map(Timings::sorted).collect();
    let p = |i: usize, q: f64| e2e::percentile(&sorted[i], q);
    let mut table = Table::new([
        "contender",
        "p50 us",
        "p90 us",
        "p99 us",
        "max us",
        "p50 vs blocking",
        "p99 vs blocking",
    ]);
    let mut goals = Vec::new();
    for (i, contender) in contenders.iter().enumerate() {
        // Index 0 is the blocking baseline unless `--only` left it out.
        let ratio = |q: f64| p(i, q).as_secs_f64() / p(0, q).as_secs_f64().max(1e-12);
        table.row([
            contender.name(),
            e2e::us(p(i, 50.0)),
            e2e::us(p(i, 90.0)),
            e2e::us(p(i, 99.0)),
            e2e::us(p(i, 100.0)),
            format!("{:.2}x", ratio(50.0)),
            format!("{:.2}x", ratio(99.0)),
        ]);
        if let (Contender::Adapter(..), Contender::Blocking) = (contender, first) {
            goals.push(Goal::at_most(
                format!("{} p50 / blocking p50", contender.name()),
                ratio(50.0),
                MAX_P50_VS_BLOCKING,
                "x",
            ));
        }
    }

    let results = Json::object([
        ("round_trips", Json::from(trips)),
        ("blocks", Json::from(blocks)),
        ("line_bytes", Json::from(LINE_LEN)),
        (
            "contenders",
            Json::Arr(
                contenders
                    .iter()
                    .enumerate()
                    .map(|(i, c)| {
                        Json::object([
                            ("name", Json::Str(c.name())),
                            ("p50_seconds", Json::from(p(i, 50.0))),
                            ("p90_seconds", Json::from(p(i, 90.0))),
                            ("p99_seconds", Json::from(p(i, 99.0))),
                            ("max_seconds", Json::from(p(i, 100.0))),
                        ])
                    })
                    .collect(),
            ),
        ),
    ]);
    e2e::finish("latency", &args, &[table], &goals, results)
}

/// Runs `round_trip` for the warm-up and then `trips` times, timing each.
fn time_trips(
    payloads: &[Bytes],
    trips: usize,
    mut round_trip: impl FnMut(&Bytes) -> Result<(), String>,
) -> Result<Vec<Duration>, String> {
    let mut samples = Vec::with_capacity(trips);
    for i in 0..WARM_UP + trips {
        let payload = &payloads[i % payloads.len()];
        let start = Instant::now();
        round_trip(payload)?;
        if i >= WARM_UP {
            samples.push(start.elapsed());
        }
    }
    Ok(samples)
}

fn blocking(payloads: &[Bytes], trips: usize) -> Result<Vec<Duration>, String> {
    let lines: Vec<Vec<u8>> = payloads.iter().map(|p| [p, &b"\n"[..]].concat()).collect();
    let mut child = e2e::std_command("cat", &[])
        .spawn()
        .map_err(|e| format!("spawn: {e}"))?;
    let mut stdin = child.stdin.take().ok_or("no stdin")?;
    let mut stdout = BufReader::new(child.stdout.take().ok_or("no stdout")?);
    let mut line = Vec::new();
    let mut next = 0;
    let samples = time_trips(payloads, trips, |payload| {
        // One write per message: the whole line, newline included.
        let wire = &lines[next % lines.len()];
        next += 1;
        stdin.write_all(wire).map_err(|e| format!("write: {e}"))?;
        line.clear();
        stdout
            .read_until(b'\n', &mut line)
            .map_err(|e| format!("read: {e}"))?;
        check_echo(payload, line.strip_suffix(b"\n").unwrap_or(&line))
    })?;
    drop(stdin);
    child.wait().map_err(|e| format!("wait: {e}"))?;
    Ok(samples)
}

async fn lines_codec(payloads: &[Bytes], trips: usize) -> Result<Vec<Duration>, String> {
    let lines: Vec<String> = payloads
        .iter()
        .map(|p| String::from_utf8_lossy(p).into_owned())
        .collect();
    let mut child = tokio::process::Command::from(e2e::std_command("cat", &[]))
        .kill_on_drop(true)
        .spawn()
        .map_err(|e| format!("spawn: {e}"))?;
    let mut sink = FramedWrite::new(child.stdin.take().ok_or("no stdin")?, LinesCodec::new());
    let mut stream = FramedRead::new(
        child.stdout.take().ok_or("no stdout")?,
        LinesCodec::new_with_max_length(e2e::MAX_MESSAGE_SIZE),
    );
    let mut samples = Vec::with_capacity(trips);
    for i in 0..WARM_UP + trips {
        let line = &lines[i % lines.len()];
        let start = Instant::now();
        // `send` flushes: one message in flight.
        sink.send(line.as_str())
            .await
            .map_err(|e| format!("write: {e}"))?;
        match stream.next().await {
            Some(Ok(echo)) => check_echo(line.as_bytes(), echo.as_bytes())?,
            other => return Err(format!("expected a line, got {other:?}")),
        }
        if i >= WARM_UP {
            samples.push(start.elapsed());
        }
    }
    drop(sink);
    child.wait().await.map_err(|e| format!("wait: {e}"))?;
    Ok(samples)
}

async fn childwire<R: Runtime>(payloads: &[Bytes], trips: usize) -> Result<Vec<Duration>, String> {
    let mut transport = Transport::<R>::spawn(&e2e::command("cat", &[]), Config::default())
        .map_err(|e| e.to_string())?;
    let mut samples = Vec::with_capacity(trips);
    for i in 0..WARM_UP + trips {
        let payload = &payloads[i % payloads.len()];
        let start = Instant::now();
        transport
            .send(payload.clone())
            .await
            .map_err(|e| format!("send: {e}"))?;
        match transport.recv().await {
            Some(Received::Message(echo)) => check_echo(payload, &echo)?,
            other => return Err(format!("expected a message, got {other:?}")),
        }
        if i >= WARM_UP {
            samples.push(start.elapsed());
        }
    }
    let report = transport
        .shutdown()
        .await
        .map_err(|e| format!("shutdown: {e}"))?;
    if !report.success() {
        return Err(format!("child did not exit cleanly: {report}"));
    }
    Ok(samples)
}

fn check_echo(sent: &[u8], echo: &[u8]) -> Result<(), String> {
    if sent == echo {
        Ok(())
    } else {
        Err(format!(
            "echo differs: sent {} bytes, got {:?}",
            sent.len(),
            String::from_utf8_lossy(echo)
        ))
    }
}
