//! `cargo xtask bench [--quick] [--check]`: every benchmark binary in turn.
//!
//! Each bench binary prints its own table and writes its JSON under
//! `target/childwire-bench/`; xtask only selects and forwards flags.

use crate::cmd;

/// `(package, bench target)`. Add a line here for each new benchmark binary.
const BENCHES: &[(&str, &str)] = &[
    ("childwire-core", "framing"),
    ("childwire-bench", "throughput"),
    ("childwire-bench", "latency"),
    ("childwire-bench", "attack"),
    ("childwire-bench", "scale"),
    ("childwire-bench", "shutdown"),
    ("childwire-bench", "containment"),
    ("childwire-bench", "per_message"),
];

pub(crate) struct Options {
    quick: bool,
    check: bool,
}

impl Options {
    pub(crate) fn parse(args: &[String]) -> Result<Self, String> {
        let mut options = Self {
            quick: false,
            check: false,
        };
        for arg in args {
            match arg.as_str() {
                "--quick" => options.quick = true,
                "--check" => options.check = true,
                other => return Err(format!("unknown option `{other}` for `cargo xtask bench`")),
            }
        }
        Ok(options)
    }

    /// What `cargo xtask ci` runs: tiny inputs, no target checks (CI machines
    /// are too noisy for timing verdicts).
    pub(crate) fn quick_run() -> Self {
        Self {
            quick: true,
            check: false,
        }
    }
}

pub(crate) fn run(options: Options) -> Result<(), String> {
    // Every bench runs even if an earlier one misses a target, so one run
    // shows all the tables; the failures are reported together at the end.
    let mut failed = Vec::new();
    for (package, bench) in BENCHES {
        let mut args = vec!["bench", "-p", package, "--bench", bench, "--"];
        if options.quick {
            args.push("--quick");
        }
        if options.check {
            args.push("--check");
        }
        if let Err(error) = cmd::run(&mut cmd::cargo(args)) {
            eprintln!("xtask: {error}");
            failed.push(*bench);
        }
    }
    if failed.is_empty() {
        Ok(())
    } else {
        Err(format!("benchmarks failed: {}", failed.join(", ")))
    }
}
