//! Outbound framing: messages in, bytes for the peer out, through one
//! bounded write queue.

use std::collections::VecDeque;
use std::error::Error;
use std::fmt;
use std::mem::size_of;

use bytes::{Buf, Bytes, BytesMut};

use crate::framing::{EncodeErrorKind, Framing};
use crate::lines::Lines;

/// The default outbound high-water mark: 1 MiB queued makes senders wait.
pub const DEFAULT_HIGH_WATER: usize = 1024 * 1024;

/// A batch holds this much, or one larger message: a pipe's worth, what
/// one `write` to a pipe takes at most on Linux.
const BATCH_CAPACITY: usize = 64 * 1024;

/// Where one queued message ends in the stream of framed bytes, and where
/// its payload ends in the stream of payload bytes, both counted from the
/// start: what makes the counters exact under partial writes, whatever the
/// framing, and lets a write find the last message it finished by a binary
/// search rather than message by message.
type Boundary = (u64, u64);

/// Frames outbound messages into one bounded write queue.
///
/// # Inputs and outputs
///
/// - [`encode`](Self::encode): a message to send. It is checked, then
///   appended with its framing, or handed back in an [`EncodeError`].
/// - [`poll_transmit`](Self::poll_transmit): the bytes to write next, as a
///   cheap [`Bytes`] handle the writer may take outside any lock: the
///   messages queued when the previous batch was done, contiguous, up to a
///   pipe's worth (64 KiB, or one larger message), so one `write` carries
///   many messages.
/// - [`handle_written`](Self::handle_written): how many of those bytes the
///   writer took. Partial writes are normal.
///
/// # Guarantees
///
/// - Nothing corrupt reaches the peer: a payload the framing cannot carry
///   (for lines: empty, or containing `\n` or `\r`) or longer than
///   `max_message_size` is refused whole.
/// - All or nothing: a message is either queued entirely or refused.
/// - The queue is bounded: once what it holds costs `high_water` bytes or
///   more (its bytes plus a small record per message), further messages are
///   refused with [`EncodeErrorKind::Full`] until the writer catches up
///   (backpressure). An empty queue always accepts a valid message, so a
///   message larger than `high_water` still goes out alone.
///
/// # Example
///
/// ```
/// use childwire_core::{EncodeErrorKind, LineEncoder};
///
/// let mut encoder = LineEncoder::new(1024, 64);
/// encoder.encode(r#"{"id":1}"#).unwrap();
/// encoder.encode(r#"{"id":2}"#).unwrap();
///
/// let refused = encoder.encode("two\nlines").unwrap_err();
/// assert_eq!(refused.kind(), &EncodeErrorKind::Newline { at: 3 });
/// assert_eq!(refused.into_payload(), "two\nlines");
///
/// assert_eq!(encoder.poll_transmit().as_deref(), Some(&b"{\"id\":1}\n{\"id\":2}\n"[..]));
/// encoder.handle_written(4);
/// assert_eq!(encoder.messages_written(), 0);
/// assert_eq!(encoder.poll_transmit().as_deref(), Some(&b"\":1}\n{\"id\":2}\n"[..]));
/// encoder.handle_written(14);
/// assert_eq!(encoder.messages_written(), 2);
/// ```
#[derive(Debug)]
pub struct Encoder<F: Framing = Lines> {
    framing: F,
    /// Messages accepted since the current batch was handed out, in the
    /// batch being filled.
    queue: BytesMut,
    /// Full batches waiting behind the one being written, oldest first: a
    /// queue that outgrows its batch starts a new one instead of copying
    /// itself into a larger buffer (that copying was a third of a send's
    /// instructions when the writer fell behind).
    sealed: VecDeque<Bytes>,
    /// The bytes in `sealed`.
    sealed_len: usize,
    /// The batch being written: handed out by `poll_transmit`, advanced by
    /// `handle_written`.
    in_flight: Bytes,
    /// The last batch written out, kept so that its memory takes the next
    /// messages once the writer has let go of it: a fresh buffer per batch
    /// costs an allocation and a page fault per 4 KiB written.
    spent: Bytes,
    /// Where each message ends, oldest first, from the first not yet
    /// written on (`boundaries[done..]`). A `Vec` read from a cursor rather
    /// than a `VecDeque`: a push is a third cheaper, and the written ones
    /// go all at once when the queue empties, or in one move once they are
    /// half of it (see `handle_written`).
    boundaries: Vec<Boundary>,
    /// Messages at the front of `boundaries` already written.
    done: usize,
    /// Payload bytes ever queued (those dropped by `clear` taken back).
    payload_enqueued: u64,
    /// Bytes ever queued and ever written: stream offsets for `boundaries`.
    enqueued: u64,
    written: u64,
    max_message_size: usize,
    high_water: usize,
    /// Messages whose last byte was written.
    messages_written: u64,
    /// Payload bytes of those messages, framing excluded.
    bytes_written: u64,
}

/// Newline-delimited framing's encoder, the default.
pub type LineEncoder = Encoder<Lines>;

