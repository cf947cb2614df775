//! The JSON-RPC requests sent to a child that it has not answered yet, and
//! the error responses that answer them when it ends.
//!
//! When a server dies, the requests it was working on are never answered:
//! without bookkeeping they wait for their own timeouts, or fail with a bare
//! "connection closed". [`PendingRequests`] records each outgoing request's
//! id from the message's bytes, forgets it when the response arrives, and
//! when the child ends (or is about to be restarted) makes one JSON-RPC
//! error response per request still waiting, saying why, plus the list of
//! ids that were never answered for the exit report.
//!
//! It reads message bodies, not framing, so it works the same for NDJSON
//! lines and `Content-Length` frames. It finds the top-level `id` and
//! `method` with the [`IdScanner`] (no JSON parser): cheap, bounded, and
//! blind to `id` members nested in `params` or `result`.

use std::collections::HashMap;
use std::io::Write as _;

use bytes::Bytes;

use crate::ending::Exit;
use crate::frame::Oversized;
use crate::jsonrpc::{IdScanner, json_string, oversized_error};

/// The error code of the responses [`PendingRequests::fail_all`] makes:
/// -32000, which the MCP SDKs use for "connection closed" (and
/// childwire-async for a server that exited before it answered).
pub const UNANSWERED_ERROR_CODE: i32 = -32000;

/// How many requests a [`PendingRequests`] tracks by default.
pub const DEFAULT_MAX_TRACKED: usize = 1024;

/// What [`PendingRequests::handle_outgoing`] made of a message.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum Outgoing {
    /// A request: its id is tracked until its response arrives.
    Tracked,
    /// A notification (`method`, no `id`): nothing will answer it.
    Notification,
    /// A response to the child's own request (`id`, no `method`).
    Response,
    /// A request that is not tracked, and counted in
    /// [`PendingRequests::untracked`]: the tracker was full.
    Full,
    /// Not tracked, and counted in [`PendingRequests::untracked`]: not one
    /// JSON object (a batch, broken JSON), or a request whose id cannot be
    /// matched (`null`, an object, or longer than
    /// [`MAX_ID_LEN`](crate::jsonrpc::MAX_ID_LEN) bytes).
    Unreadable,
}

/// What [`PendingRequests::handle_oversized`] decided for a message the
/// transport dropped for its size.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum OversizedAction {
    /// It answered one of the requests sent: hand whatever waits for that
    /// answer this JSON-RPC error response
    /// ([`oversized_error`]) instead.
    FailRequest(Bytes),
    /// It was the peer's own request: send the peer this error response,
    /// so that it does not wait for an answer either.
    AnswerPeer(Bytes),
    /// Nothing to do: it had no id, or answered no pending request.
    Nothing,
}

/// Why the requests still pending will not be answered, for
/// [`PendingRequests::fail_all`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct EndCause<'a> {
    /// How the child ended, if known (its stdout may have closed first).
    pub exit: Option<Exit>,
    /// A line of its stderr that says why (the report's summary line,
    /// say), if any.
    pub stderr: Option<&'a str>,
    /// The child is about to be restarted: the request may be sent again.
    pub restarting: bool,
}

/// A request that was never answered, from [`PendingRequests::fail_all`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UnansweredRequest {
    /// Its id, as raw JSON text, as it was sent.
    pub id: Bytes,
    /// A JSON-RPC error response to it (compact JSON, no newline), ready to
    /// hand to whatever waits for the answer.
    pub response: Bytes,
}

/// Every request still pending when the child ended, from
/// [`PendingRequests::fail_all`].
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Unanswered {
    /// In the order they were sent.
    pub requests: Vec<UnansweredRequest>,
    /// Messages that were not tracked ([`PendingRequests::untracked`]):
    /// requests among them may be waiting too.
    pub untracked: u64,
}

impl Unanswered {
    /// The ids never answered, as raw JSON text, in the order sent.
    pub fn ids(&self) -> impl Iterator<Item = &Bytes> {
        self.requests.iter().map(|request| &request.id)
    }
}

/// One id's requests: usually one; more when a caller reused an id.
#[derive(Debug)]
struct Entry {
    /// Oldest first.
    sends: Vec<Send>,
}

/// One tracked request.
#[derive(Debug, Clone)]
struct Send {
    /// The order it was sent in.
    order: u64,
    /// Its id as it was written.
    id: Bytes,
    /// What it was sent to (a generation of a supervised child; 0 when the
    /// caller does not say).
    tag: u32,
    /// Its send went through (or the caller did not say it was under way).
    delivered: bool,
}

