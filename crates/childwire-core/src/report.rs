//! The exit report: how the child's life ended, in one value.
//!
//! # The types that say how it ended
//!
//! A few small types, each saying one thing; every other type that speaks
//! of the end is built from them or points to them.
//!
//! | type | says | made by |
//! |---|---|---|
//! | [`Exit`] | what the OS reported: an exit code or a signal | the adapter, at the reap |
//! | [`Signal`](crate::Signal) | a step the lifecycle asks for: SIGTERM or SIGKILL | [`Lifecycle`](crate::Lifecycle) |
//! | [`EndedBy`] | which step came before the exit: none, stdin closed, a signal | the lifecycle, from the steps it handed out |
//! | [`Swept`](crate::Swept) | what the child left behind and was ended after it | the adapter's sweep |
//! | [`ExitReport`] | all of the above, with timing, the stderr tail, counters and what the caller had not received | the lifecycle, completed by the [`Supervisor`](crate::supervisor::Supervisor) |
//!
//! Three more speak of the end without repeating it:
//!
//! - [`Closed`](crate::Closed): why sending stopped. `Exited` means the
//!   report exists or is coming (see
//!   [`Supervisor::report_wait`](crate::supervisor::Supervisor::report_wait));
//!   `Closing`, `PeerClosed`, `Stalled` and `DriverStopped` are the other
//!   ways a sender learns that sending is over.
//! - [`Backlog`](crate::inbound::Backlog): what the caller had not received
//!   when the end was decided, copied once into the report
//!   (`unreceived_messages`, `unreceived_bytes`, `stdout_held_back`).
//! - The async layer's `ShutdownError`: why a shutdown could not finish,
//!   with the meanings of `Closed`'s `DriverStopped` and `PeerClosed`. Its
//!   errors met after the exit carry the `ExitReport` itself.

use std::fmt;
use std::time::Duration;

use bytes::Bytes;

use crate::ending::{EndedBy, Exit};

/// Traffic counters of a channel or of one child's life.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct Counters {
    /// Messages received from the child's stdout.
    pub messages_in: u64,
    /// Bytes of the messages received (without line endings).
    pub bytes_in: u64,
    /// Messages written to the child's stdin.
    pub messages_out: u64,
    /// Bytes of the messages written (without line endings).
    pub bytes_out: u64,
    /// Oversized messages dropped from stdout.
    pub oversized: u64,
    /// Malformed frames dropped from stdout (framings that can break).
    pub malformed: u64,
    /// Blank lines skipped on stdout.
    pub blank_lines: u64,
    /// Bytes the child wrote to stderr.
    pub stderr_bytes: u64,
    /// Lines on stdout that were not JSON messages (and `Content-Length`
    /// header blocks that were another framing), with pollution detection
    /// on (see [`ChannelConfig::pollution`](crate::config::ChannelConfig::pollution)).
    pub polluted: u64,
    /// Of them, lines dropped by
    /// [`PollutionPolicy::Drop`](crate::pollution::PollutionPolicy::Drop).
    pub polluted_dropped: u64,
    /// Of the polluted lines, those taken out of the messages and handed
    /// on with the child's stderr lines (marked as stdout), as a child's
    /// default config does (`PollutionPolicy::Divert`).
    pub polluted_diverted: u64,
}

