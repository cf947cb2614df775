//! The level of a stderr line, and for a JSON-lines log record its message
//! and fields: stderr is where servers log, and most of it is not an error.
//!
//! Recognized shapes, first match wins:
//!
//! - A JSON object with a level member: `level`, `lvl`, `severity`,
//!   `levelname`, `log.level` or `loglevel`, whose value is a level word
//!   (`"info"`, `"WARNING"`, `"error"`, `"critical"`, …) or a pino/bunyan
//!   number (10 trace, 20 debug, 30 info, 40 warn, 50 error, 60 fatal).
//!   The message is `msg` (pino), `message`, `event` (structlog) or
//!   tracing-subscriber's `fields.message`. The line need not be valid JSON
//!   throughout: its top-level members are found by a structural scan (see
//!   [`LogRecord`]).
//! - A level word at the start of the line, perhaps after a timestamp or
//!   `npm`: `INFO:`, `[warn]`, `ERROR`, `WARNING:root:…` (Python logging),
//!   `[2026-01-01T00:00:00Z INFO  server] …` (env_logger),
//!   `2026-01-01T00:00:00.000Z  WARN server: …` (tracing-subscriber),
//!   `npm error …`, `npm ERR! …`, `error: …` (cargo, git). A bare word
//!   counts only in capitals (`ERROR`) or after `npm`; otherwise it needs a
//!   `:`, `!` or brackets, so that `Info about x` is not a level.
//! - An exception line: `ValueError: …`, `ModuleNotFoundError: …`,
//!   `java.lang.IllegalStateException: …` (error), `panic: …` (Go, fatal),
//!   `thread 'main' panicked at …` (Rust, error).
//!
//! Anything else has no level (`None`): plain text is not an error.
//!
//! The scan is bounded: prefixes are looked for in the first
//! [`PREFIX_WINDOW`] bytes, and a JSON record's members are found in one
//! pass, keeping at most [`MAX_FIELDS`].

use std::borrow::Cow;
use std::fmt;

use bytes::Bytes;

use crate::json_shape;

/// How far into a line a level prefix is looked for, in bytes.
pub const PREFIX_WINDOW: usize = 96;

/// Most members of a JSON log record kept in [`LogRecord::fields`].
pub const MAX_FIELDS: usize = 32;

/// How severe a log line is, least severe first.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Level {
    /// `trace`, pino 10.
    Trace,
    /// `debug`, pino 20.
    Debug,
    /// `info`, `notice`, pino 30.
    Info,
    /// `warn`, `warning`, pino 40.
    Warn,
    /// `error`, `err`, `ERR!`, exceptions, pino 50.
    Error,
    /// `fatal`, `critical`, `panic`, `emergency`, `alert`, pino 60.
    Fatal,
}

impl Level {
    /// The level a word names, ignoring ASCII case: `info`, `WARNING`,
    /// `Err`, `crit`… `None` for any other word.
    #[must_use]
    pub fn from_word(word: &[u8]) -> Option<Self> {
        const WORDS: &[(&str, Level)] = &[
            ("trace", Level::Trace),
            ("debug", Level::Debug),
            ("dbg", Level::Debug),
            ("verbose", Level::Debug),
            ("info", Level::Info),
            ("information", Level::Info),
            ("notice", Level::Info),
            ("warn", Level::Warn),
            ("warning", Level::Warn),
            ("error", Level::Error),
            ("err", Level::Error),
            ("fatal", Level::Fatal),
            ("critical", Level::Fatal),
            ("crit", Level::Fatal),
            ("panic", Level::Fatal),
            ("dpanic", Level::Fatal),
            ("alert", Level::Fatal),
            ("emerg", Level::Fatal),
            ("emergency", Level::Fatal),
        ];
        WORDS
            .iter()
            .find(|(name, _)| word.eq_ignore_ascii_case(name.as_bytes()))
            .map(|&(_, level)| level)
    }

    /// The level of a pino or bunyan numeric level: 10 trace, 20 debug, 30
    /// info, 40 warn, 50 error, 60 fatal (values in between round down).
    /// `None` below 10, where the numbers mean other things (syslog).
    #[must_use]
    pub fn from_number(n: u64) -> Option<Self> {
        Some(match n {
            0..=9 => return None,
            10..=19 => Level::Trace,
            20..=29 => Level::Debug,
            30..=39 => Level::Info,
            40..=49 => Level::Warn,
            50..=59 => Level::Error,
            _ => Level::Fatal,
        })
    }

    /// The level's name in lower case: `trace` … `fatal`.
    #[must_use]
    pub fn as_str(self) -> &'static str {
        match self {
            Level::Trace => "trace",
            Level::Debug => "debug",
            Level::Info => "info",
            Level::Warn => "warn",
            Level::Error => "error",
            Level::Fatal => "fatal",
        }
    }
}

