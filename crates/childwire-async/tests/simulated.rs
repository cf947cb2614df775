//! The async transport driven on a fake runtime: virtual time, a
//! single-threaded executor stepped one task poll at a time, and scripted
//! children on in-memory pipes (see `support`). Every instant asserted here
//! is exact, and every run is the same run.
//!
//! Unix: a fake child's signals go to a real zombie process of ours, and
//! its exits are Unix wait statuses (see `support`). What is tested here is
//! the shared async layer's logic, the same on every platform.
#![cfg(unix)]

mod support;

use std::future::{Future, poll_fn};
use std::pin::{Pin, pin};
use std::sync::{Arc, Mutex};
use std::task::Poll;
use std::time::Duration;

use bytes::Bytes;
use childwire_async::{
    ChannelConfig, Closed, Command, Config, EndedBy, Exit, ExitReport, Received, SendErrorKind,
    StderrMode, Transport,
};
use futures_sink::Sink;
use support::{ChildSpec, FakeRuntime, SignalSink, killed_by, pipe, yield_now};

type Fake = Transport<FakeRuntime>;

const MS: Duration = Duration::from_millis(1);
const NS: Duration = Duration::from_nanos(1);

/// The scripted child, its stderr captured quietly: shown (the default), the scripts' stderr
/// lines would fill the test output.
fn spawn(config: Config) -> Fake {
    let mut command = Command::new("fake-server");
    command.stderr(StderrMode::Capture);
    // Signals go to the sink's PID alone. As a group, the sink (a zombie
    // kept unreaped) would still be there after the fake exit, and the sweep
    // would scan `/proc` for it on the sweeper thread, in real time, which
    // the virtual clock outruns: the report would wait for the sweep's
    // deadline instead of its result.
    command.process_group(false);
    Transport::spawn(&command, config).expect("the scripted child spawns")
}

/// `fut`, or `None` if `timeout` of virtual time passes first; the loser is
/// dropped where it stood, as `select!` drops it.
async fn within<T>(rt: &FakeRuntime, timeout: Duration, fut: impl Future<Output = T>) -> Option<T> {
    let mut fut = pin!(fut);
    let mut sleep = pin!(rt.sleep(timeout));
    poll_fn(|cx| {
        if let Poll::Ready(value) = fut.as_mut().poll(cx) {
            return Poll::Ready(Some(value));
        }
        sleep.as_mut().poll(cx).map(|()| None)
    })
    .await
}

/// A small deterministic generator for test choices, independent of the
/// executor's own.
struct Rng(u64);

impl Rng {
    fn below(&mut self, n: u64) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0 % n
    }
}

fn expect_report(item: Option<Received>) -> ExitReport {
    match item {
        Some(Received::Exited(report)) => *report,
        other => panic!("expected the exit report, got {other:?}"),
    }
}

// ---- lifecycle on the virtual clock ----

#[test]
fn c12_shutdown_of_a_child_that_exits_on_eof_completes_at_the_instant_it_exits() {
    let rt = FakeRuntime::new();
    let child = rt.script_child(ChildSpec::default());
    let script_rt = rt.clone();
    rt.spawn_task(async move {
        let mut child = child;
        let _ = child.stdin.read_to_end().await;
        // Winding down after EOF takes it 300 ms.
        script_rt.sleep(300 * MS).await;
        child.exit(0);
    });
    let (asked, done, report) = rt.block_on(async {
        let transport = spawn(plain_config());
        rt.sleep(Duration::from_secs(1)).await;
        let asked = rt.elapsed();
        let report = transport.shutdown().await.expect("shutdown completes");
        (asked, rt.elapsed(), report)
    });
    assert_eq!(done - asked, 300 * MS, "no fixed sleep after the exit");
    assert_eq!(report.elapsed, 300 * MS);
    assert_eq!(report.ended_by, EndedBy::StdinClose);
    assert_eq!(report.exit, Exit::Code(0));
    assert!(report.shutdown_requested && report.pipes_drained);
    assert_eq!(rt.spawned(), ["fake-server"]);
}

/// Shuts down a child that ignores EOF and (the sink makes signals
/// harmless) every signal, and that exits `exit_at` after the shutdown
/// was asked. Returns the report, or where everything stopped if it never
/// exits.
fn shutdown_ignoring_everything(
    pid: Option<u32>,
    exit_at: Option<Duration>,
) -> Result<(Duration, ExitReport), support::Stalled> {
    const ASKED_AT: Duration = Duration::from_secs(1);
    let rt = FakeRuntime::new();
    let child = rt.script_child(ChildSpec {
        pid,
        ..ChildSpec::default()
    });
    if let Some(exit_at) = exit_at {
        let script_rt = rt.clone();
        rt.spawn_task(async move {
            script_rt.sleep(ASKED_AT + exit_at).await;
            child.exit_with(killed_by(9));
        });
    } else {
        // Never exits; its pipes stay open.
        std::mem::forget(child);
    }
    rt.run(async {
        let transport = spawn(plain_config());
        rt.sleep(ASKED_AT).await;
        let report = transport.shutdown().await.expect("shutdown completes");
        (rt.elapsed() - ASKED_AT, report)
    })
    .map_err(|stalled| support::Stalled {
        at: stalled.at - ASKED_AT,
    })
}

/// Signals cannot reach a fake child, so the sink takes them (a zombie of
/// our own: `kill` succeeds and does nothing) and the child's script
/// exits at chosen instants around each deadline. Which step the report
/// names on each side of a deadline pins the instant of that step to the
/// nanosecond.
#[test]
fn c12_sigterm_exactly_at_stdin_grace_and_sigkill_at_stdin_plus_term_grace() {
    let sink = SignalSink::new();
    let pid = Some(sink.pid());
    let secs = Duration::from_secs;
    for (exit_at, step) in [
        (secs(2) - NS, EndedBy::StdinClose),
        (secs(2) + NS, EndedBy::Sigterm),
        (secs(4) - NS, EndedBy::Sigterm),
        (secs(4) + NS, EndedBy::Sigkill),
        (secs(9), EndedBy::Sigkill),
    ] {
        let (took, report) = shutdown_ignoring_everything(pid, Some(exit_at)).unwrap();
        assert_eq!(report.ended_by, step, "exit at {exit_at:?}");
        assert_eq!(
            report.elapsed, exit_at,
            "the report's elapsed is the exit's instant"
        );
        assert_eq!(took, exit_at, "shutdown returns at the exit, not later");
    }
    // A child that never exits: the last thing the transport waits for is
    // the SIGKILL deadline, then nothing more is armed (it waits for the
    // reap, as it must: no fixed sleeps, no second SIGKILL).
    let stalled = shutdown_ignoring_everything(pid, None).unwrap_err();
    assert_eq!(stalled.at, secs(4));
}

/// Without a PID to signal, delivery fails the way ESRCH does: the child
/// is taken for gone-but-unreaped, escalation stops at SIGTERM's instant,
/// and the report does not name a signal that reached nothing.
#[test]
fn c12_a_signal_that_finds_no_process_stops_the_escalation_at_stdin_grace() {
    let stalled = shutdown_ignoring_everything(None, None).unwrap_err();
    assert_eq!(stalled.at, Duration::from_secs(2));
    let (_, report) = shutdown_ignoring_everything(None, Some(Duration::from_secs(7))).unwrap();
    assert_eq!(report.ended_by, EndedBy::StdinClose);
    assert_eq!(report.elapsed, Duration::from_secs(7));
}

