//! A message channel with no process in it: framing both ways, queues,
//! backpressure, the write timeout and counters, over any byte stream.

use std::time::Instant;

use bytes::Bytes;

use crate::config::ChannelConfig;
use crate::frame::Frame;
use crate::framing::Framing;
use crate::inbound::Inbound;
use crate::lines::Lines;
use crate::outbound::{Closed, Outbound, SendError};
use crate::report::Counters;

/// A message channel to a peer over a byte stream (a socket, a pipe pair,
/// the process's own stdio), as one sans-IO state machine.
///
/// It is an [`Inbound`] and an [`Outbound`] half side by side; take them
/// apart with [`into_parts`](Self::into_parts) to drive each direction
/// from its own task.
///
/// # Inputs
///
/// - [`handle_read`](Self::handle_read) / [`handle_read_eof`](Self::handle_read_eof):
///   bytes read from the peer, and the end of its stream.
/// - [`handle_written`](Self::handle_written) /
///   [`handle_write_failed`](Self::handle_write_failed): the outcome of
///   writing [`poll_transmit`](Self::poll_transmit).
/// - [`handle_timeout`](Self::handle_timeout): the deadline from
///   [`poll_timeout`](Self::poll_timeout) passed; early calls are harmless.
///
/// # Caller requests
///
/// - [`send`](Self::send): queue a message.
/// - [`close`](Self::close): stop sending; the write side closes once the
///   queue is written.
/// - [`poll_received`](Self::poll_received): the next frame from the peer.
///
/// # Outputs, drained in this order after every input
///
/// 1. [`poll_close_write`](Self::poll_close_write): close the write side now.
/// 2. [`poll_transmit`](Self::poll_transmit): bytes to write, or `None`
///    (flush).
/// 3. [`wants_read`](Self::wants_read): whether to read now.
/// 4. [`poll_timeout`](Self::poll_timeout): when to call
///    [`handle_timeout`](Self::handle_timeout).
///
/// The channel is over when [`is_finished`](Self::is_finished): the peer's
/// stream ended and every frame was taken. It ends on EOF, not on an exit
/// status.
///
/// # Example: an NDJSON peer over any byte stream
///
/// ```
/// use std::time::Instant;
/// use childwire_core::{Channel, ChannelConfig, Frame, Lines};
///
/// let now = Instant::now();
/// let mut peer = Channel::new(Lines, &ChannelConfig::default());
///
/// peer.send(r#"{"jsonrpc":"2.0","id":1,"method":"ping"}"#).unwrap();
/// let wire = peer.poll_transmit(now).unwrap(); // write these bytes to the socket
/// peer.handle_written(wire.len(), now);
///
/// peer.handle_read(b"{\"jsonrpc\":\"2.0\",\"id\":1,\"result\":{}}\n", now);
/// let Some(Frame::Message(reply)) = peer.poll_received() else { panic!() };
/// assert_eq!(&reply[..], br#"{"jsonrpc":"2.0","id":1,"result":{}}"#);
///
/// peer.close();
/// assert!(peer.poll_close_write()); // shut the socket's write side
/// peer.handle_read_eof(now);
/// assert!(peer.is_finished());
/// ```
///
/// The same with `Content-Length` framing, as an LSP or DAP peer speaks it:
///
/// ```
/// use std::time::Instant;
/// use childwire_core::{Channel, ChannelConfig, ContentLength, Frame};
///
/// let now = Instant::now();
/// let mut peer = Channel::new(ContentLength, &ChannelConfig::default());
///
/// peer.send(r#"{"jsonrpc":"2.0","id":1,"method":"initialize"}"#).unwrap();
/// let wire = peer.poll_transmit(now).unwrap();
/// assert!(wire.starts_with(b"Content-Length: 46\r\n\r\n{"));
/// peer.handle_written(wire.len(), now);
///
/// // The answer arrives in two pieces, split inside its header.
/// peer.handle_read(b"Content-Length: 3", now);
/// peer.handle_read(b"6\r\nContent-Type: application/vscode-jsonrpc\r\n\r\n{\"jsonrpc\":\"2.0\",\"id\":1,\"result\":{}}", now);
/// let Some(Frame::Message(reply)) = peer.poll_received() else { panic!() };
/// assert_eq!(&reply[..], br#"{"jsonrpc":"2.0","id":1,"result":{}}"#);
/// ```
#[derive(Debug)]
pub struct Channel<F: Framing = Lines> {
    inbound: Inbound<F>,
    outbound: Outbound<F>,
}

