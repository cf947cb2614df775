//! [`Receiver::started`] (and so [`Transport::started`]): whether a child
//! started, decided by the core's [`Startup`] from the signs of life the
//! transport sees.
//!
//! Nothing is taken from the stream: the first message stays queued for
//! the caller's next `recv`, the exit report for the one after the last
//! message. [`Receiver::started_with`] looks at the queued messages in
//! place for the caller's readiness (the answer to `initialize`). Stderr
//! output does not wake the waiting task: it only moves the deadline later,
//! so it is looked at when the timer fires, with the time the background
//! task saw it ([`Session::last_stderr_at`]).
//!
//! [`Transport::started`]: crate::Transport::started
//! [`Session::last_stderr_at`]: childwire_core::Session::last_stderr_at

use std::future::poll_fn;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Instant;

use childwire_core::startup::{ReadyOn, Startup, StartupConfig, StartupVerdict};
use childwire_core::{Channel, Frame, Framing, Message, Receive};

use super::Receiver;
use crate::runtime::{Runtime, Timer};

impl<R: Runtime, F: Framing> Receiver<R, F> {
    /// The start-up verdict, from the receiving half. See
    /// [`Transport::started`](crate::Transport::started).
    pub async fn started(&mut self, mut config: StartupConfig) -> StartupVerdict {
        config.ready_on = ReadyOn::FirstMessage;
        self.watch_start(config, None::<fn(&Message) -> bool>).await
    }

    /// The start-up verdict with the caller's readiness, from the
    /// receiving half. See
    /// [`Transport::started_with`](crate::Transport::started_with).
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
