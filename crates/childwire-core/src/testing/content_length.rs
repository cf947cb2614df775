//! A plain, non-streaming model of [`ContentLengthDecoder`]'s rules, written
//! for obviousness rather than speed: the whole input is in one slice, so no
//! state crosses a chunk boundary. It shares no code with the decoder, so a
//! test or fuzz target that compares the two checks one against the other.
//!
//! Beside the model, the decoder's documented memory bound, and [`feed`] and
//! [`finish`], which drive a real decoder and check that bound at every
//! step, so that every test and fuzz target holds it to the same rule; and
//! [`lies`], streams with one lie in them and what must still arrive.

pub mod lies;

use bytes::Bytes;

use crate::content_length::{ContentLengthDecoder, MAX_HEADER_LEN};
use crate::frame::{
    DecoderStats, Frame, Malformed, MalformedReason, Message, OVERSIZED_HEAD_LEN, Oversized,
};

/// The frames a `ContentLengthDecoder` with limit `max_message_size` yields
/// for the whole `input` followed by the end of the stream, and the
/// counters it keeps.
pub fn frames(input: &[u8], max_message_size: usize) -> (Vec<Frame>, DecoderStats) {
    let mut out = Vec::new();
    let mut stats = DecoderStats::default();
    let mut malformed = |out: &mut Vec<Frame>, reason, dropped: &[u8]| {
        stats.malformed += 1;
        out.push(Frame::Malformed(Malformed::new(reason, head(dropped))));
    };
    let mut pos = 0;
    loop {
        pos = skip_blank_lines(input, pos);
        if pos == input.len() {
            break;
        }
        let start = pos;
        let (len, block_end) = match block(input, start) {
            Block::Cut => {
                let cut = MalformedReason::Truncated {
                    expected: 0,
                    got: 0,
                };
                malformed(&mut out, cut, &input[start..]);
                break;
            }
            Block::Broken { reason, at, next } => {
                // Everything up to the next `Content-Length` name is dropped.
                let next = next.unwrap_or_else(|| find_name(input, at));
                malformed(&mut out, reason, &input[start..next]);
                pos = next;
                continue;
            }
            Block::Good { len, end } => (len, end),
        };
        let rest = &input[block_end..];
        if len == 0 {
            stats.blank_lines += 1;
            pos = block_end;
            continue;
        }
        if (rest.len() as u64) < len {
            let got = rest.len() as u64;
            malformed(
                &mut out,
                MalformedReason::Truncated { expected: len, got },
                rest,
            );
            break;
        }
        let body = &rest[..len as usize];
        pos = block_end + body.len();
        if len > max_message_size as u64 {
            stats.oversized += 1;
            // The id is read from the whole body at once: the decoder must
            // find the same one however the body was chunked.
            let mut id = crate::jsonrpc::IdScanner::new();
            id.feed(body);
            out.push(Frame::Oversized(
                Oversized::new(len, head(body)).with_json_rpc_id(id.id()),
            ));
        } else {
            stats.messages += 1;
            stats.bytes += len;
            out.push(Frame::Message(Message::new(body.to_vec())));
        }
    }
    (out, stats)
}

/// The name that carries the body's length.
const NAME: &[u8] = b"content-length";

/// How a header block starting at some index reads.
enum Block {
    /// Usable: a body of `len` bytes follows at `end`.
    Good { len: u64, end: usize },
    /// The byte at `at` shows it cannot be used. With `next`, a
    /// `Content-Length` name where none belongs begins there; else the next
    /// header is searched for from `at`.
    Broken {
        reason: MalformedReason,
        at: usize,
        next: Option<usize>,
    },
    /// The stream ends inside it.
    Cut,
}

/// How one line of a header block reads.
enum Line {
    /// A blank line, ending before `end`.
    Blank {
        end: usize,
    },
    /// A header line ending before `end`; `length` if it is `Content-Length`.
    Header {
        end: usize,
        length: Option<u64>,
    },
    Broken {
        reason: MalformedReason,
        at: usize,
        next: Option<usize>,
    },
    Cut,
}