impl fmt::Display for Level {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The level of a stderr line, from any of the shapes in the
/// [module docs](self); `None` when it names none.
///
/// ```
/// use childwire_core::stderr_level::{Level, level_of};
///
/// assert_eq!(level_of(br#"{"level":50,"time":1,"msg":"listen EADDRINUSE"}"#), Some(Level::Error));
/// assert_eq!(level_of(b"WARNING:root:config file missing"), Some(Level::Warn));
/// assert_eq!(level_of(b"[info] listening on stdio"), Some(Level::Info));
/// assert_eq!(level_of(b"npm error 404 Not Found - GET https://registry.npmjs.org/x"), Some(Level::Error));
/// assert_eq!(level_of(b"ModuleNotFoundError: No module named 'mcp'"), Some(Level::Error));
/// assert_eq!(level_of(b"Info about the weather"), None);
/// ```
#[must_use]
pub fn level_of(line: &[u8]) -> Option<Level> {
    if first_non_ws(line) == Some(b'{') {
        if let Some(record) = LogRecord::parse(line) {
            if record.level.is_some() {
                return record.level;
            }
        }
    }
    prefix_level(line)
}

/// A stderr line with its level: what [`StderrTail::poll_leveled_line`]
/// hands out. The raw bytes are kept as the child wrote them.
///
/// [`StderrTail::poll_leveled_line`]: crate::stderr_tail::StderrTail::poll_leveled_line
#[derive(Clone, PartialEq, Eq)]
pub struct StderrLine {
    raw: Bytes,
    level: Option<Level>,
}

impl StderrLine {
    /// The line `raw` (without its `\n`), its level read from it.
    #[must_use]
    pub fn new(raw: Bytes) -> Self {
        let level = level_of(&raw);
        Self { raw, level }
    }

    /// The line as the child wrote it.
    #[must_use]
    pub fn raw(&self) -> &Bytes {
        &self.raw
    }

    /// The line's bytes, without copying.
    #[must_use]
    pub fn into_raw(self) -> Bytes {
        self.raw
    }

    /// The line's level, `None` when it names none.
    #[must_use]
    pub fn level(&self) -> Option<Level> {
        self.level
    }

    /// The line as a JSON log record (message and fields), if it is a JSON
    /// object. Read on each call: keep it if it is needed twice.
    #[must_use]
    pub fn record(&self) -> Option<LogRecord<'_>> {
        LogRecord::parse(&self.raw)
    }
}

impl fmt::Debug for StderrLine {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("StderrLine")
            .field("raw", &String::from_utf8_lossy(&self.raw))
            .field("level", &self.level)
            .finish()
    }
}

/// A JSON-lines log record: one JSON object per line, as pino, bunyan,
/// structlog, tracing-subscriber's JSON format, python-json-logger and most
/// structured loggers write.
///
/// Found by a structural scan, not a full parse: the line must be one
/// object whose top-level keys are strings, whose values end where their
/// brackets balance (outside strings) or at the next delimiter for
/// scalars; values are not otherwise validated.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LogRecord<'a> {
    /// The record's level, if it has a level member this module reads.
    pub level: Option<Level>,
    /// The message, escapes decoded.
    pub message: Option<Cow<'a, str>>,
    /// The first [`MAX_FIELDS`] top-level members, in order: each key as
    /// written (escapes left as they are, without quotes) and its value's
    /// raw JSON text (strings with their quotes).
    pub fields: Vec<(&'a [u8], &'a [u8])>,
}

impl<'a> LogRecord<'a> {
    /// The record `line` holds, `None` if it is not one JSON object.
    ///
    /// ```
    /// use childwire_core::stderr_level::{Level, LogRecord};
    ///
    /// let line = br#"{"timestamp":"2026-01-01T00:00:00Z","level":"ERROR","fields":{"message":"bind failed","port":8080},"target":"server"}"#;
    /// let record = LogRecord::parse(line).unwrap();
    /// assert_eq!(record.level, Some(Level::Error));
    /// assert_eq!(record.message.as_deref(), Some("bind failed"));
    /// assert_eq!(record.field("target"), Some(&br#""server""#[..]));
    /// ```
    #[must_use]
    pub fn parse(line: &'a [u8]) -> Option<Self> {
        let fields = json_shape::members(line, MAX_FIELDS)?;
        let mut level = None;
        for key in [
            &b"level"[..],
            b"lvl",
            b"severity",
            b"levelname",
            b"log.level",
            b"loglevel",
        ] {
            if let Some(value) = find(&fields, key) {
                level = level_value(value);
                if level.is_some() {
                    break;
                }
            }
        }
        let mut message = None;
        for key in [&b"msg"[..], b"message", b"event"] {
            if let Some(text) = find(&fields, key).and_then(string_value) {
                message = Some(text);
                break;
            }
        }
        if message.is_none() {
            // tracing-subscriber's JSON format nests the message.
            message = find(&fields, b"fields")
                .and_then(|nested| json_shape::members(nested, MAX_FIELDS))
                .and_then(|nested| find(&nested, b"message").and_then(string_value));
        }
        Some(Self {
            level,
            message,
            fields,
        })
    }

