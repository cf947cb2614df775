//! `cargo xtask ci`: the whole check, in order, stopping at the first failure.

use std::cell::RefCell;
use std::process::Command;
use std::rc::Rc;
use std::time::{Duration, Instant};

use crate::{bench, cmd, fuzz, macos, msrv, readme, sdk_versions, wine};

/// The facade crate whose runtime features must build alone and together.
const FACADE: &str = "childwire";
const FACADE_RUNTIMES: &[&str] = &["tokio", "smol", "async-std"];

pub(crate) struct Options {
    skip_fuzz: bool,
    skip_bench: bool,
    skip_wine: bool,
    fuzz_seconds: u64,
}

impl Options {
    pub(crate) fn parse(args: &[String]) -> Result<Self, String> {
        let mut skip_fuzz = false;
        let mut skip_bench = false;
        let mut skip_wine = false;
        let mut fuzz_seconds = None;
        let mut args = args.iter();
        while let Some(arg) = args.next() {
            match arg.as_str() {
                "--skip-fuzz" => skip_fuzz = true,
                "--skip-bench" => skip_bench = true,
                "--skip-wine" => skip_wine = true,
                "--fuzz-seconds" => {
                    let value = args.next().ok_or("--fuzz-seconds needs a value")?;
                    fuzz_seconds = Some(cmd::parse_seconds("--fuzz-seconds", value)?);
                }
                other => return Err(format!("unknown option `{other}` for `cargo xtask ci`")),
            }
        }
        let fuzz_seconds = match fuzz_seconds {
            Some(seconds) => seconds,
            None => fuzz::default_seconds()?,
        };
        Ok(Self {
            skip_fuzz,
            skip_bench,
            skip_wine,
            fuzz_seconds,
        })
    }
}

/// How a step ended when it did not fail.
enum Outcome {
    Passed,
    Skipped(String),
}

type Action = Box<dyn FnOnce() -> Result<Outcome, String>>;

struct Step {
    name: &'static str,
    action: Action,
}

fn step(name: &'static str, action: impl FnOnce() -> Result<Outcome, String> + 'static) -> Step {
    Step {
        name,
        action: Box::new(action),
    }
}

