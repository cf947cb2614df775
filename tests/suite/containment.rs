//! Nothing the child started outlives the transport (C26), and no panic path leaves a child
//! behind (C27).
//!
//! The escapes are `misbehave grandchild` with `setsid`, `setpgid` or `double-fork`: a grandchild
//! that left the child's process group, which a group signal cannot reach. Linux finds it by the
//! child's pipes it holds, or (opt-in) by the child's cgroup; elsewhere these tests say they were
//! skipped and why.

use std::io::{BufRead, BufReader};
use std::time::{Duration, Instant};

use childwire_conformance::procfs::{self, proc_stat};
use childwire_conformance::{KillGroupOnDrop, cgroup_of, group_exists, pid_exists, process_alive};

use super::rt::{self, Containment, EndedBy, Exit, Received, Transport};
use super::support::*;

/// Skips the rest of a test, saying why, where /proc cannot show what it checks.
macro_rules! linux_only {
    () => {
        if !procfs::SUPPORTED {
            eprintln!("skipped: escaped descendants are found through /proc, on Linux only");
            return;
        }
    };
}

/// How the transport ends in a test.
#[derive(Clone, Copy, Debug)]
enum Ending {
    /// `shutdown()`: the graceful path.
    Shutdown,
    /// Every handle dropped without a shutdown.
    Drop,
}

/// Starts `misbehave grandchild ARGS`, checks the grandchild left the child's group, ends the
/// transport the `ending` way, and checks that the grandchild is gone too; the report, after a
/// shutdown.
async fn escapee_is_ended(args: &[&str], ending: Ending) -> Option<rt::ExitReport> {
    let mut all = vec!["grandchild"];
    all.extend_from_slice(args);
    let mut t = start_misbehave(&all);
    let pid = pid_of(&t);
    let grandchild = grandchild_pid(&mut t).await;
    roundtrip(&mut t, "still talking").await;
    let stat = proc_stat(grandchild).expect("the grandchild runs");
    assert_ne!(stat.pgrp, pid, "{args:?}: the grandchild left the group");
    let report = match ending {
        Ending::Shutdown => Some(finish(t).await),
        Ending::Drop => {
            drop(t);
            eventually(STEP, "the child is reaped after the drop", || {
                !pid_exists(pid)
            })
            .await;
            None
        }
    };
    eventually(STEP, "the escaped grandchild is ended", || {
        !process_alive(grandchild)
    })
    .await;
    report
}

/// What a shutdown report says when one escaped process held the pipes.
fn assert_reports_one_pipe_holder(report: &rt::ExitReport) {
    assert_eq!(report.stray_processes_ended, 1, "{report}");
    assert!(!report.pipes_drained, "the pipes were held at the exit");
    let text = report.to_string();
    assert!(
        text.contains("held its pipes") && text.contains("ended 1 process it left behind"),
        "{text}"
    );
}

#[test]
fn c26_a_setsid_grandchild_holding_the_pipes_is_ended_at_shutdown() {
    run(async {
        linux_only!();
        let started = Instant::now();
        let report = escapee_is_ended(&["setsid", "hold-pipes"], Ending::Shutdown)
            .await
            .expect("a report");
        assert_reports_one_pipe_holder(&report);
        assert_eq!(report.ended_by, EndedBy::StdinClose);
        assert_eq!(report.exit, Exit::Code(0));
        // Holders are found at the exit, not after waiting out the drain grace.
        assert!(
            started.elapsed() < Duration::from_secs(1),
            "{:?}",
            started.elapsed()
        );
    });
}

#[test]
fn c26_a_setsid_grandchild_holding_the_pipes_is_ended_at_drop() {
    run(async {
        linux_only!();
        escapee_is_ended(&["setsid", "hold-pipes", "ignore-term"], Ending::Drop).await;
    });
}

#[test]
fn c26_a_setpgid_grandchild_holding_the_pipes_is_ended_at_shutdown_and_at_drop() {
    run(async {
        linux_only!();
        let report = escapee_is_ended(&["setpgid", "hold-pipes"], Ending::Shutdown)
            .await
            .expect("a report");
        assert_reports_one_pipe_holder(&report);
        escapee_is_ended(&["setpgid", "hold-pipes"], Ending::Drop).await;
    });
}

