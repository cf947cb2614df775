//! A [`Tap`] that writes a recording: one NDJSON record per event.

use std::fmt;
use std::io::{self, Write};
use std::marker::PhantomData;
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::{Arc, Condvar, Mutex, MutexGuard, PoisonError};
use std::thread::JoinHandle;
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
/// per event, written by a thread of its own so that a slow writer never
/// holds up the transport.
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
/// - `"notice"`: `"kind"` (`"pollution"`, `"malformed"` or `"dropped"`),
///   `"text"` (what the notice says), for pollution `"bytes"` (the line's
///   first bytes), for dropped `"records"` (how many records are missing
///   where it stands);
/// - `"stderr"`: `"line"`, and `"level"` (`"error"`, `"warn"`, `"info"`,
///   `"debug"`, `"trace"`, or `null`; a fatal line counts as `"error"`);
/// - `"exit"`: `"exit_code"` (`null` when a signal ended the child),
///   `"signal"` (or `null`) and `"report"` (the exit report, as text);
/// - `"generation"`: `"generation"` (2, 3, ...): a new child starts after
///   an exit, as the children of a supervised transport do one after the
///   other.
///
/// ```text
/// {"t":0.000000,"ts":"2026-11-25T09:30:00.000100Z","dir":"to_child","msg":{"jsonrpc":"2.0","id":1,"method":"ping"}}
/// {"t":0.012034,"ts":"2026-11-25T09:30:00.012134Z","dir":"stderr","line":"INFO: ready","level":"info"}
/// {"t":0.013001,"ts":"2026-11-25T09:30:00.013101Z","dir":"from_child","msg":{"jsonrpc":"2.0","id":1,"result":{}}}
/// {"t":0.500000,"ts":"2026-11-25T09:30:00.500100Z","dir":"exit","exit_code":0,"signal":null,"report":"exited with code 0 after 500 ms"}
/// ```
///
/// # A slow writer
///
/// The transport's task only formats each record into a queue; the
/// recorder's thread writes the queue out and flushes `W` after each batch,
/// so the recording keeps up with the session. When the writer falls
/// behind (a pipe or socket nobody reads, a stalled disk) and the queue
/// holds its limit ([`RECORDER_QUEUE_LIMIT`], or
/// [`with_queue_limit`](Self::with_queue_limit)), new records are dropped
/// and counted, and a `"dropped"` notice with their number stands where
/// they are missing. Exit records are not dropped (a queue may hold twice
/// its limit for them), so a recorder holds at most about three times its
/// limit. Nothing waits for the writer on the transport's path, the exit
/// record included: [`flush`](Self::flush) (or dropping the recorder) is
/// what makes sure the file holds the session, as in the example below.
///
/// A failed write is said once through `tracing`, and recording stops;
/// [`flush`](Self::flush) returns the error. Dropping the recorder writes
/// out what is queued, waiting as long as the writer moves; a writer that
/// takes nothing for [`RECORDER_STALL`] is left to its thread.
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
    shared: Arc<Shared>,
    /// The writer thread; `None` once it was left to finish on its own.
    thread: Option<JoinHandle<()>>,
    writer: PhantomData<fn(W)>,
}

/// 8 MiB: how much a [`Recorder`] queues for a writer that is behind before
/// it drops records.
pub const RECORDER_QUEUE_LIMIT: usize = 8 << 20;

/// How long a writer may take nothing before it counts as stalled:
/// [`Recorder::flush`] and the recorder's drop wait no longer for one.
pub const RECORDER_STALL: Duration = Duration::from_secs(1);

/// The most bytes handed to the writer in one call: the writer's progress
/// is checked at each.
const SLICE: usize = 64 * 1024;

/// What the transport's tasks and the writer thread share.
struct Shared {
    /// Each record is formatted whole under it, so the records of senders
    /// and the receiver in different tasks never interleave. Off the
    /// transport's path: only a recorder set as a tap takes it, and the
    /// writer thread holds it only to swap the queue out.
    state: Mutex<State>,
    /// Wakes the writer thread: records are queued, or the recorder ends.
    work: Condvar,
    /// Wakes those waiting for the writer: it moved, or it failed.
    progress: Condvar,
}

