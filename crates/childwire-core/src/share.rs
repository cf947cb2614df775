//! One server, many clients: the decisions of sharing one JSON-RPC (MCP)
//! server among several clients, with no I/O and no clock.
//!
//! Hosts start one copy of every configured stdio server per session; a
//! [`Share`] lets many client sessions talk to one server process as if
//! each had it alone. It sits between the clients' messages and the
//! server's and decides, for each message, where it goes and what it says:
//!
//! - **Ids.** A client's request reaches the server with an id the share
//!   gives it (a number, unique for the server's whole life), and the
//!   answer goes back to the client that asked, with the client's own id.
//!   A progress token in the request (`params._meta.progressToken`) is
//!   replaced the same way, and restored in `notifications/progress`.
//! - **Notifications from the server** go to every client, except those
//!   that concern one request: `notifications/progress` goes to the
//!   client whose token it names, `notifications/cancelled` to the client
//!   whose request it names.
//! - **Requests from the server** (sampling, roots, elicitation) go to one
//!   client, and that client's answer goes back with the server's id; see
//!   [Who answers the server](#who-answers-the-server). The share answers
//!   the server's `ping` itself.
//! - **Cancellation.** A client's `notifications/cancelled` reaches the
//!   server only for the client's own requests (rewritten); one naming
//!   another client's request, or an unknown one, is dropped. A client
//!   that leaves has its requests still in flight cancelled at the server.
//! - **Initialization.** The server is initialized once: the first
//!   client's `initialize` is forwarded, and the first
//!   `notifications/initialized`. A later client's `initialize` is answered
//!   with the result the server gave (under the later client's id), or,
//!   when it asks for a protocol version that is neither the one the server
//!   agreed nor the one the first client asked for, with JSON-RPC error
//!   -32602 (`Unsupported protocol version`, with the versions in `data`).
//! - **The server's end** answers every request in flight with an error;
//!   after a restart ([`handle_server_ended`](Share::handle_server_ended)
//!   with `restarting`), [`handle_reinit_start`](Share::handle_reinit_start)
//!   gives the `initialize` to run the new server through, and
//!   [`poll_reinit`](Share::poll_reinit) says when that is over: answered
//!   (then `notifications/initialized`), or failed (no answer within
//!   [`ShareConfig::reinit_timeout`], or the server ended first).
//! - **Bounds.** Requests in flight (both ways) are bounded, and so are the
//!   bytes queued for each client: a client that stops reading past the
//!   bound is disconnected ([`Event::Disconnected`]) and the others go on.
//!   The number of clients is bounded too.
//! - **Lifetime.** When the last client has left and the linger has
//!   passed with no one joining, the share says to stop the server
//!   ([`Event::StopServer`]).
//!
//! # Who answers the server
//!
//! A request from the server goes to one client, chosen in this order:
//!
//! 1. the client whose request it names: its `params._meta.progressToken`
//!    is the token the share gave one of that client's requests still in
//!    flight (what a server doing sampling for a tool call passes on);
//! 2. else, among the clients able to answer it (for `sampling/*`,
//!    `roots/*` and `elicitation/*`, clients whose `initialize` declared
//!    that capability; for any other method, every client), one with
//!    requests in flight at the server (the server is working for it),
//!    else any; the most recently active of them (the last to send a
//!    message);
//! 3. else no one: the server gets a JSON-RPC error -32601 saying no
//!    client can answer.
//!
//! Its answer goes back to the server only from that client: answers from
//! others, or to requests no longer waiting, are dropped.
//!
//! # How to drive it
//!
//! - [`join`](Share::join) a client, [`leave`](Share::leave) when it goes;
//! - [`handle_client`](Share::handle_client) with each message a client
//!   sends, [`handle_server`](Share::handle_server) with each message the
//!   server sends (message bodies, no framing);
//! - [`handle_server_ended`](Share::handle_server_ended) when the server
//!   ends; [`handle_unsent`](Share::handle_unsent) with a message that
//!   could not be sent to it;
//! - [`handle_timeout`](Share::handle_timeout) at
//!   [`poll_timeout`](Share::poll_timeout);
//! - after every input: send [`poll_server`](Share::poll_server)'s
//!   messages to the server, in order; [`poll_event`](Share::poll_event)
//!   says which clients have messages to read
//!   ([`poll_client`](Share::poll_client)), which were disconnected, and
//!   when to stop the server.
//!
//! What waits for the server is what the last input made (a handful of
//! messages, or one cancellation per request of a client that left): the
//! caller sends it before it takes the next input.
//!
//! # Example
//!
//! ```
//! use std::time::Instant;
//! use childwire_core::share::{Share, ShareConfig};
//!
//! let now = Instant::now();
//! let mut share = Share::new(ShareConfig::default(), now);
//! let a = share.join(now).unwrap();
//! let b = share.join(now).unwrap();
//!
//! // Both clients use id 1; the server sees two different ids.
//! share.handle_client(now, a, br#"{"jsonrpc":"2.0","id":1,"method":"tools/list"}"#);
//! share.handle_client(now, b, br#"{"jsonrpc":"2.0","id":1,"method":"ping"}"#);
//! assert_eq!(share.poll_server().unwrap(), &br#"{"jsonrpc":"2.0","id":1,"method":"tools/list"}"#[..]);
//! assert_eq!(share.poll_server().unwrap(), &br#"{"jsonrpc":"2.0","id":2,"method":"ping"}"#[..]);
//!
//! // The answer to the server's id 2 goes to b, with b's id.
//! share.handle_server(now, br#"{"jsonrpc":"2.0","id":2,"result":{}}"#);
//! assert_eq!(share.poll_client(now, b).unwrap(), &br#"{"jsonrpc":"2.0","id":1,"result":{}}"#[..]);
//! assert_eq!(share.poll_client(now, a), None);
//! ```

use std::collections::{HashMap, HashSet, VecDeque};
use std::fmt;
use std::hash::{BuildHasherDefault, Hasher};
use std::ops::Range;
use std::time::{Duration, Instant};

use bytes::Bytes;

use crate::frame::Oversized;
use crate::jsonrpc::oversized_error;
use crate::pending::{EndCause, unanswered_error};

