//! The sending half of a channel: messages in, bytes for the peer out,
//! through one bounded queue and one writing pipe that one writer at a time
//! holds; with backpressure, the write timeout, the graceful close and the
//! reason sending stopped.

use std::fmt;
use std::time::{Duration, Instant};

use bytes::Bytes;

use crate::encoder::Encoder;
use crate::framing::EncodeErrorKind;
use crate::framing::Framing;
use crate::report::ExitReport;

/// A pipe's worth (what a Linux pipe holds): the bytes a sender running
/// ahead of a full pipe queues between two attempts to write.
pub const WRITE_BATCH: usize = 64 * 1024;

/// What the writer holding the writing pipe does with it, from
/// [`Channel::poll_write`](crate::Channel::poll_write).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum WriteOp {
    /// Write (a prefix of) these bytes.
    Write(Bytes),
    /// Flush what a buffering writer holds.
    Flush,
    /// Flush and shut the write side down: the graceful close.
    Shutdown,
}

/// What came of a [`WriteOp`], for
/// [`Channel::handle_write`](crate::Channel::handle_write).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WriteResult {
    /// The pipe took this many bytes of a [`WriteOp::Write`].
    Written(usize),
    /// The [`WriteOp::Flush`] or [`WriteOp::Shutdown`] completed.
    Done,
    /// Nothing can be done now; the pipe wakes whoever polled it.
    WouldBlock,
    /// The pipe failed: the peer stopped reading.
    Failed,
}

/// What to do with the writing pipe next, from
/// [`Channel::poll_write`](crate::Channel::poll_write).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum WriteStep {
    /// Take the pipe (one writer at a time: the caller holds it now), do
    /// this outside any lock, then report with
    /// [`handle_write`](crate::Channel::handle_write).
    Io(WriteOp),
    /// Drop the pipe now, with no call on it: the peer reads EOF.
    Drop,
    /// Nothing more for this round: what it was to write is written, or
    /// nothing can be (the pipe is closed).
    Done,
    /// Another writer holds the pipe: wait for the senders' wake-up, which
    /// comes when it is handed back.
    Busy,
    /// Stop here and come back soon (wake yourself): what senders queued
    /// during this round is left for the next one, so that a writer on one
    /// thread does not chase a sender on another with a write per message.
    Yield,
}

/// How far a write round goes: see [`Channel::drain_round`](crate::Channel::drain_round) and [`Channel::queued_round`](crate::Channel::queued_round).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct WriteRound {
    /// Stop once the stream is written up to here; `None`: until the queue
    /// is empty, what is queued meanwhile included.
    upto: Option<u64>,
    /// A sender's round, which does not wait: if the pipe is held, or full,
    /// what it queued is left to the background task.
    hand_off: bool,
    /// The background task's round: on a full pipe it waits for the pipe
    /// itself. Any other writer that leaves bytes behind a full pipe may
    /// not come back for them (a sender that got its room, a flush that was
    /// dropped), so the background task is woken to wait instead.
    background: bool,
}

/// How the writing pipe is closed, once decided.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Close {
    /// Not decided.
    No,
    /// Once the queue is written: flush, shut down, drop.
    Graceful,
    /// Now, with no call on the pipe (a stalled or broken peer, or the
    /// child's stdin closed by the lifecycle).
    Drop,
}

/// Where the writing pipe is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Pipe {
    /// With its owner, free.
    Here,
    /// A writer holds it for one call: a shutdown or another, in the
    /// background task's round or another's.
    Out { shutdown: bool, background: bool },
    /// Dropped: the peer reads EOF.
    Gone,
}

