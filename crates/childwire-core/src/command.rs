//! What to run, and how: program, arguments, environment policy, working
//! directory, stderr handling and process group.
//!
//! [`Command`] is plain data: the core reads no environment and touches no
//! file. The async layer turns it into an OS process, applying the policy
//! decided here ([`minimal_env`]) in one place for every runtime.

use std::ffi::{OsStr, OsString};
use std::fmt;
use std::io;
use std::path::{Path, PathBuf};

use crate::config::ConfigError;

/// The variables the official MCP SDKs pass to a server under their default,
/// minimal environment (on Unix).
#[cfg(not(windows))]
pub const MINIMAL_ENV_VARS: &[&str] = &["HOME", "LOGNAME", "PATH", "SHELL", "TERM", "USER"];

/// The variables the official MCP SDKs pass to a server under their default,
/// minimal environment (on Windows), plus `PATHEXT`, which finds `npx.cmd`
/// for `npx`: `APPDATA`, `COMSPEC`, `HOMEDRIVE`, `HOMEPATH`, `LOCALAPPDATA`,
/// `PATH`, `PATHEXT`, `PROCESSOR_ARCHITECTURE`, `PROGRAMDATA`,
/// `PROGRAMFILES`, `PROGRAMFILES(X86)`, `PROGRAMW6432`, `SYSTEMDRIVE`,
/// `SYSTEMROOT`, `TEMP`, `USERNAME`, `USERPROFILE`, `WINDIR`. Without
/// `SYSTEMROOT` many programs cannot even start; npm runs its scripts
/// through `COMSPEC`.
#[cfg(windows)]
pub const MINIMAL_ENV_VARS: &[&str] = WINDOWS_MINIMAL_ENV_VARS;

/// The Windows allow-list, compiled for tests on every platform so that
/// Linux CI checks it too. `COMSPEC`, `WINDIR`, `PROGRAMDATA` and the two
/// program directories of a 64-bit system besides `PROGRAMFILES`
/// (`PROGRAMFILES(X86)`, `PROGRAMW6432`) are passed by the TypeScript MCP
/// SDK since 2.4.
#[cfg(any(windows, test))]
const WINDOWS_MINIMAL_ENV_VARS: &[&str] = &[
    "APPDATA",
    "COMSPEC",
    "HOMEDRIVE",
    "HOMEPATH",
    "LOCALAPPDATA",
    "PATH",
    "PATHEXT",
    "PROCESSOR_ARCHITECTURE",
    "PROGRAMDATA",
    "PROGRAMFILES",
    "PROGRAMFILES(X86)",
    "PROGRAMW6432",
    "SYSTEMDRIVE",
    "SYSTEMROOT",
    "TEMP",
    "USERNAME",
    "USERPROFILE",
    "WINDIR",
];

/// Which of the parent's environment variables the child sees.
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
    /// The child sees only the variables named with
    /// [`Command::env_allow`] (a custom allow-list).
    AllowList,
    /// The child inherits nothing ([`Command::env_clear`]).
    Empty,
    /// The child gets the environment of the user's login shell (`$SHELL`,
    /// else the user's entry in `/etc/passwd`, else `/bin/sh`), asked once
    /// per process with a timeout and kept: what a terminal would give it,
    /// `PATH` with what the shell's startup files add (`npx`, `uvx`, version
    /// managers), which a host started from a desktop lacks. The shell's
    /// own output is ignored. If the shell fails or does not answer in
    /// time, spawning fails with an error naming the shell; nothing is
    /// started. On Windows, where there is no login shell, it acts as
    /// [`Inherit`](Self::Inherit).
    LoginShell,
}

