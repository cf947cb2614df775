//! The in-memory twin of `childwire replay`: a recorded server as a pair of
//! pipes, for a transport in a test without any process (feature
//! `transport`).
//!
//! [`twin`] gives the server's stdout (a [`PipeRead`]) and stdin (a
//! [`PipeWrite`]); hand them to `Transport::from_pipes` on any runtime and
//! talk to the recording as to the server. What a process would add lives
//! in the [`Twin`] handle: the stderr lines written so far and the recorded
//! exit. The transport's stream ends (its reader's EOF) when the recorded
//! server exits: when the transport closes its write side, or where the
//! server exited on its own.
//!
//! ```
//! use childwire_async::{ChannelConfig, Transport};
//! use childwire_replay::Recording;
//!
//! async fn ping<R: childwire_async::Runtime>() -> Result<(), Box<dyn std::error::Error>> {
//!     let recording: Recording = concat!(
//!         r#"{"dir":"to_child","msg":{"jsonrpc":"2.0","id":1,"method":"ping"}}"#, "\n",
//!         r#"{"dir":"from_child","msg":{"jsonrpc":"2.0","id":1,"result":{}}}"#, "\n",
//!     ).parse()?;
//!     let (stdout, stdin, twin) = childwire_replay::twin(recording);
//!     let mut server = Transport::<R>::from_pipes(stdout, stdin, &ChannelConfig::default())?;
//!     server.send(r#"{"jsonrpc":"2.0","id":"a","method":"ping"}"#).await?;
//!     // {"jsonrpc":"2.0","id":"a","result":{}}
//!     println!("{:?}", server.recv().await);
//!     server.close().await?;
//!     assert!(server.recv().await.is_none());
//!     assert_eq!(twin.exit().map(|exit| exit.shell_code()), Some(0));
//!     Ok(())
//! }
//! ```

use std::io;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::task::{Context, Poll, Waker};

use childwire_async::{PipeRead, PipeWrite};
use childwire_core::{Frame, LineDecoder};

use crate::recording::{RecordedExit, Recording};
use crate::replayer::{Output, Replayer, Unmatched};

/// Longest message the twin reads from the host: the relay's default, so
/// whatever a relay recorded replays.
const MAX_MESSAGE_SIZE: usize = 64 * 1024 * 1024;

/// A recorded server as the two ends of its stdio, and the handle that sees
/// what a process would show besides (see the [module docs](self)).
#[must_use]
pub fn twin(recording: Recording) -> (TwinStdout, TwinStdin, Twin) {
    let mut state = State {
        replayer: Replayer::new(recording),
        decoder: LineDecoder::new(MAX_MESSAGE_SIZE),
        stdout: Vec::new(),
        read_at: 0,
        reader: None,
        stderr: Vec::new(),
        exit: None,
    };
    state.drain();
    let shared = Arc::new(Mutex::new(state));
    (
        TwinStdout(Arc::clone(&shared)),
        TwinStdin {
            shared: Arc::clone(&shared),
            closed: false,
        },
        Twin(shared),
    )
}

/// What the test sees of the twin besides its stdout: its stderr lines and
/// its exit.
#[derive(Debug, Clone)]
pub struct Twin(Arc<Mutex<State>>);

impl Twin {
    /// The stderr lines the server has written so far.
    #[must_use]
    pub fn stderr_lines(&self) -> Vec<String> {
        lock(&self.0).stderr.clone()
    }

    /// How the server ended; `None` while it runs.
    #[must_use]
    pub fn exit(&self) -> Option<RecordedExit> {
        lock(&self.0).exit.clone()
    }

    /// The messages the recording had nothing for, so far.
    #[must_use]
    pub fn unmatched(&self) -> Vec<Unmatched> {
        lock(&self.0).replayer.unmatched().to_vec()
    }
}

/// The twin's stdout: what the recorded server writes, ending at its exit.
#[derive(Debug)]
pub struct TwinStdout(Arc<Mutex<State>>);

