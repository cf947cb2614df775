//! Whether a child started: ready, exited before its first message, or no
//! sign of life for too long.
//!
//! A fixed start-up timeout fails the servers that are slowest to start on
//! their first run (`npx -y` and `uvx` download the server first), and a
//! server that exits at once is easily reported as a bare "connection
//! closed". [`Startup`] waits as long as the child shows life (a stderr
//! line, bytes on stdout) and gives a verdict that says which of the three
//! happened.

use std::fmt;
use std::time::{Duration, Instant};

use crate::ending::Exit;

/// When a child counts as ready.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum ReadyOn {
    /// At its first complete message (the default).
    #[default]
    FirstMessage,
    /// When the caller says so with [`Startup::handle_ready`] (its own
    /// predicate over the messages or stderr lines: say, the answer to
    /// `initialize`). Messages before that are signs of life.
    Caller,
}

/// The deadlines of a [`Startup`].
///
/// ```
/// use std::time::Duration;
/// use childwire_core::startup::{ReadyOn, StartupConfig};
///
/// // Ready once the caller saw the answer to `initialize`; 20 s of silence
/// // is too much, and so are 5 minutes in all.
/// let mut config = StartupConfig::default();
/// config.ready_on = ReadyOn::Caller;
/// config.silence = Some(Duration::from_secs(20));
/// config.limit = Some(Duration::from_secs(300));
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct StartupConfig {
    /// How long the child may show no sign of life (no stderr output, no
    /// stdout bytes) before the verdict is
    /// [`NoSignOfLife`](StartupVerdict::NoSignOfLife). Every sign of life
    /// starts it over, so a chatty child that is slow to start (a first
    /// `npx -y` run) is given the time it needs. `None` waits without a
    /// deadline. Default 60 s.
    pub silence: Option<Duration>,
    /// The longest start-up, signs of life or not; `None` (the default)
    /// sets no such limit.
    pub limit: Option<Duration>,
    /// When the child counts as ready.
    pub ready_on: ReadyOn,
}

impl Default for StartupConfig {
    fn default() -> Self {
        Self {
            silence: Some(Duration::from_secs(60)),
            limit: None,
            ready_on: ReadyOn::FirstMessage,
        }
    }
}

/// How a child's start-up ended, from [`Startup::poll_verdict`], said in
/// words by its `Display`.
///
/// ```
/// use std::time::Duration;
/// use childwire_core::Exit;
/// use childwire_core::startup::StartupVerdict;
///
/// let verdict = StartupVerdict::ExitedBeforeFirstMessage {
///     exit: Exit::Code(1),
///     stderr_tail: "starting\nError: Cannot find module 'left-pad'\n".to_owned(),
///     after: Duration::from_millis(80),
/// };
/// assert_eq!(
///     verdict.to_string(),
///     "exited with code 1 before its first message (0.1 s after it was started); \
///      its stderr ends with: Error: Cannot find module 'left-pad'"
/// );
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum StartupVerdict {
    /// It is ready.
    Ready {
        /// Time from spawn.
        after: Duration,
    },
    /// It exited before its first message (before it was ready).
    ExitedBeforeFirstMessage {
        /// How it exited.
        exit: Exit,
        /// The end of its stderr, as passed in.
        stderr_tail: String,
        /// Time from spawn.
        after: Duration,
    },
    /// Its output ended before its first message with no exit to report:
    /// the peer of a channel over a pipe pair closed it, or the task
    /// driving the child stopped (its runtime shut down).
    ClosedBeforeFirstMessage {
        /// Time from spawn.
        after: Duration,
    },
    /// It showed no sign of life for [`StartupConfig::silence`], or was
    /// still not ready at [`StartupConfig::limit`].
    NoSignOfLife {
        /// How long it had been silent.
        silent_for: Duration,
        /// Time from spawn.
        after: Duration,
        /// Whether it showed any life at all (stderr output, stdout bytes)
        /// before it fell silent.
        showed_life: bool,
        /// The deadline was [`StartupConfig::limit`], not the silence.
        limit_reached: bool,
    },
}

impl StartupVerdict {
    /// Whether the child is ready.
    #[must_use]
    pub fn is_ready(&self) -> bool {
        matches!(self, StartupVerdict::Ready { .. })
    }
}