/// What happens to the child's stderr.
///
/// By default ([`Show`](Self::Show)) the user sees what the server says
/// there, as with rmcp's, the TypeScript SDK's and the Python SDK's stdio
/// transports, which let the child write to the host's stderr; childwire
/// also keeps the tail for the exit report. [`Capture`](Self::Capture)
/// keeps it off the terminal, [`Discard`](Self::Discard) drops it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum StderrMode {
    /// Piped and always drained, like [`Capture`](Self::Capture), and each
    /// line also written to this process's stderr, marked with the
    /// program's name (`[npx] Starting server...`), whole lines at a time
    /// so that several children's lines do not mix (the default).
    ///
    /// A stderr of this process that takes nothing (a pipe nobody reads)
    /// never holds up the transport: the lines it does not take wait for a
    /// thread of their own, up to 1 MiB, and beyond that are not shown
    /// (they stay in the exit report's tail), with a note of how many. On
    /// Windows, which cannot tell whether a write to a pipe would wait,
    /// lines to a pipe always go to that thread.
    #[default]
    Show,
    /// Piped and always drained, and quiet: the last lines are kept for the
    /// exit report, and each line goes to `tracing` (target
    /// `childwire::stderr`, level `debug`) and the configured callback
    /// only.
    Capture,
    /// Shared with the parent's stderr.
    Inherit,
    /// Sent to the null device.
    Discard,
}

/// What holds everything the child starts, so that all of it can be ended
/// with the child.
///
/// Whatever is chosen, on Linux the processes that left the child's group
/// but still hold its pipes are found and ended after its exit. On Windows
/// every child is in a job object of its own, whatever is chosen: nothing it
/// starts can leave the job, and the job ends with the child (and with the
/// host, however the host dies).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[non_exhaustive]
pub enum Containment {
    /// The child's process group (with [`Command::process_group`], the
    /// default): what stays in the group is signalled and swept with it.
    #[default]
    ProcessGroup,
    /// Linux: the child is placed in a cgroup v2 of its own, created under
    /// the host's cgroup before it runs its first instruction, and
    /// `cgroup.kill` ends everything it ever started when it ends, whatever
    /// group or session a descendant moved to and whether it holds a pipe
    /// or not. Needs a cgroup v2 hierarchy where the host may create a
    /// sub-cgroup (root, or a cgroup delegated to the user, e.g. a systemd
    /// unit with `Delegate=yes`). Where that is not possible, spawning
    /// fails with an error that says why; nothing is started. Elsewhere
    /// (Windows, where the job object already does this, and other Unix)
    /// spawning fails as unsupported.
    Cgroup,
}

/// A child process to spawn: like `std::process::Command`, plus the policies
/// a stdio transport needs.
///
/// Arguments and the working directory are passed through unchanged; no
/// shell is involved unless the program is one.
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
    /// Variables set (`Some`) or removed (`None`), in order: the last word
    /// on a name wins, as with `std::process::Command`.
    envs: Vec<(OsString, Option<OsString>)>,
    env_policy: EnvPolicy,
    env_allowed: Vec<OsString>,
    kill_on_drop: bool,
    current_dir: Option<PathBuf>,
    stderr: StderrMode,
    process_group: bool,
    containment: Containment,
    kill_on_parent_death: bool,
}

