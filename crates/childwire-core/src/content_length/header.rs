//! Reading one header block as its bytes arrive: the line rules of
//! [`ContentLengthDecoder`](super::ContentLengthDecoder), one byte at a time
//! and resumable at any chunk boundary, and the search for the next
//! `Content-Length` name after a broken frame.

use bytes::BytesMut;

use super::MAX_HEADER_LEN;
use crate::frame::{MalformedReason, OVERSIZED_HEAD_LEN};

/// The header name that carries the body's length, compared ignoring case.
pub(super) const NAME: &[u8; 14] = b"content-length";

/// Where the bytes `content-length` (any case) end in a run of bytes fed
/// one at a time, and those bytes as they came.
///
/// `c` occurs in the name only at its start, so when a byte breaks a match
/// no later start can hide in the bytes already matched: the match restarts
/// at that byte, and no occurrence is missed.
#[derive(Debug, Clone, Copy, Default)]
pub(super) struct NameMatch {
    len: u8,
    bytes: [u8; NAME.len()],
}

impl NameMatch {
    /// Feeds the next byte; true when it completes the name.
    pub(super) fn feed(&mut self, byte: u8) -> bool {
        let at = usize::from(self.len);
        let lower = byte.to_ascii_lowercase();
        if at < NAME.len() && lower == NAME[at] {
            self.bytes[at] = byte;
            self.len += 1;
        } else if lower == NAME[0] {
            self.bytes[0] = byte;
            self.len = 1;
        } else {
            self.len = 0;
        }
        self.is_complete()
    }

    /// A complete match of `bytes`, which are the name in some case.
    fn of(bytes: &[u8]) -> Self {
        let mut name = Self {
            len: NAME.len() as u8,
            bytes: [0; NAME.len()],
        };
        name.bytes.copy_from_slice(bytes);
        name
    }

    /// The bytes of a match in progress (all of them once complete).
    pub(super) fn matched(&self) -> &[u8] {
        &self.bytes[..usize::from(self.len)]
    }

    pub(super) fn is_complete(&self) -> bool {
        usize::from(self.len) == NAME.len()
    }

    fn reset(&mut self) {
        self.len = 0;
    }
}

/// Where a header block's reading stands, between any two bytes.
#[derive(Debug, Clone, Copy)]
enum Phase {
    /// At the start of a line.
    LineStart,
    /// After a `\r` at the start of a line: a blank line if `\n` follows.
    LineCr,
    /// In a line's name: `len` token characters so far (0: none yet, only
    /// spaces or tabs).
    Name { len: usize },
    /// Spaces or tabs after a name, before its `:`.
    AfterName { length: bool },
    /// A `Content-Length` value: spaces or tabs, digits, spaces or tabs.
    Length { value: Option<u64>, trailing: bool },
    /// A `\r` after a `Content-Length` value: `\n` must follow.
    LengthCr { value: Option<u64> },
    /// Another header's value, up to its `\n`.
    Value,
}

/// What [`Block::scan`] found in the bytes it was given.
#[derive(Debug)]
pub(super) enum Scan {
    /// Every byte belongs to the block (or to blank lines before it), which
    /// goes on.
    More,
    /// The block ends before `end`; its body is `len` bytes.
    Done { end: usize, len: u64 },
    /// The byte at `at` shows that the block cannot be used. `span` is how
    /// many of the block's bytes come before the point the search for the
    /// next header starts from: `at`, or, with `next_header`, the start of
    /// the `Content-Length` name that the byte at `at` completed (then the
    /// new block starts with that name, and the bytes through `at` are
    /// read).
    Broken {
        at: usize,
        reason: MalformedReason,
        span: usize,
        next_header: bool,
    },
}

/// A header block being read. A fresh one is at a frame boundary, where
/// blank lines are skipped.
#[derive(Debug)]
pub(super) struct Block {
    /// Bytes of the block read so far: [`MAX_HEADER_LEN`] bounds them.
    pub(super) len: usize,
    /// The block's first bytes (up to [`OVERSIZED_HEAD_LEN`]) that came in
    /// earlier chunks: a notice's head if the block is dropped. Allocated
    /// only when a block straddles chunks.
    pub(super) held: BytesMut,
    /// A header line has ended: a blank line now ends the block instead of
    /// being skipped.
    lines: bool,
    /// The `Content-Length` value of the lines so far.
    length: Option<u64>,
    phase: Phase,
    /// `content-length` in the current name or value.
    name: NameMatch,
}

