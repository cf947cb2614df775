//! A [`Tap`] that writes a recording: one NDJSON record per event.

use std::fmt;
use std::io::{self, BufWriter, Write};
use std::sync::{Mutex, MutexGuard, PoisonError};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use childwire_core::pollution::check_json;
use childwire_core::stderr_level::Level;
use childwire_core::{Exit, ExitReport};

use super::{Notice, Tap, TapEvent};

/// Which way a message went, for the records [`Recorder::message`] and
/// [`Recorder::oversized`] write.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Direction {
    /// From this side to the child (or the peer): `"to_child"`.
    ToChild,
    /// From the child (or the peer) to this side: `"from_child"`.
    FromChild,
}

impl Direction {
    fn as_str(self) -> &'static str {
        match self {
            Direction::ToChild => "to_child",
            Direction::FromChild => "from_child",
        }
    }
}

/// Writes what a [`Tap`] sees to `W` as a recording: NDJSON, one record
/// per event, buffered, flushed at the exit record, by
/// [`flush`](Self::flush) and on drop.
///
/// Every record has `"t"` (seconds since the first record, from the
/// runtime's clock, to the microsecond; never going back), `"ts"` (the
/// wall-clock time of that instant, UTC, RFC 3339) and `"dir"`:
///
/// - `"to_child"`, `"from_child"`: a message, under `"msg"` as it was when
///   it is one JSON value (a line break between its tokens becomes a
///   space, so the record stays one line), else under `"text"` as a
///   string; a message dropped for its size has `"oversized"` (its length
///   in bytes) instead;
/// - `"notice"`: `"kind"` (`"pollution"` or `"malformed"`), `"text"` (what
///   the notice says), and for pollution `"bytes"` (the line's first bytes);
/// - `"stderr"`: `"line"`, and `"level"` (`"error"`, `"warn"`, `"info"`,
///   `"debug"`, `"trace"`, or `null`; a fatal line counts as `"error"`);
/// - `"exit"`: `"exit_code"` (`null` when a signal ended the child),
///   `"signal"` (or `null`) and `"report"` (the exit report, as text).
///
/// ```text
/// {"t":0.000000,"ts":"2026-11-25T09:30:00.000100Z","dir":"to_child","msg":{"jsonrpc":"2.0","id":1,"method":"ping"}}
/// {"t":0.012034,"ts":"2026-11-25T09:30:00.012134Z","dir":"stderr","line":"INFO: ready","level":"info"}
/// {"t":0.013001,"ts":"2026-11-25T09:30:00.013101Z","dir":"from_child","msg":{"jsonrpc":"2.0","id":1,"result":{}}}
/// {"t":0.500000,"ts":"2026-11-25T09:30:00.500100Z","dir":"exit","exit_code":0,"signal":null,"report":"exited with code 0 after 500 ms"}
/// ```
///
/// A failed write is said once through `tracing`, and recording stops;
/// [`flush`](Self::flush) returns the error.
///
/// ```no_run
/// # async fn demo<R: childwire_async::Runtime>() -> Result<(), Box<dyn std::error::Error>> {
/// use std::sync::Arc;
/// use childwire_async::tap::Recorder;
/// use childwire_async::{Command, Config, Received, Transport};
///
/// let recorder = Arc::new(Recorder::new(std::fs::File::create("session.ndjson")?));
/// let mut config = Config::default();
/// config.tap(Arc::clone(&recorder));
/// let mut server = Transport::<R>::spawn(&Command::new("my-mcp-server"), config)?;
/// server.send(r#"{"jsonrpc":"2.0","id":1,"method":"ping"}"#).await?;
/// while let Some(item) = server.recv().await {
///     if let Received::Message(_) = item {
///         server.shutdown().await?;
///     }
/// }
/// recorder.flush()?;
/// # Ok(()) }
/// ```
pub struct Recorder<W: Write + Send + 'static> {
    /// Each record is written whole under it, so the records of senders
    /// and the receiver in different tasks never interleave. Off the
    /// transport's path: only a recorder set as a tap takes it.
    inner: Mutex<Inner<W>>,
}

struct Inner<W: Write> {
    out: BufWriter<W>,
    /// The first record's instant, and the wall-clock time then.
    origin: Option<(Instant, SystemTime)>,
    /// The last record's `t`: records written later never go back.
    last: Duration,
    /// The record being written, kept for its allocation.
    record: Vec<u8>,
    /// A write failed: said once, then recording stops.
    failed: Option<io::ErrorKind>,
}