mod json;

use json::{IdKey, Parsed};

/// The error code of a request the share refuses because too many are in
/// flight: it echoes HTTP's 429 Too Many Requests (see
/// [`OVERSIZED_ERROR_CODE`](crate::jsonrpc::OVERSIZED_ERROR_CODE) for the
/// codes avoided).
pub const BUSY_ERROR_CODE: i32 = -32029;

/// The error code of a request whose answer will not come because the
/// peer went away: -32000, which the MCP SDKs use for "connection closed".
pub const GONE_ERROR_CODE: i32 = -32000;

/// JSON-RPC's "Invalid params", which MCP uses for an unsupported protocol
/// version.
pub const UNSUPPORTED_VERSION_ERROR_CODE: i32 = -32602;

/// JSON-RPC's "Method not found": a request from the server no client can
/// answer.
pub const NO_CLIENT_ERROR_CODE: i32 = -32601;

/// JSON-RPC's "Invalid Request": a message that is JSON but not a request,
/// notification or response, or a request reusing an id still in flight.
pub const INVALID_REQUEST_ERROR_CODE: i32 = -32600;

/// JSON-RPC's "Parse error": a client's message that is not JSON.
pub const PARSE_ERROR_CODE: i32 = -32700;

/// What each message queued for a client counts against its bound besides
/// its bytes: the queue's own record of it.
pub const QUEUED_ITEM_OVERHEAD: usize = 64;

/// The limits of a [`Share`].
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct ShareConfig {
    /// Clients at once; [`Share::join`] refuses more.
    pub max_clients: usize,
    /// Requests in flight at once, each way: clients' requests waiting for
    /// the server, and the server's requests waiting for a client. A
    /// request over it is answered with error [`BUSY_ERROR_CODE`].
    pub max_in_flight: usize,
    /// Bytes queued for one client (plus [`QUEUED_ITEM_OVERHEAD`] per
    /// message) before it is disconnected for not reading. A message
    /// queued for a client with nothing queued is always taken, so one
    /// message larger than the bound does not disconnect a client that
    /// reads.
    pub client_queue_bytes: usize,
    /// How long a client that read within this time counts as reading (a
    /// client that had nothing to read counts from its first message since):
    /// while such a client has more than half its bound queued, the share
    /// holds off reading the server ([`Share::poll_read_pause`]), so a
    /// client that reads slower than the server writes slows the server
    /// down instead of being disconnected. A client that read nothing for
    /// longer holds no one up, and is disconnected at its bound.
    pub read_grace: Duration,
    /// How long the server is kept after the last client leaves, for one
    /// that comes back.
    pub linger: Duration,
    /// How long a restarted server has to answer the `initialize` it is
    /// run through.
    pub reinit_timeout: Duration,
}

impl Default for ShareConfig {
    fn default() -> Self {
        Self {
            max_clients: 64,
            max_in_flight: 4096,
            client_queue_bytes: 8 << 20,
            read_grace: Duration::from_millis(500),
            linger: Duration::ZERO,
            reinit_timeout: Duration::from_secs(60),
        }
    }
}

/// A client of a [`Share`], from [`Share::join`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ClientId(u64);

impl ClientId {
    /// The number the share gave the client (the first is 1).
    pub fn get(self) -> u64 {
        self.0
    }
}

impl fmt::Display for ClientId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "client {}", self.0)
    }
}

/// Why [`Share::join`] refused a client.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum JoinError {
    /// [`ShareConfig::max_clients`] clients are joined.
    Full {
        /// The bound.
        max_clients: usize,
    },
    /// The server is stopping ([`Event::StopServer`] was given) or ended.
    Stopped,
}

impl fmt::Display for JoinError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            JoinError::Full { max_clients } => {
                write!(f, "the share has its {max_clients} clients already")
            }
            JoinError::Stopped => f.write_str("the shared server is stopping"),
        }
    }
}

impl std::error::Error for JoinError {}

/// Why the share disconnected a client.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum Disconnect {
    /// The client stopped reading: what was queued for it reached the
    /// bound ([`ShareConfig::client_queue_bytes`]).
    StoppedReading {
        /// Bytes queued (with the per-message overhead) with the message
        /// that did not fit.
        queued: usize,
        /// The bound.
        bound: usize,
    },
}

impl fmt::Display for Disconnect {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Disconnect::StoppedReading { queued, bound } => write!(
                f,
                "the client stopped reading: {queued} bytes would be queued for it, over its bound of {bound}"
            ),
        }
    }
}

/// Where a restarted server's re-initialization is, from
/// [`Share::poll_reinit`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ReinitStep {
    /// Waiting for the answer to the `initialize`: ask again when the
    /// server wrote something, or at this instant (`None`: a timeout too
    /// long to count, so never).
    Wait(Option<Instant>),
    /// The server answered: send it this `notifications/initialized`, and
    /// traffic goes on.
    Answered(Bytes),
    /// It failed, for this reason: the server ended first, or did not
    /// answer in time.
    Failed(String),
}

/// The id the share gives the `initialize` it re-initializes a restarted
/// server with: a string, so it never meets the share's numbered ids.
const REINIT_ID: &[u8] = br#""childwire-share-reinit""#;

/// What [`Share::poll_event`] hands out.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum Event {
    /// The client has messages to read ([`Share::poll_client`]); said when
    /// its queue stops being empty.
    Readable(ClientId),
    /// The share disconnected the client: it has left (its requests were
    /// cancelled at the server) and what was queued for it is dropped.
    Disconnected {
        /// The client.
        client: ClientId,
        /// Why.
        reason: Disconnect,
    },
    /// No client is left and the linger passed: stop the server (the MCP
    /// way: close its stdin and wait). Given once; no client joins after.
    StopServer,
}

/// Messages the share dropped, by reason.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct ShareCounters {
    /// Client messages answered with an error (not JSON, not JSON-RPC, an
    /// id in use, too many in flight, the server gone) or dropped (a
    /// cancellation not its own, an answer to no request of the server's
    /// it holds, a second `notifications/initialized`).
    pub client_refused: u64,
    /// Server messages no client is meant for: not JSON-RPC, an answer to
    /// no request in flight, progress or a cancellation for no request.
    pub server_dropped: u64,
    /// Client requests the server's end (or a failed send) answered with an
    /// error.
    pub failed: u64,
    /// Requests of departed clients cancelled at the server.
    pub cancelled_on_leave: u64,
    /// Clients disconnected for not reading.
    pub disconnected: u64,
}

