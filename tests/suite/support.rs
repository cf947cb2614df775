//! What every area of the suite needs: spawning the child, receiving with deadlines, and proving
//! that no zombie and no orphan is left behind.

use std::future::Future;
use std::time::{Duration, Instant};

use childwire_conformance::{live_group_members, live_processes_with_env, pid_exists};

use super::rt::{
    self, Command, Config, EndedBy, Exit, ExitReport, Received, Receiver, Sender, StderrMode,
    Transport,
};

/// The child program, built by Cargo for this test target.
pub(super) const MISBEHAVE: &str = env!("CARGO_BIN_EXE_misbehave");

/// Bound for one step that takes milliseconds when things work; only a failure waits this long.
pub(super) const STEP: Duration = Duration::from_secs(20);

/// Bound for a whole ordinary test.
const TEST: Duration = Duration::from_secs(120);

/// How often [`eventually`] re-checks a condition nothing can notify us of.
const POLL: Duration = Duration::from_millis(5);

/// The variable that marks every process a test starts through [`misbehave`] (and what those
/// start, wherever they go): its value is the test's [`tag`].
pub(super) const TAG_VAR: &str = "CHILDWIRE_CONFORMANCE_TEST";

std::thread_local! {
    static TAG: std::cell::RefCell<Option<String>> = const { std::cell::RefCell::new(None) };
}

/// This test's tag: unique in the machine while it runs. Set on the test's thread by [`run`].
pub(super) fn tag() -> Option<String> {
    TAG.with(|tag| tag.borrow().clone())
}

/// Runs one test on the runtime under test, bounded by a deadline so a hang fails instead of
/// stalling the whole suite.
pub(super) fn run(test: impl Future<Output = ()>) {
    run_for(TEST, test);
}

/// [`run`] with a longer bound, for tests that move hundreds of megabytes through a debug build.
///
/// Then checks that the test left no process running: nothing carrying its tag (in any process
/// group or session, re-parented or not) may outlive it.
pub(super) fn run_for(limit: Duration, test: impl Future<Output = ()>) {
    static SEQ: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    let tag = format!(
        "{}-{}",
        std::process::id(),
        SEQ.fetch_add(1, std::sync::atomic::Ordering::Relaxed)
    );
    TAG.with(|slot| *slot.borrow_mut() = Some(tag.clone()));
    rt::block_on(within(limit, "the whole test", test));
    TAG.with(|slot| *slot.borrow_mut() = None);
    let mut left = Vec::new();
    let gone = childwire_conformance::wait_until(STEP, || {
        left = live_processes_with_env(TAG_VAR, &tag);
        left.is_empty()
    });
    if !gone {
        for pid in &left {
            // Clean up before failing, so one failure does not leak into the machine.
            let _ = std::process::Command::new("kill")
                .args(["-KILL", &pid.to_string()])
                .status();
        }
        panic!("the test left processes running: {left:?}");
    }
}

/// `fut`'s output, or a panic naming `what` if it takes longer than `limit`.
pub(super) async fn within<F: Future>(limit: Duration, what: &str, fut: F) -> F::Output {
    match rt::timeout(limit, fut).await {
        Some(output) => output,
        None => panic!("timed out after {limit:?}: {what}"),
    }
}

/// Waits for a condition that has no event to await (a process leaving `/proc`), checking every
/// few milliseconds; panics naming `what` if it does not hold within `limit`.
pub(super) async fn eventually(limit: Duration, what: &str, mut cond: impl FnMut() -> bool) {
    let start = Instant::now();
    while !cond() {
        assert!(start.elapsed() < limit, "not within {limit:?}: {what}");
        // A runtime-neutral sleep: a timeout around a future that never completes.
        let _ = rt::timeout(POLL, std::future::pending::<()>()).await;
    }
}

/// `misbehave ARGS...` as a childwire command, marked with this test's [`tag`]. Its stderr is
/// captured quietly ([`StderrMode::Capture`]): shown (the default), the floods of the stderr
/// tests would fill the test output. `stderr::c09_by_default_*` checks the default.
pub(super) fn misbehave(args: &[&str]) -> Command {
    let mut cmd = Command::new(MISBEHAVE);
    cmd.args(args).stderr(StderrMode::Capture);
    if let Some(tag) = tag() {
        cmd.env(TAG_VAR, tag);
    }
    cmd
}

