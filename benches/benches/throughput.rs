//! End-to-end throughput: JSON-RPC lines echoed by a `cat`-like child,
//! writer and reader concurrent, by message size (64 B to 1 MiB), and with
//! N children at once (2, 20, 200), per childwire adapter.
//!
//! Every contender has the shape its users write (DESIGN.md section 3): the
//! writer is spawned on the runtime as a task (for the blocking baseline: a
//! thread), the reader is the caller, and each payload is built when it is
//! sent (`e2e::payload`, the same for all), as a caller serialising its
//! messages does:
//! - blocking `std::process`: one writer thread with a 64 KiB `BufWriter`,
//!   the reader a `BufReader::read_until` loop: the practical limit;
//! - tokio-util `LinesCodec` over `tokio::process` pipes: `FramedWrite::feed`
//!   per line and a flush every 1024 lines in a writer task, `FramedRead` in
//!   the caller; placed (`block_on` or a spawned task) as the adapter it is
//!   compared with;
//! - childwire with `Config::default()` as users get it (stdout pollution
//!   named: the echoed payloads are JSON-RPC messages), the writer calling
//!   `send().await` per message, or through the `Sink` like LinesCodec
//!   (`feed`, a flush every 1024), the caller calling `recv()`;
//! - shown, never judged: for smol and async-std, async-process's pipes
//!   with no childwire (a 64 KiB `BufWriter` in a writer task flushed every
//!   1024 lines, `BufReader::read_until` in the caller), placed alike: what
//!   those runtimes give without childwire, as the LinesCodec rows do for
//!   Tokio.
//!
//! With N children, each child gets what one child gets (its writer task
//! and its reader, here a task per child as a server runs one per
//! connection; two threads per child for the blocking baseline), and the
//! throughput is the aggregate.
//!
//! Every transfer is repeated (7 times in a full run, contenders
//! interleaved round by round); the tables show medians and, in
//! parentheses, the range over the repetitions. Targets are judged on the
//! median of the round-by-round ratios, and a bound inside their range is
//! reported as "within spread", not met or missed.
//!
//! Targets (ratios in this run, `send().await`, each placement against
//! LinesCodec in the same placement): >= 1.2x LinesCodec at 64 B, 200 B and
//! 1 KiB, >= 1.0x at 64 KiB and 1 MiB; >= 0.8x blocking at 200 B; with 200
//! children, aggregate >= blocking.
//!
//! `cargo xtask bench [--quick] [--check]`, or
//! `cargo bench -p childwire-bench --bench throughput -- [--quick] [--check]
//! [--only NAME] [--size BYTES]` (`--only` runs one contender of the size
//! table, e.g. under `perf record`, `--size` one of the sizes; either skips
//! the N-children table).

#[macro_use]
#[path = "support/e2e.rs"]
mod e2e;

use std::io::{self, BufReader, BufWriter, Write};
use std::process::ExitCode;
use std::time::{Duration, Instant};

use bytes::Bytes;
use childwire_async::{Config, Received, Receiver, Sender, Transport};
use e2e::harness::{Args, Json, Table};
use e2e::{Adapter, Bound, CodecPipes, Contender, Goal, Lineup, Placement, Setup, Spawn};
use futures_util::{SinkExt, StreamExt};

/// Message sizes, payload bytes without the newline.
const SIZES: [usize; 5] = [64, 200, 1024, 64 * 1024, 1024 * 1024];
/// The size the blocking-ratio target and the N-children table use.
const TYPICAL: usize = 200;
/// Children at once in the N-children table.
const FLEETS: [usize; 3] = [2, 20, 200];
/// Lines between two flushes, for the writers that batch (`FramedWrite`,
/// childwire's `Sink`).
const FLUSH_EVERY: usize = 1024;

const MIN_VS_BLOCKING: f64 = 0.8;
const MIN_FLEET_VS_BLOCKING: f64 = 1.0;