/// A request recorded by [`PendingRequests::begin`] while its send is under
/// way: hand it back with [`PendingRequests::handle_sent`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Ticket {
    key: Vec<u8>,
    order: u64,
}

/// What [`PendingRequests::handle_sent`] made of a send that ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum SendOutcome {
    /// The send went through: the request waits for its answer.
    Delivered,
    /// The send failed, and the request is forgotten: it was not answered,
    /// and may be sent again.
    Forgotten,
    /// The request was answered already, by [`PendingRequests::fail_tag`]
    /// (its receiver ended while the send was under way): whatever the send
    /// did, that error response is its answer. Do not send it again.
    AlreadyAnswered,
}

/// The requests sent to a child that it has not answered yet.
///
/// # How to drive it
///
/// - [`handle_outgoing`](Self::handle_outgoing) with each message body sent
///   to the child (once it is accepted for sending);
/// - [`handle_incoming`](Self::handle_incoming) with each message body
///   received from it, and [`handle_answered`](Self::handle_answered) with
///   the id of a response that was dropped for its size (the
///   [`Oversized`] notice names it);
/// - [`fail_all`](Self::fail_all) when the child ended or is being
///   restarted: the error responses to deliver, and the ids for the report.
///
/// Ids are matched as JSON values: `"a"` and `"\u0061"` are the same id,
/// and so are the numbers `1`, `1.0` and `10e-1` (a server that parses and
/// writes ids again may change how a number is spelled). A request that
/// reuses a pending id is tracked again: each response answers the oldest,
/// and each unanswered one gets its own error response.
///
/// Memory is bounded: at most `max_tracked` requests are tracked at a time
/// ([`DEFAULT_MAX_TRACKED`] by default, [`new`](Self::new) sets another).
/// A request beyond the limit is not tracked: [`handle_outgoing`](Self::handle_outgoing)
/// says so ([`Outgoing::Full`]) so the caller can tell its user which
/// request will not be answered if the child dies, and it is counted
/// ([`untracked`](Self::untracked)), as are the messages it cannot read.
///
/// A supervised child's requests are recorded with [`begin`](Self::begin)
/// before their send and [`handle_sent`](Self::handle_sent) after it, tagged
/// with the generation they went to: [`fail_tag`](Self::fail_tag) answers a
/// dead generation's requests, and a send that was under way meanwhile is
/// then known to be answered, never sent again.
///
/// # Example
///
/// ```
/// use childwire_core::Exit;
/// use childwire_core::pending::{EndCause, PendingRequests};
///
/// let mut pending = PendingRequests::default();
/// pending.handle_outgoing(br#"{"jsonrpc":"2.0","id":1,"method":"tools/list"}"#);
/// pending.handle_outgoing(br#"{"jsonrpc":"2.0","id":"call-2","method":"tools/call","params":{"id":9}}"#);
/// pending.handle_outgoing(br#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#);
/// assert_eq!(pending.len(), 2);
///
/// // The answer to 1 arrives (key order is the server's business).
/// let answered = pending.handle_incoming(br#"{"result":{"tools":[]},"id":1,"jsonrpc":"2.0"}"#);
/// assert_eq!(answered.as_deref(), Some(&b"1"[..]));
///
/// // The server dies: "call-2" gets an error response.
/// let unanswered = pending.fail_all(&EndCause {
///     exit: Some(Exit::Code(3)),
///     stderr: Some("Error: Cannot find module 'left-pad'"),
///     restarting: false,
/// });
/// assert_eq!(unanswered.ids().collect::<Vec<_>>(), [&br#""call-2""#[..]]);
/// let response = std::str::from_utf8(&unanswered.requests[0].response).unwrap();
/// assert!(response.starts_with(r#"{"jsonrpc":"2.0","id":"call-2","error":{"code":-32000,"#));
/// assert!(response.contains("exited with code 3 before it answered"));
/// assert!(response.contains(r#"Cannot find module 'left-pad'"#));
/// assert!(pending.is_empty());
/// ```
#[derive(Debug)]
pub struct PendingRequests {
    by_id: HashMap<Vec<u8>, Entry>,
    len: usize,
    max_tracked: usize,
    untracked: u64,
    sent: u64,
}