/// A client's request the server has not answered.
#[derive(Debug)]
struct InFlight {
    client: ClientId,
    /// Its id as the client wrote it.
    id: Bytes,
    /// Its progress token as the client wrote it, if it had one (the
    /// server knows it by the request's share id).
    token: Option<Bytes>,
    /// It is the `initialize` the server is initialized with.
    initialize: bool,
}

/// A request from the server waiting for a client's answer.
#[derive(Debug)]
struct Asked {
    client: ClientId,
    /// The server's id, raw.
    id: Bytes,
}

/// The client capabilities a server request may need.
const CAP_SAMPLING: u8 = 1;
const CAP_ROOTS: u8 = 2;
const CAP_ELICITATION: u8 = 4;

#[derive(Debug, Default)]
struct Client {
    queue: VecDeque<Bytes>,
    /// Bytes queued plus the overhead per message.
    queued: usize,
    /// Its requests in flight: its id's key to the share id.
    pending: HashMap<IdKey, u64>,
    /// Keys of the server's requests it holds.
    asked: HashSet<IdKey>,
    /// Capabilities its `initialize` declared (`None` before one).
    caps: Option<u8>,
    /// When it last sent a message (the share's message count).
    active: u64,
    /// When it last read a message, or else since when it has had
    /// something to read (it was caught up before: a client waiting for
    /// its next message is reading).
    last_read: Option<Instant>,
}

/// Where the server's initialization is.
#[derive(Debug)]
enum Init {
    /// No `initialize` forwarded (or the last one failed).
    None,
    /// The first `initialize` is at the server; later ones
    /// wait for its answer.
    Pending {
        requested: Option<Bytes>,
        waiting: Vec<(ClientId, Bytes, Option<Bytes>)>,
    },
    /// The server answered: its result, the version it agreed, and the
    /// one the first client asked for.
    Done {
        result: Bytes,
        agreed: Option<Bytes>,
        requested: Option<Bytes>,
    },
}

/// The sharing of one server among many clients. See [the module](self).
#[derive(Debug)]
pub struct Share {
    config: ShareConfig,
    clients: NumberMap<ClientId, Client>,
    next_client: u64,
    /// Share id of the next request (ids the server sees).
    next_id: u64,
    in_flight: NumberMap<u64, InFlight>,
    asked: HashMap<IdKey, Asked>,
    init: Init,
    /// The `initialize` the server was initialized with, as the first
    /// client wrote it (for a restarted server).
    init_message: Option<Bytes>,
    initialized_sent: bool,
    to_server: VecDeque<Bytes>,
    events: VecDeque<Event>,
    /// Messages taken from clients so far: "most recently active".
    tick: u64,
    /// When to stop the server if no client joins by then.
    linger_until: Option<Instant>,
    stopping: bool,
    /// The last input's time.
    now: Instant,
    /// The server ended for good: why, for the errors answering requests.
    ended: Option<String>,
    /// A restarted server's re-initialization under way: until when it
    /// may take (`None`: no end), and how it ended once it did.
    reinit: Option<(Option<Instant>, Option<ReinitStep>)>,
    counters: ShareCounters,
}

impl Share {
    /// A share with no client yet. The linger starts when the last client
    /// leaves: a share no client ever joined waits for one.
    pub fn new(config: ShareConfig, now: Instant) -> Self {
        let linger_until = None;
        Self {
            config,
            clients: NumberMap::default(),
            next_client: 1,
            next_id: 1,
            in_flight: NumberMap::default(),
            asked: HashMap::new(),
            init: Init::None,
            init_message: None,
            initialized_sent: false,
            to_server: VecDeque::new(),
            events: VecDeque::new(),
            tick: 0,
            linger_until,
            stopping: false,
            now,
            ended: None,
            reinit: None,
            counters: ShareCounters::default(),
        }
    }

    /// The limits it was made with.
    pub fn config(&self) -> &ShareConfig {
        &self.config
    }

    /// A new client.
    pub fn join(&mut self, now: Instant) -> Result<ClientId, JoinError> {
        self.now = now;
        if self.stopping || self.ended.is_some() {
            return Err(JoinError::Stopped);
        }
        if self.clients.len() >= self.config.max_clients {
            return Err(JoinError::Full {
                max_clients: self.config.max_clients,
            });
        }
        let id = ClientId(self.next_client);
        self.next_client += 1;
        self.clients.insert(
            id,
            Client {
                last_read: Some(now),
                ..Client::default()
            },
        );
        self.linger_until = None;
        Ok(id)
    }

    /// The client leaves: its requests still in flight are cancelled at the
    /// server, the server's requests it holds are answered with an error,
    /// and what was queued for it is dropped. Nothing for an unknown client.
    pub fn leave(&mut self, client: ClientId, now: Instant) {
        self.now = now;
        if self.clients.contains_key(&client) {
            self.remove(client, "the client disconnected from the share");
            self.emptied();
        }
    }

    /// Clients joined.
    pub fn clients(&self) -> usize {
        self.clients.len()
    }

    /// Whether `client` is joined.
    pub fn is_joined(&self, client: ClientId) -> bool {
        self.clients.contains_key(&client)
    }

    /// Client requests waiting for the server.
    pub fn in_flight(&self) -> usize {
        self.in_flight.len()
    }

    /// Bytes queued for `client`, with the per-message overhead.
    pub fn queued(&self, client: ClientId) -> usize {
        self.clients.get(&client).map_or(0, |c| c.queued)
    }

    /// Messages dropped or refused so far.
    pub fn counters(&self) -> ShareCounters {
        self.counters
    }

    /// Whether the server ended for good
    /// ([`handle_server_ended`](Self::handle_server_ended) without
    /// `restarting`).
    pub fn is_ended(&self) -> bool {
        self.ended.is_some()
    }

    /// Messages waiting for the server
    /// ([`poll_server`](Self::poll_server)).
    pub fn server_pending(&self) -> usize {
        self.to_server.len()
    }

