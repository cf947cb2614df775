//! What only Windows has: launchers that are batch files (`npx` is `npx.cmd`), found by their
//! bare name through `PATHEXT` and given their arguments safely, or refused (CVE-2024-24576).

use std::io;
use std::path::PathBuf;

use super::rt::{Exit, Transport};
use super::support::*;

/// The launcher's name, without its extension: what a host would write.
const LAUNCHER: &str = "childwire-misbehave-launcher";

/// A directory of its own holding `LAUNCHER.cmd`, which runs `misbehave` with its arguments,
/// as `npx.cmd` runs node. Removed when dropped.
struct LauncherDir(PathBuf);

impl LauncherDir {
    fn new() -> Self {
        let dir = std::env::temp_dir().join(format!(
            "childwire-launcher-{}",
            tag().unwrap_or_else(|| std::process::id().to_string())
        ));
        std::fs::create_dir_all(&dir).expect("the launcher's directory");
        // cmd.exe wants a plain drive path, not a `\\?\` one.
        let misbehave = std::fs::canonicalize(MISBEHAVE).expect("misbehave's path");
        let misbehave = misbehave.display().to_string();
        let misbehave = misbehave.strip_prefix(r"\\?\").unwrap_or(&misbehave);
        std::fs::write(
            dir.join(format!("{LAUNCHER}.cmd")),
            format!("@echo off\r\n\"{misbehave}\" %*\r\n"),
        )
        .expect("write the launcher");
        Self(dir)
    }

    /// `LAUNCHER ARGS...` by its bare name, with the launcher's directory first on the
    /// child's PATH.
    fn command(&self, args: &[&str]) -> super::rt::Command {
        let mut cmd = super::rt::Command::new(LAUNCHER);
        cmd.args(args);
        let mut path = self.0.clone().into_os_string();
        if let Some(inherited) = std::env::var_os("PATH") {
            path.push(";");
            path.push(inherited);
        }
        cmd.env("PATH", path);
        if let Some(tag) = tag() {
            cmd.env(TAG_VAR, tag);
        }
        cmd
    }
}

impl Drop for LauncherDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

#[test]
fn c11_a_cmd_launcher_is_found_by_its_bare_name_and_echoes() {
    run(async {
        let launchers = LauncherDir::new();
        let mut t = start(&launchers.command(&["echo"]), config());
        roundtrip(&mut t, "{\"through\":\"a .cmd launcher\"}").await;
        roundtrip(&mut t, "second").await;
        let report = finish(t).await;
        assert_eq!(report.exit, Exit::Code(0), "{report}");
    });
}

/// `LAUNCHER print-args ARGS...`: what misbehave received, one line per argument.
async fn args_through_the_launcher(args: &[&str]) {
    let launchers = LauncherDir::new();
    let mut all = vec!["print-args"];
    all.extend_from_slice(args);
    let mut t = start(&launchers.command(&all), config());
    let pid = pid_of(&t);
    let (lines, report) = drain_to_exit(&mut t).await;
    assert_reaped(pid).await;
    assert_eq!(report.exit, Exit::Code(0), "{report}");
    let lines: Vec<String> = lines
        .iter()
        .map(|line| String::from_utf8_lossy(line).into_owned())
        .collect();
    let expected: Vec<String> = args
        .iter()
        .enumerate()
        .map(|(i, arg)| format!("[{i}]={arg}"))
        .collect();
    assert_eq!(lines, expected, "no expansion, no splitting, no injection");
}

#[test]
fn c16_arguments_pass_unchanged_through_a_cmd_launcher() {
    // What cmd.exe would split or run unless escaped: spaces, quotes, metacharacters.
    run(args_through_the_launcher(&[
        "a b", "\"dq\"", "a&b", "x|y", "<in>", "^caret", "(paren)", "",
    ]));
}

#[test]
fn c16_percent_signs_pass_unchanged_through_a_cmd_launcher() {
    // What cmd.exe would expand unless escaped (CVE-2024-24576's other half).
    run(args_through_the_launcher(&[
        "%PATH%", "100%", "%%", "a%b%c",
    ]));
}

#[test]
fn c11_an_argument_a_batch_file_cannot_take_safely_is_refused_with_a_clear_error() {
    run(async {
        let launchers = LauncherDir::new();
        // A line break would end the command line cmd.exe runs; std refuses it for batch files.
        let cmd =
            launchers.command(&["print-args", "safe", "\"quoted\" %PATH%\r\n& echo injected"]);
        let err = Transport::spawn(&cmd, config())
            .map(|_| ())
            .expect_err("a batch file argument with a line break is refused");
        assert_eq!(err.kind(), io::ErrorKind::InvalidInput, "{err}");
        let shown = err.to_string();
        assert!(shown.contains(LAUNCHER), "names the program: {shown}");
        assert!(shown.contains("batch"), "says why: {shown}");
    });
}