impl Default for PendingRequests {
    fn default() -> Self {
        Self::new(DEFAULT_MAX_TRACKED)
    }
}

impl PendingRequests {
    /// A tracker of at most `max_tracked` requests at a time.
    #[must_use]
    pub fn new(max_tracked: usize) -> Self {
        Self {
            by_id: HashMap::new(),
            len: 0,
            max_tracked,
            untracked: 0,
            sent: 0,
        }
    }

    /// Requests waiting for their answer.
    #[must_use]
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether no request is waiting.
    #[must_use]
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Outgoing messages not tracked: requests over the cap, and messages
    /// that could not be read (see [`Outgoing`]).
    #[must_use]
    pub fn untracked(&self) -> u64 {
        self.untracked
    }

    /// The ids of the requests waiting for their answer, as raw JSON text,
    /// in the order sent; nothing changes (see [`fail_all`](Self::fail_all)
    /// to answer them). For a report made before the stream's end is read:
    /// an answer the child wrote before it ended may still be on its way.
    ///
    /// ```
    /// use childwire_core::pending::PendingRequests;
    ///
    /// let mut pending = PendingRequests::default();
    /// pending.handle_outgoing(br#"{"jsonrpc":"2.0","id":"b","method":"ping"}"#);
    /// pending.handle_outgoing(br#"{"jsonrpc":"2.0","id":1,"method":"ping"}"#);
    /// assert_eq!(pending.ids(), [&br#""b""#[..], b"1"]);
    /// assert_eq!(pending.len(), 2);
    /// ```
    #[must_use]
    pub fn ids(&self) -> Vec<Bytes> {
        let mut sends: Vec<&Send> = self.by_id.values().flat_map(|entry| &entry.sends).collect();
        sends.sort_unstable_by_key(|send| send.order);
        sends.into_iter().map(|send| send.id.clone()).collect()
    }

    /// The most requests tracked at a time.
    #[must_use]
    pub fn max_tracked(&self) -> usize {
        self.max_tracked
    }

    /// A message `body` was sent to the child: a request is tracked.
    pub fn handle_outgoing(&mut self, body: &[u8]) -> Outgoing {
        self.record(body, 0, true).0
    }

    /// A message `body` is about to be sent to the receiver `tag` (a
    /// supervised child's generation): a request is tracked from now on,
    /// its send under way. The ticket, for a tracked request, goes back to
    /// [`handle_sent`](Self::handle_sent) once the send ended.
    ///
    /// ```
    /// use childwire_core::pending::{EndCause, PendingRequests, SendOutcome};
    ///
    /// let mut pending = PendingRequests::default();
    /// let (_, ticket) = pending.begin(br#"{"jsonrpc":"2.0","id":1,"method":"ping"}"#, 1);
    /// // Generation 1 dies while the send is under way: the request is answered.
    /// let unanswered = pending.fail_tag(1, &EndCause::default());
    /// assert_eq!(unanswered.requests.len(), 1);
    /// // The send then fails too: it is not to be sent again.
    /// assert_eq!(pending.handle_sent(&ticket.unwrap(), false), SendOutcome::AlreadyAnswered);
    /// ```
    pub fn begin(&mut self, body: &[u8], tag: u32) -> (Outgoing, Option<Ticket>) {
        self.record(body, tag, false)
    }

    /// The send of the request behind `ticket` ended: it went through
    /// (`delivered`), or it failed. See [`SendOutcome`].
    pub fn handle_sent(&mut self, ticket: &Ticket, delivered: bool) -> SendOutcome {
        let Some(entry) = self.by_id.get_mut(&ticket.key) else {
            return SendOutcome::AlreadyAnswered;
        };
        let Some(at) = entry
            .sends
            .iter()
            .position(|send| send.order == ticket.order)
        else {
            return SendOutcome::AlreadyAnswered;
        };
        if delivered {
            entry.sends[at].delivered = true;
            return SendOutcome::Delivered;
        }
        entry.sends.remove(at);
        if entry.sends.is_empty() {
            self.by_id.remove(&ticket.key);
        }
        self.len -= 1;
        SendOutcome::Forgotten
    }

