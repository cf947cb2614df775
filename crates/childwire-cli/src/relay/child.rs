//! relay's side of the child: one process, or with `--restart` a
//! [`Supervised`] one that keeps the host's session across a crash.
//!
//! Under supervision the host's `initialize` request and its
//! `notifications/initialized` are remembered as they pass; a new process
//! gets them again before traffic resumes, and the answer to the replayed
//! `initialize` is swallowed, so the host sees one handshake, not two. The
//! host's requests the dead process never answered get JSON-RPC errors
//! that say why (the supervisor's request tracking), and a request the
//! host sends while the child is down waits for the new process.

use std::cell::Cell;
use std::future::Future;
use std::pin::Pin;
use std::rc::Rc;
use std::sync::{Arc, Mutex, PoisonError};
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use bytes::{BufMut, Bytes, BytesMut};
use childwire::{
    Command, Config, ExitReport, Received, Receiver, SendError, Sender, ShutdownError, SpawnError,
    Supervised, SupervisedEvent, SupervisedSender, Supervision, Transport,
};
use childwire_core::jsonrpc::IdScanner;
use serde_json::Value;

use super::verbatim::{Verbatim, send_line, send_pieces};
use crate::rt::{ExampleRuntime, timeout_at};

/// How long a new process may take to answer the replayed `initialize`.
const REPLAY_TIMEOUT: Duration = Duration::from_secs(60);

/// Spawns the child, under supervision when `restart` is set; what it
/// says on stderr starts with `name`, the program's.
pub(super) fn spawn<R: ExampleRuntime>(
    command: &Command,
    config: Config,
    restart: bool,
    name: &'static str,
) -> Result<(ToChild<R>, FromChild<R>), SpawnError> {
    if !restart {
        let (to, from) = Transport::<R, Verbatim>::spawn_with(Verbatim, command, config)?.split();
        let pid = Rc::new(Cell::new(from.id()));
        return Ok((ToChild::Plain(to), FromChild::plain(from, pid, name)));
    }
    let replay: Arc<Mutex<Replay>> = Arc::default();
    let remembered = Arc::clone(&replay);
    let mut supervision = Supervision::default();
    supervision.track_requests = true;
    let supervised = Supervised::<R, Verbatim>::spawn_with(
        Verbatim,
        command,
        config,
        supervision,
        move |transport| {
            let replay = remembered
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .clone();
            Box::pin(async move { replay.replay::<R>(transport, name).await })
        },
    )?;
    let to = ToChild::Supervised {
        sender: supervised.sender(),
        replay,
    };
    let pid = Rc::new(Cell::new(supervised.id()));
    Ok((to, FromChild::supervised(supervised, pid, name)))
}

/// The host's handshake, as it went to the child, newline included.
#[derive(Debug, Clone, Default)]
pub(super) struct Replay {
    initialize: Option<Bytes>,
    initialized: Option<Bytes>,
}

impl Replay {
    /// Remembers `line` if it is the host's first `initialize` request or
    /// `notifications/initialized`. Once both are seen, lines are not read.
    fn remember(&mut self, line: &Bytes) {
        if self.initialize.is_some() && self.initialized.is_some() {
            return;
        }
        // A handshake message is small: a long line is something else, and
        // is not parsed.
        if line.len() > 64 * 1024 {
            return;
        }
        let Ok(message) = serde_json::from_slice::<Value>(line) else {
            return;
        };
        let slot = match (
            message.get("method").and_then(Value::as_str),
            message.get("id"),
        ) {
            (Some("initialize"), Some(_)) => &mut self.initialize,
            (Some("notifications/initialized"), None) => &mut self.initialized,
            _ => return,
        };
        if slot.is_none() {
            *slot = Some(with_newline(line));
        }
    }