// ---- the shutdown flush ----

/// Runs one interleaving: a child that reads its stdin to EOF; a task that
/// keeps sending while the caller, having queued `before` messages itself,
/// asks for the shutdown. Returns the bytes the child read, the bytes of
/// every message whose `send` succeeded in the order accepted, and the
/// report.
fn shutdown_while_sending(
    seed: u64,
    stdin_capacity: usize,
    before: usize,
) -> (Vec<u8>, Vec<u8>, ExitReport) {
    let rt = FakeRuntime::preemptive(seed);
    let child = rt.script_child(ChildSpec {
        stdin_capacity,
        ..ChildSpec::default()
    });
    let input = Arc::new(Mutex::new(Vec::new()));
    let read = Arc::clone(&input);
    rt.spawn_task(async move {
        let mut child = child;
        *read.lock().unwrap() = child.stdin.read_to_end().await;
        child.exit(0);
    });
    let accepted = Arc::new(Mutex::new(Vec::new()));
    let log = Arc::clone(&accepted);
    let task_rt = rt.clone();
    // The caller is a task, not `block_on`'s future, so the preemption
    // points can run it in the middle of the background task's poll.
    let caller = rt.spawn_joinable(async move {
        let rt = task_rt;
        let (sender, mut receiver) = spawn(plain_config()).split();
        let mut rng = Rng(seed | 1);
        let message =
            |i: usize, len: usize| format!("{{\"n\":{i},\"pad\":\"{}\"}}", "x".repeat(len));
        for i in 0..before {
            if rng.below(2) == 0 {
                // Give way before a send, never between the last send and
                // the shutdown: they happen in one poll, inside whatever
                // the background task was doing when it let us run.
                yield_now().await;
            }
            // Now and then a message over the 64 KiB batch: the sender
            // writes it itself and leaves what the pipe did not take.
            let len = if rng.below(8) == 0 {
                70_000
            } else {
                rng.below(300) as usize
            };
            let msg = message(i, len);
            sender
                .send(msg.clone())
                .await
                .expect("accepted before shutdown");
            log.lock()
                .unwrap()
                .extend_from_slice(format!("{msg}\n").as_bytes());
        }
        let other = sender.clone();
        let other_log = Arc::clone(&log);
        rt.spawn_task(async move {
            for i in before.. {
                let msg = message(i, 10);
                match other.send(msg.clone()).await {
                    Ok(()) => other_log
                        .lock()
                        .unwrap()
                        .extend_from_slice(format!("{msg}\n").as_bytes()),
                    Err(err) => {
                        assert_eq!(err.kind(), SendErrorKind::Closed(Closed::Closing));
                        break;
                    }
                }
            }
        });
        let report = sender.shutdown().await.expect("shutdown completes");
        // The receiver ends with the same report.
        while let Some(item) = receiver.recv().await {
            if let Received::Exited(last) = item {
                assert_eq!(*last, report);
            }
        }
        report
    });
    let report = rt.block_on(caller);
    let input = input.lock().unwrap().clone();
    let accepted = accepted.lock().unwrap().clone();
    (input, accepted, report)
}

/// The race fixed in 967ccc9: bytes queued right before `shutdown()` must
/// all be written before stdin closes. Explored over many interleavings of
/// the caller, a concurrent sender, the background task and the child, at
/// pipe sizes from a trickle to a Linux pipe.
#[test]
fn c12_everything_sent_before_shutdown_reaches_the_child_before_eof_in_any_interleaving() {
    for seed in 0..150 {
        for (capacity, before) in [(16, 3), (1000, 20), (64 * 1024, 40)] {
            let (input, accepted, report) = shutdown_while_sending(seed, capacity, before);
            assert!(
                input == accepted,
                "seed {seed}, capacity {capacity}: the child read {} bytes, {} were accepted",
                input.len(),
                accepted.len()
            );
            assert_eq!(report.ended_by, EndedBy::StdinClose, "seed {seed}");
            assert_eq!(
                report.elapsed,
                Duration::ZERO,
                "seed {seed}: it exits on EOF at once"
            );
        }
    }
}

// ---- write timeout ----

#[test]
fn c07_a_child_that_reads_nothing_fails_sends_as_stalled_at_exactly_the_write_timeout() {
    let rt = FakeRuntime::new();
    let child = rt.script_child(ChildSpec {
        stdin_capacity: 100,
        ..ChildSpec::default()
    });
    let script_rt = rt.clone();
    let closed_at = Arc::new(Mutex::new(None));
    let seen = Arc::clone(&closed_at);
    rt.spawn_task(async move {
        // Reads nothing; exits when its stdin is closed.
        child.stdin.writer_closed().await;
        *seen.lock().unwrap() = Some(script_rt.elapsed());
        child.exit(3);
    });
    let (failed_at, kind, report) = rt.block_on(async {
        let mut config = plain_config();
        config
            .write_timeout(Some(Duration::from_secs(5)))
            .send_high_water(1024);
        let mut transport = spawn(config);
        rt.sleep(Duration::from_secs(1)).await;
        let line = "y".repeat(99);
        let err = loop {
            if let Err(err) = transport.send(line.as_str()).await {
                break err;
            }
        };
        let failed_at = rt.elapsed();
        let report = loop {
            if let Some(Received::Exited(report)) = transport.recv().await {
                break report;
            }
        };
        (failed_at, err.kind(), report)
    });
    // The first bytes were handed to the pipe at 1 s; the peer read none.
    assert_eq!(failed_at, Duration::from_secs(6));
    assert_eq!(
        kind,
        SendErrorKind::Closed(Closed::Stalled {
            after: Duration::from_secs(5)
        })
    );
    assert_eq!(
        *closed_at.lock().unwrap(),
        Some(Duration::from_secs(6)),
        "stdin closed at the timeout"
    );
    assert_eq!(report.ended_by, EndedBy::StdinClose);
    assert!(!report.shutdown_requested);
    assert_eq!(report.exit, Exit::Code(3));
    assert_eq!(
        report.elapsed,
        Duration::from_secs(6),
        "from spawn, with no shutdown asked"
    );
}

// ---- receive bound ----

/// What one received 1-byte message costs against `recv_high_water`.
const TINY_COST: usize = 1 + childwire_core::ITEM_OVERHEAD;

