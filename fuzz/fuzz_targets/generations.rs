//! Fuzzing of `Generations`, a supervised child's restart, request tracking
//! and re-sending, against a model of what a request's answer can be: sends
//! of requests and notifications in any number at once, their sends ending
//! in any order (through, or refused by a dying generation), the child
//! answering any request it got, deaths, restarts, failed spawns and
//! initializations, the caller's stop, and time.
//!
//! Checked: every request is answered exactly once: by its generation's
//! response, by the tracker's error response, or by its own send's failure
//! (a refused or failed send, returned to its caller); never twice, and, once
//! everything has ended, never not at all. An error response is only ever
//! made for a request sent to the generation that died. A send is told to
//! wait only while no generation runs, and is refused only once the
//! supervision is over or stopped (or, with `WhileDown::Fail`, down), or
//! once it has waited its limit, counted from when it first waited however
//! often it asks again.

#![no_main]

use std::collections::{HashMap, HashSet, VecDeque};
use std::time::{Duration, Instant};

use arbitrary::Arbitrary;
use childwire_core::{
    AfterSend, Closed, EndedBy, Exit, ExitReport, GenerationEvent, Generations, GenerationsConfig,
    Message, Received, SendStep, Ticket, WhileDown,
};
use libfuzzer_sys::fuzz_target;

#[derive(Debug, Arbitrary)]
struct Input {
    fail_while_down: bool,
    /// The idle stop, in ms (0: off).
    idle_ms: u8,
    max_tracked: u8,
    budget: u8,
    /// How long a send may wait for a generation, in ms (0: no limit).
    wait_ms: u8,
    ops: Vec<Op>,
}

#[derive(Debug, Arbitrary)]
enum Op {
    /// A new request is sent (by a task of its own).
    Request,
    /// A notification is sent.
    Notification,
    /// The send of the `n`th in flight ends: through, or refused.
    SendEnds(u8, bool),
    /// A waiting send asks again (a generation started, or its timer).
    Retry(u8),
    /// The running generation answers the `n`th request it got.
    Answer(u8),
    /// The running generation dies (or ends on its own).
    Dies(bool),
    /// The next generation's spawn: it fails, or it starts.
    Spawn(bool),
    /// Its initialization ends: through, or failed.
    Initialized(bool),
    /// The clock moves.
    Advance(u16),
    /// The caller ends the supervision.
    Stop,
    /// The running generation is found hung: its owner kills it.
    Hung,
}

/// A send under way.
#[derive(Debug)]
struct InFlight {
    id: u64,
    generation: u32,
    ticket: Option<Ticket>,
    /// When the send first waited, if it did.
    since: Option<Instant>,
}

struct Model {
    gens: Generations,
    now: Instant,
    fail_while_down: bool,
    wait_limit: Option<Duration>,
    next_id: u64,
    /// Sends under way, and sends waiting for a generation.
    in_flight: Vec<InFlight>,
    waiting: Vec<(u64, Instant)>,
    /// Requests a generation got: (id, generation).
    delivered: Vec<(u64, u32)>,
    /// How each request was answered, counted.
    answers: HashMap<u64, u32>,
    /// Requests sent while the tracker was full: nothing answers them if
    /// their generation dies (the caller was told).
    untracked: HashSet<u64>,
    /// The generation that runs, as the model knows it (spawned, initialized).
    running: Option<u32>,
    starting: Option<u32>,
    /// A generation being stopped because it was idle.
    stopping: Option<u32>,
    /// Since an idle stop, until the next generation is initialized: sends
    /// wait whatever `WhileDown` says.
    resting: bool,
    /// Whether each generation's report must say it was killed for hanging,
    /// in the order they end.
    hung_marks: VecDeque<bool>,
    /// The running or starting generation was found hung.
    hung: bool,
}