impl<W: Write + Send + 'static> Recorder<W> {
    /// A recorder writing to `out`.
    pub fn new(out: W) -> Self {
        Self {
            inner: Mutex::new(Inner {
                out: BufWriter::with_capacity(64 * 1024, out),
                origin: None,
                last: Duration::ZERO,
                record: Vec::with_capacity(256),
                failed: None,
            }),
        }
    }

    /// Records a message that went `dir` at `at`: for a caller that moves
    /// messages itself (a proxy) and records what no transport saw.
    pub fn message(&self, at: Instant, dir: Direction, message: &[u8]) {
        self.write(at, dir.as_str(), false, |record| {
            write_message(record, message);
        });
    }

    /// Records a message of `len` bytes that was dropped for its size on
    /// its way `dir`.
    pub fn oversized(&self, at: Instant, dir: Direction, len: u64) {
        self.write(at, dir.as_str(), false, |record| {
            record.extend_from_slice(format!(",\"oversized\":{len}").as_bytes());
        });
    }

    /// Writes the buffered records out.
    ///
    /// # Errors
    ///
    /// The error of the write that failed, now or before (recording
    /// stopped then).
    pub fn flush(&self) -> io::Result<()> {
        self.lock().flush()
    }

    fn lock(&self) -> MutexGuard<'_, Inner<W>> {
        // A panic while the lock was held (in a writer) leaves whole
        // records behind at worst: go on.
        self.inner.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Writes one record: its head, `body`'s fields, its end; flushed if
    /// `flush`.
    fn write(&self, at: Instant, dir: &str, flush: bool, body: impl FnOnce(&mut Vec<u8>)) {
        let mut inner = self.lock();
        if inner.failed.is_some() {
            return;
        }
        let (t, wall) = inner.stamp(at);
        let mut record = std::mem::take(&mut inner.record);
        record.clear();
        record.extend_from_slice(
            format!(
                "{{\"t\":{}.{:06},\"ts\":\"{}\",\"dir\":\"{dir}\"",
                t.as_secs(),
                t.subsec_micros(),
                rfc3339(wall)
            )
            .as_bytes(),
        );
        body(&mut record);
        record.extend_from_slice(b"}\n");
        let written = inner.out.write_all(&record);
        inner.record = record;
        match written {
            Ok(()) if flush => {
                let _ = inner.flush();
            }
            Ok(()) => {}
            Err(err) => inner.fail(&err),
        }
    }
}

impl<W: Write> Inner<W> {
    /// `t` of a record at `at`, and its wall-clock time.
    fn stamp(&mut self, at: Instant) -> (Duration, SystemTime) {
        let (origin, wall) = *self.origin.get_or_insert_with(|| (at, SystemTime::now()));
        let t = at.saturating_duration_since(origin).max(self.last);
        self.last = t;
        (t, wall + t)
    }

    fn flush(&mut self) -> io::Result<()> {
        if let Some(kind) = self.failed {
            return Err(io::Error::new(
                kind,
                "an earlier write of the recording failed",
            ));
        }
        let flushed = self.out.flush();
        if let Err(err) = &flushed {
            self.fail(err);
        }
        flushed
    }

    fn fail(&mut self, err: &io::Error) {
        self.failed = Some(err.kind());
        tracing::warn!("writing the recording failed, recording stops: {err}");
    }
}

impl<W: Write + Send + 'static> Tap for Recorder<W> {
    fn event(&self, at: Instant, event: TapEvent<'_>) {
        match event {
            TapEvent::Sent(message) => self.message(at, Direction::ToChild, message),
            TapEvent::Received(message) => self.message(at, Direction::FromChild, message),
            TapEvent::Notice(Notice::Oversized(notice)) => {
                self.oversized(at, Direction::FromChild, notice.len);
            }
            TapEvent::Notice(Notice::Malformed(notice)) => {
                self.write(at, "notice", false, |record| {
                    record.extend_from_slice(b",\"kind\":\"malformed\",\"text\":");
                    write_str(record, &notice.to_string());
                });
            }
            TapEvent::Notice(Notice::Pollution(notice)) => {
                self.write(at, "notice", false, |record| {
                    record.extend_from_slice(b",\"kind\":\"pollution\",\"text\":");
                    write_str(record, &notice.to_string());
                    record.extend_from_slice(b",\"bytes\":");
                    write_str(record, &String::from_utf8_lossy(&notice.head));
                });
            }
            TapEvent::Stderr { line, level } => {
                self.write(at, "stderr", false, |record| {
                    record.extend_from_slice(b",\"line\":");
                    write_str(record, &String::from_utf8_lossy(line));
                    record.extend_from_slice(b",\"level\":");
                    match level {
                        Some(level) => {
                            record.push(b'"');
                            record.extend_from_slice(level_name(level).as_bytes());
                            record.push(b'"');
                        }
                        None => record.extend_from_slice(b"null"),
                    }
                });
            }
            TapEvent::Exited(report) => self.exit(at, report),
        }
    }
}

