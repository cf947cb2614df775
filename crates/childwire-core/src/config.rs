//! Limits and timings, with defaults that suit an MCP host, checked before
//! anything is spawned.

use std::fmt;
use std::time::Duration;

use crate::decoder::DEFAULT_MAX_MESSAGE_SIZE;
use crate::encoder::DEFAULT_HIGH_WATER;
use crate::goodbye::Goodbye;
use crate::lifecycle::LifecycleConfig;
use crate::pollution::PollutionPolicy;
use crate::stderr_tail::StderrTailConfig;

/// The default receive high-water mark: 4 MiB of messages waiting for the
/// caller stops reading.
pub const DEFAULT_RECV_HIGH_WATER: usize = 4 * 1024 * 1024;

/// Limits of a message channel, in both directions.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct ChannelConfig {
    /// Longest message accepted from the peer; longer ones become
    /// `Oversized` notices. Default 16 MiB.
    pub max_message_size: usize,
    /// Longest message `send` accepts. Default 16 MiB.
    pub max_send_size: usize,
    /// What queued outbound messages may cost before senders wait. Default
    /// 1 MiB.
    pub send_high_water: usize,
    /// What received messages waiting for the caller may cost before reading
    /// stops, so a caller that falls behind slows the peer instead of
    /// growing memory. Each message counts its bytes plus a fixed overhead
    /// ([`ITEM_OVERHEAD`](crate::inbound::ITEM_OVERHEAD)). Default 4 MiB.
    pub recv_high_water: usize,
    /// How long queued output may wait without the peer reading any of it
    /// before sending fails as stalled and the write side is closed.
    /// Default: no limit.
    pub write_timeout: Option<Duration>,
    /// What to do with a stdout line that is not a JSON message (a banner, a
    /// log line, `Content-Length` framing on an NDJSON channel, or NDJSON on
    /// a `Content-Length` one). For a spawned child ([`Config::default`])
    /// the default is `Some(PollutionPolicy::Divert)`: such a line never
    /// becomes a received item; it goes where the child's stderr lines go
    /// (the stderr callback, `tracing`, this process's stderr when shown),
    /// marked `(stdout) `, and is counted in the report. So a loop that
    /// waits for the first message gets the first message.
    /// `Some(PollutionPolicy::Deliver)` delivers every line, with a
    /// `Pollution` notice before the first of each kind;
    /// `Some(PollutionPolicy::Drop)` names and drops them. For a channel
    /// over generic pipes or a stream (`ChannelConfig::default()`, used by
    /// `from_pipes` and `from_stream`) the default is `None`: no check,
    /// every line delivered as it came (such pipes may carry plain text by
    /// design).
    pub pollution: Option<PollutionPolicy>,
}

impl Default for ChannelConfig {
    fn default() -> Self {
        Self {
            max_message_size: DEFAULT_MAX_MESSAGE_SIZE,
            max_send_size: DEFAULT_MAX_MESSAGE_SIZE,
            send_high_water: DEFAULT_HIGH_WATER,
            recv_high_water: DEFAULT_RECV_HIGH_WATER,
            write_timeout: None,
            pollution: None,
        }
    }
}

/// Limits and timings of a child transport: its channel, its lifecycle and
/// the stderr tail. Every field has a default that suits an MCP host; unlike
/// a bare [`ChannelConfig`], a child's channel keeps stdout lines that are
/// not messages out of the messages by default ([`ChannelConfig::pollution`]
/// is `Some(PollutionPolicy::Divert)`), because a banner printed by a child
/// is the classic stdio failure.
///
/// ```
/// use std::time::Duration;
/// use childwire_core::Config;
///
/// let mut config = Config::default();
/// config
///     .stdin_grace(Duration::from_millis(500))
///     .write_timeout(Some(Duration::from_secs(10)))
///     .max_message_size(64 * 1024 * 1024);
/// assert_eq!(config.lifecycle.stdin_grace, Duration::from_millis(500));
/// config.validate().unwrap();
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct Config {
    /// The message channel's limits.
    pub channel: ChannelConfig,
    /// The shutdown graces.
    pub lifecycle: LifecycleConfig,
    /// Bounds of the stderr tail kept for the report.
    pub stderr_tail: StderrTailConfig,
    /// What a shutdown says to the child before closing its stdin (LSP's
    /// `shutdown` and `exit`, DAP's `disconnect`). Default `None`: stdin is
    /// closed once what was queued is written, as MCP's stdio transport
    /// asks.
    pub goodbye: Option<Goodbye>,
}