/// The sending half: the queue, the writing pipe's state and the rule of
/// who writes when.
///
/// One writer holds the pipe at a time ([`WriteStep::Io`]); whoever finds
/// it held waits for the senders' wake-up. The write timeout counts from
/// when bytes were handed out and nothing of them was written since: a peer
/// that reads nothing for that long is stalled, sending fails with
/// [`Closed::Stalled`] and the pipe is dropped.
#[derive(Debug)]
pub(crate) struct Outbound<F: Framing> {
    encoder: Encoder<F>,
    closed: Option<Closed>,
    write_timeout: Option<Duration>,
    /// Since when handed-out bytes have waited for the peer to read any.
    waiting_since: Option<Instant>,
    pipe: Pipe,
    close: Close,
    /// Bytes went into the pipe since its last flush.
    unflushed: bool,
    /// Accepted bytes from this offset on were dropped, never written: a
    /// flush that waits for them fails.
    lost_from: Option<u64>,
    /// The background task is to write what senders left.
    flush_armed: bool,
    /// A writer found the pipe held and waits for it.
    contended: bool,
    /// Queued bytes at which the sender that queues a message writes next.
    batch_at: usize,
    /// The peer's turn (see [`Channel::handle_read`](crate::Channel)) at the
    /// last write attempt; `None` before any.
    written_in_turn: Option<u64>,
    /// A write failed since the owner last asked (the peer closed its end).
    write_failed: bool,
    /// Sending was aborted while a writer held the pipe: what it was writing
    /// may still go; the queue is dropped when the pipe comes back.
    abort_pending: bool,
    /// See [`take_wake_background`](Self::take_wake_background).
    wake_background: bool,
}

/// What [`Outbound::send`] decided for the sender.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Queued {
    /// Queued; the background task writes it (the flush was armed now:
    /// wake it).
    ArmedFlush,
    /// Queued, behind bytes some writer is at already.
    Left,
    /// Queued; the sender writes it now, from its own task.
    WriteNow,
}

impl<F: Framing> Outbound<F> {
    /// A sending half framing with `framing`, accepting messages of up to
    /// `max_message_size` bytes, refusing new ones while its queue costs
    /// `high_water` bytes or more, and giving up on a peer that reads nothing
    /// for `write_timeout`.
    pub(crate) fn new(
        framing: F,
        max_message_size: usize,
        high_water: usize,
        write_timeout: Option<Duration>,
    ) -> Self {
        Self {
            encoder: Encoder::with_framing(framing, max_message_size, high_water),
            closed: None,
            write_timeout,
            waiting_since: None,
            pipe: Pipe::Here,
            close: Close::No,
            unflushed: false,
            lost_from: None,
            flush_armed: false,
            contended: false,
            batch_at: WRITE_BATCH,
            written_in_turn: None,
            write_failed: false,
            abort_pending: false,
            wake_background: false,
        }
    }

    // ---- sending ----

    /// Queues `payload` and says who writes it, or hands it back with the
    /// reason. `anyway`: above the high-water mark too (the `Sink`, whose
    /// `poll_ready` checked the room). `turn` is the peer's turn now.
    ///
    /// Who writes is decided from what is queued and what was read, never
    /// from time:
    ///
    /// - the first message since the peer was last read from (its turn
    ///   came: an answer, a request of its own), alone in the queue (the
    ///   pipe took everything before it): its sender writes it now, with no
    ///   wake-up of another task, so a request after an answer reaches the
    ///   peer at once;
    /// - one sent right behind a message written in the same turn, or behind
    ///   bytes left unwritten (the pipe was full, or a write is in progress
    ///   and takes it with what was queued during it): left to the
    ///   background flush, with whatever follows it, so a burst goes out in
    ///   batches;
    /// - but once a pipe's worth is queued since the last attempt
    ///   ([`WRITE_BATCH`]), written now: a sender running ahead of the
    ///   flush, or of a full pipe, tries it once per batch.
    ///
    /// A receiver about to wait for the peer does not write what was left
    /// to the flush. It did once (so that a burst and its answers crossed
    /// no thread), but in a stream the receiver waits after every read, so
    /// the pipe got a write at the receiver's pace, a few KiB each, the
    /// child echoed in as many small writes, and the receiver woke for each:
    /// in the users' shape (`cargo bench -p childwire-bench --bench
    /// users_shape`, a writer task's `send().await`, `recv()` in another,
    /// `cat` echoing 100,000 lines of 64 B on two Tokio workers) 2,500-4,700
    /// writes of 0.3-4 KiB and as many reads, 140-157 MiB/s; without it
    /// 160-470 writes, mostly of 16 KiB or more, about 100 reads of 64 KiB,
    /// 204-281 MiB/s (2026-11-28). The instruction rows moved by under 1%.
    #[inline(always)]
    pub(crate) fn send<B: AsRef<[u8]>>(
        &mut self,
        payload: B,
        anyway: bool,
        turn: u64,
    ) -> Result<Queued, SendError<B>> {
        if let Some(closed) = self.closed {
            return Err(SendError::new(SendErrorKind::Closed(closed), payload));
        }
        let encoded = if anyway {
            self.encoder.encode_anyway(payload)
        } else {
            self.encoder.encode(payload)
        };
        if let Err(err) = encoded {
            let (kind, payload) = err.into_parts();
            return Err(SendError::new(kind.into(), payload));
        }
        let new_turn = self.written_in_turn != Some(turn);
        if (new_turn && self.encoder.queued_messages() == 1)
            || self.encoder.queued() >= self.batch_at
        {
            self.attempted(turn);
            return Ok(Queued::WriteNow);
        }
        Ok(if std::mem::replace(&mut self.flush_armed, true) {
            Queued::Left
        } else {
            Queued::ArmedFlush
        })
    }

