//! Hosts that never leak and never hang (issue 39): the spawn ledger ends what a host killed with
//! SIGKILL left, and nothing that only reuses a PID; liveness tells a stopped server from a busy
//! one with real processes and the OS's CPU time; `EnvPolicy::LoginShell` gives the child the
//! login shell's `PATH`, and a shell that hangs fails within its timeout.
//!
//! Linux: the ledger and liveness need `/proc` and signals (macOS cannot prove an entry; Windows
//! ends a dead host's children by its job object). The login shell is Unix's.

#![cfg(target_os = "linux")]

use std::fs;
use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::{Duration, Instant};

use childwire_async::{
    Liveness, LivenessConfig, ReapConfig, ReapVerdict, Verdict, reap_leftovers, tree_cpu_time,
};
use childwire_conformance::{live_group_members, live_processes_with_env, process_alive};

use super::rt::{self, Received, Transport};
use super::support::{
    MISBEHAVE, STEP, TAG_VAR, eventually, finish, misbehave, pid_of, run, start, tag, within,
};

/// A directory of this test's own, empty.
fn scratch(what: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!(
        "childwire-hosts-{what}-{}-{}",
        rt::NAME,
        tag().expect("inside run")
    ));
    let _ = fs::remove_dir_all(&dir);
    fs::create_dir_all(&dir).expect("scratch dir");
    dir
}

/// The first line `child` prints, within [`STEP`].
fn first_line(child: &mut std::process::Child) -> String {
    let stdout = child.stdout.take().expect("piped");
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let mut line = String::new();
        let _ = BufReader::new(stdout).read_line(&mut line);
        let _ = tx.send(line);
    });
    rx.recv_timeout(STEP).expect("a line from the host")
}

/// The `.entry` files in `dir`.
fn entries(dir: &Path) -> Vec<PathBuf> {
    fs::read_dir(dir)
        .expect("list the ledger")
        .map(|file| file.expect("file").path())
        .filter(|path| path.extension().is_some_and(|ext| ext == "entry"))
        .collect()
}

#[test]
fn a_new_host_ends_the_three_processes_a_sigkilled_host_left_and_lists_them() {
    run(async {
        let dir = scratch("ledger");
        let ledger = dir.join("ledger");
        let mut host = std::process::Command::new(env!("CARGO_BIN_EXE_ledger-host"));
        host.args([rt::NAME, &ledger.to_string_lossy(), "sh", "-c"])
            .arg("sleep 1000 & sleep 1000")
            .stdout(Stdio::piped())
            .env(TAG_VAR, tag().expect("tagged"));
        let mut host = host.spawn().expect("spawn ledger-host");
        let line = first_line(&mut host);
        let child: u32 = line
            .trim()
            .strip_prefix("{\"child\":")
            .and_then(|rest| rest.split(',').next())
            .and_then(|pid| pid.parse().ok())
            .unwrap_or_else(|| panic!("the host said {line:?}"));
        // sh and its two sleeps, all in the group the child leads.
        eventually(STEP, "sh started both sleeps", || {
            live_group_members(child).len() == 3
        })
        .await;
        let three = live_group_members(child);
        host.kill().expect("SIGKILL the host");
        host.wait().expect("reap the host");
        assert!(
            three.iter().all(|&pid| process_alive(pid)),
            "the dead host's children live on: that is the leak the ledger ends"
        );
        assert_eq!(entries(&ledger).len(), 1, "the entry the host left");

        // The next host, at its start.
        let start = Instant::now();
        let reaped = reap_leftovers(&ledger, &ReapConfig::default()).expect("reap");
        let took = start.elapsed();
        assert_eq!(reaped.len(), 1, "{reaped:?}");
        let said = reaped[0].to_string();
        assert!(matches!(reaped[0].verdict, ReapVerdict::Ended(_)), "{said}");
        assert_eq!(reaped[0].ended, three, "{said}");
        assert_eq!(reaped[0].identity.pid, child);
        for pid in &three {
            assert!(said.contains(&pid.to_string()), "{said}");
        }
        assert!(
            took < ReapConfig::default().term_grace,
            "sh and sleep end at SIGTERM, no SIGKILL needed ({took:?}): {said}"
        );
        eventually(STEP, "all three are dead", || {
            three.iter().all(|&pid| !process_alive(pid))
        })
        .await;
        assert!(entries(&ledger).is_empty(), "the entry is removed");
        fs::remove_dir_all(&dir).expect("clean up");
    });
}

