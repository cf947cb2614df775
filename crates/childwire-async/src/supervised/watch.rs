//! Whether the running generation of a [`Supervised`](super::Supervised)
//! hangs: the core's [`Liveness`] fed with pings, the CPU time of the
//! child's process tree and its output. The verdict is the core's; here the
//! pings are written, the CPU time read, and a hung child killed (its end,
//! a crash, is restarted as the policy says).

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::Context;
use std::time::Instant;

use childwire_core::jsonrpc::is_response_to;
use childwire_core::liveness::{Liveness, LivenessConfig, Verdict};
use childwire_core::{Framing, Received};

use crate::runtime::Runtime;
use crate::transport::Sender;

/// A ping whose write waits for room in the pipe.
type Ping = Pin<Box<dyn Future<Output = ()> + Send>>;

pub(super) struct Watch<R: Runtime, F: Framing> {
    liveness: Liveness,
    sender: Arc<Sender<R, F>>,
    /// The ping in flight's id, as raw JSON text.
    ping_id: Option<Vec<u8>>,
    /// Pings sent to this generation.
    pings: u64,
    /// The last ping's write, while the pipe has no room for it (dropped
    /// unwritten when the next one is due: a send is cancel-safe).
    writing: Option<Ping>,
    /// The child was found hung and is being killed.
    killed: bool,
}

impl<R: Runtime, F: Framing> Watch<R, F> {
    /// Starts watching the generation `sender` writes to, at `now`.
    pub(super) fn new(config: LivenessConfig, sender: Arc<Sender<R, F>>, now: Instant) -> Self {
        Self {
            liveness: Liveness::new(config, now),
            sender,
            ping_id: None,
            pings: 0,
            writing: None,
            killed: false,
        }
    }

    /// An item from the child: the answer to the ping in flight is taken
    /// here (true: not handed out); anything else is a sign of life.
    pub(super) fn handle_item(&mut self, item: &Received, now: Instant) -> bool {
        let Received::Message(message) = item else {
            return false;
        };
        if let Some(id) = &self.ping_id {
            if is_response_to(message, id) {
                self.ping_id = None;
                self.liveness.handle_ping_answered(now);
                return true;
            }
        }
        self.liveness.handle_output(now);
        false
    }

    /// Does what the machine asks at `now` (a ping, a CPU reading), and
    /// kills the child once it is hung: true the first time. The machine's
    /// next deadline is [`poll_timeout`](Self::poll_timeout).
    pub(super) fn poll(&mut self, cx: &mut Context<'_>, now: Instant) -> bool {
        self.liveness.handle_timeout(now);
        if self.liveness.poll_ping(now) {
            self.pings += 1;
            let id = format!("\"childwire-ping-{}\"", self.pings);
            let ping = format!(r#"{{"jsonrpc":"2.0","id":{id},"method":"ping"}}"#);
            let sender = Arc::clone(&self.sender);
            self.writing = Some(Box::pin(async move {
                // A refused ping (the child is ending) is no sign of life;
                // its end comes through the receiver.
                let _ = sender.send(ping).await;
            }));
            self.ping_id = Some(id.into_bytes());
            self.liveness.handle_ping_sent(now);
        }
        if let Some(writing) = &mut self.writing {
            if writing.as_mut().poll(cx).is_ready() {
                self.writing = None;
            }
        }
        if self.liveness.poll_cpu(now) {
            // Where the OS gives no CPU time, it reads as unchanged: only
            // answers and output are signs of life there.
            let cpu = self
                .sender
                .id()
                .and_then(|pid| crate::os::cpu::tree_cpu_time(pid, None).ok().flatten())
                .unwrap_or_default();
            self.liveness.handle_cpu(cpu, now);
        }
        if self.liveness.verdict() == Some(Verdict::Hung) && !self.killed {
            self.killed = true;
            let _ = self.sender.start_kill();
            return true;
        }
        false
    }

    /// When to [`poll`](Self::poll) again; `None` once the child is killed.
    pub(super) fn poll_timeout(&self) -> Option<Instant> {
        if self.killed {
            return None;
        }
        self.liveness.poll_timeout()
    }
}
