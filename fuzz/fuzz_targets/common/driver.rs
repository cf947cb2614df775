//! The half of the `session` and `channel` targets that is one logic: the
//! peer's bytes read (when backpressure allows), the messages sent and
//! written, the clock, the frames taken, and the checks on each. A target
//! holds a [`Driver`] around its endpoint and keeps only what differs: the
//! child's lifecycle and stderr, or the channel's close of the write side.

use std::time::{Duration, Instant};

use arbitrary::Arbitrary;
use bytes::Bytes;
use childwire_core::{
    Channel, ChannelConfig, Closed, Counters, Frame, Framing, SendError, SendErrorKind, Session,
};

use super::{Model, QueueLog};

/// What `Session` and `Channel` both do, under one name: the peer's stream
/// is the child's stdout for a session.
pub trait Endpoint {
    fn handle_read(&mut self, data: &[u8], now: Instant);
    fn handle_read_bytes(&mut self, data: Bytes, now: Instant);
    fn handle_read_eof(&mut self, now: Instant);
    fn wants_read(&self) -> bool;
    fn poll_transmit(&mut self, now: Instant) -> Option<Bytes>;
    fn handle_written(&mut self, n: usize, now: Instant);
    fn handle_timeout(&mut self, now: Instant);
    fn poll_timeout(&self) -> Option<Instant>;
    fn send(&mut self, payload: Vec<u8>) -> Result<(), SendError<Vec<u8>>>;
    fn send_closed(&self) -> Option<Closed>;
    fn send_ready(&mut self) -> bool;
    fn queued(&mut self) -> usize;
    fn counters(&self) -> Counters;
}

impl<F: Framing> Endpoint for Channel<F> {
    fn handle_read(&mut self, data: &[u8], now: Instant) {
        Channel::handle_read(self, data, now);
    }
    fn handle_read_bytes(&mut self, data: Bytes, now: Instant) {
        Channel::handle_read_bytes(self, data, now);
    }
    fn handle_read_eof(&mut self, now: Instant) {
        Channel::handle_read_eof(self, now);
    }
    fn wants_read(&self) -> bool {
        Channel::wants_read(self)
    }
    fn poll_transmit(&mut self, now: Instant) -> Option<Bytes> {
        Channel::poll_transmit(self, now)
    }
    fn handle_written(&mut self, n: usize, now: Instant) {
        Channel::handle_written(self, n, now);
    }
    fn handle_timeout(&mut self, now: Instant) {
        Channel::handle_timeout(self, now);
    }
    fn poll_timeout(&self) -> Option<Instant> {
        Channel::poll_timeout(self)
    }
    fn send(&mut self, payload: Vec<u8>) -> Result<(), SendError<Vec<u8>>> {
        Channel::send(self, payload)
    }
    fn send_closed(&self) -> Option<Closed> {
        Channel::send_closed(self)
    }
    fn send_ready(&mut self) -> bool {
        self.outbound().send_ready()
    }
    fn queued(&mut self) -> usize {
        self.outbound().queued()
    }
    fn counters(&self) -> Counters {
        Channel::counters(self)
    }
}

impl<F: Framing> Endpoint for Session<F> {
    fn handle_read(&mut self, data: &[u8], now: Instant) {
        self.handle_stdout(data, now);
    }
    fn handle_read_bytes(&mut self, data: Bytes, now: Instant) {
        self.handle_stdout_bytes(data, now);
    }
    fn handle_read_eof(&mut self, now: Instant) {
        self.handle_stdout_eof(now);
    }
    fn wants_read(&self) -> bool {
        self.wants_stdout()
    }
    fn poll_transmit(&mut self, now: Instant) -> Option<Bytes> {
        Session::poll_transmit(self, now)
    }
    fn handle_written(&mut self, n: usize, now: Instant) {
        Session::handle_written(self, n, now);
    }
    fn handle_timeout(&mut self, now: Instant) {
        Session::handle_timeout(self, now);
    }
    fn poll_timeout(&self) -> Option<Instant> {
        Session::poll_timeout(self)
    }
    fn send(&mut self, payload: Vec<u8>) -> Result<(), SendError<Vec<u8>>> {
        Session::send(self, payload)
    }
    fn send_closed(&self) -> Option<Closed> {
        Session::send_closed(self)
    }
    fn send_ready(&mut self) -> bool {
        Session::send_ready(self)
    }
    fn queued(&mut self) -> usize {
        Session::queued(self)
    }
    fn counters(&self) -> Counters {
        Session::counters(self)
    }
}