/// The LinesCodec ratio `send().await` must reach at `size`: small
/// messages are where per-message overhead shows, so more is asked there.
fn min_vs_lines_codec(size: usize) -> f64 {
    if size <= 1024 { 1.2 } else { 1.0 }
}

/// `64 B`, `1 KiB`, ... for table headers.
fn size_name(size: usize) -> String {
    match size {
        s if s >= 1024 * 1024 => format!("{} MiB", s / (1024 * 1024)),
        s if s >= 1024 => format!("{} KiB", s / 1024),
        s => format!("{s} B"),
    }
}

/// How the writer task hands messages over.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Api {
    /// `send().await` per message: how most callers write.
    Send,
    /// `Sink::feed` per message and a flush every [`FLUSH_EVERY`]: batched
    /// like the LinesCodec baseline's `FramedWrite`.
    Sink,
}

/// Where the caller runs and how its writer hands messages over.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
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

    fn placement(self) -> Placement {
        self.placement
    }
}

/// One child's share of a transfer: `messages` payloads of `len` bytes.
#[derive(Debug, Clone, Copy)]
struct Job {
    messages: usize,
    len: usize,
}

impl Job {
    /// Payload bytes the reader must get back.
    fn payload_bytes(self) -> usize {
        (0..self.messages)
            .map(|id| e2e::payload_len(id, self.len))
            .sum()
    }

    /// Bytes on the wire each way, newlines included.
    fn wire_bytes(self) -> usize {
        self.payload_bytes() + self.messages
    }

    /// Checks what the reader got: every message, every byte.
    fn verify(self, count: usize, bytes: usize) -> Result<(), String> {
        let expected = self.payload_bytes();
        if count != self.messages || bytes != expected {
            return Err(format!(
                "echoed {count} lines / {bytes} bytes, sent {} / {expected}",
                self.messages
            ));
        }
        Ok(())
    }
}

fn main() -> ExitCode {
    e2e::main("throughput", bench)
}

fn bench(args: Args) -> Result<ExitCode, String> {
    // Bytes each way per transfer; at least a few messages at 1 MiB.
    let (volume, min_messages, reps) = if args.quick {
        (1024 * 1024, 4, 1)
    } else {
        (32 * 1024 * 1024, 32, 7)
    };
    // smol and async-std without childwire: what their own pipes and
    // wake-ups give (see `async_process_lines`).
    let references = Contender::async_process_references();
    let lineup = Lineup::<Caller>::with_references(references)?;
    let only_size = match e2e::flag_value("--size") {
        Some(size) => Some(
            size.parse::<usize>()
                .ok()
                .filter(|s| SIZES.contains(s))
                .ok_or_else(|| format!("--size must be one of {SIZES:?}"))?,
        ),
        None => None,
    };
    let sizes: Vec<usize> = SIZES
        .into_iter()
        .filter(|&s| only_size.is_none_or(|only| only == s))
        .collect();
    eprintln!(
        "throughput: ~{} MiB each way per transfer through `bench-child cat`, sizes {}, median of {reps}, \
         contenders interleaved; writer task, reader in the caller, payload built per message{}",
        volume / (1024 * 1024),
        SIZES.map(size_name).join(", "),
        e2e::quick_note(&args)
    );

    let mut goals = Vec::new();
    let mut rates: Vec<Vec<Vec<f64>>> = Vec::new();
    let mut json_sizes = Vec::new();
    for &size in &sizes {
        let job = Job {
            messages: (volume / size).max(min_messages),
            len: size,
        };
        // One warm-up round (page cache, runtimes' threads), then `reps`.
        let samples = lineup.run(1 + reps, |contender, round, samples| {
            let elapsed = transfer(contender, job)?;
            if round > 0 {
                samples.push(elapsed);
            }
            Ok(())
        })?;
        // Bytes per second of each contender in each repetition; the
        // contenders ran interleaved, so repetition `r` of two of them met
        // the same machine.
        let rate: Vec<Vec<f64>> = samples
            .iter()
            .map(|s| {
                s.all()
                    .iter()
                    .map(|d| job.wire_bytes() as f64 / d.as_secs_f64().max(1e-9))
                    .collect()
            })
            .collect();
        for (i, &contender) in lineup.contenders.iter().enumerate() {
            let Contender::Adapter(_, caller) = contender else {
                continue;
            };
            if !lineup.judges(contender) || caller.api != Api::Send {
                continue;
            }
            let (blocking, codec) = lineup.baselines(contender);
            let (Some(blocking), Some(codec)) = (blocking, codec) else {
                continue;
            };
            goals.push(Goal::median_of(
                format!("{} / LinesCodec, {}", contender.name(), size_name(size)),
                &per_round_ratios(&rate[i], &rate[codec]),
                Bound::AtLeast(min_vs_lines_codec(size)),
                "x",
            ));
            if size == TYPICAL {
                goals.push(Goal::median_of(
                    format!("{} / blocking, {}", contender.name(), size_name(size)),
                    &per_round_ratios(&rate[i], &rate[blocking]),
                    Bound::AtLeast(MIN_VS_BLOCKING),
                    "x",
                ));
            }
        }
        json_sizes.push(Json::object([
            ("message_bytes", Json::from(size)),
            ("messages", Json::from(job.messages)),
            ("wire_bytes", Json::from(job.wire_bytes())),
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
        ]));
        rates.push(rate);
    }
    let mut tables = size_tables(&lineup, &sizes, &rates);

    let mut json_fleets = Vec::new();
    if lineup.complete && only_size.is_none() {
        let total = if args.quick { 4_000 } else { 200_000 };
        let (table, fleet_goals, json) = fleets(total, if args.quick { 1 } else { 7 })?;
        tables.push(table);
        goals.extend(fleet_goals);
        json_fleets = json;
    }

    let results = Json::object([
        ("repetitions", Json::from(reps)),
        ("sizes", Json::Arr(json_sizes)),
        ("children", Json::Arr(json_fleets)),
    ]);
    Ok(e2e::finish("throughput", &args, &tables, &goals, results))
}

