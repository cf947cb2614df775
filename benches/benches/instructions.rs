//! Instructions per message, counted by callgrind: the deterministic rows
//! that gate CI, where the wall-clock benches can only report.
//!
//! Each row (see `instructions/rows.rs`) is this binary run again under
//! `valgrind --tool=callgrind` at N and 2N units of its work; the
//! difference over the messages is one message's instructions, set-up free
//! and the same on every run (see `instructions/callgrind.rs`). Beside
//! childwire's rows, in the same run: tokio-util's `FramedWrite` /
//! `FramedRead` with `LinesCodec`, and the plain `BufReader::read_until` /
//! `write_all` loop (the floor); for `Content-Length`, a `BufRead` header
//! parser and `read_exact`. Then, counted outside callgrind, read/write
//! system calls per message echoed through a child (`instructions/syscalls.rs`).
//!
//! Verdicts (`instructions/gate.rs`): a childwire row more than 3% above
//! the committed baseline (`benches/baseline/instructions.txt`) fails
//! under `--check`; targets are printed, and a missed one is listed but
//! fails only once enforced.
//!
//! `cargo xtask bench --check` (what CI runs), `cargo xtask bench
//! --save-baseline`, or `cargo bench -p childwire-bench --bench
//! instructions -- [--check] [--save-baseline] [--only ROW]`. Needs
//! valgrind, which `cargo xtask bench` installs when missing. `--quick`
//! changes nothing here: counts need no repetitions.

#[macro_use]
#[path = "support/e2e.rs"]
mod e2e;

#[path = "instructions/callgrind.rs"]
mod callgrind;
#[path = "instructions/gate.rs"]
mod gate;
#[path = "instructions/rows.rs"]
mod rows;
#[path = "instructions/share_rows.rs"]
mod share_rows;
#[path = "instructions/syscalls.rs"]
mod syscalls;
#[path = "instructions/transport_rows.rs"]
mod transport_rows;

use std::process::ExitCode;
use std::sync::Mutex;
use std::sync::atomic::{AtomicUsize, Ordering};

use e2e::harness::{self, Args, Json, Table};
use gate::{Change, Target};
use rows::Row;

fn main() -> ExitCode {
    // Under callgrind: run one row and say how many messages went through.
    if let Some(name) = e2e::flag_value("--row") {
        return match run_row(&name) {
            Ok(messages) => {
                println!("messages={messages}");
                ExitCode::SUCCESS
            }
            Err(error) => {
                eprintln!("instructions: {error}");
                ExitCode::FAILURE
            }
        };
    }
    e2e::main("instructions", bench)
}

fn run_row(name: &str) -> Result<u64, String> {
    let row = Row::all()
        .into_iter()
        .find(|row| row.name() == name)
        .ok_or_else(|| format!("no row named {name:?}"))?;
    let units = e2e::flag_value("--units")
        .and_then(|u| u.parse::<usize>().ok())
        .ok_or("--units N is needed with --row")?;
    row.run(units)
}