/// How the child ended, with its stderr tail and counters.
///
/// Its `Display` is one line a user can read at a glance, e.g.
/// `exited with code 1 on its own after 0.8 s; last stderr: Error: Cannot find module 'x'`
/// or `killed by SIGKILL, 4.0 s after shutdown`. The stderr part (one line,
/// picked from the tail) is shown unless the child exited with code 0; the
/// whole tail is in [`stderr_tail`](Self::stderr_tail). Control characters
/// from the child (`\r`, ANSI escapes) are shown escaped, so a hostile
/// child cannot rewrite the line it appears in; the fields keep them as
/// they came.
///
/// ```
/// use std::time::Duration;
/// use childwire_core::{EndedBy, Exit, ExitReport};
///
/// let mut report = ExitReport::new(Exit::Code(1), EndedBy::OnItsOwn, Duration::from_millis(800));
/// report.stderr_tail = "loading\nError: Cannot find module 'x'\r\x1b[2K".into();
/// assert_eq!(
///     report.to_string(),
///     r"exited with code 1 on its own after 0.8 s; last stderr: Error: Cannot find module 'x'\r\u{1b}[2K"
/// );
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct ExitReport {
    /// Exit code or signal.
    pub exit: Exit,
    /// Which step ended the child.
    pub ended_by: EndedBy,
    /// Whether shutdown was asked before the child exited.
    pub shutdown_requested: bool,
    /// From the shutdown request (or, without one, from spawn) until the exit.
    pub elapsed: Duration,
    /// Whether stdout and stderr reached EOF within the drain grace after
    /// the exit. `false` means something the child started still held them
    /// open when the report was made, or held them when the child exited
    /// (then [`stray_processes_ended`](Self::stray_processes_ended) says how
    /// many were ended).
    pub pipes_drained: bool,
    /// Processes the child left behind that were still alive after its exit
    /// and were ended with SIGKILL: what was left of its process group and,
    /// where the platform can find them, processes that escaped the group
    /// but held its pipes, and the rest of its cgroup when contained in one.
    pub stray_processes_ended: u32,
    /// The child's last stderr lines (empty when stderr was not captured).
    pub stderr_tail: String,
    /// The stderr callback panicked; it was not called again.
    pub stderr_callback_panicked: bool,
    /// Traffic counters, counted when the end was decided (the report is
    /// made once, then; lines the caller had not taken yet are read later
    /// and not counted here).
    pub counters: Counters,
    /// Messages and notices read from stdout that the caller had not yet
    /// received when the child's end was decided (the report made). The
    /// receiver gets them before its copy of the report; `shutdown()`
    /// returns with them still waiting.
    pub unreceived_messages: u64,
    /// The bytes of those messages (of a notice: the part of it kept).
    pub unreceived_bytes: u64,
    /// Whether, when the end was decided, reading stdout was held back by
    /// the receive bound: the caller had not taken what was queued, so
    /// stdout was not read to its end and the drain grace ended the wait
    /// for its EOF. Then [`pipes_drained`](Self::pipes_drained) is `false`
    /// without anything holding the pipes. What stdout still held is read
    /// as the caller makes room, before the receiver's copy of the report.
    pub stdout_held_back: bool,
    /// With request tracking on (a supervised child's
    /// `track_requests`), the ids of the requests sent to the child that
    /// it never answered, as raw JSON text (`7`, `"call-2"`), in the order
    /// sent: each got an error response (see
    /// [`PendingRequests::fail_all`](crate::pending::PendingRequests::fail_all)).
    /// Empty without tracking.
    pub unanswered_ids: Vec<Bytes>,
    /// Requests sent while the request tracker was full: not tracked, so
    /// none of them is in [`unanswered_ids`](Self::unanswered_ids) even if it
    /// was never answered. Zero without tracking.
    pub untracked_requests: u64,
    /// A supervised child stopped because it was idle (see
    /// `GenerationsConfig::idle_stop`); the next send starts it again.
    pub stopped_when_idle: bool,
    /// A supervised child found hung (no answer to a ping, no CPU time, no
    /// output for the configured time) and killed, to be restarted.
    pub killed_when_hung: bool,
}

impl ExitReport {
    /// A report of `exit`, ended by `ended_by` after `elapsed`, with no
    /// shutdown asked, drained pipes, no stderr and zero counters: for
    /// tests and other transports; the lifecycle builds the real ones.
    #[must_use]
    pub fn new(exit: Exit, ended_by: EndedBy, elapsed: Duration) -> Self {
        Self {
            exit,
            ended_by,
            shutdown_requested: false,
            elapsed,
            pipes_drained: true,
            stray_processes_ended: 0,
            stderr_tail: String::new(),
            stderr_callback_panicked: false,
            counters: Counters::default(),
            unreceived_messages: 0,
            unreceived_bytes: 0,
            stdout_held_back: false,
            unanswered_ids: Vec::new(),
            untracked_requests: 0,
            stopped_when_idle: false,
            killed_when_hung: false,
        }
    }

    /// The child exited with code 0.
    #[must_use]
    pub fn success(&self) -> bool {
        self.exit.success()
    }

    /// The child ended without being asked to (it crashed or quit early),
    /// or was killed because it hung.
    #[must_use]
    pub fn unexpected(&self) -> bool {
        !self.shutdown_requested || self.killed_when_hung
    }

    /// The stderr line that best says why the child ended: an error line
    /// that names the cause over one that points to a log, else the last
    /// non-blank line; `None` if stderr was empty. See
    /// [`summary_line`](crate::stderr_tail::summary_line) for the rules.
    #[must_use]
    pub fn stderr_summary(&self) -> Option<&str> {
        crate::stderr_tail::summary_line(&self.stderr_tail)
    }
}

/// Longest stderr excerpt shown by `Display`, in characters.
const SUMMARY_CHARS: usize = 200;

impl ExitReport {
    /// Whether naming the step adds nothing: "killed by SIGTERM" already
    /// says SIGTERM ended it.
    fn step_is_implied(&self) -> bool {
        self.ended_by
            .signal()
            .is_some_and(|signal| self.exit == Exit::Signal(signal.number()))
    }
}

