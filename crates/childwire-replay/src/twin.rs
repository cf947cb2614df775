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

use std::collections::VecDeque;
use std::io;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::task::{Context, Poll, Waker};

use childwire_async::{PipeRead, PipeWrite};
use childwire_core::{Frame, LineDecoder};

use crate::recording::{RecordedExit, Recording};
use crate::replayer::{Note, Output, Replayer, Unmatched};

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
        stdout: VecDeque::new(),
        reader: None,
        stderr: Vec::new(),
        notes: Vec::new(),
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

    /// What a person should know about the replay so far (the first 1,024
    /// notes): a request answered by rank rather than by name, a message
    /// not in the recording, a recording of several generations. See
    /// [`Note`].
    #[must_use]
    pub fn notes(&self) -> Vec<Note> {
        lock(&self.0).notes.clone()
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
    /// Written by the server, not read yet.
    stdout: VecDeque<Piece>,
    /// The reader waiting for stdout.
    reader: Option<Waker>,
    stderr: Vec<String>,
    notes: Vec<Note>,
    exit: Option<RecordedExit>,
}

/// Part of the server's stdout, not read yet.
#[derive(Debug)]
enum Piece {
    /// These bytes, from `.1` on.
    Bytes(Vec<u8>, usize),
    /// The filler of a message recorded only by its size: a JSON string,
    /// `"` and `left - 2` bytes `x` and `"`, then the line break, made as
    /// it is read (a recording may say gigabytes).
    Filler { len: u64, at: u64 },
}

/// The most notes a twin keeps.
const MAX_NOTES: usize = 1024;

impl State {
    /// Moves what the replayer has to say to stdout, stderr and the exit,
    /// and wakes the reader if there is something for it.
    fn drain(&mut self) {
        while let Some(output) = self.replayer.poll_output() {
            match output {
                Output::Message(mut message) => {
                    message.push(b'\n');
                    self.stdout.push_back(Piece::Bytes(message, 0));
                }
                Output::Oversized(len) => {
                    // A JSON string of `len` bytes: the host's framing sees
                    // the line it saw.
                    self.stdout.push_back(Piece::Filler {
                        len: len.max(2),
                        at: 0,
                    });
                }
                Output::Stderr(line) => self.stderr.push(line),
                Output::Exit(exit) => self.exit = Some(exit),
            }
        }
        while let Some(note) = self.replayer.poll_note() {
            if self.notes.len() < MAX_NOTES {
                self.notes.push(note);
            }
        }
        if !self.stdout.is_empty() || self.exit.is_some() {
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
        let Some(piece) = state.stdout.front_mut() else {
            if state.exit.is_some() {
                return Poll::Ready(Ok(0));
            }
            state.reader = Some(cx.waker().clone());
            return Poll::Pending;
        };
        let (len, done) = match piece {
            Piece::Bytes(bytes, at) => {
                let len = (bytes.len() - *at).min(buf.len());
                buf[..len].copy_from_slice(&bytes[*at..*at + len]);
                *at += len;
                (len, *at == bytes.len())
            }
            Piece::Filler { len: total, at } => {
                // `"`, the `x`s, `"` and the line break: `total + 1` bytes.
                let left = *total + 1 - *at;
                let len = usize::try_from(left).unwrap_or(usize::MAX).min(buf.len());
                let window = *at..*at + len as u64;
                buf[..len].fill(b'x');
                for (position, byte) in [(0, b'"'), (*total - 1, b'"'), (*total, b'\n')] {
                    if window.contains(&position) {
                        buf[(position - *at) as usize] = byte;
                    }
                }
                *at += len as u64;
                (len, *at == *total + 1)
            }
        };
        if done {
            state.stdout.pop_front();
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
