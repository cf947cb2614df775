//! childwire's own cost per message, with no I/O: what the end-to-end
//! benches cannot show on a noisy machine.
//!
//! A transport over pipes that never wait (a reader serving the same 64 KiB
//! of lines forever, a writer taking everything, `tokio::io::sink`), on a
//! current-thread Tokio runtime, against tokio-util's `FramedWrite::feed` and
//! `FramedRead::next` with `LinesCodec` over the same reader and writer. The
//! pipes, the child and the scheduler drop out; what is left is each one's
//! work per message: locks, checks, encoding, decoding, queuing.
//!
//! - Sending: `send().await` per message and the `Sink` (`feed`, a flush
//!   every 1024), against `FramedWrite::feed` with the same flushes. Every
//!   contender sends the same payload (a `&str` or a `Bytes` of it), so no
//!   payload is built per message here: building one would cost all of them
//!   alike and hide the difference.
//! - Receiving: `recv()` per message and `recv_many(.., 64)`, against
//!   `FramedRead::next` (which allocates a `String` per line).
//!
//! The shared async layer is the same code on every runtime, so this is
//! measured on Tokio alone. Contenders interleaved, best of the rounds; ns
//! per message. No targets: the end-to-end ratios are the targets, this says
//! where the time goes.
//!
//! `cargo xtask bench [--quick]`, or `cargo bench -p childwire-bench --bench per_message`.

#[macro_use]
#[path = "support/e2e.rs"]
mod e2e;

use std::pin::Pin;
use std::process::ExitCode;
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use bytes::Bytes;
use childwire_async::Received;
use childwire_tokio::{ChannelConfig, TokioIo, Transport};
use e2e::harness::{Args, Json, Table};
use futures_util::{SinkExt, StreamExt};
use tokio::io::{AsyncRead, ReadBuf};
use tokio_util::codec::{FramedRead, FramedWrite, LinesCodec};

fn main() -> ExitCode {
    e2e::main("per_message", bench)
}

const SIZES: [usize; 3] = [64, 200, 1024];

/// A flush every this many `feed`s, as the end-to-end benches do.
const FLUSH_EVERY: usize = 1024;

/// The contenders, in table order; `as usize` indexes their results. The
/// first of each direction is LinesCodec, which the others are compared
/// to.
#[derive(Clone, Copy)]
enum Contender {
    FeedLinesCodec,
    Send,
    SinkFeed,
    NextLinesCodec,
    Recv,
    RecvMany,
}

impl Contender {
    const ALL: [Contender; 6] = [
        Contender::FeedLinesCodec,
        Contender::Send,
        Contender::SinkFeed,
        Contender::NextLinesCodec,
        Contender::Recv,
        Contender::RecvMany,
    ];

    fn name(self) -> &'static str {
        match self {
            Contender::FeedLinesCodec => "send: LinesCodec, FramedWrite::feed",
            Contender::Send => "send: childwire, send().await",
            Contender::SinkFeed => "send: childwire, Sink feed",
            Contender::NextLinesCodec => "receive: LinesCodec, FramedRead::next",
            Contender::Recv => "receive: childwire, recv()",
            Contender::RecvMany => "receive: childwire, recv_many(64)",
        }
    }

    /// The LinesCodec contender of the same direction.
    fn baseline(self) -> Contender {
        match self {
            Contender::FeedLinesCodec | Contender::Send | Contender::SinkFeed => {
                Contender::FeedLinesCodec
            }
            Contender::NextLinesCodec | Contender::Recv | Contender::RecvMany => {
                Contender::NextLinesCodec
            }
        }
    }

    /// Moves `count` messages of `payload.len()` bytes; how many bytes of
    /// payload went through, for the check that every contender did the job.
    async fn run(self, payload: &str, count: usize) -> Result<usize, String> {
        let config = ChannelConfig::default();
        let transport = || {
            let lines = EndlessLines::new(payload);
            Transport::from_pipes(TokioIo(lines), TokioIo(tokio::io::sink()), &config)
                .map_err(|e| format!("from_pipes: {e}"))
        };
        let fail = |e: &dyn std::fmt::Display| format!("{}: {e}", self.name());
        let mut moved = 0;
        match self {
            Contender::FeedLinesCodec => {
                let mut framed = FramedWrite::new(tokio::io::sink(), LinesCodec::new());
                for i in 0..count {
                    framed.feed(payload).await.map_err(|e| fail(&e))?;
                    if i % FLUSH_EVERY == FLUSH_EVERY - 1 {
                        SinkExt::<&str>::flush(&mut framed)
                            .await
                            .map_err(|e| fail(&e))?;
                    }
                    moved += payload.len();
                }
            }
            Contender::Send => {
                let transport = transport()?;
                for _ in 0..count {
                    transport.send(payload).await.map_err(|e| fail(&e))?;
                    moved += payload.len();
                }
            }
            Contender::SinkFeed => {
                let mut transport = transport()?;
                let bytes = Bytes::copy_from_slice(payload.as_bytes());
                for i in 0..count {
                    transport.feed(bytes.clone()).await.map_err(|e| fail(&e))?;
                    if i % FLUSH_EVERY == FLUSH_EVERY - 1 {
                        SinkExt::<Bytes>::flush(&mut transport)
                            .await
                            .map_err(|e| fail(&e))?;
                    }
                    moved += payload.len();
                }
            }
            Contender::NextLinesCodec => {
                let mut framed = FramedRead::new(EndlessLines::new(payload), LinesCodec::new());
                for _ in 0..count {
                    match framed.next().await {
                        Some(Ok(line)) => moved += line.len(),
                        other => return Err(fail(&format!("{other:?}"))),
                    }
                }
            }
            Contender::Recv => {
                let mut transport = transport()?;
                for _ in 0..count {
                    match transport.recv().await {
                        Some(Received::Message(message)) => moved += message.len(),
                        other => return Err(fail(&format!("{other:?}"))),
                    }
                }
            }
            Contender::RecvMany => {
                let mut transport = transport()?;
                let mut batch = Vec::with_capacity(64);
                let mut received = 0;
                while received < count {
                    batch.clear();
                    let limit = (count - received).min(64);
                    received += transport.recv_many(&mut batch, limit).await;
                    for item in batch.drain(..) {
                        match item {
                            Received::Message(message) => moved += message.len(),
                            other => return Err(fail(&format!("{other:?}"))),
                        }
                    }
                }
            }
        }
        Ok(moved)
    }
}

