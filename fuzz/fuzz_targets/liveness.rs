//! Fuzzing of `Liveness` against a reference model that decides from the whole history of
//! events, not from running state: arbitrary timings (zero included) and sequences of clock
//! steps, pings sent when asked, answers (late ones too), output, and CPU readings that go up,
//! stay or go down.
//!
//! Held after every input: the verdict is the model's (hung when nothing counted as a sign of
//! life for `hung_after`; answering when a ping was answered and none missed since; busy when a
//! ping was missed or work was seen since the last answer); `poll_verdict` hands out each change
//! once; a ping is asked exactly when none is in flight and `ping_every` has passed since the
//! last; a CPU reading exactly when `cpu_every` has passed since the last; `poll_timeout` is no
//! later than the next moment the verdict or a request could change without input.

#![no_main]

use std::time::{Duration, Instant};

use arbitrary::Arbitrary;
use childwire_core::liveness::{Liveness, LivenessConfig, Verdict};
use libfuzzer_sys::fuzz_target;

#[derive(Debug, Arbitrary)]
enum Op {
    /// Moves the clock by this many milliseconds.
    Advance(u8),
    /// Moves the clock to the machine's timeout (if any) and calls `handle_timeout`.
    ToTimeout,
    /// Sends a ping if one is asked.
    Ping,
    Answer,
    Output,
    /// The CPU time moves by this many milliseconds (negative: a descendant was reaped).
    Cpu(i8),
    Timeout,
}

#[derive(Debug, Arbitrary)]
struct Input {
    ping_every: u8,
    ping_timeout: u8,
    hung_after: u8,
    cpu_every: u8,
    ops: Vec<Op>,
}

#[derive(Debug, Clone, Copy, PartialEq)]
enum Event {
    PingSent,
    Answer,
    Output,
    Cpu(Duration),
    /// Any call: the machine looks at the clock.
    Tick,
}

fn ms(n: u8) -> Duration {
    Duration::from_millis(u64::from(n))
}

/// The verdict the history gives at `now` (the time of its last call).
fn model(
    config: &LivenessConfig,
    start: Instant,
    history: &[(Instant, Event)],
    now: Instant,
) -> Option<Verdict> {
    // Signs of life: the start, answers, output, CPU time that went up.
    let mut last_sign = start;
    let mut cpu: Option<Duration> = None;
    let mut answered = false;
    let mut worked = false;
    for &(at, event) in history {
        match event {
            Event::Answer => {
                last_sign = last_sign.max(at);
                answered = true;
                worked = false;
            }
            Event::Output => {
                last_sign = last_sign.max(at);
                worked = true;
            }
            Event::Cpu(total) => {
                if cpu.is_some_and(|before| total > before) {
                    last_sign = last_sign.max(at);
                    worked = true;
                }
                cpu = Some(total);
            }
            Event::PingSent | Event::Tick => {}
        }
    }
    // A ping is missed when a call (any but an answer, which frees the slot first) saw its
    // deadline before an answer came; an answer after that call clears it.
    let mut missed = false;
    for (i, &(sent, event)) in history.iter().enumerate() {
        if event != Event::PingSent {
            continue;
        }
        let deadline = sent + config.ping_timeout;
        let seen = history[i..]
            .iter()
            .enumerate()
            .take_while(|(_, (_, e))| *e != Event::Answer)
            .find(|(_, (at, _))| *at >= deadline)
            .map(|(k, _)| i + k);
        if let Some(j) = seen {
            if !history[j + 1..].iter().any(|(_, e)| *e == Event::Answer) {
                missed = true;
            }
        }
    }
    if now >= last_sign + config.hung_after {
        Some(Verdict::Hung)
    } else if answered && !missed {
        Some(Verdict::Answering)
    } else if missed || worked {
        Some(Verdict::Busy)
    } else {
        None
    }
}