    /// A writer is about to try the pipe: the next batch counts from what
    /// is queued now, and this turn has had its write.
    fn attempted(&mut self, turn: u64) {
        self.batch_at = self.encoder.queued() + WRITE_BATCH;
        self.written_in_turn = Some(turn);
    }

    /// Queues a message of the session's own (a shutdown's goodbye) after
    /// what is queued, though callers' messages are refused, and leaves it
    /// to the background task. Returns `false`, queuing nothing, once the
    /// pipe is to be closed or dropped, or if the framing cannot carry it.
    pub(crate) fn queue_own(&mut self, message: &[u8]) -> bool {
        if self.close != Close::No || self.pipe == Pipe::Gone {
            return false;
        }
        let queued = self.encoder.encode_anyway(message).is_ok();
        if queued {
            self.flush_armed = true;
        }
        queued
    }

    /// Refuses new messages with `reason` from now on; what is queued still
    /// goes out. The first reason given is kept.
    pub(crate) fn refuse(&mut self, reason: Closed) {
        self.closed.get_or_insert(reason);
    }

    /// Refuses new messages and closes the pipe once what is queued was
    /// written: flush, shut down, drop. Changes nothing once a close is
    /// decided.
    pub(crate) fn close(&mut self) {
        self.refuse(Closed::Closing);
        if self.close == Close::No {
            self.close = Close::Graceful;
        }
    }

    /// Drops what is queued and the pipe, now (or when its writer hands it
    /// back), refusing new messages with `reason` (unless one was given
    /// before).
    pub(crate) fn abort(&mut self, reason: Closed) {
        self.refuse(reason);
        self.waiting_since = None;
        self.flush_armed = false;
        self.close = Close::Drop;
        if matches!(self.pipe, Pipe::Out { .. }) {
            // The bytes out with the writer may still reach the peer: what
            // is lost is known when the pipe comes back.
            self.abort_pending = true;
        } else {
            self.drop_queue();
        }
    }

    /// Drops what is queued, never to be written.
    fn drop_queue(&mut self) {
        if self.encoder.queued() > 0 {
            self.lost_from.get_or_insert(self.encoder.written_to());
        }
        self.encoder.clear();
    }

    /// Time passed: the write timeout may have run out.
    pub(crate) fn handle_timeout(&mut self, now: Instant) {
        if self.poll_timeout().is_some_and(|deadline| now >= deadline) {
            let since = self.waiting_since.unwrap_or(now);
            self.abort(Closed::Stalled {
                after: now.saturating_duration_since(since),
            });
        }
    }

    // ---- the writing pipe ----

    /// A round that writes until nothing is queued.
    pub(crate) fn drain_round(&self) -> WriteRound {
        WriteRound {
            upto: None,
            hand_off: false,
            background: false,
        }
    }

    /// The round of a sender told to write now, which does not wait.
    pub(crate) fn sender_round(&self) -> WriteRound {
        WriteRound {
            upto: None,
            hand_off: true,
            background: false,
        }
    }

