//! What to run, and how: program, arguments, environment policy, working
//! directory, stderr handling and process group (C11, C13, C16).
//!
//! [`Command`] is plain data. Every runtime adapter turns it into a
//! `std::process::Command` with [`Command::to_std`] and converts that into its
//! own process type, so the spawn policy is decided in one place.

use std::ffi::{OsStr, OsString};
use std::fmt;
use std::io;
use std::path::{Path, PathBuf};
use std::process::Stdio;

/// The variables the official MCP SDKs pass to a server under their default,
/// minimal environment (on Unix).
pub const MINIMAL_ENV_VARS: &[&str] = &["HOME", "LOGNAME", "PATH", "SHELL", "TERM", "USER"];

/// Which of the parent's environment variables the child sees (C16).
///
/// Variables set with [`Command::env`] are added in either case.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum EnvPolicy {
    /// The child inherits the whole environment (the default, as with
    /// `std::process::Command`).
    #[default]
    Inherit,
    /// The child sees only [`MINIMAL_ENV_VARS`], like the MCP SDKs' default:
    /// a server gets what it needs to run, not the host's secrets.
    Minimal,
}

/// What happens to the child's stderr (C09).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum StderrMode {
    /// Piped and always drained: the last lines are kept for the exit
    /// report, and each line goes to `tracing` and the configured callback
    /// (the default).
    #[default]
    Capture,
    /// Shared with the parent's stderr.
    Inherit,
    /// Sent to the null device.
    Discard,
}

/// A child process to spawn: like `std::process::Command`, plus the policies
/// a stdio transport needs.
///
/// Arguments and the working directory are passed through unchanged; no
/// shell is involved unless the program is one (C16).
///
/// ```
/// use childwire_core::command::{Command, EnvPolicy};
///
/// let mut command = Command::new("npx");
/// command
///     .args(["-y", "@modelcontextprotocol/server-everything"])
///     .env_policy(EnvPolicy::Minimal)
///     .env("DEBUG", "1");
/// assert_eq!(command.get_program(), "npx");
/// ```
#[derive(Debug, Clone)]
pub struct Command {
    program: OsString,
    args: Vec<OsString>,
    envs: Vec<(OsString, OsString)>,
    env_policy: EnvPolicy,
    current_dir: Option<PathBuf>,
    stderr: StderrMode,
    process_group: bool,
}

impl Command {
    /// A command that runs `program`, found on `PATH` unless it is a path.
    pub fn new(program: impl AsRef<OsStr>) -> Self {
        Self {
            program: program.as_ref().to_owned(),
            args: Vec::new(),
            envs: Vec::new(),
            env_policy: EnvPolicy::Inherit,
            current_dir: None,
            stderr: StderrMode::Capture,
            process_group: true,
        }
    }

    /// Adds one argument.
    pub fn arg(&mut self, arg: impl AsRef<OsStr>) -> &mut Self {
        self.args.push(arg.as_ref().to_owned());
        self
    }

    /// Adds arguments.
    pub fn args<I, S>(&mut self, args: I) -> &mut Self
    where
        I: IntoIterator<Item = S>,
        S: AsRef<OsStr>,
    {
        self.args
            .extend(args.into_iter().map(|a| a.as_ref().to_owned()));
        self
    }

    /// Sets a variable for the child, whatever the [`EnvPolicy`].
    pub fn env(&mut self, key: impl AsRef<OsStr>, value: impl AsRef<OsStr>) -> &mut Self {
        self.envs
            .push((key.as_ref().to_owned(), value.as_ref().to_owned()));
        self
    }

    /// Sets variables for the child, whatever the [`EnvPolicy`].
    pub fn envs<I, K, V>(&mut self, vars: I) -> &mut Self
    where
        I: IntoIterator<Item = (K, V)>,
        K: AsRef<OsStr>,
        V: AsRef<OsStr>,
    {
        for (key, value) in vars {
            self.env(key, value);
        }
        self
    }

