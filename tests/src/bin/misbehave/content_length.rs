//! `content-length-lie KIND`: a Content-Length peer that lies once, then writes 20 good frames
//! (C35). Each piece is written and flushed on its own, so the reader meets them in separate reads.

use std::io::{self, Write};

/// How many good frames follow the lie.
const GOOD_FRAMES: usize = 20;

/// The lie told before the good frames.
pub(crate) enum Lie {
    /// A header claiming 5 bytes before a 33-byte body.
    Short,
    /// A `Content-Length` header, then a 9000-byte header line, then the body.
    OverLong,
    /// No lie: every other good frame's header lines end with `\n` alone.
    LfOnly,
}

impl Lie {
    pub(crate) fn parse(kind: &str) -> Option<Lie> {
        match kind {
            "short" => Some(Lie::Short),
            "over-long" => Some(Lie::OverLong),
            "lf-only" => Some(Lie::LfOnly),
            _ => None,
        }
    }
}

/// Writes `lie`, then the good frames `{"jsonrpc":"2.0","method":"n","params":I}`.
pub(crate) fn lie_then_good_frames(lie: Lie) -> io::Result<()> {
    match lie {
        Lie::Short => {
            write_piece(b"Content-Length: 5\r\n\r\n")?;
            write_piece(br#"{"jsonrpc":"2.0","method":"lie"}"#)?;
        }
        Lie::OverLong => {
            let body = br#"{"jsonrpc":"2.0","method":"over-long"}"#;
            let mut head = format!("Content-Length: {}\r\nX-Padding: ", body.len()).into_bytes();
            head.resize(head.len() + 9000, b'p');
            head.extend_from_slice(b"\r\n\r\n");
            write_piece(&head)?;
            write_piece(body)?;
        }
        Lie::LfOnly => {}
    }
    good_frames_with(GOOD_FRAMES, |n| matches!(lie, Lie::LfOnly) && n % 2 == 0)
}

/// Writes `count` good frames, as an LSP server would.
pub(crate) fn good_frames(count: usize) -> io::Result<()> {
    good_frames_with(count, |_| false)
}

/// Writes `count` good frames; those `sloppy` says end header lines with `\n` alone.
fn good_frames_with(count: usize, sloppy: impl Fn(usize) -> bool) -> io::Result<()> {
    for n in 0..count {
        let body = format!("{{\"jsonrpc\":\"2.0\",\"method\":\"n\",\"params\":{n}}}");
        let eol = if sloppy(n) { "\n" } else { "\r\n" };
        write_piece(format!("Content-Length: {}{eol}{eol}{body}", body.len()).as_bytes())?;
    }
    Ok(())
}

fn write_piece(bytes: &[u8]) -> io::Result<()> {
    let mut out = io::stdout().lock();
    out.write_all(bytes)?;
    out.flush()
}