/// `pos` moved past any `\n` and `\r\n` lines.
fn skip_blank_lines(input: &[u8], mut pos: usize) -> usize {
    loop {
        let rest = &input[pos..];
        if rest.starts_with(b"\n") {
            pos += 1;
        } else if rest.starts_with(b"\r\n") {
            pos += 2;
        } else {
            return pos;
        }
    }
}

/// The header block starting at `start` (not a blank line), line by line.
/// Problems are found in byte order, and a block still going on at byte
/// [`MAX_HEADER_LEN`] breaks there.
fn block(input: &[u8], start: usize) -> Block {
    let bound = start + MAX_HEADER_LEN;
    let too_long = Block::Broken {
        reason: MalformedReason::InvalidHeader,
        at: bound,
        next: None,
    };
    let mut length = None;
    let mut at = start;
    loop {
        match line(input, at, length) {
            Line::Cut if input.len() > bound => return too_long,
            Line::Cut => return Block::Cut,
            Line::Broken { at, .. } if at >= bound => return too_long,
            Line::Broken { reason, at, next } => return Block::Broken { reason, at, next },
            Line::Blank { end } | Line::Header { end, .. } if end > bound => return too_long,
            Line::Blank { end } => {
                return match length {
                    Some(len) => Block::Good { len, end },
                    None => Block::Broken {
                        reason: MalformedReason::MissingLength,
                        at: end,
                        next: None,
                    },
                };
            }
            Line::Header { end, length: found } => {
                length = found.or(length);
                at = end;
            }
        }
    }
}

/// The line starting at `at`, given the `Content-Length` seen before it.
fn line(input: &[u8], at: usize, length: Option<u64>) -> Line {
    let rest = &input[at..];
    if rest.starts_with(b"\n") {
        return Line::Blank { end: at + 1 };
    }
    if rest.starts_with(b"\r\n") {
        return Line::Blank { end: at + 2 };
    }
    if rest == b"\r" {
        return Line::Cut;
    }
    if rest.starts_with(b"\r") {
        return broken(MalformedReason::InvalidHeader, at + 1);
    }
    let mut i = at;
    while input.get(i).is_some_and(|&b| is_ows(b)) {
        i += 1;
    }
    let name_start = i;
    while input.get(i).is_some_and(|&b| is_tchar(b)) {
        i += 1;
        if i - name_start > NAME.len() && input[i - NAME.len()..i].eq_ignore_ascii_case(NAME) {
            return Line::Broken {
                reason: MalformedReason::InvalidHeader,
                at: i - 1,
                next: Some(i - NAME.len()),
            };
        }
    }
    let name = &input[name_start..i];
    while input.get(i).is_some_and(|&b| is_ows(b)) {
        i += 1;
    }
    match input.get(i) {
        None => return Line::Cut,
        Some(b':') if !name.is_empty() => {}
        Some(_) => return broken(MalformedReason::InvalidHeader, i),
    }
    if name.eq_ignore_ascii_case(NAME) {
        length_value(input, i + 1, length)
    } else {
        other_value(input, i + 1)
    }
}

/// A `Content-Length` value starting at `i`, through its line's end.
fn length_value(input: &[u8], mut i: usize, length: Option<u64>) -> Line {
    let invalid = |at| broken(MalformedReason::InvalidLength, at);
    while input.get(i).is_some_and(|&b| is_ows(b)) {
        i += 1;
    }
    let mut value: Option<u64> = None;
    while let Some(&digit @ b'0'..=b'9') = input.get(i) {
        let next = value
            .unwrap_or(0)
            .checked_mul(10)
            .and_then(|n| n.checked_add(u64::from(digit - b'0')));
        if next.is_none() {
            return invalid(i);
        }
        value = next;
        i += 1;
    }
    while input.get(i).is_some_and(|&b| is_ows(b)) {
        i += 1;
    }
    match input.get(i) {
        None => return Line::Cut,
        Some(b'\n') => {}
        Some(b'\r') => match input.get(i + 1) {
            None => return Line::Cut,
            Some(b'\n') => i += 1,
            Some(_) => return invalid(i + 1),
        },
        Some(_) => return invalid(i),
    }
    match value {
        Some(value) if length.is_none() || length == Some(value) => Line::Header {
            end: i + 1,
            length: Some(value),
        },
        _ => invalid(i),
    }
}