    fn record(&mut self, body: &[u8], tag: u32, delivered: bool) -> (Outgoing, Option<Ticket>) {
        let scanner = scan(body);
        let raw = match (scanner.has_method(), scanner.has_id_member()) {
            (true, false) => return (Outgoing::Notification, None),
            (false, true) if scanner.id().is_some() => return (Outgoing::Response, None),
            (true, true) => scanner.id(),
            // Not one object, or an object that is no JSON-RPC message.
            _ => None,
        };
        // `null` and unusable ids have no key.
        let Some((key, raw)) = raw.and_then(|raw| Some((key(&raw)?, raw))) else {
            self.untracked = self.untracked.saturating_add(1);
            return (Outgoing::Unreadable, None);
        };
        if self.len >= self.max_tracked {
            self.untracked = self.untracked.saturating_add(1);
            return (Outgoing::Full, None);
        }
        let order = self.sent;
        self.sent += 1;
        self.len += 1;
        self.by_id
            .entry(key.clone())
            .or_insert_with(|| Entry { sends: Vec::new() })
            .sends
            .push(Send {
                order,
                id: raw,
                tag,
                delivered,
            });
        (Outgoing::Tracked, Some(Ticket { key, order }))
    }

    /// A message `body` came from the child. If it is the response to a
    /// pending request, that request is answered: returns its id as it was
    /// sent. Requests and notifications from the child answer nothing.
    pub fn handle_incoming(&mut self, body: &[u8]) -> Option<Bytes> {
        let scanner = scan(body);
        if scanner.has_method() {
            return None;
        }
        self.handle_answered(&scanner.id()?)
    }

    /// The response to the request with this id (raw JSON text, as an
    /// [`Oversized`] notice names it) arrived, or was
    /// dropped: it is no longer pending. Returns its id as it was sent, if
    /// it was pending.
    pub fn handle_answered(&mut self, raw_id: &[u8]) -> Option<Bytes> {
        let key = key(raw_id)?;
        let entry = self.by_id.get_mut(&key)?;
        let send = entry.sends.remove(0);
        if entry.sends.is_empty() {
            self.by_id.remove(&key);
        }
        self.len -= 1;
        Some(send.id)
    }

    /// A message `body` given to [`handle_outgoing`](Self::handle_outgoing),
    /// which took it as [`Outgoing::Tracked`], was not sent after all (the
    /// send failed): its request, the newest with its id, is forgotten.
    /// Returns whether one was.
    pub fn handle_unsent(&mut self, body: &[u8]) -> bool {
        let scanner = scan(body);
        if !scanner.has_method() {
            return false;
        }
        let Some(key) = scanner.id().and_then(|raw| key(&raw)) else {
            return false;
        };
        let Some(entry) = self.by_id.get_mut(&key) else {
            return false;
        };
        entry.sends.pop();
        if entry.sends.is_empty() {
            self.by_id.remove(&key);
        }
        self.len -= 1;
        true
    }

    /// A message from the child was dropped for its size (over `limit`
    /// bytes, the transport's `max_message_size`), as `notice` says. If it
    /// answered a pending request, that request is answered now, with an
    /// error; if it was the child's own request, the child is to be
    /// answered with one.
    ///
    /// ```
    /// use childwire_core::{Frame, LineDecoder};
    /// use childwire_core::pending::{OversizedAction, PendingRequests};
    ///
    /// let mut pending = PendingRequests::default();
    /// pending.handle_outgoing(br#"{"jsonrpc":"2.0","id":7,"method":"resources/read"}"#);
    /// let mut decoder = LineDecoder::new(16);
    /// decoder.handle_data(b"{\"jsonrpc\":\"2.0\",\"id\":7,\"result\":\"far too long\"}\n");
    /// let Some(Frame::Oversized(notice)) = decoder.poll_frame() else { panic!() };
    /// let OversizedAction::FailRequest(error) = pending.handle_oversized(&notice, 16) else {
    ///     panic!("its request fails")
    /// };
    /// assert!(error.starts_with(br#"{"jsonrpc":"2.0","id":7,"error":"#));
    /// assert!(pending.is_empty(), "answered");
    /// ```
    pub fn handle_oversized(&mut self, notice: &Oversized, limit: usize) -> OversizedAction {
        let Some(raw) = notice.json_rpc_id() else {
            return OversizedAction::Nothing;
        };
        let error = || oversized_error(raw, notice.len, limit);
        if self.handle_answered(raw).is_some() {
            return OversizedAction::FailRequest(error());
        }
        // A request has a `method`; a response has none. The notice keeps
        // the head of the line, where serializers put it.
        if notice.head.windows(8).any(|w| w == b"\"method\"") {
            return OversizedAction::AnswerPeer(error());
        }
        OversizedAction::Nothing
    }

