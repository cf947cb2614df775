//! How a supervised child is restarted, and what sends do while it is down.

use childwire_core::RestartConfig;

/// The jitter seed used when the caller gives none: restarts are then
/// spaced the same way every run.
pub const DEFAULT_SEED: u64 = 0x6368_696c_6477_6972;

/// How a [`Supervised`](super::Supervised) child is restarted, and what
/// it does meanwhile.
///
/// ```
/// use std::time::Duration;
/// use childwire_async::{Supervision, WhileDown};
///
/// let mut supervision = Supervision::default();
/// supervision.restart.budget = 3;
/// supervision.restart.initial_backoff = Duration::from_millis(100);
/// supervision.track_requests = true;
/// supervision.while_down = WhileDown::Fail;
/// ```
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub struct Supervision {
    /// Backoff, budget and window of the restarts.
    pub restart: RestartConfig,
    /// The seed of the backoff's jitter. Default [`DEFAULT_SEED`].
    pub seed: u64,
    /// Track outgoing JSON-RPC requests, and answer those still pending
    /// when a generation ends with
    /// [`SupervisedEvent::Unanswered`](super::SupervisedEvent::Unanswered)
    /// error responses; the generation's exit report lists their ids
    /// ([`ExitReport::unanswered_ids`](childwire_core::ExitReport::unanswered_ids)).
    /// Default off.
    pub track_requests: bool,
    /// What a send does while the child is down. Default
    /// [`WhileDown::Wait`].
    pub while_down: WhileDown,
}

impl Default for Supervision {
    fn default() -> Self {
        Self {
            restart: RestartConfig::default(),
            seed: DEFAULT_SEED,
            track_requests: false,
            while_down: WhileDown::Wait,
        }
    }
}

/// What a send does while the child is down (between its exit and the end
/// of the next generation's re-initialization).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[non_exhaustive]
pub enum WhileDown {
    /// Wait for the next generation, at most the config's `write_timeout`
    /// (without one, until the restart or the verdict), then send to it.
    #[default]
    Wait,
    /// Fail at once with
    /// [`Closed::Exited`](childwire_core::Closed::Exited) and the last
    /// exit report.
    Fail,
}