#[test]
fn c25_stdout_is_not_read_past_recv_high_water_after_the_exit_and_the_report_waits_for_the_caller()
{
    const LINES: usize = 32 * 1024;
    const HIGH_WATER: usize = 8192;
    const READ: usize = 64; // bytes per read of stdout: 32 lines
    let rt = FakeRuntime::new();
    let mut child = rt.script_child(ChildSpec {
        stdout_max_read: READ,
        ..ChildSpec::default()
    });
    let stdout = child.stdout.probe();
    let script_rt = rt.clone();
    rt.spawn_task(async move {
        child.stdout.write_all(&b"x\n".repeat(LINES)).await.unwrap();
        script_rt.sleep(MS).await;
        child.exit(0);
    });
    let (unread_after, received, report) = rt.block_on(async {
        let mut config = plain_config();
        // Longer than the caller stays away: see the test below for what
        // happens when it is not.
        config
            .recv_high_water(HIGH_WATER)
            .drain_grace(Duration::from_secs(60));
        let mut transport = spawn(config);
        // The caller is busy elsewhere for 10 s: the child exits meanwhile
        // and the background task reads what it left, within the bound.
        rt.sleep(Duration::from_secs(10)).await;
        let unread_after = stdout.unread();
        let mut received = 0;
        let report = loop {
            match transport.recv().await {
                Some(Received::Message(m)) => {
                    assert_eq!(&m[..], b"x");
                    received += 1;
                }
                other => break expect_report(other),
            }
        };
        assert!(transport.recv().await.is_none());
        (unread_after, received, report)
    });
    // Reading stops at the first read that brings the queue to the bound.
    let reads = HIGH_WATER.div_ceil(READ / 2 * TINY_COST);
    assert_eq!(unread_after, 2 * LINES - reads * READ);
    assert_eq!(received, LINES, "nothing lost");
    assert_eq!(report.counters.messages_in, LINES as u64);
    assert!(report.pipes_drained);
}

// ---- nothing lost at exit, report last ----

#[test]
fn c04_every_line_before_the_exit_is_delivered_and_the_report_is_last_in_any_interleaving() {
    for seed in 0..100 {
        let rt = FakeRuntime::seeded(seed);
        let child = rt.script_child(ChildSpec {
            stdout_capacity: 1 + (seed as usize * 37) % 500,
            ..ChildSpec::default()
        });
        let script_rt = rt.clone();
        rt.spawn_task(async move {
            let mut child = child;
            for i in 0..200 {
                child
                    .stdout
                    .write_all(format!("{i}\n").as_bytes())
                    .await
                    .unwrap();
                if i % 50 == 0 {
                    child.stderr.write_all(b"working\n").await.unwrap();
                    script_rt.sleep(MS).await;
                }
            }
            child.stdout.write_all(b"last").await.unwrap();
            child.exit(1);
        });
        rt.block_on(async {
            let mut transport = spawn(plain_config());
            let mut items = Vec::new();
            while let Some(item) = transport.recv().await {
                items.push(item);
            }
            assert_eq!(items.len(), 202, "seed {seed}");
            for (i, item) in items[..200].iter().enumerate() {
                match item {
                    Received::Message(m) => assert_eq!(m.as_str().unwrap(), i.to_string()),
                    other => panic!("seed {seed}: {other:?} at {i}"),
                }
            }
            match &items[200] {
                Received::Message(m) => assert!(m.as_str() == Ok("last") && !m.is_terminated()),
                other => panic!("seed {seed}: {other:?}"),
            }
            let report = expect_report(items.pop());
            assert_eq!(report.exit, Exit::Code(1));
            assert_eq!(report.counters.messages_in, 201);
            assert!(report.stderr_tail.contains("working"));
        });
    }
}

// ---- cancel safety ----

#[test]
fn c05_a_recv_dropped_at_any_point_loses_no_message() {
    for seed in 1..60 {
        let rt = FakeRuntime::seeded(seed);
        let child = rt.script_child(ChildSpec {
            stdout_capacity: 7,
            ..ChildSpec::default()
        });
        let script_rt = rt.clone();
        rt.spawn_task(async move {
            let mut child = child;
            let mut rng = Rng(seed);
            for i in 0..300 {
                // Lines cut across writes, with pauses between the pieces.
                let line = format!("message {i}\n");
                let cut = rng.below(line.len() as u64) as usize;
                child
                    .stdout
                    .write_all(&line.as_bytes()[..cut])
                    .await
                    .unwrap();
                script_rt.sleep(Duration::from_millis(rng.below(3))).await;
                child
                    .stdout
                    .write_all(&line.as_bytes()[cut..])
                    .await
                    .unwrap();
            }
            child.exit(0);
        });
        rt.block_on(async {
            let mut transport = spawn(plain_config());
            let mut rng = Rng(seed * 7 + 1);
            let mut got = Vec::new();
            let mut dropped = 0;
            loop {
                // A `select!` against a short timer: the recv loses as often
                // as it wins, dropped wherever it stood.
                match within(&rt, Duration::from_millis(rng.below(3)), transport.recv()).await {
                    None => dropped += 1,
                    Some(Some(Received::Message(m))) => got.push(m.as_str().unwrap().to_owned()),
                    Some(Some(Received::Exited(_))) => {}
                    Some(Some(other)) => panic!("{other:?}"),
                    Some(None) => break,
                }
            }
            let want: Vec<_> = (0..300).map(|i| format!("message {i}")).collect();
            assert_eq!(got, want, "seed {seed}");
            assert!(dropped > 0, "seed {seed}: no recv was ever dropped");
        });
    }
}

#[test]
fn c08_a_send_dropped_at_any_point_queued_the_whole_message_or_nothing() {
    for seed in 1..40 {
        let rt = FakeRuntime::seeded(seed);
        let child = rt.script_child(ChildSpec {
            stdin_capacity: 512,
            ..ChildSpec::default()
        });
        let script_rt = rt.clone();
        let input = Arc::new(Mutex::new(Vec::new()));
        let read = Arc::clone(&input);
        rt.spawn_task(async move {
            // A slow reader: 512 bytes every 10 ms.
            let mut child = child;
            loop {
                script_rt.sleep(10 * MS).await;
                let chunk = child.stdin.take_available();
                read.lock().unwrap().extend_from_slice(&chunk);
                if chunk.is_empty() && child.stdin.is_writer_closed() {
                    break;
                }
            }
            child.exit(0);
        });
        let sent = rt.block_on(async {
            let mut config = plain_config();
            config.send_high_water(4096);
            let transport = spawn(config);
            let mut rng = Rng(seed);
            let mut sent = Vec::new();
            let mut dropped = 0;
            for i in 0..120 {
                let msg = format!(
                    "{{\"n\":{i},\"pad\":\"{}\"}}",
                    "p".repeat(rng.below(3000) as usize)
                );
                match within(
                    &rt,
                    Duration::from_millis(rng.below(15)),
                    transport.send(msg.clone()),
                )
                .await
                {
                    Some(Ok(())) => sent.push(msg),
                    Some(Err(err)) => panic!("{err}"),
                    None => dropped += 1,
                }
            }
            assert!(dropped > 0, "seed {seed}: no send was ever dropped");
            transport.shutdown().await.unwrap();
            sent
        });
        let input = String::from_utf8(input.lock().unwrap().clone()).unwrap();
        let lines: Vec<_> = input.lines().collect();
        assert_eq!(
            lines, sent,
            "seed {seed}: exactly the sends that completed, whole"
        );
    }
}