impl Command {
    /// A command that runs `program`, found on `PATH` unless it is a path.
    /// On Windows a bare name without an extension is found through
    /// `PATHEXT` too, as Node's cross-spawn does (`npx` is `npx.cmd`).
    pub fn new(program: impl AsRef<OsStr>) -> Self {
        Self {
            program: program.as_ref().to_owned(),
            args: Vec::new(),
            envs: Vec::new(),
            env_policy: EnvPolicy::Inherit,
            env_allowed: Vec::new(),
            kill_on_drop: true,
            current_dir: None,
            stderr: StderrMode::Show,
            process_group: true,
            containment: Containment::ProcessGroup,
            kill_on_parent_death: false,
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
            .push((key.as_ref().to_owned(), Some(value.as_ref().to_owned())));
        self
    }

    /// Removes a variable from what the child gets, inherited or set before
    /// with [`env`](Self::env).
    pub fn env_remove(&mut self, key: impl AsRef<OsStr>) -> &mut Self {
        self.envs.push((key.as_ref().to_owned(), None));
        self
    }

    /// The child inherits none of the parent's variables; those set with
    /// [`env`](Self::env) it still gets ([`EnvPolicy::Empty`]).
    pub fn env_clear(&mut self) -> &mut Self {
        self.env_policy(EnvPolicy::Empty)
    }

    /// The child inherits only the parent's variables named here (added to
    /// any named before), like [`EnvPolicy::Minimal`] with a list of your
    /// own ([`EnvPolicy::AllowList`]). Exported shell functions are skipped
    /// all the same.
    ///
    /// ```
    /// use childwire_core::command::{Command, EnvPolicy};
    ///
    /// let mut command = Command::new("node");
    /// command.env_allow(["PATH", "HOME", "NODE_OPTIONS"]).env_remove("NODE_OPTIONS");
    /// assert_eq!(command.get_env_policy(), EnvPolicy::AllowList);
    /// ```
    pub fn env_allow<I, S>(&mut self, names: I) -> &mut Self
    where
        I: IntoIterator<Item = S>,
        S: AsRef<OsStr>,
    {
        self.env_allowed
            .extend(names.into_iter().map(|name| name.as_ref().to_owned()));
        self.env_policy(EnvPolicy::AllowList)
    }

    /// Whether dropping the transport without a shutdown kills the child
    /// (its group, with one) with SIGKILL (default `true`), sent by the drop
    /// itself on Unix. With `false`,
    /// a dropped transport leaves the child running: it reads EOF on its
    /// stdin, and childwire still reaps it when it exits.
    pub fn kill_on_drop(&mut self, enabled: bool) -> &mut Self {
        self.kill_on_drop = enabled;
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

    /// Chooses what happens to the child's stderr: shown and captured by
    /// default ([`StderrMode::Show`]); [`StderrMode::Capture`] for quiet.
    pub fn stderr(&mut self, mode: StderrMode) -> &mut Self {
        self.stderr = mode;
        self
    }

    /// Whether the child leads a process group of its own (default `true`).
    ///
    /// With a group, SIGTERM and SIGKILL reach everything the child started
    /// (`npx`'s node, `sh -c`'s commands), and what is left when the child
    /// exits is swept. Turn it off only if the child must stay in the
    /// parent's group (for example to receive the terminal's Ctrl-C).
    ///
    /// On Windows it is a console process group (`CREATE_NEW_PROCESS_GROUP`),
    /// the target of the graceful step (`CTRL_BREAK_EVENT`); without one
    /// that step cannot be taken (the break could not be aimed at the child
    /// alone), and the job is terminated after `term_grace`. The job object
    /// holds the tree either way.
    pub fn process_group(&mut self, enabled: bool) -> &mut Self {
        self.process_group = enabled;
        self
    }

    /// Chooses what holds everything the child starts (default: its process
    /// group). See [`Containment`].
    pub fn contain(&mut self, containment: Containment) -> &mut Self {
        self.containment = containment;
        self
    }

    /// Whether the child is killed (SIGKILL) when the host process dies,
    /// however it dies, SIGKILL included (default `false`; Linux only,
    /// elsewhere it is ignored). On Windows it needs no option: the child's
    /// job object ends the whole tree when the host's handle to it closes,
    /// which happens however the host dies.
    ///
    /// Tied to the host *process*, not to the thread that spawned: Linux's
    /// parent-death signal fires when the spawning thread exits, so such
    /// children are spawned from one long-lived thread of childwire's. It
    /// reaches the child itself: what the child starts is ended by the
    /// child's own end only if it watches for it (its stdin reaches EOF
    /// when the host dies).
    pub fn kill_on_parent_death(&mut self, enabled: bool) -> &mut Self {
        self.kill_on_parent_death = enabled;
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

    /// The variables set with [`env`](Self::env) (`Some`) or removed with
    /// [`env_remove`](Self::env_remove) (`None`), in order.
    pub fn get_envs(&self) -> impl ExactSizeIterator<Item = (&OsStr, Option<&OsStr>)> {
        self.envs.iter().map(|(k, v)| (k.as_os_str(), v.as_deref()))
    }

    /// The names of [`env_allow`](Self::env_allow).
    pub fn get_env_allowed(&self) -> impl ExactSizeIterator<Item = &OsStr> {
        self.env_allowed.iter().map(OsString::as_os_str)
    }

    /// Whether dropping the transport kills the child.
    pub fn get_kill_on_drop(&self) -> bool {
        self.kill_on_drop
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

    /// What holds everything the child starts.
    pub fn get_containment(&self) -> Containment {
        self.containment
    }

    /// Whether the child is killed when the host dies. Always `false` off
    /// Linux.
    pub fn get_kill_on_parent_death(&self) -> bool {
        cfg!(target_os = "linux") && self.kill_on_parent_death
    }

    /// Whether the child gets a process group of its own. Always `false` off
    /// Unix and Windows.
    pub fn get_process_group(&self) -> bool {
        (cfg!(unix) || cfg!(windows)) && self.process_group
    }
}

/// The allow-listed variables of `vars` (the parent's environment, read by
/// the adapter). Values that start with `()` are exported shell functions (a
/// Shellshock vector), skipped as the MCP SDKs do.
pub fn minimal_env<'a>(
    vars: impl Iterator<Item = (OsString, OsString)> + 'a,
) -> impl Iterator<Item = (OsString, OsString)> + 'a {
    allowed_env(vars, MINIMAL_ENV_VARS)
}

/// The variables of `vars` named in `allowed`, exported shell functions
/// skipped, as [`minimal_env`] does with its own list. On Windows names
/// match whatever their case, as Windows reads them (`Path` is `PATH`).
pub fn allowed_env<'a, A: AsRef<OsStr> + 'a>(
    vars: impl Iterator<Item = (OsString, OsString)> + 'a,
    allowed: &'a [A],
) -> impl Iterator<Item = (OsString, OsString)> + 'a {
    vars.filter(move |(key, value)| {
        allowed.iter().any(|name| {
            if cfg!(windows) {
                key.eq_ignore_ascii_case(name)
            } else {
                key.as_os_str() == name.as_ref()
            }
        }) && !value.as_encoded_bytes().starts_with(b"()")
    })
}

/// The child could not be started.
///
/// Its message names the program and says why in words a user can act on.
/// Nothing was left running.
#[derive(Debug)]
pub struct SpawnError {
    program: OsString,
    reason: SpawnFailure,
}

/// Why a spawn failed, for [`SpawnError`].
#[derive(Debug)]
enum SpawnFailure {
    Os {
        source: io::Error,
        /// The working directory, if it is what was missing.
        missing_dir: Option<PathBuf>,
        /// The script's `#!` interpreter, if it is what was missing.
        missing_interpreter: Option<PathBuf>,
        /// The argument (its index) a batch file could not be given; boxed,
        /// as it is rare and the error travels in every spawn's `Result`.
        refused_batch_arg: Option<Box<(usize, OsString)>>,
    },
    Config(ConfigError),
    NoRuntime(&'static str),
    /// The containment asked for is not available here; why.
    NoContainment(Containment, io::Error),
    /// The login shell did not give the environment; which shell, and why
    /// (its message names the shell).
    LoginShell(PathBuf, io::Error),
}

impl SpawnError {
    /// The OS refused to start `command` with `source`.
    pub fn new(command: &Command, source: io::Error) -> Self {
        Self {
            program: command.program.clone(),
            reason: SpawnFailure::Os {
                source,
                missing_dir: None,
                missing_interpreter: None,
                refused_batch_arg: None,
            },
        }
    }

