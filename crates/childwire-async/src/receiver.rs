//! The receiving half of a transport: [`Receiver`] and its `Stream`. The
//! caller's task reads and decodes when nothing is queued.

use std::collections::VecDeque;
use std::fmt;
use std::future::poll_fn;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use childwire_core::{Framing, Lines, Message, Receive, Received, Session};
use futures_core::Stream;

use crate::runtime::Runtime;
use crate::shared::{Holds, Shared};
use crate::tap::Hook;

mod startup;

/// The receiving half of a [`Transport`](crate::Transport): messages and
/// notices in the order the peer wrote them, then (for a child) the exit
/// report, then `None`. A `futures::Stream` too.
///
/// ```no_run
/// # async fn demo<R: childwire_async::Runtime>(t: childwire_async::Transport<R>) {
/// use childwire_async::Received;
///
/// let (_sender, mut receiver) = t.split();
/// let mut batch = Vec::new();
/// // Many messages per call: one lock for all that are ready.
/// while receiver.recv_many(&mut batch, 256).await > 0 {
///     for item in batch.drain(..) {
///         match item {
///             Received::Message(message) => println!("{}", String::from_utf8_lossy(&message)),
///             Received::Oversized(notice) => eprintln!("dropped, id {:?}", notice.json_rpc_id()),
///             Received::Exited(report) => eprintln!("server {report}"),
///             other => eprintln!("{other:?}"),
///         }
///     }
/// }
/// # }
/// ```
pub struct Receiver<R: Runtime, F: Framing = Lines> {
    pub(crate) shared: Arc<Shared<F>>,
    pub(crate) rt: R,
    pub(crate) pid: Option<u32>,
    pub(crate) tap: Hook<R>,
    /// Messages taken out of the session with the last one handed out,
    /// under the same lock, handed out next without it (see `poll_item`).
    pub(crate) batch: VecDeque<Message>,
}

/// How much a receiver takes out of the session under one lock: messages
/// ready at once, up to this many...
const BATCH_MESSAGES: usize = 64;
/// ... and this many bytes (a large message is handed out alone).
const BATCH_BYTES: usize = 64 * 1024;

impl<R: Runtime, F: Framing> Receiver<R, F> {
    pub(crate) fn new(shared: Arc<Shared<F>>, rt: R, pid: Option<u32>) -> Self {
        shared.lock().session.handle_handle_opened();
        Self {
            shared,
            rt,
            pid,
            tap: Hook::none(),
            batch: VecDeque::new(),
        }
    }

    /// The next item: a message or a notice, in the order the peer wrote
    /// them, or last the exit report; `None` after the report (for a
    /// channel: after the peer's EOF).
    ///
    /// Cancel-safe: dropping the future (e.g. when another branch of a
    /// `select!` wins) loses no message and no partial line.
    pub async fn recv(&mut self) -> Option<Received> {
        poll_fn(|cx| self.poll_recv(cx)).await
    }

    /// The next message deserialized as `T`; notices and the end come as
    /// errors, then `None`. Cancel-safe like [`recv`](Self::recv).
    #[cfg(feature = "serde")]
    #[cfg_attr(docsrs, doc(cfg(feature = "serde")))]
    pub async fn recv_json<T: serde::de::DeserializeOwned>(
        &mut self,
    ) -> Option<Result<T, crate::RecvJsonError>> {
        use crate::RecvJsonError;
        Some(match self.recv().await? {
            Received::Message(message) => serde_json::from_slice(&message)
                .map_err(|error| RecvJsonError::Parse { message, error }),
            Received::Oversized(notice) => Err(RecvJsonError::Oversized(notice)),
            Received::Malformed(notice) => Err(RecvJsonError::Malformed(notice)),
            Received::Pollution(notice) => Err(RecvJsonError::Pollution(notice)),
            Received::Exited(report) => Err(RecvJsonError::Exited(report)),
            // A variant added later: not a message of type T.
            _ => return None,
        })
    }

    /// Waits for the next item, then moves it and every other item
    /// available now into `into`, up to `limit` in all: one lock for many
    /// messages. Returns how many were moved; 0 only at the end of the
    /// stream (or for a `limit` of 0).
    pub async fn recv_many(&mut self, into: &mut Vec<Received>, limit: usize) -> usize {
        if limit == 0 {
            return 0;
        }
        let Some(first) = self.recv().await else {
            return 0;
        };
        into.push(first);
        let tapped_from = into.len();
        // What the batch holds comes first, without the lock.
        let held = self.batch.len().min(limit - 1);
        if held > 0 {
            let bytes: usize = self.batch.iter().take(held).map(|m| m.len()).sum();
            self.shared.holds.handed_out_many(held as u64, bytes as u64);
            into.extend(self.batch.drain(..held).map(Received::Message));
        }
        if into.len() - tapped_from + 1 < limit {
            let mut state = self.shared.lock();
            while into.len() - tapped_from + 1 < limit {
                let Some(item) = state.session.poll_received() else {
                    break;
                };
                into.push(item);
            }
            self.shared.unlock(state);
        }
        self.tap.received_all(&into[tapped_from..]);
        into.len() - tapped_from + 1
    }