#[test]
fn c26_a_double_fork_daemon_holding_stdout_is_ended_at_shutdown_and_at_drop() {
    run(async {
        linux_only!();
        let report = escapee_is_ended(&["double-fork", "hold-pipes"], Ending::Shutdown)
            .await
            .expect("a report");
        assert_reports_one_pipe_holder(&report);
        escapee_is_ended(&["double-fork", "hold-pipes", "ignore-term"], Ending::Drop).await;
    });
}

/// A grandchild that left the session, opened the child's stdout (or stderr) anew read-write and
/// closed its own stdio holds that pipe through a descriptor that is neither the child's write-only
/// end nor the host's read-only one: it is a holder all the same, ended and reported.
fn a_read_write_reopener_is_ended_and_reported(pipe: &str) {
    run(async {
        linux_only!();
        let report = escapee_is_ended(&["setsid", pipe], Ending::Shutdown)
            .await
            .expect("a report");
        assert_reports_one_pipe_holder(&report);
        assert_eq!(report.exit, Exit::Code(0));
        escapee_is_ended(&["setsid", pipe, "ignore-term"], Ending::Drop).await;
    });
}

#[test]
fn c34_a_grandchild_holding_stdout_read_write_is_ended_and_reported() {
    a_read_write_reopener_is_ended_and_reported("reopen-stdout-rw");
}

#[test]
fn c34_a_grandchild_holding_stderr_read_write_is_ended_and_reported() {
    a_read_write_reopener_is_ended_and_reported("reopen-stderr-rw");
}

/// A grandchild that left the session and holds the child's stdin, and no other pipe of it: the
/// child's stdout and stderr see no writer left, yet the grandchild is the child's leftover all the
/// same, found by the pipe it reads.
#[test]
fn c26_a_setsid_grandchild_holding_only_stdin_is_ended_at_shutdown_and_at_drop() {
    run(async {
        linux_only!();
        let report = escapee_is_ended(&["setsid", "hold-stdin"], Ending::Shutdown)
            .await
            .expect("a report");
        assert_reports_one_pipe_holder(&report);
        assert_eq!(report.exit, Exit::Code(0));
        escapee_is_ended(&["setsid", "hold-stdin", "ignore-term"], Ending::Drop).await;
    });
}

/// How long the hopping line may outlive the transport: well under the line's own limit (15 s
/// from its start, `misbehave`'s `HOP_LIFETIME`), so that a line the transport missed fails the
/// test rather than ending itself in time; well over the time init takes to reap the line's last
/// zombies, which keep the group alive until then.
const HOPPER_GONE: Duration = Duration::from_secs(8);

/// A grandchild that left the session, holds the child's pipes and keeps changing its PID (it
/// forks, the parent exits, and again, every 5 ms): no scan sees it in one place for long, yet
/// none of its line may outlive the transport, at shutdown or at drop.
#[test]
fn c26_a_setsid_grandchild_that_keeps_changing_its_pid_is_ended_at_shutdown_and_at_drop() {
    run(async {
        linux_only!();
        for ending in [Ending::Shutdown, Ending::Drop] {
            let mut t = start_misbehave(&["grandchild", "setsid", "hold-pipes", "hop"]);
            let first = grandchild_pid(&mut t).await;
            // Its whole line stays in the group its first process made: that group is ended when
            // this test ends, pass or fail.
            let _line = KillGroupOnDrop(first);
            roundtrip(&mut t, "still talking").await;
            // It hops: its first process is gone, its group is not. The live one is not looked
            // for: it outruns a listing of `/proc`.
            eventually(STEP, "the grandchild changes its PID", || {
                !process_alive(first) && group_exists(first)
            })
            .await;
            let ended = Instant::now();
            match ending {
                Ending::Shutdown => {
                    let report = finish(t).await;
                    assert_eq!(report.exit, Exit::Code(0), "{report}");
                    assert!(report.stray_processes_ended >= 1, "{report}");
                    assert!(!report.pipes_drained, "the pipes were held at the exit");
                }
                Ending::Drop => drop(t),
            }
            // Exact, however fast it hops: a group lives while any process of it does.
            let left = HOPPER_GONE.saturating_sub(ended.elapsed());
            eventually(left, "no process of the hopping line is left", || {
                !group_exists(first)
            })
            .await;
        }
    });
}

