//! End-to-end throughput (issue 7, item 2): JSON-RPC lines of ~200 bytes
//! sent through a `cat`-like child and received back, writer and reader
//! concurrent, per childwire adapter.
//!
//! Baselines, timed in the same run on the same child and payloads:
//! - blocking `std::process`, one writer thread (64 KiB `BufWriter`) and one
//!   reader (`BufReader::read_until`): the practical limit;
//! - tokio-util `LinesCodec` (`FramedWrite` in its own task, `FramedRead`)
//!   over `tokio::process` pipes: what users would write instead.
//!
//! Targets: every adapter >= 0.8x blocking and >= 1.2x LinesCodec.
//!
//! `cargo xtask bench [--quick] [--check]`, or
//! `cargo bench -p childwire-bench --bench throughput -- [--quick] [--check]`.

#[macro_use]
#[path = "support/e2e.rs"]
mod e2e;

use std::io::{BufReader, BufWriter, Write};
use std::process::ExitCode;
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use childwire_async::{Config, Received, Runtime};
use e2e::harness::{Args, Json, Table};
use e2e::{Bound, Contender, Goal, Lineup, Placement, Setup};
use futures_util::{SinkExt, StreamExt};

const LINE_LEN: usize = 200;
const MIN_VS_BLOCKING: f64 = 0.8;
const MIN_VS_LINES_CODEC: f64 = 1.2;

/// How the caller hands messages over.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Api {
    /// `send().await` per message: queued in the transport on return.
    Send,
    /// `Sink::feed` per message, one `flush` at the end: batched like
    /// `FramedWrite`, which is how the LinesCodec baseline writes.
    Sink,
}

/// Where the caller runs and how it hands messages over.
#[derive(Clone, Copy, PartialEq, Eq)]
struct Caller {
    placement: Placement,
    api: Api,
}

impl Setup for Caller {
    fn all() -> Vec<Self> {
        [Api::Send, Api::Sink]
            .into_iter()
            .flat_map(|api| Placement::ALL.map(|placement| Caller { placement, api }))
            .collect()
    }

    fn label(self) -> String {
        let api = match self.api {
            Api::Send => "send",
            Api::Sink => "Sink feed",
        };
        format!("{}, {api}", self.placement.name())
    }
}

fn main() -> ExitCode {
    e2e::main("throughput", bench)
}

fn bench(args: Args) -> Result<ExitCode, String> {
    let (lines, reps) = if args.quick {
        (10_000, 2)
    } else {
        (100_000, 5)
    };
    let payloads = Arc::new(e2e::payloads(lines, LINE_LEN));
    // Bytes on the wire each way, newlines included.
    let wire: usize = payloads.iter().map(|p| p.len() + 1).sum();
    eprintln!(
        "throughput: {lines} lines of {LINE_LEN} B through `bench-child cat`, best of {reps}, contenders interleaved{}",
        e2e::quick_note(&args)
    );

    let lineup = Lineup::<Caller>::from_env()?;
    // One warm-up round (page cache, runtimes' threads), then `reps` rounds.
    let samples = lineup.run(1 + reps, |contender, round, samples| {
        let elapsed = transfer(contender, &payloads)?;
        if round > 0 {
            samples.push(elapsed);
        }
        Ok(())
    })?;

    let best = |i: usize| samples[i].best();
    let rate = |i: usize| wire as f64 / best(i).as_secs_f64().max(1e-9);
    let mut table = Table::new([
        "contender",
        "best ms",
        "median ms",
        "MiB/s",
        "msg/s",
        "vs blocking",
        "vs LinesCodec",
    ]);
    let ratio = |i: usize, base: usize| match lineup.complete {
        true => format!("{:.2}x", rate(i) / rate(base)),
        false => "-".to_string(),
    };
    let mut goals = Vec::new();
    for (i, &contender) in lineup.contenders.iter().enumerate() {
        table.row([
            contender.name(),
            e2e::ms(best(i)),
            e2e::ms(samples[i].median()),
            format!("{:.1}", rate(i) / (1024.0 * 1024.0)),
            format!("{:.0}", lines as f64 / best(i).as_secs_f64().max(1e-9)),
            ratio(i, 0),
            ratio(i, 1),
        ]);
        if lineup.judges(contender) {
            goals.push(Goal::new(
                format!("{} / blocking", contender.name()),
                rate(i) / rate(0),
                Bound::AtLeast(MIN_VS_BLOCKING),
                "x",
            ));
            goals.push(Goal::new(
                format!("{} / LinesCodec", contender.name()),
                rate(i) / rate(1),
                Bound::AtLeast(MIN_VS_LINES_CODEC),
                "x",
            ));
        }
    }

    let results = Json::object([
        ("lines", Json::from(lines)),
        ("line_bytes", Json::from(LINE_LEN)),
        ("wire_bytes", Json::from(wire)),
        ("repetitions", Json::from(reps)),
        (
            "contenders",
            lineup.json(|i| {
                [
                    ("best_seconds", Json::from(samples[i].best())),
                    ("median_seconds", Json::from(samples[i].median())),
                    ("seconds", Json::from(samples[i].all())),
                ]
            }),
        ),
    ]);
    Ok(e2e::finish("throughput", &args, &[table], &goals, results))
}