/// A reader that never waits: the same 64 KiB of lines of one payload, over
/// and over.
struct EndlessLines {
    block: Vec<u8>,
    at: usize,
}

impl EndlessLines {
    fn new(payload: &str) -> Self {
        let mut block = Vec::with_capacity(64 * 1024 + payload.len() + 1);
        while block.len() < 64 * 1024 {
            block.extend_from_slice(payload.as_bytes());
            block.push(b'\n');
        }
        Self { block, at: 0 }
    }
}

impl AsyncRead for EndlessLines {
    fn poll_read(
        mut self: Pin<&mut Self>,
        _: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<std::io::Result<()>> {
        let at = self.at;
        let n = buf.remaining().min(self.block.len() - at);
        buf.put_slice(&self.block[at..at + n]);
        self.at = (at + n) % self.block.len();
        Poll::Ready(Ok(()))
    }
}

fn bench(args: Args) -> Result<ExitCode, String> {
    // Many short rounds rather than a few long ones: on a shared machine the
    // speed changes for seconds at a time, and the best of many short
    // samples catches every contender in a fast spell.
    let (count, rounds) = if args.quick {
        (20_000, 2)
    } else {
        (250_000, 15)
    };
    eprintln!(
        "per_message: {count} messages per contender and size, no I/O, a current-thread Tokio \
         runtime, best of {rounds}, contenders interleaved{}",
        e2e::quick_note(&args)
    );
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| format!("runtime: {e}"))?;

    let mut table = Table::new(
        std::iter::once("ns per message (best)".to_string())
            .chain(SIZES.iter().map(|size| format!("{size} B")))
            .chain(SIZES.iter().map(|size| format!("{size} B vs LinesCodec"))),
    );
    // [contender as usize][size]
    let mut best = [[Duration::MAX; SIZES.len()]; Contender::ALL.len()];
    let payloads = SIZES.map(|size| e2e::payload(0, size));
    // A warm-up round (allocator, page faults), then `rounds`; each round
    // goes through every size, so a slow spell of the machine hits every
    // size and contender alike rather than all the rounds of one size.
    for round in 0..=rounds {
        for (s, payload) in payloads.iter().enumerate() {
            for contender in Contender::ALL {
                let c = contender as usize;
                let start = Instant::now();
                let moved = rt.block_on(contender.run(payload, count))?;
                let took = start.elapsed();
                if moved != count * payload.len() {
                    return Err(format!(
                        "{}: moved {moved} bytes, expected {}",
                        contender.name(),
                        count * payload.len()
                    ));
                }
                if round > 0 {
                    best[c][s] = best[c][s].min(took);
                }
            }
        }
    }

    let ns = |d: Duration| d.as_secs_f64() * 1e9 / count as f64;
    let mut json = Vec::new();
    for contender in Contender::ALL {
        let c = contender as usize;
        let baseline = contender.baseline() as usize;
        table.row(
            std::iter::once(contender.name().to_string())
                .chain(best[c].iter().map(|&d| format!("{:.1}", ns(d))))
                .chain(
                    best[c]
                        .iter()
                        .zip(best[baseline])
                        .map(|(&d, base)| format!("{:.2}x", ns(d) / ns(base))),
                ),
        );
        json.push(Json::object([
            ("contender", Json::from(contender.name())),
            (
                "ns_per_message",
                Json::Arr(
                    SIZES
                        .iter()
                        .zip(best[c])
                        .map(|(&size, d)| {
                            Json::object([("size", Json::from(size)), ("ns", Json::Num(ns(d)))])
                        })
                        .collect(),
                ),
            ),
        ]));
    }
    let results = Json::object([
        ("messages", Json::from(count)),
        ("rounds", Json::from(rounds)),
        ("contenders", Json::Arr(json)),
    ]);
    Ok(e2e::finish("per_message", &args, &[table], &[], results))
}