    /// Chooses which of the parent's variables the child inherits.
    pub fn env_policy(&mut self, policy: EnvPolicy) -> &mut Self {
        self.env_policy = policy;
        self
    }

    /// Runs the child in `dir`.
    pub fn current_dir(&mut self, dir: impl AsRef<Path>) -> &mut Self {
        self.current_dir = Some(dir.as_ref().to_owned());
        self
    }

    /// Chooses what happens to the child's stderr.
    pub fn stderr(&mut self, mode: StderrMode) -> &mut Self {
        self.stderr = mode;
        self
    }

    /// Whether the child leads a process group of its own (default `true`,
    /// Unix only; C13).
    ///
    /// With a group, SIGTERM and SIGKILL reach everything the child started
    /// (`npx`'s node, `sh -c`'s commands), and what is left when the child
    /// exits is swept. Turn it off only if the child must stay in the
    /// parent's group (for example to receive the terminal's Ctrl-C).
    pub fn process_group(&mut self, enabled: bool) -> &mut Self {
        self.process_group = enabled;
        self
    }

    /// The program to run.
    pub fn get_program(&self) -> &OsStr {
        &self.program
    }

    /// The arguments.
    pub fn get_args(&self) -> impl ExactSizeIterator<Item = &OsStr> {
        self.args.iter().map(OsString::as_os_str)
    }

    /// The working directory, if one was set.
    pub fn get_current_dir(&self) -> Option<&Path> {
        self.current_dir.as_deref()
    }

    /// The environment policy.
    pub fn get_env_policy(&self) -> EnvPolicy {
        self.env_policy
    }

    /// The stderr mode.
    pub fn get_stderr(&self) -> StderrMode {
        self.stderr
    }

    /// Whether the child gets a process group of its own. Always `false` off
    /// Unix.
    pub fn get_process_group(&self) -> bool {
        cfg!(unix) && self.process_group
    }

    /// The child's stderr as the stderr mode asks: piped, inherited or null.
    pub fn stderr_stdio(&self) -> Stdio {
        match self.stderr {
            StderrMode::Capture => Stdio::piped(),
            StderrMode::Inherit => Stdio::inherit(),
            StderrMode::Discard => Stdio::null(),
        }
    }

    /// The `std::process::Command` that carries all of this out, with stdin
    /// and stdout piped. Adapters convert it to their runtime's type.
    pub fn to_std(&self) -> std::process::Command {
        let mut command = std::process::Command::new(&self.program);
        command.args(&self.args);
        if self.env_policy == EnvPolicy::Minimal {
            command.env_clear();
            command.envs(minimal_env(std::env::vars_os()));
        }
        command.envs(self.envs.iter().map(|(k, v)| (k, v)));
        if let Some(dir) = &self.current_dir {
            command.current_dir(dir);
        }
        command
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(self.stderr_stdio());
        #[cfg(unix)]
        if self.process_group {
            use std::os::unix::process::CommandExt;
            command.process_group(0);
        }
        command
    }
}

/// The allow-listed variables of `vars`. Values that start with `()` are
/// exported shell functions (a Shellshock vector), skipped as the MCP SDKs
/// do.
fn minimal_env(
    vars: impl Iterator<Item = (OsString, OsString)>,
) -> impl Iterator<Item = (OsString, OsString)> {
    vars.filter(|(key, value)| {
        MINIMAL_ENV_VARS.iter().any(|allowed| key == allowed)
            && !value.as_encoded_bytes().starts_with(b"()")
    })
}

/// The child could not be started (C11).
///
/// Its message names the program and says why in words a user can act on.
#[derive(Debug)]
pub struct SpawnError {
    program: OsString,
    /// The working directory, if it is what was missing.
    missing_dir: Option<PathBuf>,
    source: io::Error,
}

