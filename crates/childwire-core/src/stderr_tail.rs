//! A bounded tail of the child's stderr, and its lines as events.
//!
//! # What a line is
//!
//! The bytes between two `\n`, without the `\n` and without one trailing
//! `\r`. After EOF the bytes after the last `\n`, if any, are a line too; while
//! the stream is open they are the *held partial line*, shown by
//! [`StderrTail::tail`] but not yet handed out by [`StderrTail::poll_line`].
//!
//! A line longer than `max_bytes` is cut: only its first `max_bytes` bytes
//! are kept (even if that splits a UTF-8 character, which then shows as
//! U+FFFD), the rest up to its `\n` is counted in
//! [`bytes_seen`](StderrTail::bytes_seen) and dropped. Blank lines are kept:
//! they are part of what the child wrote.
//!
//! # Levels and the summary line
//!
//! [`poll_leveled_line`](StderrTail::poll_leveled_line) hands out each line
//! with its [`Level`] (see
//! [`stderr_level`](crate::stderr_level) for the shapes recognized):
//! stderr is where servers log, and most of it is not an error.
//! [`summary_line`] picks the line of a tail that best says why a child
//! ended, for the exit report.

use std::collections::VecDeque;

use bytes::{Buf, BufMut, Bytes, BytesMut};

use crate::stderr_level::{Level, StderrLine, level_of};

/// Bounds of a [`StderrTail`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StderrTailConfig {
    /// Most bytes of line content the tail holds (the held partial line
    /// included, `\n` separators not counted), and the longest line kept
    /// whole. Default 64 KiB.
    pub max_bytes: usize,
    /// Most lines the tail holds, the held partial line included. Default 200.
    pub max_lines: usize,
    /// Most bytes waiting for [`StderrTail::poll_line`] (each line counts its
    /// length + 1). When full, the oldest waiting lines are dropped and
    /// counted in [`StderrTail::dropped_lines`]. A caller that polls after
    /// every `handle_data` never loses a line as long as each chunk is at most
    /// `max_pending_bytes - max_bytes`. Default 1 MiB.
    pub max_pending_bytes: usize,
}

impl Default for StderrTailConfig {
    fn default() -> Self {
        Self {
            max_bytes: 64 * 1024,
            max_lines: 200,
            max_pending_bytes: 1024 * 1024,
        }
    }
}

/// The child's last stderr lines, within fixed bounds, fed raw bytes.
///
/// Drain order: after every [`handle_data`](Self::handle_data) or
/// [`handle_eof`](Self::handle_eof), call [`poll_line`](Self::poll_line)
/// until `None` (each line for a callback or `tracing`). Read
/// [`tail`](Self::tail) whenever a report needs it.
///
/// Memory never exceeds about `max_bytes` for the partial line, `max_bytes`
/// plus `max_lines` small headers for the tail, and `max_pending_bytes` for
/// waiting lines, whatever the child writes.
#[derive(Debug, Clone)]
pub struct StderrTail {
    config: StderrTailConfig,
    /// Complete lines, oldest first.
    lines: VecDeque<Bytes>,
    lines_bytes: usize,
    /// The held partial line: its first `max_bytes` raw bytes.
    partial: Vec<u8>,
    /// The held partial line is longer than `max_bytes`.
    partial_cut: bool,
    /// Complete lines waiting for `poll_line`, each followed by `\n` (a line
    /// never contains one).
    pending: BytesMut,
    dropped: u64,
    cut: u64,
    bytes_seen: u64,
}

impl StderrTail {
    /// An empty tail with these bounds.
    #[must_use]
    pub fn new(config: StderrTailConfig) -> Self {
        Self {
            config,
            lines: VecDeque::new(),
            lines_bytes: 0,
            partial: Vec::new(),
            partial_cut: false,
            pending: BytesMut::new(),
            dropped: 0,
            cut: 0,
            bytes_seen: 0,
        }
    }

    /// Feeds stderr bytes, in chunks of any size and split anywhere.
    pub fn handle_data(&mut self, data: &[u8]) {
        self.bytes_seen = self.bytes_seen.saturating_add(data.len() as u64);
        let mut rest = data;
        while !rest.is_empty() {
            match memchr::memchr(b'\n', rest) {
                Some(i) => {
                    self.extend_partial(&rest[..i]);
                    self.finish_line();
                    rest = &rest[i + 1..];
                }
                None => {
                    self.extend_partial(rest);
                    rest = &[];
                }
            }
        }
        self.evict();
    }

    /// Stderr reached EOF: a held partial line becomes a line.
    pub fn handle_eof(&mut self) {
        if !self.partial.is_empty() || self.partial_cut {
            self.finish_line();
        }
    }