/// A payload for `send`.
#[derive(Debug, Arbitrary)]
pub enum Payload {
    /// Any bytes: line framing refuses those with `\n` or `\r`.
    Raw(Vec<u8>),
    /// Bytes without `\n` or `\r`.
    Text(Vec<u8>),
    Empty,
    /// This much over `max_send_size`.
    OverLimit(u8),
}

impl Payload {
    fn bytes(&self, max_send_size: usize) -> Vec<u8> {
        match self {
            Payload::Raw(bytes) => bytes.clone(),
            Payload::Text(bytes) => bytes
                .iter()
                .copied()
                .filter(|&b| b != b'\n' && b != b'\r')
                .collect(),
            Payload::Empty => Vec::new(),
            Payload::OverLimit(extra) => vec![b'x'; max_send_size + 1 + usize::from(*extra)],
        }
    }
}

/// An endpoint with what the test knows it was given and what it gave back.
pub struct Driver<F: Model, E> {
    pub endpoint: E,
    pub framing: F,
    pub limits: ChannelConfig,
    /// Reads only while `wants_read()` says so, as the adapters do;
    /// otherwise whatever comes, and only the receive bound is not checked.
    pub respect_backpressure: bool,
    pub now: Instant,
    /// The number of the input, for the queue log.
    pub step: usize,

    /// Everything the peer sent, in order.
    pub read: Vec<u8>,
    pub eof: bool,
    largest_read: usize,

    /// Every accepted message, framed, in order: what the peer may get.
    pub wire: Vec<u8>,
    /// Where each accepted message ends in `wire`, with its payload length.
    boundaries: Vec<(usize, usize)>,
    /// What the peer got: always a prefix of `wire`.
    pub written: Vec<u8>,

    /// The frames taken, in order.
    items: Vec<F::Item>,
    pub taken: u64,
    log: QueueLog,
}

impl<F: Model, E: Endpoint> Driver<F, E> {
    pub fn new(
        endpoint: E,
        framing: F,
        limits: ChannelConfig,
        respect_backpressure: bool,
        now: Instant,
    ) -> Self {
        Self {
            endpoint,
            framing,
            limits,
            respect_backpressure,
            now,
            step: 0,
            read: Vec::new(),
            eof: false,
            largest_read: 0,
            wire: Vec::new(),
            boundaries: Vec::new(),
            written: Vec::new(),
            items: Vec::new(),
            taken: 0,
            log: QueueLog::default(),
        }
    }

    /// Whether the adapter reads the peer's stream now.
    pub fn may_read(&self) -> bool {
        !self.eof && (!self.respect_backpressure || self.endpoint.wants_read())
    }

    /// The log entry before a read: the adapter reads only below the mark.
    fn before_read(&mut self) {
        if self.respect_backpressure {
            let decoded = super::decoded(&self.endpoint.counters());
            let bound = self.limits.recv_high_water - 1;
            self.log.record(decoded, self.taken, bound, self.step);
        }
    }

    /// `bytes` from the peer, copied in or handed over as `Bytes`, if the
    /// adapter reads now.
    pub fn read(&mut self, bytes: &[u8], by_bytes: bool) {
        if !self.may_read() {
            return;
        }
        self.before_read();
        self.largest_read = self.largest_read.max(bytes.len());
        self.read.extend_from_slice(bytes);
        if by_bytes {
            self.endpoint
                .handle_read_bytes(Bytes::copy_from_slice(bytes), self.now);
        } else {
            self.endpoint.handle_read(bytes, self.now);
        }
    }

    /// One well-formed frame around `body` from the peer.
    pub fn read_frame(&mut self, body: &[u8]) {
        let frame = self.framing.frame(body);
        self.read(&frame, false);
    }

    /// The end of the peer's stream, if the adapter reads now.
    pub fn read_eof(&mut self) {
        if self.may_read() {
            self.before_read();
            self.eof = true;
            self.endpoint.handle_read_eof(self.now);
        }
    }

    /// What `poll_transmit` hands out now: nothing once the write side is
    /// `closed`.
    pub fn poll_transmit(&mut self, closed: bool) -> Option<Bytes> {
        let transmit = self.endpoint.poll_transmit(self.now);
        if closed {
            assert_eq!(
                transmit, None,
                "bytes handed out after the write side closed"
            );
        }
        transmit
    }

    /// The peer takes up to `n` bytes of `poll_transmit`; the write side is
    /// `closed` or not. What was written stays a prefix of the accepted
    /// messages and the counters agree with it.
    pub fn write(&mut self, n: usize, closed: bool) {
        let Some(bytes) = self.poll_transmit(closed) else {
            return;
        };
        assert!(!bytes.is_empty(), "an empty transmit");
        let n = n.min(bytes.len());
        self.written.extend_from_slice(&bytes[..n]);
        assert!(
            self.wire.starts_with(&self.written),
            "the peer gets something else than the accepted messages"
        );
        self.endpoint.handle_written(n, self.now);
        self.check_written(&self.endpoint.counters());
    }