impl Default for Config {
    /// The defaults above, with a child's stdout lines that are not
    /// messages set aside with its stderr (`Some(PollutionPolicy::Divert)`).
    fn default() -> Self {
        Self {
            channel: ChannelConfig {
                pollution: Some(PollutionPolicy::Divert),
                ..ChannelConfig::default()
            },
            lifecycle: LifecycleConfig::default(),
            stderr_tail: StderrTailConfig::default(),
            goodbye: None,
        }
    }
}

macro_rules! setters {
    ($($(#[$doc:meta])* $name:ident: $ty:ty => $($path:ident).+;)*) => {
        $(
            $(#[$doc])*
            pub fn $name(&mut self, value: $ty) -> &mut Self {
                self.$($path).+ = value;
                self
            }
        )*
    };
}

impl Config {
    setters! {
        /// Sets [`ChannelConfig::max_message_size`].
        max_message_size: usize => channel.max_message_size;
        /// Sets [`ChannelConfig::max_send_size`].
        max_send_size: usize => channel.max_send_size;
        /// Sets [`ChannelConfig::send_high_water`].
        send_high_water: usize => channel.send_high_water;
        /// Sets [`ChannelConfig::recv_high_water`].
        recv_high_water: usize => channel.recv_high_water;
        /// Sets [`ChannelConfig::write_timeout`].
        write_timeout: Option<Duration> => channel.write_timeout;
        /// Sets [`ChannelConfig::pollution`].
        pollution: Option<PollutionPolicy> => channel.pollution;
        /// Sets [`LifecycleConfig::stdin_grace`].
        stdin_grace: Duration => lifecycle.stdin_grace;
        /// Sets [`LifecycleConfig::term_grace`].
        term_grace: Duration => lifecycle.term_grace;
        /// Sets [`LifecycleConfig::drain_grace`].
        drain_grace: Duration => lifecycle.drain_grace;
        /// Sets the stderr tail's bounds.
        stderr_tail: StderrTailConfig => stderr_tail;
        /// Sets [`Config::goodbye`].
        goodbye: Option<Goodbye> => goodbye;
    }

    /// Checks that the limits make sense together, naming the first field
    /// that does not. Transports call it before spawning anything.
    pub fn validate(&self) -> Result<(), ConfigError> {
        let channel = &self.channel;
        let tail = &self.stderr_tail;
        let checks: [(bool, &'static str, &'static str); 7] = [
            (
                channel.max_message_size == 0,
                "max_message_size",
                "must be at least 1 byte",
            ),
            (
                channel.max_send_size == 0,
                "max_send_size",
                "must be at least 1 byte",
            ),
            (
                channel.send_high_water == 0,
                "send_high_water",
                "must be at least 1 byte",
            ),
            (
                channel.recv_high_water == 0,
                "recv_high_water",
                "must be at least 1 byte, or stdout would never be read",
            ),
            (
                channel.write_timeout == Some(Duration::ZERO),
                "write_timeout",
                "must be above zero (use None for no limit)",
            ),
            (
                tail.max_lines > 0 && tail.max_bytes == 0,
                "stderr_tail.max_bytes",
                "must be above zero when max_lines is",
            ),
            (
                tail.max_pending_bytes < tail.max_bytes,
                "stderr_tail.max_pending_bytes",
                "must be at least max_bytes, or long stderr lines never reach the callback",
            ),
        ];
        match checks.into_iter().find(|(bad, ..)| *bad) {
            Some((_, field, rule)) => Err(ConfigError { field, rule }),
            None => Ok(()),
        }
    }
}

/// A [`Config`] that makes no sense, with the field named.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ConfigError {
    field: &'static str,
    rule: &'static str,
}

impl ConfigError {
    /// The field at fault, e.g. `"recv_high_water"`.
    pub fn field(&self) -> &'static str {
        self.field
    }
}

impl fmt::Display for ConfigError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "invalid config: `{}` {}", self.field, self.rule)
    }
}

impl std::error::Error for ConfigError {}