/// The default config with graces short enough that a test which fails by hanging in shutdown
/// fails fast. Tests of the graces set their own.
///
/// Pollution notices are off here: most of the suite speaks plain text through `cat` and
/// friends to test framing and lifecycle, not MCP; `pollution.rs` tests the default.
pub(super) fn config() -> Config {
    let mut config = Config::default();
    config.stdin_grace(Duration::from_secs(1));
    config.term_grace(Duration::from_secs(1));
    config.pollution(None);
    config
}

/// [`config`] with stdout pollution named (see `pollution.rs`).
pub(super) fn polluted_config() -> Config {
    let mut config = config();
    // What `Config::default()` gives a spawned child.
    config.pollution(Some(rt::PollutionPolicy::Deliver));
    config
}

/// Spawns or panics with the spawn error's message.
pub(super) fn start(cmd: &Command, config: Config) -> Transport {
    Transport::spawn(cmd, config).unwrap_or_else(|err| panic!("spawn failed: {err}"))
}

/// `misbehave ARGS...` with [`config`].
pub(super) fn start_misbehave(args: &[&str]) -> Transport {
    start(&misbehave(args), config())
}

/// The next item; panics if the stream ended (the exit report must come first) or stalls.
pub(super) async fn recv(t: &mut Transport) -> Received {
    within(STEP, "recv", t.recv())
        .await
        .expect("the stream ended without an exit report")
}

/// The next item, which must be a message; its bytes.
pub(super) async fn message(t: &mut Transport) -> Vec<u8> {
    match recv(t).await {
        Received::Message(m) => m.bytes().to_vec(),
        other => panic!("expected a message, got {other:?}"),
    }
}

/// The next item, which must be a UTF-8 message.
pub(super) async fn text(t: &mut Transport) -> String {
    String::from_utf8(message(t).await).expect("a UTF-8 message")
}

/// Sends `msg`, which must succeed.
pub(super) async fn send(t: &mut Transport, msg: &str) {
    within(STEP, "send", t.send(msg.as_bytes().to_vec()))
        .await
        .unwrap_or_else(|err| panic!("send {msg:?} failed: {err}"));
}

/// Sends `msg` and expects the echo child to answer with it.
pub(super) async fn roundtrip(t: &mut Transport, msg: &str) {
    send(t, msg).await;
    assert_eq!(text(t).await, msg);
}

/// Every message up to the exit report, the report, and the end of the stream after it.
pub(super) async fn drain_to_exit(t: &mut Transport) -> (Vec<Vec<u8>>, ExitReport) {
    let mut messages = Vec::new();
    loop {
        match recv(t).await {
            Received::Message(m) => messages.push(m.bytes().to_vec()),
            Received::Oversized(o) => panic!("unexpected oversized notice of {} bytes", o.len),
            Received::Exited(report) => {
                let after = within(STEP, "recv after the report", t.recv()).await;
                assert!(
                    after.is_none(),
                    "the report must be last, then got {after:?}"
                );
                return (messages, *report);
            }
            other => panic!("unexpected item: {other:?}"),
        }
    }
}

/// The child's PID, which (with the default process group) is also its group's ID.
pub(super) fn pid_of(t: &Transport) -> u32 {
    t.id().expect("a running child has a pid")
}

/// Graceful shutdown, then the no-zombie/no-orphan check; the report.
pub(super) async fn finish(t: Transport) -> ExitReport {
    let pid = pid_of(&t);
    let report = within(STEP, "shutdown", t.shutdown())
        .await
        .expect("shutdown");
    assert_reaped(pid).await;
    report
}