    /// `command` was not started: its config makes no sense.
    pub fn invalid_config(command: &Command, error: ConfigError) -> Self {
        Self {
            program: command.program.clone(),
            reason: SpawnFailure::Config(error),
        }
    }

    /// `command` was not started: it was spawned outside the runtime the
    /// transport needs (`what` says which, e.g. "a Tokio runtime").
    pub fn no_runtime(command: &Command, what: &'static str) -> Self {
        Self {
            program: command.program.clone(),
            reason: SpawnFailure::NoRuntime(what),
        }
    }

    /// `command` was not started: the [`Containment`] it asks for is not
    /// available on this host, for the reason `source` gives.
    pub fn containment_unavailable(command: &Command, source: io::Error) -> Self {
        Self {
            program: command.program.clone(),
            reason: SpawnFailure::NoContainment(command.containment, source),
        }
    }

    /// `command` was not started: its environment was to come from the
    /// login shell `shell` ([`EnvPolicy::LoginShell`]), which could not give
    /// it, for the reason `source` gives (`TimedOut` for a shell that did
    /// not answer in time).
    pub fn login_shell_failed(command: &Command, shell: PathBuf, source: io::Error) -> Self {
        Self {
            program: command.program.clone(),
            reason: SpawnFailure::LoginShell(shell, source),
        }
    }