/// `0.93x (0.61-2.46)`: the median ratio and its range.
fn ratio_cell(ratios: &[f64]) -> String {
    let (median, low, high) = e2e::median_and_range(ratios);
    format!("{median:.2}x ({low:.2}-{high:.2})")
}

/// Repetition by repetition, `rates` over `bases`.
fn per_round_ratios(rates: &[f64], bases: &[f64]) -> Vec<f64> {
    rates.iter().zip(bases).map(|(r, b)| r / b).collect()
}

/// The size tables: MiB/s per contender and size, then each contender's
/// ratios to the baselines; medians over the repetitions, their range in
/// parentheses. `rates[size][contender][repetition]`.
fn size_tables(lineup: &Lineup<Caller>, sizes: &[usize], rates: &[Vec<Vec<f64>>]) -> Vec<Table> {
    let mut header = vec!["MiB/s each way, median (min-max)".to_string()];
    header.extend(sizes.iter().map(|&s| size_name(s)));
    let mut speeds = Table::new(header);
    for (i, contender) in lineup.contenders.iter().enumerate() {
        let mut row = vec![contender.name()];
        row.extend(rates.iter().map(|rate| {
            let mib: Vec<f64> = rate[i].iter().map(|r| r / (1024.0 * 1024.0)).collect();
            e2e::median_cell(&mib, 0)
        }));
        speeds.row(row);
    }
    let mut header = vec!["ratio, median (min-max)".to_string()];
    header.extend(
        sizes
            .iter()
            .map(|&s| format!("{} vs LinesCodec", size_name(s))),
    );
    header.extend(
        sizes
            .iter()
            .map(|&s| format!("{} vs blocking", size_name(s))),
    );
    let mut ratios = Table::new(header);
    for (i, &contender) in lineup.contenders.iter().enumerate() {
        if matches!(contender, Contender::Blocking) {
            continue;
        }
        let (blocking, codec) = lineup.baselines(contender);
        let ratio = |base: Option<usize>, rate: &Vec<Vec<f64>>| match base {
            Some(base) => format!(
                "{}x",
                e2e::median_cell(&per_round_ratios(&rate[i], &rate[base]), 2)
            ),
            None => "-".to_string(),
        };
        let mut row = vec![contender.name()];
        row.extend(rates.iter().map(|rate| ratio(codec, rate)));
        row.extend(rates.iter().map(|rate| ratio(blocking, rate)));
        ratios.row(row);
    }
    vec![speeds, ratios]
}

