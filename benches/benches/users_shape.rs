//! The users' shape, timed, in a file small enough to build against older
//! revisions of childwire: a spawned `bench-child cat` under
//! `childwire_async::Config::default()` exactly as a user gets it (stdout
//! pollution named, if the revision does that by default), on a
//! multi-thread Tokio runtime, the writer a spawned task calling
//! `send().await` per message, the reader calling `recv()`; against
//! tokio-util's `LinesCodec` over `tokio::process` pipes in the same shape
//! (`FramedWrite::feed`, a flush every 1024 lines, `FramedRead`). The
//! reader is placed in a spawned task and in `block_on`, each with a
//! LinesCodec run placed alike, contenders alternated.
//!
//! One line per repetition on stdout:
//! `users-shape size=64 placement=task rep=1 childwire=... lines_codec=... ratio=...`
//! (MiB/s each way, childwire's over LinesCodec's). `benches/users-shape.sh`
//! builds it at this checkout and at an older revision and runs the two
//! builds interleaved, round by round, then gives each build's median and
//! range (docs/performance.md).
//!
//! Only the public API that has kept its shape (`Transport::spawn`,
//! `split`, `send`, `recv`, `shutdown`) and nothing of the other benches'
//! support code, so the same source compiles at 6a80c2d and after the
//! transport's redesign.
//!
//! `cargo bench -p childwire-bench --bench users_shape -- [--size BYTES]
//! [--messages N] [--reps N] [--childwire-only]` (default: 64 and 200 B,
//! 100,000 messages, one repetition after a warm-up round).
//! `--childwire-only` leaves LinesCodec out and prints `childwire=` alone:
//! for comparing builds of childwire with nothing else in the process (the
//! measurements of 2026-11-29 in docs/performance.md).

use std::fmt::Write as _;
use std::process::{ExitCode, Stdio};
use std::time::{Duration, Instant};

use childwire_async::{Command, Config, Received};
use futures_util::{SinkExt, StreamExt};
use tokio_util::codec::{FramedRead, FramedWrite, LinesCodec};

/// The child every contender talks to: it echoes stdin to stdout.
const CHILD: &str = env!("CARGO_BIN_EXE_bench-child");

/// Lines between two flushes of LinesCodec's writer.
const FLUSH_EVERY: usize = 1024;

type Transport = childwire_async::Transport<childwire_tokio::Tokio>;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Placement {
    /// The reader in a task spawned on the runtime.
    Task,
    /// The reader in `block_on`, on the bench's own thread.
    BlockOn,
}

impl Placement {
    fn name(self) -> &'static str {
        match self {
            Placement::Task => "task",
            Placement::BlockOn => "block_on",
        }
    }
}

fn main() -> ExitCode {
    match run() {
        Ok(()) => ExitCode::SUCCESS,
        Err(error) => {
            eprintln!("users_shape: {error}");
            ExitCode::FAILURE
        }
    }
}

fn flag(name: &str) -> Result<Option<usize>, String> {
    let mut args = std::env::args().skip_while(|a| a != name);
    if args.next().is_none() {
        return Ok(None);
    }
    let value = args
        .next()
        .ok_or_else(|| format!("{name} needs a number"))?;
    value
        .parse()
        .map(Some)
        .map_err(|_| format!("{name} {value}: not a number"))
}

fn run() -> Result<(), String> {
    // `cargo bench` passes `--bench`; `--quick` (from `cargo xtask bench`)
    // asks for a short run.
    let quick = std::env::args().any(|a| a == "--quick");
    let sizes = match flag("--size")? {
        Some(size) => vec![size],
        None => vec![64, 200],
    };
    let messages = flag("--messages")?.unwrap_or(if quick { 2_000 } else { 100_000 });
    let reps = flag("--reps")?.unwrap_or(1);
    let childwire_only = std::env::args().any(|a| a == "--childwire-only");
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .map_err(|e| format!("runtime: {e}"))?;
    eprintln!(
        "users_shape: {messages} lines each of {sizes:?} B through `bench-child cat`, \
         {reps} repetition(s) after a warm-up; childwire's default config: {}",
        pollution_default()
    );
    for &size in &sizes {
        for rep in 0..=reps {
            for placement in [Placement::Task, Placement::BlockOn] {
                let codec = if childwire_only {
                    None
                } else {
                    Some(on(&runtime, placement, lines_codec(messages, size))?)
                };
                let ours = on(&runtime, placement, childwire(messages, size))?;
                if rep == 0 {
                    continue;
                }
                let mib_s = |elapsed: Duration| {
                    wire_bytes(messages, size) as f64
                        / elapsed.as_secs_f64().max(1e-9)
                        / (1024.0 * 1024.0)
                };
                let ours = mib_s(ours);
                let Some(codec) = codec.map(mib_s) else {
                    println!(
                        "users-shape size={size} placement={} rep={rep} childwire={ours:.1}",
                        placement.name()
                    );
                    continue;
                };
                println!(
                    "users-shape size={size} placement={} rep={rep} childwire={ours:.1} \
                     lines_codec={codec:.1} ratio={:.4}",
                    placement.name(),
                    ours / codec
                );
            }
        }
    }
    Ok(())
}