/// Another header's value starting at `i`, through its line's end.
fn other_value(input: &[u8], mut i: usize) -> Line {
    let value_start = i;
    loop {
        match input.get(i) {
            None => return Line::Cut,
            Some(b'\n') => {
                return Line::Header {
                    end: i + 1,
                    length: None,
                };
            }
            Some(_) => i += 1,
        }
        if i - value_start >= NAME.len() && input[i - NAME.len()..i].eq_ignore_ascii_case(NAME) {
            return Line::Broken {
                reason: MalformedReason::InvalidHeader,
                at: i - 1,
                next: Some(i - NAME.len()),
            };
        }
    }
}

fn broken(reason: MalformedReason, at: usize) -> Line {
    Line::Broken {
        reason,
        at,
        next: None,
    }
}

/// Where the next `Content-Length` name (any case) begins at or after
/// `from`, or the end of the input.
fn find_name(input: &[u8], from: usize) -> usize {
    (from..input.len())
        .find(|&i| {
            input
                .get(i..i + NAME.len())
                .is_some_and(|w| w.eq_ignore_ascii_case(NAME))
        })
        .unwrap_or(input.len())
}

fn is_ows(b: u8) -> bool {
    b == b' ' || b == b'\t'
}

/// RFC 9110's `tchar`, the characters of a header name.
fn is_tchar(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&b)
}

/// The most a decoder with limit `max_message_size` may hold once every
/// frame was taken: one of a body being collected, a header block's head,
/// a dropped span's head, or an oversized body's head.
pub fn drained_bound(max_message_size: usize) -> usize {
    max_message_size.max(OVERSIZED_HEAD_LEN)
}

/// The most a decoder with limit `max_message_size` may hold right after it
/// was given `chunk_len` bytes, before its frames are taken: what it held
/// drained, and the chunk.
pub fn fed_bound(max_message_size: usize, chunk_len: usize) -> usize {
    drained_bound(max_message_size) + chunk_len
}

/// Gives `chunk` to `decoder` (copied by `handle_data`, or as `Bytes` by
/// `handle_bytes` when `by_bytes`), appends every frame it completes to
/// `out`, and checks [`fed_bound`] before the frames are taken and
/// [`drained_bound`] after.
///
/// # Panics
///
/// If the decoder holds more than the bound allows.
pub fn feed(
    decoder: &mut ContentLengthDecoder,
    chunk: &[u8],
    by_bytes: bool,
    out: &mut Vec<Frame>,
) {
    if by_bytes {
        decoder.handle_bytes(Bytes::copy_from_slice(chunk));
    } else {
        decoder.handle_data(chunk);
    }
    let max = decoder.max_message_size();
    let bound = fed_bound(max, chunk.len());
    assert!(
        decoder.buffered() <= bound,
        "buffered {} > {bound} (max {max}, chunk {})",
        decoder.buffered(),
        chunk.len()
    );
    out.extend(std::iter::from_fn(|| decoder.poll_frame()));
    assert!(
        decoder.buffered() <= drained_bound(max),
        "buffered {} after draining (max {max})",
        decoder.buffered()
    );
}

/// Ends `decoder`'s stream and appends its last frames to `out`; checks that
/// it then holds nothing and stays drained.
///
/// # Panics
///
/// If the decoder holds anything once drained, or yields a frame after.
pub fn finish(decoder: &mut ContentLengthDecoder, out: &mut Vec<Frame>) {
    decoder.handle_eof();
    out.extend(std::iter::from_fn(|| decoder.poll_frame()));
    assert_eq!(
        decoder.poll_frame(),
        None,
        "a drained decoder stays drained"
    );
    assert_eq!(decoder.buffered(), 0, "nothing held after EOF is drained");
}

fn head(dropped: &[u8]) -> Bytes {
    Bytes::copy_from_slice(&dropped[..dropped.len().min(OVERSIZED_HEAD_LEN)])
}