    /// Sends the host's handshake to a new process, swallowing the answer
    /// to `initialize`; nothing to do if the host had not sent it.
    async fn replay<R: ExampleRuntime>(
        self,
        transport: &mut Transport<R, Verbatim>,
        name: &str,
    ) -> Result<(), childwire::ReinitError> {
        let pid = crate::mcp_client::session::pid_text(transport.id());
        let Some(initialize) = self.initialize else {
            note!("{name}: the child runs again (pid {pid}); the host had not initialized it");
            return Ok(());
        };
        let id = {
            let mut scanner = IdScanner::new();
            scanner.feed(&initialize);
            scanner.id()
        };
        transport.send(initialize).await?;
        let deadline = Instant::now() + REPLAY_TIMEOUT;
        loop {
            let item = timeout_at::<R, _>(deadline, transport.recv())
                .await
                .ok_or("no answer to the replayed initialize in time")?;
            match item {
                Some(Received::Message(message)) => {
                    let mut scanner = IdScanner::new();
                    scanner.feed(message.bytes());
                    if !scanner.has_method() && scanner.id() == id {
                        let answer: Value =
                            serde_json::from_slice(message.bytes()).unwrap_or(Value::Null);
                        if let Some(error) = answer.get("error") {
                            return Err(
                                format!("the replayed initialize was refused: {error}").into()
                            );
                        }
                        break;
                    }
                    note!(
                        "{name}: not relayed, sent by the child during the replayed handshake: {}",
                        String::from_utf8_lossy(message.bytes())
                    );
                }
                Some(Received::Exited(report)) => {
                    return Err(format!("the child {report} during the replayed initialize").into());
                }
                None => return Err("the child ended during the replayed initialize".into()),
                Some(_) => {}
            }
        }
        if let Some(initialized) = self.initialized {
            transport.send(initialized).await?;
        }
        note!("{name}: the child runs again (pid {pid}); the host's initialize was replayed to it");
        Ok(())
    }
}

fn with_newline(line: &[u8]) -> Bytes {
    let mut framed = BytesMut::with_capacity(line.len() + 1);
    framed.extend_from_slice(line);
    framed.put_u8(b'\n');
    framed.freeze()
}

/// Where the host's lines go.
pub(super) enum ToChild<R: ExampleRuntime> {
    /// One process: a long line goes in pieces.
    Plain(Sender<R, Verbatim>),
    /// A supervised one: each line goes whole, so that a restart never
    /// falls between the pieces of one, and its request is tracked.
    Supervised {
        sender: SupervisedSender<R, Verbatim>,
        replay: Arc<Mutex<Replay>>,
    },
}

impl<R: ExampleRuntime> ToChild<R> {
    /// Sends one line and its newline.
    pub(super) async fn send_line(&self, line: Bytes) -> Result<(), SendError<Bytes>> {
        match self {
            Self::Plain(sender) => send_line(sender, line).await,
            Self::Supervised { sender, replay } => {
                replay
                    .lock()
                    .unwrap_or_else(PoisonError::into_inner)
                    .remember(&line);
                sender.send(with_newline(&line)).await
            }
        }
    }

    /// Sends part of a long line, as it is (see `host.rs`): one process
    /// only. The host's side hands a line on in pieces only then, never
    /// with `--restart` (a supervised child gets each line whole, so that
    /// a restart never falls inside one); a piece is not sent otherwise.
    pub(super) async fn send_piece(&self, piece: Bytes) -> Result<(), SendError<Bytes>> {
        match self {
            Self::Plain(sender) => send_pieces(sender, piece).await,
            Self::Supervised { .. } => Ok(()),
        }
    }

    /// Ends the line whose pieces were sent: its newline.
    pub(super) async fn end_line(&self) -> Result<(), SendError<Bytes>> {
        match self {
            Self::Plain(sender) => sender.send(Bytes::from_static(b"\n")).await,
            Self::Supervised { .. } => Ok(()),
        }
    }

    /// Waits until everything sent was written (one process only: a
    /// supervised child's shutdown writes what is queued first).
    pub(super) async fn flush(&self) -> Result<(), SendError<Bytes>> {
        match self {
            Self::Plain(sender) => sender.flush().await,
            Self::Supervised { .. } => Ok(()),
        }
    }

    /// Shuts the child down the MCP way; under supervision, it is not
    /// restarted after that.
    pub(super) async fn shutdown(&self) -> Result<ExitReport, ShutdownError> {
        match self {
            Self::Plain(sender) => sender.shutdown().await,
            Self::Supervised { sender, .. } => sender.shutdown().await,
        }
    }
}

/// What comes from the child's side.
pub(super) enum ChildEvent {
    /// A message or a notice.
    Item(Received),
    /// An error response for a host's request the child ended before
    /// answering.
    Answer(Bytes),
    /// A process ended; `last` when no other follows.
    Ended { report: ExitReport, last: bool },
}

/// A supervised child's next event, with the supervisor handed back.
type Next<R> =
    Pin<Box<dyn Future<Output = (Box<Supervised<R, Verbatim>>, Option<SupervisedEvent>)>>>;

/// The receiving side of the child.
pub(super) struct FromChild<R: ExampleRuntime> {
    inner: Inner<R>,
    /// The running process's id, for the second signal's SIGKILL; `None`
    /// while a supervised child is down.
    pub(super) pid: Rc<Cell<Option<u32>>>,
    /// The program's name, which what it says on stderr starts with.
    name: &'static str,
}

