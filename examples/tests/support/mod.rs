//! Running the example programs from integration tests.
//!
//! Cargo gives integration tests the paths of `[[bin]]` targets only
//! (`CARGO_BIN_EXE_*`), not of examples. So the first test that needs one
//! builds them all with the same cargo and profile, once per test binary
//! (a no-op when `cargo test` already built them, as it does by default),
//! and runs them from `target/<profile>/examples/`.

#![allow(dead_code)] // each test file uses part of this

use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::OnceLock;
use std::thread;
use std::time::{Duration, Instant};

/// The path of example `name`, built if needed.
pub(crate) fn example(name: &str) -> PathBuf {
    static EXAMPLES_DIR: OnceLock<PathBuf> = OnceLock::new();
    let dir = EXAMPLES_DIR.get_or_init(build_examples);
    dir.join(format!("{name}{}", std::env::consts::EXE_SUFFIX))
}

fn build_examples() -> PathBuf {
    // Set by `cargo xtask wine`, which builds them for Windows first: under Wine this test
    // cannot run cargo (a Linux program).
    if let Some(dir) = std::env::var_os("CHILDWIRE_EXAMPLES_DIR") {
        return PathBuf::from(dir);
    }
    // target/<profile>/deps/<test binary>
    let exe = std::env::current_exe().expect("the test binary's path");
    let profile_dir = exe
        .parent()
        .and_then(Path::parent)
        .expect("the test binary sits in target/<profile>/deps");
    let mut build = Command::new(env!("CARGO"));
    build.args(["build", "--examples", "--manifest-path"]);
    if env!("CARGO_PKG_NAME") == "childwire-examples-tests" {
        // The light examples, next door, with every runtime `--runtime`
        // can pick.
        build.arg(concat!(env!("CARGO_MANIFEST_DIR"), "/../Cargo.toml"));
        build.args(["--features", "smol,async-std"]);
    } else {
        // The SDK examples, whose tests share this file.
        build.arg(concat!(env!("CARGO_MANIFEST_DIR"), "/Cargo.toml"));
    }
    match profile_dir.file_name().and_then(|name| name.to_str()) {
        Some("debug") | None => {}
        Some("release") => {
            build.arg("--release");
        }
        Some(profile) => {
            build.args(["--profile", profile]);
        }
    }
    let status = build.status().expect("running cargo to build the examples");
    assert!(status.success(), "building the examples failed: {status}");
    profile_dir.join("examples")
}

/// What a finished program left behind.
pub(crate) struct Output {
    pub(crate) status: ExitStatus,
    pub(crate) stdout: Vec<u8>,
    pub(crate) stderr: String,
}

impl std::fmt::Debug for Output {
    // Text, not a list of byte values, when an assertion shows it.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{}\n--- stdout ---\n{}\n--- stderr ---\n{}",
            self.status,
            self.stdout_text(),
            self.stderr
        )
    }
}

impl Output {
    pub(crate) fn stdout_text(&self) -> String {
        String::from_utf8_lossy(&self.stdout).into_owned()
    }

    /// Stdout as JSON, a value per line; panics on a line that is not JSON.
    #[allow(dead_code)] // Not every test file that includes this module reads JSON.
    pub(crate) fn json_lines(&self) -> Vec<serde_json::Value> {
        self.stdout_text()
            .lines()
            .map(|line| serde_json::from_str(line).expect("JSON lines"))
            .collect()
    }
}

/// Runs `program` with `args`, feeding it `input` from a thread (so a
/// program that writes while it reads never deadlocks against us), and
/// fails the test if it has not ended by `deadline`.
pub(crate) fn run(program: &Path, args: &[&str], input: Vec<u8>, deadline: Duration) -> Output {
    let mut child = Command::new(program)
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap_or_else(|err| panic!("spawning {}: {err}", program.display()));
    let mut stdin = child.stdin.take().unwrap();
    let writer = thread::spawn(move || {
        // The program may end before reading everything (that is what some
        // tests check): a broken pipe here is expected.
        let _ = stdin.write_all(&input);
    });
    let stdout = drain(child.stdout.take().unwrap());
    let stderr = drain(child.stderr.take().unwrap());
    let status = wait_until(&mut child, Instant::now() + deadline);
    writer.join().unwrap();
    Output {
        status,
        stdout: stdout.join().unwrap(),
        stderr: String::from_utf8_lossy(&stderr.join().unwrap()).into_owned(),
    }
}

