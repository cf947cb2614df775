//! `cargo xtask bench [--quick] [--check] [--save-baseline]`.
//!
//! Two kinds of benchmark, judged differently (docs/performance.md):
//! - the instruction counts (`childwire-bench`'s `instructions`, under
//!   callgrind): deterministic, so they gate. `--check` runs them alone and
//!   fails on a childwire row more than 3% above the committed baseline
//!   (`benches/baseline/instructions.txt`); `--save-baseline` rewrites that
//!   file, for a deliberate, reviewed commit. Valgrind is installed first
//!   when missing.
//! - the wall-clock benches: reports (medians and spreads on a shared
//!   machine), never a verdict of `cargo xtask`.
//!
//! Each bench binary prints its own tables and writes its JSON under
//! `target/childwire-bench/`; xtask only selects and forwards flags.

use crate::{cmd, valgrind};

/// The deterministic bench: `(package, bench target)`.
const INSTRUCTIONS: (&str, &str) = ("childwire-bench", "instructions");

/// The wall-clock benches, `(package, bench target)`. Add a line here for
/// each new one.
const WALL_CLOCK: &[(&str, &str)] = &[
    ("childwire-core", "framing"),
    ("childwire-bench", "throughput"),
    ("childwire-bench", "latency"),
    ("childwire-bench", "attack"),
    ("childwire-bench", "scale"),
    ("childwire-bench", "shutdown"),
    ("childwire-bench", "containment"),
    ("childwire-bench", "per_message"),
    ("childwire-bench", "users_shape"),
    ("childwire-bench", "share"),
];

/// Which benches a run takes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Selection {
    /// Every bench: the instruction counts, then the wall-clock reports.
    All,
    /// The instruction counts alone (`--check`, `--save-baseline`).
    Instructions,
    /// The wall-clock benches alone.
    WallClock,
}

pub(crate) struct Options {
    quick: bool,
    check: bool,
    save_baseline: bool,
    selection: Selection,
}

impl Options {
    pub(crate) fn parse(args: &[String]) -> Result<Self, String> {
        let mut options = Self {
            quick: false,
            check: false,
            save_baseline: false,
            selection: Selection::All,
        };
        for arg in args {
            match arg.as_str() {
                "--quick" => options.quick = true,
                "--check" => options.check = true,
                "--save-baseline" => options.save_baseline = true,
                other => return Err(format!("unknown option `{other}` for `cargo xtask bench`")),
            }
        }
        if options.check && options.save_baseline {
            return Err(
                "--check and --save-baseline exclude each other: a new baseline \
                        is what a run is then checked against"
                    .into(),
            );
        }
        if options.check || options.save_baseline {
            options.selection = Selection::Instructions;
        }
        Ok(options)
    }

    /// The gate `cargo xtask ci` runs: the instruction counts against the
    /// baseline.
    pub(crate) fn gate() -> Self {
        Self {
            quick: false,
            check: true,
            save_baseline: false,
            selection: Selection::Instructions,
        }
    }

    /// The smoke run `cargo xtask ci` runs after the gate: the wall-clock
    /// benches on tiny inputs, proving they work (no verdict: CI machines
    /// are too noisy for timing verdicts).
    pub(crate) fn wall_clock_smoke() -> Self {
        Self {
            quick: true,
            check: false,
            save_baseline: false,
            selection: Selection::WallClock,
        }
    }
}

pub(crate) fn run(options: Options) -> Result<(), String> {
    let mut benches = Vec::new();
    if options.selection != Selection::WallClock {
        valgrind::ensure()?;
        benches.push(INSTRUCTIONS);
    }
    if options.selection != Selection::Instructions {
        benches.extend_from_slice(WALL_CLOCK);
    }
    // Every bench runs even if an earlier one fails, so one run shows all
    // the tables; the failures are reported together at the end.
    let mut failed = Vec::new();
    for (package, bench) in benches {
        let mut args = vec!["bench", "-p", package, "--bench", bench, "--"];
        if options.quick {
            args.push("--quick");
        }
        // Only the instruction counts take a verdict or a baseline.
        if (package, bench) == INSTRUCTIONS {
            if options.check {
                args.push("--check");
            }
            if options.save_baseline {
                args.push("--save-baseline");
            }
        }
        if let Err(error) = cmd::run(&mut cmd::cargo(args)) {
            eprintln!("xtask: {error}");
            failed.push(bench);
        }
    }
    if failed.is_empty() {
        Ok(())
    } else {
        Err(format!("benchmarks failed: {}", failed.join(", ")))
    }
}

#[cfg(test)]
mod tests {
    use super::{Options, Selection};

    fn parse(args: &[&str]) -> Result<Options, String> {
        Options::parse(&args.iter().map(|a| a.to_string()).collect::<Vec<_>>())
    }

    #[test]
    fn check_and_save_baseline_run_the_instruction_counts_alone() {
        for flag in ["--check", "--save-baseline"] {
            let options = parse(&[flag]).expect("a known flag");
            assert_eq!(options.selection, Selection::Instructions, "{flag}");
        }
        assert_eq!(parse(&[]).expect("no flag").selection, Selection::All);
        assert_eq!(
            parse(&["--quick"]).expect("--quick").selection,
            Selection::All
        );
        assert_eq!(Options::gate().selection, Selection::Instructions);
        assert_eq!(Options::wall_clock_smoke().selection, Selection::WallClock);
    }

    #[test]
    fn check_and_save_baseline_exclude_each_other() {
        assert!(parse(&["--check", "--save-baseline"]).is_err());
        assert!(parse(&["--bogus"]).is_err());
    }
}