/// What the revision's default config does with stdout pollution, read
/// from its `Debug` text (older revisions have no such field).
fn pollution_default() -> String {
    let config = format!("{:?}", &*Config::default());
    match config.split_once("pollution: ") {
        Some((_, rest)) => {
            let end = rest.find([',', '}']).unwrap_or(rest.len());
            format!("pollution {}", rest[..end].trim())
        }
        None => "no pollution setting".to_string(),
    }
}

/// Runs `job` on `runtime`, its future placed as `placement` says.
fn on<T: Send + 'static>(
    runtime: &tokio::runtime::Runtime,
    placement: Placement,
    job: impl Future<Output = Result<T, String>> + Send + 'static,
) -> Result<T, String> {
    match placement {
        Placement::Task => runtime
            .block_on(runtime.spawn(job))
            .map_err(|e| format!("task: {e}"))?,
        Placement::BlockOn => runtime.block_on(job),
    }
}

/// A JSON-RPC request of `len` bytes (or the least its envelope takes),
/// with id `id`: built per message, as a caller serialising its messages
/// does.
fn payload(id: usize, len: usize) -> String {
    let mut line = String::with_capacity(len.max(64));
    let _ = write!(
        line,
        r#"{{"jsonrpc":"2.0","id":{id},"method":"echo","params":{{"data":""#
    );
    let tail = r#""}}"#;
    while line.len() + tail.len() < len {
        line.push('x');
    }
    line.push_str(tail);
    line
}

/// Bytes on the wire each way, newlines included.
fn wire_bytes(messages: usize, size: usize) -> usize {
    (0..messages).map(|id| payload_len(id, size) + 1).sum()
}

fn payload_len(id: usize, size: usize) -> usize {
    payload(id, 0).len().max(size)
}

/// Checks that every line came back, every byte.
fn verify(messages: usize, size: usize, count: usize, bytes: usize) -> Result<(), String> {
    let expected: usize = (0..messages).map(|id| payload_len(id, size)).sum();
    if count != messages || bytes != expected {
        return Err(format!(
            "echoed {count} lines / {bytes} bytes, sent {messages} / {expected}"
        ));
    }
    Ok(())
}

/// childwire with the default config: the time from the writer's start to
/// the reader's last message.
async fn childwire(messages: usize, size: usize) -> Result<Duration, String> {
    let mut command = Command::new(CHILD);
    command.arg("cat");
    let transport = Transport::spawn(&command, Config::default()).map_err(|e| e.to_string())?;
    let (sender, mut receiver) = transport.split();
    let start = Instant::now();
    let writer = tokio::spawn(async move {
        for id in 0..messages {
            sender
                .send(payload(id, size))
                .await
                .map_err(|e| format!("send: {e}"))?;
        }
        Ok::<_, String>(sender)
    });
    let (mut count, mut bytes) = (0, 0);
    while count < messages {
        match receiver.recv().await {
            Some(Received::Message(message)) => {
                count += 1;
                bytes += message.len();
            }
            other => return Err(format!("expected a message, got {other:?}")),
        }
    }
    let elapsed = start.elapsed();
    let sender = writer.await.map_err(|e| format!("writer: {e}"))??;
    verify(messages, size, count, bytes)?;
    let report = sender
        .shutdown()
        .await
        .map_err(|e| format!("shutdown: {e}"))?;
    if !report.success() {
        return Err(format!("child did not exit cleanly: {report}"));
    }
    Ok(elapsed)
}

/// tokio-util's LinesCodec in the same shape.
async fn lines_codec(messages: usize, size: usize) -> Result<Duration, String> {
    let mut child = tokio::process::Command::new(CHILD)
        .arg("cat")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .map_err(|e| format!("spawn: {e}"))?;
    let stdin = child.stdin.take().ok_or("no stdin")?;
    let stdout = child.stdout.take().ok_or("no stdout")?;
    let mut sink = FramedWrite::new(stdin, LinesCodec::new());
    let mut stream = FramedRead::new(stdout, LinesCodec::new());
    let start = Instant::now();
    let writer = tokio::spawn(async move {
        for id in 0..messages {
            sink.feed(payload(id, size)).await?;
            if (id + 1) % FLUSH_EVERY == 0 {
                SinkExt::<String>::flush(&mut sink).await?;
            }
        }
        SinkExt::<String>::close(&mut sink).await
    });
    let (mut count, mut bytes) = (0, 0);
    while count < messages {
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
    verify(messages, size, count, bytes)?;
    child.wait().await.map_err(|e| format!("wait: {e}"))?;
    Ok(elapsed)
}
