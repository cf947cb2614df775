//! Spawning: failures that say why, and what the child is given (C11, C16).

use std::collections::BTreeMap;
use std::io;
use std::path::PathBuf;

use childwire_conformance::open_fds;

use super::rt::{Command, EnvPolicy, Exit, Transport};
use super::support::*;

/// The OS's own words for `err`, as std prints them without the "(os error N)" suffix.
fn os_reason(kind: io::ErrorKind) -> String {
    let probe = match kind {
        // A missing file in a directory that exists: Windows words a missing directory
        // differently.
        io::ErrorKind::NotFound => std::process::Command::new(temp_path("childwire-probe")).spawn(),
        _ => return String::new(),
    };
    let text = probe.expect_err("the probe does not exist").to_string();
    text.split(" (os error")
        .next()
        .unwrap_or_default()
        .to_owned()
}

/// A path unique to this test process and `tag`, in the temp dir.
fn temp_path(tag: &str) -> PathBuf {
    std::env::temp_dir().join(format!("childwire-{tag}-{}", std::process::id()))
}

#[test]
fn c11_a_missing_program_is_named_with_the_os_reason() {
    run(async {
        let missing = temp_path("no-such-program");
        let err = Transport::spawn(&Command::new(&missing), config())
            .expect_err("the program does not exist");
        assert_eq!(err.kind(), io::ErrorKind::NotFound);
        assert_eq!(err.program(), missing.as_os_str());
        let shown = err.to_string();
        assert!(shown.contains(&missing.display().to_string()), "{shown}");
        let reason = os_reason(io::ErrorKind::NotFound);
        assert!(
            shown.contains(&reason),
            "{shown:?} lacks the OS reason {reason:?}"
        );

        let bare = "childwire-no-such-program-on-path";
        let err = Transport::spawn(&Command::new(bare), config()).expect_err("not on PATH");
        assert_eq!(err.kind(), io::ErrorKind::NotFound);
        let shown = err.to_string();
        assert!(shown.contains(bare) && shown.contains("PATH"), "{shown}");
    });
}

#[test]
fn c11_a_missing_working_directory_is_named() {
    run(async {
        let dir = temp_path("no-such-dir");
        let mut cmd = misbehave(&["echo"]);
        cmd.current_dir(&dir);
        let err = Transport::spawn(&cmd, config()).expect_err("the directory does not exist");
        let shown = err.to_string();
        assert!(shown.contains(&dir.display().to_string()), "{shown}");
        assert!(
            shown.contains("misbehave"),
            "names the program too: {shown}"
        );
    });
}

#[cfg(unix)]
#[test]
fn c11_a_file_that_is_not_executable_is_permission_denied() {
    run(async {
        let file = temp_path("not-executable");
        std::fs::write(&file, "#!/bin/sh\necho hi\n").expect("write the file");
        // Written without any execute bit (0o666 & umask).
        let result = Transport::spawn(&Command::new(&file), config());
        let _ = std::fs::remove_file(&file);
        let err = result.expect_err("not executable");
        assert_eq!(err.kind(), io::ErrorKind::PermissionDenied);
        let shown = err.to_string();
        assert!(shown.contains(&file.display().to_string()), "{shown}");
        assert!(
            shown.to_lowercase().contains("permission denied"),
            "{shown}"
        );
    });
}

#[test]
fn c11_failed_spawns_leave_nothing_open_and_spawning_again_works() {
    run(async {
        const ATTEMPTS: usize = 200;
        let missing = Command::new(temp_path("no-such-program"));
        // Warm up whatever the runtime opens once (signal pipes, pidfd support probes).
        let _ = Transport::spawn(&missing, config());
        let before = open_fds();
        for _ in 0..ATTEMPTS {
            assert!(Transport::spawn(&missing, config()).is_err());
        }
        if let (Some(before), Some(after)) = (before, open_fds()) {
            // Other tests open descriptors concurrently; one leaked pipe per attempt would
            // still be hundreds.
            assert!(
                after < before + ATTEMPTS / 2,
                "{before} descriptors before {ATTEMPTS} failed spawns, {after} after"
            );
        }
        let mut t = start_misbehave(&["echo"]);
        roundtrip(&mut t, "spawning again works").await;
        finish(t).await;
    });
}