struct State {
    /// Records not taken by the writer yet.
    queue: Vec<u8>,
    limit: usize,
    /// Bytes ever queued, and ever written and flushed.
    queued: u64,
    written: u64,
    /// When the writer last finished a slice (or started on a batch); `None`
    /// while it waits for records.
    moved: Option<Instant>,
    /// The writer waits for work: queuing must wake it.
    idle: bool,
    /// The recorder is dropped: the writer ends once the queue is written.
    closing: bool,
    /// A write failed (or the writer panicked): said once, then recording
    /// stops.
    failed: Option<io::ErrorKind>,
    /// Records dropped since the last `"dropped"` notice, and in all.
    unnoted: u64,
    dropped_in_all: u64,
    /// The first record's instant, and the wall-clock time then.
    origin: Option<(Instant, SystemTime)>,
    /// The last record's `t`: records written later never go back.
    last: Duration,
    /// The last record was an exit: the next one starts a generation.
    after_exit: bool,
    generation: u64,
}

/// Which records may go past the queue's limit.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Kind {
    /// Dropped when the queue is full.
    Event,
    /// An exit record: queued up to twice the limit.
    Exit,
}

impl<W: Write + Send + 'static> Recorder<W> {
    /// A recorder writing to `out`, queuing up to [`RECORDER_QUEUE_LIMIT`]
    /// for it.
    pub fn new(out: W) -> Self {
        Self::with_queue_limit(out, RECORDER_QUEUE_LIMIT)
    }

    /// A recorder writing to `out` that queues up to `limit` bytes of
    /// records while `out` is behind, and drops records past that.
    pub fn with_queue_limit(out: W, limit: usize) -> Self {
        let shared = Arc::new(Shared {
            state: Mutex::new(State {
                queue: Vec::new(),
                limit,
                queued: 0,
                written: 0,
                moved: None,
                idle: false,
                closing: false,
                failed: None,
                unnoted: 0,
                dropped_in_all: 0,
                origin: None,
                last: Duration::ZERO,
                after_exit: false,
                generation: 1,
            }),
            work: Condvar::new(),
            progress: Condvar::new(),
        });
        let writer = Arc::clone(&shared);
        let thread =
            crate::job_thread::spawn_named("childwire-recorder", Box::new(move || writer.run(out)));
        let thread = match thread {
            Ok(thread) => Some(thread),
            Err(err) => {
                shared.lock().fail(&err);
                None
            }
        };
        Self {
            shared,
            thread,
            writer: PhantomData,
        }
    }

    /// Records a message that went `dir` at `at`: for a caller that moves
    /// messages itself (a proxy) and records what no transport saw.
    pub fn message(&self, at: Instant, dir: Direction, message: &[u8]) {
        self.write(at, dir.as_str(), Kind::Event, |record| {
            write_message(record, message);
        });
    }

    /// Records a message of `len` bytes that was dropped for its size on
    /// its way `dir`.
    pub fn oversized(&self, at: Instant, dir: Direction, len: u64) {
        self.write(at, dir.as_str(), Kind::Event, |record| {
            record.extend_from_slice(format!(",\"oversized\":{len}").as_bytes());
        });
    }

    /// How many records were dropped so far because the writer was behind.
    #[must_use]
    pub fn dropped(&self) -> u64 {
        self.shared.lock().dropped_in_all
    }

    /// Waits until every record so far is written and `W` flushed, as long
    /// as the writer moves (it has [`RECORDER_STALL`] from the call to take
    /// something). Records dropped since the last notice get one.
    ///
    /// # Errors
    ///
    /// The error of the write that failed, now or before (recording
    /// stopped then); [`io::ErrorKind::TimedOut`] when the writer took
    /// nothing for [`RECORDER_STALL`] (the records stay queued).
    pub fn flush(&self) -> io::Result<()> {
        let called = Instant::now();
        let mut state = self.shared.lock();
        state.note_dropped();
        let target = state.queued;
        self.shared.wake(&mut state);
        let state = self.shared.wait_for(state, target, Some(called));
        if let Some(kind) = state.failed {
            return Err(io::Error::new(
                kind,
                "an earlier write of the recording failed",
            ));
        }
        if state.written < target {
            return Err(io::Error::new(
                io::ErrorKind::TimedOut,
                format!("the recording's writer took nothing for {RECORDER_STALL:?}"),
            ));
        }
        Ok(())
    }

    /// Queues one record: its head, `body`'s fields, its end.
    fn write(&self, at: Instant, dir: &str, kind: Kind, body: impl FnOnce(&mut Vec<u8>)) {
        let mut state = self.shared.lock();
        if state.failed.is_some() {
            return;
        }
        let start = state.queue.len();
        let (t, wall) = state.stamp(at);
        if state.after_exit {
            state.generation += 1;
            let generation = state.generation;
            state.head(t, wall, "generation");
            state
                .queue
                .extend_from_slice(format!(",\"generation\":{generation}}}\n").as_bytes());
        }
        state.note_dropped_at(t, wall);
        state.head(t, wall, dir);
        body(&mut state.queue);
        state.queue.extend_from_slice(b"}\n");
        let room = match kind {
            Kind::Event => state.limit,
            Kind::Exit => state.limit.saturating_mul(2),
        };
        if state.queue.len() > room && start > 0 {
            // No room: the record, and what came with it, wait for the next.
            // (One record alone always goes in: a message is bounded by the
            // transport's size limit.)
            state.queue.truncate(start);
            if state.after_exit {
                state.generation -= 1;
            }
            state.unnoted += 1;
            state.dropped_in_all += 1;
            if state.dropped_in_all == 1 {
                crate::log::warn!(
                    "the recording's writer is behind: records are dropped, and the recording says how many"
                );
            }
            return;
        }
        state.unnoted = 0;
        state.after_exit = kind == Kind::Exit;
        state.queued += (state.queue.len() - start) as u64;
        self.shared.wake(&mut state);
    }
}