/// C07 with clones: a sink that has not looked at the room since another
/// sender took the last of it may queue one message past the high-water
/// mark (as when the room goes between its `poll_ready` and `start_send`),
/// and then waits, however often it is asked. The child reads nothing, so
/// no room opens meanwhile: on real pipes Windows gives no such moment, as
/// its pipe writer thread keeps moving bytes after a send was refused.
#[test]
fn c07_the_sink_goes_past_the_bound_by_one_message_at_most_when_another_sender_took_the_room() {
    const TRIES: usize = 16;
    let rt = FakeRuntime::new();
    let child = rt.script_child(ChildSpec {
        stdin_capacity: 1000,
        ..ChildSpec::default()
    });
    let (fed, queued_by_sender) = rt.block_on(async {
        let mut config = plain_config();
        config.send_high_water(4096);
        let (sender, _receiver) = spawn(config).split();
        let mut sink = sender.clone();
        let line = "x".repeat(999);
        let mut sent = 0;
        while once(sender.send(line.as_str())).await.is_some() {
            sent += 1;
            assert!(sent <= 8, "a child reading nothing never made send wait");
        }
        let fed = poll_fn(|cx| {
            let fed = (0..TRIES)
                .filter(|_| {
                    let ready = Pin::new(&mut sink).poll_ready(cx).is_ready();
                    if ready {
                        Pin::new(&mut sink)
                            .start_send(Bytes::from(line.clone()))
                            .expect("a valid line is queued");
                    }
                    ready
                })
                .count();
            Poll::Ready(fed)
        })
        .await;
        (fed, sent)
    });
    assert_eq!(child.stdin.unread(), 1000, "the pipe is full");
    assert!(
        queued_by_sender >= 4,
        "only {queued_by_sender} sends got in"
    );
    assert!(fed <= 1, "{fed} messages fed past a full queue");
}

/// The lines the tests below send: 500 bytes with the `\n`, to a child
/// whose stdin holds 1000, through a queue of 2000 (`room_config`).
const ROOM_LINE: usize = 499;

fn room_config() -> Config {
    let mut config = plain_config();
    config.send_high_water(2000);
    config
}

/// Sends lines until one has to wait for room, and lets the background
/// task run until it waits too; then returns how many got in, and a send
/// polled once, waiting for room (registered for the pipe's wake-up).
async fn send_until_one_waits<'a>(
    rt: &FakeRuntime,
    transport: &'a Fake,
    line: &'a str,
) -> (
    usize,
    Pin<Box<impl Future<Output = Result<(), childwire_async::SendError<&'a str>>> + 'a>>,
) {
    let mut sent = 0;
    while once(transport.send(line)).await.is_some() {
        sent += 1;
        assert!(sent <= 16, "a child reading nothing never made send wait");
    }
    // Every task runs before virtual time moves: the background task tries
    // the full pipe and waits, so no wake-up of it is left pending.
    rt.sleep(MS).await;
    let mut waiting = Box::pin(transport.send(line));
    assert!(once(waiting.as_mut()).await.is_none(), "the queue is full");
    (sent, waiting)
}

/// Reads the child's stdin as it comes until `total` bytes arrived;
/// `false` if a second of virtual time passed first.
async fn child_reads(
    rt: &FakeRuntime,
    child: &mut support::FakeChild,
    mut read: usize,
    total: usize,
) -> bool {
    within(rt, Duration::from_secs(1), async {
        while read < total {
            read += child.stdin.take_available().len();
            rt.sleep(MS).await;
        }
    })
    .await
    .is_some()
}

/// How a send waiting for room stops waiting.
#[derive(Debug, Clone, Copy)]
enum RoomWaitEnds {
    /// Room comes: it writes (filling the pipe again) and gets in.
    GetsIn,
    /// The pipe's wake-up comes for it, but it is dropped before it is
    /// polled again.
    Cancelled,
}

/// Either way a send waiting for room stops waiting, what is still queued
/// is the background flush's, and reaches the child with no other send or
/// recv.
fn a_send_waiting_for_room_leaves_nothing_stuck(ends: RoomWaitEnds) {
    let rt = FakeRuntime::new();
    let mut child = rt.script_child(ChildSpec {
        stdin_capacity: 1000,
        ..ChildSpec::default()
    });
    rt.block_on(async {
        let transport = spawn(room_config());
        let line = "x".repeat(ROOM_LINE);
        let (mut sent, waiting) = send_until_one_waits(&rt, &transport, &line).await;
        // Room: the pipe's wake-up goes to this task.
        let read = child.stdin.take_available().len();
        let in_pipe = match ends {
            RoomWaitEnds::GetsIn => {
                waiting.await.expect("sent once there was room");
                sent += 1;
                read + 1000
            }
            RoomWaitEnds::Cancelled => {
                drop(waiting);
                read
            }
        };
        let total = sent * (ROOM_LINE + 1);
        assert!(total > in_pipe, "{ends:?}: bytes are left queued");
        assert!(
            child_reads(&rt, &mut child, read, total).await,
            "{ends:?}: what was left queued never reached the child"
        );
    });
}

#[test]
fn c07_what_a_send_that_waited_for_room_left_queued_reaches_the_child_with_no_further_call() {
    a_send_waiting_for_room_leaves_nothing_stuck(RoomWaitEnds::GetsIn);
}

#[test]
fn c08_a_send_cancelled_while_waiting_for_room_leaves_the_queue_to_the_background_flush() {
    a_send_waiting_for_room_leaves_nothing_stuck(RoomWaitEnds::Cancelled);
}

/// `fut` polled once: its value if it was ready, else `None` (and `fut`
/// dropped, as `now_or_never` drops it).
async fn once<T>(fut: impl Future<Output = T>) -> Option<T> {
    let mut fut = pin!(fut);
    poll_fn(|cx| {
        Poll::Ready(match fut.as_mut().poll(cx) {
            Poll::Ready(value) => Some(value),
            Poll::Pending => None,
        })
    })
    .await
}

/// Whether a sender writes is decided from state, never from time (C32):
/// the first message since the child was last read from is written by its
/// sender at once; one right behind it is left queued, and the background
/// flush writes it with no further send or recv (C07); once the child's
/// answer is read, the next message is written at once again.
#[test]
fn c32_the_first_message_of_a_turn_is_written_by_its_sender_and_a_burst_by_the_background() {
    let rt = FakeRuntime::new();
    let mut child = rt.script_child(ChildSpec::default());
    rt.block_on(async {
        let mut transport = spawn(plain_config());
        transport.send("one").await.unwrap();
        assert_eq!(child.stdin.unread(), 4, "written by the send itself");
        transport.send("two").await.unwrap();
        assert_eq!(child.stdin.unread(), 4, "right behind it: queued");
        for _ in 0..100 {
            if child.stdin.unread() == 8 {
                break;
            }
            yield_now().await;
        }
        assert_eq!(child.stdin.unread(), 8, "written by the background flush");

        child.stdout.write_all(b"answer\n").await.unwrap();
        match transport.recv().await {
            Some(Received::Message(m)) => assert_eq!(&m.bytes()[..], b"answer"),
            other => panic!("expected the answer, got {other:?}"),
        }
        transport.send("three").await.unwrap();
        assert_eq!(child.stdin.unread(), 8 + 6, "a new turn: written at once");
        transport.send("four").await.unwrap();
        assert_eq!(child.stdin.unread(), 8 + 6, "right behind it: queued");
    });
}