    /// The login shell that failed to give the environment, if that is why.
    pub fn login_shell(&self) -> Option<&Path> {
        match &self.reason {
            SpawnFailure::LoginShell(shell, _) => Some(shell),
            _ => None,
        }
    }

    /// Says that the OS error was about the missing working directory `dir`
    /// (a missing directory and a missing program both fail with `NotFound`;
    /// the adapter looks which it was).
    pub fn with_missing_dir(mut self, dir: PathBuf) -> Self {
        if let SpawnFailure::Os { missing_dir, .. } = &mut self.reason {
            *missing_dir = Some(dir);
        }
        self
    }

    /// Says that the OS error was about the script's missing `#!`
    /// interpreter `interpreter`, not the script itself.
    pub fn with_missing_interpreter(mut self, interpreter: PathBuf) -> Self {
        if let SpawnFailure::Os {
            missing_interpreter,
            ..
        } = &mut self.reason
        {
            *missing_interpreter = Some(interpreter);
        }
        self
    }

    /// Says that the OS error (`InvalidInput`) was `std` refusing argument
    /// `index` (from 0), `arg`, of a batch file (`.bat`, `.cmd`) on Windows:
    /// `cmd.exe` parses a batch file's command line again, and `std` refuses
    /// what it cannot escape safely there (line breaks) rather than risk
    /// command injection (CVE-2024-24576).
    pub fn with_refused_batch_argument(mut self, index: usize, arg: OsString) -> Self {
        if let SpawnFailure::Os {
            refused_batch_arg, ..
        } = &mut self.reason
        {
            *refused_batch_arg = Some(Box::new((index, arg)));
        }
        self
    }

    /// The program that did not start.
    pub fn program(&self) -> &OsStr {
        &self.program
    }

    /// The error's kind, to match on: the OS error's (`NotFound`,
    /// `PermissionDenied`, ...), `InvalidInput` for a config that makes no
    /// sense, `Unsupported` outside the runtime or when the containment
    /// asked for is not available, the login shell's (`TimedOut`, ...) when
    /// it could not give the environment.
    pub fn kind(&self) -> io::ErrorKind {
        match &self.reason {
            SpawnFailure::Os { source, .. } | SpawnFailure::LoginShell(_, source) => source.kind(),
            SpawnFailure::Config(_) => io::ErrorKind::InvalidInput,
            SpawnFailure::NoRuntime(_) | SpawnFailure::NoContainment(..) => {
                io::ErrorKind::Unsupported
            }
        }
    }

