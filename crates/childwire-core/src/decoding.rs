//! [`Decoding`]: where the decoder goes with the reader that holds the read
//! lease, so that what it reads is decoded away from whatever guards the
//! rest of the channel.

use std::collections::VecDeque;

use crate::frame::Frame;
use crate::framing::{FrameDecoder, Framing};
use crate::pollution::looks_like_message;

/// The frames the last read must have completed for the next to lend the
/// decoder: lending and handing back cost about a hundred instructions per
/// read, which the decoding of a read holding one answer does not pay back
/// (a request and its answer cost 4.4% more in the gate's round-trip row
/// when every read lent it), while a flood's reads hold hundreds.
pub const LEND_FROM: usize = 4;

/// Where the channel's decoder goes with the one reader holding the read
/// lease, and the frames it decodes there. Made once
/// ([`Channel::decoding`](crate::Channel::decoding)) and kept with the
/// reading pipe: [`Channel::lend_decoder`](crate::Channel::lend_decoder)
/// puts the decoder in it, the reader decodes what it reads with
/// [`handle_data`](Self::handle_data) on its own, and
/// [`Channel::handle_decoded`](crate::Channel::handle_decoded) takes the
/// decoder back and queues the frames as
/// [`Channel::handle_read`](crate::Channel::handle_read) would have queued
/// them. Lending and handing back move two pointers, not the decoder. The
/// channel lends it once reads carry several frames ([`LEND_FROM`]): a read
/// of one answer is decoded in place.
///
/// Why: an owner that keeps the channel behind a lock shared by senders and
/// the receiver decodes here without it, so a sender is never held up by
/// the decoding of a whole read.
///
/// ```
/// use std::time::Instant;
/// use childwire_core::{Channel, ChannelConfig, Frame, Lines, ReadStep};
///
/// let mut channel = Channel::new(Lines, &ChannelConfig::default());
/// let mut decoding = channel.decoding();
/// // A read of one message: decoded in place, the next not lent.
/// assert_eq!(channel.poll_read(), ReadStep::Read);
/// assert!(!channel.lend_decoder(&mut decoding));
/// channel.handle_read(b"{}\n{}\n{}\n{}\n", Instant::now());
/// while channel.poll_received().is_some() {}
/// // It brought four: the next read takes the decoder with it.
/// assert_eq!(channel.poll_read(), ReadStep::Read);
/// assert!(channel.lend_decoder(&mut decoding));
/// // ... the lock released, the pipe read ...
/// decoding.handle_data(b"{\"id\":1}\n{\"id\":");
/// // ... the lock taken again ...
/// channel.handle_decoded(&mut decoding, Instant::now());
/// assert!(matches!(channel.poll_received(), Some(Frame::Message(m)) if &m[..] == b"{\"id\":1}"));
/// assert!(channel.poll_received().is_none());
/// ```
#[derive(Debug)]
pub struct Decoding<F: Framing> {
    /// The channel's decoder while lent; otherwise an empty one that stands
    /// in for it in the channel while it is lent.
    pub(crate) decoder: Box<F::Decoder>,
    /// It holds the channel's decoder now.
    pub(crate) lent: bool,
    /// What the lent decoder gave, in order, for the channel to queue.
    pub(crate) frames: VecDeque<Frame>,
    /// Bytes were given: a read that brought something.
    pub(crate) read: bool,
    /// The pollution check is on: `plain` counts only messages that look
    /// like messages.
    pub(crate) shape_check: bool,
    /// How many of `frames`, from the first, are messages the channel
    /// queues as they are (with the pollution check on: that look like
    /// messages), and their bytes: handed back at once, not one by one.
    pub(crate) plain: usize,
    pub(crate) plain_bytes: usize,
}

impl<F: Framing> Decoding<F> {
    pub(crate) fn new(stand_in: F::Decoder) -> Self {
        Self {
            decoder: Box::new(stand_in),
            lent: false,
            frames: VecDeque::new(),
            read: false,
            shape_check: false,
            plain: 0,
            plain_bytes: 0,
        }
    }

    /// Bytes read from the peer: decoded now, each byte scanned once, their
    /// frames kept for the hand-back. Ignored unless the decoder is here.
    pub fn handle_data(&mut self, data: &[u8]) {
        if data.is_empty() || !self.lent {
            return;
        }
        self.read = true;
        self.decoder.handle_data(data);
        let Self {
            frames,
            plain,
            plain_bytes,
            shape_check,
            ..
        } = self;
        let shape_check = *shape_check;
        self.decoder.drain_frames(|frame| {
            // Once one is not, the rest take the channel's own path.
            if *plain == frames.len() {
                if let Frame::Message(message) = &frame {
                    if !shape_check || looks_like_message(message) {
                        *plain += 1;
                        *plain_bytes += message.len();
                    }
                }
            }
            frames.push_back(frame);
        });
    }
}