/// The background task reads stderr when the pipe says it has something,
/// not on every round it runs for other work: on `async-io` a read that
/// finds nothing is a system call and a re-registration with the reactor.
#[test]
fn a_quiet_stderr_is_not_read_on_every_round_of_the_background_task() {
    let rt = FakeRuntime::new();
    let mut child = rt.script_child(ChildSpec::default());
    rt.block_on(async {
        let mut transport = spawn(plain_config());
        for _ in 0..100 {
            transport.send("one").await.unwrap();
            // Right behind it: left to the background flush, a round of
            // its own.
            transport.send("two").await.unwrap();
            yield_now().await;
        }
        assert_eq!(child.stdin.unread(), 100 * 8, "the flush ran");
        let polls = child.stderr.reader_polls();
        assert!(polls <= 2, "a quiet stderr was read {polls} times");

        // Once it says something, it is read.
        child.stderr.write_all(b"warming up\n").await.unwrap();
        yield_now().await;
        assert_eq!(child.stderr.unread(), 0, "read when it had something");
        child.exit(0);
        let report = expect_report(transport.recv().await);
        assert!(report.stderr_tail.contains("warming up"));
    });
}

/// A task's waker that counts its wake-ups.
#[derive(Default)]
struct CountWakes(std::sync::atomic::AtomicUsize);

impl std::task::Wake for CountWakes {
    fn wake(self: Arc<Self>) {
        self.0.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
    }
}

#[test]
fn a_caller_that_read_its_message_itself_is_not_woken_when_the_background_task_reads_the_next() {
    let rt = FakeRuntime::new();
    let mut child = rt.script_child(ChildSpec::default());
    rt.block_on(async {
        let mut transport = spawn(plain_config());
        child.stdout.write_all(b"ready\n").await.unwrap();
        // Received in a task of its own, which reads the pipe itself.
        let receiving = Arc::new(CountWakes::default());
        let waker = std::task::Waker::from(Arc::clone(&receiving));
        let mut cx = std::task::Context::from_waker(&waker);
        loop {
            match transport.receiver_mut().poll_recv(&mut cx) {
                Poll::Ready(Some(Received::Message(m))) => {
                    assert_eq!(&m[..], b"ready");
                    break;
                }
                Poll::Ready(other) => panic!("expected `ready`, got {other:?}"),
                Poll::Pending => yield_now().await,
            }
        }
        let woken = receiving.0.load(std::sync::atomic::Ordering::SeqCst);

        // The child's last line and its exit: the background task drains
        // the line while that task waits for nothing here.
        child.stdout.write_all(b"bye\n").await.unwrap();
        child.exit(0);
        let report = transport.exit_handle().wait().await.expect("a report");
        assert_eq!(report.exit, Exit::Code(0));
        assert_eq!(
            receiving.0.load(std::sync::atomic::Ordering::SeqCst),
            woken,
            "the task that had its message was woken for the next one it never asked for"
        );

        // Nothing was lost: the line, then the report.
        match transport.recv().await {
            Some(Received::Message(m)) => assert_eq!(&m[..], b"bye"),
            other => panic!("expected `bye`, got {other:?}"),
        }
        expect_report(transport.recv().await);
    });
}

// ---- a channel over any pipe pair ----

#[test]
fn c23_from_pipes_ends_with_none_at_eof_and_close_flushes_then_closes_the_write_side() {
    let rt = FakeRuntime::new();
    let (to_peer, mut peer_in) = pipe(16);
    let (mut peer_out, from_peer) = pipe(64 * 1024);
    let peer_read = Arc::new(Mutex::new(None));
    let seen = Arc::clone(&peer_read);
    let peer_rt = rt.clone();
    rt.spawn_task(async move {
        peer_out.write_all(b"a\nb\n").await.unwrap();
        drop(peer_out);
        // The peer reads slowly, so close() has to wait for the flush.
        peer_rt.sleep(Duration::from_secs(1)).await;
        let input = peer_in.read_to_end().await;
        *seen.lock().unwrap() = Some((peer_rt.elapsed(), input));
    });
    rt.block_on(async {
        let mut channel =
            Transport::<FakeRuntime>::from_pipes(from_peer, to_peer, &ChannelConfig::default())
                .expect("inside the fake runtime");
        for i in 0..10 {
            channel.send(format!("m{i}")).await.unwrap();
        }
        channel.close().await.expect("the write side closes");
        let closed_at = rt.elapsed();
        assert!(
            closed_at >= Duration::from_secs(1),
            "close waited for the peer to read"
        );
        let err = channel.send("late").await.unwrap_err();
        assert_eq!(err.kind(), SendErrorKind::Closed(Closed::Closing));
        let mut got = Vec::new();
        while let Some(item) = channel.recv().await {
            match item {
                Received::Message(m) => got.push(m.as_str().unwrap().to_owned()),
                other => panic!("{other:?}"),
            }
        }
        assert_eq!(got, ["a", "b"]);
        assert!(channel.recv().await.is_none(), "None stays None");
        assert_eq!(
            channel.shutdown().await,
            Err(childwire_async::ShutdownError::NoChild)
        );
        // The peer reads the rest of what close() flushed, then its EOF.
        while peer_read.lock().unwrap().is_none() {
            rt.sleep(MS).await;
        }
    });
    let (_, input) = peer_read.lock().unwrap().take().expect("the peer saw EOF");
    let want: String = (0..10).map(|i| format!("m{i}\n")).collect();
    assert_eq!(String::from_utf8(input).unwrap(), want);
}

/// Requests sent one at a time, each after the peer's answer to the one
/// before, are written by their sender: the background task of a channel
/// (its flush) has nothing to do and must not be woken for each of them (on
/// a real runtime, a wake-up of another thread per message). Counted against
/// the same loop of answers with no requests, so only the polls the sends
/// cause are compared.
#[test]
fn c07_lone_requests_written_by_their_sender_do_not_wake_the_channel_background_task() {
    const REQUESTS: u64 = 50;
    let rt = FakeRuntime::new();
    let (to_peer, mut peer_in) = pipe(64 * 1024);
    let (mut peer_out, from_peer) = pipe(64);
    rt.block_on(async {
        let mut channel =
            Transport::<FakeRuntime>::from_pipes(from_peer, to_peer, &ChannelConfig::default())
                .expect("inside the fake runtime");
        // Settle the background task's first polls before counting.
        rt.sleep(MS).await;
        let mut requests = Vec::new();
        let mut round = async |channel: &mut Fake, request: Option<u64>| {
            rt.sleep(MS).await;
            if let Some(i) = request {
                channel.send(format!("request {i}")).await.unwrap();
                requests.extend(peer_in.take_available());
            }
            peer_out.write_all(b"answer\n").await.unwrap();
            match channel.recv().await {
                Some(Received::Message(m)) => assert_eq!(&m.bytes()[..], b"answer"),
                other => panic!("expected the answer, got {other:?}"),
            }
        };
        let before = rt.polls();
        for _ in 0..REQUESTS {
            round(&mut channel, None).await;
        }
        let idle = rt.polls() - before;
        let before = rt.polls();
        for i in 0..REQUESTS {
            round(&mut channel, Some(i)).await;
        }
        let sending = rt.polls() - before;
        assert!(
            sending <= idle + 2,
            "{REQUESTS} lone requests took {sending} task polls against {idle} for the same \
             loop without them: the background task was woken for writes it did not make"
        );
        let want: String = (0..REQUESTS).map(|i| format!("request {i}\n")).collect();
        assert_eq!(
            String::from_utf8(requests).unwrap(),
            want,
            "each written at once"
        );
    });
}