fn bench(args: Args) -> Result<ExitCode, String> {
    let save = std::env::args().any(|a| a == "--save-baseline");
    let only = e2e::flag_value("--only");
    if !callgrind::available() {
        return Err("valgrind is not installed (`cargo xtask bench` installs it)".into());
    }
    let rows: Vec<Row> = Row::all()
        .into_iter()
        .filter(|row| only.as_deref().is_none_or(|o| row.name() == o))
        .collect();
    if rows.is_empty() {
        return Err(format!("no row named {only:?}"));
    }
    if save && only.is_some() {
        return Err("--save-baseline writes every row: leave out --only".into());
    }
    let measured_with = format!("{}, {}", rustc_version(), callgrind::version());
    eprintln!(
        "instructions: {} rows, each under callgrind at N and 2N units ({measured_with}){}",
        rows.len(),
        if args.quick {
            " (--quick: the same run, counts need no repetitions)"
        } else {
            ""
        }
    );

    let counts = count_all(&rows)?;
    let baseline = gate::read_baseline()?;
    let base_of = |row: Row| {
        baseline
            .iter()
            .find(|(name, _)| *name == row.name())
            .map(|&(_, v)| v)
    };

    let mut table = Table::new([
        "instructions per message",
        "now",
        "baseline",
        "change",
        "verdict",
    ]);
    let mut regressed = Vec::new();
    let mut json_rows = Vec::new();
    for &(row, now) in &counts {
        let base = base_of(row);
        let change = Change::of(row, now, base);
        if let Change::Regressed(_) = change {
            regressed.push(format!("{} ({})", row.name(), change.percent()));
        }
        table.row([
            row.name(),
            format!("{now:.1}"),
            base.map_or("-".into(), |b| format!("{b:.1}")),
            change.percent(),
            change.verdict(row).to_string(),
        ]);
        json_rows.push(Json::object([
            ("row", Json::Str(row.name())),
            ("childwire", Json::Bool(row.is_childwire())),
            ("gated", Json::Bool(row.is_gated())),
            ("instructions", Json::Num(now)),
            ("baseline", base.map_or(Json::Null, Json::Num)),
        ]));
    }
    print!("{}", table.render());
    let gone: Vec<&str> = baseline
        .iter()
        .filter(|(name, _)| !counts.iter().any(|(row, _)| row.name() == *name))
        .map(|(name, _)| name.as_str())
        .collect();
    if !gone.is_empty() && only.is_none() {
        println!("in the baseline but not in this run: {}", gone.join("; "));
    }

    let mut targets = Table::new(["target (instructions, same run)", "ratio", "verdict"]);
    let mut missed = Vec::new();
    let mut enforced_missed = Vec::new();
    for target in Target::all() {
        let Some(ratio) = target.ratio(&counts) else {
            continue;
        };
        let met = ratio <= target.limit;
        if !met {
            missed.push(target.name());
            if target.enforced {
                enforced_missed.push(target.name());
            }
        }
        let verdict = match (met, target.enforced) {
            (true, _) => "met",
            (false, true) => "MISSED (enforced)",
            (false, false) => "MISSED (reported, not enforced yet)",
        };
        targets.row([target.name(), format!("{ratio:.2}x"), verdict.to_string()]);
    }
    println!();
    print!("{}", targets.render());

    if only.is_none() {
        let mut calls = Table::new([
            format!(
                "echo of {} lines of 200 B through `bench-child cat`",
                syscalls::MESSAGES
            ),
            "read/write syscalls".to_string(),
            "per 1,000 messages".to_string(),
        ]);
        for echo in syscalls::Echo::ALL {
            let count = echo.calls()?;
            calls.row([
                echo.name().to_string(),
                count.to_string(),
                format!("{:.1}", count as f64 * 1000.0 / syscalls::MESSAGES as f64),
            ]);
        }
        println!();
        print!("{}", calls.render());
    }

    if save {
        let path = gate::write_baseline(&counts, &measured_with)?;
        eprintln!("instructions: baseline written to {}", path.display());
    }
    let results = Json::object([
        ("measured_with", Json::Str(measured_with)),
        ("rows", Json::Arr(json_rows)),
    ]);
    match harness::write_results("instructions", &results) {
        Ok(path) => eprintln!("results: {}", path.display()),
        Err(error) => eprintln!("instructions: could not write results: {error}"),
    }

    if !missed.is_empty() {
        println!("\ntargets missed ({}):", missed.len());
        for name in &missed {
            println!("  MISSED {name}");
        }
    }
    if !regressed.is_empty() {
        println!(
            "\nrows more than {:.0}% above the baseline ({}):",
            gate::MAX_REGRESSION * 100.0,
            regressed.len()
        );
        for name in &regressed {
            println!("  REGRESSED {name}");
        }
        println!(
            "if the rise is intended, `cargo xtask bench --save-baseline` and commit \
             benches/baseline/instructions.txt"
        );
    }
    let failed = !save && (!regressed.is_empty() || !enforced_missed.is_empty());
    if failed && args.check {
        eprintln!("instructions: the gate failed");
        return Ok(ExitCode::FAILURE);
    }
    Ok(ExitCode::SUCCESS)
}

/// Counts every row, as many at once as there are cores (each callgrind run
/// is one thread), in table order.
fn count_all(rows: &[Row]) -> Result<Vec<(Row, f64)>, String> {
    let next = AtomicUsize::new(0);
    let results: Mutex<Vec<Option<Result<f64, String>>>> = Mutex::new(vec![None; rows.len()]);
    let workers = std::thread::available_parallelism().map_or(1, |n| n.get());
    std::thread::scope(|scope| {
        for _ in 0..workers {
            scope.spawn(|| {
                loop {
                    let i = next.fetch_add(1, Ordering::Relaxed);
                    let Some(&row) = rows.get(i) else { break };
                    let count = callgrind::count(row).map(|c| c.per_message);
                    results.lock().expect("no worker panics")[i] = Some(count);
                }
            });
        }
    });
    let results = results.into_inner().expect("no worker panics");
    rows.iter()
        .zip(results)
        .map(|(&row, result)| Ok((row, result.expect("every row was counted")?)))
        .collect()
}

/// `rustc 1.95.0 (...)`: a count belongs to the compiler that built it.
fn rustc_version() -> String {
    let rustc = std::env::var_os("RUSTC").unwrap_or_else(|| "rustc".into());
    std::process::Command::new(rustc)
        .arg("--version")
        .output()
        .ok()
        .and_then(|out| String::from_utf8(out.stdout).ok())
        .map_or_else(
            || "rustc (unknown version)".into(),
            |v| v.trim().to_string(),
        )
}
