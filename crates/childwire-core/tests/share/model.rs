//! A reference model of the share: clients and a server that keep their
//! own books, driven by operations decoded from bytes, checking after every
//! operation what the share must hold:
//!
//! - every answer reaches exactly the client that asked, with its own id
//!   (the server writes the request's marker `k` into each answer, and the
//!   client checks it against the request that id names);
//! - no message of one client reaches another: progress carries the marker
//!   of the request it is for, a server request reaches one client;
//! - the server sees each of its ids once, cancellations only for the
//!   requests of the client that sent them (or of one that left), at most
//!   one `initialize` at a time and one `notifications/initialized`;
//! - every request is answered once, by the server or by the share's
//!   error; at the end (the server ends), none is left unanswered.
//!
//! Shared by the core's property test (`tests/share.rs`) and the fuzz
//! target (`fuzz/fuzz_targets/share.rs`, which includes this file).

use std::collections::{BTreeMap, HashMap, HashSet};
use std::time::{Duration, Instant};

use childwire_core::pending::EndCause;
use childwire_core::share::{ClientId, Event, ReinitStep, Share, ShareConfig};
use serde_json::{Value, json};

const SLOTS: usize = 4;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum State {
    /// Sent; not answered by the server yet.
    Pending,
    /// The server answered; the answer is on its way to the client.
    Answered,
    /// The client cancelled it while the server had it: no answer may come.
    Cancelled,
    /// The client has its answer.
    Done,
    /// Its client left.
    Gone,
}

#[derive(Debug)]
struct Req {
    client: ClientId,
    id: Value,
    token: Option<Value>,
    init: bool,
    state: State,
    /// The share id the server knows it by, once forwarded.
    sid: Option<u64>,
}

#[derive(Debug, Default)]
struct Slot {
    client: Option<ClientId>,
    /// Its requests waiting for an answer: id text to marker.
    ids: HashMap<String, u64>,
    /// Server requests it read and may answer.
    asked: HashSet<String>,
    /// Parse errors it is owed.
    garbage: u32,
    /// The last broadcast sequence number it read.
    last_note: u64,
}

#[derive(Debug)]
struct Ask {
    /// Delivered to this client.
    to: Option<ClientId>,
    /// The client whose request it names, if any.
    named: Option<ClientId>,
    answered: bool,
}

/// A violation of the share's contract, in words.
pub(crate) type Violation = String;

struct Model {
    share: Share,
    now: Instant,
    slots: [Slot; SLOTS],
    reqs: HashMap<u64, Req>,
    next_k: u64,
    /// The server's books: requests it has (share id to marker).
    server: BTreeMap<u64, u64>,
    seen_ids: HashSet<u64>,
    asks: BTreeMap<String, Ask>,
    next_ask: u64,
    note_seq: u64,
    initialized: u32,
    /// The server answered an `initialize` with a result.
    init_done: bool,
    stopped: bool,
    /// Clients that left in the current operation (cancellations for
    /// their requests are expected).
    leaving: HashSet<ClientId>,
    /// The client whose own cancellation of this share id is expected.
    cancelling: Option<(ClientId, u64)>,
    /// Requests for the server in this operation are reported unsent.
    unsent: bool,
}

/// Runs the operations `ops` encodes, then ends the server and drains
/// every client.
pub(crate) fn run(ops: &[u8]) -> Result<(), Violation> {
    let now = Instant::now();
    let mut config = ShareConfig::default();
    config.max_clients = SLOTS;
    config.max_in_flight = 8;
    config.client_queue_bytes = 1500;
    config.linger = Duration::from_secs(1);
    let mut model = Model {
        share: Share::new(config, now),
        now,
        slots: Default::default(),
        reqs: HashMap::new(),
        next_k: 1,
        server: BTreeMap::new(),
        seen_ids: HashSet::new(),
        asks: BTreeMap::new(),
        next_ask: 1,
        note_seq: 0,
        initialized: 0,
        init_done: false,
        stopped: false,
        leaving: HashSet::new(),
        cancelling: None,
        unsent: false,
    };
    let mut bytes = ops.iter().copied();
    while let Some(op) = bytes.next() {
        let mut arg = || bytes.next().unwrap_or(0);
        model.step(op, &mut arg)?;
    }
    model.finish()
}