impl<F: Framing> Channel<F> {
    /// A channel framing both directions with `framing`, within `config`.
    pub fn new(framing: F, config: &ChannelConfig) -> Self {
        Self {
            inbound: Inbound::new(&framing, config.max_message_size, config.recv_high_water)
                .with_pollution(config.pollution),
            outbound: Outbound::new(
                framing,
                config.max_send_size,
                config.send_high_water,
                config.write_timeout,
            ),
        }
    }

    /// The two halves, to drive each direction on its own.
    pub fn into_parts(self) -> (Inbound<F>, Outbound<F>) {
        (self.inbound, self.outbound)
    }

    /// The receiving half.
    pub fn inbound(&mut self) -> &mut Inbound<F> {
        &mut self.inbound
    }

    /// The sending half.
    pub fn outbound(&mut self) -> &mut Outbound<F> {
        &mut self.outbound
    }

    // ---- inputs ----

    /// Bytes read from the peer.
    pub fn handle_read(&mut self, data: &[u8], _now: Instant) {
        self.inbound.handle_data(data);
    }

    /// Bytes read from the peer, handed over without a copy.
    pub fn handle_read_bytes(&mut self, data: Bytes, _now: Instant) {
        self.inbound.handle_bytes(data);
    }

    /// The peer's stream ended.
    pub fn handle_read_eof(&mut self, _now: Instant) {
        self.inbound.handle_eof();
    }

    /// The first `n` bytes of [`poll_transmit`](Self::poll_transmit) were
    /// written.
    pub fn handle_written(&mut self, n: usize, now: Instant) {
        self.outbound.handle_written(n, now);
    }

    /// Writing failed: the peer stopped reading.
    pub fn handle_write_failed(&mut self, _now: Instant) {
        self.outbound.handle_write_failed();
    }

    /// Time passed.
    pub fn handle_timeout(&mut self, now: Instant) {
        self.outbound.handle_timeout(now);
    }

    // ---- caller requests ----

    /// Queues `payload`; see [`Outbound::send`].
    pub fn send<B: AsRef<[u8]>>(&mut self, payload: B) -> Result<(), SendError<B>> {
        self.outbound.send(payload)
    }

    /// Stops sending; the write side closes once the queue is written.
    pub fn close(&mut self) {
        self.outbound.close();
    }

    /// The next frame from the peer.
    #[must_use = "received frames are lost unless handled"]
    pub fn poll_received(&mut self) -> Option<Frame> {
        self.inbound.poll_received()
    }

    // ---- outputs ----

    /// `true` once, when the write side must be closed now.
    #[must_use = "the write side must be closed when this says so"]
    pub fn poll_close_write(&mut self) -> bool {
        self.outbound.poll_close()
    }

    /// Bytes to write next, or `None` (flush).
    #[must_use = "queued bytes only reach the peer if written"]
    pub fn poll_transmit(&mut self, now: Instant) -> Option<Bytes> {
        self.outbound.poll_transmit(now)
    }

    /// Whether to read from the peer now.
    pub fn wants_read(&self) -> bool {
        self.inbound.wants_read()
    }

    /// When to call [`handle_timeout`](Self::handle_timeout) next.
    #[must_use]
    pub fn poll_timeout(&self) -> Option<Instant> {
        self.outbound.poll_timeout()
    }

    // ---- getters ----

    /// Whether the peer's stream ended and every frame was taken.
    pub fn is_finished(&self) -> bool {
        self.inbound.is_finished()
    }

    /// Why sending stopped, once it has.
    pub fn send_closed(&self) -> Option<Closed> {
        self.outbound.closed()
    }

    /// Traffic counters so far.
    pub fn counters(&self) -> Counters {
        counters(&self.inbound, &self.outbound)
    }
}

/// The counters of a channel's two halves.
pub fn counters<F: Framing>(inbound: &Inbound<F>, outbound: &Outbound<F>) -> Counters {
    let stats = inbound.stats();
    let pollution = inbound.pollution_counts();
    Counters {
        messages_in: stats.messages,
        bytes_in: stats.bytes,
        messages_out: outbound.messages_written(),
        bytes_out: outbound.bytes_written(),
        oversized: stats.oversized,
        malformed: stats.malformed,
        blank_lines: stats.blank_lines,
        stderr_bytes: 0,
        polluted: pollution.map_or(0, |counts| counts.polluted),
        polluted_dropped: pollution.map_or(0, |counts| counts.dropped),
    }
}