    /// The child ended (or is being restarted) for `cause`: every pending
    /// request gets an error response, in the order sent, and nothing is
    /// pending any more. The untracked count is reported and starts over.
    pub fn fail_all(&mut self, cause: &EndCause<'_>) -> Unanswered {
        self.fail_where(cause, |_| true)
    }

    /// The receiver `tag` ended (a supervised child's generation): every
    /// request sent or being sent to it gets an error response, in the
    /// order sent, and is no longer pending. Requests of other tags stay.
    pub fn fail_tag(&mut self, tag: u32, cause: &EndCause<'_>) -> Unanswered {
        self.fail_where(cause, |send| send.tag == tag)
    }

    fn fail_where(&mut self, cause: &EndCause<'_>, ended: impl Fn(&Send) -> bool) -> Unanswered {
        let mut failed: Vec<Send> = Vec::new();
        self.by_id.retain(|_, entry| {
            entry.sends.retain(|send| {
                if ended(send) {
                    failed.push(send.clone());
                    false
                } else {
                    true
                }
            });
            !entry.sends.is_empty()
        });
        failed.sort_unstable_by_key(|send| send.order);
        self.len -= failed.len();
        let requests = failed
            .into_iter()
            .map(|send| UnansweredRequest {
                response: unanswered_error(&send.id, cause),
                id: send.id,
            })
            .collect();
        Unanswered {
            requests,
            untracked: std::mem::take(&mut self.untracked),
        }
    }
}

fn scan(body: &[u8]) -> IdScanner {
    let mut scanner = IdScanner::new();
    scanner.feed(body);
    scanner
}

