//! `cargo xtask macos`, the `macos` step of `cargo xtask ci`: the workspace
//! type-checked and linted for `x86_64-apple-darwin` and
//! `aarch64-apple-darwin` (`cargo clippy --target ...`, warnings denied), so
//! the macOS paths of the code (process groups without `/proc`, no pidfd, no
//! cgroups) build. Nothing is linked or run: a check needs the target's
//! standard library alone (added with rustup when missing, about 30 s each
//! once), no macOS linker or SDK.
//!
//! Every package but the benches (they read `/proc`) and xtask, every
//! target of them (libraries, the `childwire` command, tests, examples),
//! every feature: what the Windows step checks for Windows.

use crate::cmd;

/// The macOS targets: Intel and Apple silicon.
pub(crate) const TARGETS: [&str; 2] = ["x86_64-apple-darwin", "aarch64-apple-darwin"];

pub(crate) fn check() -> Result<(), String> {
    for target in TARGETS {
        cmd::ensure_rust_target(target)?;
        eprintln!("macos: clippy for {target}");
        cmd::run(&mut cmd::cargo([
            "clippy",
            "--target",
            target,
            "--workspace",
            "--exclude",
            "childwire-bench",
            "--exclude",
            "xtask",
            "--all-targets",
            "--all-features",
            "--",
            "-D",
            "warnings",
        ]))?;
    }
    Ok(())
}
