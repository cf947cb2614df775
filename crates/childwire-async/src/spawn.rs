//! From childwire's plain [`Command`] to an OS process: the environment
//! policy applied to the real environment, the pipes, the process group,
//! and a spawn error that says what was really missing. Written once for
//! every runtime.
//!
//! On Windows a bare program name without an extension (`npx`, `uvx`) is
//! looked up as Node's `cross-spawn` does: in each directory of the child's
//! `PATH` (the host's, unless the command's environment policy or
//! variables change it), each extension of its `PATHEXT` (default
//! `.COM;.EXE;.BAT;.CMD`), first hit wins; `std` is given the full path.
//! `std` alone would only try `npx.exe`. `std` runs a `.bat`/`.cmd` through
//! `cmd.exe` with its own escaping, and refuses an argument it cannot pass
//! safely (a line break: CVE-2024-24576); the spawn error then names it.
//! The current directory is not searched (as `std` does not).
//! [`Transport::spawn_std`](crate::Transport::spawn_std) runs the caller's
//! command as `std` resolves it.

use std::ffi::OsStr;
use std::io::{self, Read};
use std::path::{Path, PathBuf};
use std::process::Stdio;

use childwire_core::command::{allowed_env, minimal_env};
use childwire_core::{Command, EnvPolicy, SpawnError, StderrMode};

/// The `std::process::Command` that carries `command` out, with stdin and
/// stdout piped and stderr as its mode says. Runtimes convert it to their
/// own process type.
///
/// With [`EnvPolicy::LoginShell`] the login shell is asked first (once per
/// process, see [`login_shell_env`](crate::login_shell_env)); if it could
/// not give the environment, the command returned refuses to spawn (an
/// argument holds a NUL byte: `std` fails with `InvalidInput` before it
/// forks), and [`spawn_error`] names the shell. [`try_to_std`] says so at
/// once instead.
pub fn to_std(command: &Command) -> std::process::Command {
    let mut std = std::process::Command::new(command.get_program());
    configure(&mut std, command);
    #[cfg(windows)]
    if let Some(found) = windows_program(command, &std) {
        // std has no `set_program`: the same settings on a new command.
        std = std::process::Command::new(found);
        configure(&mut std, command);
    }
    adopt(&mut std, command);
    std
}

/// [`to_std`], or the error that spawning it would give: with
/// [`EnvPolicy::LoginShell`], the login shell's failure, naming the shell.
pub fn try_to_std(command: &Command) -> Result<std::process::Command, SpawnError> {
    match login_shell_failure(command) {
        Some(err) => Err(err),
        None => Ok(to_std(command)),
    }
}

/// The login shell's failure, if `command` takes its environment and the
/// shell could not give it (asking it if nobody did yet).
fn login_shell_failure(command: &Command) -> Option<SpawnError> {
    if cfg!(windows) || command.get_env_policy() != EnvPolicy::LoginShell {
        return None;
    }
    let Err(err) =
        crate::os::login_shell::login_shell_env(crate::os::login_shell::LOGIN_SHELL_TIMEOUT)
    else {
        return None;
    };
    Some(SpawnError::login_shell_failed(
        command,
        err.shell().to_owned(),
        err.to_io_error(),
    ))
}