fuzz_target!(|input: Input| {
    let mut config = LivenessConfig::default();
    config.ping_every = ms(input.ping_every).max(Duration::from_millis(1));
    config.ping_timeout = ms(input.ping_timeout);
    config.hung_after = ms(input.hung_after);
    config.cpu_every = ms(input.cpu_every).max(Duration::from_millis(1));
    let start = Instant::now();
    let mut liveness = Liveness::new(config.clone(), start);
    let mut now = start;
    let mut history: Vec<(Instant, Event)> = Vec::new();
    let mut cpu = Duration::from_secs(10);
    let mut reported: Option<Verdict> = None;
    // The ping in flight (as the model sees it), and when the last was sent; the last reading.
    let mut in_flight: Option<Instant> = None;
    let mut last_ping: Option<Instant> = None;
    let mut last_cpu: Option<Instant> = None;
    for op in input.ops.iter().take(2000) {
        match *op {
            Op::Advance(n) => {
                now += ms(n);
                continue;
            }
            Op::ToTimeout => {
                if let Some(at) = liveness.poll_timeout() {
                    now = now.max(at);
                }
                liveness.handle_timeout(now);
                history.push((now, Event::Tick));
            }
            Op::Timeout => {
                liveness.handle_timeout(now);
                history.push((now, Event::Tick));
            }
            Op::Ping => {
                // Asked exactly when none is in flight and the period has passed. The machine
                // frees a missed ping's slot at the first call that sees its deadline.
                if in_flight.is_some_and(|sent| now >= sent + config.ping_timeout) {
                    liveness.handle_timeout(now);
                    history.push((now, Event::Tick));
                    in_flight = None;
                }
                let due =
                    in_flight.is_none() && last_ping.is_none_or(|at| now >= at + config.ping_every);
                assert_eq!(
                    liveness.poll_ping(now),
                    due,
                    "poll_ping at {:?}",
                    now - start
                );
                if due {
                    liveness.handle_ping_sent(now);
                    history.push((now, Event::PingSent));
                    in_flight = Some(now);
                    last_ping = Some(now);
                }
            }
            Op::Answer => {
                liveness.handle_ping_answered(now);
                history.push((now, Event::Answer));
                in_flight = None;
            }
            Op::Output => {
                liveness.handle_output(now);
                history.push((now, Event::Output));
            }
            Op::Cpu(delta) => {
                let due = last_cpu.is_none_or(|at| now >= at + config.cpu_every);
                assert_eq!(liveness.poll_cpu(now), due, "poll_cpu at {:?}", now - start);
                let step = Duration::from_millis(u64::from(delta.unsigned_abs()));
                cpu = if delta < 0 {
                    cpu.saturating_sub(step)
                } else {
                    cpu + step
                };
                liveness.handle_cpu(cpu, now);
                history.push((now, Event::Cpu(cpu)));
                last_cpu = Some(now);
            }
        }
        // A call at or past the deadline of the ping in flight freed its slot.
        if in_flight.is_some_and(|sent| now >= sent + config.ping_timeout) {
            in_flight = None;
        }
        // The machine decides at each call: at the last one's time.
        let called = history.last().map_or(start, |&(at, _)| at);
        let want = model(&config, start, &history, called);
        assert_eq!(
            liveness.verdict(),
            want,
            "at {:?} after {op:?}",
            now - start
        );
        let change = liveness.poll_verdict();
        if want != reported {
            assert_eq!(change, want, "the change is handed out");
            reported = want;
        } else {
            assert_eq!(change, None, "handed out once");
        }
        // The machine is called again no later than anything it waits for.
        let timeout = liveness.poll_timeout().expect("always a next reading");
        if let Some(sent) = in_flight {
            assert!(timeout <= sent + config.ping_timeout);
        } else {
            assert!(timeout <= last_ping.map_or(start, |at| at + config.ping_every));
        }
        assert!(timeout <= last_cpu.map_or(start, |at| at + config.cpu_every));
        if want != Some(Verdict::Hung) {
            assert!(timeout <= liveness.last_sign() + config.hung_after);
        }
    }
});