    /// The next message for the server, in order.
    pub fn poll_server(&mut self) -> Option<Bytes> {
        self.to_server.pop_front()
    }

    /// The next message for `client`, read at `now`.
    pub fn poll_client(&mut self, now: Instant, client: ClientId) -> Option<Bytes> {
        let c = self.clients.get_mut(&client)?;
        let message = c.queue.pop_front()?;
        c.queued -= message.len() + QUEUED_ITEM_OVERHEAD;
        c.last_read = Some(now);
        Some(message)
    }

    /// Whether to hold off reading the server's output, and until when:
    /// while a client that is reading (it read within
    /// [`read_grace`](ShareConfig::read_grace), or had nothing to read
    /// until then) has more than half its bound queued. Ask again at the instant given, or as soon as a
    /// client reads. `None`: read on.
    ///
    /// This is the share's backpressure: a client that reads slowly slows
    /// the server down to its pace; one that stopped reading holds the
    /// others up for at most `read_grace`, then is disconnected at its
    /// bound.
    pub fn poll_read_pause(&self, now: Instant) -> Option<Instant> {
        let high_water = self.config.client_queue_bytes / 2;
        self.clients
            .values()
            .filter(|c| c.queued > high_water)
            .filter_map(|c| c.last_read.map(|read| read + self.config.read_grace))
            .filter(|until| *until > now)
            .min()
    }

    /// The next event.
    pub fn poll_event(&mut self) -> Option<Event> {
        self.events.pop_front()
    }

    /// When to call [`handle_timeout`](Self::handle_timeout): the end of
    /// the linger, while no client is joined.
    pub fn poll_timeout(&self) -> Option<Instant> {
        if self.stopping {
            None
        } else {
            self.linger_until
        }
    }

    /// Time passed: once the linger is over with no client,
    /// [`Event::StopServer`].
    pub fn handle_timeout(&mut self, now: Instant) {
        self.now = now;
        if let Some(until) = self.linger_until {
            if now >= until && self.clients.is_empty() && !self.stopping {
                self.stop();
            }
        }
    }

    fn stop(&mut self) {
        self.stopping = true;
        self.linger_until = None;
        self.events.push_back(Event::StopServer);
    }

    /// A restarted server's re-initialization starts: the `initialize`
    /// to send it (the first client's, under an id of the share's own), or
    /// `None` when there is nothing to run it through (no client's
    /// `initialize` was answered), and traffic goes on at once.
    ///
    /// Then hand everything the server writes to
    /// [`handle_server`](Self::handle_server) (the answer is kept from the
    /// clients), its end to [`handle_reinit_ended`](Self::handle_reinit_ended),
    /// and ask [`poll_reinit`](Self::poll_reinit) after each, and at the
    /// instant it names.
    pub fn handle_reinit_start(&mut self, now: Instant) -> Option<Bytes> {
        self.now = now;
        self.reinit = None;
        if !matches!(self.init, Init::Done { .. }) {
            return None;
        }
        let message = self.init_message.as_ref()?;
        let parsed = Parsed::of(message)?;
        let request = json::splice(message, &mut [(parsed.id?, REINIT_ID)]);
        self.reinit = Some((now.checked_add(self.config.reinit_timeout), None));
        Some(request)
    }

    /// The server being re-initialized ended (or its output did) before it
    /// answered: `why`, in words.
    pub fn handle_reinit_ended(&mut self, why: &str) {
        if let Some((_, outcome @ None)) = &mut self.reinit {
            *outcome = Some(ReinitStep::Failed(format!(
                "it ended before it answered initialize: {why}"
            )));
        }
    }

    /// Where the re-initialization started by
    /// [`handle_reinit_start`](Self::handle_reinit_start) is at `now`;
    /// `None` when none is under way. Once it answers
    /// [`ReinitStep::Answered`] or [`ReinitStep::Failed`], it is over.
    pub fn poll_reinit(&mut self, now: Instant) -> Option<ReinitStep> {
        let (until, outcome) = self.reinit.as_mut()?;
        let step = match outcome.take() {
            Some(step) => step,
            None if until.is_some_and(|until| now >= until) => ReinitStep::Failed(format!(
                "no answer to initialize within {:?}",
                self.config.reinit_timeout
            )),
            None => return Some(ReinitStep::Wait(*until)),
        };
        self.reinit = None;
        Some(step)
    }

    /// A message from `client` (its body, no framing). It is forwarded to
    /// the server (rewritten), answered by the share, or dropped; see [the
    /// module](self). Nothing for an unknown client.
    pub fn handle_client(&mut self, now: Instant, client: ClientId, message: &[u8]) {
        self.now = now;
        let Some(c) = self.clients.get_mut(&client) else {
            return;
        };
        self.tick += 1;
        c.active = self.tick;
        let Some(parsed) = Parsed::of(message) else {
            self.refuse(
                client,
                b"null",
                PARSE_ERROR_CODE,
                "Parse error: not one JSON object",
            );
            return;
        };
        match (parsed.has_method, parsed.id.clone()) {
            (true, Some(id)) => self.client_request(client, message, &parsed, id),
            (true, None) => self.client_notification(client, message, &parsed),
            (false, Some(id)) => self.client_response(client, message, &message[id]),
            (false, None) => self.refuse(
                client,
                b"null",
                INVALID_REQUEST_ERROR_CODE,
                "Invalid Request: neither a method nor an id",
            ),
        }
    }