/// The twin's stdin: what the host sends the recorded server. Shutting it
/// down or dropping it is the server's EOF.
#[derive(Debug)]
pub struct TwinStdin {
    shared: Arc<Mutex<State>>,
    closed: bool,
}

#[derive(Debug)]
struct State {
    replayer: Replayer,
    decoder: LineDecoder,
    /// Written by the server, not read yet from `read_at` on.
    stdout: Vec<u8>,
    read_at: usize,
    /// The reader waiting for stdout.
    reader: Option<Waker>,
    stderr: Vec<String>,
    exit: Option<RecordedExit>,
}

impl State {
    /// Moves what the replayer has to say to stdout, stderr and the exit,
    /// and wakes the reader if there is something for it.
    fn drain(&mut self) {
        while let Some(output) = self.replayer.poll_output() {
            match output {
                Output::Message(message) => {
                    self.stdout.extend_from_slice(&message);
                    self.stdout.push(b'\n');
                }
                Output::Oversized(len) => {
                    // A JSON string of `len` bytes: the host's framing sees
                    // the line it saw.
                    let len = usize::try_from(len).unwrap_or(usize::MAX).max(2);
                    self.stdout.push(b'"');
                    self.stdout.resize(self.stdout.len() + len - 2, b'x');
                    self.stdout.extend_from_slice(b"\"\n");
                }
                Output::Stderr(line) => self.stderr.push(line),
                Output::Exit(exit) => self.exit = Some(exit),
            }
        }
        if self.read_at < self.stdout.len() || self.exit.is_some() {
            if let Some(reader) = self.reader.take() {
                reader.wake();
            }
        }
    }

    fn frames(&mut self) {
        while let Some(frame) = self.decoder.poll_frame() {
            if let Frame::Message(message) = frame {
                self.replayer.handle_message(&message);
            }
            // An oversized line from the host never reached the server.
        }
        self.drain();
    }

    fn eof(&mut self) {
        self.decoder.handle_eof();
        self.frames();
        self.replayer.handle_eof();
        self.drain();
    }
}

fn lock(shared: &Mutex<State>) -> MutexGuard<'_, State> {
    // A panic elsewhere while holding the lock leaves a consistent state:
    // every change is whole before the next call.
    shared.lock().unwrap_or_else(PoisonError::into_inner)
}

impl PipeRead for TwinStdout {
    fn poll_read(&mut self, cx: &mut Context<'_>, buf: &mut [u8]) -> Poll<io::Result<usize>> {
        let mut state = lock(&self.0);
        let state = &mut *state;
        let unread = &state.stdout[state.read_at..];
        if unread.is_empty() {
            if state.exit.is_some() {
                return Poll::Ready(Ok(0));
            }
            state.reader = Some(cx.waker().clone());
            return Poll::Pending;
        }
        let len = unread.len().min(buf.len());
        buf[..len].copy_from_slice(&unread[..len]);
        state.read_at += len;
        if state.read_at == state.stdout.len() {
            state.stdout.clear();
            state.read_at = 0;
        }
        Poll::Ready(Ok(len))
    }
}

impl PipeWrite for TwinStdin {
    fn poll_write(&mut self, _cx: &mut Context<'_>, buf: &[u8]) -> Poll<io::Result<usize>> {
        let mut state = lock(&self.shared);
        if state.exit.is_some() || self.closed {
            // What writing to a process that is gone gets.
            return Poll::Ready(Err(io::ErrorKind::BrokenPipe.into()));
        }
        state.decoder.handle_data(buf);
        state.frames();
        Poll::Ready(Ok(buf.len()))
    }

    fn poll_flush(&mut self, _cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Poll::Ready(Ok(()))
    }

    fn poll_shutdown(&mut self, _cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        self.close();
        Poll::Ready(Ok(()))
    }
}

impl TwinStdin {
    fn close(&mut self) {
        if !self.closed {
            self.closed = true;
            lock(&self.shared).eof();
        }
    }
}

impl Drop for TwinStdin {
    fn drop(&mut self) {
        self.close();
    }
}