    /// A round that writes what is queued now, and stops there.
    pub(crate) fn queued_round(&self) -> WriteRound {
        WriteRound {
            upto: Some(self.encoder.queue_end()),
            hand_off: false,
            background: true,
        }
    }

    /// What the writer of `round` does next. `turn` is the peer's turn.
    pub(crate) fn poll_write(&mut self, round: &WriteRound, now: Instant, turn: u64) -> WriteStep {
        match self.pipe {
            Pipe::Here => {}
            Pipe::Out { .. } => {
                self.contended = true;
                if round.hand_off {
                    // Its bytes go with the holder's next write, or the
                    // background task's.
                    self.flush_armed = true;
                }
                return WriteStep::Busy;
            }
            Pipe::Gone => return WriteStep::Done,
        }
        let queued = self.encoder.queued();
        let op = match self.close {
            Close::Drop => {
                self.pipe = Pipe::Gone;
                self.unflushed = false;
                return WriteStep::Drop;
            }
            // Shutting down implies a flush: a writer that buffers (stdout
            // through a blocking thread, a TLS stream) passes everything on
            // before the peer's EOF.
            Close::Graceful if queued == 0 => WriteOp::Shutdown,
            _ if round
                .upto
                .is_some_and(|upto| self.encoder.written_to() >= upto)
                && queued > 0 =>
            {
                // What senders queued meanwhile is the background task's.
                self.flush_armed = true;
                return WriteStep::Yield;
            }
            _ => match self.encoder.poll_transmit() {
                Some(bytes) => {
                    if self.waiting_since.is_none() {
                        self.waiting_since = Some(now);
                    }
                    // This turn has had its write.
                    self.written_in_turn = Some(turn);
                    WriteOp::Write(bytes)
                }
                None if self.unflushed => WriteOp::Flush,
                None => {
                    // Nothing left for the background flush either.
                    self.flush_armed = false;
                    return WriteStep::Done;
                }
            },
        };
        self.pipe = Pipe::Out {
            shutdown: op == WriteOp::Shutdown,
            background: round.background,
        };
        WriteStep::Io(op)
    }

    /// The outcome of the writer's [`WriteOp`]; the pipe is handed back.
    /// Returns whether anything moved (bytes taken, a flush done, the pipe
    /// closed or broken): the senders waiting are to be woken.
    pub(crate) fn handle_write(&mut self, result: WriteResult, now: Instant) -> bool {
        let (shutdown, background) = match self.pipe {
            Pipe::Out {
                shutdown,
                background,
            } => (shutdown, background),
            _ => (false, false),
        };
        if let Pipe::Out { .. } = self.pipe {
            self.pipe = Pipe::Here;
        }
        let woken = std::mem::take(&mut self.contended);
        let moved = self.handle_result(result, shutdown, now) || woken;
        if result == WriteResult::WouldBlock && !background && self.flush_armed {
            // Left behind a full pipe by a writer that may not come back:
            // the background task waits for the pipe.
            self.wake_background = true;
        }
        if std::mem::take(&mut self.abort_pending) {
            self.drop_queue();
            self.waiting_since = None;
        }
        moved
    }

    fn handle_result(&mut self, result: WriteResult, shutdown: bool, now: Instant) -> bool {
        match result {
            WriteResult::Written(n) if n > 0 => {
                self.encoder.handle_written(n);
                self.waiting_since = (self.encoder.queued() > 0).then_some(now);
                self.unflushed = true;
                // The pipe took bytes: a sender running ahead writes again
                // a pipe's worth from what is left.
                self.batch_at = self.encoder.queued() + WRITE_BATCH;
                true
            }
            WriteResult::Done => {
                self.unflushed = false;
                if shutdown {
                    // Shut down: the pipe is only to be dropped now.
                    self.close = Close::Drop;
                }
                true
            }
            WriteResult::WouldBlock => {
                if self.encoder.queued() > 0 && self.close != Close::Drop {
                    // Bytes are left: the background task writes them once
                    // the pipe takes more.
                    self.flush_armed = true;
                }
                false
            }
            WriteResult::Written(_) | WriteResult::Failed => {
                // A pipe that takes nothing, or fails: the peer closed it.
                self.write_failed = true;
                self.abort(Closed::PeerClosed);
                true
            }
        }
    }