    fn client_request(
        &mut self,
        client: ClientId,
        message: &[u8],
        parsed: &Parsed<'_>,
        id_span: Range<usize>,
    ) {
        let raw_id = &message[id_span.clone()];
        let Some(method) = parsed.method.as_deref() else {
            return self.refuse(
                client,
                raw_id_or_null(raw_id),
                INVALID_REQUEST_ERROR_CODE,
                "Invalid Request: the method is not a string",
            );
        };
        let key = match json::id_key(raw_id) {
            Some(key) if json::is_request_id(raw_id) => key,
            _ => {
                return self.refuse(
                    client,
                    b"null",
                    INVALID_REQUEST_ERROR_CODE,
                    "Invalid Request: a request's id must be a string or a number",
                );
            }
        };
        if self.clients[&client].pending.contains_key(&key) {
            return self.refuse(
                client,
                raw_id,
                INVALID_REQUEST_ERROR_CODE,
                "Invalid Request: this id is already used by a request in flight",
            );
        }
        if let Some(why) = &self.ended {
            let why = why.clone();
            self.counters.failed += 1;
            let response = json::error_response(raw_id, GONE_ERROR_CODE, &why, None);
            self.deliver(client, response);
            return;
        }
        if method == "initialize" {
            return self.client_initialize(client, message, parsed, id_span, key);
        }
        if self.in_flight.len() >= self.config.max_in_flight {
            return self.busy(client, raw_id);
        }
        let share_id = self.next_id;
        self.next_id += 1;
        let number = share_id.to_string();
        let token_span = parsed
            .params
            .clone()
            .and_then(|params| json::path(message, params, &["_meta", "progressToken"]))
            .filter(|span| json::is_request_id(&message[span.clone()]));
        let token = token_span
            .clone()
            .map(|span| Bytes::copy_from_slice(&message[span]));
        let mut edits = vec![(id_span, number.as_bytes())];
        if let Some(span) = token_span {
            edits.push((span, number.as_bytes()));
        }
        let rewritten = json::splice(message, &mut edits);
        self.in_flight.insert(
            share_id,
            InFlight {
                client,
                id: Bytes::copy_from_slice(raw_id),
                token,
                initialize: false,
            },
        );
        if let Some(c) = self.clients.get_mut(&client) {
            c.pending.insert(key, share_id);
        }
        self.to_server.push_back(rewritten);
    }

    fn client_initialize(
        &mut self,
        client: ClientId,
        message: &[u8],
        parsed: &Parsed<'_>,
        id_span: Range<usize>,
        key: IdKey,
    ) {
        let raw_id = Bytes::copy_from_slice(&message[id_span.clone()]);
        let params = parsed.params.clone();
        let version = params
            .clone()
            .and_then(|p| json::member(message, p, "protocolVersion"))
            .map(|span| Bytes::copy_from_slice(&message[span]));
        let caps = params
            .and_then(|p| json::member(message, p, "capabilities"))
            .map(|span| {
                json::keys(message, span, 64)
                    .iter()
                    .fold(0, |caps, key| caps | capability(key))
            })
            .unwrap_or(0);
        if let Some(c) = self.clients.get_mut(&client) {
            c.caps = Some(caps);
        }
        match &mut self.init {
            Init::None => {
                if self.in_flight.len() >= self.config.max_in_flight {
                    return self.busy(client, &raw_id);
                }
                let share_id = self.next_id;
                self.next_id += 1;
                let number = share_id.to_string();
                let rewritten = json::splice(message, &mut [(id_span, number.as_bytes())]);
                self.in_flight.insert(
                    share_id,
                    InFlight {
                        client,
                        id: raw_id,
                        token: None,
                        initialize: true,
                    },
                );
                if let Some(c) = self.clients.get_mut(&client) {
                    c.pending.insert(key, share_id);
                }
                self.init = Init::Pending {
                    requested: version,
                    waiting: Vec::new(),
                };
                self.init_message = Some(Bytes::copy_from_slice(message));
                self.to_server.push_back(rewritten);
            }
            Init::Pending { waiting, .. } => {
                if waiting.iter().any(|(waiter, ..)| *waiter == client) {
                    return self.refuse(
                        client,
                        &raw_id,
                        INVALID_REQUEST_ERROR_CODE,
                        "Invalid Request: an initialize of this client is already waiting",
                    );
                }
                waiting.push((client, raw_id, version));
            }
            Init::Done {
                result,
                agreed,
                requested,
            } => {
                let response = init_answer(
                    &raw_id,
                    version.as_deref(),
                    result,
                    agreed.as_deref(),
                    requested.as_deref(),
                );
                self.deliver(client, response);
            }
        }
    }

    fn client_notification(&mut self, client: ClientId, message: &[u8], parsed: &Parsed<'_>) {
        match parsed.method.as_deref() {
            Some("notifications/initialized") => {
                if self.initialized_sent
                    || !matches!(self.init, Init::Done { .. } | Init::Pending { .. })
                {
                    self.counters.client_refused += 1;
                    return;
                }
                self.initialized_sent = true;
                self.to_server.push_back(Bytes::copy_from_slice(message));
            }
            Some("notifications/cancelled") => {
                let found = parsed.params.clone().and_then(|params| {
                    let span = json::member(message, params, "requestId")?;
                    let key = json::id_key(&message[span.clone()])?;
                    let share_id = *self.clients.get(&client)?.pending.get(&key)?;
                    Some((span, key, share_id))
                });
                let Some((span, key, share_id)) = found else {
                    self.counters.client_refused += 1;
                    return;
                };
                if self.in_flight.get(&share_id).is_some_and(|f| f.initialize) {
                    // MCP: `initialize` is never cancelled.
                    self.counters.client_refused += 1;
                    return;
                }
                if let Some(c) = self.clients.get_mut(&client) {
                    c.pending.remove(&key);
                }
                self.in_flight.remove(&share_id);
                let number = share_id.to_string();
                self.to_server
                    .push_back(json::splice(message, &mut [(span, number.as_bytes())]));
            }
            _ if self.ended.is_some() => self.counters.client_refused += 1,
            _ => self.to_server.push_back(Bytes::copy_from_slice(message)),
        }
    }

    fn client_response(&mut self, client: ClientId, message: &[u8], raw_id: &[u8]) {
        let Some(key) = json::id_key(raw_id) else {
            self.counters.client_refused += 1;
            return;
        };
        let holds = self.asked.get(&key).is_some_and(|a| a.client == client);
        if !holds {
            self.counters.client_refused += 1;
            return;
        }
        self.asked.remove(&key);
        if let Some(c) = self.clients.get_mut(&client) {
            c.asked.remove(&key);
        }
        // The response goes as the client wrote it: the id is the server's.
        self.to_server.push_back(Bytes::copy_from_slice(message));
    }
}

