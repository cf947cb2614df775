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
//!   one stands for: the first one not answered yet with the same method
//!   and, for a request that names what it asks for, the same name
//!   (`tools/call`'s and `prompts/get`'s `name`, the `uri` of
//!   `resources/read`, `resources/subscribe` and `resources/unsubscribe`),
//!   so a host may call its tools in another order than recorded. When no
//!   recorded request of the method names the same thing, the first one not
//!   answered yet stands for it (matching by rank), and a [`Note`] says so.
//!   Other requests and notifications match by rank within their method
//!   (the third `ping` stands for the third recorded `ping`). A
//!   response from the host (to a request of the server) is matched by its
//!   id, a message that is not JSON-RPC by its bytes. Then its answer is
//!   queued, each response carrying the id of the live request it answers.
//!   A response whose request the host has not sent yet (the host sends in
//!   another order than recorded) waits for that request. A progress
//!   notification carries the live request's progress token (MCP's
//!   `params._meta.progressToken`), as a response carries its id.
//! - A live request with no recorded counterpart gets a JSON-RPC error
//!   (code [`NOT_IN_RECORDING`]) naming the method; any other unmatched
//!   message gets nothing. Both are listed by [`Replayer::unmatched`], and
//!   each gets a [`Note`].
//! - [`Replayer::handle_eof`] (the host closed the server's stdin) queues
//!   the exit. A server that exited on its own in the recording
//!   ([`RecordedExit::on_its_own`]) exits where it did, right after the
//!   answer it was giving; nothing comes out after the exit.
//!
//! Drain [`Replayer::poll_output`] after every input: the outputs come in
//! the order the recorded server produced them; [`Replayer::poll_note`]
//! hands out what a person should know about the replay (a stderr line in
//! `childwire replay`).
//!
//! A replayer plays one generation: given a recording of several (a
//! supervised child restarted), it plays the first and a note says so;
//! pick another with [`Recording::generation`].

use std::collections::{HashMap, VecDeque};
use std::fmt;
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
    /// The message as the host sent it, up to its first KiB.
    pub message: Vec<u8>,
    /// What it was taken for: `tools/call` request #3, response to id 7.
    pub what: String,
}

/// What a person should know about a replay: the recording did not have
/// what the host asked for, or had it under another name. `childwire
/// replay` writes each on stderr.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum Note {
    /// A live message the recording has nothing for.
    Unmatched(Unmatched),
    /// A request was answered by rank: no recorded request of its method
    /// that was not answered yet names the same thing.
    ByRank {
        /// The live request: `` `tools/call` of "echo" ``.
        live: String,
        /// The recorded request that answers it: `` `tools/call` #1 of "get-sum" ``.
        recorded: String,
    },
    /// The recording holds several generations; the first is replayed.
    FirstOfGenerations(usize),
    /// The recorder dropped this many records (its writer fell behind):
    /// the replay may lack some of what happened.
    Dropped(u64),
    /// More notes came than are kept waiting to be polled: this many were
    /// left out.
    LeftOut(u64),
}

impl fmt::Display for Note {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Note::Unmatched(unmatched) => write!(f, "not in the recording: {}", unmatched.what),
            Note::ByRank { live, recorded } => write!(
                f,
                "{live} is not in the recording by name: answered as {recorded}, by rank"
            ),
            Note::FirstOfGenerations(count) => write!(
                f,
                "the recording holds {count} generations (a restarted child): replaying the first"
            ),
            Note::Dropped(records) => write!(
                f,
                "the recorder dropped {records} records (its writer fell behind): \
                 the replay may lack some of what happened"
            ),
            Note::LeftOut(count) => write!(f, "{count} more notes left out"),
        }
    }
}

/// The most notes kept waiting for [`Replayer::poll_note`], and unmatched
/// messages kept for [`Replayer::unmatched`]: a host that sends endless
/// unmatched messages costs a count, not memory.
const MAX_KEPT: usize = 1024;

/// The most bytes of an unmatched message kept.
const KEPT_BYTES: usize = 1024;

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
    /// What it asks for by name (canonical JSON), for a request whose
    /// method names one.
    subject: Option<String>,
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
    /// The recorded host messages of each key, in order (indices into
    /// `hosts`), and how many of them are matched already from the front.
    by_key: HashMap<Key, (Vec<usize>, usize)>,
    /// The recorded requests of each key and subject not matched yet, in
    /// order (some may have been matched by rank since).
    by_subject: HashMap<(Key, Option<String>), VecDeque<usize>>,
    /// How many live messages of each key were seen.
    live_counts: HashMap<Key, usize>,
    exit: RecordedExit,
    queue: VecDeque<Output>,
    /// The exit was queued: nothing more comes out.
    exited: bool,
    unmatched: Vec<Unmatched>,
    notes: VecDeque<Note>,
    /// Notes left out since the queue was full.
    notes_left_out: u64,
}

