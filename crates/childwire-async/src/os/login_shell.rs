//! The user's login shell, asked once for its environment
//! ([`EnvPolicy::LoginShell`](childwire_core::EnvPolicy::LoginShell)): a
//! host started from a desktop lacks what the shell's startup files add to
//! `PATH` (`npx`, `uvx`, version managers).
//!
//! The shell (`$SHELL`, else the user's entry in `/etc/passwd`, else
//! `/bin/sh`) runs as `SHELL -l -i -c SCRIPT` (csh and tcsh: `-c` alone,
//! which they require), in a session of its own with no terminal, stdin
//! and stderr on the null device; the script prints a marker, the
//! environment (`/usr/bin/env -0`) and the marker again, so whatever the
//! startup files print (banners, motd, prompts) is ignored. What it prints
//! is read up to 4 MiB. If the environment has not come within the
//! timeout, the shell's process group is sent SIGKILL and the error names
//! the shell. The result, success or failure, is kept for the life of the
//! process. `PWD`, `OLDPWD`, `SHLVL` and `_` are the shell's own and are
//! left out.
//!
//! Windows has no login shell: the policy acts as `Inherit` there, and
//! [`login_shell_env`] fails as unsupported.

use std::ffi::OsString;
use std::fmt;
use std::io;
use std::path::PathBuf;
use std::sync::{Arc, OnceLock};
use std::time::Duration;

/// How long the login shell may take to print its environment when
/// [`EnvPolicy::LoginShell`](childwire_core::EnvPolicy::LoginShell) asks it
/// first (a shell with heavy startup files takes a second or two).
pub const LOGIN_SHELL_TIMEOUT: Duration = Duration::from_secs(5);

/// The most a login shell may print before its environment is refused.
#[cfg(not(windows))]
const MAX_OUTPUT: usize = 4 * 1024 * 1024;

/// Variables of the shell's own, not the user's.
#[cfg(any(not(windows), test))]
const SHELL_OWN: &[&str] = &["PWD", "OLDPWD", "SHLVL", "_"];

/// The login shell's environment, as its variables in order.
pub type LoginEnv = Arc<[(OsString, OsString)]>;

/// The login shell could not give its environment.
#[derive(Debug, Clone)]
pub struct LoginShellError {
    shell: PathBuf,
    kind: io::ErrorKind,
    why: String,
}

impl LoginShellError {
    fn new(shell: PathBuf, kind: io::ErrorKind, why: impl Into<String>) -> Self {
        Self {
            shell,
            kind,
            why: why.into(),
        }
    }

    /// The shell that was asked.
    pub fn shell(&self) -> &std::path::Path {
        &self.shell
    }

    /// Why: `TimedOut` when it did not answer in time, `NotFound` when it
    /// could not be started, `InvalidData` when it printed no environment,
    /// `Unsupported` on Windows.
    pub fn kind(&self) -> io::ErrorKind {
        self.kind
    }

    /// The error as an `io::Error`.
    pub fn to_io_error(&self) -> io::Error {
        io::Error::new(self.kind, self.to_string())
    }
}

impl fmt::Display for LoginShellError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "the login shell `{}` {}", self.shell.display(), self.why)
    }
}

impl std::error::Error for LoginShellError {}

static CACHE: OnceLock<Result<LoginEnv, LoginShellError>> = OnceLock::new();

/// The user's login shell's environment: asked the first time, with
/// `timeout`, and kept for the life of the process (a failure too); later
/// calls, and spawns with
/// [`EnvPolicy::LoginShell`](childwire_core::EnvPolicy::LoginShell), get
/// the same answer at once. Concurrent first calls wait for one shell.
///
/// Blocking for up to `timeout` the first time. A host may call it early
/// (at start, on a blocking thread) to choose the timeout and to keep the
/// wait off its first spawn; otherwise the first spawn asks, with
/// [`LOGIN_SHELL_TIMEOUT`].
///
/// ```no_run
/// use std::time::Duration;
///
/// match childwire_async::login_shell_env(Duration::from_secs(3)) {
///     Ok(env) => println!("{} variables from the login shell", env.len()),
///     Err(err) => eprintln!("{err}"),
/// }
/// ```
pub fn login_shell_env(timeout: Duration) -> Result<LoginEnv, LoginShellError> {
    CACHE.get_or_init(|| ask(timeout)).clone()
}

#[cfg(windows)]
fn ask(_timeout: Duration) -> Result<LoginEnv, LoginShellError> {
    Err(LoginShellError::new(
        PathBuf::from("(none)"),
        io::ErrorKind::Unsupported,
        "does not exist on Windows",
    ))
}

