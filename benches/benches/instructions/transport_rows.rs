//! The rows that go through a whole transport: `send().await`, the `Sink`,
//! `send_many`, `recv()`, `recv_many`, against tokio-util's `FramedWrite` /
//! `FramedRead` with `LinesCodec` and a plain `BufWriter::write_all` /
//! `BufReader::read_until` loop; and one round trip per runtime.
//!
//! Each childwire row runs with a [`Setting`]: `ChannelConfig::default()`
//! (what `from_pipes` callers pass, pollution off), the channel a spawned
//! child gets by default (what users run), or every optional check off.
//!
//! The shapes of `per_message.rs`: no real I/O, a reader that serves the
//! same lines forever and a writer that takes everything, on a
//! current-thread Tokio runtime (one thread: nothing for callgrind to count
//! twice). The round trips go through an in-memory pipe whose writing end
//! feeds its reading end: an in-memory `cat`.

use std::collections::VecDeque;
use std::hint::black_box;
use std::io::{BufRead, BufReader, BufWriter, Read, Write};
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll, Waker};

use bytes::Bytes;
use childwire_async::{ChannelConfig, Config, PipeRead, PipeWrite, Received, Runtime, Transport};
use childwire_tokio::TokioIo;
use futures_util::{SinkExt, StreamExt};
use tokio::io::{AsyncRead, ReadBuf};
use tokio_util::codec::{FramedRead, FramedWrite, LinesCodec};

/// A flush every this many `feed`s, as the end-to-end benches do.
const FLUSH_EVERY: usize = 1024;

/// Messages per `send_many` and `recv_many` call.
const BATCH: usize = 64;

/// How a send row hands its messages over.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum SendWay {
    FramedWriteFeed,
    Send,
    SinkFeed,
    SendMany,
    WriteAll,
}

impl SendWay {
    pub(crate) const ALL: [SendWay; 5] = [
        SendWay::Send,
        SendWay::SinkFeed,
        SendWay::SendMany,
        SendWay::FramedWriteFeed,
        SendWay::WriteAll,
    ];

    pub(crate) fn name(self) -> &'static str {
        match self {
            SendWay::Send => "childwire send().await",
            SendWay::SinkFeed => "childwire Sink feed",
            SendWay::SendMany => "childwire send_many(64)",
            SendWay::FramedWriteFeed => "LinesCodec FramedWrite::feed",
            SendWay::WriteAll => "BufWriter write_all loop",
        }
    }

    pub(crate) fn is_childwire(self) -> bool {
        matches!(self, SendWay::Send | SendWay::SinkFeed | SendWay::SendMany)
    }
}

/// How a receive row takes its messages.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum RecvWay {
    FramedReadNext,
    Recv,
    RecvMany,
    ReadUntil,
}

impl RecvWay {
    pub(crate) const ALL: [RecvWay; 4] = [
        RecvWay::Recv,
        RecvWay::RecvMany,
        RecvWay::FramedReadNext,
        RecvWay::ReadUntil,
    ];

    pub(crate) fn name(self) -> &'static str {
        match self {
            RecvWay::Recv => "childwire recv()",
            RecvWay::RecvMany => "childwire recv_many(64)",
            RecvWay::FramedReadNext => "LinesCodec FramedRead::next",
            RecvWay::ReadUntil => "BufReader read_until loop",
        }
    }

    pub(crate) fn is_childwire(self) -> bool {
        matches!(self, RecvWay::Recv | RecvWay::RecvMany)
    }
}

/// The runtime of a round-trip row.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum RoundTrip {
    Tokio,
    Smol,
    AsyncStd,
}

impl RoundTrip {
    pub(crate) const ALL: [RoundTrip; 3] = [RoundTrip::Tokio, RoundTrip::Smol, RoundTrip::AsyncStd];

    pub(crate) fn name(self) -> &'static str {
        match self {
            RoundTrip::Tokio => "childwire-tokio send + recv",
            RoundTrip::Smol => "childwire-smol send + recv",
            RoundTrip::AsyncStd => "childwire-async-std send + recv",
        }
    }
}

/// The channel configuration of a childwire row's transport.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Setting {
    /// `ChannelConfig::default()`: what a channel over pipes or a stream
    /// gets, stdout pollution not looked for.
    Bare,
    /// The channel part of `childwire_async::Config::default()`: every
    /// default as a spawned child gets it, pollution named.
    ChildDefault,
    /// Every optional check off, spelled out so that a change of a
    /// default does not move it: the floor the child's default is held to.
    ChecksOff,
}

impl Setting {
    pub(crate) fn config(self) -> ChannelConfig {
        match self {
            Setting::Bare => ChannelConfig::default(),
            Setting::ChildDefault => Config::default().channel.clone(),
            Setting::ChecksOff => {
                let mut config = ChannelConfig::default();
                config.pollution = None;
                config.write_timeout = None;
                config
            }
        }
    }