enum Inner<R: ExampleRuntime> {
    Plain(Receiver<R, Verbatim>),
    Supervised {
        state: State<R>,
        /// A process that ended unexpectedly, told once it is known
        /// whether another follows.
        held: Option<Box<ExitReport>>,
        /// The last process that ended and was told as followed by
        /// another: the end, if the supervision ends before one starts
        /// (a signal during the pause before a restart).
        told: Option<Box<ExitReport>>,
    },
}

enum State<R: ExampleRuntime> {
    /// Boxed, as the future that borrows it is.
    Idle(Box<Supervised<R, Verbatim>>),
    /// The supervisor's `recv`, kept across polls: dropping it during a
    /// re-initialization would abandon the new process.
    Receiving(Next<R>),
    Over,
}

impl<R: ExampleRuntime> FromChild<R> {
    fn plain(
        receiver: Receiver<R, Verbatim>,
        pid: Rc<Cell<Option<u32>>>,
        name: &'static str,
    ) -> Self {
        Self {
            inner: Inner::Plain(receiver),
            pid,
            name,
        }
    }

    fn supervised(
        supervised: Supervised<R, Verbatim>,
        pid: Rc<Cell<Option<u32>>>,
        name: &'static str,
    ) -> Self {
        Self {
            inner: Inner::Supervised {
                state: State::Idle(Box::new(supervised)),
                held: None,
                told: None,
            },
            pid,
            name,
        }
    }

    /// The next event; `None` once nothing more will come.
    pub(super) fn poll_next(&mut self, cx: &mut Context<'_>) -> Poll<Option<ChildEvent>> {
        let name = self.name;
        let (state, held, told) = match &mut self.inner {
            Inner::Plain(receiver) => {
                return receiver.poll_recv(cx).map(|item| {
                    item.map(|item| match item {
                        Received::Exited(report) => ChildEvent::Ended {
                            report: *report,
                            last: true,
                        },
                        item => ChildEvent::Item(item),
                    })
                });
            }
            Inner::Supervised { state, held, told } => (state, held, told),
        };
        loop {
            let mut next = match std::mem::replace(state, State::Over) {
                State::Idle(mut supervised) => Box::pin(async move {
                    let event = supervised.recv().await;
                    (supervised, event)
                }) as Next<R>,
                State::Receiving(next) => next,
                State::Over => {
                    let end = held.take().or_else(|| told.take());
                    return Poll::Ready(end.map(|report| ChildEvent::Ended {
                        report: *report,
                        last: true,
                    }));
                }
            };
            let Poll::Ready((supervised, event)) = next.as_mut().poll(cx) else {
                *state = State::Receiving(next);
                // Waiting: for a restart if a process just ended (a
                // verdict would have been queued with its report).
                return match held.take() {
                    Some(report) => {
                        *told = Some(report.clone());
                        Poll::Ready(Some(ChildEvent::Ended {
                            report: *report,
                            last: false,
                        }))
                    }
                    None => Poll::Pending,
                };
            };
            self.pid.set(supervised.id());
            if supervised.id().is_some() {
                // A process runs again: the end told before is not the last.
                *told = None;
            }
            *state = State::Idle(supervised);
            let Some(event) = event else {
                *state = State::Over;
                continue;
            };
            match event {
                SupervisedEvent::Received(Received::Exited(report)) if report.unexpected() => {
                    *held = Some(report);
                }
                SupervisedEvent::Received(Received::Exited(report)) => {
                    return Poll::Ready(Some(ChildEvent::Ended {
                        report: *report,
                        last: true,
                    }));
                }
                SupervisedEvent::Received(item) => {
                    return Poll::Ready(Some(ChildEvent::Item(item)));
                }
                SupervisedEvent::Unanswered(request) => {
                    note!(
                        "{name}: the host's request {} was never answered: it gets an error",
                        String::from_utf8_lossy(&request.id)
                    );
                    return Poll::Ready(Some(ChildEvent::Answer(request.response)));
                }
                // The first generation, initialized (nothing to replay yet).
                SupervisedEvent::Started { .. } => {}
                SupervisedEvent::Restarted { generation } => {
                    note!("{name}: restarted the child (generation {generation}); traffic resumes");
                }
                SupervisedEvent::ReinitFailed { generation, error } => {
                    note!(
                        "{name}: generation {generation} of the child could not be re-initialized: {error}"
                    );
                }
                SupervisedEvent::SpawnFailed(err) => {
                    note!("{name}: restarting the child failed: {err}");
                }
                SupervisedEvent::GaveUp(verdict) => note!("{name}: {verdict}"),
                other => note!("{name}: {other:?}"),
            }
        }
    }
}
