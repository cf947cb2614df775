//! Fuzzing of `Farewell`, a shutdown's goodbye, against a model: goodbyes of
//! any shape (messages that wait for an answer or not), begun or not, with
//! messages from the child (the answer awaited, another request's, noise),
//! time moving in any steps, and a stop at any point.
//!
//! Checked: the messages go out in their order, each once, never before the
//! goodbye began nor after it stopped; nothing goes while an answer is
//! awaited; an answer is awaited from its message until it comes or its
//! deadline passes (exactly then, never earlier); only the awaited answer
//! ends the wait; and the goodbye is done exactly when the model says.

#![no_main]

use std::time::{Duration, Instant};

use arbitrary::Arbitrary;
use childwire_core::{Farewell, Goodbye, Reply};
use libfuzzer_sys::fuzz_target;

#[derive(Debug, Arbitrary)]
struct Input {
    /// For each message: whether it waits for its answer.
    steps: Vec<bool>,
    /// The answer timeout, in ms (0: the default).
    timeout_ms: u8,
    ops: Vec<Op>,
}

#[derive(Debug, Arbitrary)]
enum Op {
    Begin,
    /// Take every message that may go now.
    Poll,
    /// The child writes the answer to the `n`th message (awaited or not).
    Answer(u8),
    /// The child writes something else.
    Noise(Vec<u8>),
    Advance(u16),
    Stop,
}

/// What the goodbye must do, said plainly.
struct Model {
    awaits: Vec<bool>,
    timeout: Duration,
    begun: bool,
    stopped: bool,
    next: usize,
    /// The message whose answer is awaited, and until when.
    awaiting: Option<(usize, Instant)>,
}

fuzz_target!(|input: Input| {
    let steps = &input.steps[..input.steps.len().min(16)];
    let timeout = Duration::from_millis(u64::from(input.timeout_ms));
    let mut goodbye = Goodbye::new();
    if !timeout.is_zero() {
        goodbye = goodbye.answer_timeout(timeout);
    }
    for (n, &awaits) in steps.iter().enumerate() {
        let message = format!(r#"{{"n":{n}}}"#);
        goodbye = if awaits {
            goodbye.request(message, Reply::JsonRpcId(n.to_string().into()))
        } else {
            goodbye.notify(message)
        };
    }
    let mut farewell = Farewell::new(goodbye);
    let mut model = Model {
        awaits: steps.to_vec(),
        timeout: if timeout.is_zero() {
            childwire_core::DEFAULT_ANSWER_TIMEOUT
        } else {
            timeout
        },
        begun: false,
        stopped: false,
        next: 0,
        awaiting: None,
    };
    let mut now = Instant::now();
    for op in input.ops.into_iter().take(256) {
        match op {
            Op::Begin => {
                farewell.handle_begin();
                model.begun = true;
            }
            Op::Poll => {
                while let Some(message) = farewell.poll_message(now) {
                    assert!(
                        model.begun && !model.stopped,
                        "a message outside the goodbye"
                    );
                    assert!(
                        model.awaiting.is_none(),
                        "a message while an answer is awaited"
                    );
                    let n = model.next;
                    assert!(n < model.awaits.len(), "more messages than the goodbye has");
                    assert_eq!(
                        &message[..],
                        format!(r#"{{"n":{n}}}"#).as_bytes(),
                        "out of order"
                    );
                    if model.awaits[n] {
                        model.awaiting = Some((n, now + model.timeout));
                    }
                    model.next += 1;
                }
                // Nothing more may go: the model agrees.
                assert!(
                    !model.begun
                        || model.stopped
                        || model.awaiting.is_some()
                        || model.next == model.awaits.len(),
                    "a message that may go was held back"
                );
            }
            Op::Answer(n) => {
                let n = usize::from(n) % (model.awaits.len() + 1);
                let answer = format!(r#"{{"jsonrpc":"2.0","id":{n},"result":null}}"#);
                let expected = model.awaiting.is_some_and(|(awaited, _)| awaited == n);
                assert_eq!(farewell.is_answer(answer.as_bytes()), expected);
                assert_eq!(farewell.handle_message(answer.as_bytes()), expected);
                if expected {
                    model.awaiting = None;
                }
            }
            Op::Noise(bytes) => {
                // Noise may look like an answer only if it is one.
                if farewell.handle_message(&bytes) {
                    let (awaited, _) = model.awaiting.expect("an answer with nothing awaited");
                    let id = awaited.to_string();
                    assert!(childwire_core::jsonrpc::is_response_to(
                        &bytes,
                        id.as_bytes()
                    ));
                    model.awaiting = None;
                }
            }
            Op::Advance(ms) => {
                now += Duration::from_millis(u64::from(ms));
                farewell.handle_timeout(now);
                if model.awaiting.is_some_and(|(_, deadline)| now >= deadline) {
                    model.awaiting = None;
                }
            }
            Op::Stop => {
                farewell.handle_stop();
                model.stopped = true;
                model.awaiting = None;
            }
        }
        assert_eq!(farewell.is_awaiting(), model.awaiting.is_some());
        assert_eq!(farewell.poll_timeout(), model.awaiting.map(|(_, d)| d));
        let done = !model.begun
            || model.stopped
            || (model.awaiting.is_none() && model.next == model.awaits.len());
        assert_eq!(farewell.is_done(), done);
        assert_eq!(farewell.has_said(), model.next > 0);
    }
});