/// Runs `print-env` with `policy` plus one explicit variable; the child's environment.
async fn child_env(policy: EnvPolicy) -> BTreeMap<Vec<u8>, Vec<u8>> {
    let mut cmd = misbehave(&["print-env"]);
    cmd.env_policy(policy)
        .env("CHILDWIRE_EXPLICIT", "explicit value");
    let mut t = start(&cmd, config());
    let pid = pid_of(&t);
    let (lines, report) = drain_to_exit(&mut t).await;
    assert_eq!(report.exit, Exit::Code(0));
    assert_reaped(pid).await;
    lines
        .into_iter()
        .map(|line| {
            let eq = line.iter().position(|&b| b == b'=').expect("KEY=VALUE");
            (line[..eq].to_vec(), line[eq + 1..].to_vec())
        })
        // The suite's own mark, an explicit variable like any other.
        .filter(|(key, _)| key != TAG_VAR.as_bytes())
        .collect()
}

/// This process's variable names, as bytes.
fn own_env_keys() -> Vec<Vec<u8>> {
    std::env::vars_os()
        .map(|(key, _)| key.as_encoded_bytes().to_vec())
        .collect()
}

#[cfg(unix)]
#[test]
fn c16_minimal_env_passes_only_the_allow_list_and_explicit_variables() {
    run(async {
        // The MCP SDKs' default allow-list (DESIGN.md C16).
        const ALLOWED: [&str; 6] = ["HOME", "LOGNAME", "PATH", "SHELL", "TERM", "USER"];
        let env = child_env(EnvPolicy::Minimal).await;
        let mut expected: Vec<Vec<u8>> = ALLOWED
            .iter()
            .filter(|key| {
                // Exported shell functions are skipped, as the SDKs do.
                std::env::var_os(key).is_some_and(|v| !v.as_encoded_bytes().starts_with(b"()"))
            })
            .map(|key| key.as_bytes().to_vec())
            .collect();
        expected.push(b"CHILDWIRE_EXPLICIT".to_vec());
        expected.sort();
        let got: Vec<Vec<u8>> = env.keys().cloned().collect();
        assert_eq!(
            got.iter()
                .map(|k| String::from_utf8_lossy(k))
                .collect::<Vec<_>>(),
            expected
                .iter()
                .map(|k| String::from_utf8_lossy(k))
                .collect::<Vec<_>>()
        );
        assert_eq!(env[&b"CHILDWIRE_EXPLICIT"[..]], b"explicit value");
        if let Some(path) = std::env::var_os("PATH") {
            assert_eq!(
                env[&b"PATH"[..]],
                path.as_encoded_bytes(),
                "values pass unchanged"
            );
        }
    });
}

#[test]
fn c16_inherited_env_passes_everything_plus_explicit_variables() {
    run(async {
        let env = child_env(EnvPolicy::Inherit).await;
        for key in own_env_keys() {
            assert!(
                env.contains_key(&key),
                "{} not inherited",
                String::from_utf8_lossy(&key)
            );
        }
        assert_eq!(env[&b"CHILDWIRE_EXPLICIT"[..]], b"explicit value");
        assert_eq!(env.len(), own_env_keys().len() + 1);
    });
}

#[test]
fn c16_arguments_and_working_directory_pass_unchanged() {
    run(async {
        let args = [
            "a b",
            "$HOME",
            "*",
            "'q'",
            "\"dq\"",
            "",
            "--flag=ü",
            "; rm -rf /",
        ];
        let mut all = vec!["print-args"];
        all.extend_from_slice(&args);
        let mut t = start_misbehave(&all);
        let pid = pid_of(&t);
        let (lines, _) = drain_to_exit(&mut t).await;
        assert_reaped(pid).await;
        let expected: Vec<Vec<u8>> = args
            .iter()
            .enumerate()
            .map(|(i, arg)| format!("[{i}]={arg}").into_bytes())
            .collect();
        assert_eq!(lines, expected, "no shell, no splitting, no expansion");

        // Resolved on Unix, where it may be a symlink; on Windows canonical paths are verbatim
        // (`\\?\C:\...`), which a process never sees as its working directory, and the temp
        // dir ends in a separator, which a working directory does not.
        let dir = if cfg!(windows) {
            std::env::temp_dir().components().collect()
        } else {
            std::env::temp_dir().canonicalize().expect("temp dir")
        };
        let mut cmd = misbehave(&["print-cwd"]);
        cmd.current_dir(&dir);
        let mut t = start(&cmd, config());
        let pid = pid_of(&t);
        let (lines, _) = drain_to_exit(&mut t).await;
        assert_reaped(pid).await;
        assert_eq!(lines, [format!("cwd={}", dir.display()).into_bytes()]);
    });
}