#[cfg(not(windows))]
fn ask(timeout: Duration) -> Result<LoginEnv, LoginShellError> {
    let shell = user_shell();
    unix::ask(&shell, timeout).map_err(|(kind, why)| LoginShellError::new(shell, kind, why))
}

/// `$SHELL`, else the user's shell in `/etc/passwd`, else `/bin/sh`.
#[cfg(not(windows))]
fn user_shell() -> PathBuf {
    if let Some(shell) = std::env::var_os("SHELL").filter(|shell| !shell.is_empty()) {
        return shell.into();
    }
    let uid = crate::sys::getuid().to_string();
    std::fs::read_to_string("/etc/passwd")
        .ok()
        .and_then(|passwd| {
            passwd.lines().find_map(|line| {
                let fields: Vec<&str> = line.split(':').collect();
                (fields.len() == 7 && fields[2] == uid && !fields[6].is_empty())
                    .then(|| PathBuf::from(fields[6]))
            })
        })
        .unwrap_or_else(|| PathBuf::from("/bin/sh"))
}

/// The variables between the two markers in `output`, or `None` if both
/// are not there.
#[cfg(test)]
fn parse(output: &[u8], marker: &[u8]) -> Option<Vec<(OsString, OsString)>> {
    let start = find(output, marker)? + marker.len();
    let len = find(&output[start..], marker)?;
    Some(parse_vars(&output[start..start + len]))
}

/// The variables `env -0` printed: each `NAME=VALUE` ends with a NUL.
#[cfg(any(not(windows), test))]
fn parse_vars(printed: &[u8]) -> Vec<(OsString, OsString)> {
    printed
        .split(|&b| b == 0)
        .filter_map(|var| {
            let eq = var.iter().position(|&b| b == b'=').filter(|&eq| eq > 0)?;
            let (name, value) = (&var[..eq], &var[eq + 1..]);
            if SHELL_OWN.iter().any(|own| own.as_bytes() == name) {
                return None;
            }
            Some((bytes_to_os(name), bytes_to_os(value)))
        })
        .collect()
}

#[cfg(any(not(windows), test))]
fn find(haystack: &[u8], needle: &[u8]) -> Option<usize> {
    haystack
        .windows(needle.len())
        .position(|window| window == needle)
}

#[cfg(unix)]
fn bytes_to_os(bytes: &[u8]) -> OsString {
    use std::os::unix::ffi::OsStringExt;
    OsString::from_vec(bytes.to_vec())
}

#[cfg(all(not(unix), test))]
fn bytes_to_os(bytes: &[u8]) -> OsString {
    String::from_utf8_lossy(bytes).into_owned().into()
}

#[cfg(not(windows))]
mod unix {
    use std::io::{self, Read};
    use std::path::Path;
    use std::process::{Command, Stdio};
    use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

    use super::{LoginEnv, MAX_OUTPUT, find, parse_vars};
    use crate::handoff::handoff;
    use crate::job_thread::spawn_named;