/// A writer that holds what it takes and passes it to `pipe` only when
/// flushed or shut down (`BufWriter`, or stdout behind smol's `Unblock`);
/// dropped unflushed, it loses it. With `one_in_flight`, a write first
/// waits for what it holds to go through, like Tokio's stdin of a Windows
/// child (a blocking thread behind it): a write is taken whole while idle,
/// then everything waits until it reached the pipe.
struct Buffering {
    held: Vec<u8>,
    pipe: support::PipeWriter,
    one_in_flight: bool,
}

impl Buffering {
    fn new(pipe: support::PipeWriter, one_in_flight: bool) -> Self {
        Self {
            held: Vec::new(),
            pipe,
            one_in_flight,
        }
    }

    fn poll_through(&mut self, cx: &mut std::task::Context<'_>) -> Poll<std::io::Result<()>> {
        while !self.held.is_empty() {
            let n = std::task::ready!(childwire_async::PipeWrite::poll_write(
                &mut self.pipe,
                cx,
                &self.held
            ))?;
            self.held.drain(..n);
        }
        Poll::Ready(Ok(()))
    }
}

impl childwire_async::PipeWrite for Buffering {
    fn poll_write(
        &mut self,
        cx: &mut std::task::Context<'_>,
        buf: &[u8],
    ) -> Poll<std::io::Result<usize>> {
        if self.one_in_flight {
            std::task::ready!(self.poll_through(cx))?;
        }
        self.held.extend_from_slice(buf);
        Poll::Ready(Ok(buf.len()))
    }

    fn poll_flush(&mut self, cx: &mut std::task::Context<'_>) -> Poll<std::io::Result<()>> {
        self.poll_through(cx)
    }

    fn poll_shutdown(&mut self, cx: &mut std::task::Context<'_>) -> Poll<std::io::Result<()>> {
        self.poll_through(cx)
    }
}

#[test]
fn c23_flush_and_close_wait_for_a_buffering_writer_to_pass_everything_on() {
    let rt = FakeRuntime::new();
    let (to_peer, mut peer_in) = pipe(4);
    let (peer_out, from_peer) = pipe(16);
    let writer = Buffering::new(to_peer, false);
    let peer_rt = rt.clone();
    let peer = rt.spawn_joinable(async move {
        let _keep_open = peer_out;
        // Reads slowly, a few bytes at a time: the writer's flush waits.
        let mut got = Vec::new();
        loop {
            peer_rt.sleep(MS).await;
            got.extend(peer_in.take_available());
            if peer_in.is_writer_closed() && peer_in.unread() == 0 {
                return got;
            }
        }
    });
    let peer_in_probe = rt.block_on(async {
        let channel =
            Transport::<FakeRuntime>::from_pipes(from_peer, writer, &ChannelConfig::default())
                .expect("inside the fake runtime");
        channel.send("first").await.unwrap();
        channel.send("second").await.unwrap();
        channel.flush().await.expect("flushed");
        let flushed_at = rt.elapsed();
        assert!(
            flushed_at >= 3 * MS,
            "flush waited for the writer's own flush"
        );
        channel.send("last").await.unwrap();
        channel.close().await.expect("closed");
        peer.await
    });
    assert_eq!(
        String::from_utf8(peer_in_probe).unwrap(),
        "first\nsecond\nlast\n"
    );
}

#[test]
fn c07_the_write_timeout_fires_when_a_taken_write_never_goes_through() {
    const TIMEOUT: Duration = Duration::from_millis(200);
    let rt = FakeRuntime::new();
    let (to_peer, peer_in) = pipe(16);
    let (peer_out, from_peer) = pipe(16);
    let writer = Buffering::new(to_peer, true);
    rt.block_on(async {
        let mut config = ChannelConfig::default();
        config.send_high_water = 64 * 1024;
        config.write_timeout = Some(TIMEOUT);
        let channel = Transport::<FakeRuntime>::from_pipes(from_peer, writer, &config)
            .expect("inside the fake runtime");
        let payload = "x".repeat(16 * 1024);
        // The first write is taken; its flush never ends, so the background
        // flush stays armed. The ones after it are written into the stuck
        // writer by the sender that finds a batch queued, or no room.
        channel.send(payload.as_str()).await.unwrap();
        rt.sleep(MS).await;
        let started = rt.elapsed();
        let err = loop {
            match within(&rt, Duration::from_secs(5), channel.send(payload.as_str())).await {
                Some(Ok(())) => {}
                Some(Err(err)) => break err,
                None => panic!("a send waited 5 s: the write timeout never fired"),
            }
        };
        assert!(
            matches!(err.kind(), SendErrorKind::Closed(Closed::Stalled { .. })),
            "{err}"
        );
        let failed_at = rt.elapsed() - started;
        assert_eq!(
            failed_at, TIMEOUT,
            "the timeout runs from the first write into the stuck writer"
        );
    });
    drop((peer_in, peer_out));
}

#[test]
fn c24_spawning_outside_the_fake_runtime_fails_before_anything_starts() {
    let rt = FakeRuntime::new();
    let _child = rt.script_child(ChildSpec::default());
    let err =
        Transport::<FakeRuntime>::spawn(&Command::new("fake-server"), plain_config()).unwrap_err();
    assert!(err.to_string().contains("fake runtime"), "{err}");
    assert!(rt.spawned().is_empty());
}

/// What the receive bound held back in stdout at the exit is the
/// caller's, however long it takes to come for it. With real pipe reads: the
/// caller's one `recv` read a pipe's worth of tiny lines, which alone costs
/// more than the bound, so the next pipe's worth waits in the pipe through
/// the exit and past the 1 s drain grace.
#[test]
fn c04_lines_held_back_by_the_receive_bound_are_not_lost_when_the_caller_is_away_past_drain_grace()
{
    const LINES: usize = 64 * 1024; // two pipes' worth
    let rt = FakeRuntime::new();
    let mut child = rt.script_child(ChildSpec::default());
    rt.spawn_task(async move {
        child.stdout.write_all(&b"x\n".repeat(LINES)).await.unwrap();
        child.exit(0);
    });
    let (received, report) = rt.block_on(async {
        let mut config = plain_config();
        config.recv_high_water(1024 * 1024);
        let mut transport = spawn(config);
        let mut received =
            usize::from(matches!(transport.recv().await, Some(Received::Message(_))));
        // Away for longer than the drain grace.
        rt.sleep(Duration::from_secs(10)).await;
        let report = loop {
            match transport.recv().await {
                Some(Received::Message(_)) => received += 1,
                other => break expect_report(other),
            }
        };
        (received, report)
    });
    assert_eq!(received, LINES, "{report}");
    // The report was made once, when the end was decided at the drain
    // grace: the caller held stdout back then, and it says so.
    assert!(report.stdout_held_back, "{report}");
    assert!(report.counters.messages_in < LINES as u64, "{report}");
    assert_eq!(
        report.unreceived_messages,
        report.counters.messages_in - 1,
        "all but the first one read was waiting: {report}"
    );
}