fn drain(mut pipe: impl Read + Send + 'static) -> thread::JoinHandle<Vec<u8>> {
    thread::spawn(move || {
        let mut bytes = Vec::new();
        pipe.read_to_end(&mut bytes).unwrap();
        bytes
    })
}

fn wait_until(child: &mut Child, deadline: Instant) -> ExitStatus {
    loop {
        if let Some(status) = child.try_wait().unwrap() {
            return status;
        }
        if Instant::now() >= deadline {
            let _ = child.kill();
            let _ = child.wait();
            panic!("the program did not finish in time");
        }
        // Polling for the exit with a deadline: std has no wait-with-timeout.
        thread::sleep(Duration::from_millis(10));
    }
}

/// A program left running, so a test can talk to it, signal it and watch
/// it as things happen: its stderr arrives line by line on a channel.
pub(crate) struct Running {
    child: Child,
    stdin: Option<std::process::ChildStdin>,
    stderr_lines: std::sync::mpsc::Receiver<String>,
    /// Every stderr line seen so far, for failure messages.
    stderr_seen: Vec<String>,
    stdout: Option<thread::JoinHandle<Vec<u8>>>,
    /// Its stdout line by line, when started with [`Self::start_lines`].
    stdout_lines: Option<std::sync::mpsc::Receiver<String>>,
    /// Every stdout line seen so far.
    stdout_seen: Vec<String>,
}

/// Sends each line `pipe` gives on a channel, from a thread of its own.
fn lines_of(pipe: impl Read + Send + 'static) -> std::sync::mpsc::Receiver<String> {
    let (lines, received) = std::sync::mpsc::channel();
    thread::spawn(move || {
        use std::io::BufRead as _;
        for line in std::io::BufReader::new(pipe).lines() {
            let Ok(line) = line else { break };
            if lines.send(line).is_err() {
                break;
            }
        }
    });
    received
}

/// Waits until a line from `lines` satisfies `wanted` and returns it, keeping every line in
/// `seen`; fails the test if none has by `deadline`.
fn wait_for_line(
    lines: &std::sync::mpsc::Receiver<String>,
    seen: &mut Vec<String>,
    what: &str,
    wanted: impl Fn(&str) -> bool,
    deadline: Duration,
) -> String {
    let until = Instant::now() + deadline;
    loop {
        let left = until.saturating_duration_since(Instant::now());
        match lines.recv_timeout(left) {
            Ok(line) => {
                seen.push(line.clone());
                if wanted(&line) {
                    return line;
                }
            }
            Err(_) => panic!(
                "no such {what} line within {deadline:?}; {what} so far:\n{}",
                seen.join("\n")
            ),
        }
    }
}

impl Running {
    /// Starts `program` with `args`, every standard stream piped.
    pub(crate) fn start(program: &Path, args: &[&str]) -> Self {
        Self::spawn(program, args, false)
    }

    /// [`Self::start`], with stdout read line by line too, for
    /// [`Self::wait_for_stdout`].
    pub(crate) fn start_lines(program: &Path, args: &[&str]) -> Self {
        Self::spawn(program, args, true)
    }

    fn spawn(program: &Path, args: &[&str], stdout_lines: bool) -> Self {
        let mut child = Command::new(program)
            .args(args)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap_or_else(|err| panic!("spawning {}: {err}", program.display()));
        let stdin = child.stdin.take();
        let out = child.stdout.take().unwrap();
        let (stdout, stdout_lines) = if stdout_lines {
            (None, Some(lines_of(out)))
        } else {
            (Some(drain(out)), None)
        };
        let stderr_lines = lines_of(child.stderr.take().unwrap());
        Self {
            child,
            stdin,
            stderr_lines,
            stderr_seen: Vec::new(),
            stdout,
            stdout_lines,
            stdout_seen: Vec::new(),
        }
    }

    /// The program's pid.
    pub(crate) fn id(&self) -> u32 {
        self.child.id()
    }

    /// Writes `bytes` to the program's stdin.
    pub(crate) fn write(&mut self, bytes: &[u8]) {
        self.stdin
            .as_mut()
            .expect("stdin is open")
            .write_all(bytes)
            .unwrap();
    }

    /// Closes the program's stdin.
    pub(crate) fn close_stdin(&mut self) {
        self.stdin = None;
    }

    /// Sends `signal` to the program.
    #[cfg(unix)]
    pub(crate) fn signal(&self, signal: rustix::process::Signal) {
        let pid = rustix::process::Pid::from_raw(self.id().try_into().unwrap()).unwrap();
        rustix::process::kill_process(pid, signal).unwrap();
    }

