//! Streams of good `Content-Length` frames with one lie told among them,
//! and what must still arrive after it: the resynchronisation promise of
//! [`ContentLengthDecoder`](crate::ContentLengthDecoder), written once
//! for the core's tests and the `content_length_resync` fuzz target.
//!
//! The good frames' bodies hold no line break, as JSON text never does: a
//! body that holds a whole header block is a frame to any decoder, and no
//! rule could tell it from one.

use crate::content_length::MAX_HEADER_LEN;
use crate::frame::Frame;

/// One lie, told in place of a frame: its kind, the body it carries (or
/// its bytes, for [`Kind::Garbage`]) and a count whose meaning the kind
/// gives.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Lie {
    /// What is wrong.
    pub kind: Kind,
    /// The body the frame carries, or the garbage.
    pub body: Vec<u8>,
    /// How many bytes [`Kind::Short`] claims too few, [`Kind::Long`] too
    /// many (at least one either way), or [`Kind::Cut`] keeps.
    pub by: usize,
}

/// The kinds of [`Lie`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// A header claiming fewer bytes than its body has.
    Short,
    /// A header claiming more bytes than its body has: it swallows the
    /// start of what follows.
    Long,
    /// A well-formed frame cut after `by` of its bytes (fewer than all).
    Cut,
    /// Bytes that are no frame (a `\n` in them is replaced).
    Garbage,
    /// A frame whose header lines end with `\n` alone: a good frame.
    LfOnly,
    /// A header block longer than [`MAX_HEADER_LEN`], then its body.
    OverLong,
    /// A header block without `Content-Length`, then a body.
    MissingLength,
    /// A `Content-Length` that is not a byte count, then a body.
    BadLength,
}

/// A stream with one lie in it, and what must arrive.
#[derive(Debug, Clone)]
pub struct Told {
    /// The bytes on the wire.
    pub wire: Vec<u8>,
    /// The good frames' bodies, in order (with a [`Kind::LfOnly`] frame's).
    pub bodies: Vec<Vec<u8>>,
    /// Good frames before the lie: all of them must arrive first.
    pub before: usize,
    /// The first good frame that must arrive after the lie: the one after
    /// the first good header that starts where the lie's bytes, and the
    /// body its header claims, are over. Every frame from it on must
    /// arrive, in order, as the last messages.
    pub required: usize,
}

/// A body as JSON would write it: not empty, no line break.
fn clean(body: &[u8]) -> Vec<u8> {
    let mut body: Vec<u8> = body
        .iter()
        .map(|&b| if b == b'\n' || b == b'\r' { b' ' } else { b })
        .collect();
    if body.is_empty() {
        body.extend_from_slice(b"{}");
    }
    body
}

/// Good frame `index`: every third carries a `Content-Type` line first.
fn good_frame(index: usize, body: &[u8]) -> Vec<u8> {
    let mut wire = Vec::new();
    if index % 3 == 2 {
        wire.extend_from_slice(b"Content-Type: application/vscode-jsonrpc; charset=utf-8\r\n");
    }
    wire.extend_from_slice(format!("Content-Length: {}\r\n\r\n", body.len()).as_bytes());
    wire.extend_from_slice(body);
    wire
}

