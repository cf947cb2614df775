//! A plain, non-streaming model of [`ContentLengthDecoder`]'s rules, written
//! for obviousness rather than speed: the whole input is in one slice, so no
//! state crosses a chunk boundary. It shares no code with the decoder, so a
//! test or fuzz target that compares the two checks one against the other.
//!
//! Beside the model, the decoder's documented memory bound, and [`feed`] and
//! [`finish`], which drive a real decoder and check that bound at every
//! step, so that every test and fuzz target holds it to the same rule.

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
    let mut rest = input;
    while !rest.is_empty() {
        let Some(start) = find(rest, b"\r\n\r\n") else {
            // No end of the header block before the stream ends.
            let reason = if rest.len() >= MAX_HEADER_LEN {
                MalformedReason::InvalidHeader
            } else {
                MalformedReason::Truncated {
                    expected: 0,
                    got: 0,
                }
            };
            malformed(&mut out, reason, rest);
            break;
        };
        let block_end = start + 4;
        let (block, after) = rest.split_at(block_end);
        rest = after;
        if block_end > MAX_HEADER_LEN {
            malformed(&mut out, MalformedReason::InvalidHeader, block);
            continue;
        }
        let len = match parse_block(&block[..start]) {
            Ok(len) => len,
            Err(reason) => {
                malformed(&mut out, reason, block);
                continue;
            }
        };
        if len == 0 {
            stats.blank_lines += 1;
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
        let (body, after) = rest.split_at(len as usize);
        rest = after;
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

/// The most a decoder with limit `max_message_size` may hold once every
/// frame was taken: one of a body being collected, a header block, or an
/// oversized body's head.
pub fn drained_bound(max_message_size: usize) -> usize {
    max_message_size.max(MAX_HEADER_LEN).max(OVERSIZED_HEAD_LEN)
}

/// The most a decoder with limit `max_message_size` may hold right after it
/// was given `chunk_len` bytes, before its frames are taken: a body, a header
/// block and a head at a time, and the chunk.
pub fn fed_bound(max_message_size: usize, chunk_len: usize) -> usize {
    max_message_size + MAX_HEADER_LEN + OVERSIZED_HEAD_LEN + chunk_len
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

/// The body length a header block (without its final `\r\n\r\n`) announces,
/// or the reason of the first line that is wrong.
fn parse_block(block: &[u8]) -> Result<u64, MalformedReason> {
    let mut length: Option<u64> = None;
    for line in split_crlf(block) {
        if line.is_empty() {
            continue;
        }
        let Some(colon) = line.iter().position(|&b| b == b':') else {
            return Err(MalformedReason::InvalidHeader);
        };
        let name = trim(&line[..colon]).to_ascii_lowercase();
        if name != b"content-length" {
            continue;
        }
        let value = trim(&line[colon + 1..]);
        let parsed = std::str::from_utf8(value)
            .ok()
            .filter(|text| !text.is_empty() && text.bytes().all(|b| b.is_ascii_digit()))
            .and_then(|text| text.parse::<u64>().ok());
        match (parsed, length) {
            (None, _) => return Err(MalformedReason::InvalidLength),
            (Some(new), Some(old)) if new != old => return Err(MalformedReason::InvalidLength),
            (Some(new), _) => length = Some(new),
        }
    }
    length.ok_or(MalformedReason::MissingLength)
}

/// `bytes` split on every `\r\n`.
fn split_crlf(bytes: &[u8]) -> Vec<&[u8]> {
    let mut lines = Vec::new();
    let mut start = 0;
    let mut i = 0;
    while i + 1 < bytes.len() {
        if &bytes[i..i + 2] == b"\r\n" {
            lines.push(&bytes[start..i]);
            i += 2;
            start = i;
        } else {
            i += 1;
        }
    }
    lines.push(&bytes[start..]);
    lines
}

fn trim(bytes: &[u8]) -> &[u8] {
    let mut bytes = bytes;
    while let [b' ' | b'\t', rest @ ..] = bytes {
        bytes = rest;
    }
    while let [rest @ .., b' ' | b'\t'] = bytes {
        bytes = rest;
    }
    bytes
}

/// Where `needle` first occurs in `haystack`.
fn find(haystack: &[u8], needle: &[u8]) -> Option<usize> {
    haystack.windows(needle.len()).position(|w| w == needle)
}

fn head(dropped: &[u8]) -> Bytes {
    Bytes::copy_from_slice(&dropped[..dropped.len().min(OVERSIZED_HEAD_LEN)])
}