impl Block {
    /// A block at a frame boundary.
    pub(super) fn new() -> Self {
        Self {
            len: 0,
            held: BytesMut::new(),
            lines: false,
            length: None,
            phase: Phase::LineStart,
            name: NameMatch::default(),
        }
    }

    /// A block whose first bytes are the `Content-Length` name in `name`,
    /// found after a broken frame.
    pub(super) fn starting_with(name: &NameMatch) -> Self {
        // The whole head's room at once: growing it later could overshoot.
        let mut held = BytesMut::with_capacity(OVERSIZED_HEAD_LEN);
        held.extend_from_slice(name.matched());
        Self {
            len: NAME.len(),
            held,
            lines: false,
            length: None,
            phase: Phase::Name { len: NAME.len() },
            name: *name,
        }
    }

    /// Nothing of a block read yet: the fast path for the usual block may
    /// look at the next bytes.
    pub(super) fn is_fresh(&self) -> bool {
        self.len == 0 && !self.lines && matches!(self.phase, Phase::LineStart)
    }

    /// The `Content-Length` name the last byte scanned completed, if any.
    pub(super) fn name_match(&self) -> &NameMatch {
        &self.name
    }

    /// Keeps the first bytes of a block that goes on in the next chunk.
    pub(super) fn hold(&mut self, bytes: &[u8]) {
        let room = OVERSIZED_HEAD_LEN - self.held.len().min(OVERSIZED_HEAD_LEN);
        let n = bytes.len().min(room);
        if n == 0 {
            return;
        }
        if self.held.capacity() == 0 {
            self.held = BytesMut::with_capacity(OVERSIZED_HEAD_LEN);
        }
        self.held.extend_from_slice(&bytes[..n]);
    }

