//! Round trips through a `childwire-share` client against the same round
//! trips on the shared transport itself, over an in-memory pipe whose far
//! end answers each request: `"method":"echo","params":` becomes
//! `"result":` (the same work in both rows, so their difference is the
//! share's: the id rewritten and restored, the routing, the server's
//! reader task and the client's wake-up).

use std::collections::VecDeque;
use std::hint::black_box;
use std::io::Read;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll, Waker};

use childwire_async::{ChannelConfig, PipeRead, PipeWrite, Received, Transport};
use childwire_core::DEFAULT_MAX_MESSAGE_SIZE;
use childwire_share::{ShareConfig, SharedServer};
use childwire_tokio::Tokio;

/// Which way the requests go.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum ShareTrip {
    /// `Transport::send` then `recv`, the request's own id.
    Direct,
    /// `Client::send` then `recv` on a `SharedServer` over that transport.
    Share,
}

impl ShareTrip {
    pub(crate) const ALL: [ShareTrip; 2] = [ShareTrip::Direct, ShareTrip::Share];

    pub(crate) fn name(self) -> &'static str {
        match self {
            ShareTrip::Direct => "childwire-tokio send + recv",
            ShareTrip::Share => "childwire-share client send + recv (tokio)",
        }
    }
}

const REQUEST: &[u8] = br#","method":"echo","params":"#;
const RESPONSE: &[u8] = br#","result":"#;

/// `count` round trips of `payload` (a request with `"method":"echo"`).
pub(crate) fn round_trips(trip: ShareTrip, payload: &str, count: usize) -> Result<u64, String> {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| format!("runtime: {e}"))?;
    let expected = payload.len() - REQUEST.len() + RESPONSE.len();
    runtime.block_on(async move {
        let (reader, writer) = answering();
        let transport = Transport::<Tokio>::from_pipes(reader, writer, &ChannelConfig::default())
            .map_err(|e| format!("from_pipes: {e}"))?;
        match trip {
            ShareTrip::Direct => {
                let mut transport = transport;
                for _ in 0..count {
                    transport
                        .send(payload)
                        .await
                        .map_err(|e| format!("send: {e}"))?;
                    match transport.recv().await {
                        Some(Received::Message(answer)) if answer.len() == expected => {
                            black_box(answer);
                        }
                        other => return Err(format!("recv: {other:?}")),
                    }
                }
            }
            ShareTrip::Share => {
                let server = SharedServer::from_transport(
                    transport,
                    DEFAULT_MAX_MESSAGE_SIZE,
                    ShareConfig::default(),
                )
                .map_err(|e| format!("share: {e}"))?;
                let client = server.connect().map_err(|e| format!("connect: {e}"))?;
                for _ in 0..count {
                    client
                        .send(payload)
                        .await
                        .map_err(|e| format!("send: {e}"))?;
                    match client.recv().await {
                        Some(answer) if answer.len() == expected => {
                            black_box(answer);
                        }
                        other => return Err(format!("recv: {other:?}")),
                    }
                }
            }
        }
        Ok(count as u64)
    })
}

#[derive(Default)]
struct Pipe {
    bytes: VecDeque<u8>,
    /// Written bytes after the last newline, not answered yet.
    partial: Vec<u8>,
    reader: Option<Waker>,
    closed: bool,
}

/// An in-memory pipe whose writes come back out of the reader as answers.
fn answering() -> (Reader, Writer) {
    let pipe = Arc::new(Mutex::new(Pipe::default()));
    (Reader(Arc::clone(&pipe)), Writer(pipe))
}

struct Reader(Arc<Mutex<Pipe>>);

struct Writer(Arc<Mutex<Pipe>>);

impl PipeRead for Reader {
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

impl PipeWrite for Writer {
    fn poll_write(&mut self, _: &mut Context<'_>, buf: &[u8]) -> Poll<std::io::Result<usize>> {
        let mut pipe = self.0.lock().expect("the pipe's lock");
        let pipe = &mut *pipe;
        pipe.partial.extend_from_slice(buf);
        while let Some(end) = pipe.partial.iter().position(|&b| b == b'\n') {
            let line: Vec<u8> = pipe.partial.drain(..=end).collect();
            match line.windows(REQUEST.len()).position(|w| w == REQUEST) {
                Some(at) => {
                    pipe.bytes.extend(&line[..at]);
                    pipe.bytes.extend(RESPONSE);
                    pipe.bytes.extend(&line[at + REQUEST.len()..]);
                }
                None => pipe.bytes.extend(&line),
            }
        }
        if let Some(reader) = pipe.reader.take() {
            reader.wake();
        }
        Poll::Ready(Ok(buf.len()))
    }

    fn poll_flush(&mut self, _: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Poll::Ready(Ok(()))
    }
}

impl Drop for Writer {
    fn drop(&mut self) {
        let mut pipe = self.0.lock().expect("the pipe's lock");
        pipe.closed = true;
        if let Some(reader) = pipe.reader.take() {
            reader.wake();
        }
    }
}