    /// The next complete line, each once, oldest first.
    #[must_use]
    pub fn poll_line(&mut self) -> Option<Bytes> {
        let end = memchr::memchr(b'\n', &self.pending)?;
        let line = self.pending.split_to(end).freeze();
        self.pending.advance(1);
        Some(line)
    }

    /// The next complete line with its level, each once, oldest first: the
    /// same queue as [`poll_line`](Self::poll_line), so drain one or the
    /// other.
    ///
    /// ```
    /// use childwire_core::stderr_level::Level;
    /// use childwire_core::StderrTail;
    ///
    /// let mut tail = StderrTail::default();
    /// tail.handle_data(b"INFO: listening\n{\"level\":50,\"msg\":\"bind failed\"}\nplain\n");
    /// let levels: Vec<_> = std::iter::from_fn(|| tail.poll_leveled_line())
    ///     .map(|line| line.level())
    ///     .collect();
    /// assert_eq!(levels, [Some(Level::Info), Some(Level::Error), None]);
    /// ```
    #[must_use]
    pub fn poll_leveled_line(&mut self) -> Option<StderrLine> {
        self.poll_line().map(StderrLine::new)
    }

    /// The last lines, oldest first, joined with `\n`, including the held
    /// partial line; invalid UTF-8 shows as U+FFFD.
    #[must_use]
    pub fn tail(&self) -> String {
        let mut raw = Vec::with_capacity(self.lines_bytes + self.lines.len() + self.partial.len());
        let mut first = true;
        // Eviction made room for the partial line, unless no line fits at all.
        let partial = self.partial_view().filter(|_| self.config.max_lines > 0);
        for line in self.lines.iter().map(|l| &l[..]).chain(partial) {
            if !first {
                raw.push(b'\n');
            }
            first = false;
            raw.extend_from_slice(line);
        }
        match String::from_utf8(raw) {
            Ok(text) => text,
            Err(err) => String::from_utf8_lossy(err.as_bytes()).into_owned(),
        }
    }

    /// All stderr bytes fed so far.
    #[must_use]
    pub fn bytes_seen(&self) -> u64 {
        self.bytes_seen
    }

    /// Lines dropped from the `poll_line` queue because nobody polled.
    #[must_use]
    pub fn dropped_lines(&self) -> u64 {
        self.dropped
    }

    /// Lines cut to `max_bytes`.
    #[must_use]
    pub fn cut_lines(&self) -> u64 {
        self.cut
    }

    /// The bounds it was created with.
    #[must_use]
    pub fn config(&self) -> &StderrTailConfig {
        &self.config
    }

    fn extend_partial(&mut self, bytes: &[u8]) {
        let room = self.config.max_bytes - self.partial.len();
        if bytes.len() > room {
            self.partial_cut = true;
        }
        self.partial
            .extend_from_slice(&bytes[..bytes.len().min(room)]);
    }

    /// The held partial line as the tail shows it, `None` if there is none.
    fn partial_view(&self) -> Option<&[u8]> {
        if self.partial.is_empty() && !self.partial_cut {
            return None;
        }
        Some(line_content(&self.partial, self.partial_cut))
    }

    fn finish_line(&mut self) {
        let line = Bytes::copy_from_slice(line_content(&self.partial, self.partial_cut));
        if self.partial_cut {
            self.cut += 1;
        }
        self.partial.clear();
        self.partial_cut = false;
        self.queue_pending(&line);
        self.lines_bytes += line.len();
        self.lines.push_back(line);
        self.evict();
    }

    fn queue_pending(&mut self, line: &[u8]) {
        let cap = self.config.max_pending_bytes;
        if line.len() + 1 > cap {
            self.dropped += 1;
            return;
        }
        while self.pending.len() + line.len() + 1 > cap {
            match memchr::memchr(b'\n', &self.pending) {
                Some(end) => {
                    self.pending.advance(end + 1);
                    self.dropped += 1;
                }
                None => break,
            }
        }
        self.pending.reserve(line.len() + 1);
        self.pending.put_slice(line);
        self.pending.put_u8(b'\n');
    }

    /// Drops the oldest complete lines until the tail, partial line included,
    /// fits both bounds.
    fn evict(&mut self) {
        let (partial_lines, partial_bytes) = match self.partial_view() {
            Some(view) => (1, view.len()),
            None => (0, 0),
        };
        while self.lines.len() + partial_lines > self.config.max_lines
            || self.lines_bytes + partial_bytes > self.config.max_bytes
        {
            match self.lines.pop_front() {
                Some(line) => self.lines_bytes -= line.len(),
                None => break,
            }
        }
    }
}

impl Default for StderrTail {
    fn default() -> Self {
        Self::new(StderrTailConfig::default())
    }
}

/// A line's content: without one trailing `\r`, unless it was cut (then the
/// `\r` cannot be the line's last byte).
fn line_content(raw: &[u8], cut: bool) -> &[u8] {
    match raw {
        [head @ .., b'\r'] if !cut => head,
        _ => raw,
    }
}