// The server's side.
impl Share {
    /// A message from the server (its body, no framing): delivered to the
    /// client it concerns (ids and tokens restored), to every client, or
    /// answered by the share; see [the module](self).
    pub fn handle_server(&mut self, now: Instant, message: &[u8]) {
        self.now = now;
        let Some(parsed) = Parsed::of_structure(message) else {
            self.counters.server_dropped += 1;
            return;
        };
        if let (Some((_, outcome @ None)), false, Some(id)) =
            (&mut self.reinit, parsed.has_method, &parsed.id)
        {
            if message.get(id.clone()) == Some(REINIT_ID) {
                // The answer to the share's own `initialize`.
                *outcome = Some(ReinitStep::Answered(Bytes::from_static(
                    br#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#,
                )));
                return;
            }
        }
        match (parsed.has_method, parsed.id.clone()) {
            (false, Some(id)) => self.server_response(message, &parsed, id),
            (true, Some(id)) => self.server_request(message, &parsed, id),
            (true, None) => self.server_notification(message, &parsed),
            (false, None) => self.counters.server_dropped += 1,
        }
    }

    fn server_response(&mut self, message: &[u8], parsed: &Parsed<'_>, id_span: Range<usize>) {
        let entry = json::share_number(&message[id_span.clone()])
            .and_then(|share_id| self.in_flight.remove(&share_id));
        let Some(entry) = entry else {
            self.counters.server_dropped += 1;
            return;
        };
        if let (Some(c), Some(key)) = (self.clients.get_mut(&entry.client), json::id_key(&entry.id))
        {
            c.pending.remove(&key);
        }
        let restored = json::splice(message, &mut [(id_span.clone(), &entry.id)]);
        if entry.initialize {
            self.initialize_answered(message, parsed, id_span);
        }
        self.deliver(entry.client, restored);
    }

    /// The server answered the first `initialize`: the clients waiting get
    /// the same answer, each under its own id.
    fn initialize_answered(&mut self, message: &[u8], parsed: &Parsed<'_>, id_span: Range<usize>) {
        let Some((requested, waiting)) = self.take_pending_init() else {
            return;
        };
        let answers: Vec<(ClientId, Bytes)> = match parsed.result.clone() {
            Some(result) => {
                let agreed = json::member(message, result.clone(), "protocolVersion")
                    .map(|span| Bytes::copy_from_slice(&message[span]));
                let result = Bytes::copy_from_slice(&message[result]);
                let answers = waiting
                    .into_iter()
                    .map(|(client, id, version)| {
                        let answer = init_answer(
                            &id,
                            version.as_deref(),
                            &result,
                            agreed.as_deref(),
                            requested.as_deref(),
                        );
                        (client, answer)
                    })
                    .collect();
                self.init = Init::Done {
                    result,
                    agreed,
                    requested,
                };
                answers
            }
            None => {
                // It failed: each waiting client gets the same error, and
                // the next `initialize` is forwarded again.
                self.init_message = None;
                waiting
                    .into_iter()
                    .map(|(client, id, _)| {
                        (client, json::splice(message, &mut [(id_span.clone(), &id)]))
                    })
                    .collect()
            }
        };
        for (client, answer) in answers {
            self.deliver(client, answer);
        }
    }

    fn server_request(&mut self, message: &[u8], parsed: &Parsed<'_>, id_span: Range<usize>) {
        let raw_id = &message[id_span];
        let method = parsed.method.as_deref().unwrap_or_default();
        // Read by its structure only: the id is checked on its own, as the
        // share's answers to the server carry it.
        let valid = json::is_request_id(raw_id) && crate::json_shape::check(raw_id).is_json;
        let Some(key) = json::id_key(raw_id).filter(|_| valid) else {
            self.counters.server_dropped += 1;
            return;
        };
        if method == "ping" {
            // The share is there: it answers for the clients.
            self.to_server
                .push_back(json::result_response(raw_id, b"{}"));
            return;
        }
        if self.asked.len() >= self.config.max_in_flight {
            let why = "too many requests from the server are waiting for the share's clients";
            self.to_server
                .push_back(json::error_response(raw_id, BUSY_ERROR_CODE, why, None));
            return;
        }
        let Some(client) = self.pick_client(message, parsed, method) else {
            let why = format!("no client of the share can answer {method}");
            self.to_server.push_back(json::error_response(
                raw_id,
                NO_CLIENT_ERROR_CODE,
                &why,
                None,
            ));
            return;
        };
        if let Some(old) = self.asked.insert(
            key.clone(),
            Asked {
                client,
                id: Bytes::copy_from_slice(raw_id),
            },
        ) {
            // The server reused an id still waiting: the newer request wins.
            if let Some(c) = self.clients.get_mut(&old.client) {
                c.asked.remove(&key);
            }
        }
        if let Some(c) = self.clients.get_mut(&client) {
            c.asked.insert(key);
        }
        self.deliver(client, Bytes::copy_from_slice(message));
    }

    /// Who answers a request from the server; see [the module](self).
    fn pick_client(&self, message: &[u8], parsed: &Parsed<'_>, method: &str) -> Option<ClientId> {
        let named = parsed
            .params
            .clone()
            .and_then(|params| json::path(message, params, &["_meta", "progressToken"]))
            .and_then(|span| json::share_number(&message[span]))
            .and_then(|share_id| self.in_flight.get(&share_id))
            .filter(|entry| entry.token.is_some())
            .map(|entry| entry.client)
            .filter(|client| self.clients.contains_key(client));
        if named.is_some() {
            return named;
        }
        let needs = method
            .split_once('/')
            .map_or(0, |(prefix, _)| capability(prefix));
        self.clients
            .iter()
            .filter(|(_, c)| needs == 0 || c.caps.is_some_and(|caps| caps & needs != 0))
            .max_by_key(|(id, c)| (!c.pending.is_empty(), c.active, id.0))
            .map(|(id, _)| *id)
    }

