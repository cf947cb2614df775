//! [`Transport::started`] and [`Transport::started_with`]: the start-up
//! verdict, asked of the receiving half (`receiver/startup.rs`, which
//! watches the child).

use childwire_core::startup::{StartupConfig, StartupVerdict};
use childwire_core::{Framing, Message};

use super::Transport;
use crate::runtime::Runtime;

impl<R: Runtime, F: Framing> Transport<R, F> {
    /// Waits until the child is ready (its first message), has exited
    /// before its first message, or showed no sign of life for
    /// [`StartupConfig::silence`], and says which: the start-up verdict.
    ///
    /// The silence deadline starts over at every sign of life (a stderr
    /// line, bytes on stdout), so a server that logs while it downloads
    /// (a first `npx -y` or `uvx` run) gets the time it needs, and one
    /// that says nothing is given up on after the silence.
    /// [`StartupConfig::limit`], if set, bounds the whole start-up. Time
    /// counts from the spawn, on the runtime's clock.
    ///
    /// Nothing is taken from the stream: after `Ready` the first message
    /// is the next [`recv`](Self::recv)'s, after `ExitedBeforeFirstMessage`
    /// the exit report follows whatever notices came before it. A verdict
    /// other than `Ready` leaves the child as it is: shut it down (or drop
    /// the transport) if it was silent. Ready means the first message
    /// ([`ReadyOn::FirstMessage`](childwire_core::startup::ReadyOn::FirstMessage)) whatever
    /// [`StartupConfig::ready_on`] says: for a readiness of the caller's
    /// own (the answer to `initialize`), use
    /// [`started_with`](Self::started_with). Cancel-safe.
    ///
    /// An MCP server says nothing on stdout until it is sent a request:
    /// send `initialize` first, then wait for the verdict (in a
    /// [`Supervised`](crate::Supervised) child's re-initialization step
    /// too, for each generation).
    ///
    /// A channel over a pipe pair shows life on its reader alone, and its
    /// peer closing it before a message is
    /// [`ClosedBeforeFirstMessage`](StartupVerdict::ClosedBeforeFirstMessage).
    ///
    /// ```no_run
    /// # async fn demo<R: childwire_async::Runtime>() -> Result<(), Box<dyn std::error::Error>> {
    /// use std::time::Duration;
    /// use childwire_async::{Command, Config, StartupConfig, Transport};
    ///
    /// let mut server = Transport::<R>::spawn(&Command::new("npx").args(["-y", "some-mcp-server"]), Config::default())?;
    /// server.send(r#"{"jsonrpc":"2.0","id":0,"method":"initialize","params":{}}"#).await?;
    /// let mut startup = StartupConfig::default();
    /// startup.silence = Some(Duration::from_secs(20));
    /// let verdict = server.started(startup).await;
    /// if !verdict.is_ready() {
    ///     // "exited with code 1 before its first message (0.3 s after it was
    ///     // started); its stderr ends with: npm ERR! 404 Not Found"
    ///     return Err(verdict.to_string().into());
    /// }
    /// let answer = server.recv().await; // the answer to `initialize`
    /// # Ok(()) }
    /// ```
    pub async fn started(&mut self, config: StartupConfig) -> StartupVerdict {
        self.receiver.started(config).await
    }

    /// [`started`](Self::started), ready when `ready` accepts a message:
    /// for an MCP host, when the answer to `initialize` arrived. Messages
    /// before it are signs of life, like stderr output.
    ///
    /// `ready` looks at each message in place, once, in the order they
    /// came (those queued when it is called, then the new ones): nothing
    /// is taken from the stream. After `Ready` the next
    /// [`recv`](Self::recv) hands out the first message not received yet
    /// (a log notification the server sent first, say), and the accepted
    /// one comes in its turn; after any other verdict every message is
    /// still there, then the exit report. [`StartupConfig::ready_on`] is
    /// not looked at: `ready` decides. Cancel-safe (a new call looks at
    /// the queued messages again). `ready` runs while the receiving half
    /// is locked: keep it to looking at the bytes (send nothing from it).
    ///
    /// The messages wait within the receive bound
    /// ([`ChannelConfig::recv_high_water`](childwire_core::ChannelConfig::recv_high_water)):
    /// a child that fills it before it is ready is not read further, and
    /// so shows no more life until it is received from.
    ///
    /// ```no_run
    /// # async fn demo<R: childwire_async::Runtime>() -> Result<(), Box<dyn std::error::Error>> {
    /// use childwire_async::{Command, Config, Received, StartupConfig, Transport};
    /// use childwire_core::IdScanner;
    ///
    /// /// A response (no `method`) to the request with id 0.
    /// fn answers_initialize(message: &childwire_async::Message) -> bool {
    ///     let mut scanner = IdScanner::new();
    ///     scanner.feed(message.bytes());
    ///     !scanner.has_method() && scanner.id().as_deref() == Some(&b"0"[..])
    /// }
    ///
    /// let mut server = Transport::<R>::spawn(&Command::new("my-mcp-server"), Config::default())?;
    /// server.send(r#"{"jsonrpc":"2.0","id":0,"method":"initialize","params":{}}"#).await?;
    /// let verdict = server.started_with(StartupConfig::default(), answers_initialize).await;
    /// if !verdict.is_ready() {
    ///     // "exited with code 1 before its first message (...)": it may have
    ///     // logged before it died; those messages are still to be received.
    ///     return Err(verdict.to_string().into());
    /// }
    /// // What came before the answer first (notifications), then the answer.
    /// while let Some(Received::Message(message)) = server.recv().await {
    ///     if answers_initialize(&message) {
    ///         break;
    ///     }
    /// }
    /// # Ok(()) }
    /// ```
    pub async fn started_with<P>(&mut self, config: StartupConfig, ready: P) -> StartupVerdict
    where
        P: FnMut(&Message) -> bool,
    {
        self.receiver.started_with(config, ready).await
    }
}