impl fmt::Display for ExitReport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let elapsed = Elapsed(self.elapsed);
        write!(f, "{}", self.exit)?;
        if !self.step_is_implied() {
            write!(f, " {}", self.ended_by)?;
        }
        if self.shutdown_requested {
            write!(f, ", {elapsed} after shutdown")?;
        } else {
            write!(f, " after {elapsed}")?;
        }
        if self.unreceived_messages > 0 || self.stdout_held_back {
            write!(
                f,
                "; at its end {} ({} B) had not been received",
                Count(self.unreceived_messages, "message", "messages"),
                self.unreceived_bytes
            )?;
            if self.stdout_held_back {
                f.write_str(", and more waited in stdout")?;
            }
        }
        if !self.unanswered_ids.is_empty() {
            write_unanswered(f, &self.unanswered_ids)?;
        }
        if self.counters.polluted > 0 {
            write!(
                f,
                "; {} on stdout {} not a message",
                Count(self.counters.polluted, "line", "lines"),
                if self.counters.polluted == 1 {
                    "was"
                } else {
                    "were"
                }
            )?;
        }
        if self.untracked_requests > 0 {
            write!(
                f,
                "; {} not tracked (the tracker was full)",
                Count(self.untracked_requests, "request", "requests")
            )?;
        }
        // A held-back stdout does not reach EOF by itself: that alone says
        // nothing about what the child started.
        if !self.pipes_drained && !self.stdout_held_back {
            f.write_str("; something it started still held its pipes open")?;
        }
        match self.stray_processes_ended {
            0 => {}
            1 => f.write_str("; ended 1 process it left behind")?,
            n => write!(f, "; ended {n} processes it left behind")?,
        }
        if self.stderr_callback_panicked {
            f.write_str("; the stderr callback panicked")?;
        }
        if self.stopped_when_idle {
            f.write_str("; stopped when idle")?;
        }
        if self.killed_when_hung {
            f.write_str("; killed: it hung (no answer, no CPU time, no output)")?;
        }
        if self.success() {
            return Ok(());
        }
        if let Some(line) = self.stderr_summary() {
            f.write_str("; last stderr: ")?;
            let shown = match line.char_indices().nth(SUMMARY_CHARS) {
                Some((cut, _)) => &line[..cut],
                None => line,
            };
            write_escaped(f, shown)?;
            if shown.len() < line.len() {
                f.write_str("…")?;
            }
        }
        Ok(())
    }
}

/// Writes `text` with control characters escaped (`\r`, `\u{1b}`), so what a
/// child wrote cannot move the cursor or restyle the terminal it is shown in.
pub(crate) fn write_escaped(f: &mut fmt::Formatter<'_>, text: &str) -> fmt::Result {
    for c in text.chars() {
        if c.is_control() {
            write!(f, "{}", c.escape_default())?;
        } else {
            fmt::Write::write_char(f, c)?;
        }
    }
    Ok(())
}

/// Most unanswered ids `Display` names; the rest are counted.
const SHOWN_IDS: usize = 10;

/// `; 2 requests never answered (ids 1, "call-2")`.
fn write_unanswered(f: &mut fmt::Formatter<'_>, ids: &[Bytes]) -> fmt::Result {
    let count = u64::try_from(ids.len()).unwrap_or(u64::MAX);
    write!(
        f,
        "; {} never answered (id{} ",
        Count(count, "request", "requests"),
        if ids.len() == 1 { "" } else { "s" }
    )?;
    for (i, id) in ids.iter().take(SHOWN_IDS).enumerate() {
        if i > 0 {
            f.write_str(", ")?;
        }
        write_escaped(f, &String::from_utf8_lossy(id))?;
    }
    if ids.len() > SHOWN_IDS {
        write!(f, ", and {} more", ids.len() - SHOWN_IDS)?;
    }
    f.write_str(")")
}

/// A count with its noun: `1 message`, `3 messages`.
struct Count(u64, &'static str, &'static str);

impl fmt::Display for Count {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let noun = if self.0 == 1 { self.1 } else { self.2 };
        write!(f, "{} {noun}", self.0)
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn c37_the_report_names_the_requests_never_answered_and_only_those() {
        let mut report =
            ExitReport::new(Exit::Signal(9), EndedBy::OnItsOwn, Duration::from_secs(2));
        assert_eq!(
            report.to_string(),
            "killed by SIGKILL on its own after 2.0 s"
        );
        report.unanswered_ids = vec![Bytes::from_static(b"7")];
        assert_eq!(
            report.to_string(),
            "killed by SIGKILL on its own after 2.0 s; 1 request never answered (id 7)"
        );
        report.unanswered_ids = (0..12)
            .map(|n| Bytes::from(format!("\"call-{n}\"")))
            .collect();
        let text = report.to_string();
        assert!(
            text.ends_with(
                "; 12 requests never answered (ids \"call-0\", \"call-1\", \"call-2\", \"call-3\", \
                 \"call-4\", \"call-5\", \"call-6\", \"call-7\", \"call-8\", \"call-9\", and 2 more)"
            ),
            "{text}"
        );
    }
}