/// One transfer of `job` through one child, by `contender`: the time from
/// the writer's start to the reader's last message.
fn transfer(contender: Contender<Caller>, job: Job) -> Result<Duration, String> {
    match contender {
        Contender::Blocking => blocking(job),
        Contender::LinesCodec(placement) => e2e::on_tokio(placement, lines_codec(job)),
        Contender::AsyncProcess(adapter, placement) => {
            on_adapter!(adapter, placement, R => async_process_lines::<R>(job).await)
        }
        Contender::Adapter(adapter, Caller { placement, api }) => {
            on_adapter!(adapter, placement, R => childwire::<R>(job, api).await)
        }
    }
}

/// The practical limit: a writer thread and the caller's thread reading,
/// plain blocking pipes.
fn blocking(job: Job) -> Result<Duration, String> {
    let (mut child, stdin, stdout) = e2e::std_spawn("cat", &[])?;
    let start = Instant::now();
    let writer = std::thread::spawn(move || write_blocking(stdin, job));
    let read = read_blocking(stdout, job);
    let elapsed = start.elapsed();
    writer
        .join()
        .map_err(|_| "writer panicked")?
        .map_err(|e| format!("write: {e}"))?;
    read?;
    child.wait().map_err(|e| format!("wait: {e}"))?;
    Ok(elapsed)
}

/// The blocking writer: each payload built, then written with its newline
/// into a 64 KiB `BufWriter`. Dropping stdin at the end is the child's EOF.
fn write_blocking(stdin: std::process::ChildStdin, job: Job) -> io::Result<()> {
    let mut out = BufWriter::with_capacity(64 * 1024, stdin);
    for id in 0..job.messages {
        let payload = e2e::payload(id, job.len);
        out.write_all(payload.as_bytes())?;
        out.write_all(b"\n")?;
    }
    out.flush()
}

/// The blocking reader: `read_until` line by line until every message came.
fn read_blocking(stdout: std::process::ChildStdout, job: Job) -> Result<(), String> {
    let mut reader = BufReader::with_capacity(64 * 1024, stdout);
    let mut line = Vec::new();
    let (mut count, mut bytes) = (0, 0);
    while count < job.messages {
        let n = e2e::read_line(&mut reader, &mut line)?;
        if n == 0 {
            break;
        }
        count += 1;
        bytes += n - 1;
    }
    job.verify(count, bytes)
}

/// What users write with tokio-util: a codec on each pipe, the writer in a
/// task of its own, the reader in the caller.
async fn lines_codec(job: Job) -> Result<Duration, String> {
    let mut child = e2e::tokio_spawn(e2e::std_command("cat", &[]))?;
    let pipes = e2e::lines_codec_pipes(&mut child)?;
    let start = Instant::now();
    lines_codec_echo(pipes, job).await?;
    let elapsed = start.elapsed();
    child.wait().await.map_err(|e| format!("wait: {e}"))?;
    Ok(elapsed)
}

/// One child's echo with LinesCodec; its pipes are closed on return.
async fn lines_codec_echo((mut sink, mut stream): CodecPipes, job: Job) -> Result<(), String> {
    let writer = tokio::spawn(async move {
        for id in 0..job.messages {
            // `feed` leaves writing to `FramedWrite`'s buffer (it writes
            // once 8 KiB are buffered); the flush every 1024 lines is what
            // a writer that must not sit on lines adds.
            sink.feed(e2e::payload(id, job.len)).await?;
            if (id + 1) % FLUSH_EVERY == 0 {
                SinkExt::<String>::flush(&mut sink).await?;
            }
        }
        SinkExt::<String>::close(&mut sink).await
    });
    let (mut count, mut bytes) = (0, 0);
    while count < job.messages {
        match stream.next().await {
            Some(Ok(line)) => {
                count += 1;
                bytes += line.len();
            }
            Some(Err(e)) => return Err(format!("read: {e}")),
            None => break,
        }
    }
    writer
        .await
        .map_err(|e| format!("writer: {e}"))?
        .map_err(|e| format!("write: {e}"))?;
    job.verify(count, bytes)
}