impl Model {
    fn step(&mut self, op: u8, arg: &mut impl FnMut() -> u8) -> Result<(), Violation> {
        self.leaving.clear();
        self.cancelling = None;
        self.unsent = false;
        match op % 18 {
            0 | 1 => self.join()?,
            2 => {
                let slot = usize::from(arg()) % SLOTS;
                if let Some(client) = self.slots[slot].client {
                    self.share.leave(client, self.now);
                    self.left(slot);
                }
            }
            3..=5 => {
                let (slot, how) = (usize::from(arg()) % SLOTS, arg());
                self.request(slot, how, false);
            }
            6 => {
                let (slot, how) = (usize::from(arg()) % SLOTS, arg());
                self.request(slot, how, true);
            }
            7 => {
                let slot = usize::from(arg()) % SLOTS;
                self.client_send(
                    slot,
                    json!({"jsonrpc": "2.0", "method": "notifications/initialized"}),
                );
            }
            8 => {
                let (slot, target, pick) = (
                    usize::from(arg()) % SLOTS,
                    usize::from(arg()) % SLOTS,
                    arg(),
                );
                self.cancel(slot, target, pick);
            }
            9 => {
                let (slot, pick, own) = (usize::from(arg()) % SLOTS, arg(), arg());
                self.answer_ask(slot, pick, own % 2 == 0);
            }
            10 => {
                let slot = usize::from(arg()) % SLOTS;
                if let Some(client) = self.slots[slot].client {
                    self.slots[slot].garbage += 1;
                    self.share.handle_client(self.now, client, b"{not json");
                }
            }
            11 | 12 => {
                let slot = usize::from(arg()) % SLOTS;
                self.drain(slot)?;
            }
            13 => {
                let (pick, error) = (arg(), arg());
                self.server_answer(pick, error % 4 == 0);
            }
            14 => {
                let pick = arg();
                self.server_progress(pick);
            }
            15 => {
                self.note_seq += 1;
                let note = json!({"jsonrpc": "2.0", "method": "notifications/message",
                    "params": {"seq": self.note_seq, "pad": "x".repeat(usize::from(arg()))}});
                self.server_send(&note);
            }
            16 => {
                let (kind, pick) = (arg(), arg());
                self.server_request(kind, pick);
            }
            _ => match arg() % 6 {
                0 => {
                    self.now += Duration::from_millis(u64::from(arg()));
                    self.share.handle_timeout(self.now);
                }
                1 => self.server_end(arg() % 2 == 0)?,
                2 => {
                    // The server gives up one of its requests.
                    let pick = usize::from(arg());
                    let open: Vec<String> = self
                        .asks
                        .iter()
                        .filter(|(_, a)| !a.answered)
                        .map(|(id, _)| id.clone())
                        .collect();
                    if let Some(id) = open.get(pick % open.len().max(1)) {
                        let id: Value = serde_json::from_str(id).unwrap();
                        self.server_send(
                            &json!({"jsonrpc": "2.0", "method": "notifications/cancelled",
                            "params": {"requestId": id}}),
                        );
                        let text = id.to_string();
                        self.asks.remove(&text);
                    }
                }
                3 => self.server_send(&json!({"jsonrpc": "2.0", "id": "p", "method": "ping"})),
                4 => {
                    // The next requests for the server cannot be sent.
                    self.unsent = true;
                    let (slot, how) = (usize::from(arg()) % SLOTS, arg());
                    self.request(slot, how, how % 7 == 0);
                }
                _ => self.server_oversized(arg()),
            },
        }
        self.settle()
    }

    fn slot_of(&self, client: ClientId) -> Option<usize> {
        self.slots.iter().position(|s| s.client == Some(client))
    }

    fn join(&mut self) -> Result<(), Violation> {
        let Some(slot) = self.slots.iter().position(|s| s.client.is_none()) else {
            return Ok(());
        };
        match self.share.join(self.now) {
            Ok(client) => {
                self.slots[slot] = Slot {
                    client: Some(client),
                    ..Slot::default()
                };
            }
            Err(err) if !self.stopped && !self.share.is_ended() => {
                return Err(format!("a join was refused with room: {err}"));
            }
            Err(_) => {}
        }
        Ok(())
    }

    /// `slot`'s client is gone: no obligations remain to it.
    fn left(&mut self, slot: usize) {
        let Some(client) = self.slots[slot].client.take() else {
            return;
        };
        self.leaving.insert(client);
        for req in self.reqs.values_mut() {
            if req.client == client && matches!(req.state, State::Pending | State::Answered) {
                req.state = State::Gone;
            }
        }
        self.slots[slot] = Slot::default();
    }