#[test]
fn a_ledger_entry_whose_pid_now_belongs_to_a_later_process_is_left_alone() {
    run(async {
        let dir = scratch("reused");
        // A process that holds the PID now, leading a group, with a member.
        let t = start(&misbehave(&["tree"]), super::support::config());
        let mut t = t;
        let pid = pid_of(&t);
        let tree = super::support::tree_pids(&mut t).await;
        let identity = childwire_async::identity_of(pid, true, None).expect("its identity");
        let started = identity.started.expect("Linux gives a start time");
        // The entry a dead host left for the PID's earlier holder: the same PID, an earlier start.
        let mut earlier = identity.clone().with_host(Some(u32::MAX - 1), Some(1));
        earlier.started = Some(started - 1);
        let ledger = childwire_async::Ledger::open(dir.join("ledger")).expect("open");
        let entry = ledger.record(&earlier).expect("record");
        let reaped = reap_leftovers(ledger.dir(), &ReapConfig::default()).expect("reap");
        assert_eq!(reaped.len(), 1);
        assert_eq!(reaped[0].verdict, ReapVerdict::PidReused, "{}", reaped[0]);
        assert!(reaped[0].ended.is_empty());
        assert!(!entry.path().exists(), "the stale entry is dropped");
        // Nothing of it was touched: the child and its tree still answer.
        assert!(process_alive(pid) && tree.iter().all(|&p| process_alive(p)));
        super::support::roundtrip(&mut t, r#"{"still":"here"}"#).await;
        finish(t).await;
        fs::remove_dir_all(&dir).expect("clean up");
    });
}

/// What [`watch`] saw: each verdict with when it came, and when the last sign of life was.
struct Watched {
    verdicts: Vec<(Instant, Verdict)>,
}

impl Watched {
    fn first(&self, verdict: Verdict) -> Option<Instant> {
        self.verdicts
            .iter()
            .find(|(_, v)| *v == verdict)
            .map(|(at, _)| *at)
    }
}

/// Drives `liveness` on `t` for up to `limit` (or until it says hung): pings are `{"ping":N}`
/// lines (an echoing child answers them), the CPU time is the tree's as the OS gives it.
async fn watch(t: &mut Transport, liveness: &mut Liveness, limit: Duration) -> Watched {
    let pid = pid_of(t);
    let end = Instant::now() + limit;
    let mut verdicts = Vec::new();
    let mut pings = 0;
    loop {
        let now = Instant::now();
        if now >= end {
            return Watched { verdicts };
        }
        liveness.handle_timeout(now);
        if liveness.poll_cpu(now) {
            let cpu = tree_cpu_time(pid, None)
                .expect("the child's CPU time")
                .expect("Linux gives it");
            liveness.handle_cpu(cpu, now);
        }
        if liveness.poll_ping(now) {
            pings += 1;
            within(STEP, "send a ping", t.send(format!("{{\"ping\":{pings}}}")))
                .await
                .expect("send a ping");
            liveness.handle_ping_sent(now);
        }
        while let Some(verdict) = liveness.poll_verdict() {
            verdicts.push((now, verdict));
            if verdict == Verdict::Hung {
                return Watched { verdicts };
            }
        }
        let wake = liveness.poll_timeout().unwrap_or(end).min(end);
        let wait = wake.saturating_duration_since(Instant::now());
        match rt::timeout(wait, t.recv()).await {
            None => {}
            Some(Some(Received::Message(m))) => {
                let now = Instant::now();
                if m.bytes().starts_with(b"{\"ping\"") {
                    liveness.handle_ping_answered(now);
                } else {
                    liveness.handle_output(now);
                }
            }
            Some(other) => panic!("unexpected item: {other:?}"),
        }
    }
}

fn liveness_config() -> LivenessConfig {
    let mut config = LivenessConfig::default();
    config.ping_every = Duration::from_millis(100);
    config.ping_timeout = Duration::from_millis(100);
    config.hung_after = Duration::from_millis(800);
    config.cpu_every = Duration::from_millis(50);
    config
}

#[test]
fn a_server_stopped_with_sigstop_is_declared_hung_within_the_configured_time() {
    run(async {
        let mut t = start(&misbehave(&["echo"]), super::support::config());
        let pid = pid_of(&t);
        let config = liveness_config();
        let mut liveness = Liveness::new(config.clone(), Instant::now());
        let answering = watch(&mut t, &mut liveness, Duration::from_millis(500)).await;
        assert_eq!(
            liveness.verdict(),
            Some(Verdict::Answering),
            "an echoing server answers its pings"
        );
        assert!(answering.first(Verdict::Hung).is_none());
        let status = std::process::Command::new("kill")
            .args(["-STOP", &pid.to_string()])
            .status()
            .expect("kill -STOP");
        assert!(status.success());
        let stopped = Instant::now();
        let watched = watch(&mut t, &mut liveness, 10 * config.hung_after).await;
        let hung = watched
            .first(Verdict::Hung)
            .expect("a stopped server is declared hung");
        // Hung exactly `hung_after` after its last sign of life (which came before the stop), and
        // only as late as the timer that noticed it fired: well within the configured time.
        assert!(liveness.last_sign() <= stopped + config.cpu_every);
        assert!(hung >= liveness.last_sign() + config.hung_after);
        assert!(
            hung - stopped <= config.hung_after + Duration::from_millis(500),
            "declared hung {:?} after the stop",
            hung - stopped
        );
        let _ = std::process::Command::new("kill")
            .args(["-CONT", &pid.to_string()])
            .status();
        finish(t).await;
    });
}

#[test]
fn a_server_computing_for_twice_the_hung_time_with_cpu_advancing_is_busy_not_hung() {
    run(async {
        let mut t = start(&misbehave(&["spin"]), super::support::config());
        let config = liveness_config();
        let mut liveness = Liveness::new(config.clone(), Instant::now());
        let watched = watch(&mut t, &mut liveness, 2 * config.hung_after).await;
        assert!(
            watched.first(Verdict::Hung).is_none(),
            "a computing server was declared hung: {:?}",
            watched.verdicts.iter().map(|(_, v)| v).collect::<Vec<_>>()
        );
        assert_eq!(liveness.verdict(), Some(Verdict::Busy));
        let cpu = tree_cpu_time(pid_of(&t), None)
            .expect("read")
            .expect("Linux gives it");
        assert!(
            cpu >= config.hung_after / 2,
            "it did compute: {cpu:?} of CPU"
        );
        // It reads no stdin: the shutdown's graces end it.
        let _ = within(STEP, "shutdown", t.shutdown()).await;
    });
}

/// A fake login shell in `dir`, run as `SHELL -l -i -c SCRIPT`: it prints a banner (which must
/// be ignored), runs `body`, then the script.
fn fake_shell(dir: &Path, body: &str) -> PathBuf {
    use std::os::unix::fs::PermissionsExt;
    let shell = dir.join("fake-shell");
    fs::write(
        &shell,
        format!(
            "#!/bin/sh\necho 'Welcome! Last login: yesterday'\n{body}\nexec /bin/sh -c \"$4\"\n"
        ),
    )
    .expect("write the fake shell");
    fs::set_permissions(&shell, fs::Permissions::from_mode(0o755)).expect("chmod");
    shell
}

/// Runs `login-host` with `shell` as `$SHELL`: its output lines.
fn login_host(shell: &Path, program: &str, prime_ms: Option<u64>) -> Vec<String> {
    let mut host = std::process::Command::new(env!("CARGO_BIN_EXE_login-host"));
    host.args([rt::NAME, program])
        .args(prime_ms.map(|ms| ms.to_string()))
        .env("SHELL", shell)
        .env(TAG_VAR, tag().expect("tagged"))
        .stdout(Stdio::piped());
    let out = host.output().expect("run login-host");
    assert!(out.status.success(), "login-host failed: {out:?}");
    String::from_utf8(out.stdout)
        .expect("utf-8")
        .lines()
        .map(str::to_owned)
        .collect()
}

#[test]
fn a_login_shell_that_sets_path_makes_a_tool_only_on_that_path_spawn() {
    run(async {
        use std::os::unix::fs::PermissionsExt;
        let dir = scratch("login-path");
        let tools = dir.join("tools");
        fs::create_dir_all(&tools).expect("tools dir");
        let tool = tools.join("tool-only-on-that-path");
        fs::write(&tool, format!("#!/bin/sh\nexec {MISBEHAVE} echo\n")).expect("write the tool");
        fs::set_permissions(&tool, fs::Permissions::from_mode(0o755)).expect("chmod");
        let shell = fake_shell(
            &dir,
            &format!("PATH={}:$PATH; export PATH", tools.display()),
        );
        let lines = login_host(&shell, "tool-only-on-that-path", None);
        assert_eq!(lines.len(), 1, "{lines:?}");
        assert!(lines[0].ends_with("\"echo\":true}"), "{lines:?}");
        fs::remove_dir_all(&dir).expect("clean up");
    });
}

#[test]
fn a_login_shell_that_hangs_fails_within_the_timeout_naming_the_shell_and_is_ended() {
    run(async {
        let dir = scratch("login-hang");
        // It starts a child of its own in its group, then hangs.
        let shell = fake_shell(&dir, "sleep 1000 & sleep 1000");
        let lines = login_host(&shell, "never-started", Some(1000));
        let primed: u64 = lines[0]
            .strip_prefix("{\"primed_ms\":")
            .and_then(|rest| rest.strip_suffix(",\"ok\":false}"))
            .and_then(|ms| ms.parse().ok())
            .unwrap_or_else(|| panic!("{lines:?}"));
        assert!((1000..3000).contains(&primed), "gave up after {primed} ms");
        let shell_name = shell.display().to_string();
        assert!(
            lines[1].contains(&shell_name) && lines[1].contains("did not print its environment"),
            "{lines:?}"
        );
        // The spawn got the kept answer at once.
        let spawned: u64 = lines[1]
            .strip_prefix("{\"spawned_ms\":")
            .and_then(|rest| rest.split(',').next())
            .and_then(|ms| ms.parse().ok())
            .unwrap_or_else(|| panic!("{lines:?}"));
        assert!(spawned < 1000, "{lines:?}");
        // Its whole group was ended: `run` checks nothing tagged is left.
        eventually(STEP, "the shell's group is ended", || {
            live_processes_with_env(TAG_VAR, &tag().expect("tagged")).is_empty()
        })
        .await;
        fs::remove_dir_all(&dir).expect("clean up");
    });
}

#[test]
fn a_spawn_that_asks_a_hanging_login_shell_fails_within_the_default_timeout() {
    // Five seconds: once, on Tokio (the other runtimes take the same path in `spawn.rs`).
    if rt::NAME != "tokio" {
        eprintln!("skipped: run on tokio only");
        return;
    }
    run(async {
        let dir = scratch("login-default");
        let shell = fake_shell(&dir, "sleep 1000");
        let start = Instant::now();
        let lines = login_host(&shell, "never-started", None);
        let took = start.elapsed();
        assert_eq!(lines.len(), 1, "{lines:?}");
        assert!(
            lines[0].contains("could not start `never-started`"),
            "{lines:?}"
        );
        assert!(lines[0].contains(&shell.display().to_string()), "{lines:?}");
        let timeout = childwire_async::LOGIN_SHELL_TIMEOUT;
        assert!(
            took >= timeout && took < timeout + Duration::from_secs(5),
            "{took:?}"
        );
        fs::remove_dir_all(&dir).expect("clean up");
    });
}