    /// The raw JSON text of the top-level member `key` (among the first
    /// [`MAX_FIELDS`]).
    #[must_use]
    pub fn field(&self, key: &str) -> Option<&'a [u8]> {
        find(&self.fields, key.as_bytes())
    }
}

fn find<'a>(fields: &[(&'a [u8], &'a [u8])], key: &[u8]) -> Option<&'a [u8]> {
    fields.iter().find(|(k, _)| *k == key).map(|&(_, v)| v)
}

/// A JSON string value's text, `None` for other values.
fn string_value(value: &[u8]) -> Option<Cow<'_, str>> {
    let inner = value.strip_prefix(b"\"")?.strip_suffix(b"\"")?;
    Some(json_shape::unescape(inner))
}

/// A level member's value: a level word in a string, or a pino number.
fn level_value(value: &[u8]) -> Option<Level> {
    if let Some(inner) = value
        .strip_prefix(b"\"")
        .and_then(|v| v.strip_suffix(b"\""))
    {
        return Level::from_word(inner.trim_ascii());
    }
    if value.is_empty() || value.len() > 19 || !value.iter().all(u8::is_ascii_digit) {
        return None;
    }
    let n = value.iter().fold(0u64, |n, d| n * 10 + u64::from(d - b'0'));
    Level::from_number(n)
}

fn first_non_ws(line: &[u8]) -> Option<u8> {
    line.iter().copied().find(|b| !b.is_ascii_whitespace())
}

/// The level a line's first words name (see the [module docs](self)).
#[must_use]
pub fn prefix_level(line: &[u8]) -> Option<Level> {
    let window = &line[..line.len().min(PREFIX_WINDOW)];
    if let Some(level) = exception_level(window) {
        return Some(level);
    }
    let mut after_npm = false;
    for (index, token) in window
        .split(|b| b.is_ascii_whitespace())
        .filter(|t| !t.is_empty())
        .take(4)
        .enumerate()
    {
        if let Some(level) = token_level(token, after_npm) {
            return Some(level);
        }
        // Only a timestamp, a bracketed context or `npm` may come before
        // the level word.
        after_npm = token == b"npm";
        let leads = after_npm
            || token.first().is_some_and(u8::is_ascii_digit)
            || token.starts_with(b"[") && token.get(1).is_some_and(u8::is_ascii_digit);
        if !leads || index == 3 {
            return None;
        }
    }
    None
}

/// The level one token names: `INFO`, `info:`, `[warn]`, `[ERROR`,
/// `WARNING:root:msg`, `ERR!`.
fn token_level(token: &[u8], after_npm: bool) -> Option<Level> {
    let (bracketed, token) = match token.strip_prefix(b"[") {
        Some(rest) => (true, rest),
        None => (false, token),
    };
    let word_len = token
        .iter()
        .position(|b| !b.is_ascii_alphabetic())
        .unwrap_or(token.len());
    let (word, rest) = token.split_at(word_len);
    let level = Level::from_word(word)?;
    let marked = matches!(rest.first(), Some(b':' | b']' | b'!')) || (bracketed && rest.is_empty());
    let bare = rest.is_empty() && (after_npm || word.iter().all(u8::is_ascii_uppercase));
    (marked || bare).then_some(level)
}

/// `ValueError: …`, `java.io.IOException: …`, `thread 'x' panicked at`,
/// `panic: …`.
fn exception_level(window: &[u8]) -> Option<Level> {
    if window.starts_with(b"panic: ") {
        return Some(Level::Fatal);
    }
    if window.starts_with(b"thread '") && memchr::memmem::find(window, b"' panicked at").is_some() {
        return Some(Level::Error);
    }
    let name_len = window
        .iter()
        .position(|b| !(b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b'$')))?;
    let (name, rest) = window.split_at(name_len);
    let is_exception = [&b"Error"[..], b"Exception"]
        .iter()
        .any(|suffix| name.len() > suffix.len() && name.ends_with(suffix))
        && name.first().is_some_and(u8::is_ascii_alphabetic);
    (is_exception && rest.first() == Some(&b':')).then_some(Level::Error)
}