impl Replayer {
    /// A replay of `recording` (its first generation, if it has several),
    /// its opening already queued.
    #[must_use]
    pub fn new(recording: Recording) -> Self {
        let generations = recording.generations();
        let recording = if generations > 1 {
            recording.into_generations().swap_remove(0)
        } else {
            recording
        };
        let dropped = recording.dropped();
        let exit = recording.exit().cloned().unwrap_or_default();
        let exits_on_its_own = exit.on_its_own();
        let mut items = Vec::new();
        let mut hosts: Vec<HostMessage> = Vec::new();
        let mut by_key: HashMap<Key, (Vec<usize>, usize)> = HashMap::new();
        let mut by_subject: HashMap<(Key, Option<String>), VecDeque<usize>> = HashMap::new();
        // Requests not answered yet, by canonical id: indices into `hosts`.
        let mut open: HashMap<String, VecDeque<usize>> = HashMap::new();
        // Requests that asked for progress, by canonical token.
        let mut tokens: HashMap<String, usize> = HashMap::new();
        let mut opening_end = None;
        for event in recording.into_events() {
            match event {
                Event::ToChild(bytes) => {
                    let shape = Shape::of(&bytes);
                    let subject = subject_of(&bytes, &shape);
                    let key = match shape {
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
                    by_subject
                        .entry((key.clone(), subject.clone()))
                        .or_default()
                        .push_back(hosts.len());
                    by_key.entry(key).or_default().0.push(hosts.len());
                    hosts.push(HostMessage {
                        answer: items.len()..items.len(),
                        matched: false,
                        subject,
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
            by_subject,
            live_counts: HashMap::new(),
            exit,
            queue: VecDeque::new(),
            exited: false,
            unmatched: Vec::new(),
            notes: VecDeque::new(),
            notes_left_out: 0,
        };
        if generations > 1 {
            replayer.note(Note::FirstOfGenerations(generations));
        }
        if dropped > 0 {
            replayer.note(Note::Dropped(dropped));
        }
        replayer.queue_items(opening);
        replayer
    }

    /// The host sent `message` (one line, without its `\n`).
    pub fn handle_message(&mut self, message: &[u8]) {
        if self.exited {
            return;
        }
        let shape = Shape::of(message);
        let subject = subject_of(message, &shape);
        let (key, live_id) = match shape {
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
        let Some(host) = self.find(&key, subject.as_ref(), occurrence + 1) else {
            let recorded = self.by_key.get(&key).map_or(0, |(all, _)| all.len());
            let what = key.describe(occurrence + 1);
            if let (Key::Method(method), Some(id)) = (&key, &live_id) {
                self.queue.push_back(Output::Message(not_in_recording(
                    method,
                    id,
                    occurrence + 1,
                    recorded,
                )));
            }
            let unmatched = Unmatched {
                message: message[..message.len().min(KEPT_BYTES)].to_vec(),
                what,
            };
            if self.unmatched.len() < MAX_KEPT {
                self.unmatched.push(unmatched.clone());
            }
            self.note(Note::Unmatched(unmatched));
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

    /// The recorded host message the live one of `key` naming `subject`
    /// stands for (`occurrence` of its key), marked matched; a note if it
    /// was found by rank alone.
    fn find(&mut self, key: &Key, subject: Option<&String>, occurrence: usize) -> Option<usize> {
        // The first one not matched yet naming the same thing.
        if let Some(queue) = self.by_subject.get_mut(&(key.clone(), subject.cloned())) {
            while let Some(host) = queue.pop_front() {
                if !self.hosts[host].matched {
                    self.hosts[host].matched = true;
                    return Some(host);
                }
            }
        }
        // By rank: the first one not matched yet.
        let (all, front) = self.by_key.get_mut(key)?;
        while all
            .get(*front)
            .is_some_and(|&host| self.hosts[host].matched)
        {
            *front += 1;
        }
        let host = *all.get(*front)?;
        let rank = *front + 1;
        *front += 1;
        self.hosts[host].matched = true;
        if let Key::Method(method) = key {
            let recorded = self.hosts[host].subject.as_ref();
            if subject.is_some() || recorded.is_some() {
                let name = |subject: Option<&String>| {
                    subject.map_or_else(String::new, |subject| format!(" of {subject}"))
                };
                let note = Note::ByRank {
                    live: format!("`{method}` #{occurrence}{}", name(subject)),
                    recorded: format!("`{method}` #{rank}{}", name(recorded)),
                };
                self.note(note);
            }
        }
        Some(host)
    }

    fn note(&mut self, note: Note) {
        if self.notes.len() < MAX_KEPT {
            self.notes.push_back(note);
        } else {
            self.notes_left_out += 1;
        }
    }

    /// What a person should know about the replay, in order; `None` until
    /// there is more. Up to 1,024 notes wait to be polled; past that they
    /// are counted, and a [`Note::LeftOut`] says how many.
    pub fn poll_note(&mut self) -> Option<Note> {
        if let Some(note) = self.notes.pop_front() {
            return Some(note);
        }
        if self.notes_left_out > 0 {
            return Some(Note::LeftOut(std::mem::take(&mut self.notes_left_out)));
        }
        None
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

    /// The live messages the recording had nothing for, in order: the
    /// first 1,024 (each up to its first KiB).
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

/// Where a request of `method` names what it asks for.
fn subject_path(method: &str) -> Option<&'static [&'static str]> {
    match method {
        "tools/call" | "prompts/get" => Some(&["params", "name"]),
        "resources/read" | "resources/subscribe" | "resources/unsubscribe" => {
            Some(&["params", "uri"])
        }
        _ => None,
    }
}

/// What a request of `shape` names (canonical JSON: `"echo"`), if its
/// method names one and it has it.
fn subject_of(message: &[u8], shape: &Shape) -> Option<String> {
    let Shape::Request { method, .. } = shape else {
        return None;
    };
    let span = path_span(message, subject_path(method)?)?;
    Some(canonical_id(&message[span]))
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
