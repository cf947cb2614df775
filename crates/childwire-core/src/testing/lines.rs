//! A plain model of [`LineDecoder`]'s rules, written for obviousness rather
//! than speed: the whole input is split at once, so no state crosses a chunk
//! boundary. The property tests and the fuzz targets check the streaming
//! decoder against it.
//!
//! [`LineDecoder`]: crate::decoder::LineDecoder

use crate::frame::{Frame, OVERSIZED_HEAD_LEN};

/// What the decoder must yield, in a form that is easy to compare.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Expected {
    /// A message and whether it ended with `\n`.
    Message(Vec<u8>, bool),
    /// An oversized notice: the line's length and head.
    Oversized(u64, Vec<u8>),
}

impl From<Frame> for Expected {
    fn from(frame: Frame) -> Self {
        match frame {
            Frame::Message(m) => Expected::Message(m.to_vec(), m.is_terminated()),
            Frame::Oversized(o) => Expected::Oversized(o.len, o.head.to_vec()),
            other => panic!("line framing yields only messages and oversized notices: {other:?}"),
        }
    }
}

/// The frames of the whole `input` (ended by EOF) and the number of blank
/// lines skipped, for a decoder with limit `max`: split on `\n`, strip one `\r`, drop blanks, turn lines over
/// `max` into notices.
pub fn frames(input: &[u8], max: usize) -> (Vec<Expected>, u64) {
    let mut pieces: Vec<&[u8]> = input.split(|&b| b == b'\n').collect();
    // `split` yields the bytes after the last `\n` as a final piece: a line
    // without terminator, or empty when the input ends with `\n`.
    let last = pieces.pop().unwrap_or_default();
    let lines = pieces
        .into_iter()
        .map(|line| (line, true))
        .chain((!last.is_empty()).then_some((last, false)));
    let mut out = Vec::new();
    let mut blank = 0;
    for (line, terminated) in lines {
        let content = line.strip_suffix(b"\r").unwrap_or(line);
        if content.is_empty() {
            blank += 1;
        } else if content.len() > max {
            let head = content[..content.len().min(OVERSIZED_HEAD_LEN)].to_vec();
            out.push(Expected::Oversized(content.len() as u64, head));
        } else {
            out.push(Expected::Message(content.to_vec(), terminated));
        }
    }
    (out, blank)
}