impl<F: Framing> Default for Encoder<F> {
    /// An encoder with the default limits:
    /// [`DEFAULT_MAX_MESSAGE_SIZE`](crate::decoder::DEFAULT_MAX_MESSAGE_SIZE)
    /// and [`DEFAULT_HIGH_WATER`].
    fn default() -> Self {
        Self::new(crate::decoder::DEFAULT_MAX_MESSAGE_SIZE, DEFAULT_HIGH_WATER)
    }
}

impl<F: Framing> Encoder<F> {
    /// An encoder that accepts messages up to `max_message_size` bytes and
    /// refuses new ones while `high_water` bytes or more are queued.
    pub fn new(max_message_size: usize, high_water: usize) -> Self {
        Self::with_framing(F::default(), max_message_size, high_water)
    }

    /// [`new`](Self::new) with a configured framing value.
    pub fn with_framing(framing: F, max_message_size: usize, high_water: usize) -> Self {
        Self {
            framing,
            queue: BytesMut::new(),
            sealed: VecDeque::new(),
            sealed_len: 0,
            in_flight: Bytes::new(),
            spent: Bytes::new(),
            boundaries: Vec::new(),
            done: 0,
            payload_enqueued: 0,
            enqueued: 0,
            written: 0,
            max_message_size,
            high_water,
            messages_written: 0,
            bytes_written: 0,
        }
    }

    /// Checks `payload` and queues it with its framing, or hands it back.
    ///
    /// The checks, in order: what the framing refuses (for lines: empty,
    /// `\n`, `\r`, the first one found named), size within the limit, room
    /// in the queue.
    pub fn encode<B: AsRef<[u8]>>(&mut self, payload: B) -> Result<(), EncodeError<B>> {
        if let Err(kind) = self.check(payload.as_ref()) {
            return Err(EncodeError { kind, payload });
        }
        self.push(payload.as_ref());
        Ok(())
    }

    /// [`encode`](Self::encode) even above the high-water mark: for a writer
    /// that was told there was room (a `Sink`'s `poll_ready`) and must not
    /// fail because another writer took it meanwhile. The bound is then
    /// exceeded by that message at most per writer.
    pub fn encode_anyway<B: AsRef<[u8]>>(&mut self, payload: B) -> Result<(), EncodeError<B>> {
        if let Err(kind) = self.framing.check(payload.as_ref(), self.max_message_size) {
            return Err(EncodeError { kind, payload });
        }
        self.push(payload.as_ref());
        Ok(())
    }

    #[inline]
    fn push(&mut self, bytes: &[u8]) {
        let framed = bytes.len() + self.framing.overhead(bytes.len());
        if self.queue.capacity() - self.queue.len() < framed {
            self.grow(framed);
        }
        self.framing.encode(bytes, &mut self.queue);
        self.enqueued += framed as u64;
        self.payload_enqueued += bytes.len() as u64;
        self.boundaries.push((self.enqueued, self.payload_enqueued));
    }

    /// Makes room for `framed` more bytes in the queue: a full batch is
    /// sealed as it is, and a new one starts in the memory of the batch
    /// written last if the writer let go of it, else in a pipe's worth of
    /// new memory. Queued bytes are never copied.
    /// Out of line: a push that fits (nearly all) then saves no registers.
    #[cold]
    #[inline(never)]
    fn grow(&mut self, framed: usize) {
        if !self.queue.is_empty() {
            let full = std::mem::take(&mut self.queue).freeze();
            self.sealed_len += full.len();
            self.sealed.push_back(full);
        }
        match std::mem::take(&mut self.spent).try_into_mut() {
            Ok(mut spent) => {
                // Written out: the next batch goes on after its end, or
                // from its start when the room left there is too small.
                if spent.try_reclaim(framed) {
                    self.queue = spent;
                    return;
                }
            }
            // The writer still holds it: maybe not next time.
            Err(spent) => self.spent = spent,
        }
        self.queue.reserve(framed.max(BATCH_CAPACITY));
    }

    /// Whether `payload` would be accepted now, without queueing it.
    pub fn check(&self, payload: &[u8]) -> Result<(), EncodeErrorKind> {
        self.framing.check(payload, self.max_message_size)?;
        if !self.has_room() {
            return Err(EncodeErrorKind::Full {
                queued: self.queued(),
                high_water: self.high_water,
            });
        }
        Ok(())
    }

    /// Whether a valid message would be queued now (the queue is below its
    /// high-water mark).
    pub fn has_room(&self) -> bool {
        self.queued() == 0 || self.cost() < self.high_water
    }

