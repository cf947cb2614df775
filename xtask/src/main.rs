//! Project automation: `cargo xtask ci | fuzz | bench`.
//!
//! Std only, so `cargo xtask` starts in seconds on a fresh clone. Every cargo
//! invocation goes through `$CARGO`, the cargo that started us.

mod bench;
mod ci;
mod cmd;
mod fuzz;

use std::process::ExitCode;

const USAGE: &str = "\
usage: cargo xtask <command> [options]

commands:
  ci      fmt, clippy, test, doc, facade feature matrix, fuzz smoke, quick bench
            --skip-fuzz            leave out the fuzz smoke run
            --skip-bench           leave out the quick bench run
            --fuzz-seconds N       seconds per fuzz target (default 30,
                                   env CHILDWIRE_FUZZ_SECONDS)
  fuzz    run fuzz targets with cargo-fuzz (installed when missing)
            [TARGET]               one target; all targets in fuzz/Cargo.toml if omitted
            --seconds N            seconds per target (default 30, env CHILDWIRE_FUZZ_SECONDS)
  bench   run the benchmarks and print their tables
            --quick                small inputs, few repetitions (proves the benches work)
            --check                exit non-zero when a performance target is missed
";

fn main() -> ExitCode {
    let mut args = std::env::args().skip(1);
    let Some(command) = args.next() else {
        eprint!("{USAGE}");
        return ExitCode::FAILURE;
    };
    let rest: Vec<String> = args.collect();
    let result = match command.as_str() {
        "ci" => ci::Options::parse(&rest).and_then(ci::run),
        "fuzz" => fuzz::Options::parse(&rest).and_then(fuzz::run),
        "bench" => bench::Options::parse(&rest).and_then(bench::run),
        "help" | "-h" | "--help" => {
            print!("{USAGE}");
            return ExitCode::SUCCESS;
        }
        other => Err(format!("unknown command `{other}`\n\n{USAGE}")),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(message) => {
            eprintln!("xtask: {message}");
            ExitCode::FAILURE
        }
    }
}