    fn client_send(&mut self, slot: usize, message: Value) {
        if let Some(client) = self.slots[slot].client {
            self.share
                .handle_client(self.now, client, message.to_string().as_bytes());
        }
    }

    fn request(&mut self, slot: usize, how: u8, init: bool) {
        let Some(client) = self.slots[slot].client else {
            return;
        };
        // An id this client has no request waiting on.
        let id = (0..8u8)
            .map(|n| {
                let n = (u16::from(n) + u16::from(how)) % 8;
                if how % 2 == 0 {
                    json!(n)
                } else {
                    json!(format!("s{n}"))
                }
            })
            .find(|id| !self.slots[slot].ids.contains_key(&id.to_string()));
        let Some(id) = id else {
            return;
        };
        let k = self.next_k;
        self.next_k += 1;
        let token = (how % 3 == 0).then(|| json!(format!("t{k}")));
        let message = if init {
            let version = if how % 5 == 0 { "v2" } else { "v1" };
            let caps = if how % 2 == 0 {
                json!({"sampling": {}})
            } else {
                json!({})
            };
            json!({"jsonrpc": "2.0", "id": id, "method": "initialize",
                "params": {"protocolVersion": version, "capabilities": caps, "k": k}})
        } else {
            let mut params = json!({"k": k});
            if let Some(token) = &token {
                params["_meta"] = json!({"progressToken": token});
            }
            json!({"jsonrpc": "2.0", "id": id, "method": "tools/call", "params": params})
        };
        self.slots[slot].ids.insert(id.to_string(), k);
        self.reqs.insert(
            k,
            Req {
                client,
                id,
                token: if init { None } else { token },
                init,
                state: State::Pending,
                sid: None,
            },
        );
        self.share
            .handle_client(self.now, client, message.to_string().as_bytes());
    }

