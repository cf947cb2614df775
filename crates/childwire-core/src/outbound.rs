//! The sending half of a channel: messages in, bytes for the peer out,
//! with backpressure, a write timeout and the reason sending stopped.

use std::fmt;
use std::time::{Duration, Instant};

use bytes::Bytes;

use crate::encoder::Encoder;
use crate::framing::EncodeErrorKind;
use crate::framing::Framing;
use crate::lines::Lines;
use crate::report::ExitReport;

/// Queues messages for the peer and says what to write, when to close the
/// write side, and why sending stopped.
///
/// # Inputs
///
/// - [`send`](Self::send): queue a message, all or nothing.
/// - [`handle_written`](Self::handle_written): bytes of
///   [`poll_transmit`](Self::poll_transmit) that were written.
/// - [`handle_write_failed`](Self::handle_write_failed): a write failed;
///   the peer stopped reading.
/// - [`refuse`](Self::refuse): no new messages from now on; what is queued
///   still goes out.
/// - [`close`](Self::close): refuse new messages, and close the write side
///   once the queue is written.
/// - [`abort`](Self::abort): drop what is queued and close now.
/// - [`handle_timeout`](Self::handle_timeout): time passed; early or
///   repeated calls are harmless.
///
/// # Outputs, in the order to drain them after every input
///
/// 1. [`poll_close`](Self::poll_close): `true` once, when the write side must
///    be closed now.
/// 2. [`poll_transmit`](Self::poll_transmit): bytes to write, or `None` (the
///    moment to flush).
/// 3. [`poll_timeout`](Self::poll_timeout): when to call
///    [`handle_timeout`](Self::handle_timeout).
///
/// The write timeout counts from when bytes were handed out and nothing of
/// them was written since: a peer that reads nothing for that long is
/// stalled, sending fails with [`Closed::Stalled`] and the write side is
/// closed.
#[derive(Debug)]
pub struct Outbound<F: Framing = Lines> {
    encoder: Encoder<F>,
    closed: Option<Closed>,
    write_timeout: Option<Duration>,
    /// Since when handed-out bytes have waited for the peer to read any.
    waiting_since: Option<Instant>,
    /// Close the write side once the queue is written.
    close_when_drained: bool,
    /// The write side must be closed now; handed out once.
    close_now: bool,
    close_handed_out: bool,
    /// Queued bytes at which the sender that queues a message writes next
    /// (see [`writes_now`](Self::writes_now)).
    batch_at: usize,
    /// How many times the peer was read from, as last told
    /// ([`handle_peer_turn`](Self::handle_peer_turn)).
    peer_turn: u64,
    /// `peer_turn` at the last write attempt; `None` before any.
    written_in_turn: Option<u64>,
}

/// A pipe's worth (what a Linux pipe holds): the bytes a sender running
/// ahead of a full pipe queues between two attempts to write.
pub const WRITE_BATCH: usize = 64 * 1024;

