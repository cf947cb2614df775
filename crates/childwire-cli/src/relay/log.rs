//! The relay's message log: one NDJSON record per message, both ways.
//!
//! ```text
//! {"ts":"2025-06-18T09:30:00.123456Z","dir":"to_child","msg":{"jsonrpc":"2.0","id":1,"method":"ping"}}
//! {"ts":"2025-06-18T09:30:00.124012Z","dir":"from_child","msg":{"jsonrpc":"2.0","id":1,"result":{}}}
//! ```
//!
//! A message that is valid JSON is embedded as it came, byte for byte (a
//! framed message holds no raw `\n`, so the record stays one line); any
//! other line is logged as a JSON string under `"text"`. Dropped oversized
//! lines and the child's exit are records too, so the log tells the whole
//! story: `jq 'select(.dir=="from_child") | .msg.id' log.ndjson`.

use std::fs::{File, OpenOptions};
use std::io::{self, BufWriter, Write};
use std::path::Path;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::{SystemTime, UNIX_EPOCH};

use serde::de::IgnoredAny;
use serde_json::json;

use super::exit_code;
use childwire::{ExitReport, Oversized};

/// Which way a message went.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Direction {
    /// From the relay's stdin to the child.
    ToChild,
    /// From the child to the relay's stdout.
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

/// The log file, shared by the two directions; each record is written
/// whole under the lock, so records never interleave.
#[derive(Debug, Clone)]
pub struct Log {
    inner: Arc<Mutex<Inner>>,
}

#[derive(Debug)]
struct Inner {
    out: BufWriter<File>,
    /// A write failed: said once, then logging stops.
    failed: bool,
}

impl Log {
    /// Opens `path` for appending, creating it if needed.
    pub fn create(path: &Path) -> io::Result<Self> {
        let file = OpenOptions::new().create(true).append(true).open(path)?;
        Ok(Self {
            inner: Arc::new(Mutex::new(Inner {
                out: BufWriter::with_capacity(64 * 1024, file),
                failed: false,
            })),
        })
    }

    /// Records one message.
    pub fn message(&self, dir: Direction, message: &[u8]) {
        let mut record = record_head(SystemTime::now(), dir);
        if serde_json::from_slice::<IgnoredAny>(message).is_ok() {
            record.extend_from_slice(b",\"msg\":");
            record.extend_from_slice(message);
        } else {
            record.extend_from_slice(b",\"text\":");
            let text = String::from_utf8_lossy(message);
            record.extend_from_slice(json!(text).to_string().as_bytes());
        }
        record.extend_from_slice(b"}\n");
        self.write(&record);
    }

    /// Records a line dropped for being over the size limit.
    pub fn oversized(&self, dir: Direction, notice: &Oversized) {
        let mut record = record_head(SystemTime::now(), dir);
        record.extend_from_slice(format!(",\"oversized\":{}}}\n", notice.len).as_bytes());
        self.write(&record);
    }

    /// Records the child's end.
    pub fn exit(&self, report: &ExitReport) {
        let record = format!(
            "{{\"ts\":\"{}\",\"dir\":\"exit\",\"exit_code\":{},\"report\":{}}}\n",
            rfc3339(SystemTime::now()),
            exit_code(report),
            json!(report.to_string()),
        );
        self.write(record.as_bytes());
    }

    /// Writes buffered records to the file.
    pub fn flush(&self) {
        let mut inner = self.lock();
        if inner.failed {
            return;
        }
        if let Err(err) = inner.out.flush() {
            inner.fail(&err);
        }
    }

    fn write(&self, record: &[u8]) {
        let mut inner = self.lock();
        if inner.failed {
            return;
        }
        if let Err(err) = inner.out.write_all(record) {
            inner.fail(&err);
        }
    }

    fn lock(&self) -> MutexGuard<'_, Inner> {
        // A panic elsewhere while holding the lock leaves whole records
        // behind at worst: keep logging.
        self.inner.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

impl Inner {
    fn fail(&mut self, err: &io::Error) {
        self.failed = true;
        let _ = writeln!(
            io::stderr(),
            "relay: writing the log failed, logging stops: {err}"
        );
    }
}

fn record_head(now: SystemTime, dir: Direction) -> Vec<u8> {
    format!("{{\"ts\":\"{}\",\"dir\":\"{}\"", rfc3339(now), dir.as_str()).into_bytes()
}

/// `now` in UTC as RFC 3339 with microseconds: `2025-06-18T09:30:00.123456Z`.
pub fn rfc3339(now: SystemTime) -> String {
    let since_epoch = now.duration_since(UNIX_EPOCH).unwrap_or_default();
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
mod tests {
    use std::time::Duration;

    use super::*;

    #[test]
    fn timestamps_are_rfc3339_utc() {
        let at =
            |secs, micros| UNIX_EPOCH + Duration::from_secs(secs) + Duration::from_micros(micros);
        assert_eq!(rfc3339(at(0, 0)), "1970-01-01T00:00:00.000000Z");
        assert_eq!(
            rfc3339(at(1_700_000_000, 42)),
            "2023-11-14T22:13:20.000042Z"
        );
        // A leap day, and the last second of a year.
        assert_eq!(rfc3339(at(951_782_400, 0)), "2000-02-29T00:00:00.000000Z");
        assert_eq!(rfc3339(at(1_735_689_599, 0)), "2024-12-31T23:59:59.000000Z");
    }

    #[test]
    fn records_embed_json_as_is_and_quote_anything_else() {
        let dir = std::env::temp_dir().join(format!("childwire-log-{}", std::process::id()));
        let log = Log::create(&dir).unwrap();
        log.message(Direction::ToChild, br#"{"id":1, "method":"ping"}"#);
        log.message(Direction::FromChild, b"not \"json\"");
        log.flush();
        let text = std::fs::read_to_string(&dir).unwrap();
        std::fs::remove_file(&dir).unwrap();
        let records: Vec<serde_json::Value> = text
            .lines()
            .map(|line| serde_json::from_str(line).unwrap())
            .collect();
        assert_eq!(records.len(), 2);
        assert_eq!(records[0]["dir"], "to_child");
        assert_eq!(records[0]["msg"]["method"], "ping");
        assert!(
            text.lines()
                .next()
                .unwrap()
                .contains(r#""msg":{"id":1, "method":"ping"}"#)
        );
        assert_eq!(records[1]["dir"], "from_child");
        assert_eq!(records[1]["text"], "not \"json\"");
    }
}