/// Every payload through the child and back once, by `contender`.
fn transfer(contender: Contender<Caller>, payloads: &Arc<Vec<Bytes>>) -> Result<Duration, String> {
    match contender {
        Contender::Blocking => blocking(payloads),
        Contender::LinesCodec => e2e::tokio_runtime().block_on(lines_codec(payloads)),
        Contender::Adapter(adapter, Caller { placement, api }) => {
            let payloads = Arc::clone(payloads);
            on_adapter!(adapter, placement, R => childwire::<R>(&payloads, api).await)
        }
    }
}

/// The practical limit: two threads and plain blocking pipes.
fn blocking(payloads: &Arc<Vec<Bytes>>) -> Result<Duration, String> {
    let (mut child, stdin, stdout) = e2e::std_spawn("cat", &[])?;
    let start = Instant::now();
    let writer = {
        let payloads = Arc::clone(payloads);
        std::thread::spawn(move || -> std::io::Result<()> {
            let mut out = BufWriter::with_capacity(64 * 1024, stdin);
            for payload in payloads.iter() {
                out.write_all(payload)?;
                out.write_all(b"\n")?;
            }
            out.flush()
        })
    };
    let mut reader = BufReader::with_capacity(64 * 1024, stdout);
    let mut line = Vec::new();
    let (mut count, mut bytes) = (0, 0);
    while count < payloads.len() {
        let n = e2e::read_line(&mut reader, &mut line)?;
        if n == 0 {
            break;
        }
        count += 1;
        bytes += n - 1;
    }
    let elapsed = start.elapsed();
    writer
        .join()
        .map_err(|_| "writer panicked")?
        .map_err(|e| format!("write: {e}"))?;
    drop(reader);
    child.wait().map_err(|e| format!("wait: {e}"))?;
    verify(payloads, count, bytes)?;
    Ok(elapsed)
}

/// What users would write with tokio-util: a codec on each pipe, the writer
/// in its own task.
async fn lines_codec(payloads: &Arc<Vec<Bytes>>) -> Result<Duration, String> {
    let lines: Arc<Vec<String>> = Arc::new(
        payloads
            .iter()
            .map(|p| String::from_utf8_lossy(p).into_owned())
            .collect(),
    );
    let mut child = e2e::tokio_spawn(e2e::std_command("cat", &[]))?;
    let (mut sink, mut stream) = e2e::lines_codec_pipes(&mut child)?;
    let start = Instant::now();
    let writer = tokio::spawn(async move {
        for line in lines.iter() {
            // `feed` leaves flushing to the codec's buffer: one write per
            // 8 KiB instead of one per line.
            sink.feed(line.as_str()).await?;
        }
        SinkExt::<&str>::close(&mut sink).await
    });
    let (mut count, mut bytes) = (0, 0);
    while count < payloads.len() {
        match stream.next().await {
            Some(Ok(line)) => {
                count += 1;
                bytes += line.len();
            }
            Some(Err(e)) => return Err(format!("read: {e}")),
            None => break,
        }
    }
    let elapsed = start.elapsed();
    writer
        .await
        .map_err(|e| format!("writer: {e}"))?
        .map_err(|e| format!("write: {e}"))?;
    drop(stream);
    child.wait().await.map_err(|e| format!("wait: {e}"))?;
    verify(payloads, count, bytes)?;
    Ok(elapsed)
}

/// childwire: `send` and `recv` concurrently on a split transport.
async fn childwire<R: Runtime>(payloads: &Arc<Vec<Bytes>>, api: Api) -> Result<Duration, String> {
    let transport = e2e::spawn::<R>("cat", &[], Config::default())?;
    let (mut sender, mut receiver) = transport.split();
    let start = Instant::now();
    let writer = async {
        for payload in payloads.iter() {
            let written = match api {
                Api::Send => sender.send(payload.clone()).await,
                Api::Sink => sender.feed(payload.clone()).await,
            };
            written.map_err(|e| format!("write: {e}"))?;
        }
        if api == Api::Sink {
            SinkExt::<Bytes>::flush(&mut sender)
                .await
                .map_err(|e| format!("flush: {e}"))?;
        }
        Ok::<_, String>(())
    };
    let reader = async {
        let (mut count, mut bytes) = (0, 0);
        while count < payloads.len() {
            match receiver.recv().await {
                Some(Received::Message(message)) => {
                    count += 1;
                    bytes += message.len();
                }
                other => return Err(format!("expected a message, got {other:?}")),
            }
        }
        Ok((count, bytes))
    };
    let (written, read) = futures_util::future::join(writer, reader).await;
    let elapsed = start.elapsed();
    written?;
    let (count, bytes) = read?;
    e2e::clean_exit(sender.shutdown().await)?;
    verify(payloads, count, bytes)?;
    Ok(elapsed)
}

fn verify(payloads: &[Bytes], count: usize, bytes: usize) -> Result<(), String> {
    let expected: usize = payloads.iter().map(Bytes::len).sum();
    if count != payloads.len() || bytes != expected {
        return Err(format!(
            "echoed {count} lines / {bytes} bytes, sent {} / {expected}",
            payloads.len()
        ));
    }
    Ok(())
}