/// Sets `command`'s arguments, environment and working directory on `std`.
fn configure(std: &mut std::process::Command, command: &Command) {
    std.args(command.get_args());
    match command.get_env_policy() {
        EnvPolicy::Inherit => {}
        // Windows has no login shell: inherited.
        EnvPolicy::LoginShell if cfg!(windows) => {}
        EnvPolicy::LoginShell => {
            match crate::os::login_shell::login_shell_env(
                crate::os::login_shell::LOGIN_SHELL_TIMEOUT,
            ) {
                Ok(vars) => {
                    std.env_clear();
                    std.envs(vars.iter().map(|(key, value)| (key, value)));
                }
                // Refuses to spawn; `spawn_error` says why.
                Err(_) => {
                    std.arg("\0");
                }
            }
        }
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
}

/// The `PATHEXT` Windows assumes when none is set.
const DEFAULT_PATHEXT: &str = ".COM;.EXE;.BAT;.CMD";

/// Where `command`'s program is found through `PATHEXT` (see the module
/// docs) for a child spawned with `std`'s environment; `None` if it is not
/// a bare name without an extension, or is not found (then `std` searches
/// as it does).
#[cfg(windows)]
fn windows_program(command: &Command, std: &std::process::Command) -> Option<PathBuf> {
    let inherits = matches!(
        command.get_env_policy(),
        EnvPolicy::Inherit | EnvPolicy::LoginShell
    );
    let var = |name: &str| child_var(std, inherits, name);
    let path = var("PATH")?;
    find_with_pathext(
        command.get_program(),
        std::env::split_paths(&path),
        var("PATHEXT").as_deref(),
        Path::is_file,
    )
}

/// The value of `name` in the environment of `std`'s child: as set (or
/// removed) on it, else the host's if the child `inherits` the host's
/// environment. Names match whatever their case, as on Windows.
#[cfg(windows)]
fn child_var(
    std: &std::process::Command,
    inherits: bool,
    name: &str,
) -> Option<std::ffi::OsString> {
    match std
        .get_envs()
        .find(|(key, _)| key.eq_ignore_ascii_case(name))
    {
        Some((_, value)) => value.map(OsStr::to_owned),
        // A policy that clears the environment lists every variable it
        // keeps: one it does not list is not the child's.
        None if inherits => std::env::var_os(name),
        None => None,
    }
}

/// Finds `program` the way Windows' shell and Node's `cross-spawn` do, when
/// it is a bare name without an extension: in each of `dirs` in order, each
/// extension of `pathext` (`;`-separated, [`DEFAULT_PATHEXT`] when unset or
/// empty) in order, the first candidate `is_file` accepts. Platform-neutral,
/// so that it is tested everywhere; used on Windows.
fn find_with_pathext(
    program: &OsStr,
    dirs: impl IntoIterator<Item = PathBuf>,
    pathext: Option<&OsStr>,
    is_file: impl Fn(&Path) -> bool,
) -> Option<PathBuf> {
    let bare = !program
        .as_encoded_bytes()
        .iter()
        .any(|b| matches!(b, b'/' | b'\\' | b':'));
    if program.is_empty() || !bare || Path::new(program).extension().is_some() {
        return None;
    }
    let pathext = pathext.map(OsStr::to_string_lossy).unwrap_or_default();
    let pathext = if pathext.trim().is_empty() {
        DEFAULT_PATHEXT.into()
    } else {
        pathext
    };
    let extensions: Vec<&str> = pathext
        .split(';')
        .map(str::trim)
        .filter(|ext| ext.len() > 1 && ext.starts_with('.'))
        .collect();
    dirs.into_iter()
        .filter(|dir| !dir.as_os_str().is_empty())
        .find_map(|dir| {
            extensions.iter().find_map(|ext| {
                let mut name = program.to_owned();
                name.push(ext);
                let candidate = dir.join(name);
                is_file(&candidate).then_some(candidate)
            })
        })
}

/// Whether `program` is a batch file, which Windows runs through `cmd.exe`.
fn is_batch_file(program: &Path) -> bool {
    program
        .extension()
        .is_some_and(|ext| ext.eq_ignore_ascii_case("bat") || ext.eq_ignore_ascii_case("cmd"))
}

/// The first of `args` (with its index) that `std` refuses to pass to a
/// batch file: one with a line break, which `cmd.exe` would take as the end
/// of the command and cannot be escaped.
fn refused_batch_argument<'a>(
    args: impl IntoIterator<Item = &'a OsStr>,
) -> Option<(usize, &'a OsStr)> {
    args.into_iter().enumerate().find(|(_, arg)| {
        arg.as_encoded_bytes()
            .iter()
            .any(|&b| b == b'\r' || b == b'\n')
    })
}