impl SpawnError {
    /// The error for `command` failing to start with `source`.
    ///
    /// A missing working directory and a missing program both fail with
    /// `NotFound`; this looks at the directory once, now, to say which.
    pub fn new(command: &Command, source: io::Error) -> Self {
        let missing_dir = command
            .current_dir
            .clone()
            .filter(|dir| source.kind() == io::ErrorKind::NotFound && !dir.is_dir());
        Self {
            program: command.program.clone(),
            missing_dir,
            source,
        }
    }

    /// The program that did not start.
    pub fn program(&self) -> &OsStr {
        &self.program
    }

    /// The OS error's kind, to match on (`NotFound`, `PermissionDenied`, ...).
    pub fn kind(&self) -> io::ErrorKind {
        self.source.kind()
    }

    /// The OS error.
    pub fn io_error(&self) -> &io::Error {
        &self.source
    }
}

impl fmt::Display for SpawnError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let program = Path::new(&self.program).display();
        write!(f, "could not start `{program}`: ")?;
        match (self.source.kind(), &self.missing_dir) {
            (_, Some(dir)) => write!(
                f,
                "the working directory `{}` does not exist ({})",
                dir.display(),
                self.source
            ),
            (io::ErrorKind::NotFound, _) if !self.program.as_encoded_bytes().contains(&b'/') => {
                write!(f, "program not found on PATH ({})", self.source)
            }
            (io::ErrorKind::NotFound, _) => write!(f, "no such file ({})", self.source),
            (io::ErrorKind::PermissionDenied, _) => {
                write!(f, "permission denied, is it executable? ({})", self.source)
            }
            _ => self.source.fmt(f),
        }
    }
}

impl std::error::Error for SpawnError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        Some(&self.source)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn os(pairs: &[(&str, &str)]) -> Vec<(OsString, OsString)> {
        pairs.iter().map(|(k, v)| (k.into(), v.into())).collect()
    }

    #[test]
    fn c16_minimal_env_keeps_only_the_allow_list_and_skips_shell_functions() {
        let parent = os(&[
            ("PATH", "/usr/bin"),
            ("HOME", "/home/u"),
            ("AWS_SECRET_ACCESS_KEY", "s3cr3t"),
            ("SHELL", "() { :; }; echo pwned"),
            ("TERM", "xterm"),
        ]);
        let kept: Vec<_> = minimal_env(parent.into_iter()).collect();
        assert_eq!(
            kept,
            os(&[("PATH", "/usr/bin"), ("HOME", "/home/u"), ("TERM", "xterm")])
        );
    }

    #[test]
    fn c16_std_command_carries_args_cwd_and_explicit_env_unchanged() {
        let mut command = Command::new("server");
        command
            .args(["--flag", "a b", "-"])
            .current_dir("/tmp")
            .env_policy(EnvPolicy::Minimal)
            .env("EXTRA", "1");
        let std = command.to_std();
        let args: Vec<_> = std.get_args().collect();
        assert_eq!(args, ["--flag", "a b", "-"]);
        assert_eq!(std.get_current_dir(), Some(Path::new("/tmp")));
        assert!(
            std.get_envs()
                .any(|(k, v)| k == "EXTRA" && v == Some(OsStr::new("1")))
        );
    }

    #[test]
    fn c11_spawn_error_names_the_program_and_the_reason() {
        let command = Command::new("no-such-server");
        let err = SpawnError::new(&command, io::Error::from(io::ErrorKind::NotFound));
        let text = err.to_string();
        assert!(
            text.contains("`no-such-server`") && text.contains("not found on PATH"),
            "{text}"
        );
        assert_eq!(err.kind(), io::ErrorKind::NotFound);

        let mut command = Command::new("server");
        command.current_dir("/definitely/not/a/dir");
        let err = SpawnError::new(&command, io::Error::from(io::ErrorKind::NotFound));
        assert!(err.to_string().contains("working directory"), "{err}");

        let command = Command::new("./server.sh");
        let err = SpawnError::new(&command, io::Error::from(io::ErrorKind::PermissionDenied));
        assert!(err.to_string().contains("permission denied"), "{err}");
    }
}