impl Shared {
    fn lock(&self) -> MutexGuard<'_, State> {
        // A panic while the lock was held leaves whole records behind at
        // worst: go on.
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Wakes the writer if it waits.
    fn wake(&self, state: &mut State) {
        if state.idle {
            state.idle = false;
            self.work.notify_one();
        }
    }

    /// Waits until `target` bytes are written, the writer failed, or it took
    /// nothing for [`RECORDER_STALL`] (counted from `patient_from` at the
    /// earliest: a writer stuck for long gets that long again).
    fn wait_for<'a>(
        &self,
        mut state: MutexGuard<'a, State>,
        target: u64,
        patient_from: Option<Instant>,
    ) -> MutexGuard<'a, State> {
        loop {
            if state.written >= target || state.failed.is_some() {
                return state;
            }
            let moved = state.moved.unwrap_or_else(Instant::now);
            let since = patient_from.map_or(moved, |from| from.max(moved));
            let left = RECORDER_STALL.saturating_sub(since.elapsed());
            if left.is_zero() {
                return state;
            }
            state = self
                .progress
                .wait_timeout(state, left)
                .unwrap_or_else(PoisonError::into_inner)
                .0;
        }
    }

    /// The writer thread: writes out what is queued, in slices, until the
    /// recorder is dropped and the queue is empty, or a write fails.
    fn run<W: Write>(&self, mut out: W) {
        let mut batch = Vec::new();
        loop {
            let mut state = self.lock();
            while state.queue.is_empty() && !state.closing {
                state.idle = true;
                state.moved = None;
                state = self
                    .work
                    .wait(state)
                    .unwrap_or_else(PoisonError::into_inner);
            }
            state.idle = false;
            if state.queue.is_empty() {
                // Closing, and all written.
                return;
            }
            std::mem::swap(&mut state.queue, &mut batch);
            state.moved = Some(Instant::now());
            drop(state);
            let written = catch_unwind(AssertUnwindSafe(|| {
                for slice in batch.chunks(SLICE) {
                    out.write_all(slice)?;
                    self.moved(slice.len());
                }
                out.flush()
            }));
            let mut state = self.lock();
            match written {
                Ok(Ok(())) => {}
                Ok(Err(err)) => state.fail(&err),
                Err(_) => state.fail(&io::Error::other("the writer panicked")),
            }
            self.progress.notify_all();
            if state.failed.is_some() {
                state.queue = Vec::new();
                return;
            }
            drop(state);
            batch.clear();
            if batch.capacity() > 4 * SLICE {
                // A burst's allocation is not kept for good.
                batch = Vec::new();
            }
        }
    }

    /// The writer finished a slice of `len` bytes.
    fn moved(&self, len: usize) {
        let mut state = self.lock();
        state.written += len as u64;
        state.moved = Some(Instant::now());
        self.progress.notify_all();
    }
}

