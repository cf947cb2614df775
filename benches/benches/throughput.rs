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

#[path = "../../crates/childwire-core/benches/support/harness.rs"]
mod harness;
#[macro_use]
#[path = "support/e2e.rs"]
mod e2e;

use std::io::{BufRead, BufReader, BufWriter, Write};
use std::process::ExitCode;
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use childwire_async::{Config, Received, Runtime, Transport};
use e2e::{Adapter, Goal, Placement, Timings};
use futures_util::{SinkExt, StreamExt};
use harness::{Args, Json, Table};
use tokio_util::codec::{FramedRead, FramedWrite, LinesCodec};

const LINE_LEN: usize = 200;
const MIN_VS_BLOCKING: f64 = 0.8;
const MIN_VS_LINES_CODEC: f64 = 1.2;

#[derive(Clone, Copy, PartialEq, Eq)]
enum Contender {
    Blocking,
    LinesCodec,
    Adapter(Adapter, Placement, Api),
}

/// How the caller hands messages over.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Api {
    /// `send().await` per message: queued in the transport on return.
    Send,
    /// `Sink::feed` per message, one `flush` at the end: batched like
    /// `FramedWrite`, which is how the LinesCodec baseline writes.
    Sink,
}

impl Contender {
    fn all() -> Vec<Contender> {
        let mut all = vec![Contender::Blocking, Contender::LinesCodec];
        for api in [Api::Send, Api::Sink] {
            for placement in Placement::ALL {
                all.extend(Adapter::ALL.map(|a| Contender::Adapter(a, placement, api)));
            }
        }
        all
    }

    fn name(self) -> String {
        match self {
            Contender::Blocking => "blocking std::process".into(),
            Contender::LinesCodec => "tokio LinesCodec".into(),
            Contender::Adapter(adapter, placement, api) => {
                let api = match api {
                    Api::Send => "send",
                    Api::Sink => "Sink feed",
                };
                format!("{}, {}, {api}", adapter.name(), placement.name())
            }
        }
    }

    fn run(self, payloads: &Arc<Vec<Bytes>>) -> Result<Duration, String> {
        match self {
            Contender::Blocking => blocking(payloads),
            Contender::LinesCodec => e2e::tokio_runtime().block_on(lines_codec(payloads)),
            Contender::Adapter(adapter, placement, api) => {
                let payloads = Arc::clone(payloads);
                on_adapter!(adapter, placement, R => childwire::<R>(&payloads, api).await)
            }
        }
    }
}

fn main() -> ExitCode {
    let args = Args::from_env();
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
        if args.quick { " (--quick)" } else { "" }
    );

    // `--only NAME` runs one contender, e.g. under `perf record`; its
    // ratios are then meaningless, so no target is judged.
    let only = e2e::flag_value("--only");
    let contenders: Vec<Contender> = Contender::all()
        .into_iter()
        .filter(|c| only.as_deref().is_none_or(|o| c.name() == o))
        .collect();
    if contenders.is_empty() {
        eprintln!("throughput: no contender named {only:?}");
        return ExitCode::FAILURE;
    }
    let mut samples = vec![Timings::default(); contenders.len()];
    // One warm-up round (page cache, runtimes' threads), then `reps` rounds,
    // each contender once per round, so load bursts hit them alike.
    for round in 0..=reps {
        for (contender, samples) in contenders.iter().zip(&mut samples) {
            match contender.run(&payloads) {
                Ok(elapsed) if round > 0 => samples.push(elapsed),
                Ok(_) => {}
                Err(error) => {
                    eprintln!("throughput: {}: {error}", contender.name());
                    return ExitCode::FAILURE;
                }
            }
        }
    }

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
    let ratio = |i: usize, base: usize| match only {
        None => format!("{:.2}x", rate(i) / rate(base)),
        Some(_) => "-".to_string(),
    };
    let mut goals = Vec::new();
    for (i, contender) in contenders.iter().enumerate() {
        table.row([
            contender.name(),
            e2e::ms(best(i)),
            e2e::ms(samples[i].median()),
            format!("{:.1}", rate(i) / (1024.0 * 1024.0)),
            format!("{:.0}", lines as f64 / best(i).as_secs_f64().max(1e-9)),
            ratio(i, 0),
            ratio(i, 1),
        ]);
        if let (Contender::Adapter(..), None) = (contender, &only) {
            goals.push(Goal::at_least(
                format!("{} / blocking", contender.name()),
                rate(i) / rate(0),
                MIN_VS_BLOCKING,
                "x",
            ));
            goals.push(Goal::at_least(
                format!("{} / LinesCodec", contender.name()),
                rate(i) / rate(1),
                MIN_VS_LINES_CODEC,
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
            Json::Arr(
                contenders
                    .iter()
                    .zip(&samples)
                    .map(|(c, s)| {
                        Json::object([
                            ("name", Json::Str(c.name())),
                            ("best_seconds", Json::from(s.best())),
                            ("median_seconds", Json::from(s.median())),
                            (
                                "seconds",
                                Json::Arr(s.all().iter().map(|&d| Json::from(d)).collect()),
                            ),
                        ])
                    })
                    .collect(),
            ),
        ),
    ]);
    e2e::finish("throughput", &args, &[table], &goals, results)
}

/// The practical limit: two threads and plain blocking pipes.
fn blocking(payloads: &Arc<Vec<Bytes>>) -> Result<Duration, String> {
    let mut child = e2e::std_command("cat", &[])
        .spawn()
        .map_err(|e| format!("spawn: {e}"))?;
    let stdin = child.stdin.take().ok_or("no stdin")?;
    let stdout = child.stdout.take().ok_or("no stdout")?;
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
        line.clear();
        let n = reader
            .read_until(b'\n', &mut line)
            .map_err(|e| format!("read: {e}"))?;
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
    let mut child = tokio::process::Command::from(e2e::std_command("cat", &[]))
        .kill_on_drop(true)
        .spawn()
        .map_err(|e| format!("spawn: {e}"))?;
    let stdin = child.stdin.take().ok_or("no stdin")?;
    let stdout = child.stdout.take().ok_or("no stdout")?;
    let mut sink = FramedWrite::new(stdin, LinesCodec::new());
    let mut stream = FramedRead::new(
        stdout,
        LinesCodec::new_with_max_length(e2e::MAX_MESSAGE_SIZE),
    );
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
    let transport = Transport::<R>::spawn(&e2e::command("cat", &[]), Config::default())
        .map_err(|e| e.to_string())?;
    let (mut sender, mut receiver) = transport.split();
    let start = Instant::now();
    let writer = async {
        match api {
            Api::Send => {
                for payload in payloads.iter() {
                    sender
                        .send(payload.clone())
                        .await
                        .map_err(|e| format!("send: {e}"))?;
                }
            }
            Api::Sink => {
                for payload in payloads.iter() {
                    sender
                        .feed(payload.clone())
                        .await
                        .map_err(|e| format!("feed: {e}"))?;
                }
                SinkExt::<Bytes>::flush(&mut sender)
                    .await
                    .map_err(|e| format!("flush: {e}"))?;
            }
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
    let report = sender
        .shutdown()
        .await
        .map_err(|e| format!("shutdown: {e}"))?;
    if !report.success() {
        return Err(format!("child did not exit cleanly: {report}"));
    }
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