    /// What the row's name says of it (nothing for `Bare`, the rows that
    /// were there first).
    pub(crate) fn suffix(self) -> &'static str {
        match self {
            Setting::Bare => "",
            Setting::ChildDefault => ", a child's default config",
            Setting::ChecksOff => ", every optional check off",
        }
    }
}

fn current_thread_tokio() -> Result<tokio::runtime::Runtime, String> {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| format!("runtime: {e}"))
}

/// Sends `count` copies of `payload` the way `way` says, a transport set
/// as `setting` says.
pub(crate) fn send(
    way: SendWay,
    setting: Setting,
    payload: &str,
    count: usize,
) -> Result<u64, String> {
    let fail = |e: &dyn std::fmt::Display| format!("{}: {e}", way.name());
    if way == SendWay::WriteAll {
        let mut out = BufWriter::with_capacity(64 * 1024, std::io::sink());
        for _ in 0..count {
            out.write_all(payload.as_bytes()).map_err(|e| fail(&e))?;
            out.write_all(b"\n").map_err(|e| fail(&e))?;
        }
        out.flush().map_err(|e| fail(&e))?;
        return Ok(count as u64);
    }
    current_thread_tokio()?.block_on(async {
        let transport = || {
            Transport::from_pipes(
                TokioIo(EndlessLines::new(payload)),
                TokioIo(tokio::io::sink()),
                &setting.config(),
            )
            .map_err(|e| fail(&e))
        };
        match way {
            SendWay::FramedWriteFeed => {
                let mut framed = FramedWrite::new(tokio::io::sink(), LinesCodec::new());
                for i in 0..count {
                    framed.feed(payload).await.map_err(|e| fail(&e))?;
                    if i % FLUSH_EVERY == FLUSH_EVERY - 1 {
                        SinkExt::<&str>::flush(&mut framed)
                            .await
                            .map_err(|e| fail(&e))?;
                    }
                }
            }
            SendWay::Send => {
                let transport: childwire_tokio::Transport = transport()?;
                for _ in 0..count {
                    transport.send(payload).await.map_err(|e| fail(&e))?;
                }
            }
            SendWay::SinkFeed => {
                let mut transport: childwire_tokio::Transport = transport()?;
                let bytes = Bytes::copy_from_slice(payload.as_bytes());
                for i in 0..count {
                    transport.feed(bytes.clone()).await.map_err(|e| fail(&e))?;
                    if i % FLUSH_EVERY == FLUSH_EVERY - 1 {
                        SinkExt::<Bytes>::flush(&mut transport)
                            .await
                            .map_err(|e| fail(&e))?;
                    }
                }
            }
            SendWay::SendMany => {
                let transport: childwire_tokio::Transport = transport()?;
                for _ in 0..count / BATCH {
                    transport
                        .send_many(std::iter::repeat_n(payload, BATCH))
                        .await
                        .map_err(|e| fail(&e))?;
                }
            }
            SendWay::WriteAll => unreachable!("handled above"),
        }
        Ok(count as u64)
    })
}

/// Receives `count` lines of `payload` the way `way` says, a transport set
/// as `setting` says.
pub(crate) fn recv(
    way: RecvWay,
    setting: Setting,
    payload: &str,
    count: usize,
) -> Result<u64, String> {
    let fail = |what: &dyn std::fmt::Debug| format!("{}: {what:?}", way.name());
    if way == RecvWay::ReadUntil {
        let mut reader = BufReader::with_capacity(64 * 1024, EndlessLines::new(payload));
        let mut line = Vec::new();
        for _ in 0..count {
            line.clear();
            reader.read_until(b'\n', &mut line).map_err(|e| fail(&e))?;
            black_box(&line);
        }
        return Ok(count as u64);
    }
    current_thread_tokio()?.block_on(async {
        let transport = || -> Result<childwire_tokio::Transport, String> {
            Transport::from_pipes(
                TokioIo(EndlessLines::new(payload)),
                TokioIo(tokio::io::sink()),
                &setting.config(),
            )
            .map_err(|e| fail(&e))
        };
        match way {
            RecvWay::FramedReadNext => {
                let mut framed = FramedRead::new(EndlessLines::new(payload), LinesCodec::new());
                for _ in 0..count {
                    match framed.next().await {
                        Some(Ok(line)) => {
                            black_box(line);
                        }
                        other => return Err(fail(&other)),
                    }
                }
            }
            RecvWay::Recv => {
                let mut transport = transport()?;
                for _ in 0..count {
                    match transport.recv().await {
                        Some(Received::Message(message)) => {
                            black_box(message);
                        }
                        other => return Err(fail(&other)),
                    }
                }
            }
            RecvWay::RecvMany => {
                let mut transport = transport()?;
                let mut batch = Vec::with_capacity(BATCH);
                let mut received = 0;
                while received < count {
                    let limit = (count - received).min(BATCH);
                    received += transport.recv_many(&mut batch, limit).await;
                    for item in batch.drain(..) {
                        match item {
                            Received::Message(message) => {
                                black_box(message);
                            }
                            other => return Err(fail(&other)),
                        }
                    }
                }
            }
            RecvWay::ReadUntil => unreachable!("handled above"),
        }
        Ok(count as u64)
    })
}

