//! `cargo xtask sdk-versions`, the `sdk versions` step of `cargo xtask ci`:
//! the SDK adapters build and pass their tests at the lowest and at the
//! newest SDK release their version ranges allow.
//!
//! `childwire-rmcp` takes `rmcp = "3.11"` and `childwire-turbomcp`
//! `turbomcp-* = "3.6"`, caret ranges, so that users get the SDKs' patch and
//! minor releases without waiting for childwire. The committed `Cargo.lock`
//! holds one version of each, which the `test` step covers; this step takes
//! a copy of the checkout (the files git tracks or would, so uncommitted work
//! counts and `target/` does not), moves the SDK to the lowest version of the
//! range with `cargo update --precise`, tests the adapter and the SDK
//! examples, then to the newest the index offers, and tests them again. A version equal to the
//! locked one is not built twice.

use std::path::{Path, PathBuf};
use std::process::Command;

use crate::cmd;

/// Each adapter and the SDK crates its manifest names with a version range.
const ADAPTERS: &[(&str, &[&str])] = &[
    ("childwire-rmcp", &["rmcp"]),
    (
        "childwire-turbomcp",
        &["turbomcp-protocol", "turbomcp-transport"],
    ),
];

/// Below the target directory: the copy and its own target directory.
const SCRATCH_DIR: &str = "sdk-versions";

/// Tested with each adapter: the adapters have no tests of their own beyond
/// their doctests; their SDK clients (`rmcp_client`, `turbomcp_client`) run a
/// whole session through them against the bundled server.
const SDK_EXAMPLES: &str = "childwire-sdk-examples";

pub(crate) fn check(mut each_test_line: impl FnMut(&str)) -> Result<(), String> {
    let root = cmd::repo_root();
    let scratch = target_dir(&root).join(SCRATCH_DIR);
    let copy = scratch.join("checkout");
    for (adapter, sdk) in ADAPTERS {
        let manifest = read(&root.join("crates").join(adapter).join("Cargo.toml"))?;
        let mut lowest = Vec::new();
        for name in *sdk {
            let requirement = requirement_in(&manifest, name)
                .ok_or_else(|| format!("crates/{adapter}/Cargo.toml names no version of {name}"))?;
            lowest.push((*name, lowest_version(&requirement)?));
        }
        copy_checkout(&root, &copy)?;
        let locked = locked_versions(&copy, sdk)?;

        // Lowest first: `--precise` one crate at a time (they may require
        // each other's exact version, which cargo then moves along).
        for (name, version) in &lowest {
            let mut update = cargo_in(
                &copy,
                &scratch,
                ["update", "-p", name, "--precise", version],
            );
            cmd::run(&mut update)?;
        }
        test_unless_locked(adapter, &copy, &scratch, sdk, &locked, &mut each_test_line)?;

        let mut update = cargo_in(&copy, &scratch, ["update"]);
        for name in *sdk {
            update.args(["-p", name]);
        }
        // The newest release, even one that needs a newer Rust than the
        // workspace's rust-version (which the SDKs already exceed): resolver
        // 3 would otherwise prefer an older one.
        update.env("CARGO_RESOLVER_INCOMPATIBLE_RUST_VERSIONS", "allow");
        cmd::run(&mut update)?;
        test_unless_locked(adapter, &copy, &scratch, sdk, &locked, &mut each_test_line)?;
    }
    Ok(())
}

/// Tests `adapter` in the copy as its `Cargo.lock` now stands, unless the
/// SDK is at the committed lock's versions (the `test` step ran those).
fn test_unless_locked(
    adapter: &str,
    copy: &Path,
    scratch: &Path,
    sdk: &[&str],
    locked: &[String],
    each_test_line: &mut impl FnMut(&str),
) -> Result<(), String> {
    let now = locked_versions(copy, sdk)?;
    let shown = sdk
        .iter()
        .zip(&now)
        .map(|(name, version)| format!("{name} {version}"))
        .collect::<Vec<_>>()
        .join(", ");
    if now == locked {
        eprintln!(
            "{adapter} with {shown}: the committed Cargo.lock's versions, tested by the test step"
        );
        return Ok(());
    }
    eprintln!("{adapter} with {shown}");
    let mut test = cargo_in(
        copy,
        scratch,
        ["test", "-p", adapter, "-p", SDK_EXAMPLES, "--all-features"],
    );
    cmd::run_lines(&mut test, |line| each_test_line(line))
        .map_err(|error| format!("{adapter} with {shown}: {error}"))
}

/// `cargo ARGS` run in the copy, building in the scratch target directory.
fn cargo_in<const N: usize>(copy: &Path, scratch: &Path, args: [&str; N]) -> Command {
    let mut command = cmd::cargo(args);
    command
        .current_dir(copy)
        .env("CARGO_TARGET_DIR", scratch.join("target"));
    command
}

/// The versions of `names` in the copy's `Cargo.lock`, in that order.
fn locked_versions(copy: &Path, names: &[&str]) -> Result<Vec<String>, String> {
    let lock = read(&copy.join("Cargo.lock"))?;
    names
        .iter()
        .map(|name| {
            locked_version(&lock, name).ok_or_else(|| format!("{name} is not in the Cargo.lock"))
        })
        .collect()
}