    /// The OS error, if the OS refused (to start the child, or to contain
    /// it), or the login shell's.
    pub fn io_error(&self) -> Option<&io::Error> {
        match &self.reason {
            SpawnFailure::Os { source, .. }
            | SpawnFailure::NoContainment(_, source)
            | SpawnFailure::LoginShell(_, source) => Some(source),
            _ => None,
        }
    }

    /// The config error, if the config was at fault.
    pub fn config_error(&self) -> Option<&ConfigError> {
        match &self.reason {
            SpawnFailure::Config(error) => Some(error),
            _ => None,
        }
    }
}

impl fmt::Display for SpawnError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let program = Path::new(&self.program).display();
        write!(f, "could not start `{program}`: ")?;
        let (source, missing_dir, missing_interpreter, refused_batch_arg) = match &self.reason {
            SpawnFailure::Config(error) => return error.fmt(f),
            SpawnFailure::NoRuntime(what) => {
                return write!(f, "spawned outside {what}; nothing was started");
            }
            SpawnFailure::NoContainment(containment, source) => {
                return write!(
                    f,
                    "{containment:?} containment is not available on this host ({source}); nothing was started"
                );
            }
            SpawnFailure::LoginShell(shell, source) => {
                return write!(
                    f,
                    "its environment was to come from the login shell `{}`, which could not give it ({source}); nothing was started",
                    shell.display()
                );
            }
            SpawnFailure::Os {
                source,
                missing_dir,
                missing_interpreter,
                refused_batch_arg,
            } => (source, missing_dir, missing_interpreter, refused_batch_arg),
        };
        if let Some((index, arg)) = refused_batch_arg.as_deref() {
            return write!(
                f,
                "argument {index} ({:?}) cannot be passed to a batch file: cmd.exe reads its \
                 command line again, and a line break there cannot be escaped safely, so it is \
                 refused (CVE-2024-24576) ({source})",
                Excerpt(arg)
            );
        }
        let bare_name = !self
            .program
            .as_encoded_bytes()
            .iter()
            .any(|&b| b == b'/' || (cfg!(windows) && b == b'\\'));
        match (source.kind(), missing_dir, missing_interpreter) {
            (_, Some(dir), _) => write!(
                f,
                "the working directory `{}` does not exist ({source})",
                dir.display()
            ),
            (_, _, Some(interpreter)) => write!(
                f,
                "its interpreter `{}` (named on its `#!` line) was not found ({source})",
                interpreter.display()
            ),
            (io::ErrorKind::NotFound, _, _) if bare_name => {
                write!(f, "program not found on PATH ({source})")
            }
            (io::ErrorKind::NotFound, _, _) => write!(f, "no such file ({source})"),
            (io::ErrorKind::PermissionDenied, _, _) => {
                write!(f, "permission denied, is it executable? ({source})")
            }
            _ => source.fmt(f),
        }
    }
}

/// An argument as `Debug` shows it (line breaks escaped), cut short: it may
/// be a whole JSON document.
struct Excerpt<'a>(&'a OsStr);

impl fmt::Debug for Excerpt<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        const MAX_CHARS: usize = 40;
        let arg = self.0.to_string_lossy();
        match arg.char_indices().nth(MAX_CHARS) {
            Some((end, _)) => write!(f, "{:?}…", &arg[..end]),
            None => write!(f, "{arg:?}"),
        }
    }
}

