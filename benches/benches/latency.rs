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

#[macro_use]
#[path = "support/e2e.rs"]
mod e2e;

use std::io::{BufReader, Write};
use std::process::ExitCode;
use std::time::{Duration, Instant};

use bytes::Bytes;
use childwire_async::{Config, Received, Runtime};
use e2e::harness::{Args, Json, Table};
use e2e::{Bound, Contender, Goal, Lineup, Placement};
use futures_util::{SinkExt, StreamExt};

const LINE_LEN: usize = 200;
const WARM_UP: usize = 100;
const MAX_P50_VS_BLOCKING: f64 = 1.5;

fn main() -> ExitCode {
    e2e::main("latency", bench)
}

fn bench(args: Args) -> Result<ExitCode, String> {
    let (trips, blocks) = if args.quick { (1_000, 2) } else { (10_000, 5) };
    let payloads = e2e::payloads(64, LINE_LEN);
    eprintln!(
        "latency: {trips} round trips of {LINE_LEN} B per contender through `bench-child cat`, \
         in {blocks} interleaved blocks{}",
        e2e::quick_note(&args)
    );

    let lineup = Lineup::<Placement>::from_env()?;
    let timings = lineup.run(blocks, |contender, _, timings| {
        timings.extend(round_trips(contender, &payloads, trips / blocks)?);
        Ok(())
    })?;

    let sorted: Vec<Vec<Duration>> = timings.iter().map(e2e::Timings::sorted).collect();
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
    for (i, &contender) in lineup.contenders.iter().enumerate() {
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
        if lineup.judges(contender) {
            goals.push(Goal::new(
                format!("{} p50 / blocking p50", contender.name()),
                ratio(50.0),
                Bound::AtMost(MAX_P50_VS_BLOCKING),
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
            lineup.json(|i| {
                [
                    ("p50_seconds", Json::from(p(i, 50.0))),
                    ("p90_seconds", Json::from(p(i, 90.0))),
                    ("p99_seconds", Json::from(p(i, 99.0))),
                    ("max_seconds", Json::from(p(i, 100.0))),
                ]
            }),
        ),
    ]);
    Ok(e2e::finish("latency", &args, &[table], &goals, results))
}

/// One block of `contender`: `trips` timed round trips after the warm-up.
fn round_trips(
    contender: Contender<Placement>,
    payloads: &[Bytes],
    trips: usize,
) -> Result<Vec<Duration>, String> {
    match contender {
        Contender::Blocking => blocking(payloads, trips),
        Contender::LinesCodec => e2e::tokio_runtime().block_on(lines_codec(payloads, trips)),
        Contender::Adapter(adapter, placement) => {
            let payloads = payloads.to_vec();
            on_adapter!(adapter, placement, R => childwire::<R>(&payloads, trips).await)
        }
    }
}

/// The round trips of one block: `WARM_UP` untimed, then the timed ones.
struct Trips {
    warm_up: usize,
    samples: Vec<Duration>,
}

impl Trips {
    /// The messages to send, one per trip, cycling through `messages`,
    /// and the record of the `trips` timed ones.
    fn new<T>(messages: &[T], trips: usize) -> (impl Iterator<Item = &T>, Self) {
        let order = messages.iter().cycle().take(WARM_UP + trips);
        let record = Self {
            warm_up: WARM_UP,
            samples: Vec::with_capacity(trips),
        };
        (order, record)
    }

    /// Records the trip begun at `start`, unless it warmed up.
    fn record(&mut self, start: Instant) {
        if self.warm_up > 0 {
            self.warm_up -= 1;
        } else {
            self.samples.push(start.elapsed());
        }
    }
}

fn blocking(payloads: &[Bytes], trips: usize) -> Result<Vec<Duration>, String> {
    let lines: Vec<Vec<u8>> = payloads.iter().map(|p| [p, &b"\n"[..]].concat()).collect();
    let (mut child, mut stdin, stdout) = e2e::std_spawn("cat", &[])?;
    let mut stdout = BufReader::new(stdout);
    let mut echo = Vec::new();
    let (order, mut trips) = Trips::new(&lines, trips);
    for line in order {
        let start = Instant::now();
        // One write per message: the whole line, newline included.
        stdin.write_all(line).map_err(|e| format!("write: {e}"))?;
        e2e::read_line(&mut stdout, &mut echo)?;
        check_echo(line, &echo)?;
        trips.record(start);
    }
    drop(stdin);
    child.wait().map_err(|e| format!("wait: {e}"))?;
    Ok(trips.samples)
}

async fn lines_codec(payloads: &[Bytes], trips: usize) -> Result<Vec<Duration>, String> {
    let lines: Vec<String> = payloads
        .iter()
        .map(|p| String::from_utf8_lossy(p).into_owned())
        .collect();
    let mut child = e2e::tokio_spawn(e2e::std_command("cat", &[]))?;
    let (mut sink, mut stream) = e2e::lines_codec_pipes(&mut child)?;
    let (order, mut trips) = Trips::new(&lines, trips);
    for line in order {
        let start = Instant::now();
        // `send` flushes: one message in flight.
        sink.send(line.as_str())
            .await
            .map_err(|e| format!("write: {e}"))?;
        match stream.next().await {
            Some(Ok(echo)) => check_echo(line.as_bytes(), echo.as_bytes())?,
            other => return Err(format!("expected a line, got {other:?}")),
        }
        trips.record(start);
    }
    drop(sink);
    child.wait().await.map_err(|e| format!("wait: {e}"))?;
    Ok(trips.samples)
}

async fn childwire<R: Runtime>(payloads: &[Bytes], trips: usize) -> Result<Vec<Duration>, String> {
    let mut transport = e2e::spawn::<R>("cat", &[], Config::default())?;
    let (order, mut trips) = Trips::new(payloads, trips);
    for payload in order {
        let start = Instant::now();
        transport
            .send(payload.clone())
            .await
            .map_err(|e| format!("send: {e}"))?;
        match transport.recv().await {
            Some(Received::Message(echo)) => check_echo(payload, &echo)?,
            other => return Err(format!("expected a message, got {other:?}")),
        }
        trips.record(start);
    }
    e2e::clean_exit(transport.shutdown().await)?;
    Ok(trips.samples)
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
