//! The exit report: how the child's life ended, in one value (C15).

use std::fmt;
use std::time::Duration;

use crate::lifecycle::{EndedBy, Ending, Exit};

/// Traffic counters of one child's life.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Counters {
    /// Messages received from the child's stdout.
    pub messages_in: u64,
    /// Bytes of the messages received (without line endings).
    pub bytes_in: u64,
    /// Messages written to the child's stdin.
    pub messages_out: u64,
    /// Bytes of the messages written (without line endings).
    pub bytes_out: u64,
    /// Oversized lines dropped from stdout (C02).
    pub oversized: u64,
    /// Blank lines skipped on stdout (C01).
    pub blank_lines: u64,
    /// Bytes the child wrote to stderr.
    pub stderr_bytes: u64,
}

/// How the child ended, with its stderr tail and counters (C10, C15).
///
/// Its `Display` is one line a user can read at a glance, e.g.
/// `exited with code 1 on its own after 0.8 s; last stderr: Error: Cannot find module 'x'`
/// or `killed by SIGKILL after SIGKILL, 4.0 s after shutdown`. The stderr
/// part (one line, picked from the tail) is shown unless the child exited
/// with code 0; the whole tail is in [`stderr_tail`](Self::stderr_tail).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ExitReport {
    /// Exit code or signal.
    pub exit: Exit,
    /// Which step ended the child.
    pub ended_by: EndedBy,
    /// Whether shutdown was asked before the child exited.
    pub shutdown_requested: bool,
    /// From the shutdown request (or, without one, from spawn) until the exit.
    pub elapsed: Duration,
    /// The child's last stderr lines (empty when stderr was not captured).
    pub stderr_tail: String,
    /// Traffic counters.
    pub counters: Counters,
}

impl ExitReport {
    /// Builds the report from the lifecycle's [`Ending`].
    #[must_use]
    pub fn new(ending: &Ending, stderr_tail: String, counters: Counters) -> Self {
        Self {
            exit: ending.exit,
            ended_by: ending.ended_by,
            shutdown_requested: ending.shutdown_requested,
            elapsed: ending.elapsed,
            stderr_tail,
            counters,
        }
    }

    /// The child exited with code 0.
    #[must_use]
    pub fn success(&self) -> bool {
        self.exit.success()
    }

    /// The child ended without being asked to (it crashed or quit early).
    #[must_use]
    pub fn unexpected(&self) -> bool {
        !self.shutdown_requested
    }

    /// The stderr line that best says why the child ended: the last line
    /// that looks like an error among the last few, else the last non-blank
    /// line; `None` if stderr was empty.
    #[must_use]
    pub fn stderr_summary(&self) -> Option<&str> {
        // Runtimes print the error and then a trailer (node: the stack and
        // its version; rust: a backtrace hint), so the last line alone is
        // often not the useful one.
        const LOOKBACK: usize = 20;
        let recent = || {
            self.stderr_tail
                .lines()
                .map(str::trim)
                .filter(|line| !line.is_empty())
                .rev()
                .take(LOOKBACK)
        };
        recent()
            .find(|line| looks_like_error(line))
            .or_else(|| recent().next())
    }
}

fn looks_like_error(line: &str) -> bool {
    const MARKERS: [&str; 6] = [
        "error",
        "panicked",
        "fatal",
        "exception",
        "denied",
        "not found",
    ];
    let lower = line.to_ascii_lowercase();
    MARKERS.iter().any(|marker| lower.contains(marker))
}

/// Longest stderr excerpt shown by `Display`, in characters.
const SUMMARY_CHARS: usize = 200;

impl fmt::Display for ExitReport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let elapsed = Elapsed(self.elapsed);
        if self.shutdown_requested {
            write!(
                f,
                "{} {}, {elapsed} after shutdown",
                self.exit, self.ended_by
            )?;
        } else {
            write!(f, "{} {} after {elapsed}", self.exit, self.ended_by)?;
        }
        if self.success() {
            return Ok(());
        }
        if let Some(line) = self.stderr_summary() {
            f.write_str("; last stderr: ")?;
            match line.char_indices().nth(SUMMARY_CHARS) {
                Some((cut, _)) => write!(f, "{}…", &line[..cut])?,
                None => f.write_str(line)?,
            }
        }
        Ok(())
    }
}

/// A duration as a person reads it: `12 ms`, `0.8 s`, `4.0 s`.
struct Elapsed(Duration);

impl fmt::Display for Elapsed {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.0 < Duration::from_millis(100) {
            write!(f, "{} ms", self.0.as_millis())
        } else {
            write!(f, "{:.1} s", self.0.as_secs_f64())
        }
    }
}