/// How many of a tail's last non-blank lines [`summary_line`] looks at,
/// stack frames not counted. Runtimes print the error and then a trailer
/// (node: the stack and its version; Rust: a backtrace hint; npm: where its
/// log is), so the last line alone is often not the useful one.
pub const SUMMARY_LOOKBACK: usize = 20;

/// The line of `tail` (stderr lines joined with `\n`, as
/// [`StderrTail::tail`] gives them) that best says why the child ended,
/// trimmed; `None` if every line is blank.
///
/// Among the last [`SUMMARY_LOOKBACK`] non-blank lines that are not stack
/// frames it picks, the most recent first within each rank:
///
/// 1. a line that says what failed: an exception (`ValueError: …`), a
///    panic, the line a stack trace hangs from (`Error: connect
///    ECONNREFUSED` above its `    at …` frames, the exception that ends a
///    Python traceback), or words such as "not found", "cannot", "denied",
///    "failed", "no such";
/// 2. any other error-level line (see [`stderr_level`](crate::stderr_level))
///    or line with "error" in it;
/// 3. a line that only points elsewhere, even at error level: "A complete
///    log of this run can be found in …", "see the log", "run with
///    `RUST_BACKTRACE=1`", "for more information";
/// 4. else the last non-blank line that is not a frame;
/// 5. a stack frame (`    at foo (file.js:1:2)`, `  File "x.py", line 3`
///    and the source line under it, `   0: std::rt::lang_start`) only when
///    nothing else is there: whatever words a frame holds
///    (`at emitErrorNT`, `in map_exceptions`, `core::result::unwrap_failed`)
///    name code, not what went wrong.
///
/// A line whose level is below warn (`INFO: file not found, using
/// defaults`) is never picked for its words.
///
/// ```
/// use childwire_core::stderr_tail::summary_line;
///
/// let npx = "npm error code E404
/// npm error 404 Not Found - GET https://registry.npmjs.org/nope - Not found
/// npm error 404
/// npm error 404  'nope@*' is not in this registry.
/// npm error A complete log of this run can be found in: /root/.npm/_logs/debug-0.log";
/// assert_eq!(
///     summary_line(npx),
///     Some("npm error 404 Not Found - GET https://registry.npmjs.org/nope - Not found")
/// );
///
/// let node = "Error: connect ECONNREFUSED 127.0.0.1:5432
///     at TCPConnectWrap.afterConnect [as oncomplete] (node:net:1607:16)
///     at emitErrorNT (node:internal/streams/destroy:169:8)";
/// assert_eq!(summary_line(node), Some("Error: connect ECONNREFUSED 127.0.0.1:5432"));
/// ```
#[must_use]
pub fn summary_line(tail: &str) -> Option<&str> {
    let lines: Vec<&str> = tail
        .lines()
        .filter(|line| !line.trim().is_empty())
        .collect();
    let shapes = shapes(&lines);
    let mut best: Option<(Rank, &str)> = None;
    let mut looked = 0;
    for (line, shape) in lines.iter().zip(shapes).rev() {
        let line = line.trim();
        let rank = match shape {
            Shape::Frame => Rank::Frame,
            Shape::Text => rank(line),
            // What a trace hangs from says what went wrong, whatever its
            // words, unless its level says it is not a failure.
            Shape::Head => match rank(line) {
                Rank::Pointer => Rank::Pointer,
                _ if level_of(line.as_bytes()).is_some_and(|level| level < Level::Warn) => {
                    Rank::Other
                }
                _ => Rank::Cause,
            },
        };
        if rank != Rank::Frame {
            looked += 1;
            if looked > SUMMARY_LOOKBACK {
                break;
            }
        }
        // Newest first: a later line wins a tie.
        if best.is_none_or(|(top, _)| rank > top) {
            best = Some((rank, line));
        }
    }
    best.map(|(_, line)| line)
}

/// How telling a stderr line is, least first.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum Rank {
    Frame,
    Other,
    Pointer,
    Error,
    Cause,
}

/// A line's place in a stack trace.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Shape {
    /// Not part of a trace, or nothing more is known.
    Text,
    /// A stack frame, or the source line a Python frame shows.
    Frame,
    /// The line a trace hangs from: the error above JavaScript, Java or
    /// Rust frames, the exception below a Python traceback's frames, a
    /// Rust or Go panic.
    Head,
}

