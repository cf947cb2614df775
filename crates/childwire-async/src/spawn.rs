//! From childwire's plain [`Command`] to an OS process: the environment
//! policy applied to the real environment, the pipes, the process group,
//! and a spawn error that says what was really missing. Written once for
//! every runtime.

use std::ffi::OsStr;
use std::io::{self, Read};
use std::path::{Path, PathBuf};
use std::process::Stdio;

use childwire_core::command::{allowed_env, minimal_env};
use childwire_core::{Command, EnvPolicy, SpawnError, StderrMode};

/// The `std::process::Command` that carries `command` out, with stdin and
/// stdout piped and stderr as its mode says. Runtimes convert it to their
/// own process type.
pub fn to_std(command: &Command) -> std::process::Command {
    let mut std = std::process::Command::new(command.get_program());
    std.args(command.get_args());
    match command.get_env_policy() {
        EnvPolicy::Inherit => {}
        EnvPolicy::Minimal => {
            std.env_clear();
            std.envs(minimal_env(std::env::vars_os()));
        }
        EnvPolicy::AllowList => {
            let allowed: Vec<&OsStr> = command.get_env_allowed().collect();
            std.env_clear();
            std.envs(allowed_env(std::env::vars_os(), &allowed));
        }
        EnvPolicy::Empty => {
            std.env_clear();
        }
    }
    for (key, value) in command.get_envs() {
        match value {
            Some(value) => std.env(key, value),
            None => std.env_remove(key),
        };
    }
    if let Some(dir) = command.get_current_dir() {
        std.current_dir(dir);
    }
    adopt(&mut std, command);
    std
}

/// Sets on `std` what childwire needs of any command it runs: stdin and
/// stdout piped, stderr as `command` says, and the process group. Used for
/// commands built here and for ones the caller built
/// ([`Transport::spawn_std`](crate::Transport::spawn_std)).
pub fn adopt(std: &mut std::process::Command, command: &Command) {
    std.stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(match command.get_stderr() {
            StderrMode::Capture => Stdio::piped(),
            StderrMode::Inherit => Stdio::inherit(),
            StderrMode::Discard => Stdio::null(),
        });
    #[cfg(unix)]
    if command.get_process_group() {
        use std::os::unix::process::CommandExt;
        std.process_group(0);
    }
}

/// The error for `command` failing to start with `err`, saying what was
/// missing when the OS only says "not found": the working directory, or a
/// script's `#!` interpreter.
pub fn spawn_error(command: &Command, err: io::Error) -> SpawnError {
    let not_found = err.kind() == io::ErrorKind::NotFound;
    let error = SpawnError::new(command, err);
    if !not_found {
        return error;
    }
    if let Some(dir) = command.get_current_dir().filter(|dir| !dir.is_dir()) {
        return error.with_missing_dir(dir.to_owned());
    }
    match resolve(command.get_program()).and_then(|script| missing_interpreter(&script)) {
        Some(interpreter) => error.with_missing_interpreter(interpreter),
        None => error,
    }
}

/// Where the OS would find `program`: itself if it is a path, else the
/// first match on `PATH`.
fn resolve(program: &OsStr) -> Option<PathBuf> {
    let path = Path::new(program);
    if path.components().count() > 1 {
        return path.is_file().then(|| path.to_owned());
    }
    std::env::split_paths(&std::env::var_os("PATH")?)
        .map(|dir| dir.join(program))
        .find(|candidate| candidate.is_file())
}

/// The interpreter named on `script`'s `#!` line, if it does not exist.
fn missing_interpreter(script: &Path) -> Option<PathBuf> {
    let mut head = [0u8; 256];
    let n = std::fs::File::open(script).ok()?.read(&mut head).ok()?;
    let line = head[..n].strip_prefix(b"#!")?;
    let line = line.split(|&b| b == b'\n').next()?;
    let interpreter = String::from_utf8_lossy(line);
    let interpreter = PathBuf::from(interpreter.split_whitespace().next()?);
    (!interpreter.exists()).then_some(interpreter)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn c16_std_command_carries_args_cwd_and_explicit_env_unchanged() {
        let mut command = Command::new("server");
        command
            .args(["--flag", "a b", "-"])
            .current_dir("/tmp")
            .env_policy(EnvPolicy::Minimal)
            .env("EXTRA", "1");
        let std = to_std(&command);
        let args: Vec<_> = std.get_args().collect();
        assert_eq!(args, ["--flag", "a b", "-"]);
        assert_eq!(std.get_current_dir(), Some(Path::new("/tmp")));
        assert!(
            std.get_envs()
                .any(|(k, v)| k == "EXTRA" && v == Some(OsStr::new("1")))
        );
    }

    #[test]
    fn c16_allow_list_clear_and_remove_shape_the_environment() {
        // Reads the real environment: PATH is set in every test run.
        let mut command = Command::new("server");
        command
            .env_allow(["PATH"])
            .env("A", "1")
            .env("B", "2")
            .env_remove("A");
        let std = to_std(&command);
        let envs: Vec<_> = std.get_envs().collect();
        assert!(
            envs.iter().any(|(k, v)| *k == "PATH" && v.is_some()),
            "{envs:?}"
        );
        assert!(
            envs.iter()
                .any(|(k, v)| *k == "B" && *v == Some(OsStr::new("2")))
        );
        // Removed: after a clear, std drops it from the list instead of
        // recording a removal; either way the child does not get it.
        assert!(
            !envs.iter().any(|(k, v)| *k == "A" && v.is_some()),
            "A is removed"
        );
        assert!(!envs.iter().any(|(k, _)| *k == "HOME"), "not on the list");

        let mut command = Command::new("server");
        command.env_clear().env("ONLY", "this");
        let envs: Vec<_> = to_std(&command)
            .get_envs()
            .map(|(k, _)| k.to_owned())
            .collect();
        assert_eq!(envs, ["ONLY"]);
    }

    #[test]
    fn c11_a_missing_working_directory_is_named() {
        let mut command = Command::new("sh");
        command.current_dir("/definitely/not/a/dir");
        let err = spawn_error(&command, io::Error::from(io::ErrorKind::NotFound));
        assert!(err.to_string().contains("working directory"), "{err}");
    }
}