    fn cancel(&mut self, slot: usize, target: usize, pick: u8) {
        let Some(client) = self.slots[slot].client else {
            return;
        };
        let mut ids: Vec<&String> = self.slots[target].ids.keys().collect();
        ids.sort();
        let Some(id) = ids
            .get(usize::from(pick) % ids.len().max(1))
            .map(|id| (*id).clone())
        else {
            return;
        };
        // Whose request the id names is the share's business: it is the
        // sender's own when the sender has a request with that id.
        if let Some(&k) = self.slots[slot].ids.get(&id) {
            let req = &self.reqs[&k];
            if req.state == State::Pending && !req.init {
                if let Some(sid) = req.sid {
                    self.cancelling = Some((client, sid));
                }
            }
        }
        let id: Value = serde_json::from_str(&id).unwrap();
        self.client_send(
            slot,
            json!({"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": id}}),
        );
    }

    fn answer_ask(&mut self, slot: usize, pick: u8, own: bool) {
        let candidates: Vec<String> = if own {
            let mut asked: Vec<String> = self.slots[slot].asked.iter().cloned().collect();
            asked.sort();
            asked
        } else {
            // One another client read: this one must not be able to answer it.
            let me = self.slots[slot].client;
            self.asks
                .iter()
                .filter(|(_, ask)| ask.to.is_some() && ask.to != me)
                .map(|(id, _)| id.clone())
                .collect()
        };
        let Some(id) = candidates
            .get(usize::from(pick) % candidates.len().max(1))
            .cloned()
        else {
            return;
        };
        self.slots[slot].asked.remove(&id);
        let id: Value = serde_json::from_str(&id).unwrap();
        let from = self.slots[slot].client;
        self.client_send(
            slot,
            json!({"jsonrpc": "2.0", "id": id, "result": {"from": from.map(ClientId::get)}}),
        );
    }

    fn server_send(&mut self, message: &Value) {
        self.share
            .handle_server(self.now, message.to_string().as_bytes());
    }

    fn server_answer(&mut self, pick: u8, error: bool) {
        let sids: Vec<u64> = self.server.keys().copied().collect();
        let Some(&sid) = sids.get(usize::from(pick) % sids.len().max(1)) else {
            return;
        };
        let k = self.server.remove(&sid).unwrap();
        let req = self.reqs.get_mut(&k).unwrap();
        if req.state == State::Pending {
            req.state = State::Answered;
        }
        let message = if error {
            json!({"jsonrpc": "2.0", "id": sid, "error": {"code": -1, "message": "no", "data": {"k": k}}})
        } else if req.init {
            self.init_done = true;
            json!({"jsonrpc": "2.0", "id": sid, "result": {"protocolVersion": "v1", "k": k}})
        } else {
            json!({"jsonrpc": "2.0", "id": sid, "result": {"k": k}})
        };
        self.server_send(&message);
    }

    /// The server's answer to one of its requests is over the size limit:
    /// the transport drops it and says so.
    fn server_oversized(&mut self, pick: u8) {
        let sids: Vec<u64> = self.server.keys().copied().collect();
        let Some(&sid) = sids.get(usize::from(pick) % sids.len().max(1)) else {
            return;
        };
        let k = self.server.remove(&sid).unwrap();
        let req = self.reqs.get_mut(&k).unwrap();
        if req.state == State::Pending {
            req.state = State::Answered;
        }
        let mut decoder = childwire_core::LineDecoder::new(64);
        let line = json!({"jsonrpc": "2.0", "id": sid, "result": {"k": k, "pad": "x".repeat(80)}});
        decoder.handle_data(format!("{line}\n").as_bytes());
        let Some(childwire_core::Frame::Oversized(notice)) = decoder.poll_frame() else {
            unreachable!("a line over 64 bytes");
        };
        self.share.handle_server_oversized(self.now, &notice, 64);
    }

    fn server_progress(&mut self, pick: u8) {
        let with_token: Vec<(u64, u64)> = self
            .server
            .iter()
            .filter(|(_, k)| self.reqs[k].token.is_some())
            .map(|(sid, k)| (*sid, *k))
            .collect();
        let Some(&(sid, k)) = with_token.get(usize::from(pick) % with_token.len().max(1)) else {
            return;
        };
        self.server_send(
            &json!({"jsonrpc": "2.0", "method": "notifications/progress",
            "params": {"progressToken": sid, "progress": 1, "k": k}}),
        );
    }

    fn server_request(&mut self, kind: u8, pick: u8) {
        let id = format!("a{}", self.next_ask);
        self.next_ask += 1;
        let method = if kind % 2 == 0 {
            "sampling/createMessage"
        } else {
            "x/y"
        };
        let mut params = json!({});
        let mut named = None;
        if kind % 3 == 0 {
            let with_token: Vec<u64> = self
                .server
                .iter()
                .filter(|(_, k)| self.reqs[k].token.is_some())
                .map(|(sid, _)| *sid)
                .collect();
            if let Some(&sid) = with_token.get(usize::from(pick) % with_token.len().max(1)) {
                params["_meta"] = json!({"progressToken": sid});
                let client = self.reqs[&self.server[&sid]].client;
                named = self.slot_of(client).map(|_| client);
            }
        }
        self.asks.insert(
            json!(id).to_string(),
            Ask {
                to: None,
                named,
                answered: false,
            },
        );
        self.server_send(&json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params}));
    }

    fn server_end(&mut self, restarting: bool) -> Result<(), Violation> {
        for (_, k) in std::mem::take(&mut self.server) {
            let req = self.reqs.get_mut(&k).unwrap();
            if req.state == State::Pending {
                // The share answers it now.
                req.state = State::Answered;
            }
        }
        self.asks.clear();
        for slot in &mut self.slots {
            slot.asked.clear();
        }
        let cause = EndCause {
            exit: None,
            stderr: None,
            restarting,
        };
        self.share.handle_server_ended(self.now, &cause, restarting);
        if restarting && self.init_done {
            // The new server is run through the first `initialize` and
            // answers it: the answer is the share's, no client's.
            if self.share.handle_reinit_start(self.now).is_none() {
                return Err("no initialize for the restarted server".into());
            }
            self.server_send(
                &json!({"jsonrpc": "2.0", "id": "childwire-share-reinit", "result": {}}),
            );
            match self.share.poll_reinit(self.now) {
                Some(ReinitStep::Answered(_)) => {}
                other => return Err(format!("the re-initialization's answer: {other:?}")),
            }
        }
        if !restarting {
            self.stopped = true;
        }
        Ok(())
    }

    /// The share's output after an operation: events, then what reached
    /// the server.
    fn settle(&mut self) -> Result<(), Violation> {
        self.settle_events()?;
        self.settle_server()
    }

    fn settle_events(&mut self) -> Result<(), Violation> {
        while let Some(event) = self.share.poll_event() {
            match event {
                Event::Disconnected { client, .. } => {
                    let slot = self
                        .slot_of(client)
                        .ok_or("an unknown client disconnected")?;
                    self.left(slot);
                }
                Event::StopServer => self.stopped = true,
                _ => {}
            }
        }
        Ok(())
    }

    fn settle_server(&mut self) -> Result<(), Violation> {
        while let Some(bytes) = self.share.poll_server() {
            let message: Value = serde_json::from_slice(&bytes)
                .map_err(|err| format!("the server got no JSON: {err}"))?;
            if self.unsent && message.get("method").is_some() && message.get("id").is_some() {
                // Its client gets an error instead of an answer.
                self.share
                    .handle_unsent(self.now, &bytes, "the server is down");
                self.settle_events()?;
                continue;
            }
            self.at_server(&message)?;
        }
        // Every request of a client that left, and a cancelled one, was
        // cancelled at the server.
        for (sid, k) in &self.server {
            let req = &self.reqs[k];
            if self.leaving.contains(&req.client) && !req.init {
                return Err(format!(
                    "request {k} of a departed client was not cancelled (id {sid})"
                ));
            }
            if self.cancelling.is_some_and(|(_, s)| s == *sid) {
                return Err(format!(
                    "request {k}'s cancellation did not reach the server"
                ));
            }
        }
        Ok(())
    }

    fn at_server(&mut self, message: &Value) -> Result<(), Violation> {
        let method = message["method"].as_str();
        match (method, message.get("id")) {
            (Some(method), Some(id)) => {
                let sid = id
                    .as_u64()
                    .ok_or(format!("the server got a request id {id} it was not given"))?;
                if !self.seen_ids.insert(sid) {
                    return Err(format!("the server saw id {sid} twice"));
                }
                let k = message["params"]["k"]
                    .as_u64()
                    .ok_or("a request with no marker")?;
                let init_there = self.server.values().any(|k| self.reqs[k].init);
                let req = self.reqs.get_mut(&k).ok_or("a request no client sent")?;
                if req.state != State::Pending || req.sid.is_some() {
                    return Err(format!("request {k} reached the server twice or late"));
                }
                if (method == "initialize") != req.init {
                    return Err("the method changed".into());
                }
                if req.init && init_there {
                    return Err("two initializes at the server at once".into());
                }
                if let Some(token) = message["params"]["_meta"].get("progressToken") {
                    if token.as_u64() != Some(sid) {
                        return Err(format!("token {token} is not the share's for {sid}"));
                    }
                }
                req.sid = Some(sid);
                self.server.insert(sid, k);
            }
            (Some("notifications/cancelled"), None) => {
                let sid = message["params"]["requestId"]
                    .as_u64()
                    .ok_or("a cancellation of no share id")?;
                let k = self
                    .server
                    .remove(&sid)
                    .ok_or(format!("a cancellation of {sid}, not at the server"))?;
                let req = self.reqs.get_mut(&k).unwrap();
                let own = self.cancelling == Some((req.client, sid));
                if !own && !self.leaving.contains(&req.client) {
                    return Err(format!("request {k} was cancelled by someone else"));
                }
                if req.init {
                    return Err("initialize was cancelled".into());
                }
                if own {
                    req.state = State::Cancelled;
                    let (client, id) = (req.client, req.id.to_string());
                    let slot = self.slot_of(client).unwrap();
                    self.slots[slot].ids.remove(&id);
                }
            }
            (Some("notifications/initialized"), None) => {
                self.initialized += 1;
                if self.initialized > 1 {
                    return Err("notifications/initialized reached the server twice".into());
                }
            }
            (Some(_), None) => {}
            (None, Some(id)) => {
                if id == "p" {
                    return Ok(());
                }
                let text = id.to_string();
                let ask = self
                    .asks
                    .get_mut(&text)
                    .ok_or(format!("an answer to {text}, not asked"))?;
                if ask.answered {
                    return Err(format!("{text} was answered twice"));
                }
                ask.answered = true;
                // A client's answer says who sent it: the one asked.
                if let Some(from) = message["result"]["from"].as_u64() {
                    if ask.to.map(ClientId::get) != Some(from) {
                        return Err(format!(
                            "{text} was answered by client {from}, not the one asked"
                        ));
                    }
                }
            }
            (None, None) => return Err(format!("the server got {message}")),
        }
        Ok(())
    }

    fn drain(&mut self, slot: usize) -> Result<(), Violation> {
        let Some(client) = self.slots[slot].client else {
            return Ok(());
        };
        while let Some(message) = self.share.poll_client(self.now, client) {
            let message: Value = serde_json::from_slice(&message)
                .map_err(|err| format!("{client} got no JSON: {err}"))?;
            self.at_client(slot, client, &message)?;
        }
        Ok(())
    }

    fn at_client(
        &mut self,
        slot: usize,
        client: ClientId,
        message: &Value,
    ) -> Result<(), Violation> {
        let method = message["method"].as_str();
        let id = message.get("id");
        match (method, id) {
            (None, Some(Value::Null)) => {
                if self.slots[slot].garbage == 0 {
                    return Err(format!(
                        "{client} got an error for nothing it sent: {message}"
                    ));
                }
                self.slots[slot].garbage -= 1;
            }
            (None, Some(id)) => {
                let text = id.to_string();
                let k = self.slots[slot].ids.remove(&text).ok_or(format!(
                    "{client} got an answer to {text}, which it is not waiting for: {message}"
                ))?;
                let req = self.reqs.get_mut(&k).unwrap();
                if req.client != client || !matches!(req.state, State::Pending | State::Answered) {
                    return Err(format!(
                        "request {k} ({:?}) answered to {client}",
                        req.state
                    ));
                }
                req.state = State::Done;
                let marker = message["result"]
                    .get("k")
                    .or_else(|| message["error"]["data"].get("k"));
                if let Some(marker) = marker {
                    // An initialize answered from the first one's answer
                    // carries that one's marker.
                    if !req.init && marker.as_u64() != Some(k) {
                        return Err(format!("{client} got request {marker}'s answer for {k}"));
                    }
                }
            }
            (Some("notifications/progress"), None) => {
                let k = message["params"]["k"]
                    .as_u64()
                    .ok_or("progress with no marker")?;
                let req = &self.reqs[&k];
                if req.client != client {
                    return Err(format!("progress of request {k} reached {client}"));
                }
                if Some(&message["params"]["progressToken"]) != req.token.as_ref() {
                    return Err(format!(
                        "progress of {k} with a token not its own: {message}"
                    ));
                }
            }
            (Some("notifications/cancelled"), None) => {
                let text = message["params"]["requestId"].to_string();
                // The server's request it held (given up, or the server ended).
                if !self.slots[slot].asked.remove(&text) && !text.starts_with("\"a") {
                    return Err(format!("{client} got a cancellation of {text}"));
                }
            }
            (Some("notifications/message"), None) => {
                let seq = message["params"]["seq"].as_u64().unwrap_or(0);
                if seq <= self.slots[slot].last_note {
                    return Err(format!(
                        "{client} got broadcast {seq} twice or out of order"
                    ));
                }
                self.slots[slot].last_note = seq;
            }
            (Some(_), Some(id)) => {
                let text = id.to_string();
                let live = |named: ClientId| self.slots.iter().any(|s| s.client == Some(named));
                let named_other = self
                    .asks
                    .get(&text)
                    .and_then(|ask| ask.named)
                    .is_some_and(|named| named != client && live(named));
                let Some(ask) = self.asks.get_mut(&text) else {
                    // Given up by the server before it was read.
                    return Ok(());
                };
                if ask.to.is_some() {
                    return Err(format!("server request {text} reached two clients"));
                }
                if named_other {
                    return Err(format!(
                        "server request {text} names another client's request"
                    ));
                }
                ask.to = Some(client);
                self.slots[slot].asked.insert(text);
            }
            _ => return Err(format!("{client} got {message}")),
        }
        Ok(())
    }

    fn finish(mut self) -> Result<(), Violation> {
        self.leaving.clear();
        self.cancelling = None;
        self.server_end(false)?;
        self.settle()?;
        for slot in 0..SLOTS {
            self.drain(slot)?;
        }
        for (k, req) in &self.reqs {
            if matches!(req.state, State::Pending | State::Answered) {
                return Err(format!("request {k} ({req:?}) was never answered"));
            }
        }
        Ok(())
    }
}
