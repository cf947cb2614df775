//! The replay engine: a recorded server as a state machine, no I/O.
//!
//! # How a recording is replayed
//!
//! The recording is cut at each message the host sent: what the server
//! wrote after a host message and before the next one (messages, stderr
//! lines, its exit) is that message's *answer*, and what it wrote before
//! the first one is the *opening* (banners, early notifications).
//!
//! - [`Replayer::new`] queues the opening.
//! - [`Replayer::handle_message`] finds the recorded host message the live
//!   one stands for: the same method, and the same occurrence of it (the
//!   third `tools/call` stands for the third recorded `tools/call`). A
//!   response from the host (to a request of the server) is matched by its
//!   id, a message that is not JSON-RPC by its bytes. Then its answer is
//!   queued, each response carrying the id of the live request it answers.
//!   A response whose request the host has not sent yet (the host sends in
//!   another order than recorded) waits for that request. A progress
//!   notification carries the live request's progress token (MCP's
//!   `params._meta.progressToken`), as a response carries its id.
//! - A live request with no recorded counterpart gets a JSON-RPC error
//!   (code [`NOT_IN_RECORDING`]) naming the method; any other unmatched
//!   message gets nothing. Both are listed by [`Replayer::unmatched`].
//! - [`Replayer::handle_eof`] (the host closed the server's stdin) queues
//!   the exit. A server that exited on its own in the recording
//!   ([`RecordedExit::on_its_own`]) exits where it did, right after the
//!   answer it was giving; nothing comes out after the exit.
//!
//! Drain [`Replayer::poll_output`] after every input: the outputs come in
//! the order the recorded server produced them.

use std::collections::{HashMap, VecDeque};
use std::ops::Range;

use serde_json::json;

use crate::message::{
    self, PROGRESS_TOKEN, REQUEST_PROGRESS_TOKEN, Shape, canonical_id, path_span,
};
use crate::recording::{Event, RecordedExit, Recording};

/// The JSON-RPC error code a request missing from the recording gets:
/// -32601, "method not found", what a server answers a method it does not
/// know. The error's `data` says `{"method", "occurrence", "recorded"}`:
/// which occurrence of the method was asked, and how many the recording has.
pub const NOT_IN_RECORDING: i32 = -32601;

/// What the replayed server does next.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Output {
    /// Write this message to stdout (without its `\n`).
    Message(Vec<u8>),
    /// The recorded server sent a message this many bytes long that was
    /// dropped for its size; the recording does not hold its bytes.
    Oversized(u64),
    /// Write this line to stderr.
    Stderr(String),
    /// Exit this way. Always the last output.
    Exit(RecordedExit),
}

/// A live message the recording has nothing for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Unmatched {
    /// The message, as the host sent it.
    pub message: Vec<u8>,
    /// What it was taken for: `tools/call` request #3, response to id 7.
    pub what: String,
}

/// How a host message is recognised: the method of a request or
/// notification, the id of a response, the bytes of anything else.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
enum Key {
    Method(String),
    Response(String),
    Bytes(Vec<u8>),
}

impl Key {
    fn describe(&self, occurrence: usize) -> String {
        match self {
            Key::Method(method) => format!("`{method}` #{occurrence}"),
            Key::Response(id) => format!("a response to id {id} (#{occurrence})"),
            Key::Bytes(bytes) => format!(
                "a message that is not JSON-RPC, `{}` (#{occurrence})",
                String::from_utf8_lossy(bytes)
            ),
        }
    }
}

/// One recorded host message.
#[derive(Debug)]
struct HostMessage {
    /// The answer: indices into `Replayer::items`.
    answer: Range<usize>,
    /// A live message was matched to it.
    matched: bool,
    /// The raw text of the live message's id, if it had one.
    live_id: Option<Vec<u8>>,
    /// The raw progress token of the live request, if it asked for progress.
    live_token: Option<Vec<u8>>,
    /// Responses to this request that came due before the host sent it
    /// live, waiting for it: indices into `items`.
    held: Vec<usize>,
}

/// One thing the recorded server did.
#[derive(Debug)]
enum Item {
    /// A message; for a response, the index of the host request it
    /// answers; for a progress notification, the index of the request whose
    /// token it carries.
    Message {
        bytes: Vec<u8>,
        answers: Option<usize>,
        progress: Option<usize>,
    },
    Oversized(u64),
    Stderr(String),
    Exit,
}

