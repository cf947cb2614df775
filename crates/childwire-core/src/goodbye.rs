//! A polite goodbye: what a shutdown says to the child before it closes the
//! child's stdin, such as LSP's `shutdown` request and `exit` notification
//! or DAP's `disconnect`.

use std::time::{Duration, Instant};

use bytes::Bytes;

/// How long a goodbye waits for each answer it asks for, unless told
/// otherwise ([`Goodbye::answer_timeout`]).
pub const DEFAULT_ANSWER_TIMEOUT: Duration = Duration::from_secs(1);

/// The id of the `shutdown` request of [`Goodbye::lsp`]: a string, so it
/// cannot be one of the host's own numeric ids.
pub const LSP_SHUTDOWN_ID: &str = "childwire-shutdown";

/// The `seq` of the `disconnect` request of [`Goodbye::dap`]: the largest
/// 32-bit sequence number, far above the host's own.
pub const DAP_DISCONNECT_SEQ: u64 = i32::MAX as u64;

/// Messages a shutdown sends the child before closing its stdin, each
/// possibly waiting for its answer.
///
/// A shutdown with a goodbye first writes what was queued, then the
/// goodbye's messages in order; after a message that asks for an answer it
/// waits for that answer (at most [`answer_timeout`](Self::answer_timeout))
/// before the next one. Once the last one is written, stdin is closed as in
/// any shutdown. The answers are the goodbye's own: they are not handed to
/// the receiver. The whole goodbye still fits in the shutdown's graces:
/// SIGTERM comes `stdin_grace` after the shutdown was asked, said or not.
///
/// ```
/// use childwire_core::{Config, Goodbye};
///
/// // A language server: `shutdown`, its answer, then `exit`.
/// let mut config = Config::default();
/// config.goodbye(Some(Goodbye::lsp()));
///
/// // A protocol of your own: one notification, nothing awaited.
/// let bye = Goodbye::new().notify(r#"{"jsonrpc":"2.0","method":"bye"}"#);
/// assert_eq!(bye.messages().count(), 1);
/// ```
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Goodbye {
    steps: Vec<Step>,
    answer_timeout: Option<Duration>,
}

/// One message of a goodbye, and the answer it waits for.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Step {
    message: Bytes,
    awaits: Option<Reply>,
}

/// The answer a goodbye's request waits for.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum Reply {
    /// A JSON-RPC response (no `method`) whose `id` is this JSON value (raw
    /// JSON text: `"childwire-shutdown"` with its quotes, or `7`).
    JsonRpcId(Bytes),
    /// A Debug Adapter Protocol response whose `request_seq` is this number.
    DapRequestSeq(u64),
}

impl Reply {
    /// Whether `message` is this answer.
    ///
    /// ```
    /// use childwire_core::Reply;
    ///
    /// let lsp = Reply::JsonRpcId(r#""childwire-shutdown""#.into());
    /// assert!(lsp.is_answered_by(br#"{"jsonrpc":"2.0","id":"childwire-shutdown","result":null}"#));
    /// let dap = Reply::DapRequestSeq(9);
    /// assert!(dap.is_answered_by(br#"{"seq": 4, "type": "response", "request_seq": 9, "success": true}"#));
    /// assert!(!dap.is_answered_by(br#"{"type":"response","request_seq":90}"#));
    /// ```
    #[must_use]
    pub fn is_answered_by(&self, message: &[u8]) -> bool {
        match self {
            Reply::JsonRpcId(id) => crate::jsonrpc::is_response_to(message, id),
            Reply::DapRequestSeq(seq) => dap_request_seq(message) == Some(*seq),
        }
    }
}