/// The other side of the previous test: when something the child started
/// keeps stdout open, the held-back lines are still delivered as the caller
/// drains, and then the report comes (saying the pipes were held) instead
/// of waiting for an EOF that never comes.
#[test]
fn c04_held_back_lines_then_the_report_when_a_grandchild_keeps_stdout_open() {
    const LINES: usize = 32 * 1024;
    let rt = FakeRuntime::new();
    let mut child = rt.script_child(ChildSpec {
        stdout_max_read: 64,
        ..ChildSpec::default()
    });
    let stdout = child.stdout.probe();
    rt.spawn_task(async move {
        child.stdout.write_all(&b"x\n".repeat(LINES)).await.unwrap();
        // Held open, silent, for ever.
        std::mem::forget(child.exit_leaving_stdout(0));
    });
    let (received, report) = rt.block_on(async {
        let mut config = plain_config();
        config.recv_high_water(8192);
        let mut transport = spawn(config);
        rt.sleep(Duration::from_secs(10)).await;
        assert!(stdout.unread() > 0, "the bound held lines back");
        let mut received = 0;
        let report = loop {
            match transport.recv().await {
                Some(Received::Message(_)) => received += 1,
                other => break expect_report(other),
            }
        };
        assert!(transport.recv().await.is_none());
        (received, report)
    });
    assert_eq!(received, LINES);
    assert!(!report.pipes_drained, "{report}");
}

/// After the child's exit the background task reads stdout to its end.
/// When something the child started keeps it open and silent, each read
/// finds nothing: the task must then wait for the pipe (or the drain
/// grace), not read again at once. It did read again at once: a read that
/// found nothing woke the receiver's waiters, the task itself among them,
/// so time never moved here (a livelock), and a real runtime ran the task
/// flat out until the sweep ended the holder or the grace ran out.
#[test]
fn c04_a_stdout_held_open_after_the_exit_is_waited_for_not_read_in_a_loop() {
    let rt = FakeRuntime::new();
    let mut child = rt.script_child(ChildSpec::default());
    let probe = child.stdout.probe();
    rt.spawn_task(async move {
        child.stdout.write_all(b"{}\n").await.unwrap();
        std::mem::forget(child.exit_leaving_stdout(0));
    });
    let (report, waited) = rt.block_on(async {
        let mut config = plain_config();
        config.drain_grace(500 * MS);
        let mut transport = spawn(config);
        assert!(matches!(transport.recv().await, Some(Received::Message(_))));
        let exited = rt.elapsed();
        let report = expect_report(transport.recv().await);
        (report, rt.elapsed() - exited)
    });
    assert!(!report.pipes_drained, "{report}");
    assert_eq!(waited, 500 * MS, "the drain grace, from the exit: {report}");
    // A handful (the receiver's and the task's, 6 here), not one per
    // instant of the grace.
    let reads = probe.reader_polls();
    assert!(reads <= 8, "{reads} reads of a pipe that had one line");
}

/// Holding lines back for the receiver must not hold the shutdown back: a
/// caller that awaits `shutdown()` before receiving gets the report, and
/// the lines afterwards, then the receiver's copy of the report. (The
/// report comes one drain grace after the exit, not at it: the lifecycle
/// waits for stdout's EOF, which the caller's own backlog keeps it from
/// seeing.) The report says how far behind the caller was when it was
/// made: what waited for it, and that stdout was held back.
#[test]
fn c12_shutdown_is_not_held_back_by_lines_waiting_for_the_receiver() {
    const LINES: usize = 64 * 1024;
    let rt = FakeRuntime::new();
    let mut child = rt.script_child(ChildSpec::default());
    let stdout = child.stdout.probe();
    let script_rt = rt.clone();
    rt.spawn_task(async move {
        child.stdout.write_all(&b"x\n".repeat(LINES)).await.unwrap();
        child.stdin.writer_closed().await;
        script_rt.sleep(5 * MS).await;
        child.exit(0);
    });
    rt.block_on(async {
        let mut config = plain_config();
        config.recv_high_water(1024 * 1024);
        let mut transport = spawn(config);
        let mut received =
            usize::from(matches!(transport.recv().await, Some(Received::Message(_))));
        rt.sleep(Duration::from_secs(1)).await;
        let asked = rt.elapsed();
        let report = transport.shutdown().await.unwrap();
        let drain_grace = Duration::from_secs(1);
        assert_eq!(rt.elapsed() - asked, 5 * MS + drain_grace, "{report}");
        assert_eq!(report.elapsed, 5 * MS);
        // Nothing was read since the caller's one `recv`: what that read
        // brought, but the message it returned, waited for the caller.
        let read_lines = (2 * LINES - stdout.unread()) / 2;
        assert_eq!(
            report.unreceived_messages,
            read_lines as u64 - 1,
            "{report}"
        );
        assert_eq!(report.unreceived_bytes, report.unreceived_messages);
        assert!(report.stdout_held_back, "{report}");
        let shown = report.to_string();
        assert!(
            shown.contains(" had not been received, and more waited in stdout")
                && !shown.contains("held its pipes"),
            "{shown}"
        );
        let last = loop {
            match transport.recv().await {
                Some(Received::Message(_)) => received += 1,
                other => break expect_report(other),
            }
        };
        assert_eq!(received, LINES, "every line, after the report");
        assert_eq!(last, report, "one report, made once, for both");
    });
}

/// Held-back lines do not keep the background task alive: once the end is
/// reported, the receiver reads them itself, and dropping the transport
/// leaves nothing running.
#[test]
fn c14_dropping_the_transport_while_lines_are_held_back_ends_the_background_task() {
    let rt = FakeRuntime::new();
    let mut child = rt.script_child(ChildSpec::default());
    rt.spawn_task(async move {
        child
            .stdout
            .write_all(&b"x\n".repeat(64 * 1024))
            .await
            .unwrap();
        child.exit(0);
    });
    let stalled = rt.run(async {
        let mut config = plain_config();
        config.recv_high_water(1024 * 1024);
        let mut transport = spawn(config);
        let _ = transport.recv().await;
        // Past the exit and the drain grace, with a pipe's worth held back.
        rt.sleep(Duration::from_secs(5)).await;
        assert_eq!(
            rt.live_tasks(),
            0,
            "the background task ended with the report"
        );
        assert!(
            matches!(transport.recv().await, Some(Received::Message(_))),
            "the held-back lines are still there"
        );
        drop(transport);
        std::future::pending::<()>().await;
    });
    assert!(stalled.is_err());
    assert_eq!(rt.live_tasks(), 0);
}