/// While the scan of a sweep runs, the driver does not wait for it: the runtime's other tasks go
/// on, and how long the report waits for the scan is the core's decision, with the time passed in.
/// Here a process older than the child (so never its descendant, and never ended) holds a writer on
/// the child's stdout: after the exit the scan looks for it, finds nothing to end, and stops once
/// its passes changed nothing for 200 ms. A driver that waited for the scan itself held its
/// executor thread that long (smol's global executor has one thread): a task beside it stalled.
#[test]
fn c32_a_running_sweep_stalls_no_other_task() {
    use std::io::Write;
    use std::sync::atomic::{AtomicBool, Ordering};
    use std::sync::{Arc, Mutex};
    const TICK: Duration = Duration::from_millis(10);
    run(async {
        linux_only!();
        // Started first: older than the child.
        let mut holder = std::process::Command::new("sh")
            .args([
                "-c",
                "read pid; exec 3>>/proc/$pid/fd/1; echo holding; exec sleep 60",
            ])
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .spawn()
            .expect("spawn sh");
        // Older by a clock tick at least (start times are counted in ticks): a child started
        // in the holder's tick is spawned again.
        let start_time = |pid: u32| -> Option<u64> {
            let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
            let rest = &stat[stat.rfind(')')? + 1..];
            rest.split_whitespace().nth(19)?.parse().ok()
        };
        let holder_started = start_time(holder.id()).expect("the holder's start time");
        let mut t = start_misbehave(&["echo"]);
        while start_time(pid_of(&t)).expect("the child's start time") <= holder_started {
            finish(t).await;
            t = start_misbehave(&["echo"]);
        }
        roundtrip(&mut t, "hello").await;
        let mut stdin = holder.stdin.take().expect("piped");
        writeln!(stdin, "{}", pid_of(&t)).expect("the pid to sh");
        let line = read_line_within(holder.stdout.take().expect("piped"), STEP);
        assert_eq!(
            line.as_deref().map(str::trim_end),
            Some("holding"),
            "sh holds the child's stdout"
        );

        let ticks = Arc::new(Mutex::new(Vec::new()));
        let stop = Arc::new(AtomicBool::new(false));
        let ticker = rt::spawn({
            let (ticks, stop) = (Arc::clone(&ticks), Arc::clone(&stop));
            async move {
                while !stop.load(Ordering::Relaxed) {
                    let _ = rt::timeout(TICK, std::future::pending::<()>()).await;
                    ticks.lock().expect("ticks").push(Instant::now());
                }
            }
        });
        let started = Instant::now();
        let report = finish(t).await;
        let ended = Instant::now();
        stop.store(true, Ordering::Relaxed);
        ticker.await;
        let _ = holder.kill();
        let _ = holder.wait();
        assert!(!report.pipes_drained, "{report}");
        let ticks = ticks.lock().expect("ticks");
        let (mut last, mut widest) = (started, Duration::ZERO);
        for &tick in ticks.iter().filter(|&&tick| tick <= ended) {
            widest = widest.max(tick - last);
            last = tick;
        }
        widest = widest.max(ended - last);
        // The scan alone goes on for 200 ms (`STILL_FOR`); a tick is 10 ms.
        assert!(
            widest < Duration::from_millis(100),
            "a task beside the shutdown stalled for {widest:?} (shutdown took {:?})",
            ended - started
        );
    });
}

#[test]
fn c26_a_clean_child_reports_nothing_left_behind() {
    run(async {
        let mut t = start_misbehave(&["echo"]);
        roundtrip(&mut t, "hello").await;
        let report = finish(t).await;
        assert_eq!(report.stray_processes_ended, 0);
        assert!(report.pipes_drained);
        assert!(!report.to_string().contains("left behind"), "{report}");
    });
}

