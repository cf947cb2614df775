//! The child's exit report, after the transport went to rmcp.

use std::fmt;
use std::sync::Arc;

use childwire::ExitReport;
use tokio::sync::watch;

/// A handle to the child's [`ExitReport`], taken with
/// [`exit_handle`](crate::ChildwireTransport::exit_handle) before the
/// transport is handed to a client. Clone it freely.
///
/// The report is there once the child ended: when it was disconnected (the
/// graceful shutdown), or when the child exited on its own
/// and `receive` met its end.
#[derive(Clone)]
pub struct ExitHandle(watch::Receiver<Option<Arc<ExitReport>>>);

impl ExitHandle {
    pub(crate) fn new(receiver: watch::Receiver<Option<Arc<ExitReport>>>) -> Self {
        Self(receiver)
    }

    /// The report, if the child's end is known yet.
    pub fn get(&self) -> Option<ExitReport> {
        self.0.borrow().as_deref().cloned()
    }

    /// Waits for the report. `None` if the transport was dropped without
    /// learning the child's end (dropped unclosed: the child was killed).
    pub async fn wait(&self) -> Option<ExitReport> {
        let mut receiver = self.0.clone();
        let report = receiver.wait_for(Option::is_some).await.ok()?;
        report.as_deref().cloned()
    }
}

impl fmt::Debug for ExitHandle {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_tuple("ExitHandle").field(&self.get()).finish()
    }
}