    /// The bytes to write next: the rest of the current batch, or else the
    /// next batch (the messages queued since, up to a pipe's worth or one
    /// larger message). `None` when nothing is queued, which is when a
    /// writer should flush.
    ///
    /// The handle is cheap (no copy); the same bytes come back until
    /// [`handle_written`](Self::handle_written) says they were written.
    #[must_use = "queued bytes only reach the peer if written"]
    pub fn poll_transmit(&mut self) -> Option<Bytes> {
        if self.in_flight.is_empty() {
            if let Some(full) = self.sealed.pop_front() {
                self.sealed_len -= full.len();
                self.in_flight = full;
            } else if self.queue.is_empty() {
                return None;
            } else {
                // The batch being filled goes: the queue starts anew, in
                // the spent batch's memory at its first message (see
                // `grow`).
                self.in_flight = std::mem::take(&mut self.queue).freeze();
            }
        }
        Some(self.in_flight.clone())
    }

    /// Takes note that the first `n` bytes from
    /// [`poll_transmit`](Self::poll_transmit) were written.
    ///
    /// `n` larger than what was handed out is treated as all of it.
    pub fn handle_written(&mut self, n: usize) {
        let n = n.min(self.in_flight.len());
        self.written += n as u64;
        if self.written == self.enqueued {
            // Everything queued went (the common case): every message at
            // once, not one by one.
            self.messages_written += (self.boundaries.len() - self.done) as u64;
            self.bytes_written = self.payload_enqueued;
            self.boundaries.clear();
            self.done = 0;
        } else {
            let pending = &self.boundaries[self.done..];
            let finished = pending.partition_point(|&(end, _)| end <= self.written);
            if let Some(&(_, payload_end)) = finished.checked_sub(1).map(|last| &pending[last]) {
                self.bytes_written = payload_end;
                self.messages_written += finished as u64;
                self.done += finished;
            }
        }
        if self.done > self.boundaries.len() / 2 {
            // A queue that never empties: the written records go once they
            // are half, so each is moved at most once on average.
            self.boundaries.drain(..self.done);
            self.done = 0;
        }
        self.in_flight.advance(n);
        if n > 0 && self.in_flight.is_empty() {
            // Kept for its memory: the queue reclaims it once the writer's
            // handle is gone.
            self.spent = std::mem::take(&mut self.in_flight);
        }
    }

    /// Messages written whole so far.
    pub fn messages_written(&self) -> u64 {
        self.messages_written
    }

    /// Payload bytes of the messages written whole so far, framing excluded.
    pub fn bytes_written(&self) -> u64 {
        self.bytes_written
    }

    /// Where the queue ends, as an offset in the stream of framed bytes
    /// since the start: every byte queued until now is written once
    /// [`written_to`](Self::written_to) reaches it.
    pub fn queue_end(&self) -> u64 {
        self.enqueued
    }

    /// How far the writer took the stream, as an offset in framed bytes.
    pub fn written_to(&self) -> u64 {
        self.written
    }

    /// Bytes queued and not yet written.
    pub fn queued(&self) -> usize {
        self.in_flight.len() + self.sealed_len + self.queue.len()
    }

    /// Messages queued and not yet written whole.
    pub fn queued_messages(&self) -> usize {
        self.boundaries.len() - self.done
    }

    /// What the queue costs in memory: its bytes plus the record kept per
    /// message (written ones included until they are let go of, at most as
    /// many as the queued ones). The high-water mark bounds this.
    pub fn cost(&self) -> usize {
        self.queued() + self.boundaries.len() * size_of::<Boundary>()
    }

    /// Drops everything queued (the peer is gone) and returns how many bytes
    /// were dropped.
    pub fn clear(&mut self) -> usize {
        let dropped = self.queued();
        self.queue = BytesMut::new();
        self.sealed.clear();
        self.sealed_len = 0;
        self.in_flight = Bytes::new();
        self.spent = Bytes::new();
        self.boundaries.clear();
        self.done = 0;
        self.payload_enqueued = self.bytes_written;
        self.written = self.enqueued;
        dropped
    }

    /// The largest message accepted.
    pub fn max_message_size(&self) -> usize {
        self.max_message_size
    }

    /// The queue cost at which messages are refused with
    /// [`EncodeErrorKind::Full`].
    pub fn high_water(&self) -> usize {
        self.high_water
    }

    /// The framing.
    pub fn framing(&self) -> &F {
        &self.framing
    }
}

/// A refused message, with the reason and the payload handed back intact.
pub struct EncodeError<B> {
    kind: EncodeErrorKind,
    payload: B,
}

impl<B> EncodeError<B> {
    /// Why the message was refused.
    pub fn kind(&self) -> &EncodeErrorKind {
        &self.kind
    }

    /// The refused payload, unchanged.
    pub fn into_payload(self) -> B {
        self.payload
    }

    /// The reason and the payload.
    pub fn into_parts(self) -> (EncodeErrorKind, B) {
        (self.kind, self.payload)
    }
}

impl<B: AsRef<[u8]>> fmt::Debug for EncodeError<B> {
    // The payload may be megabytes: show its length, not its bytes.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("EncodeError")
            .field("kind", &self.kind)
            .field("payload_len", &self.payload.as_ref().len())
            .finish()
    }
}

impl<B> fmt::Display for EncodeError<B> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.kind.fmt(f)
    }
}

impl<B: AsRef<[u8]>> Error for EncodeError<B> {}