    /// Reads `data`, the next bytes of the stream, up to the end of the
    /// block or the byte that breaks it. Also returns where the block
    /// starts in `data`: after the blank lines skipped before it (0 when it
    /// began in an earlier chunk).
    pub(super) fn scan(&mut self, data: &[u8]) -> (usize, Scan) {
        let mut start = 0;
        let mut i = 0;
        while i < data.len() {
            // The block's bytes before `data[i]`.
            let index = self.len + (i - start);
            if index >= MAX_HEADER_LEN {
                return (start, broken(i, MalformedReason::InvalidHeader, index));
            }
            let byte = data[i];
            // A name or another header's value that ends in this chunk,
            // within the bound, is read at once; the byte path below is
            // what it stands for, and takes over otherwise.
            let limit = data.len().min(i + (MAX_HEADER_LEN - index));
            let whole = match self.phase {
                Phase::Name { len: 0 } if is_tchar(byte) => {
                    let run = data[i..limit].iter().take_while(|&&b| is_tchar(b)).count();
                    (i + run < limit).then(|| {
                        let name = &data[i..i + run];
                        // The first `Content-Length` after the name's start.
                        match find_name(&name[1..]) {
                            Some(k) => Err(k + 1),
                            None => {
                                self.name = if name.eq_ignore_ascii_case(NAME) {
                                    NameMatch::of(name)
                                } else {
                                    NameMatch::default()
                                };
                                self.phase = Phase::Name { len: run };
                                Ok(i + run)
                            }
                        }
                    })
                }
                Phase::Value if self.name.matched().is_empty() => {
                    memchr::memchr(b'\n', &data[i..limit]).map(|end| {
                        match find_name(&data[i..i + end]) {
                            Some(k) => Err(k),
                            None => {
                                self.lines = true;
                                self.phase = Phase::LineStart;
                                Ok(i + end + 1)
                            }
                        }
                    })
                }
                _ => None,
            };
            match whole {
                Some(Ok(next)) => {
                    i = next;
                    continue;
                }
                Some(Err(k)) => {
                    // A `Content-Length` where none belongs: the bytes
                    // before it ran into the next header.
                    self.name = NameMatch::of(&data[i + k..i + k + NAME.len()]);
                    let at = i + k + NAME.len() - 1;
                    return (start, next_header(at, index + (at - i)));
                }
                None => {}
            }
            match self.phase {
                Phase::LineStart => match byte {
                    b'\n' if !self.lines => start = i + 1,
                    b'\n' => return (start, self.end(i + 1, index + 1)),
                    b'\r' => self.phase = Phase::LineCr,
                    _ => {
                        self.phase = Phase::Name { len: 0 };
                        self.name.reset();
                        // The same byte again, as the name's first.
                        continue;
                    }
                },
                Phase::LineCr => match byte {
                    b'\n' if !self.lines => {
                        // A blank line before the block: not part of it.
                        start = i + 1;
                        self.len = 0;
                        self.held.clear();
                        self.phase = Phase::LineStart;
                    }
                    b'\n' => return (start, self.end(i + 1, index + 1)),
                    _ => return (start, broken(i, MalformedReason::InvalidHeader, index)),
                },
                Phase::Name { len } => match byte {
                    _ if is_tchar(byte) => {
                        self.phase = Phase::Name { len: len + 1 };
                        if self.name.feed(byte) && len + 1 > NAME.len() {
                            // A `Content-Length` inside a longer name: the
                            // bytes before it ran into the next header.
                            return (start, next_header(i, index));
                        }
                    }
                    b' ' | b'\t' if len > 0 => {
                        self.phase = Phase::AfterName {
                            length: len == NAME.len() && self.name.is_complete(),
                        };
                    }
                    b' ' | b'\t' => {}
                    b':' if len > 0 => {
                        self.value(len == NAME.len() && self.name.is_complete());
                    }
                    _ => return (start, broken(i, MalformedReason::InvalidHeader, index)),
                },
                Phase::AfterName { length } => match byte {
                    b' ' | b'\t' => {}
                    b':' => self.value(length),
                    _ => return (start, broken(i, MalformedReason::InvalidHeader, index)),
                },
                Phase::Length { value, trailing } => match byte {
                    b' ' | b'\t' => {
                        self.phase = Phase::Length {
                            value,
                            trailing: value.is_some(),
                        };
                    }
                    b'0'..=b'9' if !trailing => {
                        let digit = u64::from(byte - b'0');
                        let Some(value) = value
                            .unwrap_or(0)
                            .checked_mul(10)
                            .and_then(|n| n.checked_add(digit))
                        else {
                            return (start, broken(i, MalformedReason::InvalidLength, index));
                        };
                        self.phase = Phase::Length {
                            value: Some(value),
                            trailing,
                        };
                    }
                    b'\r' => self.phase = Phase::LengthCr { value },
                    b'\n' => {
                        if let Err(scan) = self.length_line(value, i, index) {
                            return (start, scan);
                        }
                    }
                    _ => return (start, broken(i, MalformedReason::InvalidLength, index)),
                },
                Phase::LengthCr { value } => match byte {
                    b'\n' => {
                        if let Err(scan) = self.length_line(value, i, index) {
                            return (start, scan);
                        }
                    }
                    _ => return (start, broken(i, MalformedReason::InvalidLength, index)),
                },
                Phase::Value => {
                    if self.name.matched().is_empty() && !matches!(byte, b'\n' | b'c' | b'C') {
                        // Skip to the next byte that can end the line or
                        // start a name, within the bound.
                        let limit = data.len().min(i + (MAX_HEADER_LEN - index));
                        i = memchr::memchr3(b'\n', b'c', b'C', &data[i + 1..limit])
                            .map_or(limit, |k| i + 1 + k);
                        continue;
                    }
                    if byte == b'\n' {
                        self.lines = true;
                        self.phase = Phase::LineStart;
                    } else if self.name.feed(byte) {
                        // A `Content-Length` inside another header's value:
                        // the bytes before it ran into the next header.
                        return (start, next_header(i, index));
                    }
                }
            }
            i += 1;
        }
        self.len += data.len() - start;
        (start, Scan::More)
    }