    fn server_notification(&mut self, message: &[u8], parsed: &Parsed<'_>) {
        let params = parsed.params.clone();
        match parsed.method.as_deref() {
            Some("notifications/progress") => {
                let found = params.and_then(|params| {
                    let span = json::member(message, params, "progressToken")?;
                    let entry = self
                        .in_flight
                        .get(&json::share_number(&message[span.clone()])?)?;
                    Some((span, entry.client, entry.token.clone()?))
                });
                let Some((span, client, token)) = found else {
                    self.counters.server_dropped += 1;
                    return;
                };
                let restored = json::splice(message, &mut [(span, &token)]);
                self.deliver(client, restored);
            }
            Some("notifications/cancelled") => {
                let Some(span) = params.and_then(|p| json::member(message, p, "requestId")) else {
                    self.counters.server_dropped += 1;
                    return;
                };
                let raw = &message[span.clone()];
                // The server gives up a request of its own: the client
                // that holds it no longer answers it.
                if let Some(asked) = json::id_key(raw).and_then(|key| {
                    let asked = self.asked.remove(&key)?;
                    if let Some(c) = self.clients.get_mut(&asked.client) {
                        c.asked.remove(&key);
                    }
                    Some(asked)
                }) {
                    self.deliver(asked.client, Bytes::copy_from_slice(message));
                    return;
                }
                // It names a client's request: that client alone hears it.
                let entry = json::share_number(raw).and_then(|n| self.in_flight.get(&n));
                let Some(entry) = entry else {
                    self.counters.server_dropped += 1;
                    return;
                };
                let (client, restored) = (
                    entry.client,
                    json::splice(message, &mut [(span, &entry.id)]),
                );
                self.deliver(client, restored);
            }
            _ => {
                let message = Bytes::copy_from_slice(message);
                let mut clients: Vec<ClientId> = self.clients.keys().copied().collect();
                clients.sort_unstable();
                for client in clients {
                    self.deliver(client, message.clone());
                }
            }
        }
    }

    /// The server ended: every client request in flight is answered with
    /// an error that says why ([`unanswered_error`]), and the server's
    /// requests the clients hold are cancelled to them. With `restarting`,
    /// a new server follows: run it through
    /// [`handle_reinit_start`](Self::handle_reinit_start) and traffic goes on;
    /// without, the share is over: requests are answered with an error,
    /// and no client joins.
    pub fn handle_server_ended(&mut self, now: Instant, cause: &EndCause<'_>, restarting: bool) {
        self.now = now;
        let mut failed: Vec<(u64, InFlight)> = self.in_flight.drain().collect();
        failed.sort_unstable_by_key(|(share_id, _)| *share_id);
        for c in self.clients.values_mut() {
            c.pending.clear();
        }
        let mut answers: Vec<(ClientId, Bytes)> = failed
            .into_iter()
            .map(|(_, entry)| (entry.client, unanswered_error(&entry.id, cause)))
            .collect();
        if let Some((_, waiting)) = self.take_pending_init() {
            self.init_message = None;
            answers.extend(
                waiting
                    .into_iter()
                    .map(|(client, id, _)| (client, unanswered_error(&id, cause))),
            );
        }
        let mut asked: Vec<Asked> = self.asked.drain().map(|(_, asked)| asked).collect();
        asked.sort_unstable_by_key(|asked| asked.client);
        for c in self.clients.values_mut() {
            c.asked.clear();
        }
        if !restarting {
            let mut why = String::from("the shared server ended");
            if let Some(exit) = cause.exit {
                why = format!("the shared server {exit}");
            }
            self.ended = Some(why);
            self.stopping = true;
            self.linger_until = None;
        }
        self.counters.failed += answers.len() as u64;
        for (client, answer) in answers {
            self.deliver(client, answer);
        }
        for asked in asked {
            let reason = "the server ended before it had the answer";
            self.deliver(asked.client, json::cancelled(&asked.id, reason));
        }
    }

    /// The server wrote a message over the size limit (`limit` bytes), and
    /// the transport dropped it: if it was the answer to a client's
    /// request, the client gets the error [`oversized_error`] makes
    /// instead, under its own id.
    ///
    /// [`oversized_error`]: crate::jsonrpc::oversized_error
    pub fn handle_server_oversized(&mut self, now: Instant, notice: &Oversized, limit: usize) {
        self.now = now;
        let entry = notice
            .json_rpc_id()
            .and_then(|id| json::share_number(id))
            .and_then(|share_id| self.in_flight.remove(&share_id));
        let Some(entry) = entry else {
            self.counters.server_dropped += 1;
            return;
        };
        if let (Some(c), Some(key)) = (self.clients.get_mut(&entry.client), json::id_key(&entry.id))
        {
            c.pending.remove(&key);
        }
        if entry.initialize {
            if let Some((_, waiting)) = self.take_pending_init() {
                self.init_message = None;
                for (client, id, _) in waiting {
                    self.deliver(client, oversized_error(&id, notice.len, limit));
                }
            }
        }
        self.counters.failed += 1;
        self.deliver(entry.client, oversized_error(&entry.id, notice.len, limit));
    }

    /// `message` (as [`poll_server`](Self::poll_server) gave it) could not
    /// be sent to the server: if it is a client's request, the client gets
    /// an error saying `why` instead of an answer.
    pub fn handle_unsent(&mut self, now: Instant, message: &[u8], why: &str) {
        self.now = now;
        let Some(parsed) = Parsed::of(message) else {
            return;
        };
        if !parsed.has_method {
            return;
        }
        let Some(share_id) = parsed.id_text(message).and_then(json::share_number) else {
            return;
        };
        let Some(entry) = self.in_flight.remove(&share_id) else {
            return;
        };
        if let (Some(c), Some(key)) = (self.clients.get_mut(&entry.client), json::id_key(&entry.id))
        {
            c.pending.remove(&key);
        }
        let why = format!("the request could not be sent to the shared server: {why}");
        let mut answers = vec![(
            entry.client,
            json::error_response(&entry.id, GONE_ERROR_CODE, &why, None),
        )];
        if entry.initialize {
            if let Some((_, waiting)) = self.take_pending_init() {
                self.init_message = None;
                answers.extend(waiting.into_iter().map(|(client, id, _)| {
                    (
                        client,
                        json::error_response(&id, GONE_ERROR_CODE, &why, None),
                    )
                }));
            }
        }
        self.counters.failed += answers.len() as u64;
        for (client, answer) in answers {
            self.deliver(client, answer);
        }
    }
}