    /// `counters` count the messages written whole, and their payload bytes.
    pub fn check_written(&self, counters: &Counters) {
        let done = self
            .boundaries
            .iter()
            .take_while(|&&(end, _)| end <= self.written.len());
        assert_eq!(counters.messages_out, done.clone().count() as u64);
        assert_eq!(
            counters.bytes_out,
            done.map(|&(_, len)| len as u64).sum::<u64>()
        );
    }

    /// The clock moves `ms` milliseconds.
    pub fn advance(&mut self, ms: u16) {
        self.now += Duration::from_millis(u64::from(ms));
    }

    /// The clock moves to `poll_timeout`, if there is one.
    pub fn advance_to_deadline(&mut self) {
        if let Some(deadline) = self.endpoint.poll_timeout() {
            self.now = self.now.max(deadline);
        }
    }

    pub fn handle_timeout(&mut self) {
        self.endpoint.handle_timeout(self.now);
    }

    /// After `handle_timeout(now)` no deadline is left at or before `now`.
    pub fn check_deadline(&self) {
        if let Some(deadline) = self.endpoint.poll_timeout() {
            assert!(
                deadline > self.now,
                "a deadline at or before the time it was just handled"
            );
        }
    }

    /// Sends `payload`: accepted only when open, ready and valid, and then
    /// queued framed; refused otherwise for the right reason, with the
    /// payload handed back and nothing queued.
    pub fn send(&mut self, payload: &Payload) {
        let max_send = self.limits.max_send_size;
        let bytes = payload.bytes(max_send);
        let closed = self.endpoint.send_closed();
        let ready = self.endpoint.send_ready();
        let queued = self.endpoint.queued();
        match self.endpoint.send(bytes.clone()) {
            Ok(()) => {
                assert_eq!(closed, None, "accepted after sending was closed");
                assert!(ready, "accepted while the queue said wait");
                assert_eq!(self.framing.check(&bytes, max_send), Ok(()));
                let framed = super::encode(&self.framing, &bytes);
                assert_eq!(self.endpoint.queued(), queued + framed.len());
                self.wire.extend_from_slice(&framed);
                self.boundaries.push((self.wire.len(), bytes.len()));
            }
            Err(err) => {
                assert_eq!(
                    self.endpoint.queued(),
                    queued,
                    "a refused send queued bytes"
                );
                let kind = err.kind();
                assert_eq!(
                    err.into_payload(),
                    bytes,
                    "the payload is handed back whole"
                );
                match (closed, self.framing.check(&bytes, max_send)) {
                    (Some(closed), _) => assert_eq!(kind, SendErrorKind::Closed(closed)),
                    (None, Err(invalid)) => assert_eq!(kind, SendErrorKind::Invalid(invalid)),
                    (None, Ok(())) => {
                        assert_eq!(kind, SendErrorKind::Full);
                        assert!(!ready, "refused as full while the queue said ready");
                    }
                }
            }
        }
    }

    /// The caller took `frame`.
    pub fn take(&mut self, frame: Frame) {
        self.log.taken(super::cost(&frame));
        self.taken += 1;
        self.items.push(F::item(frame));
    }

    /// Every frame decoded was taken.
    pub fn all_taken(&self) -> bool {
        super::decoded(&self.endpoint.counters()) == self.taken
    }

    /// The end of a drain: the outbound queue within its high-water mark
    /// plus one message, and the receive queue logged for its bound.
    pub fn check_queues(&mut self) {
        let limits = &self.limits;
        let one_message = limits.max_send_size + self.framing.overhead(limits.max_send_size);
        let queued = self.endpoint.queued();
        assert!(
            queued <= limits.send_high_water + one_message,
            "outbound queue {queued} over {} + one message",
            limits.send_high_water
        );
        if self.respect_backpressure {
            let bound = limits.recv_high_water
                + super::one_read(self.largest_read, limits.max_message_size);
            let decoded = super::decoded(&self.endpoint.counters());
            self.log.record(decoded, self.taken, bound, self.step);
        }
    }

    /// Once every frame was taken: the receive queue stayed within its
    /// bound, and the frames are what the reference model makes of the
    /// bytes read (with or without the end of the stream).
    pub fn check_frames(&self) {
        self.log.check();
        let max = self.limits.max_message_size;
        if self.eof {
            assert_eq!(self.items, F::expected(&self.read, max));
        } else {
            F::check_without_eof(&self.items, &self.read, max);
        }
    }
}