    /// Enters a header's value after its `:`.
    fn value(&mut self, length: bool) {
        self.name.reset();
        self.phase = if length {
            Phase::Length {
                value: None,
                trailing: false,
            }
        } else {
            Phase::Value
        };
    }

    /// The `\n` at `at` ends a `Content-Length` line with `value`.
    fn length_line(&mut self, value: Option<u64>, at: usize, index: usize) -> Result<(), Scan> {
        match value {
            Some(value) if self.length.is_none_or(|seen| seen == value) => {
                self.length = Some(value);
                self.lines = true;
                self.phase = Phase::LineStart;
                Ok(())
            }
            // No digits, or a value that disagrees with an earlier one.
            _ => Err(broken(at, MalformedReason::InvalidLength, index)),
        }
    }

    /// The blank line that ends the block ends before `end`; the block is
    /// `len` bytes.
    fn end(&self, end: usize, len: usize) -> Scan {
        match self.length {
            Some(body) => Scan::Done { end, len: body },
            None => Scan::Broken {
                at: end,
                reason: MalformedReason::MissingLength,
                span: len,
                next_header: false,
            },
        }
    }
}

fn broken(at: usize, reason: MalformedReason, index: usize) -> Scan {
    Scan::Broken {
        at,
        reason,
        span: index,
        next_header: false,
    }
}

/// The byte at `at` (block index `index`) completed a `Content-Length`
/// name where none belongs.
fn next_header(at: usize, index: usize) -> Scan {
    Scan::Broken {
        at,
        reason: MalformedReason::InvalidHeader,
        span: index + 1 - NAME.len(),
        next_header: true,
    }
}

/// Where the first `content-length` (any case) begins in `bytes`, a
/// header's name or value: short, so a plain loop beats `memchr`'s setup.
fn find_name(bytes: &[u8]) -> Option<usize> {
    let last = bytes.len().checked_sub(NAME.len())?;
    (0..=last).find(|&at| {
        bytes[at] | 0x20 == b'c'
            && bytes[at + 1] | 0x20 == b'o'
            && bytes[at..at + NAME.len()].eq_ignore_ascii_case(NAME)
    })
}

/// A character a header name may hold (RFC 9110's `tchar`).
#[inline]
fn is_tchar(byte: u8) -> bool {
    TCHAR[usize::from(byte)]
}

/// [`is_tchar`] as a table: letters, digits and ``!#$%&'*+-.^_`|~``.
static TCHAR: [bool; 256] = {
    let mut table = [false; 256];
    let mut b = 0;
    while b < 256 {
        let c = b as u8;
        table[b] = c.is_ascii_alphanumeric()
            || matches!(
                c,
                b'!' | b'#'
                    | b'$'
                    | b'%'
                    | b'&'
                    | b'\''
                    | b'*'
                    | b'+'
                    | b'-'
                    | b'.'
                    | b'^'
                    | b'_'
                    | b'`'
                    | b'|'
                    | b'~'
            );
        b += 1;
    }
    table
};

/// The bytes dropped after a broken frame, up to the next `Content-Length`
/// name (any case, wherever it begins).
#[derive(Debug)]
pub(super) struct Resync {
    pub(super) reason: MalformedReason,
    /// The first dropped bytes, up to [`OVERSIZED_HEAD_LEN`]; taken once
    /// the notice is given.
    head: BytesMut,
    /// The notice was given: its head was full before the next header came.
    sent: bool,
    /// A name begun in the bytes read so far.
    name: NameMatch,
}

/// What [`Resync::scan`] found.
#[derive(Debug)]
pub(super) enum Found {
    /// No header yet; every byte was read.
    Nothing,
    /// The head is full: the notice is due. The bytes before `read` were
    /// read.
    Notice { read: usize },
    /// A `Content-Length` name ends before `read`; the block it starts is
    /// `Block::starting_with(name)`.
    Header { read: usize, name: NameMatch },
}

impl Resync {
    /// Starts dropping bytes; `head` holds the dropped bytes so far.
    pub(super) fn new(reason: MalformedReason, head: BytesMut) -> Self {
        Self {
            reason,
            head,
            sent: false,
            name: NameMatch::default(),
        }
    }

