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
    // target/<profile>/deps/<test binary>
    let exe = std::env::current_exe().expect("the test binary's path");
    let profile_dir = exe
        .parent()
        .and_then(Path::parent)
        .expect("the test binary sits in target/<profile>/deps");
    let mut build = Command::new(env!("CARGO"));
    build.args(["build", "--examples", "--manifest-path"]);
    build.arg(concat!(env!("CARGO_MANIFEST_DIR"), "/Cargo.toml"));
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