impl std::error::Error for SpawnError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match &self.reason {
            SpawnFailure::Os { source, .. }
            | SpawnFailure::NoContainment(_, source)
            | SpawnFailure::LoginShell(_, source) => Some(source),
            SpawnFailure::Config(error) => Some(error),
            SpawnFailure::NoRuntime(_) => None,
        }
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
    fn c16_the_windows_minimal_env_has_what_npm_and_program_lookups_need() {
        // As Windows spells them in a real environment block: the match
        // ignores case there, so compare the way it does.
        let parent = os(&[
            ("ComSpec", r"C:\Windows\system32\cmd.exe"),
            ("windir", r"C:\Windows"),
            ("ProgramData", r"C:\ProgramData"),
            ("ProgramFiles(x86)", r"C:\Program Files (x86)"),
            ("ProgramW6432", r"C:\Program Files"),
            ("GITHUB_TOKEN", "s3cr3t"),
        ]);
        let kept: Vec<_> = parent
            .iter()
            .filter(|(key, _)| {
                WINDOWS_MINIMAL_ENV_VARS
                    .iter()
                    .any(|name| key.eq_ignore_ascii_case(name))
            })
            .map(|(key, _)| key.to_string_lossy().into_owned())
            .collect();
        assert_eq!(
            kept,
            [
                "ComSpec",
                "windir",
                "ProgramData",
                "ProgramFiles(x86)",
                "ProgramW6432"
            ]
        );
        assert!(
            WINDOWS_MINIMAL_ENV_VARS.is_sorted(),
            "kept sorted, so a missing name is easy to see"
        );
        // On Windows the list in force is this one, and `minimal_env`
        // applies it without regard to case.
        #[cfg(windows)]
        {
            assert_eq!(MINIMAL_ENV_VARS, WINDOWS_MINIMAL_ENV_VARS);
            let kept: Vec<_> = minimal_env(parent.into_iter()).collect();
            assert_eq!(kept.len(), 5, "{kept:?}");
        }
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
        let err = SpawnError::new(&command, io::Error::from(io::ErrorKind::NotFound))
            .with_missing_dir("/definitely/not/a/dir".into());
        assert!(err.to_string().contains("working directory"), "{err}");

        let command = Command::new("./server.py");
        let err = SpawnError::new(&command, io::Error::from(io::ErrorKind::NotFound))
            .with_missing_interpreter("/usr/bin/python9".into());
        let text = err.to_string();
        assert!(
            text.contains("`/usr/bin/python9`") && text.contains("#!"),
            "{text}"
        );

        let command = Command::new("./server.sh");
        let err = SpawnError::new(&command, io::Error::from(io::ErrorKind::PermissionDenied));
        assert!(err.to_string().contains("permission denied"), "{err}");
    }

    #[test]
    fn a_login_shell_that_failed_is_named_with_the_reason() {
        let command = Command::new("npx");
        let err = SpawnError::login_shell_failed(
            &command,
            "/bin/zsh".into(),
            io::Error::new(io::ErrorKind::TimedOut, "no answer within 5s"),
        );
        let text = err.to_string();
        assert!(
            text.contains("`npx`") && text.contains("`/bin/zsh`") && text.contains("no answer"),
            "{text}"
        );
        assert_eq!(err.kind(), io::ErrorKind::TimedOut);
        assert_eq!(err.login_shell(), Some(Path::new("/bin/zsh")));
    }

    #[test]
    fn c11_a_batch_argument_std_refused_is_named_with_the_reason() {
        let command = Command::new("npx");
        let err = SpawnError::new(
            &command,
            io::Error::new(
                io::ErrorKind::InvalidInput,
                "batch file arguments are invalid",
            ),
        )
        .with_refused_batch_argument(1, "{\"a\":\n1}".into());
        let text = err.to_string();
        assert!(
            text.contains("argument 1 (\"{\\\"a\\\":\\n1}\")")
                && text.contains("batch file")
                && text.contains("line break"),
            "{text}"
        );
        assert_eq!(err.kind(), io::ErrorKind::InvalidInput);

        let long = format!("{}\n", "x".repeat(100));
        let err = SpawnError::new(&command, io::Error::from(io::ErrorKind::InvalidInput))
            .with_refused_batch_argument(0, long.into());
        assert!(
            err.to_string()
                .contains(&format!("\"{}\"…", "x".repeat(40))),
            "{err}"
        );
    }
}
