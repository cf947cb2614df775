//! Project automation: `cargo xtask ci | fuzz | bench | msrv | wine | macos |
//! readme | sdk-versions`.
//!
//! Std only, so `cargo xtask` starts in seconds on a fresh clone. Every cargo
//! invocation goes through `$CARGO`, the cargo that started us.

mod bench;
mod ci;
mod cmd;
mod fuzz;
mod macos;
mod msrv;
mod readme;
mod sdk_versions;
mod valgrind;
mod wine;

use std::process::ExitCode;

const USAGE: &str = "\
usage: cargo xtask <command> [options]

commands:
  ci      fmt, clippy, test, doc, readme, facade feature matrix, publish --dry-run,
          sdk versions, msrv (build and test on the rust-version toolchain),
          windows under wine, macos (clippy for both Apple targets), fuzz smoke, bench gate (instruction counts vs the
          baseline), quick wall-clock bench
            --skip-wine            leave out the Windows tests under Wine
            --skip-fuzz            leave out the fuzz smoke run
            --skip-bench           leave out the bench gate and the quick bench run
            --fuzz-seconds N       seconds per fuzz target (default 30,
                                   env CHILDWIRE_FUZZ_SECONDS)
  fuzz    run fuzz targets with cargo-fuzz (installed when missing)
            [TARGET]               one target; all targets in fuzz/Cargo.toml if omitted
            --seconds N            seconds per target (default 30, env CHILDWIRE_FUZZ_SECONDS)
  msrv    build everything and test the libraries on the toolchain of rust-version
            (installed with rustup when missing)
  wine    cross-compile the conformance suite and the examples to
          x86_64-pc-windows-gnu and run their tests under Wine (the target,
          mingw-w64 and wine64 are installed when missing)
  macos   type-check and lint the workspace for x86_64-apple-darwin and
          aarch64-apple-darwin (cargo clippy --target; the targets are added
          with rustup when missing; nothing is linked)
  readme  build every Rust snippet of README.md in a scratch crate whose
          manifest is the README's own [dependencies] block
  sdk-versions
          test the rmcp and TurboMCP adapters at the lowest and the newest
          SDK release their version ranges allow
  bench   run the benchmarks and print their tables: instruction counts under
          callgrind (valgrind installed when missing), then the wall-clock reports
            --quick                small inputs, few repetitions (proves the benches work)
            --check                the gate: instruction counts alone, exit non-zero when a
                                   childwire row is > 3% above benches/baseline/instructions.txt
                                   (or an enforced target is missed; see docs/performance.md)
            --save-baseline        instruction counts alone, rewriting that baseline file
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
        "msrv" if rest.is_empty() => msrv::check(|_| {}),
        "msrv" => Err(format!("`cargo xtask msrv` takes no options\n\n{USAGE}")),
        "readme" if rest.is_empty() => readme::check(),
        "readme" => Err(format!("`cargo xtask readme` takes no options\n\n{USAGE}")),
        "sdk-versions" if rest.is_empty() => sdk_versions::check(|_| {}),
        "sdk-versions" => Err(format!(
            "`cargo xtask sdk-versions` takes no options\n\n{USAGE}"
        )),
        "wine" if rest.is_empty() => wine::run(|_| {}),
        "wine" => Err(format!("`cargo xtask wine` takes no options\n\n{USAGE}")),
        "macos" if rest.is_empty() => macos::check(),
        "macos" => Err(format!("`cargo xtask macos` takes no options\n\n{USAGE}")),
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
