//! Valgrind for the instruction-count rows of `cargo xtask bench`: Debian's
//! `valgrind` package, installed with apt-get when `valgrind` does not
//! start (as root, else through sudo; after an `apt-get update` if the
//! package lists are stale or absent).

use std::process::Command;

use crate::cmd;

const PACKAGE: &str = "valgrind";

/// Installs valgrind unless it answers `--version`.
pub(crate) fn ensure() -> Result<(), String> {
    if version().is_some() {
        return Ok(());
    }
    eprintln!("bench: valgrind is missing; installing the `{PACKAGE}` package");
    cmd::apt_install(&[PACKAGE])?;
    match version() {
        Some(version) => {
            eprintln!("bench: installed {version}");
            Ok(())
        }
        None => Err("valgrind still does not start after installing it".into()),
    }
}

/// `valgrind-3.19.0`, or `None` when valgrind does not start.
fn version() -> Option<String> {
    cmd::output(Command::new("valgrind").arg("--version")).map(|v| v.trim().to_string())
}
