//! The `msrv` step of `cargo xtask ci`: the `rust-version` the manifests
//! promise, proven on that very toolchain.
//!
//! The toolchain is installed with rustup when missing (minimal profile, about
//! 10 s once), and everything builds in its own target directory so the main
//! build's artifacts are not thrown out.

use std::process::Command;

use crate::cmd;

/// Below the workspace root's `target/`.
const TARGET_DIR: &str = "msrv";

/// Members that declare a newer `rust-version` of their own because what
/// they depend on needs it (rmcp 3.11: 1.88, TurboMCP 3.6: 1.89), and the
/// SDK examples, which use them. The msrv step checks everything else, the
/// `childwire` command and the light examples (`cargo run --example
/// mcp_client`) included.
const NEWER_MSRV: &[&str] = &[
    "childwire-rmcp",
    "childwire-turbomcp",
    "childwire-sdk-examples",
];

pub(crate) fn check(each_test_line: impl FnMut(&str)) -> Result<(), String> {
    let version = workspace_rust_version()?;
    let toolchain = toolchain_for(&version);
    eprintln!("rust-version {version}: checking with toolchain {toolchain}");
    ensure_toolchain(&toolchain)?;
    // One rust-version is declared for every workspace member but the SDK
    // adapters and their examples (`NEWER_MSRV`), so the rest must build on it:
    // first every target (benches too, as tests in the dev
    // profile), then the same selection of packages and features as the
    // `test` step runs its tests, reusing those artifacts.
    let mut everything = vec!["--workspace", "--all-features"];
    for package in NEWER_MSRV {
        everything.extend(["--exclude", package]);
    }
    let mut build = msrv_cargo(&toolchain, &["test", "--no-run", "--all-targets"]);
    build.args(&everything);
    cmd::run(&mut build)?;
    let mut test = msrv_cargo(&toolchain, &["test"]);
    test.args(&everything);
    cmd::run_lines(&mut test, each_test_line)
}

/// `rust-version` from `[workspace.package]` of the root manifest, the one
/// every crate inherits.
fn workspace_rust_version() -> Result<String, String> {
    let path = cmd::repo_root().join("Cargo.toml");
    let manifest = std::fs::read_to_string(&path)
        .map_err(|error| format!("cannot read {}: {error}", path.display()))?;
    rust_version_in(&manifest).ok_or_else(|| {
        format!(
            "no rust-version in [workspace.package] of {}",
            path.display()
        )
    })
}

/// A minimal TOML reading: the `rust-version = "..."` line inside the
/// `[workspace.package]` table.
fn rust_version_in(manifest: &str) -> Option<String> {
    let mut in_table = false;
    for line in manifest.lines() {
        let line = line.split('#').next().unwrap_or("").trim();
        if line.starts_with('[') {
            in_table = line == "[workspace.package]";
            continue;
        }
        if !in_table {
            continue;
        }
        if let Some(("rust-version", value)) =
            line.split_once('=').map(|(key, value)| (key.trim(), value))
        {
            return Some(value.trim().trim_matches('"').to_string());
        }
    }
    None
}

/// The rustup toolchain for a `rust-version`: "1.85" promises 1.85.0, the
/// first release of that line, so that is the one to check.
fn toolchain_for(rust_version: &str) -> String {
    if rust_version.split('.').count() == 2 {
        format!("{rust_version}.0")
    } else {
        rust_version.to_string()
    }
}

fn ensure_toolchain(toolchain: &str) -> Result<(), String> {
    let list = cmd::output(Command::new("rustup").args(["toolchain", "list"])).ok_or(
        "`rustup toolchain list` failed: the msrv step needs rustup to install the MSRV toolchain",
    )?;
    let prefix = format!("{toolchain}-");
    if list.lines().any(|line| line.starts_with(&prefix)) {
        return Ok(());
    }
    eprintln!("toolchain {toolchain} not installed; installing it (minimal profile, once)");
    cmd::run(Command::new("rustup").args([
        "toolchain",
        "install",
        toolchain,
        "--profile",
        "minimal",
    ]))
}

/// `cargo` of `toolchain`, from the workspace root, with the committed
/// Cargo.lock as it is (resolver 3 keeps it MSRV-compatible; `--locked`
/// proves it) and the separate target directory.
fn msrv_cargo(toolchain: &str, args: &[&str]) -> Command {
    let mut command = Command::new("rustup");
    command
        .args(["run", toolchain, "cargo"])
        .args(args)
        .arg("--locked")
        .current_dir(cmd::repo_root());
    // The target directory goes in the environment, not `--target-dir`, so
    // that cargo run by the tests themselves (the examples' tests build the
    // examples) inherits it too instead of writing MSRV artifacts into the
    // main `target/`. Absolute: those run from their package's directory.
    command.env(
        "CARGO_TARGET_DIR",
        cmd::repo_root().join("target").join(TARGET_DIR),
    );
    // Set by the cargo that runs xtask (or by a user) for the current
    // toolchain; left in place they would pull its rustc back in.
    for variable in ["CARGO", "RUSTC", "RUSTDOC", "RUSTUP_TOOLCHAIN"] {
        command.env_remove(variable);
    }
    command
}

#[cfg(test)]
mod tests {
    use super::{rust_version_in, toolchain_for};

    #[test]
    fn rust_version_is_read_from_workspace_package_only() {
        let manifest = r#"
[package]
rust-version = "1.70"

[workspace.package]
edition = "2024"
rust-version = "1.85" # edition 2024
license = "MIT"

[workspace.dependencies]
rust-version = "9.9"
"#;
        assert_eq!(rust_version_in(manifest).as_deref(), Some("1.85"));
        assert_eq!(rust_version_in("[workspace]\n"), None);
    }

    #[test]
    fn a_two_part_rust_version_means_its_first_release() {
        assert_eq!(toolchain_for("1.85"), "1.85.0");
        assert_eq!(toolchain_for("1.85.1"), "1.85.1");
    }
}
