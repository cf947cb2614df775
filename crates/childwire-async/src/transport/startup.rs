//! [`Transport::started`]: whether a child started, decided by the core's
//! [`Startup`] from the signs of life the transport sees.
//!
//! Nothing is taken from the stream: the first message stays queued for
//! the caller's next `recv`, the exit report for the one after the last
//! message. [`Transport::started_with`] looks at the queued messages in
//! place for the caller's readiness (the answer to `initialize`). Stderr output does not wake the waiting task: it only moves
//! the deadline later, so it is looked at when the timer fires, with the
//! time the background task saw it ([`Session::last_stderr_at`]).
//!
//! [`Session::last_stderr_at`]: childwire_core::Session::last_stderr_at

use std::future::poll_fn;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Instant;

use childwire_core::startup::{ReadyOn, Startup, StartupConfig, StartupVerdict};
use childwire_core::{Channel, Frame, Framing, Message, Receive};

use super::{Receiver, Transport};
use crate::runtime::{Runtime, Timer};

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
    /// ([`ReadyOn::FirstMessage`]) whatever
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

impl<R: Runtime, F: Framing> Receiver<R, F> {
    /// The start-up verdict, from the receiving half. See
    /// [`Transport::started`].
    pub async fn started(&mut self, mut config: StartupConfig) -> StartupVerdict {
        config.ready_on = ReadyOn::FirstMessage;
        self.watch_start(config, None::<fn(&Message) -> bool>).await
    }

    /// The start-up verdict with the caller's readiness, from the
    /// receiving half. See [`Transport::started_with`].
    pub async fn started_with<P>(&mut self, mut config: StartupConfig, ready: P) -> StartupVerdict
    where
        P: FnMut(&Message) -> bool,
    {
        config.ready_on = ReadyOn::Caller;
        self.watch_start(config, Some(ready)).await
    }

    /// Watches the start-up: ready at the first message, or (`ready`) at
    /// the first the caller accepts.
    async fn watch_start<P>(
        &mut self,
        config: StartupConfig,
        mut ready: Option<P>,
    ) -> StartupVerdict
    where
        P: FnMut(&Message) -> bool,
    {
        let now = self.rt.now();
        let spawned = self.shared.lock().session.spawned_at().unwrap_or(now);
        let mut watch = Watch {
            startup: Startup::new(config, spawned),
            timer: None,
            turns_seen: 0,
            stderr_seen: None,
            looked_at: 0,
        };
        poll_fn(|cx| self.poll_started(&mut watch, ready.as_mut(), cx)).await
    }

    fn poll_started<P>(
        &mut self,
        watch: &mut Watch,
        mut ready: Option<&mut P>,
        cx: &mut Context<'_>,
    ) -> Poll<StartupVerdict>
    where
        P: FnMut(&Message) -> bool,
    {
        loop {
            let now = self.rt.now();
            let mut state = self.shared.lock();
            let session = &state.session;
            let at = session.last_stderr_at();
            if at != watch.stderr_seen {
                watch.stderr_seen = at;
                if let Some(at) = at {
                    watch.startup.handle_stderr(at);
                }
            }
            let channel = session.channel();
            if channel.turns() != watch.turns_seen {
                watch.turns_seen = channel.turns();
                watch.startup.handle_stdout(now);
            }
            match ready.as_deref_mut() {
                // Any message, received already or queued.
                None if channel.json_messages_in() > 0 => watch.startup.handle_message(now),
                None => {}
                Some(ready) => watch.look(channel, now, ready),
            }
            // After the verdict (a message made it), the end changes
            // nothing.
            if session.has_ended() || session.is_finished() {
                // The end is known (the report is due or was received), or
                // the driver stopped without one.
                match self.shared.exit.get() {
                    Some(report) => watch
                        .startup
                        .handle_exit(report.exit, report.stderr_tail, now),
                    None => watch.startup.handle_closed(now),
                }
            } else if !session.has_child() && channel.is_read_done() {
                watch.startup.handle_closed(now);
            }
            watch.startup.handle_timeout(now);
            if let Some(verdict) = watch.startup.poll_verdict() {
                self.shared.unlock(state);
                return Poll::Ready(verdict);
            }
            // Wait for the child as `recv` does, taking nothing.
            match state.session.poll_wait() {
                Receive::Read => {
                    let blocked;
                    (state, blocked) = self.shared.read_once(state, cx.waker(), || self.rt.now());
                    self.shared.unlock(state);
                    if !blocked {
                        continue;
                    }
                }
                _ => {
                    self.shared.wait_to_receive(cx.waker());
                    self.shared.unlock(state);
                }
            }
            if watch.poll_timer(&self.rt, cx).is_pending() {
                return Poll::Pending;
            }
        }
    }
}

/// A start-up being watched: the core's machine, its timer, and what was
/// already fed to it.
struct Watch {
    startup: Startup,
    timer: Option<Pin<Box<dyn Timer>>>,
    /// The link's read count last seen: a new read is stdout's sign of life.
    turns_seen: u64,
    /// The latest stderr output already fed.
    stderr_seen: Option<Instant>,
    /// How many of the queued frames the caller's readiness looked at.
    looked_at: usize,
}

impl Watch {
    /// Shows the caller's `ready` the messages queued since it last
    /// looked, in place: ready at the first it accepts, the others are
    /// signs of life.
    fn look<F: Framing, P>(&mut self, channel: &Channel<F>, now: Instant, ready: &mut P)
    where
        P: FnMut(&Message) -> bool,
    {
        let queued = channel.queued_frames();
        // Frames are only added while the receiver is borrowed here; fewer
        // would mean some were taken: look at them all again.
        if queued.len() < self.looked_at {
            self.looked_at = 0;
        }
        for frame in queued.skip(self.looked_at) {
            self.looked_at += 1;
            if let Frame::Message(message) = frame {
                if ready(message) {
                    self.startup.handle_ready(now);
                    return;
                }
                self.startup.handle_message(now);
            }
        }
    }

    /// Arms the timer for the machine's deadline and polls it: ready when
    /// the deadline passed (the machine is asked again), pending otherwise.
    fn poll_timer<R: Runtime>(&mut self, rt: &R, cx: &mut Context<'_>) -> Poll<()> {
        let Some(at) = self.startup.poll_timeout() else {
            return Poll::Pending;
        };
        let timer = match &mut self.timer {
            Some(timer) => {
                timer.as_mut().reset(at);
                timer
            }
            None => self.timer.insert(rt.timer(at)),
        };
        timer.as_mut().poll(cx)
    }
}