impl<W: Write + Send + 'static> Recorder<W> {
    fn exit(&self, at: Instant, report: &ExitReport) {
        let (code, signal) = match report.exit {
            Exit::Code(code) => (code.to_string(), "null".to_owned()),
            Exit::Signal(signal) => ("null".to_owned(), signal.to_string()),
        };
        self.write(at, "exit", true, |record| {
            record.extend_from_slice(
                format!(",\"exit_code\":{code},\"signal\":{signal},\"report\":").as_bytes(),
            );
            write_str(record, &report.to_string());
        });
    }
}

impl<W: Write + Send + 'static> Drop for Recorder<W> {
    fn drop(&mut self) {
        let inner = self.inner.get_mut().unwrap_or_else(PoisonError::into_inner);
        let _ = inner.flush();
    }
}

impl<W: Write + Send + 'static> fmt::Debug for Recorder<W> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Recorder").finish_non_exhaustive()
    }
}

/// The recording's level names: the five of the format (a fatal line is
/// an error line to a reader that knows only those).
fn level_name(level: Level) -> &'static str {
    match level {
        Level::Fatal => "error",
        other => other.as_str(),
    }
}

/// `,"msg":` and the message when it is one JSON value, else `,"text":`
/// and it as a string.
fn write_message(record: &mut Vec<u8>, message: &[u8]) {
    let json = check_json(message);
    // A value strict readers refuse (nesting past 127, a number out of
    // `f64` range) would make the whole record unreadable to them: it goes
    // as text. Where the scan cannot tell (any number with an exponent, as
    // JavaScript writes 1e-7), serde_json decides: rare, so its parse costs
    // little. (A message nested exactly 127 deep still makes a record one
    // level past serde_json's limit: no real message is.)
    let readable = json.is_json
        && (json.exact || serde_json::from_slice::<serde_json::Value>(message).is_ok());
    if readable {
        record.extend_from_slice(b",\"msg\":");
        let start = record.len();
        record.extend_from_slice(message);
        // In a JSON value a line break can only be whitespace between
        // tokens (never raw in a string): a space keeps the value and
        // the record on one line (`Content-Length` bodies may be
        // pretty-printed).
        for byte in &mut record[start..] {
            if matches!(byte, b'\n' | b'\r') {
                *byte = b' ';
            }
        }
    } else {
        record.extend_from_slice(b",\"text\":");
        write_str(record, &String::from_utf8_lossy(message));
    }
}

/// `text` as a JSON string.
fn write_str(record: &mut Vec<u8>, text: &str) {
    serde_json::to_writer(record, text).expect("a string serializes into memory");
}

/// `at` in UTC as RFC 3339 with microseconds: `2026-11-25T09:30:00.123456Z`.
fn rfc3339(at: SystemTime) -> String {
    let since_epoch = at.duration_since(UNIX_EPOCH).unwrap_or_default();
    let secs = since_epoch.as_secs();
    let (days, day_secs) = (secs / 86_400, secs % 86_400);
    let (year, month, day) = civil_from_days(days);
    format!(
        "{year:04}-{month:02}-{day:02}T{:02}:{:02}:{:02}.{:06}Z",
        day_secs / 3600,
        day_secs / 60 % 60,
        day_secs % 60,
        since_epoch.subsec_micros()
    )
}

/// The Gregorian date `days` after 1970-01-01 (Howard Hinnant's algorithm).
fn civil_from_days(days: u64) -> (u64, u64, u64) {
    let z = days + 719_468;
    let era = z / 146_097;
    let doe = z % 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + u64::from(month <= 2);
    (year, month, day)
}

#[cfg(test)]
mod tests;