    pub(super) fn ask(
        shell: &Path,
        timeout: Duration,
    ) -> Result<LoginEnv, (io::ErrorKind, String)> {
        let deadline = Instant::now() + timeout;
        let nanos = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map(|since| since.subsec_nanos())
            .unwrap_or_default();
        let marker = format!("_CHILDWIRE_ENV_{}_{nanos}_", std::process::id());
        let script = format!("printf '%s' '{marker}'; /usr/bin/env -0; printf '%s' '{marker}'");
        let name = shell
            .file_name()
            .map(|name| name.to_string_lossy().into_owned())
            .unwrap_or_default();
        let mut command = Command::new(shell);
        if !name.ends_with("csh") {
            command.args(["-l", "-i"]);
        }
        command
            .args(["-c", &script])
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::null());
        new_session(&mut command);
        let mut child = command
            .spawn()
            .map_err(|err| (err.kind(), format!("could not be started ({err})")))?;
        let pid = child.id();
        let mut stdout = child.stdout.take().expect("piped");
        // What it printed (the environment, or why not), then its exit status.
        let (print, printed) = handoff();
        let (exit, exited) = handoff::<String>();
        let spawned = spawn_named(
            "childwire-login-shell",
            Box::new(move || {
                print.give(read_env(&mut stdout, marker.as_bytes()));
                let status = child
                    .wait()
                    .map_or_else(|err| err.to_string(), |status| status.to_string());
                exit.give(status);
            }),
        );
        if let Err(err) = spawned {
            kill_group(pid);
            return Err((err.kind(), format!("could not be read ({err})")));
        }
        let deadline = Some(deadline);
        match printed.take(deadline) {
            Ok(Ok(env)) => {
                // It may print on its way out (logout files): let it, until
                // the deadline.
                if exited.take(deadline).is_err() {
                    kill_group(pid);
                }
                Ok(env)
            }
            Ok(Err(why)) => {
                let status = exited.take(deadline).unwrap_or_else(|_| {
                    kill_group(pid);
                    "did not exit".into()
                });
                Err((why.0, format!("{} ({status})", why.1)))
            }
            Err(_) => {
                kill_group(pid);
                Err((
                    io::ErrorKind::TimedOut,
                    format!("did not print its environment within {timeout:?}; it was ended"),
                ))
            }
        }
    }

    /// Reads what the shell prints until the second marker, its EOF, or
    /// [`MAX_OUTPUT`]; each byte is searched once.
    fn read_env(
        stdout: &mut impl Read,
        marker: &[u8],
    ) -> Result<LoginEnv, (io::ErrorKind, String)> {
        let mut output = Vec::new();
        let mut chunk = [0u8; 8192];
        // Where the environment starts (after the first marker), and how
        // far the search went (a marker may straddle two reads).
        let mut start = None;
        let mut searched: usize = 0;
        loop {
            let n = match stdout.read(&mut chunk) {
                Ok(0) => {
                    return Err((
                        io::ErrorKind::InvalidData,
                        "exited without printing its environment (is `/usr/bin/env -0` there?)"
                            .into(),
                    ));
                }
                Ok(n) => n,
                Err(err) if err.kind() == io::ErrorKind::Interrupted => continue,
                Err(err) => return Err((err.kind(), format!("could not be read ({err})"))),
            };
            output.extend_from_slice(&chunk[..n]);
            let from = searched.saturating_sub(marker.len() - 1);
            searched = output.len();
            let begin = match start {
                Some(begin) => begin,
                None => match find(&output[from..], marker) {
                    Some(at) => *start.insert(from + at + marker.len()),
                    None => continue,
                },
            };
            if let Some(len) = find(&output[begin.max(from)..], marker) {
                let end = begin.max(from) + len;
                return Ok(parse_vars(&output[begin..end]).into());
            }
            if output.len() > MAX_OUTPUT {
                return Err((
                    io::ErrorKind::InvalidData,
                    format!(
                        "printed over {} MiB without its environment",
                        MAX_OUTPUT >> 20
                    ),
                ));
            }
        }
    }

    /// The shell runs in a session of its own: no terminal, so an
    /// interactive shell never stops to wait for one (job control), and
    /// it leads a process group that can be ended whole.
    #[allow(unsafe_code)]
    fn new_session(command: &mut Command) {
        use std::os::unix::process::CommandExt;
        // SAFETY: the closure makes one system call (setsid) through
        // libc, allocates nothing and takes no lock: async-signal-safe,
        // as the fork of a multi-threaded process requires.
        unsafe {
            command.pre_exec(|| {
                crate::sys::setsid()?;
                Ok(())
            });
        }
    }

    /// SIGKILL to the shell's process group (its PID: it leads its
    /// session).
    fn kill_group(pid: u32) {
        if let Some(pgid) = crate::sys::Pid::from_u32(pid) {
            let _ = crate::sys::kill_process_group(pgid, libc::SIGKILL);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_environment_between_the_markers_is_taken_and_the_shell_s_own_left_out() {
        let output = b"Welcome to your shell!\nMMPATH=/opt/bin:/usr/bin\0PWD=/x\0EMPTY=\0\
                       EQ=a=b\0=bad\0SHLVL=2\0MM\nbye\n";
        let vars = parse(output, b"MM").expect("both markers");
        let vars: Vec<(String, String)> = vars
            .into_iter()
            .map(|(k, v)| (k.into_string().unwrap(), v.into_string().unwrap()))
            .collect();
        assert_eq!(
            vars,
            [
                ("PATH".into(), "/opt/bin:/usr/bin".into()),
                ("EMPTY".into(), String::new()),
                ("EQ".into(), "a=b".into()),
            ]
        );
        assert!(
            parse(b"MMPATH=/bin\0", b"MM").is_none(),
            "the second marker"
        );
        assert!(parse(b"PATH=/bin\0", b"MM").is_none());
    }
}
