//! `childwire connect` and `childwire share` end to end: five host sessions
//! (five `childwire connect` processes started at once) against the
//! bundled example server run exactly one server process; every session
//! gets its own answers; when the last one closes, the server exits by the
//! MCP shutdown (its stdin closed) and the share exits. And a directory
//! other users can enter is refused.

// Linux: processes are counted through /proc.
#![cfg(target_os = "linux")]

use std::fs;
use std::io::{BufRead, BufReader, Write};
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::OnceLock;
use std::sync::mpsc;
use std::thread;
use std::time::{Duration, Instant};

use serde_json::{Value, json};

const DEADLINE: Duration = Duration::from_secs(30);

/// The bundled example server's binary, built once per test binary (a
/// no-op when the examples are built already).
fn example_server() -> PathBuf {
    static DIR: OnceLock<PathBuf> = OnceLock::new();
    let dir = DIR.get_or_init(|| {
        if let Some(dir) = std::env::var_os("CHILDWIRE_EXAMPLES_DIR") {
            return PathBuf::from(dir);
        }
        let exe = std::env::current_exe().expect("the test binary's path");
        let profile_dir = exe
            .parent()
            .and_then(Path::parent)
            .expect("the test binary sits in target/<profile>/deps");
        let mut build = Command::new(env!("CARGO"));
        build.args(["build", "--example", "example_server", "--manifest-path"]);
        build.arg(Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples/Cargo.toml"));
        match profile_dir.file_name().and_then(|name| name.to_str()) {
            Some("debug") | None => {}
            Some("release") => {
                build.arg("--release");
            }
            Some(profile) => {
                build.args(["--profile", profile]);
            }
        }
        let status = build.status().expect("running cargo");
        assert!(status.success(), "building the example server: {status}");
        profile_dir.join("examples")
    });
    dir.join("example_server")
}

/// A scratch directory of this test's own.
fn scratch(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("childwire-share-{name}-{}", std::process::id()));
    let _ = fs::remove_dir_all(&dir);
    fs::create_dir_all(&dir).unwrap();
    dir
}

/// Processes whose environment holds `marker` and whose program is `name`.
fn processes(marker: &str, name: &str) -> Vec<u32> {
    let mut found = Vec::new();
    for entry in fs::read_dir("/proc").unwrap().flatten() {
        let Ok(pid) = entry.file_name().to_string_lossy().parse::<u32>() else {
            continue;
        };
        let Ok(environ) = fs::read(entry.path().join("environ")) else {
            continue;
        };
        if !environ
            .split(|&b| b == 0)
            .any(|var| var == marker.as_bytes())
        {
            continue;
        }
        let Ok(cmdline) = fs::read(entry.path().join("cmdline")) else {
            continue;
        };
        let program = cmdline.split(|&b| b == 0).next().unwrap_or_default();
        let is_zombie = fs::read_to_string(entry.path().join("stat")).is_ok_and(|stat| {
            stat.rsplit(')')
                .next()
                .is_some_and(|s| s.trim_start().starts_with('Z'))
        });
        if !is_zombie && Path::new(&*String::from_utf8_lossy(program)).ends_with(name) {
            found.push(pid);
        }
    }
    found
}

/// Waits, polling with a short pause, until `until` holds.
fn wait_for(what: &str, until: impl Fn() -> bool) {
    let deadline = Instant::now() + DEADLINE;
    while !until() {
        assert!(Instant::now() < deadline, "{what}: not within {DEADLINE:?}");
        thread::sleep(Duration::from_millis(20));
    }
}

/// A host session: a `childwire connect` process, its stdout's lines.
struct Session {
    child: Child,
    lines: mpsc::Receiver<String>,
}

impl Session {
    fn start(endpoint: &Path, marker: &str) -> Self {
        let (key, value) = marker.split_once('=').unwrap();
        let mut child = Command::new(env!("CARGO_BIN_EXE_childwire"))
            .arg("connect")
            .arg("--endpoint")
            .arg(endpoint)
            .arg("--")
            .arg(example_server())
            .env(key, value)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .expect("spawning childwire connect");
        let stdout = child.stdout.take().unwrap();
        let (tx, lines) = mpsc::channel();
        thread::spawn(move || {
            for line in BufReader::new(stdout).lines() {
                let Ok(line) = line else { break };
                if tx.send(line).is_err() {
                    break;
                }
            }
        });
        Self { child, lines }
    }

    fn send(&mut self, message: &Value) {
        let stdin = self.child.stdin.as_mut().unwrap();
        writeln!(stdin, "{message}").unwrap();
        stdin.flush().unwrap();
    }