/// A recorded server, replayed: takes each message the host sends and
/// hands out what the recorded server sent in answer, ids rewritten.
///
/// Sans-IO in the manner of the core: `handle_*` methods take input,
/// [`poll_output`](Self::poll_output) hands out what to write or do, in
/// order. See [the module docs](self) for how messages are matched.
///
/// ```
/// use childwire_replay::{Output, Recording, Replayer};
///
/// let recording: Recording = r#"
/// {"dir":"from_child","text":"Starting server on stdio"}
/// {"dir":"to_child","msg":{"jsonrpc":"2.0","id":1,"method":"ping"}}
/// {"dir":"stderr","line":"INFO: pong"}
/// {"dir":"from_child","msg":{"jsonrpc":"2.0","id":1,"result":{}}}
/// {"dir":"exit","exit_code":0,"report":"exited with code 0 after stdin was closed"}
/// "#.parse()?;
/// let mut server = Replayer::new(recording);
/// // The banner comes first, before anything is asked.
/// assert_eq!(server.poll_output(), Some(Output::Message(b"Starting server on stdio".to_vec())));
/// assert_eq!(server.poll_output(), None);
///
/// // The host's own id for the ping comes back in the response.
/// server.handle_message(br#"{"jsonrpc":"2.0","id":"a-7","method":"ping"}"#);
/// assert_eq!(server.poll_output(), Some(Output::Stderr("INFO: pong".into())));
/// assert_eq!(
///     server.poll_output(),
///     Some(Output::Message(br#"{"jsonrpc":"2.0","id":"a-7","result":{}}"#.to_vec()))
/// );
///
/// server.handle_eof();
/// let Some(Output::Exit(exit)) = server.poll_output() else { panic!() };
/// assert_eq!(exit.shell_code(), 0);
/// # Ok::<(), childwire_replay::ParseError>(())
/// ```
#[derive(Debug)]
pub struct Replayer {
    items: Vec<Item>,
    hosts: Vec<HostMessage>,
    /// The recorded host messages of each key, in order: indices into
    /// `hosts`.
    by_key: HashMap<Key, Vec<usize>>,
    /// How many live messages of each key were seen.
    live_counts: HashMap<Key, usize>,
    exit: RecordedExit,
    queue: VecDeque<Output>,
    /// The exit was queued: nothing more comes out.
    exited: bool,
    unmatched: Vec<Unmatched>,
}

impl Replayer {
    /// A replay of `recording`, its opening already queued.
    #[must_use]
    pub fn new(recording: Recording) -> Self {
        let exit = recording.exit().cloned().unwrap_or_default();
        let exits_on_its_own = exit.on_its_own();
        let mut items = Vec::new();
        let mut hosts: Vec<HostMessage> = Vec::new();
        let mut by_key: HashMap<Key, Vec<usize>> = HashMap::new();
        // Requests not answered yet, by canonical id: indices into `hosts`.
        let mut open: HashMap<String, VecDeque<usize>> = HashMap::new();
        // Requests that asked for progress, by canonical token.
        let mut tokens: HashMap<String, usize> = HashMap::new();
        let mut opening_end = None;
        for event in recording.into_events() {
            match event {
                Event::ToChild(bytes) => {
                    let key = match Shape::of(&bytes) {
                        Shape::Request { method, id } => {
                            open.entry(id).or_default().push_back(hosts.len());
                            if let Some(token) = path_span(&bytes, REQUEST_PROGRESS_TOKEN) {
                                tokens.insert(canonical_id(&bytes[token]), hosts.len());
                            }
                            Key::Method(method)
                        }
                        Shape::Notification { method } => Key::Method(method),
                        Shape::Response { id } => Key::Response(id),
                        Shape::Other => Key::Bytes(bytes),
                    };
                    opening_end.get_or_insert(items.len());
                    if let Some(last) = hosts.last_mut() {
                        last.answer.end = items.len();
                    }
                    by_key.entry(key).or_default().push(hosts.len());
                    hosts.push(HostMessage {
                        answer: items.len()..items.len(),
                        matched: false,
                        live_id: None,
                        live_token: None,
                        held: Vec::new(),
                    });
                }
                Event::FromChild(bytes) => {
                    let (mut answers, mut progress) = (None, None);
                    match Shape::of(&bytes) {
                        Shape::Response { id } => {
                            answers = open.get_mut(&id).and_then(VecDeque::pop_front);
                        }
                        Shape::Notification { .. } => {
                            progress = path_span(&bytes, PROGRESS_TOKEN)
                                .and_then(|token| tokens.get(&canonical_id(&bytes[token])))
                                .copied();
                        }
                        _ => {}
                    }
                    items.push(Item::Message {
                        bytes,
                        answers,
                        progress,
                    });
                }
                Event::OversizedFromChild(len) => items.push(Item::Oversized(len)),
                Event::Stderr(line) => items.push(Item::Stderr(line)),
                Event::Exit(_) if exits_on_its_own => items.push(Item::Exit),
                // A dropped host message never reached the server: nothing
                // to match. An exit after stdin closed comes at EOF.
                Event::OversizedToChild(_) | Event::Exit(_) => {}
            }
        }
        if let Some(last) = hosts.last_mut() {
            last.answer.end = items.len();
        }
        let opening = 0..opening_end.unwrap_or(items.len());
        let mut replayer = Self {
            items,
            hosts,
            by_key,
            live_counts: HashMap::new(),
            exit,
            queue: VecDeque::new(),
            exited: false,
            unmatched: Vec::new(),
        };
        replayer.queue_items(opening);
        replayer
    }

