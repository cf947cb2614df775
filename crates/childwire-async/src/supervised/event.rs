//! What a [`Supervised`](super::Supervised) child's `recv` hands out.

use std::future::Future;
use std::pin::Pin;

use bytes::Bytes;
use childwire_core::pending::UnansweredRequest;
use childwire_core::{GaveUp, Received, SpawnError};

/// What a re-initialization step fails with.
pub type ReinitError = Box<dyn std::error::Error + Send + Sync>;

/// The future a re-initialization step returns.
pub type ReinitFuture<'a> = Pin<Box<dyn Future<Output = Result<(), ReinitError>> + Send + 'a>>;

/// What [`Supervised::recv`](super::Supervised::recv) hands out, in order.
///
/// ```no_run
/// # async fn demo<R: childwire_async::Runtime>(mut server: childwire_async::Supervised<R>) {
/// use childwire_async::{Received, SupervisedEvent};
///
/// while let Some(event) = server.recv().await {
///     match event {
///         SupervisedEvent::Started { .. } => println!("initialized: traffic may flow"),
///         SupervisedEvent::Received(Received::Message(m)) => println!("{}", String::from_utf8_lossy(&m)),
///         SupervisedEvent::Received(Received::Exited(report)) => eprintln!("server {report}"),
///         SupervisedEvent::Restarted { generation } => eprintln!("restarted (#{generation})"),
///         SupervisedEvent::Unanswered(request) => {
///             // Hand `request.response` to whatever waits for `request.id`.
///         }
///         SupervisedEvent::GaveUp(verdict) => eprintln!("{verdict}"),
///         other => eprintln!("{other:?}"),
///     }
/// }
/// # }
/// ```
#[derive(Debug)]
#[non_exhaustive]
pub enum SupervisedEvent {
    /// The first generation's initialization went through: sends go to it.
    Started {
        /// Always 1.
        generation: u32,
    },
    /// An item from the running generation; its `Exited` report when it
    /// ends (listing the requests it never answered, with tracking on).
    Received(Received),
    /// With request tracking on: the error response to a request the
    /// generation that ended never answered. Hand it to whatever waits for
    /// the answer to `id`.
    Unanswered(UnansweredRequest),
    /// With request tracking on: a request was sent while the tracker was
    /// full, so nothing answers it if the child dies. Its id as raw JSON
    /// text.
    Untracked(Bytes),
    /// A new generation was spawned and re-initialized: traffic resumes.
    Restarted {
        /// Its number (the first generation is 1).
        generation: u32,
    },
    /// A generation's initialization failed; the generation is ended, and
    /// its end counts as a crash.
    ReinitFailed {
        /// The generation.
        generation: u32,
        /// Why.
        error: ReinitError,
    },
    /// Spawning the next generation failed; it counts as a crash.
    SpawnFailed(SpawnError),
    /// The restart policy gave up; nothing more comes.
    GaveUp(Box<GaveUp>),
}