    /// Whether a writer other than the background task left bytes behind a
    /// full pipe since the last call: the background task is to wait for
    /// the pipe.
    pub(crate) fn take_wake_background(&mut self) -> bool {
        std::mem::take(&mut self.wake_background)
    }

    /// Whether a write failed since the last call (the peer closed its end).
    pub(crate) fn take_write_failed(&mut self) -> bool {
        std::mem::take(&mut self.write_failed)
    }

    // ---- outputs ----

    /// When [`handle_timeout`](Self::handle_timeout) must be called: the
    /// write deadline, while bytes wait for the peer.
    pub(crate) fn poll_timeout(&self) -> Option<Instant> {
        let timeout = self.write_timeout?;
        if self.close == Close::Drop || self.encoder.queued() == 0 {
            return None;
        }
        self.waiting_since?.checked_add(timeout)
    }

    // ---- getters ----

    /// Whether the background task has writing to do: bytes senders left
    /// to it, or a close to carry out.
    pub(crate) fn wants_background_write(&self) -> bool {
        self.pipe == Pipe::Here
            && (self.flush_armed
                || self.close == Close::Drop
                || (self.close == Close::Graceful && self.encoder.queued() == 0))
    }

    /// Leaves what is queued to the background task.
    pub(crate) fn arm_flush(&mut self) {
        self.flush_armed = true;
    }

    /// Whether the pipe was dropped.
    pub(crate) fn is_pipe_gone(&self) -> bool {
        self.pipe == Pipe::Gone
    }

    /// Whether a write was left to the background task.
    pub(crate) fn flush_armed(&self) -> bool {
        self.flush_armed
    }

    /// Whether the pipe is closed (dropped) or about to be.
    pub(crate) fn is_pipe_closed(&self) -> bool {
        self.pipe == Pipe::Gone || self.close == Close::Drop
    }

    /// Whether everything accepted up to `target` (an offset of
    /// [`queue_end`](Self::queue_end)) reached the peer: `Some(Ok)` once
    /// written and flushed, `Some(Err)` with the reason if some of it was
    /// dropped, or can no longer be written; `None` while it may still go.
    pub(crate) fn flushed(&self, target: u64) -> Option<Result<(), Closed>> {
        let reason = || self.closed.unwrap_or(Closed::PeerClosed);
        if self.lost_from.is_some_and(|lost| lost < target) {
            return Some(Err(reason()));
        }
        let closing = self.pipe == Pipe::Gone || self.close == Close::Drop;
        if self.encoder.written_to() >= target && (!self.unflushed || closing) {
            // Written; unflushed bytes of a pipe dropped now are the OS's
            // to deliver (dropping closes it).
            return Some(Ok(()));
        }
        if matches!(self.pipe, Pipe::Out { .. }) {
            // A write in flight may still reach it.
            return None;
        }
        if closing {
            return Some(Err(reason()));
        }
        None
    }

    /// Why sending stopped, once it has.
    pub(crate) fn closed(&self) -> Option<Closed> {
        self.closed
    }

    /// Whether [`send`](Self::send) would not wait now: it would queue a
    /// valid message, or it fails for good.
    pub(crate) fn send_ready(&self) -> bool {
        self.closed.is_some() || self.encoder.has_room()
    }

    /// Whether nothing is waiting to be written.
    pub(crate) fn is_drained(&self) -> bool {
        self.encoder.queued() == 0
    }

    /// Bytes queued and not yet written.
    pub(crate) fn queued(&self) -> usize {
        self.encoder.queued()
    }

    /// Where the queue ends, as an offset in the stream of framed bytes.
    pub(crate) fn queue_end(&self) -> u64 {
        self.encoder.queue_end()
    }

    /// Messages written whole so far.
    pub(crate) fn messages_written(&self) -> u64 {
        self.encoder.messages_written()
    }

    /// Payload bytes of the messages written so far, framing excluded.
    pub(crate) fn bytes_written(&self) -> u64 {
        self.encoder.bytes_written()
    }
}

impl WriteRound {
    /// How far the round goes: `None` until the queue is empty.
    pub fn upto(&self) -> Option<u64> {
        self.upto
    }
}