    /// The host sent `message` (one line, without its `\n`).
    pub fn handle_message(&mut self, message: &[u8]) {
        if self.exited {
            return;
        }
        let (key, live_id) = match Shape::of(message) {
            Shape::Request { method, .. } => (
                Key::Method(method),
                path_span(message, &["id"]).map(|id| message[id].to_vec()),
            ),
            Shape::Notification { method } => (Key::Method(method), None),
            Shape::Response { id } => (Key::Response(id), None),
            Shape::Other => (Key::Bytes(message.to_vec()), None),
        };
        let seen = self.live_counts.entry(key.clone()).or_default();
        let occurrence = *seen;
        *seen += 1;
        let recorded = self.by_key.get(&key).map_or(&[][..], Vec::as_slice);
        let Some(&host) = recorded.get(occurrence) else {
            let what = key.describe(occurrence + 1);
            if let (Key::Method(method), Some(id)) = (&key, &live_id) {
                self.queue.push_back(Output::Message(not_in_recording(
                    method,
                    id,
                    occurrence + 1,
                    recorded.len(),
                )));
            }
            self.unmatched.push(Unmatched {
                message: message.to_vec(),
                what,
            });
            return;
        };
        let host_message = &mut self.hosts[host];
        host_message.matched = true;
        host_message.live_token = live_id
            .as_ref()
            .and_then(|_| path_span(message, REQUEST_PROGRESS_TOKEN))
            .map(|token| message[token].to_vec());
        host_message.live_id = live_id;
        let answer = host_message.answer.clone();
        let held = std::mem::take(&mut host_message.held);
        self.queue_items(answer);
        for item in held {
            self.queue_item(item);
        }
    }

    /// The host closed the server's stdin: the recorded server exits (if it
    /// has not already).
    pub fn handle_eof(&mut self) {
        // Also when the recorded server exited on its own, later than the
        // live host got: it ends now, the way it ended then.
        if !self.exited {
            self.exited = true;
            self.queue.push_back(Output::Exit(self.exit.clone()));
        }
    }

    /// What the server does next, in order; `None` until the next input.
    #[must_use]
    pub fn poll_output(&mut self) -> Option<Output> {
        self.queue.pop_front()
    }

    /// The exit was handed out or is queued: the replay is over.
    #[must_use]
    pub fn is_exited(&self) -> bool {
        self.exited
    }

    /// The live messages the recording had nothing for, in order.
    #[must_use]
    pub fn unmatched(&self) -> &[Unmatched] {
        &self.unmatched
    }

    fn queue_items(&mut self, items: Range<usize>) {
        for item in items {
            self.queue_item(item);
        }
    }

    fn queue_item(&mut self, index: usize) {
        if self.exited {
            return;
        }
        let output = match &mut self.items[index] {
            Item::Message {
                bytes,
                answers,
                progress,
            } => {
                if let Some(host) = *answers {
                    if !self.hosts[host].matched {
                        // Its request has not come yet: wait for it.
                        self.hosts[host].held.push(index);
                        return;
                    }
                }
                let mut out = std::mem::take(bytes);
                if let Some(id) = answers.and_then(|host| self.hosts[host].live_id.as_deref()) {
                    out = message::with_id(&out, id);
                }
                let token = progress.and_then(|host| self.hosts[host].live_token.as_deref());
                if let Some(token) = token {
                    out = message::with_value_at(&out, PROGRESS_TOKEN, token);
                }
                Output::Message(out)
            }
            Item::Oversized(len) => Output::Oversized(*len),
            Item::Stderr(line) => Output::Stderr(std::mem::take(line)),
            Item::Exit => {
                self.exited = true;
                Output::Exit(self.exit.clone())
            }
        };
        self.queue.push_back(output);
    }
}

/// The error response to a live request the recording does not have.
fn not_in_recording(method: &str, id: &[u8], occurrence: usize, recorded: usize) -> Vec<u8> {
    let error = json!({
        "code": NOT_IN_RECORDING,
        "message": format!(
            "replay: `{method}` request #{occurrence} is not in the recording (it has {recorded})"
        ),
        "data": {"method": method, "occurrence": occurrence, "recorded": recorded},
    });
    let mut response = br#"{"jsonrpc":"2.0","id":"#.to_vec();
    response.extend_from_slice(id);
    response.extend_from_slice(br#","error":"#);
    response.extend_from_slice(error.to_string().as_bytes());
    response.push(b'}');
    response
}

#[cfg(test)]
mod tests;