/// A JSON-RPC error response to request `id` (raw JSON text) that will not
/// be answered because of `cause`: compact JSON, no newline. Its code is
/// [`UNANSWERED_ERROR_CODE`]; its message says why in words; its data
/// holds the same as fields: `exit` (words), `code` or `signal`, `stderr`,
/// `restarting`.
///
/// ```
/// use childwire_core::Exit;
/// use childwire_core::pending::{EndCause, unanswered_error};
///
/// let cause = EndCause { exit: Some(Exit::Signal(9)), stderr: None, restarting: true };
/// assert_eq!(
///     unanswered_error(b"7", &cause),
///     &br#"{"jsonrpc":"2.0","id":7,"error":{"code":-32000,"message":"the child process was killed by SIGKILL before it answered; it is being restarted, and the request may be sent again","data":{"exit":"killed by SIGKILL","signal":9,"restarting":true}}}"#[..]
/// );
/// ```
#[must_use]
pub fn unanswered_error(id: &[u8], cause: &EndCause<'_>) -> Bytes {
    let id = if id.is_empty() { &b"null"[..] } else { id };
    let ended = match cause.exit {
        Some(exit) => exit.to_string(),
        None => "ended".to_owned(),
    };
    let verb = if matches!(cause.exit, Some(Exit::Signal(_))) {
        "was "
    } else {
        ""
    };
    let mut message = format!("the child process {verb}{ended} before it answered");
    if let Some(line) = cause.stderr {
        message.push_str("; its stderr says: ");
        message.push_str(line);
    }
    if cause.restarting {
        message.push_str("; it is being restarted, and the request may be sent again");
    }
    let mut out = Vec::with_capacity(200 + id.len() + message.len());
    out.extend_from_slice(br#"{"jsonrpc":"2.0","id":"#);
    out.extend_from_slice(id);
    // Writing to a Vec cannot fail.
    let _ = write!(
        out,
        r#","error":{{"code":{UNANSWERED_ERROR_CODE},"message":"#
    );
    json_string(&mut out, &message);
    out.extend_from_slice(br#","data":{"exit":"#);
    json_string(&mut out, &ended);
    let _ = match cause.exit {
        Some(Exit::Code(code)) => write!(out, r#","code":{code}"#),
        Some(Exit::Signal(signal)) => write!(out, r#","signal":{signal}"#),
        None => Ok(()),
    };
    if let Some(line) = cause.stderr {
        out.extend_from_slice(br#","stderr":"#);
        json_string(&mut out, line);
    }
    let _ = write!(out, r#","restarting":{}}}}}}}"#, cause.restarting);
    Bytes::from(out)
}

/// The key an id (raw JSON text, as the scanner returns it) is matched by:
/// a string's decoded characters, or a number's text as written. `None`
/// for what cannot be an id here.
pub(crate) fn key(raw: &[u8]) -> Option<Vec<u8>> {
    match raw.first()? {
        b'"' => {
            let mut key = vec![b's'];
            key.extend_from_slice(decode_string(raw)?.as_bytes());
            Some(key)
        }
        b'-' | b'0'..=b'9' => number_key(raw),
        _ => None,
    }
}

/// A JSON number's value, spelled one way: `n`, the sign, the significant
/// digits (no leading or trailing zeros) and the decimal exponent of the
/// last one; so `1`, `1.0`, `10e-1` and `0.1E1` give the same key. Zero is
/// `n0` whatever its sign. `None` if `raw` is not a JSON number, or its
/// exponent is beyond any sane id.
fn number_key(raw: &[u8]) -> Option<Vec<u8>> {
    let (negative, rest) = match raw.split_first()? {
        (b'-', rest) => (true, rest),
        _ => (false, raw),
    };
    let int_len = rest.iter().take_while(|b| b.is_ascii_digit()).count();
    if int_len == 0 || (int_len > 1 && rest[0] == b'0') {
        return None;
    }
    let (int, rest) = rest.split_at(int_len);
    let (frac, rest) = match rest.split_first() {
        Some((b'.', rest)) => {
            let len = rest.iter().take_while(|b| b.is_ascii_digit()).count();
            if len == 0 {
                return None;
            }
            rest.split_at(len)
        }
        _ => (&rest[..0], rest),
    };
    let exponent: i64 = match rest.split_first() {
        None => 0,
        Some((b'e' | b'E', rest)) => {
            let (minus, digits) = match rest.split_first()? {
                (b'-', digits) => (true, digits),
                (b'+', digits) => (false, digits),
                _ => (false, rest),
            };
            if digits.is_empty() || digits.len() > 9 || !digits.iter().all(u8::is_ascii_digit) {
                return None;
            }
            let value: i64 = std::str::from_utf8(digits).ok()?.parse().ok()?;
            if minus { -value } else { value }
        }
        Some(_) => return None,
    };
    let digits: Vec<u8> = int.iter().chain(frac).copied().collect();
    let first = digits.iter().position(|&d| d != b'0');
    let Some(first) = first else {
        return Some(b"n0".to_vec());
    };
    let last = digits.iter().rposition(|&d| d != b'0').unwrap_or(first);
    // The value is digits × 10^(exponent − frac.len()); the last
    // significant digit sits (digits.len() − 1 − last) places before the end.
    let trailing = i64::try_from(digits.len() - 1 - last).ok()?;
    let scale = exponent - i64::try_from(frac.len()).ok()? + trailing;
    let mut key = vec![b'n', if negative { b'-' } else { b'+' }];
    key.extend_from_slice(&digits[first..=last]);
    key.push(b'e');
    key.extend_from_slice(scale.to_string().as_bytes());
    Some(key)
}

/// The characters of a JSON string (quotes included in `raw`), escapes
/// decoded; `None` if it is not a valid one.
fn decode_string(raw: &[u8]) -> Option<String> {
    let inner = std::str::from_utf8(raw.strip_prefix(b"\"")?.strip_suffix(b"\"")?).ok()?;
    let mut out = String::with_capacity(inner.len());
    let mut chars = inner.chars();
    while let Some(c) = chars.next() {
        if c != '\\' {
            out.push(c);
            continue;
        }
        out.push(match chars.next()? {
            '"' => '"',
            '\\' => '\\',
            '/' => '/',
            'b' => '\u{8}',
            'f' => '\u{c}',
            'n' => '\n',
            'r' => '\r',
            't' => '\t',
            'u' => {
                let high = hex4(&mut chars)?;
                if (0xD800..0xDC00).contains(&high) {
                    if chars.next()? != '\\' || chars.next()? != 'u' {
                        return None;
                    }
                    let low = hex4(&mut chars)?;
                    if !(0xDC00..0xE000).contains(&low) {
                        return None;
                    }
                    char::from_u32(0x10000 + ((high - 0xD800) << 10) + (low - 0xDC00))?
                } else {
                    char::from_u32(high)?
                }
            }
            _ => return None,
        });
    }
    Some(out)
}

fn hex4(chars: &mut std::str::Chars<'_>) -> Option<u32> {
    let mut value = 0;
    for _ in 0..4 {
        value = value << 4 | chars.next()?.to_digit(16)?;
    }
    Some(value)
}