/// The reference for smol and async-std, not judged: what their users
/// write without childwire. async-process's pipes (the ones those adapters
/// use), the writer in a task with a 64 KiB `BufWriter` (each payload and
/// its newline written into it, a flush every 1024 lines, as LinesCodec's
/// writer), `BufReader::read_until` in the caller.
async fn async_process_lines<R: Spawn>(job: Job) -> Result<Duration, String> {
    use smol::io::{AsyncBufReadExt, AsyncWriteExt};

    let (mut child, stdin, stdout) = e2e::async_process_spawn("cat")?;
    let start = Instant::now();
    let writer = R::spawn_task(async move {
        let mut out = smol::io::BufWriter::with_capacity(64 * 1024, stdin);
        for id in 0..job.messages {
            let payload = e2e::payload(id, job.len);
            out.write_all(payload.as_bytes()).await?;
            out.write_all(b"\n").await?;
            if (id + 1) % FLUSH_EVERY == 0 {
                out.flush().await?;
            }
        }
        // Closing it is the child's EOF.
        out.close().await
    });
    let mut reader = smol::io::BufReader::with_capacity(64 * 1024, stdout);
    let mut line = Vec::new();
    let (mut count, mut bytes) = (0, 0);
    while count < job.messages {
        line.clear();
        let n = reader
            .read_until(b'\n', &mut line)
            .await
            .map_err(|e| format!("read: {e}"))?;
        if n == 0 {
            break;
        }
        count += 1;
        bytes += n - 1;
    }
    writer.await.map_err(|e| format!("write: {e}"))?;
    let elapsed = start.elapsed();
    job.verify(count, bytes)?;
    child.status().await.map_err(|e| format!("wait: {e}"))?;
    Ok(elapsed)
}

/// childwire through one child: the writer task and the caller reading.
async fn childwire<R: Spawn>(job: Job, api: Api) -> Result<Duration, String> {
    let transport = e2e::spawn_as_given::<R>("cat", &[], Config::default())?;
    let start = Instant::now();
    let (sender, _receiver) = childwire_echo(transport, job, api).await?;
    let elapsed = start.elapsed();
    e2e::clean_exit(sender.shutdown().await)?;
    Ok(elapsed)
}

/// One child's echo with childwire: the writer spawned as a task, the
/// reader here. The halves come back for the shutdown.
async fn childwire_echo<R: Spawn>(
    transport: Transport<R>,
    job: Job,
    api: Api,
) -> Result<(Sender<R>, Receiver<R>), String> {
    let (sender, mut receiver) = transport.split();
    let writer = R::spawn_task(write_childwire(sender, job, api));
    let (mut count, mut bytes) = (0, 0);
    while count < job.messages {
        match receiver.recv().await {
            Some(Received::Message(message)) => {
                count += 1;
                bytes += message.len();
            }
            other => return Err(format!("expected a message, got {other:?}")),
        }
    }
    let sender = writer.await?;
    job.verify(count, bytes)?;
    Ok((sender, receiver))
}

/// childwire's writer task, handing each payload over as `api` says.
async fn write_childwire<R: Spawn>(
    mut sender: Sender<R>,
    job: Job,
    api: Api,
) -> Result<Sender<R>, String> {
    for id in 0..job.messages {
        let payload = e2e::payload(id, job.len);
        match api {
            // `send` takes the `String` as it is.
            Api::Send => sender
                .send(payload)
                .await
                .map_err(|e| format!("send: {e}"))?,
            // The `Sink` takes `Bytes`; from a `String` that is no copy.
            Api::Sink => {
                sender
                    .feed(Bytes::from(payload))
                    .await
                    .map_err(|e| format!("feed: {e}"))?;
                if (id + 1) % FLUSH_EVERY == 0 {
                    sender.flush().await.map_err(|e| format!("flush: {e}"))?;
                }
            }
        }
    }
    if api == Api::Sink {
        sender.flush().await.map_err(|e| format!("flush: {e}"))?;
    }
    Ok(sender)
}

