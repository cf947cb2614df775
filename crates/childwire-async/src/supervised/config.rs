//! How a [`Supervised`](super::Supervised) child is supervised.

use std::time::Duration;

use childwire_core::liveness::LivenessConfig;
use childwire_core::pending::DEFAULT_MAX_TRACKED;
use childwire_core::{GenerationsConfig, RestartConfig, WhileDown};

/// The seed of the restart delays' jitter when none is given: fixed, so a
/// run can be repeated; set [`Supervision::seed`] to spread the restarts of
/// many hosts.
pub const DEFAULT_SEED: u64 = 0x6368_696c_6477_6972;

/// How a child is supervised: when to restart it and when to give up,
/// whether its requests are tracked, and what a send does while it is down.
///
/// ```
/// use std::time::Duration;
/// use childwire_async::{Supervision, WhileDown};
///
/// let mut supervision = Supervision::default();
/// supervision.restart.budget = 5; // five crashes in a row, then the verdict
/// supervision.restart.initial_backoff = Duration::from_millis(200);
/// supervision.track_requests = true; // answer a dead child's requests with errors
/// supervision.while_down = WhileDown::Fail; // sends fail while it restarts
/// ```
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub struct Supervision {
    /// When to restart and when to give up.
    pub restart: RestartConfig,
    /// The seed of the restart delays' jitter.
    pub seed: u64,
    /// Track the JSON-RPC requests sent: when a generation ends, each one it
    /// did not answer gets an error response
    /// ([`SupervisedEvent::Unanswered`](crate::SupervisedEvent::Unanswered)),
    /// and its report lists them. Every request is then answered exactly
    /// once: by the child, or by that error.
    pub track_requests: bool,
    /// The most requests tracked at a time (1,024 by default). A request
    /// sent beyond it is named by a
    /// [`SupervisedEvent::Untracked`](crate::SupervisedEvent::Untracked) and
    /// counted in the report: nothing answers it if the child dies.
    pub max_tracked: usize,
    /// What a send does while the child is down.
    pub while_down: WhileDown,
    /// Stop the child once nothing went either way for this long and no
    /// request waits for its answer (its shutdown, with the goodbye if one
    /// is configured); the next send starts it again, runs the
    /// initialization, then goes. Its report says "stopped when idle".
    /// `None` (the default): never. Requests are tracked with it on (as
    /// [`track_requests`](Self::track_requests)), so that one being answered
    /// keeps the child running.
    ///
    /// ```
    /// use std::time::Duration;
    /// use childwire_async::Supervision;
    ///
    /// let mut supervision = Supervision::default();
    /// supervision.idle_stop = Some(Duration::from_secs(600)); // ten idle minutes
    /// ```
    pub idle_stop: Option<Duration>,
    /// Kill and restart a child found hung: it sends the MCP `ping` request
    /// (`{"jsonrpc":"2.0","id":"childwire-ping-N","method":"ping"}`, its
    /// answer kept out of `recv`) every `ping_every`, and a child that for
    /// `hung_after` neither answered one, nor used CPU time (its whole
    /// process tree, where the OS tells: Linux), nor wrote anything is
    /// killed; its end counts as a crash (restarted as
    /// [`restart`](Self::restart) says) and its report says it hung. A
    /// server busy in a long call uses CPU time or sends progress: it is
    /// not hung. `None` (the default): never.
    ///
    /// Any JSON-RPC server that answers an unknown method with an error
    /// counts as answering.
    ///
    /// ```
    /// use std::time::Duration;
    /// use childwire_async::{LivenessConfig, Supervision};
    ///
    /// let mut liveness = LivenessConfig::default();
    /// liveness.hung_after = Duration::from_secs(120);
    /// let mut supervision = Supervision::default();
    /// supervision.restart_when_hung = Some(liveness);
    /// ```
    pub restart_when_hung: Option<LivenessConfig>,
}

impl Default for Supervision {
    fn default() -> Self {
        Self {
            restart: RestartConfig::default(),
            seed: DEFAULT_SEED,
            track_requests: false,
            max_tracked: DEFAULT_MAX_TRACKED,
            while_down: WhileDown::Wait,
            idle_stop: None,
            restart_when_hung: None,
        }
    }
}

impl Supervision {
    /// The core machine's settings; a send waits for the next generation at
    /// most `wait_limit`.
    pub(super) fn generations(&self, wait_limit: Option<Duration>) -> GenerationsConfig {
        let mut config = GenerationsConfig::default();
        config.restart = self.restart.clone();
        config.seed = self.seed;
        config.track_requests = self.track_requests;
        config.max_tracked = self.max_tracked;
        config.while_down = self.while_down;
        config.wait_limit = wait_limit;
        config.idle_stop = self.idle_stop;
        config
    }
}