impl Model {
    fn body(id: u64) -> Vec<u8> {
        format!(r#"{{"jsonrpc":"2.0","id":{id},"method":"m"}}"#).into_bytes()
    }

    fn answered(&mut self, id: u64, how: &str) {
        let count = self.answers.entry(id).or_default();
        *count += 1;
        assert_eq!(*count, 1, "request {id} answered twice (last by {how})");
    }

    /// Send `id`, which first waited at `since`, if it did.
    fn send(&mut self, id: u64, since: Option<Instant>) {
        let deadline = self
            .wait_limit
            .map(|limit| since.unwrap_or(self.now) + limit);
        match self.gens.handle_send(&Self::body(id), self.now, since) {
            SendStep::Send { generation, ticket } => {
                assert_eq!(
                    Some(generation),
                    self.running,
                    "sent to a generation not running"
                );
                self.in_flight.push(InFlight {
                    id,
                    generation,
                    ticket,
                    since,
                });
            }
            SendStep::Wait { until, .. } => {
                assert!(
                    self.running.is_none(),
                    "told to wait while a generation runs"
                );
                assert_eq!(until, deadline, "the wait runs from its start");
                assert!(
                    until.is_none_or(|until| self.now < until),
                    "told to wait past its end"
                );
                assert!(
                    !self.fail_while_down || self.resting,
                    "told to wait with WhileDown::Fail"
                );
                self.waiting.push((id, since.unwrap_or(self.now)));
            }
            SendStep::Refuse(closed, _) => {
                let over = self.gens.is_over() || self.gens.is_stopped();
                let waited = deadline.is_some_and(|deadline| self.now >= deadline);
                assert!(
                    over || ((self.fail_while_down || waited) && self.running.is_none()),
                    "refused ({closed}) while a generation runs"
                );
                self.answered(id, "a refused send");
            }
        }
    }

    fn events(&mut self) {
        while let Some(event) = self.gens.poll_event() {
            match event {
                GenerationEvent::Unanswered(request) => {
                    let id: u64 = std::str::from_utf8(&request.id)
                        .expect("an id we wrote")
                        .parse()
                        .expect("a number");
                    self.answered(id, "the tracker");
                }
                GenerationEvent::Untracked(id) => {
                    let id: u64 = std::str::from_utf8(&id)
                        .expect("an id we wrote")
                        .parse()
                        .expect("a number");
                    self.untracked.insert(id);
                }
                GenerationEvent::Exited(report) => {
                    let expected = self.hung_marks.pop_front().expect("a report per end");
                    assert_eq!(report.killed_when_hung, expected, "{report}");
                    if expected {
                        assert!(report.unexpected(), "killed for hanging is a crash");
                    }
                }
                GenerationEvent::GaveUp(_) => {}
            }
        }
    }

    fn apply(&mut self, op: &Op) {
        match op {
            Op::Request => {
                let id = self.next_id;
                self.next_id += 1;
                self.send(id, None);
            }
            Op::Notification => {
                let _ = self
                    .gens
                    .handle_send(br#"{"jsonrpc":"2.0","method":"n"}"#, self.now, None);
            }
            Op::SendEnds(n, through) => {
                if self.in_flight.is_empty() {
                    return;
                }
                let sent = self
                    .in_flight
                    .remove(usize::from(*n) % self.in_flight.len());
                // A send goes through only to a generation that still runs.
                let through = *through && self.running == Some(sent.generation);
                let result = if through { Ok(()) } else { Err(Closed::Exited) };
                if through {
                    self.delivered.push((sent.id, sent.generation));
                }
                match self.gens.handle_sent(sent.ticket, result) {
                    AfterSend::Done if through => {}
                    // Answered by the tracker already: nothing more.
                    AfterSend::Done => assert!(
                        self.answers.contains_key(&sent.id),
                        "a failed send told done without an answer"
                    ),
                    AfterSend::Retry => self.send(sent.id, sent.since),
                    AfterSend::Fail => self.answered(sent.id, "a failed send"),
                }
            }
            Op::Retry(n) => {
                if self.waiting.is_empty() {
                    return;
                }
                let (id, since) = self.waiting.remove(usize::from(*n) % self.waiting.len());
                self.send(id, Some(since));
            }
            Op::Answer(n) => {
                let Some(running) = self.running else {
                    return;
                };
                let theirs: Vec<usize> = (0..self.delivered.len())
                    .filter(|&i| self.delivered[i].1 == running)
                    .collect();
                if theirs.is_empty() {
                    return;
                }
                let (id, _) = self
                    .delivered
                    .remove(theirs[usize::from(*n) % theirs.len()]);
                let answer = format!(r#"{{"jsonrpc":"2.0","id":{id},"result":{{}}}}"#);
                self.gens.handle_received(
                    &Received::Message(Message::new(answer.into_bytes())),
                    self.now,
                );
                self.answered(id, "the child");
            }
            Op::Dies(on_its_own) => {
                let Some(generation) = self.running.or(self.starting).or(self.stopping) else {
                    return;
                };
                let mut report =
                    ExitReport::new(Exit::Signal(9), EndedBy::OnItsOwn, Duration::ZERO);
                if *on_its_own {
                    report.exit = Exit::Code(0);
                }
                let stopping = self.stopping.is_some();
                if self.hung && !stopping {
                    // Killed by its owner: asked for, yet a crash.
                    report.shutdown_requested = true;
                }
                self.hung_marks.push_back(self.hung && !stopping);
                self.hung = false;
                self.gens.handle_ended(report, self.now);
                if self.stopping.take().is_none() {
                    // A crash (or a failed initialization): not resting.
                    self.resting = false;
                }
                self.running = None;
                self.starting = None;
                // What it got and did not answer is the tracker's now.
                self.delivered.retain(|&(_, g)| g != generation);
            }
            Op::Spawn(fails) => {
                if self.running.is_some() || self.starting.is_some() || self.stopping.is_some() {
                    return;
                }
                let Some(at) = self.gens.poll_timeout() else {
                    return;
                };
                self.now = self.now.max(at);
                if !self.gens.restart_due(self.now) {
                    return;
                }
                if *fails {
                    self.gens.handle_spawn_failed(self.now);
                } else {
                    self.gens.handle_spawned(self.now);
                    self.starting = Some(self.gens.generations());
                }
            }
            Op::Initialized(through) => {
                let Some(generation) = self.starting.take() else {
                    return;
                };
                if *through && !self.gens.is_stopped() {
                    self.gens.handle_initialized(self.now);
                    self.running = Some(generation);
                    self.resting = false;
                    assert_eq!(self.gens.running(), Some(generation));
                } else {
                    self.gens.handle_init_failed();
                    self.starting = Some(generation);
                    self.apply(&Op::Dies(false));
                }
            }
            Op::Hung => {
                if self.running.is_some() || self.starting.is_some() {
                    self.gens.handle_hung();
                    self.hung = true;
                }
            }
            Op::Advance(ms) => {
                self.now += Duration::from_millis(u64::from(*ms));
                self.gens.handle_timeout(self.now);
                if let Some(generation) = self.gens.poll_idle_stop() {
                    assert_eq!(
                        Some(generation),
                        self.running,
                        "an idle stop of another generation"
                    );
                    // Idle means no request waits for its answer there.
                    assert!(
                        !self
                            .delivered
                            .iter()
                            .any(|&(id, g)| g == generation && !self.untracked.contains(&id)),
                        "stopped idle with a request unanswered"
                    );
                    assert!(
                        !self
                            .in_flight
                            .iter()
                            .any(|f| f.generation == generation && f.ticket.is_some()),
                        "stopped idle with a request being sent"
                    );
                    self.running = None;
                    self.stopping = Some(generation);
                    self.resting = true;
                }
            }
            Op::Stop => self.gens.handle_stop(),
        }
        self.events();
        if self.gens.is_over() || self.gens.is_stopped() {
            // Waiting sends are told to give up.
            for (id, since) in std::mem::take(&mut self.waiting) {
                self.send(id, Some(since));
            }
        }
    }

    /// Everything ends: every send resolves, the running generation ends,
    /// and every request must have its one answer.
    fn finish(mut self) {
        self.apply(&Op::Stop);
        while !self.in_flight.is_empty() {
            self.apply(&Op::SendEnds(0, false));
        }
        self.apply(&Op::Dies(true));
        for (id, since) in std::mem::take(&mut self.waiting) {
            self.send(id, Some(since));
        }
        while !self.in_flight.is_empty() {
            self.apply(&Op::SendEnds(0, false));
        }
        self.events();
        for id in 0..self.next_id {
            if !self.untracked.contains(&id) {
                assert_eq!(
                    self.answers.get(&id),
                    Some(&1),
                    "request {id} never answered"
                );
            }
        }
    }
}

fuzz_target!(|input: Input| {
    let now = Instant::now();
    let mut config = GenerationsConfig::default();
    config.track_requests = true;
    config.max_tracked = 1 + usize::from(input.max_tracked % 16);
    config.restart.budget = u32::from(input.budget % 8);
    config.restart.jitter = 0.0;
    config.idle_stop = (input.idle_ms > 0).then(|| Duration::from_millis(u64::from(input.idle_ms)));
    config.while_down = if input.fail_while_down {
        WhileDown::Fail
    } else {
        WhileDown::Wait
    };
    let wait_limit = (input.wait_ms > 0).then(|| Duration::from_millis(u64::from(input.wait_ms)));
    config.wait_limit = wait_limit;
    let mut gens = Generations::new(config, now);
    gens.handle_spawned(now);
    gens.handle_initialized(now);
    let mut model = Model {
        gens,
        now,
        fail_while_down: input.fail_while_down,
        wait_limit,
        next_id: 0,
        in_flight: Vec::new(),
        waiting: Vec::new(),
        delivered: Vec::new(),
        answers: HashMap::new(),
        untracked: HashSet::new(),
        running: Some(1),
        starting: None,
        stopping: None,
        resting: false,
        hung_marks: VecDeque::new(),
        hung: false,
    };
    for op in &input.ops {
        model.apply(op);
    }
    model.finish();
});
