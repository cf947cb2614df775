//! The installed `childwire` command end to end: its subcommands, its exit
//! codes and what it says.

// Unix only: the servers here are POSIX shell one-liners.
#![cfg(unix)]

use std::io::{Read, Write};
use std::process::{Command, ExitStatus, Stdio};
use std::thread;
use std::time::{Duration, Instant};

const DEADLINE: Duration = Duration::from_secs(30);

struct Output {
    status: ExitStatus,
    stdout: String,
    stderr: String,
}

/// Runs `childwire ARGS` with `input` on its stdin (then closed), killing
/// it if it outlives [`DEADLINE`].
fn childwire(args: &[&str], input: &str) -> Output {
    let mut child = Command::new(env!("CARGO_BIN_EXE_childwire"))
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawning childwire");
    let mut stdin = child.stdin.take().expect("piped stdin");
    let input = input.to_owned();
    let writer = thread::spawn(move || {
        // The command may exit before reading (a usage error): not a failure.
        let _ = stdin.write_all(input.as_bytes());
    });
    let readers = [
        reader(child.stdout.take().expect("piped stdout")),
        reader(child.stderr.take().expect("piped stderr")),
    ];
    let started = Instant::now();
    let status = loop {
        if let Some(status) = child.try_wait().expect("waiting for childwire") {
            break status;
        }
        if started.elapsed() > DEADLINE {
            let _ = child.kill();
            panic!("childwire {args:?} still running after {DEADLINE:?}");
        }
        thread::sleep(Duration::from_millis(10));
    };
    writer.join().expect("the stdin writer");
    let [stdout, stderr] = readers.map(|reader| reader.join().expect("a reader"));
    Output {
        status,
        stdout,
        stderr,
    }
}

fn reader(mut pipe: impl Read + Send + 'static) -> thread::JoinHandle<String> {
    thread::spawn(move || {
        let mut text = String::new();
        let _ = pipe.read_to_string(&mut text);
        text
    })
}

#[test]
fn probe_explains_a_server_that_dies_at_start_with_its_stderr() {
    let out = childwire(
        &[
            "probe",
            "--",
            "sh",
            "-c",
            "echo cannot open database >&2; exit 3",
        ],
        "",
    );
    assert_eq!(out.status.code(), Some(1), "{}", out.stderr);
    assert!(out.stdout.contains("exited with code 3"), "{}", out.stdout);
    assert!(
        out.stderr.contains("cannot open database"),
        "{}",
        out.stderr
    );
    // Its messages carry the command's name, not the example's.
    assert!(
        out.stderr
            .contains("childwire probe: the server ended during initialize")
            && !out.stderr.contains("mcp_client"),
        "{}",
        out.stderr
    );
}

#[test]
fn relay_passes_lines_through_unchanged_and_exits_with_the_servers_code() {
    let input = "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"ping\"}\n{\"b\":[1,2]}\n";
    let out = childwire(&["relay", "--", "sh", "-c", "cat; exit 7"], input);
    assert_eq!(out.stdout, input);
    assert_eq!(out.status.code(), Some(7), "{}", out.stderr);
    // What it says starts with the command's name, as `childwire probe`.
    assert!(
        out.stderr
            .lines()
            .any(|line| line.starts_with("childwire relay: child exited with code 7")),
        "{}",
        out.stderr
    );
}

#[test]
fn a_missing_or_unknown_command_is_a_usage_error() {
    for (args, expected) in [
        (&[][..], "missing the command"),
        (&["serve"][..], "unknown command `serve`"),
        (&["probe"][..], "missing the server's command"),
        (&["relay", "--frobnicate", "cat"][..], "unknown option"),
        (&["replay"][..], "missing the recording"),
    ] {
        let out = childwire(args, "");
        assert_eq!(out.status.code(), Some(2), "{args:?}: {}", out.stderr);
        assert!(out.stderr.contains(expected), "{args:?}: {}", out.stderr);
    }
}

#[test]
fn help_lists_the_commands_and_each_command_has_its_own() {
    let out = childwire(&["--help"], "");
    assert!(out.status.success());
    for command in ["probe", "relay", "replay"] {
        assert!(out.stdout.contains(command), "{command}: {}", out.stdout);
    }
    for command in ["probe", "relay", "replay"] {
        let out = childwire(&[command, "--help"], "");
        assert!(out.status.success(), "{command}: {}", out.stderr);
        assert!(
            out.stdout
                .starts_with(&format!("Usage: childwire {command} ")),
            "{}",
            out.stdout
        );
    }
}
