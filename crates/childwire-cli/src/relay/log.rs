//! The relay's log: a recording of the session, written by childwire's
//! [`Recorder`] (one NDJSON record per event).
//!
//! ```text
//! {"t":0.000000,"ts":"2026-11-25T09:30:00.000100Z","dir":"to_child","msg":{"jsonrpc":"2.0","id":1,"method":"ping"}}
//! {"t":0.000561,"ts":"2026-11-25T09:30:00.000661Z","dir":"from_child","msg":{"jsonrpc":"2.0","id":1,"result":{}}}
//! {"t":0.001210,"ts":"2026-11-25T09:30:00.001310Z","dir":"stderr","line":"INFO: bye","level":"info"}
//! {"t":0.002004,"ts":"2026-11-25T09:30:00.002104Z","dir":"exit","exit_code":0,"signal":null,"report":"exited with code 0 ..."}
//! ```
//!
//! The child's side is recorded by a tap on its transport (its messages,
//! notices, stderr lines and exit); the relay records what goes to the
//! child itself, as it takes each line from the host, before the child
//! can see it (the transport is handed each long line in pieces). A
//! message that is valid JSON is embedded as it came, byte for byte; any
//! other line is a JSON string under `"text"`; a line dropped for its size
//! is `"oversized"`. So the log tells the whole story:
//! `jq 'select(.dir=="from_child") | .msg.id' log.ndjson`.

use std::fs::{File, OpenOptions};
use std::io;
use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Instant;

use childwire::tap::{Recorder, Tap, TapEvent};
use childwire::{Oversized, Runtime};

pub use childwire::tap::Direction;

/// The log file, shared by the relay and the child transport's tap; each
/// record is written whole, so records never interleave.
#[derive(Clone)]
pub struct Log {
    recorder: Arc<Recorder<File>>,
    /// The runtime's clock, the one the tap's records are stamped with.
    now: Arc<dyn Fn() -> Instant + Send + Sync>,
    /// A write failed and that was said: logging stopped.
    failed: Arc<AtomicBool>,
    /// The program's name, which that message starts with.
    name: &'static str,
}

impl Log {
    /// Opens `path` for appending, creating it if needed, readable and
    /// writable by its owner alone (see [`open_private`]); records are
    /// stamped with the clock of the runtime `R` this is called on. A
    /// failure to write is said on stderr after `name` (the program's).
    pub fn create<R: Runtime>(path: &Path, name: &'static str) -> io::Result<Self> {
        let rt = R::current().map_err(io::Error::other)?;
        let file = open_private(path)?;
        Ok(Self {
            recorder: Arc::new(Recorder::new(file)),
            now: Arc::new(move || rt.now()),
            failed: Arc::new(AtomicBool::new(false)),
            name,
        })
    }

    /// The tap for the child's transport: all it sees but what it is sent,
    /// which [`to_child`](Self::to_child) records whole.
    pub fn child_tap(&self) -> impl Tap {
        ChildSide(Arc::clone(&self.recorder))
    }

    /// Records a message from the host on its way to the child.
    pub fn to_child(&self, message: &[u8]) {
        self.recorder
            .message((self.now)(), Direction::ToChild, message);
    }

    /// Records a message from the host dropped for its size (the child's
    /// are the tap's).
    pub fn oversized_to_child(&self, notice: &Oversized) {
        self.recorder
            .oversized((self.now)(), Direction::ToChild, notice.len);
    }

    /// Writes buffered records to the file; a failure is said once.
    pub fn flush(&self) {
        if let Err(err) = self.recorder.flush() {
            if !self.failed.swap(true, Ordering::Relaxed) {
                note!(
                    "{}: writing the log failed, logging stops: {err}",
                    self.name
                );
            }
        }
    }
}

impl std::fmt::Debug for Log {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Log").finish_non_exhaustive()
    }
}

/// Opens `path` for appending. A new file is created with mode 0600 on
/// Unix: it holds every message of the session, which may carry tokens,
/// file contents and prompts. An existing file keeps its mode: it is
/// never widened, nor narrowed behind its owner's back.
pub fn open_private(path: &Path) -> io::Result<File> {
    let mut options = OpenOptions::new();
    options.create(true).append(true);
    #[cfg(unix)]
    std::os::unix::fs::OpenOptionsExt::mode(&mut options, 0o600);
    options.open(path)
}

/// The recorder as the child transport's tap.
struct ChildSide(Arc<Recorder<File>>);

impl Tap for ChildSide {
    fn event(&self, at: Instant, event: TapEvent<'_>) {
        // The transport is sent pieces of lines: the relay records the
        // lines themselves.
        if !matches!(event, TapEvent::Sent(_)) {
            self.0.event(at, event);
        }
    }
}

#[cfg(test)]
mod tests {
    use serde_json::Value;

    use super::*;

    #[test]
    fn the_relay_records_what_it_sends_and_the_tap_the_rest() {
        let path = std::env::temp_dir().join(format!("childwire-log-{}", std::process::id()));
        // A runtime for its clock alone.
        let runtime = tokio::runtime::Builder::new_current_thread()
            .build()
            .unwrap();
        let _entered = runtime.enter();
        let log = Log::create::<childwire::tokio::Tokio>(&path, "relay").unwrap();
        let tap = log.child_tap();
        log.to_child(br#"{"id":1, "method":"ping"}"#);
        // What the transport is sent (a piece of a line) is not recorded
        // again; what it hands out is.
        tap.event(Instant::now(), TapEvent::Sent(b"{\"id\":1,"));
        tap.event(Instant::now(), TapEvent::Received(b"not \"json\""));
        log.oversized_to_child(&Oversized::new(42, bytes::Bytes::new()));
        log.flush();
        let text = std::fs::read_to_string(&path).unwrap();
        std::fs::remove_file(&path).unwrap();
        let records: Vec<Value> = text
            .lines()
            .map(|line| serde_json::from_str(line).unwrap())
            .collect();
        assert_eq!(records.len(), 3, "{text}");
        assert_eq!(records[0]["dir"], "to_child");
        assert_eq!(records[0]["msg"]["method"], "ping");
        assert!(text.contains(r#""msg":{"id":1, "method":"ping"}"#));
        assert_eq!(records[1]["dir"], "from_child");
        assert_eq!(records[1]["text"], "not \"json\"");
        assert_eq!(records[2]["dir"], "to_child");
        assert_eq!(records[2]["oversized"], 42);
    }

    #[cfg(unix)]
    #[test]
    fn a_new_log_is_private_and_an_existing_one_keeps_its_mode() {
        use std::os::unix::fs::PermissionsExt as _;

        let mode = |path: &Path| std::fs::metadata(path).unwrap().permissions().mode() & 0o777;
        let dir = std::env::temp_dir().join(format!("childwire-log-mode-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let new = dir.join("new.ndjson");
        let _ = std::fs::remove_file(&new);
        drop(open_private(&new).unwrap());
        let existing = dir.join("existing.ndjson");
        std::fs::write(&existing, b"").unwrap();
        std::fs::set_permissions(&existing, std::fs::Permissions::from_mode(0o640)).unwrap();
        drop(open_private(&existing).unwrap());
        let (new_mode, existing_mode) = (mode(&new), mode(&existing));
        std::fs::remove_dir_all(&dir).unwrap();
        assert_eq!(new_mode, 0o600, "{new_mode:o}");
        assert_eq!(existing_mode, 0o640, "{existing_mode:o}");
    }
}