// Queues and departures.
impl Share {
    /// Queues `message` for `client`, or disconnects it if it stopped
    /// reading.
    fn deliver(&mut self, client: ClientId, message: Bytes) {
        let bound = self.config.client_queue_bytes;
        let Some(c) = self.clients.get_mut(&client) else {
            return;
        };
        let cost = message.len() + QUEUED_ITEM_OVERHEAD;
        if !c.queue.is_empty() && c.queued + cost > bound {
            let queued = c.queued + cost;
            self.counters.disconnected += 1;
            self.remove(client, "the client stopped reading");
            self.events.push_back(Event::Disconnected {
                client,
                reason: Disconnect::StoppedReading { queued, bound },
            });
            self.emptied();
            return;
        }
        if c.queue.is_empty() {
            self.events.push_back(Event::Readable(client));
            // Caught up until now: how long it takes to read is counted
            // from here, not from its last read, which may be long ago.
            c.last_read = Some(self.now);
        }
        c.queued += cost;
        c.queue.push_back(message);
    }

    /// A refused client message: an error response to it.
    fn refuse(&mut self, client: ClientId, id: &[u8], code: i32, why: &str) {
        self.counters.client_refused += 1;
        let response = json::error_response(id, code, why, None);
        self.deliver(client, response);
    }

    fn busy(&mut self, client: ClientId, id: &[u8]) {
        let why = format!(
            "too many requests in flight at the shared server (at most {})",
            self.config.max_in_flight
        );
        self.refuse(client, id, BUSY_ERROR_CODE, &why);
    }

    /// Takes `client` out: its requests cancelled at the server, the
    /// server's requests it held answered with an error.
    fn remove(&mut self, client: ClientId, reason: &str) {
        let Some(c) = self.clients.remove(&client) else {
            return;
        };
        let server_there = self.ended.is_none();
        let mut share_ids: Vec<u64> = c.pending.into_values().collect();
        share_ids.sort_unstable();
        for share_id in share_ids {
            // `initialize` is never cancelled: its answer initializes the
            // server for the clients to come.
            if self.in_flight.get(&share_id).is_some_and(|f| f.initialize) {
                continue;
            }
            self.in_flight.remove(&share_id);
            if server_there {
                self.counters.cancelled_on_leave += 1;
                self.to_server
                    .push_back(json::cancelled(share_id.to_string().as_bytes(), reason));
            }
        }
        let mut asked: Vec<Asked> = c
            .asked
            .into_iter()
            .filter_map(|key| self.asked.remove(&key))
            .collect();
        asked.sort_unstable_by(|a, b| a.id.cmp(&b.id));
        if server_there {
            for asked in asked {
                let why = "the client the request went to left the share";
                self.to_server.push_back(json::error_response(
                    &asked.id,
                    GONE_ERROR_CODE,
                    why,
                    None,
                ));
            }
        }
        if let Init::Pending { waiting, .. } = &mut self.init {
            waiting.retain(|(waiter, ..)| *waiter != client);
        }
    }

    /// The initialization in progress, if one is: the state goes back to
    /// none (a done one stays).
    #[allow(clippy::type_complexity)]
    fn take_pending_init(
        &mut self,
    ) -> Option<(Option<Bytes>, Vec<(ClientId, Bytes, Option<Bytes>)>)> {
        if !matches!(self.init, Init::Pending { .. }) {
            return None;
        }
        match std::mem::replace(&mut self.init, Init::None) {
            Init::Pending { requested, waiting } => Some((requested, waiting)),
            _ => None,
        }
    }

    /// The last client may have gone: the linger starts.
    fn emptied(&mut self) {
        if self.clients.is_empty() && !self.stopping {
            if self.config.linger.is_zero() {
                self.stop();
            } else {
                self.linger_until = Some(self.now + self.config.linger);
            }
        }
    }
}

/// A map keyed by the share's own numbers (share ids, client ids): no peer
/// chooses them, so they need no keyed hash (SipHash is kept for the ids
/// clients and the server choose).
type NumberMap<K, V> = HashMap<K, V, BuildHasherDefault<NumberHasher>>;

/// The multiply-rotate hash of rustc's `FxHasher`, for [`NumberMap`].
#[derive(Debug, Default, Clone, Copy)]
struct NumberHasher(u64);

impl NumberHasher {
    const K: u64 = 0x517c_c1b7_2722_0a95;

    fn add(&mut self, n: u64) {
        self.0 = (self.0.rotate_left(5) ^ n).wrapping_mul(Self::K);
    }
}

impl Hasher for NumberHasher {
    fn finish(&self) -> u64 {
        self.0
    }

    fn write(&mut self, bytes: &[u8]) {
        for &byte in bytes {
            self.add(u64::from(byte));
        }
    }

    fn write_u64(&mut self, n: u64) {
        self.add(n);
    }
}

/// The capability bit a client declares by this key (or a server request
/// needs by this method prefix).
fn capability(key: &str) -> u8 {
    match key {
        "sampling" => CAP_SAMPLING,
        "roots" => CAP_ROOTS,
        "elicitation" => CAP_ELICITATION,
        _ => 0,
    }
}

fn raw_id_or_null(raw: &[u8]) -> &[u8] {
    if json::is_request_id(raw) {
        raw
    } else {
        b"null"
    }
}

/// The answer to a later client's `initialize` asking for `version`.
fn init_answer(
    id: &[u8],
    version: Option<&[u8]>,
    result: &[u8],
    agreed: Option<&[u8]>,
    requested: Option<&[u8]>,
) -> Bytes {
    match version {
        Some(version) if Some(version) != agreed && Some(version) != requested => {
            let mut data = Vec::with_capacity(64);
            data.extend_from_slice(br#"{"supported":["#);
            if let Some(agreed) = agreed {
                data.extend_from_slice(agreed);
            }
            data.extend_from_slice(br#"],"requested":"#);
            data.extend_from_slice(version);
            data.push(b'}');
            json::error_response(
                id,
                UNSUPPORTED_VERSION_ERROR_CODE,
                "Unsupported protocol version: the shared server was initialized with another one",
                Some(&data),
            )
        }
        _ => json::result_response(id, result),
    }
}
