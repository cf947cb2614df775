//! What a supervised child hands out, and the re-initialization step's types.

use std::fmt;
use std::future::Future;
use std::pin::Pin;

use childwire_core::pending::UnansweredRequest;
use childwire_core::{ExitReport, Generation, GiveUpReason, Received, SpawnError};

/// The error a re-initialization step fails with.
pub type ReinitError = Box<dyn std::error::Error + Send + Sync>;

/// The future a re-initialization step returns, borrowing the transport.
pub type ReinitFuture<'a> = Pin<Box<dyn Future<Output = Result<(), ReinitError>> + Send + 'a>>;

/// What [`Supervised::recv`](super::Supervised::recv) hands out.
#[derive(Debug)]
#[non_exhaustive]
pub enum SupervisedEvent {
    /// An item of the running generation: a message, a notice, or its
    /// end ([`Received::Exited`], each generation's exit report).
    Received(Received),
    /// A request the child ended before answering, with the JSON-RPC error
    /// response that answers it (it names the exit, the stderr line that
    /// says why, and whether a restart follows). After that generation's
    /// report.
    Unanswered(UnansweredRequest),
    /// The child was spawned again and re-initialized: traffic resumes.
    Restarted {
        /// The new generation's number (the first spawn is 1).
        generation: u32,
    },
    /// The re-initialization of this generation failed: it is shut down,
    /// and its end counts as unexpected.
    ReinitFailed {
        /// The generation.
        generation: u32,
        /// Why, in the step's words.
        error: ReinitError,
    },
    /// Spawning a new generation failed; the policy decides what follows.
    SpawnFailed(SpawnError),
    /// The restart budget is spent: no more generations. Last.
    GaveUp(Box<GaveUp>),
}

/// The final verdict of a [`Supervised`](super::Supervised) child that kept ending.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub struct GaveUp {
    /// Why, said in words by its `Display`.
    pub reason: GiveUpReason,
    /// The generations that counted toward the verdict, oldest first.
    pub history: Vec<Generation>,
    /// The exit reports of those generations (spawns that failed have
    /// none), oldest first.
    pub reports: Vec<ExitReport>,
}

impl fmt::Display for GaveUp {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "gave up restarting the child: {}", self.reason)?;
        if let Some(last) = self.reports.last() {
            write!(f, "; last {last}")?;
        }
        Ok(())
    }
}