/// The lie's bytes, and how far past their start what its header claims
/// reaches (at least their length).
fn lie_bytes(lie: &Lie) -> (Vec<u8>, usize) {
    let body = clean(&lie.body);
    let mut wire = match lie.kind {
        Kind::Short => header(body.len().saturating_sub(lie.by.max(1))),
        Kind::Long => header(body.len() + lie.by.max(1)),
        Kind::Cut => header(body.len()),
        Kind::Garbage => {
            let garbage = lie
                .body
                .iter()
                .map(|&b| if b == b'\n' { b'?' } else { b })
                .collect();
            let len = lie.body.len();
            return (garbage, len);
        }
        Kind::LfOnly => format!("Content-Length: {}\n\n", body.len()).into_bytes(),
        Kind::OverLong => {
            let mut head = b"X-Padding: ".to_vec();
            head.resize(MAX_HEADER_LEN + 1, b'p');
            head.extend_from_slice(b"\r\n");
            head.extend(header(body.len()));
            head
        }
        Kind::MissingLength => b"Content-Type: application/json\r\n\r\n".to_vec(),
        Kind::BadLength => format!("Content-Length: -{}\r\n\r\n", body.len()).into_bytes(),
    };
    let header_len = wire.len();
    wire.extend_from_slice(&body);
    let len = wire.len();
    match lie.kind {
        Kind::Long => (wire, header_len + body.len() + lie.by.max(1)),
        Kind::Cut => {
            let keep = lie.by.min(len - 1);
            wire.truncate(keep);
            // Once the header is whole, its claim runs past the cut.
            (wire, if keep >= header_len { len } else { keep })
        }
        _ => (wire, len),
    }
}

fn header(len: usize) -> Vec<u8> {
    format!("Content-Length: {len}\r\n\r\n").into_bytes()
}

/// `bodies` as good frames, with `lie` told before frame `at` (or last).
pub fn tell(bodies: &[Vec<u8>], at: usize, lie: &Lie) -> Told {
    let mut good: Vec<Vec<u8>> = bodies.iter().map(|b| clean(b)).collect();
    let at = at.min(good.len());
    let (lie_wire, reach) = lie_bytes(lie);
    if lie.kind == Kind::LfOnly {
        // Accepted: it is one of the good frames.
        good.insert(at, clean(&lie.body));
        let mut wire = Vec::new();
        for (index, body) in good.iter().enumerate() {
            if index == at {
                wire.extend_from_slice(&lie_wire);
            } else {
                wire.extend(good_frame(index, body));
            }
        }
        return Told {
            wire,
            bodies: good,
            before: at,
            required: at,
        };
    }
    let mut wire = Vec::new();
    let mut starts = Vec::new();
    let mut lie_start = 0;
    for (index, body) in good.iter().enumerate() {
        if index == at {
            lie_start = wire.len();
            wire.extend_from_slice(&lie_wire);
        }
        starts.push(wire.len());
        wire.extend(good_frame(index, body));
    }
    if at == good.len() {
        lie_start = wire.len();
        wire.extend_from_slice(&lie_wire);
    }
    let reach = lie_start + reach;
    let required = starts
        .iter()
        .position(|&start| start >= reach)
        .map_or(good.len(), |next| next + 1);
    Told {
        wire,
        bodies: good,
        before: at,
        required,
    }
}

/// Whether `frames`, decoded from `told.wire` (with a limit no body
/// reaches), keep the promise: the frames before the lie arrive first, and
/// the frames from `told.required` on arrive last, in order.
pub fn check(told: &Told, frames: &[Frame]) -> Result<(), String> {
    let mut messages = Vec::new();
    for frame in frames {
        match frame {
            Frame::Message(m) => messages.push(&m[..]),
            Frame::Malformed(_) => {}
            other => return Err(format!("unexpected {other:?}")),
        }
    }
    let before: Vec<&[u8]> = told.bodies[..told.before].iter().map(|b| &b[..]).collect();
    if messages.get(..before.len()) != Some(&before[..]) {
        return Err(format!(
            "the {} frames before the lie did not arrive first: {messages:?}",
            before.len()
        ));
    }
    let after: Vec<&[u8]> = told.bodies[told.required..]
        .iter()
        .map(|b| &b[..])
        .collect();
    let arrived_after = &messages[before.len()..];
    if arrived_after.len() < after.len()
        || arrived_after[arrived_after.len() - after.len()..] != after[..]
    {
        return Err(format!(
            "frames {}.. did not arrive last, in order: {arrived_after:?}",
            told.required
        ));
    }
    Ok(())
}
