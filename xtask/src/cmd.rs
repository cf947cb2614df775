//! Running commands: where, with which cargo, and how failures read.

use std::ffi::OsStr;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

/// The workspace root, whatever directory `cargo xtask` was started from.
pub(crate) fn repo_root() -> PathBuf {
    let xtask_dir = Path::new(env!("CARGO_MANIFEST_DIR"));
    xtask_dir
        .parent()
        .expect("xtask lives one level below the workspace root")
        .to_path_buf()
}

/// A `cargo` command run from the workspace root. `$CARGO` is the cargo (and
/// toolchain) that launched xtask; a bare `cargo` could pick another one.
pub(crate) fn cargo<I, S>(args: I) -> Command
where
    I: IntoIterator<Item = S>,
    S: AsRef<OsStr>,
{
    let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
    let mut command = Command::new(cargo);
    command.args(args).current_dir(repo_root());
    command
}

/// Runs `command` with inherited stdio; `Err` says what failed and how.
pub(crate) fn run(command: &mut Command) -> Result<(), String> {
    let shown = display(command);
    eprintln!("$ {shown}");
    let status = command
        .status()
        .map_err(|error| format!("could not start `{shown}`: {error}"))?;
    if status.success() {
        Ok(())
    } else {
        Err(format!("`{shown}` failed ({status})"))
    }
}

/// Runs `command` with its stdout passed through line by line to `each`
/// (and echoed), stderr inherited; `Err` as for [`run`].
pub(crate) fn run_lines(command: &mut Command, mut each: impl FnMut(&str)) -> Result<(), String> {
    use std::io::{BufRead, BufReader, Write};
    let shown = display(command);
    eprintln!("$ {shown}");
    let mut child = command
        .stdout(Stdio::piped())
        .spawn()
        .map_err(|error| format!("could not start `{shown}`: {error}"))?;
    let stdout = child.stdout.take().expect("stdout was piped");
    let mut echo = std::io::stdout().lock();
    for line in BufReader::new(stdout).lines() {
        let line = line.map_err(|error| format!("reading `{shown}`: {error}"))?;
        let _ = writeln!(echo, "{line}");
        each(&line);
    }
    drop(echo);
    let status = child
        .wait()
        .map_err(|error| format!("waiting for `{shown}`: {error}"))?;
    if status.success() {
        Ok(())
    } else {
        Err(format!("`{shown}` failed ({status})"))
    }
}

/// Runs `command` quietly and returns its stdout, or `None` when it cannot
/// start or fails (used for probes such as `cargo fuzz --version`).
pub(crate) fn output(command: &mut Command) -> Option<String> {
    let out = command
        .stdin(Stdio::null())
        .stderr(Stdio::null())
        .output()
        .ok()?;
    if out.status.success() {
        String::from_utf8(out.stdout).ok()
    } else {
        None
    }
}

/// The command as a user would type it, environment overrides first.
pub(crate) fn display(command: &Command) -> String {
    let mut parts = Vec::new();
    for (key, value) in command.get_envs() {
        if let Some(value) = value {
            parts.push(format!(
                "{}={}",
                key.to_string_lossy(),
                quote(&value.to_string_lossy())
            ));
        }
    }
    let program = Path::new(command.get_program());
    // `$CARGO` is an absolute path into the toolchain; "cargo" is what to retype.
    let program = match program.file_stem().and_then(OsStr::to_str) {
        Some("cargo") => "cargo".to_string(),
        _ => program.display().to_string(),
    };
    parts.push(program);
    parts.extend(command.get_args().map(|arg| quote(&arg.to_string_lossy())));
    parts.join(" ")
}

fn quote(word: &str) -> String {
    if !word.is_empty()
        && word
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || "-_=./:,+@".contains(c))
    {
        word.to_string()
    } else {
        format!("'{}'", word.replace('\'', r"'\''"))
    }
}

/// Parses a positive number of seconds from a flag value or an env variable.
pub(crate) fn parse_seconds(what: &str, value: &str) -> Result<u64, String> {
    match value.trim().parse::<u64>() {
        Ok(seconds) if seconds > 0 => Ok(seconds),
        _ => Err(format!(
            "{what} must be a whole number of seconds > 0, got `{value}`"
        )),
    }
}

/// `apt-get install -y PACKAGES` (Debian's packages, for what a step needs
/// and a fresh machine lacks), as root or through sudo; after an
/// `apt-get update` when the package lists are stale or absent.
pub(crate) fn apt_install(packages: &[&str]) -> Result<(), String> {
    let apt = |args: &[&str]| {
        let mut command = if is_root() {
            Command::new("apt-get")
        } else {
            let mut sudo = Command::new("sudo");
            sudo.arg("apt-get");
            sudo
        };
        command.args(args).env("DEBIAN_FRONTEND", "noninteractive");
        command
    };
    let install = || {
        let mut install = apt(&["install", "-y"]);
        install.args(packages);
        install
    };
    if run(&mut install()).is_err() {
        run(&mut apt(&["update"]))?;
        run(&mut install())?;
    }
    Ok(())
}

fn is_root() -> bool {
    output(Command::new("id").arg("-u")).is_some_and(|uid| uid.trim() == "0")
}

/// `rustup target add TARGET` when that target's standard library is not
/// installed yet.
pub(crate) fn ensure_rust_target(target: &str) -> Result<(), String> {
    let installed = output(Command::new("rustup").args(["target", "list", "--installed"]))
        .ok_or_else(|| format!("`rustup target list` failed: rustup is needed to add {target}"))?;
    if installed.lines().any(|line| line.trim() == target) {
        return Ok(());
    }
    eprintln!("target {target} not installed; adding it");
    run(Command::new("rustup").args(["target", "add", target]))
}