impl State {
    /// `t` of a record at `at`, and its wall-clock time.
    fn stamp(&mut self, at: Instant) -> (Duration, SystemTime) {
        let (origin, wall) = *self.origin.get_or_insert_with(|| (at, SystemTime::now()));
        let t = at.saturating_duration_since(origin).max(self.last);
        self.last = t;
        (t, wall + t)
    }

    /// A record's head, up to its `"dir"`.
    fn head(&mut self, t: Duration, wall: SystemTime, dir: &str) {
        self.queue.extend_from_slice(
            format!(
                "{{\"t\":{}.{:06},\"ts\":\"{}\",\"dir\":\"{dir}\"",
                t.as_secs(),
                t.subsec_micros(),
                rfc3339(wall)
            )
            .as_bytes(),
        );
    }

    /// The `"dropped"` notice for the records dropped since the last one,
    /// if any, at `t`.
    fn note_dropped_at(&mut self, t: Duration, wall: SystemTime) {
        if self.unnoted == 0 {
            return;
        }
        let dropped = self.unnoted;
        self.head(t, wall, "notice");
        self.queue.extend_from_slice(
            format!(
                ",\"kind\":\"dropped\",\"records\":{dropped},\"text\":\"{dropped} records dropped here: the recording's writer was behind\"}}\n"
            )
            .as_bytes(),
        );
    }

    /// The `"dropped"` notice, queued now (past the limit: it is small).
    fn note_dropped(&mut self) {
        if self.unnoted == 0 || self.failed.is_some() {
            return;
        }
        let start = self.queue.len();
        let t = self.last;
        let wall = self
            .origin
            .map_or_else(SystemTime::now, |(_, wall)| wall + t);
        self.note_dropped_at(t, wall);
        self.unnoted = 0;
        self.queued += (self.queue.len() - start) as u64;
    }

    fn fail(&mut self, err: &io::Error) {
        if self.failed.is_none() {
            self.failed = Some(err.kind());
            crate::log::warn!("writing the recording failed, recording stops: {err}");
        }
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
                self.write(at, "notice", Kind::Event, |record| {
                    record.extend_from_slice(b",\"kind\":\"malformed\",\"text\":");
                    write_str(record, &notice.to_string());
                });
            }
            TapEvent::Notice(Notice::Pollution(notice)) => {
                self.write(at, "notice", Kind::Event, |record| {
                    record.extend_from_slice(b",\"kind\":\"pollution\",\"text\":");
                    write_str(record, &notice.to_string());
                    record.extend_from_slice(b",\"bytes\":");
                    write_str(record, &String::from_utf8_lossy(&notice.head));
                });
            }
            TapEvent::Stderr { line, level } => {
                self.write(at, "stderr", Kind::Event, |record| {
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
        self.write(at, "exit", Kind::Exit, |record| {
            record.extend_from_slice(
                format!(",\"exit_code\":{code},\"signal\":{signal},\"report\":").as_bytes(),
            );
            write_str(record, &report.to_string());
        });
    }
}

impl<W: Write + Send + 'static> Drop for Recorder<W> {
    /// Writes out what is queued (and a notice for records dropped at the
    /// end), waiting as long as the writer moves.
    fn drop(&mut self) {
        let mut state = self.shared.lock();
        state.note_dropped();
        state.closing = true;
        let target = state.queued;
        self.shared.wake(&mut state);
        let state = self.shared.wait_for(state, target, None);
        let done = state.written >= target || state.failed.is_some();
        drop(state);
        if let Some(thread) = self.thread.take() {
            if done {
                let _ = thread.join();
            } else {
                crate::log::warn!(
                    "the recording's writer took nothing for {RECORDER_STALL:?}: it finishes on its own thread"
                );
            }
        }
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