/// The number after the first `"request_seq"` key of `message`, if a
/// number follows it (a DAP response's; only responses carry the key).
fn dap_request_seq(message: &[u8]) -> Option<u64> {
    const KEY: &[u8] = b"\"request_seq\"";
    let at = memchr::memmem::find(message, KEY)?;
    let rest = message[at + KEY.len()..].trim_ascii_start();
    let rest = rest.strip_prefix(b":")?.trim_ascii_start();
    let digits = rest.iter().take_while(|b| b.is_ascii_digit()).count();
    if digits == 0 || digits > 19 {
        return None;
    }
    // Digits only, at most 19 of them: always a valid u64.
    std::str::from_utf8(&rest[..digits]).ok()?.parse().ok()
}

impl Goodbye {
    /// A goodbye with no messages yet.
    #[must_use]
    pub fn new() -> Self {
        Self::default()
    }

    /// The Language Server Protocol's: the `shutdown` request (id
    /// [`LSP_SHUTDOWN_ID`]), its answer, then the `exit` notification.
    ///
    /// ```
    /// use childwire_core::Goodbye;
    ///
    /// let lsp = Goodbye::lsp();
    /// let messages: Vec<&[u8]> = lsp.messages().collect();
    /// assert_eq!(messages[0], &br#"{"jsonrpc":"2.0","id":"childwire-shutdown","method":"shutdown"}"#[..]);
    /// assert_eq!(messages[1], &br#"{"jsonrpc":"2.0","method":"exit"}"#[..]);
    /// ```
    #[must_use]
    pub fn lsp() -> Self {
        let id = format!("\"{LSP_SHUTDOWN_ID}\"");
        Self::new()
            .request(
                format!(r#"{{"jsonrpc":"2.0","id":{id},"method":"shutdown"}}"#),
                Reply::JsonRpcId(id.into()),
            )
            .notify(r#"{"jsonrpc":"2.0","method":"exit"}"#)
    }

    /// The Debug Adapter Protocol's: the `disconnect` request (seq
    /// [`DAP_DISCONNECT_SEQ`], the adapter's defaults for the debuggee) and
    /// its answer.
    #[must_use]
    pub fn dap() -> Self {
        Self::new().request(
            format!(
                r#"{{"seq":{DAP_DISCONNECT_SEQ},"type":"request","command":"disconnect","arguments":{{}}}}"#
            ),
            Reply::DapRequestSeq(DAP_DISCONNECT_SEQ),
        )
    }

    /// Adds a message written without waiting for any answer.
    #[must_use]
    pub fn notify(mut self, message: impl Into<Bytes>) -> Self {
        self.steps.push(Step {
            message: message.into(),
            awaits: None,
        });
        self
    }

    /// Adds a message, and waits for its answer (`reply`) before the next.
    #[must_use]
    pub fn request(mut self, message: impl Into<Bytes>, reply: Reply) -> Self {
        self.steps.push(Step {
            message: message.into(),
            awaits: Some(reply),
        });
        self
    }

    /// How long to wait for each answer before going on without it.
    /// Default [`DEFAULT_ANSWER_TIMEOUT`].
    #[must_use]
    pub fn answer_timeout(mut self, timeout: Duration) -> Self {
        self.answer_timeout = Some(timeout);
        self
    }

    /// The messages, in the order they are written.
    pub fn messages(&self) -> impl ExactSizeIterator<Item = &[u8]> {
        self.steps.iter().map(|step| &step.message[..])
    }

    fn timeout(&self) -> Duration {
        self.answer_timeout.unwrap_or(DEFAULT_ANSWER_TIMEOUT)
    }
}

/// A goodbye being said: which message goes next and which answer is
/// awaited until when.
///
/// Begun by a shutdown ([`handle_begin`](Self::handle_begin)), it hands
/// out its messages ([`poll_message`](Self::poll_message)) up to and with
/// the first that asks for an answer, then nothing until that answer comes
/// ([`handle_message`](Self::handle_message)) or its deadline passes
/// ([`handle_timeout`](Self::handle_timeout), at
/// [`poll_timeout`](Self::poll_timeout)). Stopped early
/// ([`handle_stop`](Self::handle_stop)) when stdin closes or the child
/// ends. Done once every message was handed out and no answer is awaited.
#[derive(Debug, Clone)]
pub struct Farewell {
    goodbye: Goodbye,
    /// The next step to hand out.
    next: usize,
    /// The answer awaited, and until when (`None`: a deadline past the
    /// clock's range, never reached).
    awaiting: Option<(usize, Option<Instant>)>,
    begun: bool,
    stopped: bool,
    answered: u32,
    missed: u32,
}

impl Farewell {
    /// A goodbye not yet begun.
    #[must_use]
    pub fn new(goodbye: Goodbye) -> Self {
        Self {
            goodbye,
            next: 0,
            awaiting: None,
            begun: false,
            stopped: false,
            answered: 0,
            missed: 0,
        }
    }

    /// The shutdown began: the messages may go. Only the first call counts.
    pub fn handle_begin(&mut self) {
        self.begun = true;
    }

    /// The next message to write, if one may go now. A message that asks
    /// for an answer starts its wait at `now`.
    pub fn poll_message(&mut self, now: Instant) -> Option<Bytes> {
        if !self.begun || self.stopped || self.awaiting.is_some() {
            return None;
        }
        let step = self.goodbye.steps.get(self.next)?;
        if step.awaits.is_some() {
            self.awaiting = Some((self.next, now.checked_add(self.goodbye.timeout())));
        }
        self.next += 1;
        Some(step.message.clone())
    }

    /// Whether an answer is awaited now.
    #[must_use]
    pub fn is_awaiting(&self) -> bool {
        self.awaiting.is_some()
    }

    /// Whether `message` is the answer awaited now.
    #[must_use]
    pub fn is_answer(&self, message: &[u8]) -> bool {
        self.awaited()
            .is_some_and(|reply| reply.is_answered_by(message))
    }

    /// A message came from the child: if it is the answer awaited, the wait
    /// is over and the next messages may go. Returns whether it was.
    pub fn handle_message(&mut self, message: &[u8]) -> bool {
        let answered = self.is_answer(message);
        if answered {
            self.awaiting = None;
            self.answered += 1;
        }
        answered
    }

    /// Time passed: an answer whose deadline `now` reached is given up on,
    /// and the next messages may go.
    pub fn handle_timeout(&mut self, now: Instant) {
        if self
            .awaiting
            .is_some_and(|(_, deadline)| deadline.is_some_and(|d| now >= d))
        {
            self.awaiting = None;
            self.missed += 1;
        }
    }

    /// The goodbye can go no further (stdin closed, the child ended or is
    /// being killed): nothing more is handed out or awaited.
    pub fn handle_stop(&mut self) {
        self.stopped = true;
        self.awaiting = None;
    }

    /// When the answer awaited is given up on.
    #[must_use]
    pub fn poll_timeout(&self) -> Option<Instant> {
        self.awaiting.and_then(|(_, deadline)| deadline)
    }

    /// Whether the goodbye began.
    #[must_use]
    pub fn is_begun(&self) -> bool {
        self.begun
    }

    /// Whether nothing more is to be written or awaited: every message was
    /// handed out and no answer is awaited, or it was stopped (or, not begun,
    /// there is nothing to wait for).
    #[must_use]
    pub fn is_done(&self) -> bool {
        !self.begun
            || self.stopped
            || (self.awaiting.is_none() && self.next == self.goodbye.steps.len())
    }

    /// Whether at least one message was handed out.
    #[must_use]
    pub fn has_said(&self) -> bool {
        self.next > 0
    }

    /// Answers that came in time, and answers given up on.
    #[must_use]
    pub fn answers(&self) -> (u32, u32) {
        (self.answered, self.missed)
    }

    fn awaited(&self) -> Option<&Reply> {
        let (step, _) = self.awaiting?;
        self.goodbye.steps.get(step)?.awaits.as_ref()
    }
}