    /// Sends `signal` to process `pid` (one the program started).
    #[cfg(unix)]
    pub(crate) fn signal_pid(&self, pid: u32, signal: rustix::process::Signal) {
        let pid = rustix::process::Pid::from_raw(pid.try_into().unwrap()).unwrap();
        rustix::process::kill_process(pid, signal).unwrap();
    }

    /// Waits until a stderr line satisfies `wanted` and returns it; fails
    /// the test if none has by `deadline`.
    pub(crate) fn wait_for_stderr(
        &mut self,
        wanted: impl Fn(&str) -> bool,
        deadline: Duration,
    ) -> String {
        let seen = &mut self.stderr_seen;
        wait_for_line(&self.stderr_lines, seen, "stderr", wanted, deadline)
    }

    /// Waits until a stdout line satisfies `wanted` and returns it; fails
    /// the test if none has by `deadline`. Needs [`Self::start_lines`].
    pub(crate) fn wait_for_stdout(
        &mut self,
        wanted: impl Fn(&str) -> bool,
        deadline: Duration,
    ) -> String {
        let lines = self
            .stdout_lines
            .as_ref()
            .expect("started with Running::start_lines");
        wait_for_line(lines, &mut self.stdout_seen, "stdout", wanted, deadline)
    }

    /// Every stdout line (the program has ended), with those seen so far,
    /// as one text. Needs [`Self::start_lines`].
    pub(crate) fn stdout_lines(&mut self) -> String {
        if let Some(lines) = &self.stdout_lines {
            while let Ok(line) = lines.recv_timeout(Duration::from_secs(10)) {
                self.stdout_seen.push(line);
            }
        }
        self.stdout_seen.join("\n")
    }

    /// Waits for the program to end, at most `deadline`: `None` if it is
    /// still running then.
    pub(crate) fn wait_for_exit(&mut self, deadline: Duration) -> Option<ExitStatus> {
        let until = Instant::now() + deadline;
        loop {
            if let Some(status) = self.child.try_wait().unwrap() {
                return Some(status);
            }
            if Instant::now() >= until {
                return None;
            }
            // Polling for the exit with a deadline: std has no wait-with-timeout.
            thread::sleep(Duration::from_millis(5));
        }
    }

    /// Everything left on stderr (the program has ended), and all of it
    /// seen so far, as one text.
    pub(crate) fn stderr(&mut self) -> String {
        while let Ok(line) = self.stderr_lines.recv_timeout(Duration::from_secs(10)) {
            self.stderr_seen.push(line);
        }
        self.stderr_seen.join("\n")
    }

    /// Everything the program wrote to stdout (it has ended).
    pub(crate) fn stdout(&mut self) -> Vec<u8> {
        self.stdout
            .take()
            .map(|t| t.join().unwrap())
            .unwrap_or_default()
    }
}

impl Drop for Running {
    fn drop(&mut self) {
        // A failed test must not leave the program behind.
        if self.child.try_wait().ok().flatten().is_none() {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }
}

/// Processes in process group `pgid` that are still running (zombies, which
/// have exited, are not counted), from `/proc` (Linux; empty elsewhere).
pub(crate) fn running_in_group(pgid: u32) -> Vec<u32> {
    let Ok(dir) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    dir.filter_map(|entry| entry.ok()?.file_name().to_str()?.parse::<u32>().ok())
        .filter(|pid| {
            let Ok(stat) = std::fs::read_to_string(format!("/proc/{pid}/stat")) else {
                return false;
            };
            // Fields after the command name, which is in parentheses and may
            // hold spaces: state, ppid, pgrp.
            let Some(close) = stat.rfind(')') else {
                return false;
            };
            let mut rest = stat[close + 1..].split_whitespace();
            let state = rest.next().unwrap_or("?");
            let pgrp = rest.nth(1).and_then(|pgrp| pgrp.parse::<u32>().ok());
            pgrp == Some(pgid) && !matches!(state, "Z" | "X")
        })
        .collect()
}

/// Waits until no process of group `pgid` runs; fails the test if some
/// still do after `deadline`.
pub(crate) fn assert_group_gone(pgid: u32, deadline: Duration) {
    let until = Instant::now() + deadline;
    loop {
        let left = running_in_group(pgid);
        if left.is_empty() {
            return;
        }
        assert!(
            Instant::now() < until,
            "processes of group {pgid} still running: {left:?}"
        );
        thread::sleep(Duration::from_millis(5));
    }
}