    /// The notice is not given yet.
    pub(super) fn is_pending(&self) -> bool {
        !self.sent
    }

    /// The dropped bytes so far, while the notice is not given yet.
    pub(super) fn pending_head(&self) -> Option<&[u8]> {
        (!self.sent).then_some(&self.head[..])
    }

    /// Bytes held: see the memory bound on the decoder.
    pub(super) fn held(&self) -> usize {
        self.head.capacity()
    }

    /// The notice's head, once: the next header came, or the head is full.
    pub(super) fn take_head(&mut self) -> bytes::Bytes {
        self.sent = true;
        std::mem::take(&mut self.head).freeze()
    }

    /// The notice's head when the stream ended: a name begun at its end
    /// was dropped too.
    pub(super) fn take_head_at_eof(&mut self) -> bytes::Bytes {
        let pending = self.name;
        self.name.reset();
        self.drop_bytes(pending.matched());
        self.take_head()
    }

    /// Reads `data` until a `Content-Length` name ends in it or the head
    /// fills.
    pub(super) fn scan(&mut self, data: &[u8]) -> Found {
        let mut i = 0;
        while i < data.len() {
            if self.name.matched().is_empty() {
                match memchr::memchr2(b'c', b'C', &data[i..]) {
                    Some(k) => {
                        self.drop_bytes(&data[i..i + k]);
                        i += k;
                    }
                    None => {
                        self.drop_bytes(&data[i..]);
                        i = data.len();
                    }
                }
                if self.head_full() {
                    return Found::Notice { read: i };
                }
                if i == data.len() {
                    break;
                }
            }
            let before = self.name;
            let byte = data[i];
            i += 1;
            if self.name.feed(byte) {
                let name = self.name;
                self.name.reset();
                return Found::Header { read: i, name };
            }
            if self.name.matched().len() != before.matched().len() + 1 {
                // The match broke: what it held is dropped, and so is this
                // byte unless it starts a new one.
                self.drop_bytes(before.matched());
                if self.name.matched().is_empty() {
                    self.drop_bytes(&[byte]);
                }
                if self.head_full() {
                    return Found::Notice { read: i };
                }
            }
        }
        Found::Nothing
    }

    fn head_full(&self) -> bool {
        !self.sent && self.head.len() >= OVERSIZED_HEAD_LEN
    }

    fn drop_bytes(&mut self, bytes: &[u8]) {
        if self.sent {
            return;
        }
        let room = OVERSIZED_HEAD_LEN.saturating_sub(self.head.len());
        self.head.extend_from_slice(&bytes[..bytes.len().min(room)]);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Where every match ends when `text` is fed byte by byte.
    fn match_ends(text: &[u8]) -> Vec<usize> {
        let mut name = NameMatch::default();
        (0..text.len()).filter(|&i| name.feed(text[i])).collect()
    }

    #[test]
    fn name_match_finds_every_occurrence_after_false_starts() {
        assert_eq!(match_ends(b"Content-Length"), [13]);
        assert_eq!(match_ends(b"ccontent-LENGTH"), [14]);
        assert_eq!(match_ends(b"content-lencontent-length"), [24]);
        assert_eq!(match_ends(b"content-lengthcontent-length"), [13, 27]);
        assert_eq!(match_ends(b"content-lengtx content_length"), []);
        let text = b"xx}CONTENT-length: 5\r\n\r\n{\"a\":\"content-length\"}";
        let windows: Vec<usize> = (NAME.len()..=text.len())
            .filter(|&end| text[end - NAME.len()..end].eq_ignore_ascii_case(NAME))
            .map(|end| end - 1)
            .collect();
        assert_eq!(match_ends(text), windows);
    }

    #[test]
    fn a_name_match_keeps_the_bytes_as_they_came() {
        let mut name = NameMatch::default();
        for &b in b"xCoNtEnT-LeNgTh" {
            name.feed(b);
        }
        assert!(name.is_complete());
        assert_eq!(name.matched(), b"CoNtEnT-LeNgTh");
    }
}
