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
    if cmd::run(&mut apt(&["install", "-y", PACKAGE])).is_err() {
        cmd::run(&mut apt(&["update"]))?;
        cmd::run(&mut apt(&["install", "-y", PACKAGE]))?;
    }
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

fn is_root() -> bool {
    cmd::output(Command::new("id").arg("-u")).is_some_and(|uid| uid.trim() == "0")
}