/// `misbehave grandchild setsid` (no pipes held) in a cgroup of its own, or why not.
fn start_contained(args: &[&str]) -> Option<Transport> {
    let mut all = vec!["grandchild", "setsid"];
    all.extend_from_slice(args);
    let mut cmd = misbehave(&all);
    cmd.contain(Containment::Cgroup);
    match Transport::spawn(&cmd, config()) {
        Ok(t) => Some(t),
        Err(err) if err.kind() == std::io::ErrorKind::Unsupported || !procfs::SUPPORTED => {
            // Only where no cgroup v2 sub-tree can be created here: the error says why.
            eprintln!("skipped: {err}");
            None
        }
        Err(err) => panic!("a contained spawn failed for another reason: {err}"),
    }
}

/// The cgroup v2 directory named by `path` (as in /proc/PID/cgroup), under the usual mounts.
fn cgroup_dir_exists(path: &str) -> bool {
    ["/sys/fs/cgroup", "/sys/fs/cgroup/unified"]
        .iter()
        .any(|mount| std::path::Path::new(&format!("{mount}{path}")).is_dir())
}

#[test]
fn c26_cgroup_containment_ends_a_grandchild_that_holds_no_pipe() {
    run(async {
        for ending in [Ending::Shutdown, Ending::Drop] {
            let Some(mut t) = start_contained(&[]) else {
                return;
            };
            let pid = pid_of(&t);
            let grandchild = grandchild_pid(&mut t).await;
            let cgroup = cgroup_of(grandchild).expect("the grandchild's cgroup");
            assert!(cgroup.contains("/childwire-"), "{cgroup}");
            assert_eq!(cgroup_of(pid).as_deref(), Some(cgroup.as_str()));
            match ending {
                Ending::Shutdown => {
                    let report = finish(t).await;
                    assert_eq!(report.stray_processes_ended, 1, "{report}");
                    assert!(report.pipes_drained, "it held no pipe");
                }
                Ending::Drop => drop(t),
            }
            eventually(STEP, "the contained grandchild is ended", || {
                !process_alive(grandchild)
            })
            .await;
            eventually(STEP, "the child's cgroup is removed", || {
                !cgroup_dir_exists(&cgroup)
            })
            .await;
            assert!(!pid_exists(pid) || matches!(ending, Ending::Drop));
        }
    });
}

/// Reads one line from `pipe` on a thread, within `limit`.
fn read_line_within(pipe: std::process::ChildStdout, limit: Duration) -> Option<String> {
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let mut line = String::new();
        let _ = BufReader::new(pipe).read_line(&mut line);
        let _ = tx.send(line);
    });
    rx.recv_timeout(limit).ok()
}

#[test]
fn c26_parent_death_kills_the_child_when_the_host_is_sigkilled_not_when_its_worker_thread_exits() {
    run(async {
        // Windows: the child's job (kill-on-close) ends it when the host's handle closes.
        if !cfg!(any(target_os = "linux", windows)) {
            eprintln!("skipped: the parent-death signal is Linux's");
            return;
        }
        // The host spawns the child from a worker thread that exits, then proves the child still
        // answers, and prints its PID.
        let mut host = std::process::Command::new(env!("CARGO_BIN_EXE_pdeath-host"));
        host.args([rt::NAME, MISBEHAVE])
            .stdout(std::process::Stdio::piped());
        if let Some(tag) = tag() {
            host.env(TAG_VAR, tag);
        }
        let mut host = host.spawn().expect("spawn pdeath-host");
        let line = read_line_within(host.stdout.take().expect("piped"), STEP)
            .expect("the host reports its child");
        let child: u32 = line
            .trim()
            .strip_prefix("{\"child\":")
            .and_then(|rest| rest.strip_suffix('}'))
            .and_then(|pid| pid.parse().ok())
            .unwrap_or_else(|| panic!("the host said {line:?}"));
        assert!(process_alive(child), "the child outlived the worker thread");
        host.kill()
            .expect("SIGKILL (Windows: TerminateProcess) the host");
        host.wait().expect("reap the host");
        eventually(STEP, "the child dies with its host", || {
            !process_alive(child)
        })
        .await;
    });
}

