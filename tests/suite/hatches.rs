//! What process-spawning users reach for: a custom environment, a child left
//! running on drop, a std command built by the caller, stderr as a stream.

use std::collections::BTreeSet;

#[cfg(unix)]
use childwire_conformance::{pid_exists, process_alive};

use childwire_core::stderr_level::Level;

use super::rt::{self, EnvPolicy, Exit};
#[cfg(unix)]
use super::rt::{Lines, Transport};
use super::support::*;

/// The variable names the child `cmd` (in `print-env` mode) sees.
async fn env_names(cmd: &super::rt::Command) -> BTreeSet<String> {
    let mut t = start(cmd, config());
    let pid = pid_of(&t);
    let (lines, report) = drain_to_exit(&mut t).await;
    assert_eq!(report.exit, Exit::Code(0));
    assert_reaped(pid).await;
    lines
        .iter()
        .map(|line| {
            let line = String::from_utf8_lossy(line);
            line.split('=').next().unwrap_or_default().to_owned()
        })
        .filter(|key| key != TAG_VAR)
        .collect()
}

#[test]
fn c16_env_clear_allow_list_and_remove_shape_what_the_child_sees() {
    run(async {
        let mut cmd = misbehave(&["print-env"]);
        cmd.env_clear().env("ONLY", "1");
        assert_eq!(env_names(&cmd).await, BTreeSet::from(["ONLY".to_owned()]));

        let mut cmd = misbehave(&["print-env"]);
        cmd.env_allow(["PATH"])
            .env("A", "1")
            .env("B", "2")
            .env_remove("A");
        assert_eq!(cmd.get_env_policy(), EnvPolicy::AllowList);
        let names = env_names(&cmd).await;
        let expected: BTreeSet<String> = ["B", "PATH"]
            .into_iter()
            .filter(|key| *key != "PATH" || std::env::var_os("PATH").is_some())
            .map(str::to_owned)
            .collect();
        assert_eq!(names, expected);
    });
}

// The child is a POSIX shell script.
#[cfg(unix)]
#[test]
fn c14_kill_on_drop_off_leaves_the_child_to_end_on_its_own_and_reaps_it() {
    run(async {
        // The child writes a mark only after it read its stdin to the end:
        // killed on drop, it never would.
        let dir = std::env::temp_dir().join(format!("childwire-kod-{}", std::process::id()));
        std::fs::create_dir_all(&dir).expect("temp dir");
        let mark = dir.join("survived");
        let _ = std::fs::remove_file(&mark);
        let mut cmd = super::rt::Command::new("sh");
        cmd.args(["-c", "cat >/dev/null; echo survived > \"$0\""])
            .arg(&mark)
            .kill_on_drop(false);
        if let Some(tag) = tag() {
            cmd.env(TAG_VAR, tag);
        }
        let t = start(&cmd, config());
        let pid = pid_of(&t);
        drop(t);
        eventually(STEP, "the child ran to its end", || mark.exists()).await;
        eventually(STEP, "the child was reaped", || !pid_exists(pid)).await;
        assert!(!process_alive(pid));
        let _ = std::fs::remove_dir_all(&dir);
    });
}

// Process groups are Unix's.
#[cfg(unix)]
#[test]
fn c13_a_std_command_built_by_the_caller_gets_pipes_and_a_process_group() {
    run(async {
        let mut std = std::process::Command::new(MISBEHAVE);
        std.arg("print-pgid");
        if let Some(tag) = tag() {
            std.env(TAG_VAR, tag);
        }
        let mut t = Transport::spawn_std(Lines, std, config()).expect("spawn_std");
        let pid = pid_of(&t);
        let line = text(&mut t).await;
        assert_eq!(
            line,
            format!("{{\"pid\":{pid},\"pgid\":{pid}}}"),
            "the child leads its own group"
        );
        let report = finish(t).await;
        assert_eq!(report.exit, Exit::Code(0));
    });
}

#[test]
fn c39_stderr_lines_carry_the_level_of_json_lines_pino_and_prefixed_logs() {
    run(async {
        let mut config = config();
        let mut stderr = config.stderr_stream();
        let mut t = start(&misbehave(&["stderr-levels"]), config);
        let pid = pid_of(&t);
        let lines = rt::spawn(async move {
            let mut lines = Vec::new();
            while let Some(line) = stderr.next_leveled().await {
                lines.push((line.level(), line.raw().clone()));
            }
            lines
        });
        let (_, report) = drain_to_exit(&mut t).await;
        assert_reaped(pid).await;
        assert_eq!(report.exit, Exit::Code(0));
        let lines = within(STEP, "the stream ends with the transport", lines).await;
        let levels: Vec<_> = lines.iter().map(|(level, _)| *level).collect();
        assert_eq!(
            levels,
            [Some(Level::Warn), Some(Level::Error), Some(Level::Info)]
        );
        assert_eq!(
            &lines[2].1[..],
            b"INFO: listening on stdio",
            "the raw line is kept"
        );
    });
}

#[test]
fn c09_stderr_as_a_stream_delivers_every_line_then_ends() {
    run(async {
        let mut config = config();
        let mut stderr = config.stderr_stream();
        let mut t = start(&misbehave(&["stderr-then-exit", "0"]), config);
        let pid = pid_of(&t);
        let lines = rt::spawn(async move {
            let mut lines = Vec::new();
            while let Some(line) = stderr.next_line().await {
                lines.push(String::from_utf8_lossy(&line).into_owned());
            }
            lines
        });
        let (_, report) = drain_to_exit(&mut t).await;
        assert_reaped(pid).await;
        assert_eq!(report.exit, Exit::Code(0));
        let lines = within(STEP, "the stream ends with the transport", lines).await;
        assert_eq!(
            lines,
            [
                "stderr line 1 of 3",
                "stderr line 2 of 3",
                "stderr line 3 of 3"
            ]
        );
    });
}
