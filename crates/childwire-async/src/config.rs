//! A transport's settings: the core's limits and timings, and the hooks
//! that run in this crate (the stderr callback, the wire tap).

use std::fmt;
use std::ops::{Deref, DerefMut};
use std::sync::Arc;

use crate::stderr_lines::{self, StderrCallback, StderrLines};
use crate::tap::{Tap, TapSlot};

/// A transport's limits and timings (the core's [`childwire_core::Config`],
/// reached through `Deref`) and its hooks.
///
/// ```
/// use std::time::Duration;
/// use childwire_async::Config;
///
/// let mut config = Config::default();
/// config.stdin_grace(Duration::from_millis(500));
/// config.on_stderr_line(|line| eprintln!("server: {}", String::from_utf8_lossy(line)));
/// ```
#[derive(Clone, Default)]
pub struct Config {
    core: childwire_core::Config,
    pub(crate) on_stderr_line: Option<StderrCallback>,
    /// Set by [`Config::tap`].
    pub(crate) tap: Option<TapSlot>,
}

impl Config {
    /// Calls `callback` with each line the child writes to stderr, in
    /// addition to `tracing` (with feature `tracing`: target
    /// `childwire::stderr`, the level the line names in the field
    /// `child_level`) and, with the default
    /// [`StderrMode::Show`](crate::StderrMode::Show), this process's
    /// stderr, as the child wrote it: a callback that shows the lines
    /// itself goes with [`StderrMode::Capture`](crate::StderrMode::Capture).
    /// [`level_of`](childwire_core::stderr_level::level_of) reads a line's
    /// level (JSON-lines logs, pino, `INFO:` prefixes): most stderr lines
    /// are logs, not errors.
    pub fn on_stderr_line(
        &mut self,
        callback: impl Fn(&[u8]) + Send + Sync + 'static,
    ) -> &mut Self {
        self.on_stderr_line = Some(Arc::new(callback));
        self
    }
}

impl Config {
    /// The child's stderr lines as a stream ([`StderrLines`]) instead of a
    /// callback: it replaces any [`on_stderr_line`](Self::on_stderr_line).
    /// Lines still go to `tracing`, into the exit report's tail and, with
    /// the default [`StderrMode::Show`](crate::StderrMode::Show), to this
    /// process's stderr.
    ///
    /// ```no_run
    /// # async fn demo<R: childwire_async::Runtime>() -> Result<(), Box<dyn std::error::Error>> {
    /// use childwire_async::{Command, Config, Transport};
    ///
    /// let mut config = Config::default();
    /// let mut stderr = config.stderr_stream();
    /// let server = Transport::<R>::spawn(&Command::new("npx"), config)?;
    /// while let Some(line) = stderr.next_line().await {
    ///     eprintln!("server: {}", String::from_utf8_lossy(&line));
    /// }
    /// # Ok(()) }
    /// ```
    pub fn stderr_stream(&mut self) -> StderrLines {
        let (sink, lines) = stderr_lines::pair();
        self.on_stderr_line(move |line| sink.push(line));
        lines
    }
}

impl Config {
    /// Shows `tap` everything that crosses the transports spawned with
    /// this config: messages both ways, notices, stderr lines and the exit,
    /// with the runtime's timestamps. See [`tap`](crate::tap).
    ///
    /// ```no_run
    /// # #[cfg(feature = "serde")]
    /// # async fn demo<R: childwire_async::Runtime>() -> Result<(), Box<dyn std::error::Error>> {
    /// use childwire_async::tap::Recorder;
    /// use childwire_async::{Command, Config, Transport};
    ///
    /// let mut config = Config::default();
    /// config.tap(Recorder::new(std::fs::File::create("session.ndjson")?));
    /// let server = Transport::<R>::spawn(&Command::new("my-mcp-server"), config)?;
    /// # Ok(()) }
    /// ```
    pub fn tap(&mut self, tap: impl Tap) -> &mut Self {
        self.tap = Some(TapSlot::new(tap));
        self
    }
}

impl From<childwire_core::Config> for Config {
    fn from(core: childwire_core::Config) -> Self {
        Self {
            core,
            on_stderr_line: None,
            tap: None,
        }
    }
}

impl Deref for Config {
    type Target = childwire_core::Config;

    fn deref(&self) -> &childwire_core::Config {
        &self.core
    }
}

impl DerefMut for Config {
    fn deref_mut(&mut self) -> &mut childwire_core::Config {
        &mut self.core
    }
}

impl fmt::Debug for Config {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Config")
            .field("core", &self.core)
            .field(
                "on_stderr_line",
                &self.on_stderr_line.as_ref().map(|_| ".."),
            )
            .field("tap", &self.tap.as_ref().map(|_| ".."))
            .finish()
    }
}