#[test]
fn c27_a_dropped_runtime_leaves_no_zombie_and_the_receiver_gets_the_report() {
    run(async {
        let cmd = misbehave(&["ignore-eof"]);
        let started = rt::on_a_dropped_runtime(move || {
            let t = Transport::spawn(&cmd, config()).expect("spawn");
            let pid = t.id().expect("a pid");
            (t, pid)
        });
        let (mut t, pid) = match started {
            Ok(started) => started,
            Err(why) => {
                eprintln!("skipped: {why}");
                return;
            }
        };
        if procfs::SUPPORTED {
            // Reaped once the runtime was dropped, not left to a later one.
            eventually(STEP, "the child is reaped, not left a zombie", || {
                !pid_exists(pid)
            })
            .await;
            // And not by the drop, which does not wait for a death (a
            // runtime's shutdown never does): the child, alive when its
            // driver was dropped, was left to the late reaper's thread
            // (named before it runs anything, so by now).
            assert!(
                thread_names()
                    .iter()
                    .any(|name| name.starts_with("childwire-late")),
                "no late reaper thread: {:?}",
                thread_names()
            );
        }
        match within(STEP, "recv after the runtime was dropped", t.recv()).await {
            Some(Received::Exited(report)) => {
                assert_killed(&report);
                assert_eq!(
                    report.stray_processes_ended, 0,
                    "the child is no stray: {report}"
                );
            }
            other => panic!("expected the exit report, got {other:?}"),
        }
        assert!(
            within(STEP, "recv after the report", t.recv())
                .await
                .is_none()
        );
        match within(STEP, "shutdown after the end", t.shutdown()).await {
            Ok(report) => assert_killed(&report),
            Err(err) => panic!("shutdown after the end: {err}"),
        }
    });
}

#[test]
fn c34_a_pipe_holding_escapee_is_ended_when_the_runtime_is_dropped() {
    run(async {
        linux_only!();
        let tag = tag().expect("a tag");
        let tagged = tag.clone();
        let cmd = misbehave(&["grandchild", "setsid", "hold-pipes", "ignore-term"]);
        // The runtime is dropped only once the grandchild runs outside the child's group and is
        // asleep (it said it was ready: with the child gone before that, its own write would end
        // it). The sweep of the stopping driver (handed to a thread, not waited for) must find it
        // by the pipes it holds.
        let started = rt::on_a_dropped_runtime(move || {
            let t = Transport::spawn(&cmd, config()).expect("spawn");
            let pid = t.id().expect("a pid");
            let escaped = childwire_conformance::wait_until(STEP, || {
                procfs::live_processes_with_env(TAG_VAR, &tagged)
                    .into_iter()
                    .filter_map(proc_stat)
                    .any(|stat| stat.pgrp != pid && stat.pid != pid && stat.state == 'S')
            });
            (t, escaped)
        });
        let (t, escaped) = match started {
            Ok(started) => started,
            Err(why) => {
                eprintln!("skipped: {why}");
                return;
            }
        };
        assert!(escaped, "the grandchild left the child's group");
        drop(t);
        eventually(STEP, "nothing the child started is left", || {
            procfs::live_processes_with_env(TAG_VAR, &tag).is_empty()
        })
        .await;
    });
}

#[test]
fn c27_spawning_from_a_thread_outside_any_runtime_fails_first_or_works() {
    run(async {
        let cmd = misbehave(&["echo"]);
        let spawned = std::thread::spawn(move || Transport::spawn(&cmd, config()))
            .join()
            .expect("the thread");
        match spawned {
            // Tokio: no runtime there, and nothing was started.
            Err(err) => assert_eq!(err.kind(), std::io::ErrorKind::Unsupported, "{err}"),
            // smol, async-std: a global executor drives it from anywhere.
            Ok(mut t) => {
                roundtrip(&mut t, "from a plain thread").await;
                let report = finish(t).await;
                assert_eq!(report.exit, Exit::Code(0));
            }
        }
    });
}

/// The names of this process's threads (Linux truncates them to 15 bytes).
fn thread_names() -> Vec<String> {
    std::fs::read_dir("/proc/self/task")
        .into_iter()
        .flatten()
        .filter_map(|task| std::fs::read_to_string(task.ok()?.path().join("comm")).ok())
        .map(|name| name.trim_end().to_owned())
        .collect()
}
