//! Stopping a child at once and asking whether it has ended, the calls a
//! `tokio::process::Child` user reaches for first (`kill`, `start_kill`,
//! `try_wait`). The decision is the lifecycle's
//! ([`Supervisor::handle_kill`](childwire_core::Supervisor::handle_kill));
//! the background task sends the signal and reports the end as it does
//! for a shutdown.

use childwire_core::{Closed, ExitReport, Framing};

use super::{Sender, ShutdownError, Transport};
use crate::runtime::Runtime;
use crate::sync::lock;

impl<R: Runtime, F: Framing> Sender<R, F> {
    /// Kills the child now, and returns how it ended: SIGKILL to it (to
    /// its whole process group, by default; on Windows its job is
    /// terminated), without closing stdin or SIGTERM first. A graceful
    /// shutdown under way is cut short. Once the child has ended, it
    /// returns the report as it is.
    ///
    /// Sending fails from the call on. Messages the child wrote before it
    /// died stay receivable, then the receiver gets the same report. The
    /// report says [`EndedBy::Sigkill`](childwire_core::EndedBy::Sigkill)
    /// and that the end was asked for.
    ///
    /// For a channel over a pipe pair there is no child: it fails with
    /// [`ShutdownError::NoChild`] and changes nothing.
    ///
    /// ```no_run
    /// # async fn demo<R: childwire_async::Runtime>(server: childwire_async::Transport<R>) -> Result<(), Box<dyn std::error::Error>> {
    /// let report = server.kill().await?;
    /// eprintln!("server {report}"); // "killed by SIGKILL, 3 ms after shutdown"
    /// # Ok(()) }
    /// ```
    pub async fn kill(&self) -> Result<ExitReport, ShutdownError> {
        self.start_kill()?;
        self.wait_report().await
    }

    /// [`kill`](Self::kill) without waiting: SIGKILL is on its way when it
    /// returns (the background task sends it). The end comes through
    /// [`try_wait`](Self::try_wait), the receiver, or `kill` itself.
    ///
    /// # Errors
    ///
    /// [`ShutdownError::NoChild`] for a channel over a pipe pair.
    pub fn start_kill(&self) -> Result<(), ShutdownError> {
        let Some(supervisor) = &self.link.supervisor else {
            return Err(ShutdownError::NoChild);
        };
        lock(&self.link.out).outbound.refuse(Closed::Closing);
        lock(supervisor).handle_kill(self.rt.now());
        self.link.wake_bg();
        Ok(())
    }

    /// How the child ended, if that is known yet; never waits. `None`
    /// while it runs, and for a channel over a pipe pair. The report is
    /// known once the child was reaped and its pipes drained (or the drain
    /// grace passed): the same moment [`shutdown`](Self::shutdown) returns.
    pub fn try_wait(&self) -> Option<ExitReport> {
        self.link.exit.get()
    }
}

impl<R: Runtime, F: Framing> Transport<R, F> {
    /// Kills the child now, and returns how it ended. See [`Sender::kill`].
    pub async fn kill(&self) -> Result<ExitReport, ShutdownError> {
        self.sender.kill().await
    }

    /// Kills the child without waiting. See [`Sender::start_kill`].
    pub fn start_kill(&self) -> Result<(), ShutdownError> {
        self.sender.start_kill()
    }

    /// How the child ended, if known yet; never waits. See
    /// [`Sender::try_wait`].
    pub fn try_wait(&self) -> Option<ExitReport> {
        self.sender.try_wait()
    }
}