/// `count` round trips of `payload` through an in-memory `cat` on `trip`'s
/// runtime, a transport set as `setting` says: `send().await`, then
/// `recv()` of the same line.
pub(crate) fn round_trips(
    trip: RoundTrip,
    setting: Setting,
    payload: &str,
    count: usize,
) -> Result<u64, String> {
    let payload = payload.to_string();
    let config = setting.config();
    match trip {
        RoundTrip::Tokio => current_thread_tokio()?.block_on(round_trips_on::<
            childwire_tokio::Tokio,
        >(payload, config, count)),
        RoundTrip::Smol => smol::block_on(round_trips_on::<childwire_smol::Smol>(
            payload, config, count,
        )),
        RoundTrip::AsyncStd => async_std::task::block_on(round_trips_on::<
            childwire_async_std::AsyncStd,
        >(payload, config, count)),
    }
}

async fn round_trips_on<R: Runtime>(
    payload: String,
    config: ChannelConfig,
    count: usize,
) -> Result<u64, String> {
    let (reader, writer) = loopback();
    let mut transport = Transport::<R>::from_pipes(reader, writer, &config)
        .map_err(|e| format!("from_pipes: {e}"))?;
    for _ in 0..count {
        transport
            .send(payload.as_str())
            .await
            .map_err(|e| format!("send: {e}"))?;
        match transport.recv().await {
            Some(Received::Message(message)) if message.len() == payload.len() => {
                black_box(message);
            }
            other => return Err(format!("recv: {other:?}")),
        }
    }
    Ok(count as u64)
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

    fn fill(&mut self, buf: &mut [u8]) -> usize {
        let n = buf.len().min(self.block.len() - self.at);
        buf[..n].copy_from_slice(&self.block[self.at..self.at + n]);
        self.at = (self.at + n) % self.block.len();
        n
    }
}

impl AsyncRead for EndlessLines {
    fn poll_read(
        mut self: Pin<&mut Self>,
        _: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<std::io::Result<()>> {
        let n = self.fill(buf.initialize_unfilled());
        buf.advance(n);
        Poll::Ready(Ok(()))
    }
}

impl Read for EndlessLines {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        Ok(self.fill(buf))
    }
}

/// What the two ends of an in-memory pipe share.
#[derive(Default)]
struct Pipe {
    bytes: VecDeque<u8>,
    reader: Option<Waker>,
    closed: bool,
}

/// An in-memory pipe: what is written to the second comes out of the first.
fn loopback() -> (LoopReader, LoopWriter) {
    let pipe = Arc::new(Mutex::new(Pipe::default()));
    (LoopReader(Arc::clone(&pipe)), LoopWriter(pipe))
}

struct LoopReader(Arc<Mutex<Pipe>>);

struct LoopWriter(Arc<Mutex<Pipe>>);

impl PipeRead for LoopReader {
    fn poll_read(&mut self, cx: &mut Context<'_>, buf: &mut [u8]) -> Poll<std::io::Result<usize>> {
        let mut pipe = self.0.lock().expect("the pipe's lock");
        if pipe.bytes.is_empty() {
            if pipe.closed {
                return Poll::Ready(Ok(0));
            }
            pipe.reader = Some(cx.waker().clone());
            return Poll::Pending;
        }
        let n = pipe.bytes.read(buf)?;
        Poll::Ready(Ok(n))
    }
}

impl PipeWrite for LoopWriter {
    fn poll_write(&mut self, _: &mut Context<'_>, buf: &[u8]) -> Poll<std::io::Result<usize>> {
        let mut pipe = self.0.lock().expect("the pipe's lock");
        pipe.bytes.extend(buf);
        if let Some(reader) = pipe.reader.take() {
            reader.wake();
        }
        Poll::Ready(Ok(buf.len()))
    }

    fn poll_flush(&mut self, _: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Poll::Ready(Ok(()))
    }
}

impl Drop for LoopWriter {
    fn drop(&mut self) {
        let mut pipe = self.0.lock().expect("the pipe's lock");
        pipe.closed = true;
        if let Some(reader) = pipe.reader.take() {
            reader.wake();
        }
    }
}