/// The version of the one package `name` in a `Cargo.lock`.
fn locked_version(lock: &str, name: &str) -> Option<String> {
    let entry = format!("name = \"{name}\"\nversion = \"");
    let after = lock.split(&entry).nth(1)?;
    Some(after.split('"').next()?.to_owned())
}

/// The version requirement of dependency `name` in a manifest:
/// `name = "3.6"` or `name = { version = "3.11", ... }`.
fn requirement_in(manifest: &str, name: &str) -> Option<String> {
    manifest.lines().find_map(|line| {
        let (key, value) = line.split_once('=')?;
        if key.trim() != name {
            return None;
        }
        let value = value.trim();
        let quoted = match value.strip_prefix('{') {
            Some(table) => table.split("version").nth(1)?.split_once('=')?.1.trim(),
            None => value,
        };
        Some(quoted.strip_prefix('"')?.split('"').next()?.to_owned())
    })
}

/// The lowest version a caret requirement (`3.11`, `^3.11.2`) allows.
fn lowest_version(requirement: &str) -> Result<String, String> {
    let bare = requirement.strip_prefix('^').unwrap_or(requirement);
    let parts: Vec<&str> = bare.split('.').collect();
    let numeric = parts
        .iter()
        .all(|part| !part.is_empty() && part.bytes().all(|byte| byte.is_ascii_digit()));
    if !numeric || parts.is_empty() || parts.len() > 3 {
        return Err(format!(
            "version requirement `{requirement}` is not a caret range such as \"3.11\""
        ));
    }
    let mut version = parts.join(".");
    for _ in parts.len()..3 {
        version.push_str(".0");
    }
    Ok(version)
}

/// Copies the files git tracks or would track (not `target/`) from `root`
/// to `copy`, cleared first.
fn copy_checkout(root: &Path, copy: &Path) -> Result<(), String> {
    if copy.exists() {
        std::fs::remove_dir_all(copy)
            .map_err(|error| format!("cannot clear {}: {error}", copy.display()))?;
    }
    let files = cmd::output(
        Command::new("git")
            .args([
                "ls-files",
                "--cached",
                "--others",
                "--exclude-standard",
                "-z",
            ])
            .current_dir(root),
    )
    .ok_or("`git ls-files` failed: the sdk-versions step copies the checkout it lists")?;
    for file in files.split('\0').filter(|file| !file.is_empty()) {
        let from = root.join(file);
        // A file deleted but not yet staged is still listed.
        if !from.exists() {
            continue;
        }
        let to = copy.join(file);
        if let Some(parent) = to.parent() {
            std::fs::create_dir_all(parent)
                .map_err(|error| format!("cannot create {}: {error}", parent.display()))?;
        }
        // Follows symlinks: the crates' licence links become the files.
        std::fs::copy(&from, &to)
            .map_err(|error| format!("cannot copy {}: {error}", from.display()))?;
    }
    Ok(())
}

/// `$CARGO_TARGET_DIR`, or the workspace's `target/`.
fn target_dir(root: &Path) -> PathBuf {
    std::env::var_os("CARGO_TARGET_DIR").map_or_else(|| root.join("target"), PathBuf::from)
}

fn read(path: &Path) -> Result<String, String> {
    std::fs::read_to_string(path)
        .map_err(|error| format!("cannot read {}: {error}", path.display()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn requirements_are_read_in_both_forms_and_only_for_that_name() {
        let manifest = "\
[dependencies]
rmcp-macros = \"9\"
rmcp = { version = \"3.11\", default-features = false }
turbomcp-protocol = \"3.6\"
";
        assert_eq!(requirement_in(manifest, "rmcp").as_deref(), Some("3.11"));
        assert_eq!(
            requirement_in(manifest, "turbomcp-protocol").as_deref(),
            Some("3.6")
        );
        assert_eq!(requirement_in(manifest, "tokio"), None);
    }

    #[test]
    fn the_lowest_version_of_a_caret_range_is_its_first_release() {
        assert_eq!(lowest_version("3.11").unwrap(), "3.11.0");
        assert_eq!(lowest_version("^3.11.2").unwrap(), "3.11.2");
        assert_eq!(lowest_version("3").unwrap(), "3.0.0");
        for pinned in ["=3.11.0", ">=3, <4", "3.*", ""] {
            assert!(lowest_version(pinned).is_err(), "{pinned}");
        }
    }

    #[test]
    fn the_adapters_manifests_take_caret_ranges() {
        for (adapter, sdk) in ADAPTERS {
            let path = cmd::repo_root()
                .join("crates")
                .join(adapter)
                .join("Cargo.toml");
            let manifest = read(&path).unwrap();
            for name in *sdk {
                let requirement = requirement_in(&manifest, name).unwrap();
                assert!(
                    lowest_version(&requirement).is_ok(),
                    "{adapter}: {name} = {requirement}"
                );
            }
        }
    }

    #[test]
    fn locked_versions_are_read_per_package() {
        let lock = "\
[[package]]
name = \"rmcp-macros\"
version = \"1.0.0\"

[[package]]
name = \"rmcp\"
version = \"3.11.0\"
source = \"registry+https://github.com/rust-lang/crates.io-index\"
";
        assert_eq!(locked_version(lock, "rmcp").as_deref(), Some("3.11.0"));
        assert_eq!(
            locked_version(lock, "rmcp-macros").as_deref(),
            Some("1.0.0")
        );
        assert_eq!(locked_version(lock, "tokio"), None);
    }
}