impl<F: Framing> Outbound<F> {
    /// A sending half framing with `framing`, accepting messages of up to
    /// `max_message_size` bytes, refusing new ones while its queue costs
    /// `high_water` bytes or more, and giving up on a peer that reads nothing
    /// for `write_timeout`.
    pub fn new(
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
            close_when_drained: false,
            close_now: false,
            batch_at: WRITE_BATCH,
            peer_turn: 0,
            written_in_turn: None,
            close_handed_out: false,
        }
    }

    // ---- inputs ----

    /// Queues `payload`, or hands it back with the reason. A message is
    /// queued whole or not at all.
    ///
    /// [`SendErrorKind::Full`] means "wait": the queue is at its high-water
    /// mark. Async transports wait for room and retry; their users never
    /// see it.
    pub fn send<B: AsRef<[u8]>>(&mut self, payload: B) -> Result<(), SendError<B>> {
        if let Some(closed) = self.closed {
            return Err(SendError::new(SendErrorKind::Closed(closed), payload));
        }
        self.encoder.encode(payload).map_err(|err| {
            let (kind, payload) = err.into_parts();
            SendError::new(kind.into(), payload)
        })
    }

    /// [`send`](Self::send) even above the high-water mark (see
    /// [`Encoder::encode_anyway`]); still refused when sending is over or the
    /// payload cannot be carried.
    pub fn send_anyway<B: AsRef<[u8]>>(&mut self, payload: B) -> Result<(), SendError<B>> {
        if let Some(closed) = self.closed {
            return Err(SendError::new(SendErrorKind::Closed(closed), payload));
        }
        self.encoder.encode_anyway(payload).map_err(|err| {
            let (kind, payload) = err.into_parts();
            SendError::new(kind.into(), payload)
        })
    }

    /// The first `n` bytes of [`poll_transmit`](Self::poll_transmit) were
    /// written.
    pub fn handle_written(&mut self, n: usize, now: Instant) {
        self.encoder.handle_written(n);
        if n > 0 {
            self.waiting_since = (self.encoder.queued() > 0).then_some(now);
        }
        self.check_drained();
    }

    /// A write failed: the peer closed its end. What is queued is dropped.
    pub fn handle_write_failed(&mut self) {
        self.abort(Closed::PeerClosed);
    }

    /// Refuses new messages with `reason` from now on; what is queued still
    /// goes out. The first reason given is kept.
    pub fn refuse(&mut self, reason: Closed) {
        self.closed.get_or_insert(reason);
    }

    /// Refuses new messages and closes the write side once what is queued
    /// was written: the graceful close.
    pub fn close(&mut self) {
        self.refuse(Closed::Closing);
        self.close_when_drained = true;
        self.check_drained();
    }

    /// Drops what is queued and closes the write side now, refusing new
    /// messages with `reason` (unless one was given before).
    pub fn abort(&mut self, reason: Closed) {
        self.refuse(reason);
        self.encoder.clear();
        self.waiting_since = None;
        self.close_now = true;
    }

    /// Time passed: the write timeout may have run out.
    pub fn handle_timeout(&mut self, now: Instant) {
        if self.poll_timeout().is_some_and(|deadline| now >= deadline) {
            let since = self.waiting_since.unwrap_or(now);
            self.abort(Closed::Stalled {
                after: now.saturating_duration_since(since),
            });
        }
    }

    // ---- outputs ----

    /// `true` once, when the write side must be closed now.
    #[must_use = "the write side must be closed when this says so"]
    pub fn poll_close(&mut self) -> bool {
        if self.close_now && !self.close_handed_out {
            self.close_handed_out = true;
            return true;
        }
        false
    }

    /// The bytes to write next, or `None` when nothing is queued (the moment
    /// to flush). A cheap handle: write it outside any lock, then report
    /// with [`handle_written`](Self::handle_written).
    #[must_use = "queued bytes only reach the peer if written"]
    pub fn poll_transmit(&mut self, now: Instant) -> Option<Bytes> {
        if self.close_now {
            return None;
        }
        let transmit = self.encoder.poll_transmit();
        if transmit.is_some() && self.waiting_since.is_none() {
            self.waiting_since = Some(now);
        }
        transmit
    }

    /// When [`handle_timeout`](Self::handle_timeout) must be called: the
    /// write deadline, while bytes wait for the peer.
    #[must_use]
    pub fn poll_timeout(&self) -> Option<Instant> {
        let timeout = self.write_timeout?;
        if self.close_now || self.encoder.queued() == 0 {
            return None;
        }
        self.waiting_since?.checked_add(timeout)
    }

    // ---- getters ----

    /// Why sending stopped, once it has.
    pub fn closed(&self) -> Option<Closed> {
        self.closed
    }

    /// Whether [`send`](Self::send) would not wait now: it would queue a
    /// valid message, or it fails for good.
    pub fn send_ready(&self) -> bool {
        self.closed.is_some() || self.encoder.has_room()
    }

    /// Whether nothing is waiting to be written.
    pub fn is_drained(&self) -> bool {
        self.encoder.queued() == 0
    }

    /// Whether the write side was told to close.
    pub fn is_write_closed(&self) -> bool {
        self.close_handed_out
    }

    /// Bytes queued and not yet written.
    pub fn queued(&self) -> usize {
        self.encoder.queued()
    }

    /// Where the queue ends, as an offset in the stream of framed bytes:
    /// see [`Encoder::queue_end`](crate::Encoder::queue_end).
    pub fn queue_end(&self) -> u64 {
        self.encoder.queue_end()
    }

    /// How far the writer took the stream: see
    /// [`Encoder::written_to`](crate::Encoder::written_to).
    pub fn written_to(&self) -> u64 {
        self.encoder.written_to()
    }

    /// Messages queued and not yet written whole.
    pub fn queued_messages(&self) -> usize {
        self.encoder.queued_messages()
    }

    /// Whether the sender that just queued a message writes it now, from
    /// its own task, rather than leave it to the driver's background
    /// flush. Decided from what is queued and what was read, never from
    /// time:
    ///
    /// - the first message since the peer was last read from (its turn
    ///   came: an answer, a request of its own), alone in the queue (the
    ///   pipe took everything before it): written now, with no wake-up of
    ///   another task, so a request after an answer reaches the peer at
    ///   once;
    /// - one sent right behind a message written in the same turn, or
    ///   behind bytes left unwritten (the pipe was full, or a write is in
    ///   progress and takes it with what was queued during it): left to the
    ///   flush, with whatever follows it, so a burst goes out in batches;
    /// - but once a pipe's worth is queued since the last attempt
    ///   ([`WRITE_BATCH`]), written now: a sender running ahead of the
    ///   flush, or of a full pipe, tries it once per batch.
    ///
    /// Call [`handle_peer_turn`](Self::handle_peer_turn) before asking, and
    /// [`handle_write_attempt`](Self::handle_write_attempt) after every
    /// attempt to write.
    #[must_use]
    pub fn writes_now(&self) -> bool {
        let new_turn = self.written_in_turn != Some(self.peer_turn);
        (new_turn && self.queued_messages() == 1) || self.queued() >= self.batch_at
    }

    /// The peer was read from `turn` times so far (a count that only
    /// grows; older counts are ignored).
    pub fn handle_peer_turn(&mut self, turn: u64) {
        self.peer_turn = self.peer_turn.max(turn);
    }

    /// A writer tried the pipe (whatever it took): the next batch counts
    /// from what is queued now, and this turn has had its write.
    pub fn handle_write_attempt(&mut self) {
        self.batch_at = self.queued() + WRITE_BATCH;
        self.written_in_turn = Some(self.peer_turn);
    }

    /// The largest message accepted.
    pub fn max_message_size(&self) -> usize {
        self.encoder.max_message_size()
    }

    /// Messages written whole so far.
    pub fn messages_written(&self) -> u64 {
        self.encoder.messages_written()
    }

    /// Payload bytes of the messages written so far, framing excluded.
    pub fn bytes_written(&self) -> u64 {
        self.encoder.bytes_written()
    }

    fn check_drained(&mut self) {
        if self.close_when_drained && self.is_drained() {
            self.close_now = true;
        }
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn c32_a_sender_writes_the_first_message_of_a_turn_and_leaves_a_burst_to_the_flush() {
        let now = Instant::now();
        let mut out = Outbound::new(Lines, 1 << 20, 1 << 20, None);
        out.send("request").expect("queued");
        assert!(out.writes_now(), "the first message: written at once");
        let bytes = out.poll_transmit(now).expect("bytes");
        out.handle_written(bytes.len(), now);
        out.handle_write_attempt();

        out.send("right behind").expect("queued");
        assert!(!out.writes_now(), "same turn: left to the flush");
        let bytes = out.poll_transmit(now).expect("bytes");
        out.handle_written(bytes.len(), now);
        out.handle_write_attempt();

        // The peer answered: the next request goes out at once.
        out.handle_peer_turn(1);
        out.send("next request").expect("queued");
        assert!(out.writes_now(), "a new turn, alone in the queue");

        // The pipe takes part of it (full): what follows waits for the flush.
        let bytes = out.poll_transmit(now).expect("bytes");
        out.handle_written(bytes.len() - 1, now);
        out.handle_write_attempt();
        out.handle_peer_turn(2);
        out.send("next").expect("queued");
        assert!(
            !out.writes_now(),
            "behind unwritten bytes: left to the flush"
        );

        // Until a pipe's worth more is queued: one attempt per batch.
        let big = "x".repeat(WRITE_BATCH);
        out.send(big.as_str()).expect("queued");
        assert!(out.writes_now(), "a batch is queued since the last attempt");
        out.handle_write_attempt();
        out.send("after").expect("queued");
        assert!(!out.writes_now());
    }
}