    /// Polls for the next item: messages and notices in the order the peer
    /// wrote them, then (for a child) the exit report, then `None`.
    ///
    /// Reads and decodes in the calling task when nothing is queued. Frames
    /// belong to the transport until returned, so a dropped `recv` future
    /// loses nothing: receiving is cancel-safe.
    pub fn poll_recv(&mut self, cx: &mut Context<'_>) -> Poll<Option<Received>> {
        if self.tap.is_set() {
            return self.poll_tapped(cx);
        }
        self.poll_item(cx)
    }

    /// [`poll_recv`](Self::poll_recv) with a tap, which sees the item.
    #[cold]
    #[inline(never)]
    fn poll_tapped(&mut self, cx: &mut Context<'_>) -> Poll<Option<Received>> {
        let item = self.poll_item(cx);
        self.tap.received(item)
    }

    /// [`poll_recv`](Self::poll_recv), untapped: the session's next step
    /// for the receiver, taken until it gives an item, the end, or a wait.
    #[inline(always)]
    fn poll_item(&mut self, cx: &mut Context<'_>) -> Poll<Option<Received>> {
        if let Some(message) = self.batch.pop_front() {
            self.shared.holds.handed_out(message.len() as u64);
            return Poll::Ready(Some(Received::Message(message)));
        }
        let mut state = self.shared.lock();
        loop {
            match state.session.poll_receive() {
                Receive::Item(item) => {
                    take_batch(&mut self.batch, &self.shared.holds, &mut state.session);
                    self.shared.unlock(state);
                    return Poll::Ready(Some(item));
                }
                Receive::End => {
                    self.shared.unlock(state);
                    return Poll::Ready(None);
                }
                Receive::Read => {
                    let blocked;
                    (state, blocked) = self.shared.read_once(state, cx.waker(), || self.rt.now());
                    if blocked {
                        self.shared.unlock(state);
                        return Poll::Pending;
                    }
                }
                Receive::Wait => {
                    self.shared.wait_to_receive(cx.waker());
                    self.shared.unlock(state);
                    return Poll::Pending;
                }
            }
        }
    }

    /// The child's process ID.
    pub fn id(&self) -> Option<u32> {
        self.pid
    }
}

impl<R: Runtime, F: Framing> Drop for Receiver<R, F> {
    fn drop(&mut self) {
        self.shared.close_handle(self.rt.now());
    }
}

impl<R: Runtime, F: Framing> fmt::Debug for Receiver<R, F> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Receiver")
            .field("pid", &self.pid)
            .finish_non_exhaustive()
    }
}

impl<R: Runtime, F: Framing> Stream for Receiver<R, F> {
    type Item = Received;

    fn poll_next(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Received>> {
        self.get_mut().poll_recv(cx)
    }
}

/// Takes the messages ready at once after the one handed out, under the
/// same lock, to hand out next without it: the writing task and this one
/// then meet on the lock once per batch, not once per message, and the
/// exit report still counts what the batch holds as not yet received
/// (`Holds`). Only messages: a notice or the report waits in the session,
/// where the end and a request's answer are looked for.
///
/// What it pays for, in the users' shape (`cargo bench -p childwire-bench
/// --bench users_shape`: a writer task's `send().await` and `recv()` on two
/// Tokio workers, `cat` echoing 100,000 lines; five interleaved runs,
/// 2026-11-28), throughput over `LinesCodec`'s, medians without and with
/// it: 64 B 0.39x -> 0.59x (reader in a task) and 0.45x -> 0.74x (in
/// `block_on`); 200 B 0.83x -> 1.14x and 0.98x -> 0.98x. Without it the
/// two tasks took turns on the lock per message, and most turns were a
/// sleep on the futex. In instructions per message, single-threaded:
/// `recv()` 815 -> 793, a round trip on an in-memory pipe +1.7%.
#[inline(always)]
fn take_batch<F: Framing>(batch: &mut VecDeque<Message>, holds: &Holds, session: &mut Session<F>) {
    let (messages, bytes) = session.take_messages(batch, BATCH_MESSAGES, BATCH_BYTES);
    if messages > 0 {
        holds.add(messages as u64, bytes as u64);
    }
}