    fn recv(&self) -> Value {
        let line = self
            .lines
            .recv_timeout(DEADLINE)
            .expect("an answer within the deadline");
        serde_json::from_str(&line).unwrap()
    }
}

#[test]
fn five_connects_run_one_server_which_exits_by_the_mcp_shutdown_after_the_last() {
    let dir = scratch("five");
    let endpoint = dir.join("run").join("server.sock");
    let marker = format!("CHILDWIRE_SHARE_TEST=five-{}", std::process::id());
    let server = example_server();
    // All five at once: at most one share may win the endpoint.
    let mut sessions: Vec<Session> = (0..5).map(|_| Session::start(&endpoint, &marker)).collect();
    for (n, session) in sessions.iter_mut().enumerate() {
        session.send(
            &json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
            "protocolVersion": "2025-06-18", "capabilities": {},
            "clientInfo": {"name": format!("host-{n}"), "version": "1"}}}),
        );
        let answer = session.recv();
        assert_eq!(answer["id"], json!(1), "{answer}");
        assert_eq!(
            answer["result"]["serverInfo"]["name"],
            "childwire-example-server"
        );
        session.send(&json!({"jsonrpc": "2.0", "method": "notifications/initialized"}));
    }
    // Every session's own answer, with its own ids (all use 2).
    for (n, session) in sessions.iter_mut().enumerate() {
        session.send(&json!({"jsonrpc": "2.0", "id": 2, "method": "tools/call",
            "params": {"name": "echo", "arguments": {"text": format!("from {n}")}}}));
    }
    for (n, session) in sessions.iter().enumerate() {
        let answer = session.recv();
        assert_eq!(answer["id"], json!(2));
        assert_eq!(
            answer["result"]["content"][0]["text"],
            json!(format!("from {n}")),
            "{answer}"
        );
    }
    let servers = processes(&marker, server.file_name().unwrap().to_str().unwrap());
    assert_eq!(servers.len(), 1, "one server process: {servers:?}");
    let shares: Vec<u32> = processes(&marker, "childwire")
        .into_iter()
        .filter(|pid| {
            fs::read(format!("/proc/{pid}/cmdline"))
                .is_ok_and(|cmd| cmd.split(|&b| b == 0).nth(1) == Some(b"share"))
        })
        .collect();
    assert_eq!(shares.len(), 1, "one share process: {shares:?}");
    // The endpoint's directory is private.
    let mode = fs::metadata(endpoint.parent().unwrap())
        .unwrap()
        .permissions()
        .mode()
        & 0o777;
    assert_eq!(mode, 0o700);

    // Four hosts close their sessions: the server stays for the fifth.
    let last = sessions.pop().unwrap();
    for mut session in sessions {
        drop(session.child.stdin.take());
        let status = session.child.wait().unwrap();
        assert!(status.success(), "{status}");
    }
    let mut last = last;
    last.send(&json!({"jsonrpc": "2.0", "id": 3, "method": "ping"}));
    assert_eq!(last.recv()["id"], json!(3));
    assert_eq!(
        processes(&marker, server.file_name().unwrap().to_str().unwrap()),
        servers
    );
    // The last one closes: the server ends, then the share.
    drop(last.child.stdin.take());
    assert!(last.child.wait().unwrap().success());
    wait_for("the server's exit", || {
        processes(&marker, server.file_name().unwrap().to_str().unwrap()).is_empty()
    });
    wait_for("the share's exit", || {
        shares.iter().all(|pid| {
            !Path::new(&format!("/proc/{pid}")).exists()
                || fs::read_to_string(format!("/proc/{pid}/stat"))
                    .is_ok_and(|stat| stat.contains(") Z"))
        })
    });
    let log = fs::read_to_string(endpoint.with_file_name("server.sock.log")).unwrap();
    assert!(
        log.contains("the server exited with code 0 after stdin was closed"),
        "the MCP shutdown, said in the share's log:\n{log}"
    );
    assert!(!endpoint.exists(), "the socket is removed");
    fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn a_directory_other_users_can_enter_is_refused() {
    let dir = scratch("open");
    fs::set_permissions(&dir, fs::Permissions::from_mode(0o755)).unwrap();
    let output = Command::new(env!("CARGO_BIN_EXE_childwire"))
        .arg("share")
        .arg("--endpoint")
        .arg(dir.join("server.sock"))
        .args(["--", "cat"])
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(1));
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(stderr.contains("other users can enter it"), "{stderr}");
    assert!(!dir.join("server.sock").exists());
    fs::remove_dir_all(&dir).unwrap();
}