/// A contender of the N-children table.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum FleetContender {
    Blocking,
    LinesCodec,
    Adapter(Adapter),
}

impl FleetContender {
    fn all() -> Vec<Self> {
        let mut all = vec![FleetContender::Blocking, FleetContender::LinesCodec];
        all.extend(Adapter::ALL.map(FleetContender::Adapter));
        all
    }

    fn name(self) -> String {
        match self {
            FleetContender::Blocking => "blocking std::process, 2 threads/child".into(),
            FleetContender::LinesCodec => "tokio LinesCodec, a task/child".into(),
            FleetContender::Adapter(adapter) => format!("{}, a task/child, send", adapter.name()),
        }
    }
}

/// N children at once, `total` messages of [`TYPICAL`] bytes shared among
/// them: the table, its goals, and the JSON.
fn fleets(total: usize, reps: usize) -> Result<(Table, Vec<Goal>, Vec<Json>), String> {
    eprintln!(
        "throughput: {} children at once, {total} messages of {TYPICAL} B shared among them, \
         median of {reps}, contenders interleaved",
        FLEETS.map(|n| n.to_string()).join(", ")
    );
    let contenders = FleetContender::all();
    let mut header = vec!["aggregate MiB/s, median (min-max)".to_string()];
    header.extend(FLEETS.map(|n| format!("{n} children")));
    header.extend(FLEETS.map(|n| format!("{n} vs blocking")));
    let mut table = Table::new(header);
    let mut rates = vec![Vec::new(); contenders.len()];
    let mut goals = Vec::new();
    let mut json = Vec::new();
    for children in FLEETS {
        let job = Job {
            messages: (total / children).max(10),
            len: TYPICAL,
        };
        let wire = (job.wire_bytes() * children) as f64;
        let mut samples = vec![e2e::Timings::default(); contenders.len()];
        // A warm-up round, then `reps`, contenders interleaved.
        for round in 0..=reps {
            for (i, &contender) in contenders.iter().enumerate() {
                let elapsed = fleet(contender, children, job)
                    .map_err(|e| format!("{} with {children} children: {e}", contender.name()))?;
                if round > 0 {
                    samples[i].push(elapsed);
                }
            }
        }
        // Each contender's rate in each repetition.
        let rate: Vec<Vec<f64>> = samples
            .iter()
            .map(|s| {
                s.all()
                    .iter()
                    .map(|d| wire / d.as_secs_f64().max(1e-9))
                    .collect()
            })
            .collect();
        for (i, &contender) in contenders.iter().enumerate() {
            if let (FleetContender::Adapter(_), 200) = (contender, children) {
                goals.push(Goal::median_of(
                    format!("{} / blocking, {children} children", contender.name()),
                    &per_round_ratios(&rate[i], &rate[0]),
                    Bound::AtLeast(MIN_FLEET_VS_BLOCKING),
                    "x",
                ));
            }
        }
        for (i, rate) in rate.into_iter().enumerate() {
            rates[i].push(rate);
        }
        json.push(Json::object([
            ("children", Json::from(children)),
            ("messages_per_child", Json::from(job.messages)),
            ("message_bytes", Json::from(TYPICAL)),
            (
                "contenders",
                Json::Arr(
                    contenders
                        .iter()
                        .zip(&samples)
                        .map(|(c, s)| {
                            Json::object([
                                ("name", Json::Str(c.name())),
                                ("median_seconds", Json::from(s.median())),
                                ("seconds", Json::from(s.all())),
                            ])
                        })
                        .collect(),
                ),
            ),
        ]));
    }
    for (i, contender) in contenders.iter().enumerate() {
        let mut row = vec![contender.name()];
        row.extend(rates[i].iter().map(|rate| {
            let mib: Vec<f64> = rate.iter().map(|r| r / (1024.0 * 1024.0)).collect();
            e2e::median_cell(&mib, 0)
        }));
        row.extend(
            rates[i]
                .iter()
                .zip(&rates[0])
                .map(|(rate, base)| ratio_cell(&per_round_ratios(rate, base))),
        );
        table.row(row);
    }
    Ok((table, goals, json))
}