#[test]
fn c38_the_silence_runs_from_the_last_stderr_line_exactly_and_a_partial_line_is_life_too() {
    use childwire_async::{StartupConfig, StartupVerdict};
    let rt = FakeRuntime::new();
    let child = rt.script_child(ChildSpec::default());
    let script_rt = rt.clone();
    rt.spawn_task(async move {
        let mut child = child;
        // Logs every 300 ms until 1.2 s, writes half a message at 1.4 s,
        // then hangs.
        for _ in 0..4 {
            script_rt.sleep(300 * MS).await;
            child.stderr.write_all(b"downloading\n").await.unwrap();
        }
        script_rt.sleep(200 * MS).await;
        child.stdout.write_all(b"{\"jsonrpc\":").await.unwrap();
        script_rt.sleep(Duration::from_secs(60)).await;
        child.exit(0);
    });
    let verdict = rt.block_on(async {
        let mut transport = spawn(plain_config());
        let mut config = StartupConfig::default();
        config.silence = Some(500 * MS);
        let verdict = transport.started(config).await;
        drop(transport);
        verdict
    });
    // 500 ms after the partial line at 1.4 s, each stderr line counted at
    // the instant it came (not when a timer fired and found it): else the
    // line of 1.2 s, found at 1.9 s, would stretch it to 2.4 s.
    assert_eq!(
        verdict,
        StartupVerdict::NoSignOfLife {
            silent_for: 500 * MS,
            after: 1900 * MS,
            showed_life: true,
            limit_reached: false,
        }
    );
}

#[test]
fn c38_a_channel_whose_peer_closes_before_a_message_says_so_and_one_that_answers_is_ready() {
    use childwire_async::{StartupConfig, StartupVerdict};
    let rt = FakeRuntime::new();
    let (to_peer, _peer_in) = pipe(1024);
    let (peer_out, from_peer) = pipe(1024);
    let peer_rt = rt.clone();
    rt.spawn_task(async move {
        peer_rt.sleep(200 * MS).await;
        drop(peer_out);
    });
    let verdict = rt.block_on(async {
        let mut channel =
            Transport::<FakeRuntime>::from_pipes(from_peer, to_peer, &ChannelConfig::default())
                .expect("inside the fake runtime");
        channel.started(StartupConfig::default()).await
    });
    assert_eq!(
        verdict,
        StartupVerdict::ClosedBeforeFirstMessage { after: 200 * MS }
    );

    let rt = FakeRuntime::new();
    let (to_peer, _peer_in) = pipe(1024);
    let (mut peer_out, from_peer) = pipe(1024);
    let peer_rt = rt.clone();
    rt.spawn_task(async move {
        peer_rt.sleep(300 * MS).await;
        peer_out.write_all(b"{\"hello\":1}\n").await.unwrap();
        peer_rt.sleep(Duration::from_secs(1)).await;
    });
    let (verdict, first) = rt.block_on(async {
        let mut channel =
            Transport::<FakeRuntime>::from_pipes(from_peer, to_peer, &ChannelConfig::default())
                .expect("inside the fake runtime");
        let verdict = channel.started(StartupConfig::default()).await;
        (verdict, channel.recv().await)
    });
    assert_eq!(verdict, StartupVerdict::Ready { after: 300 * MS });
    match first {
        Some(Received::Message(m)) => assert_eq!(m.bytes(), &b"{\"hello\":1}"[..]),
        other => panic!("the first message is kept for recv, got {other:?}"),
    }
}

#[test]
fn c38_the_callers_readiness_comes_at_its_message_and_earlier_messages_stretch_the_silence() {
    use childwire_async::{Message, StartupConfig, StartupVerdict};
    const ANSWER: &[u8] = br#"{"jsonrpc":"2.0","id":0,"result":{}}"#;
    let rt = FakeRuntime::new();
    let child = rt.script_child(ChildSpec::default());
    let script_rt = rt.clone();
    rt.spawn_task(async move {
        let mut child = child;
        // Two notifications 300 ms apart, then the answer at 900 ms: each
        // comes within the 500 ms of silence the one before allowed.
        for _ in 0..2 {
            script_rt.sleep(300 * MS).await;
            child
                .stdout
                .write_all(b"{\"jsonrpc\":\"2.0\",\"method\":\"notifications/message\"}\n")
                .await
                .unwrap();
        }
        script_rt.sleep(300 * MS).await;
        child.stdout.write_all(ANSWER).await.unwrap();
        child.stdout.write_all(b"\n").await.unwrap();
        script_rt.sleep(Duration::from_secs(60)).await;
        child.exit(0);
    });
    let (verdict, first, third) = rt.block_on(async {
        let mut transport = spawn(plain_config());
        let mut config = StartupConfig::default();
        config.silence = Some(500 * MS);
        let verdict = transport
            .started_with(config, |m: &Message| m.bytes() == ANSWER)
            .await;
        let first = transport.recv().await;
        transport.recv().await;
        let third = transport.recv().await;
        drop(transport);
        (verdict, first, third)
    });
    // Not at the first message (300 ms), not given up on at 800 ms.
    assert_eq!(verdict, StartupVerdict::Ready { after: 900 * MS });
    match first {
        Some(Received::Message(m)) => {
            assert!(m.bytes().ends_with(b"notifications/message\"}"), "{m:?}");
        }
        other => panic!("the first notification is kept for recv, got {other:?}"),
    }
    match third {
        Some(Received::Message(m)) => assert_eq!(m.bytes(), ANSWER),
        other => panic!("the answer is kept for recv, got {other:?}"),
    }
}

/// The kill of kill-on-drop is sent by the drop itself, as `tokio::process`
/// sends its own, and not left to the background task: with many children
/// dropped at once, the ones already dying take the CPU from the background
/// tasks, which then send the last kills late. The transport is told the PID
/// of a real `sleep`; the check runs inside the one poll of the test's
/// future, so no task (the background one included) runs between the drop
/// and the check.
#[test]
fn c14_the_kill_of_a_dropped_transport_is_sent_by_the_drop() {
    use std::os::unix::process::ExitStatusExt;
    /// Ends `sleep` should the test fail before the drop's kill did.
    struct Sleeper(std::process::Child);
    impl Drop for Sleeper {
        fn drop(&mut self) {
            let _ = self.0.kill();
            let _ = self.0.wait();
        }
    }
    let mut sleeper = Sleeper(
        std::process::Command::new("sleep")
            .arg("100")
            .spawn()
            .expect("spawn `sleep`"),
    );
    let rt = FakeRuntime::new();
    let child = rt.script_child(ChildSpec {
        pid: Some(sleeper.0.id()),
        ..ChildSpec::default()
    });
    let status = rt.block_on(async {
        let transport = spawn(plain_config());
        drop(transport);
        // No `.await` from here: the background task does not run.
        let deadline = std::time::Instant::now() + Duration::from_secs(5);
        let status = loop {
            if let Some(status) = sleeper.0.try_wait().expect("try_wait on `sleep`") {
                break status;
            }
            assert!(
                std::time::Instant::now() < deadline,
                "the child still runs 5 s after the drop: the drop sent no kill"
            );
            std::thread::yield_now();
        };
        child.exit_with(killed_by(9));
        rt.sleep(Duration::from_secs(10)).await;
        assert_eq!(rt.live_tasks(), 0, "the background task ended");
        status
    });
    assert_eq!(status.signal(), Some(9), "{status}");
}

/// The default config without pollution notices: these tests speak plain
/// text to check framing and lifecycle; `Config::default()` would name the
/// first line as pollution.
fn plain_config() -> Config {
    let mut config = Config::default();
    config.pollution(None);
    config
}