/// The shape of each of `lines` (non-blank), from its neighbours.
fn shapes(lines: &[&str]) -> Vec<Shape> {
    let mut shapes = Vec::with_capacity(lines.len());
    // The indentation of the Python frame whose source lines may follow.
    let mut python_frame: Option<usize> = None;
    // Inside the properties node prints after an error's last frame
    // (`    at … {`, `  code: 'ECONNREFUSED',`, `}`).
    let mut properties = false;
    for line in lines {
        let (indent, body) = split_indent(line);
        if properties {
            properties = body != "}";
            shapes.push(Shape::Frame);
            continue;
        }
        let shape = if is_python_frame(body) {
            python_frame = Some(indent);
            Shape::Frame
        } else if let Some(frame_indent) = python_frame {
            if indent > frame_indent {
                // The source line under a frame, or its `^^^^` marks.
                Shape::Frame
            } else {
                // The first line out of a traceback's frames: its exception.
                python_frame = None;
                Shape::Head
            }
        } else if is_frame(indent, body) {
            Shape::Frame
        } else if body.starts_with("thread '") && body.contains("' panicked at")
            || body.starts_with("panic: ")
        {
            Shape::Head
        } else {
            Shape::Text
        };
        properties = shape == Shape::Frame && body.ends_with(" {") && python_frame.is_none();
        shapes.push(shape);
    }
    // An error right above frames (JavaScript, Java, Rust's `at` lines) is
    // what they trace.
    for at in 1..lines.len() {
        if shapes[at] == Shape::Frame
            && shapes[at - 1] == Shape::Text
            && !is_python_frame(split_indent(lines[at]).1)
            && looks_like_error(lines[at - 1].trim())
        {
            shapes[at - 1] = Shape::Head;
        }
    }
    shapes
}

/// A line's indentation (spaces, tabs, and the `|` of Python's exception
/// group drawing) and the rest.
fn split_indent(line: &str) -> (usize, &str) {
    let body = line.trim_start_matches([' ', '\t', '|']);
    (line.len() - body.len(), body.trim_end())
}

/// `File "/srv/server.py", line 3, in <module>`.
fn is_python_frame(body: &str) -> bool {
    body.starts_with("File \"") && body.contains("\", line ")
}

/// An indented stack frame: `at foo (file.js:1:2)` (JavaScript), `at
/// com.x.Y.run(Y.java:10)` and `... 12 more` (Java), `at ./src/main.rs:5:9`
/// and `0: std::rt::lang_start` (a Rust backtrace), `/srv/main.go:12
/// +0x1d` (Go).
fn is_frame(indent: usize, body: &str) -> bool {
    if indent == 0 {
        return false;
    }
    if body.starts_with("at ") || body.starts_with("... ") && body.ends_with(" more") {
        return true;
    }
    // Go: a file and line, then the offset in the function.
    if body.rsplit_once(" +0x").is_some_and(|(_, offset)| {
        !offset.is_empty() && offset.bytes().all(|b| b.is_ascii_hexdigit())
    }) {
        return true;
    }
    // Rust: `N: symbol`; a symbol has no spaces outside its `<… as …>::`
    // paths (anyhow's `0: could not open config` is a message, not a frame).
    body.split_once(": ").is_some_and(|(index, symbol)| {
        !index.is_empty()
            && index.bytes().all(|b| b.is_ascii_digit())
            && (!symbol.contains(' ') || symbol.contains("::"))
    })
}

/// Whether a line above frames is an error, not a note that precedes its
/// own frames (node's `Emitted 'error' event on Client instance at:`).
fn looks_like_error(line: &str) -> bool {
    level_of(line.as_bytes()).is_some_and(|level| level >= Level::Warn)
        || looks_like_exception(line)
        || line.starts_with("Caused by: ")
        || line.starts_with("Uncaught ")
}

fn rank(line: &str) -> Rank {
    let level = level_of(line.as_bytes());
    if level.is_some_and(|level| level < Level::Warn) {
        return Rank::Other;
    }
    let lower = line.to_ascii_lowercase();
    let has = |words: &[&str]| words.iter().any(|word| lower.contains(word));
    if has(&[
        "complete log of this run",
        "see the log",
        "see log",
        "log can be found",
        "for more information",
        "for more details",
        "rust_backtrace",
        "--verbose",
    ]) {
        return Rank::Pointer;
    }
    let exception = level.is_some() && looks_like_exception(line);
    if exception
        || has(&[
            "not found",
            "panicked",
            "exception",
            "cannot",
            "can't",
            "could not",
            "couldn't",
            "unable to",
            "denied",
            "failed",
            "no such",
            "refused",
            "fatal",
        ])
    {
        return Rank::Cause;
    }
    if level.is_some_and(|level| level >= Level::Error) || lower.contains("error") {
        return Rank::Error;
    }
    Rank::Other
}

/// `SomethingError: …` at the start of a line.
fn looks_like_exception(line: &str) -> bool {
    line.split_once(':').is_some_and(|(name, _)| {
        name.len() > "Error".len()
            && name.ends_with("Error")
            && name
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b == b'.' || b == b'_')
    })
}
