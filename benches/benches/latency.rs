//! Round-trip latency: one ~200-byte JSON-RPC line in flight at a time
//! through a `cat`-like child, sent then received by one caller; p50 and
//! p99 per childwire adapter, with the caller in `block_on` and in a
//! spawned task, against a blocking `std::process` baseline (one write of
//! the line, `BufReader::read_until`) and tokio-util `LinesCodec`
//! (`SinkExt::send`, which flushes, then `StreamExt::next`) placed like the
//! adapter it is compared with. Every contender builds each payload when it
//! sends it (`e2e::payload`). For smol and async-std the table also shows,
//! never judged, the same round trip over async-process's pipes with no
//! childwire, placed alike: what those runtimes' own wake-ups cost.
//!
//! Targets, per adapter: p50 <= 1.2x the blocking p50 with the caller in a
//! task (on the bench's main thread nothing can beat a blocking read, and a
//! `block_on` caller is woken by a runtime thread: a cross-thread wake-up
//! per message); p50 below LinesCodec's in the same placement, both
//! placements.
//!
//! The round trips are run in blocks (7 in a full run), contenders
//! interleaved block by block, each block on a fresh child after a short
//! warm-up. The table shows each contender's p50 per block (median and
//! range) and its percentiles over all blocks; the targets are judged on
//! the median over blocks of the block-by-block ratio, and a bound inside
//! the range of those ratios is reported as "within spread", not met or
//! missed.
//!
//! `cargo xtask bench [--quick] [--check]`, or
//! `cargo bench -p childwire-bench --bench latency -- [--quick] [--check]`.

#[macro_use]
#[path = "support/e2e.rs"]
mod e2e;

use std::io::{BufReader, Write};
use std::process::ExitCode;
use std::time::{Duration, Instant};

use childwire_async::{Config, Received, Runtime};
use e2e::harness::{Args, Json, Table};
use e2e::{Bound, Contender, Goal, Lineup, Placement};
use futures_util::{SinkExt, StreamExt};
use smol::io::{AsyncBufReadExt, AsyncWriteExt};

const LINE_LEN: usize = 200;
const WARM_UP: usize = 100;
const MAX_P50_VS_BLOCKING: f64 = 1.2;

fn main() -> ExitCode {
    e2e::main("latency", bench)
}