impl fmt::Display for StartupVerdict {
    /// One sentence: `exited with code 127 before its first message (0.0 s
    /// after it was started): the shell could not find the program; stderr:
    /// …`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            StartupVerdict::Ready { after } => {
                write!(f, "ready {} after it was started", Secs(*after))
            }
            StartupVerdict::ExitedBeforeFirstMessage {
                exit,
                stderr_tail,
                after,
            } => {
                write!(
                    f,
                    "{exit} before its first message ({} after it was started)",
                    Secs(*after)
                )?;
                if let Some(hint) = exit_hint(*exit) {
                    write!(f, ": {hint}")?;
                }
                match stderr_tail
                    .lines()
                    .rev()
                    .find(|line| !line.trim().is_empty())
                {
                    Some(line) => write!(f, "; its stderr ends with: {}", line.trim()),
                    None => f.write_str("; it wrote nothing to stderr"),
                }
            }
            StartupVerdict::ClosedBeforeFirstMessage { after } => write!(
                f,
                "its output ended before its first message ({} after it was started)",
                Secs(*after)
            ),
            StartupVerdict::NoSignOfLife {
                silent_for,
                after,
                showed_life,
                limit_reached: false,
            } => write!(
                f,
                "no sign of life for {}{} ({} after it was started)",
                Secs(*silent_for),
                if *showed_life {
                    ""
                } else {
                    ": no output on stdout or stderr at all"
                },
                Secs(*after)
            ),
            StartupVerdict::NoSignOfLife { after, .. } => write!(
                f,
                "not ready {} after it was started, the start-up limit",
                Secs(*after)
            ),
        }
    }
}

/// What an exit code usually means at start-up, where it says more than
/// the code.
fn exit_hint(exit: Exit) -> Option<&'static str> {
    match exit {
        // What POSIX shells (and so `sh -c`, most launchers' scripts) exit
        // with when they cannot run the command.
        Exit::Code(127) => Some("the shell could not find the program (code 127)"),
        Exit::Code(126) => Some("the shell found the program but could not run it (code 126)"),
        _ => None,
    }
}

/// A child's start-up as a pure state machine: a deadline that stretches
/// while the child shows life, ending in one [`StartupVerdict`].
///
/// # How to drive it
///
/// Create it at spawn with [`new`](Self::new). Inputs, each with `now`:
/// [`handle_stderr`](Self::handle_stderr) (any stderr output),
/// [`handle_stdout`](Self::handle_stdout) (any bytes read from stdout,
/// before they make a message), [`handle_message`](Self::handle_message)
/// (a complete message), [`handle_ready`](Self::handle_ready) (the
/// caller's predicate said ready, with [`ReadyOn::Caller`]),
/// [`handle_exit`](Self::handle_exit),
/// [`handle_closed`](Self::handle_closed) (no exit to report), and
/// [`handle_timeout`](Self::handle_timeout) (early, late and repeated calls
/// are fine). After each, drain [`poll_verdict`](Self::poll_verdict) (the
/// verdict, once) and arm a timer for [`poll_timeout`](Self::poll_timeout).
/// Inputs after the verdict change nothing.
///
/// `now` should be monotonic; an earlier `now` never panics and never
/// moves a deadline back.
///
/// # Example
///
/// A server that logs while it downloads, then answers:
///
/// ```
/// use std::time::{Duration, Instant};
/// use childwire_core::startup::{Startup, StartupConfig, StartupVerdict};
///
/// let mut config = StartupConfig::default();
/// config.silence = Some(Duration::from_secs(10));
/// let spawned = Instant::now();
/// let mut startup = Startup::new(config, spawned);
/// for second in [8, 16, 24] {
///     // Each log line comes before the silence runs out.
///     startup.handle_timeout(spawned + Duration::from_secs(second));
///     startup.handle_stderr(spawned + Duration::from_secs(second));
/// }
/// assert_eq!(startup.poll_verdict(), None, "it kept showing life");
/// startup.handle_message(spawned + Duration::from_secs(30));
/// assert_eq!(
///     startup.poll_verdict(),
///     Some(StartupVerdict::Ready { after: Duration::from_secs(30) })
/// );
/// ```
#[derive(Debug, Clone)]
pub struct Startup {
    config: StartupConfig,
    spawned: Instant,
    /// The latest sign of life (the spawn to begin with).
    last_life: Instant,
    showed_life: bool,
    verdict: Option<StartupVerdict>,
    taken: bool,
}