fn cargo_step(name: &'static str, args: &'static [&'static str]) -> Step {
    step(name, move || {
        cmd::run(&mut cmd::cargo(args)).map(|()| Outcome::Passed)
    })
}

pub(crate) fn run(options: Options) -> Result<(), String> {
    let fuzz_seconds = options.fuzz_seconds;
    let tally = Rc::new(RefCell::new(Tally::default()));
    let mut steps = vec![
        cargo_step("fmt", &["fmt", "--all", "--", "--check"]),
        cargo_step(
            "clippy",
            &[
                "clippy",
                "--workspace",
                "--all-targets",
                "--all-features",
                "--",
                "-D",
                "warnings",
            ],
        ),
        step("test", {
            let tally = Rc::clone(&tally);
            move || {
                let mut test = cmd::cargo(["test", "--workspace", "--all-features"]);
                cmd::run_lines(&mut test, |line| tally.borrow_mut().add(line))
                    .map(|()| Outcome::Passed)
            }
        }),
        step("doc", || {
            // With the private items too (the contributors' docs, links
            // between modules included), then with every feature (as
            // docs.rs builds them), then with the defaults (as a user's
            // `cargo doc` builds a dependency): a link to an item behind a
            // feature must hold in both. The public docs are built last, so
            // they are what `target/doc` holds afterwards.
            let private = &["--all-features", "--document-private-items"][..];
            for features in [private, &["--all-features"], &[]] {
                let mut doc = cmd::cargo(["doc", "--workspace", "--no-deps"]);
                doc.args(features).env("RUSTDOCFLAGS", "-D warnings");
                cmd::run(&mut doc)?;
            }
            Ok(Outcome::Passed)
        }),
        step("readme", || readme::check().map(|()| Outcome::Passed)),
        step("facade feature matrix", facade_matrix),
        step("publish --dry-run", publish_dry_run),
        step("sdk versions", {
            let tally = Rc::clone(&tally);
            move || {
                sdk_versions::check(|line| tally.borrow_mut().add(line)).map(|()| Outcome::Passed)
            }
        }),
        step("msrv", {
            let tally = Rc::clone(&tally);
            move || msrv::check(|line| tally.borrow_mut().add(line)).map(|()| Outcome::Passed)
        }),
    ];
    steps.push(step("macos", || macos::check().map(|()| Outcome::Passed)));
    steps.push(if options.skip_wine {
        step("windows (wine)", || {
            Ok(Outcome::Skipped("--skip-wine".into()))
        })
    } else {
        step("windows (wine)", {
            let tally = Rc::clone(&tally);
            move || wine::run(|line| tally.borrow_mut().add(line)).map(|()| Outcome::Passed)
        })
    });
    steps.push(if options.skip_fuzz {
        step("fuzz smoke", || Ok(Outcome::Skipped("--skip-fuzz".into())))
    } else {
        step("fuzz smoke", move || {
            fuzz::smoke(&fuzz::targets()?, fuzz_seconds).map(|()| Outcome::Passed)
        })
    });
    if options.skip_bench {
        for name in ["bench --check", "bench --quick"] {
            steps.push(step(name, || Ok(Outcome::Skipped("--skip-bench".into()))));
        }
    } else {
        // The gate: instruction counts against the committed baseline
        // (deterministic, so a verdict). Then the wall-clock benches on
        // tiny inputs: they must run, their timings judge nothing here.
        steps.push(step("bench --check", || {
            bench::run(bench::Options::gate()).map(|()| Outcome::Passed)
        }));
        steps.push(step("bench --quick", || {
            bench::run(bench::Options::wall_clock_smoke()).map(|()| Outcome::Passed)
        }));
    }

    let total = steps.len();
    let started = Instant::now();
    let mut summary: Vec<(&str, String, Option<Duration>)> = Vec::new();
    let mut failure = None;
    for (index, Step { name, action }) in steps.into_iter().enumerate() {
        if failure.is_some() {
            summary.push((name, "not run".into(), None));
            continue;
        }
        banner(&format!("[{}/{total}] {name}", index + 1));
        let step_started = Instant::now();
        let result = action();
        let elapsed = step_started.elapsed();
        let status = match result {
            Ok(Outcome::Passed) => "ok".to_string(),
            Ok(Outcome::Skipped(why)) => {
                eprintln!("skipped: {why}");
                format!("skipped ({why})")
            }
            Err(error) => {
                failure = Some(format!("step `{name}` failed: {error}"));
                "FAILED".to_string()
            }
        };
        summary.push((name, status, Some(elapsed)));
    }

    banner("summary");
    for (name, status, elapsed) in &summary {
        let time = elapsed.map_or(String::new(), |t| format!("{:.1} s", t.as_secs_f64()));
        eprintln!("  {name:<24} {time:>9}  {status}");
    }
    eprintln!(
        "  {:<24} {:>7.1} s",
        "total",
        started.elapsed().as_secs_f64()
    );
    // One closing line for whoever reads the log: every test the run
    // executed, summed over cargo's per-binary `test result:` lines.
    let tally = tally.borrow();
    println!(
        "tests: {} passed, {} failed, {} skipped",
        tally.passed, tally.failed, tally.ignored
    );
    match failure {
        Some(error) => Err(error),
        None => {
            eprintln!("\nci passed");
            Ok(())
        }
    }
}

/// Test counts summed over cargo's `test result: ok. 3 passed; 0 failed;
/// 1 ignored; ...` lines.
#[derive(Default)]
struct Tally {
    passed: u64,
    failed: u64,
    ignored: u64,
}

impl Tally {
    fn add(&mut self, line: &str) {
        let Some(counts) = line.strip_prefix("test result: ") else {
            return;
        };
        for part in counts.split(';') {
            let mut words = part.split_whitespace().rev();
            let (Some(what), Some(count)) = (words.next(), words.next()) else {
                continue;
            };
            let Ok(count) = count.parse::<u64>() else {
                continue;
            };
            match what {
                "passed" => self.passed += count,
                "failed" => self.failed += count,
                "ignored" => self.ignored += count,
                _ => {}
            }
        }
    }
}

fn banner(title: &str) {
    let rule = "=".repeat(72);
    eprintln!("\n{rule}\n== {title}\n{rule}");
}

/// Each runtime feature of the facade alone, none, and all: features are
/// additive, so every combination a user can pick has to build.
fn facade_matrix() -> Result<Outcome, String> {
    if !workspace_has_package(FACADE)? {
        return Ok(Outcome::Skipped(format!(
            "package `{FACADE}` is not in the workspace yet"
        )));
    }
    let mut runs: Vec<Vec<&str>> = vec![vec!["--no-default-features"]];
    for feature in FACADE_RUNTIMES {
        runs.push(vec!["--no-default-features", "--features", feature]);
    }
    runs.push(vec!["--all-features"]);
    for features in runs {
        let mut check: Command = cmd::cargo(["check", "-p", FACADE]);
        check.args(features);
        cmd::run(&mut check)?;
    }
    Ok(Outcome::Passed)
}

/// Whether `cargo metadata` lists a workspace package at `crates/<name>`.
/// Matching the manifest path keeps this std-only (no JSON parser) and is not
/// fooled by dependency entries that merely mention the name.
fn workspace_has_package(name: &str) -> Result<bool, String> {
    let mut metadata = cmd::cargo(["metadata", "--format-version", "1", "--no-deps"]);
    let json = cmd::output(&mut metadata).ok_or("`cargo metadata` failed")?;
    let manifest = cmd::repo_root()
        .join("crates")
        .join(name)
        .join("Cargo.toml");
    let needle = format!("\"manifest_path\":\"{}\"", manifest.display());
    Ok(json.contains(&needle))
}

/// Packages every published crate as crates.io would get it and builds each
/// from its package, unpublished siblings included (cargo serves them from a
/// local registry under its target directory). `--allow-dirty` so local runs with
/// uncommitted work pass too: CI's clone is clean anyway.
///
/// What a previous run left goes first: cargo takes a registry crate of a
/// given version for immutable, so a second run (on this machine, from this
/// checkout) would verify against the siblings it extracted and compiled the
/// first time, not the sources of now. Those are the extracted copies of our
/// crates under `$CARGO_HOME/registry/src/-HASH/` (the local registries,
/// named by a hash of their path and no host) and what was built from them:
/// the dry run gets a target directory of its own, cleared first
/// (`target/publish-dry-run`; its packages are in its `package/`).
fn publish_dry_run() -> Result<Outcome, String> {
    clear_local_registry_copies()?;
    let target = std::env::var_os("CARGO_TARGET_DIR")
        .map(std::path::PathBuf::from)
        .unwrap_or_else(|| {
            std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
                .join("..")
                .join("target")
        })
        .join("publish-dry-run");
    match std::fs::remove_dir_all(&target) {
        Ok(()) => {}
        Err(err) if err.kind() == std::io::ErrorKind::NotFound => {}
        Err(err) => {
            return Err(format!("cannot clear {}: {err}", target.display()));
        }
    }
    let mut publish = cmd::cargo([
        "publish",
        "--dry-run",
        "--workspace",
        "--locked",
        "--allow-dirty",
    ]);
    publish.arg("--target-dir").arg(&target);
    cmd::run(&mut publish).map(|()| Outcome::Passed)
}

/// Removes our crates' extracted copies from cargo's local registries.
fn clear_local_registry_copies() -> Result<(), String> {
    let cargo_home = std::env::var_os("CARGO_HOME")
        .map(std::path::PathBuf::from)
        .or_else(|| {
            std::env::var_os("HOME").map(|home| std::path::Path::new(&home).join(".cargo"))
        });
    let Some(src) = cargo_home.map(|home| home.join("registry").join("src")) else {
        return Ok(());
    };
    let Ok(registries) = std::fs::read_dir(&src) else {
        return Ok(());
    };
    for registry in registries.flatten() {
        // crates.io's is `index.crates.io-HASH`; a local one is `-HASH`.
        if !registry.file_name().to_string_lossy().starts_with('-') {
            continue;
        }
        let Ok(crates) = std::fs::read_dir(registry.path()) else {
            continue;
        };
        for krate in crates.flatten() {
            if krate.file_name().to_string_lossy().starts_with("childwire") {
                std::fs::remove_dir_all(krate.path())
                    .map_err(|err| format!("cannot clear {}: {err}", krate.path().display()))?;
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::Tally;

    #[test]
    fn tally_sums_cargo_test_result_lines_and_ignores_the_rest() {
        let mut tally = Tally::default();
        for line in [
            "test result: ok. 48 passed; 0 failed; 1 ignored; 0 measured; 0 filtered out; finished in 3.4s",
            "test c01_blank_lines ... ok",
            "test result: FAILED. 2 passed; 1 failed; 0 ignored; 0 measured; 0 filtered out; finished in 0.1s",
        ] {
            tally.add(line);
        }
        assert_eq!((tally.passed, tally.failed, tally.ignored), (50, 1, 1));
    }
}