fn bench(args: Args) -> Result<ExitCode, String> {
    let (trips, blocks) = if args.quick { (1_000, 2) } else { (10_500, 7) };
    eprintln!(
        "latency: {trips} round trips of {LINE_LEN} B per contender through `bench-child cat`, \
         in {blocks} interleaved blocks{}",
        e2e::quick_note(&args)
    );

    // smol and async-std without childwire, for what their own wake-ups
    // cost (see `async_process_lines`).
    let references = Contender::async_process_references();
    let lineup = Lineup::<Placement>::with_references(references)?;
    // Each contender's p50 in each block, besides its every round trip:
    // the targets are judged block by block (the contenders ran
    // interleaved, so block `b` of two of them met the same machine).
    let mut block_p50s = vec![Vec::new(); lineup.contenders.len()];
    let timings = lineup.run(blocks, |contender, _, timings| {
        let mut block = round_trips(contender, trips / blocks)?;
        block.sort();
        if let Some(i) = lineup.position(contender) {
            block_p50s[i].push(e2e::percentile(&block, 50.0).as_secs_f64());
        }
        timings.extend(block);
        Ok(())
    })?;
    // Repetition by repetition, contender `i`'s p50 over contender `b`'s.
    let block_ratios = |i: usize, b: usize| -> Vec<f64> {
        block_p50s[i]
            .iter()
            .zip(&block_p50s[b])
            .map(|(p, base)| p / base.max(1e-12))
            .collect()
    };

    let sorted: Vec<Vec<Duration>> = timings.iter().map(e2e::Timings::sorted).collect();
    let p = |i: usize, q: f64| e2e::percentile(&sorted[i], q);
    let mut table = Table::new([
        "contender",
        "p50 us, blocks: median (min-max)",
        "p50 us",
        "p90 us",
        "p99 us",
        "max us",
        "p50 vs blocking",
        "p99 vs blocking",
        "p50 vs LinesCodec",
        "p50 vs async-process",
    ]);
    let mut goals = Vec::new();
    for (i, &contender) in lineup.contenders.iter().enumerate() {
        let (blocking, codec) = lineup.baselines(contender);
        // The same runtime's own pipes, placed alike (smol, async-std).
        let native = match contender {
            Contender::Adapter(adapter, placement) => {
                lineup.position(Contender::AsyncProcess(adapter, placement))
            }
            _ => None,
        };
        let ratio = |base: Option<usize>, q: f64| {
            base.map(|b| p(i, q).as_secs_f64() / p(b, q).as_secs_f64().max(1e-12))
        };
        let cell = |r: Option<f64>| r.map_or("-".to_string(), |r| format!("{r:.2}x"));
        let block_us: Vec<f64> = block_p50s[i].iter().map(|s| s * 1e6).collect();
        table.row([
            contender.name(),
            e2e::median_cell(&block_us, 1),
            e2e::us(p(i, 50.0)),
            e2e::us(p(i, 90.0)),
            e2e::us(p(i, 99.0)),
            e2e::us(p(i, 100.0)),
            cell(ratio(blocking, 50.0)),
            cell(ratio(blocking, 99.0)),
            cell(ratio(codec, 50.0)),
            cell(ratio(native, 50.0)),
        ]);
        let Contender::Adapter(_, placement) = contender else {
            continue;
        };
        if !lineup.judges(contender) {
            continue;
        }
        if let (Placement::Task, Some(b)) = (placement, blocking) {
            goals.push(Goal::median_of(
                format!("{} p50 / blocking p50", contender.name()),
                &block_ratios(i, b),
                Bound::AtMost(MAX_P50_VS_BLOCKING),
                "x",
            ));
        }
        if let Some(c) = codec {
            goals.push(Goal::median_of(
                format!("{} p50 / LinesCodec p50", contender.name()),
                &block_ratios(i, c),
                Bound::Below(1.0),
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
                    (
                        "block_p50_seconds",
                        Json::Arr(block_p50s[i].iter().map(|&s| Json::Num(s)).collect()),
                    ),
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
fn round_trips(contender: Contender<Placement>, trips: usize) -> Result<Vec<Duration>, String> {
    match contender {
        Contender::Blocking => blocking(trips),
        Contender::LinesCodec(placement) => e2e::on_tokio(placement, lines_codec(trips)),
        Contender::AsyncProcess(adapter, placement) => {
            e2e::on_runtime(adapter, placement, async_process_lines(trips))
        }
        Contender::Adapter(adapter, placement) => {
            on_adapter!(adapter, placement, R => childwire::<R>(trips).await)
        }
    }
}

/// The round trips of one block: `WARM_UP` untimed, then the timed ones.
struct Trips {
    warm_up: usize,
    samples: Vec<Duration>,
}

impl Trips {
    /// The message ids, one per trip, and the record of the `trips` timed
    /// ones.
    fn new(trips: usize) -> (std::ops::Range<usize>, Self) {
        let record = Self {
            warm_up: WARM_UP,
            samples: Vec::with_capacity(trips),
        };
        (0..WARM_UP + trips, record)
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

fn blocking(trips: usize) -> Result<Vec<Duration>, String> {
    let (mut child, mut stdin, stdout) = e2e::std_spawn("cat", &[])?;
    let mut stdout = BufReader::new(stdout);
    let mut echo = Vec::new();
    let (order, mut trips) = Trips::new(trips);
    for id in order {
        let start = Instant::now();
        let mut line = e2e::payload(id, LINE_LEN);
        line.push('\n');
        // One write per message: the whole line, newline included.
        stdin
            .write_all(line.as_bytes())
            .map_err(|e| format!("write: {e}"))?;
        e2e::read_line(&mut stdout, &mut echo)?;
        check_echo(line.as_bytes(), &echo)?;
        trips.record(start);
    }
    drop(stdin);
    child.wait().map_err(|e| format!("wait: {e}"))?;
    Ok(trips.samples)
}

async fn lines_codec(trips: usize) -> Result<Vec<Duration>, String> {
    let mut child = e2e::tokio_spawn(e2e::std_command("cat", &[]))?;
    let (mut sink, mut stream) = e2e::lines_codec_pipes(&mut child)?;
    let (order, mut trips) = Trips::new(trips);
    for id in order {
        let start = Instant::now();
        let line = e2e::payload(id, LINE_LEN);
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

/// The reference for smol and async-std: their own process pipes, one
/// `write_all` of the line and `BufReader::read_until`, as the blocking
/// baseline does, with no childwire in between. On these runtimes a task
/// is woken by whichever thread polled the reactor, often not the one
/// that runs it; this shows what that costs without childwire.
async fn async_process_lines(trips: usize) -> Result<Vec<Duration>, String> {
    let (mut child, mut stdin, stdout) = e2e::async_process_spawn("cat")?;
    let mut stdout = smol::io::BufReader::new(stdout);
    let mut echo = Vec::new();
    let (order, mut trips) = Trips::new(trips);
    for id in order {
        let start = Instant::now();
        let mut line = e2e::payload(id, LINE_LEN);
        line.push('\n');
        stdin
            .write_all(line.as_bytes())
            .await
            .map_err(|e| format!("write: {e}"))?;
        echo.clear();
        stdout
            .read_until(b'\n', &mut echo)
            .await
            .map_err(|e| format!("read: {e}"))?;
        check_echo(line.as_bytes(), &echo)?;
        trips.record(start);
    }
    drop(stdin);
    child.status().await.map_err(|e| format!("wait: {e}"))?;
    Ok(trips.samples)
}

async fn childwire<R: Runtime>(trips: usize) -> Result<Vec<Duration>, String> {
    let mut transport = e2e::spawn::<R>("cat", &[], Config::default())?;
    let (order, mut trips) = Trips::new(trips);
    for id in order {
        let start = Instant::now();
        let payload = e2e::payload(id, LINE_LEN);
        // Borrowed: the caller keeps its payload to compare the echo.
        transport
            .send(payload.as_bytes())
            .await
            .map_err(|e| format!("send: {e}"))?;
        match transport.recv().await {
            Some(Received::Message(echo)) => check_echo(payload.as_bytes(), &echo)?,
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