/// Shutdown through a split transport: the receiver is drained on a task of its own while the
/// sender asks for shutdown (a child answering until the end must not be stuck on a full pipe);
/// then the no-zombie/no-orphan check. The messages received and the report.
pub(super) async fn finish_split(
    pid: u32,
    tx: Sender,
    mut rx: Receiver,
) -> (Vec<Vec<u8>>, ExitReport) {
    let drained = rt::spawn(async move {
        let mut messages = Vec::new();
        loop {
            match within(STEP, "recv while shutting down", rx.recv()).await {
                Some(Received::Message(m)) => messages.push(m.bytes().to_vec()),
                Some(Received::Oversized(o)) => panic!("unexpected oversized line ({} B)", o.len),
                Some(Received::Exited(report)) => {
                    let after = within(STEP, "recv after the report", rx.recv()).await;
                    assert!(
                        after.is_none(),
                        "the report must be last, then got {after:?}"
                    );
                    return (messages, *report);
                }
                Some(other) => panic!("unexpected item: {other:?}"),
                None => panic!("the stream ended without an exit report"),
            }
        }
    });
    // Whatever shutdown returns, the report is checked from the receiver's side.
    let _ = within(STEP, "shutdown through the sender", tx.shutdown()).await;
    let out = within(STEP, "the receiver drains", drained).await;
    assert_reaped(pid).await;
    out
}

/// The child `pid` was reaped (no zombie) and nothing in its process group is still running
/// (no orphan: a grandchild left behind by a launcher would show here).
pub(super) async fn assert_reaped(pid: u32) {
    // Reaping comes before the report, so this holds at once, not eventually.
    assert!(!pid_exists(pid), "child {pid} has not been reaped");
    eventually(STEP, "the child's process group is empty", || {
        live_group_members(pid).is_empty()
    })
    .await;
}

/// Reads the first line of `misbehave grandchild ...`, `{"grandchild":PID}`: the PID.
pub(super) async fn grandchild_pid(t: &mut Transport) -> u32 {
    let line = text(t).await;
    line.strip_prefix("{\"grandchild\":")
        .and_then(|rest| rest.strip_suffix('}'))
        .and_then(|pid| pid.parse().ok())
        .unwrap_or_else(|| panic!("expected the grandchild's pid, got {line:?}"))
}

/// The report of a child that ignored stdin's EOF and was ended by the graceful step: SIGTERM on
/// Unix; on Windows `CTRL_BREAK_EVENT`, which a program with the default handler exits on with
/// `STATUS_CONTROL_C_EXIT`.
pub(super) fn assert_ended_by_the_graceful_step(report: &ExitReport) {
    assert_eq!(report.ended_by, EndedBy::Sigterm, "{report}");
    #[cfg(unix)]
    let expected = Exit::Signal(15);
    #[cfg(not(unix))]
    let expected = Exit::Code(STATUS_CONTROL_C_EXIT);
    assert_eq!(report.exit, expected, "{report}");
}

/// What a Windows program exits with on a console break it does not handle.
#[cfg(windows)]
const STATUS_CONTROL_C_EXIT: i32 = 0xC000_013A_u32 as i32;

/// The report of a child that ignored stdin's EOF and was ended by the shutdown's next step.
///
/// On Unix that is SIGTERM ([`assert_ended_by_the_graceful_step`]). On Windows the break only
/// reaches a child that shares the host's console, so it is either the break or, where it cannot
/// be sent, the job terminated after `term_grace` ([`assert_killed`]).
pub(super) fn assert_ended_after_stdin_grace(report: &ExitReport) {
    #[cfg(windows)]
    if report.ended_by == EndedBy::Sigkill {
        assert_killed(report);
        return;
    }
    assert_ended_by_the_graceful_step(report);
}

/// The report of a child that had to be killed: SIGKILL on Unix; on Windows its job was
/// terminated, with exit code 1.
pub(super) fn assert_killed(report: &ExitReport) {
    assert_eq!(report.ended_by, EndedBy::Sigkill, "{report}");
    if cfg!(unix) {
        assert_eq!(report.exit, Exit::Signal(9), "{report}");
        assert!(report.to_string().contains("SIGKILL"), "{report}");
    } else {
        assert_eq!(report.exit, Exit::Code(1), "{report}");
    }
}

/// Reads the first line of `misbehave tree ...`, `{"tree":[BRANCH,LEAF]}`: the two PIDs.
pub(super) async fn tree_pids(t: &mut Transport) -> [u32; 2] {
    let line = text(t).await;
    line.strip_prefix("{\"tree\":[")
        .and_then(|rest| rest.strip_suffix("]}"))
        .and_then(|pids| pids.split_once(','))
        .and_then(|(branch, leaf)| Some([branch.parse().ok()?, leaf.parse().ok()?]))
        .unwrap_or_else(|| panic!("expected the tree's pids, got {line:?}"))
}