/// Sets on `std` what childwire needs of any command it runs: stdin and
/// stdout piped, stderr as `command` says, and the process group. Used for
/// commands built here and for ones the caller built
/// ([`Transport::spawn_std`](crate::Transport::spawn_std)).
pub fn adopt(std: &mut std::process::Command, command: &Command) {
    std.stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(match command.get_stderr() {
            StderrMode::Show | StderrMode::Capture => Stdio::piped(),
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
/// script's `#!` interpreter (Unix); or, on Windows, which argument of a
/// batch file `std` refused; or which login shell could not give the
/// environment ([`EnvPolicy::LoginShell`]).
pub fn spawn_error(command: &Command, err: io::Error) -> SpawnError {
    let kind = err.kind();
    if kind == io::ErrorKind::InvalidInput {
        if let Some(login_shell) = login_shell_failure(command) {
            return login_shell;
        }
    }
    let error = SpawnError::new(command, err);
    if kind == io::ErrorKind::InvalidInput && cfg!(windows) {
        // The program as `std` was given it: found with the child's PATH.
        let program = to_std(command).get_program().to_owned();
        if let (true, Some((index, arg))) = (
            is_batch_file(Path::new(&program)),
            refused_batch_argument(command.get_args()),
        ) {
            return error.with_refused_batch_argument(index, arg.to_owned());
        }
    }
    // Windows says a missing working directory is not a directory
    // (ERROR_DIRECTORY), where Unix says it is not found.
    if !matches!(kind, io::ErrorKind::NotFound | io::ErrorKind::NotADirectory) {
        return error;
    }
    if let Some(dir) = command.get_current_dir().filter(|dir| !dir.is_dir()) {
        return error.with_missing_dir(dir.to_owned());
    }
    if kind != io::ErrorKind::NotFound {
        return error;
    }
    match resolve(command.get_program()).and_then(|script| missing_interpreter(&script)) {
        Some(interpreter) => error.with_missing_interpreter(interpreter),
        None => error,
    }
}

/// Where the OS would find `program`: itself if it is a path, else the
/// first match on `PATH` (on Windows, through `PATHEXT` first).
fn resolve(program: &OsStr) -> Option<PathBuf> {
    let path = Path::new(program);
    if path.components().count() > 1 {
        return path.is_file().then(|| path.to_owned());
    }
    let dirs = std::env::split_paths(&std::env::var_os("PATH")?).collect::<Vec<_>>();
    if cfg!(windows) {
        let pathext = std::env::var_os("PATHEXT");
        if let Some(found) =
            find_with_pathext(program, dirs.clone(), pathext.as_deref(), Path::is_file)
        {
            return Some(found);
        }
    }
    dirs.into_iter()
        .map(|dir| dir.join(program))
        .find(|candidate| candidate.is_file())
}

/// The interpreter named on `script`'s `#!` line, if it does not exist.
/// Never on Windows: it does not read `#!` lines.
fn missing_interpreter(script: &Path) -> Option<PathBuf> {
    if cfg!(windows) {
        return None;
    }
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

    /// A probe that accepts exactly `files`, whatever the case (as Windows'
    /// file systems do).
    fn only(files: &[&str]) -> impl Fn(&Path) -> bool {
        let lower = |path: &str| PathBuf::from(path.to_ascii_lowercase());
        let files: Vec<PathBuf> = files.iter().map(|file| lower(file)).collect();
        // Compared as paths: on Windows `join` writes `\`, which is `/`.
        move |path| files.contains(&lower(&path.to_string_lossy()))
    }

    fn dirs(list: &[&str]) -> Vec<PathBuf> {
        list.iter().map(PathBuf::from).collect()
    }

    #[test]
    fn c16_a_bare_name_is_found_through_pathext_dir_by_dir() {
        let files = only(&["/bin2/npx.cmd", "/bin2/npx.exe", "/bin3/npx.com"]);
        let search = |ext: Option<&str>| {
            find_with_pathext(
                OsStr::new("npx"),
                dirs(&["/bin1", "/bin2", "/bin3"]),
                ext.map(OsStr::new),
                &files,
            )
        };
        // The first directory with any match wins; within it, PATHEXT order.
        assert_eq!(search(None), Some(PathBuf::from("/bin2/npx.EXE")));
        assert_eq!(
            search(Some(".cmd;.exe")),
            Some(PathBuf::from("/bin2/npx.cmd"))
        );
        assert_eq!(
            search(Some(" ; .com ;")),
            Some(PathBuf::from("/bin3/npx.com"))
        );
        // Empty PATHEXT is the default; entries without a dot are skipped.
        assert_eq!(search(Some("")), Some(PathBuf::from("/bin2/npx.EXE")));
        assert_eq!(search(Some("cmd;.bat")), None);
    }

    #[test]
    fn c16_only_bare_names_without_an_extension_are_looked_up() {
        let files = only(&["/bin/uvx.exe", "/bin/node.exe.cmd", "/bin/x.cmd"]);
        for program in ["node.exe", "./uvx", "C:uvx", "bin/uvx", "bin\\uvx", ""] {
            assert_eq!(
                find_with_pathext(OsStr::new(program), dirs(&["/bin"]), None, &files),
                None,
                "{program}"
            );
        }
        // Empty PATH entries are not the current directory.
        assert_eq!(
            find_with_pathext(OsStr::new("x"), dirs(&["", "/bin"]), None, &files),
            Some(PathBuf::from("/bin/x.CMD"))
        );
        assert_eq!(
            find_with_pathext(OsStr::new("uvx"), dirs(&["/none"]), None, &files),
            None
        );
    }

    #[test]
    fn c16_pathext_lookup_probes_real_files() {
        let dir = std::env::temp_dir().join(format!("childwire-pathext-{}", std::process::id()));
        std::fs::create_dir_all(dir.join("npx.exe")).unwrap();
        std::fs::write(dir.join("npx.cmd"), "@echo off\r\n").unwrap();
        // A directory named like a program is not one. (Lower-case
        // extensions: this file system may tell cases apart.)
        let pathext = OsStr::new(".exe;.cmd");
        let found = find_with_pathext(
            OsStr::new("npx"),
            [dir.clone()],
            Some(pathext),
            Path::is_file,
        );
        std::fs::remove_dir_all(&dir).unwrap();
        assert_eq!(found, Some(dir.join("npx.cmd")));
    }

    #[test]
    fn c11_the_batch_argument_std_refuses_is_the_first_with_a_line_break() {
        assert!(is_batch_file(Path::new("C:/node/npx.CMD")));
        assert!(is_batch_file(Path::new("run.bat")));
        assert!(!is_batch_file(Path::new("node.exe")));
        let args = ["-y", "a%b\"c", "{\"k\":\r\n1}", "x\ny"].map(OsStr::new);
        assert_eq!(
            refused_batch_argument(args),
            Some((2, OsStr::new("{\"k\":\r\n1}")))
        );
        assert_eq!(
            refused_batch_argument(["a b", "%PATH%"].map(OsStr::new)),
            None
        );
    }

    /// On Windows: the program `to_std` hands `std` for `command`, with a
    /// `.cmd` launcher in a directory of its own.
    #[cfg(windows)]
    fn resolved(command: &mut Command, launcher: &str) -> PathBuf {
        let dir = std::env::temp_dir().join(format!(
            "childwire-launcher-{}-{launcher}",
            std::process::id()
        ));
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(dir.join(format!("{launcher}.cmd")), "@echo off\r\n").unwrap();
        // Any case: Windows reads `Path` as `PATH`.
        command.env("Path", &dir);
        let program = PathBuf::from(to_std(command).get_program());
        std::fs::remove_dir_all(&dir).unwrap();
        program
    }

    #[cfg(windows)]
    #[test]
    fn c16_windows_finds_a_cmd_launcher_on_the_child_path() {
        let launcher = "cw-launcher-test";
        for policy in [EnvPolicy::Inherit, EnvPolicy::Empty, EnvPolicy::Minimal] {
            let mut command = Command::new(launcher);
            command.env_policy(policy);
            let program = resolved(&mut command, launcher);
            assert!(
                program
                    .file_name()
                    .is_some_and(|name| name.eq_ignore_ascii_case(format!("{launcher}.CMD"))),
                "{policy:?}: {program:?}"
            );
            assert!(program.is_absolute(), "{program:?}");
        }
        // Without PATH in a cleared environment, std is left to search.
        let mut command = Command::new(launcher);
        command.env_clear();
        assert_eq!(to_std(&command).get_program(), OsStr::new(launcher));
    }

    #[test]
    fn c11_a_missing_working_directory_is_named() {
        let mut command = Command::new("sh");
        command.current_dir("/definitely/not/a/dir");
        for kind in [io::ErrorKind::NotFound, io::ErrorKind::NotADirectory] {
            let err = spawn_error(&command, io::Error::from(kind));
            assert!(
                err.to_string().contains("working directory"),
                "{kind}: {err}"
            );
        }
    }
}