/// Why sending is no longer possible.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum Closed {
    /// The channel was asked to close, or the transport to shut down.
    Closing,
    /// The peer stopped reading: a write failed (for a child: it closed its
    /// stdin, or exited).
    PeerClosed,
    /// The child exited.
    Exited,
    /// The peer read nothing for the write timeout; the write side was
    /// closed.
    Stalled {
        /// How long the peer read nothing.
        after: Duration,
    },
    /// The task that drove the transport is gone (its runtime shut down).
    DriverStopped,
}

impl fmt::Display for Closed {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Closed::Closing => f.write_str("the channel is closing"),
            Closed::PeerClosed => f.write_str("the peer stopped reading (its input is closed)"),
            Closed::Exited => f.write_str("the child has exited"),
            Closed::Stalled { after } => write!(
                f,
                "the peer read nothing for {:.1} s (write timeout); the channel was closed",
                after.as_secs_f64()
            ),
            Closed::DriverStopped => {
                f.write_str("the task driving the transport stopped (its runtime shut down)")
            }
        }
    }
}

/// Why a message was not sent.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum SendErrorKind {
    /// The framing cannot carry the payload, or it is over the size limit:
    /// it was refused and nothing of it was written.
    Invalid(EncodeErrorKind),
    /// The queue is full: wait and retry. Async transports do this
    /// themselves.
    Full,
    /// Sending is over.
    Closed(Closed),
}

impl From<EncodeErrorKind> for SendErrorKind {
    fn from(kind: EncodeErrorKind) -> Self {
        match kind {
            EncodeErrorKind::Full { .. } => SendErrorKind::Full,
            kind => SendErrorKind::Invalid(kind),
        }
    }
}

impl fmt::Display for SendErrorKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            SendErrorKind::Invalid(kind) => kind.fmt(f),
            SendErrorKind::Full => f.write_str("the outbound queue is full"),
            SendErrorKind::Closed(closed) => write!(f, "cannot send: {closed}"),
        }
    }
}

/// A message that was not sent, with the reason and the payload handed back.
/// Once the child's end is known, a send refused because of it carries the
/// exit report: the failed send says how the child ended.
pub struct SendError<B> {
    kind: SendErrorKind,
    payload: B,
    /// Boxed: a report is much larger than the error's other parts, and
    /// most errors carry none.
    exit: Option<Box<ExitReport>>,
}

impl<B> SendError<B> {
    /// An error of `kind` for `payload`.
    pub fn new(kind: SendErrorKind, payload: B) -> Self {
        Self {
            kind,
            payload,
            exit: None,
        }
    }

    /// The error with the child's exit report: sending failed because the
    /// child ended, and this is how.
    #[must_use]
    pub fn with_exit_report(mut self, report: ExitReport) -> Self {
        self.exit = Some(Box::new(report));
        self
    }

    /// Why the message was not sent.
    pub fn kind(&self) -> SendErrorKind {
        self.kind
    }

    /// How the child ended, when that is why the message was not sent and
    /// the end was known.
    pub fn exit_report(&self) -> Option<&ExitReport> {
        self.exit.as_deref()
    }

    /// The payload, unchanged.
    pub fn into_payload(self) -> B {
        self.payload
    }

    /// The payload converted, e.g. to `Bytes`.
    pub fn map_payload<C>(self, f: impl FnOnce(B) -> C) -> SendError<C> {
        SendError {
            kind: self.kind,
            payload: f(self.payload),
            exit: self.exit,
        }
    }
}

impl<B: AsRef<[u8]>> fmt::Debug for SendError<B> {
    // The payload may be megabytes: show its length, not its bytes.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SendError")
            .field("kind", &self.kind)
            .field("payload_len", &self.payload.as_ref().len())
            .field("exit", &self.exit)
            .finish()
    }
}

impl<B> fmt::Display for SendError<B> {
    /// `cannot send: the child has exited (it exited with code 3 after
    /// 4 ms; last stderr: ...)`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.kind.fmt(f)?;
        match &self.exit {
            Some(report) => write!(f, " (it {report})"),
            None => Ok(()),
        }
    }
}

impl<B: AsRef<[u8]>> std::error::Error for SendError<B> {}