/// `children` children at once, each echoing `job`: the time from the
/// first writer's start to the last reader's last message. Spawning the
/// children is not timed, nor are their shutdowns.
fn fleet(contender: FleetContender, children: usize, job: Job) -> Result<Duration, String> {
    match contender {
        FleetContender::Blocking => {
            let pipes = (0..children)
                .map(|_| e2e::std_spawn("cat", &[]))
                .collect::<Result<Vec<_>, _>>()?;
            let start = Instant::now();
            let mut threads = Vec::with_capacity(children);
            let mut kids = Vec::with_capacity(children);
            for (child, stdin, stdout) in pipes {
                let writer = std::thread::spawn(move || {
                    write_blocking(stdin, job).map_err(|e| format!("write: {e}"))
                });
                let reader = std::thread::spawn(move || read_blocking(stdout, job));
                threads.push((writer, reader));
                kids.push(child);
            }
            let mut outcome = Ok(());
            for (writer, reader) in threads {
                let read = reader.join().map_err(|_| "reader panicked".to_string());
                let written = writer.join().map_err(|_| "writer panicked".to_string());
                outcome = outcome
                    .and(read.and_then(|r| r))
                    .and(written.and_then(|w| w));
            }
            let elapsed = start.elapsed();
            for mut child in kids {
                child.wait().map_err(|e| format!("wait: {e}"))?;
            }
            outcome.map(|()| elapsed)
        }
        FleetContender::LinesCodec => e2e::tokio_runtime().block_on(async move {
            let mut kids = Vec::with_capacity(children);
            let mut pipes = Vec::with_capacity(children);
            for _ in 0..children {
                let mut child = e2e::tokio_spawn(e2e::std_command("cat", &[]))?;
                pipes.push(e2e::lines_codec_pipes(&mut child)?);
                kids.push(child);
            }
            let start = Instant::now();
            let tasks: Vec<_> = pipes
                .into_iter()
                .map(|pipes| tokio::spawn(lines_codec_echo(pipes, job)))
                .collect();
            let mut outcome = Ok(());
            for task in tasks {
                outcome = outcome.and(task.await.map_err(|e| format!("task: {e}"))?);
            }
            let elapsed = start.elapsed();
            for mut child in kids {
                child.wait().await.map_err(|e| format!("wait: {e}"))?;
            }
            outcome.map(|()| elapsed)
        }),
        FleetContender::Adapter(adapter) => {
            on_adapter!(adapter, R => childwire_fleet::<R>(children, job).await)
        }
    }
}

/// childwire with `children` children: a task per child (its caller), each
/// with its writer task.
async fn childwire_fleet<R: Spawn>(children: usize, job: Job) -> Result<Duration, String> {
    let transports = (0..children)
        .map(|_| e2e::spawn_as_given::<R>("cat", &[], Config::default()))
        .collect::<Result<Vec<_>, _>>()?;
    let start = Instant::now();
    let tasks: Vec<_> = transports
        .into_iter()
        .map(|t| R::spawn_task(childwire_echo(t, job, Api::Send)))
        .collect();
    let mut halves = Vec::with_capacity(children);
    for task in tasks {
        halves.push(task.await?);
    }
    let elapsed = start.elapsed();
    let shutdowns = halves.iter().map(|(sender, _)| sender.shutdown());
    for shutdown in futures_util::future::join_all(shutdowns).await {
        e2e::clean_exit(shutdown)?;
    }
    Ok(elapsed)
}