impl Startup {
    /// The start-up of a child spawned at `now`.
    #[must_use]
    pub fn new(config: StartupConfig, now: Instant) -> Self {
        Self {
            config,
            spawned: now,
            last_life: now,
            showed_life: false,
            verdict: None,
            taken: false,
        }
    }

    /// Whether the verdict was given (taken or not).
    #[must_use]
    pub fn is_decided(&self) -> bool {
        self.verdict.is_some() || self.taken
    }

    /// The child wrote to stderr.
    pub fn handle_stderr(&mut self, now: Instant) {
        self.life(now);
    }

    /// Bytes came from the child's stdout (a message or not yet).
    pub fn handle_stdout(&mut self, now: Instant) {
        self.life(now);
    }

    /// A complete message came from the child: ready with
    /// [`ReadyOn::FirstMessage`], a sign of life with [`ReadyOn::Caller`].
    pub fn handle_message(&mut self, now: Instant) {
        self.life(now);
        if self.config.ready_on == ReadyOn::FirstMessage {
            self.ready(now);
        }
    }

    /// The caller decided the child is ready (whatever [`ReadyOn`] says).
    pub fn handle_ready(&mut self, now: Instant) {
        self.life(now);
        self.ready(now);
    }

    /// The child exited before it was ready, with `stderr_tail` the end of
    /// its stderr.
    pub fn handle_exit(&mut self, exit: Exit, stderr_tail: String, now: Instant) {
        self.expire(now);
        if !self.is_decided() {
            self.verdict = Some(StartupVerdict::ExitedBeforeFirstMessage {
                exit,
                stderr_tail,
                after: self.since_spawn(now),
            });
        }
    }

    /// Its output ended before it was ready, with no exit to report (see
    /// [`StartupVerdict::ClosedBeforeFirstMessage`]).
    pub fn handle_closed(&mut self, now: Instant) {
        self.expire(now);
        if !self.is_decided() {
            self.verdict = Some(StartupVerdict::ClosedBeforeFirstMessage {
                after: self.since_spawn(now),
            });
        }
    }

    /// A deadline from [`poll_timeout`](Self::poll_timeout) may have passed.
    pub fn handle_timeout(&mut self, now: Instant) {
        self.expire(now);
    }

    /// The verdict, once.
    #[must_use]
    pub fn poll_verdict(&mut self) -> Option<StartupVerdict> {
        let verdict = self.verdict.take()?;
        self.taken = true;
        Some(verdict)
    }

    /// When to call [`handle_timeout`](Self::handle_timeout): the earlier of
    /// the silence and the limit; `None` once decided or without either.
    #[must_use]
    pub fn poll_timeout(&self) -> Option<Instant> {
        if self.is_decided() {
            return None;
        }
        let silence = self
            .config
            .silence
            .and_then(|silence| self.last_life.checked_add(silence));
        let limit = self
            .config
            .limit
            .and_then(|limit| self.spawned.checked_add(limit));
        match (silence, limit) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        }
    }

    fn since_spawn(&self, now: Instant) -> Duration {
        now.saturating_duration_since(self.spawned)
    }

    /// A sign of life at `now`, unless a deadline already passed.
    fn life(&mut self, now: Instant) {
        self.expire(now);
        if !self.is_decided() {
            self.showed_life = true;
            self.last_life = self.last_life.max(now);
        }
    }

    fn ready(&mut self, now: Instant) {
        if !self.is_decided() {
            self.verdict = Some(StartupVerdict::Ready {
                after: self.since_spawn(now),
            });
        }
    }

    /// Gives the no-sign-of-life verdict if a deadline `now` reached.
    fn expire(&mut self, now: Instant) {
        if self.is_decided() {
            return;
        }
        if let Some(deadline) = self.poll_timeout() {
            if now >= deadline {
                let limit_reached = self
                    .config
                    .limit
                    .and_then(|limit| self.spawned.checked_add(limit))
                    == Some(deadline);
                self.verdict = Some(StartupVerdict::NoSignOfLife {
                    silent_for: deadline.saturating_duration_since(self.last_life),
                    after: self.since_spawn(deadline),
                    showed_life: self.showed_life,
                    limit_reached,
                });
            }
        }
    }
}

/// A duration in seconds, as reports show it (`1.5 s`).
struct Secs(Duration);

impl fmt::Display for Secs {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:.1} s", self.0.as_secs_f64())
    }
}
