//! Counting a row's instructions: this very binary run again under
//! `valgrind --tool=callgrind` as `--row NAME --units N`, once at N units
//! and once at 2N. Everything a run does besides its units (loading,
//! runtime and transport set-up, tear-down) is the same in both, so
//! `(I(2N) - I(N)) / (messages(2N) - messages(N))` is the cost of one
//! message, set-up free, and the same on every run of the same binary.

use std::process::Command;

use super::rows::Row;

/// Instructions per message of one row.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Count {
    pub(crate) per_message: f64,
}

/// Whether valgrind can be started.
pub(crate) fn available() -> bool {
    Command::new("valgrind")
        .arg("--version")
        .output()
        .is_ok_and(|out| out.status.success())
}

/// `valgrind-3.19.0`, for the baseline's header.
pub(crate) fn version() -> String {
    Command::new("valgrind")
        .arg("--version")
        .output()
        .ok()
        .and_then(|out| String::from_utf8(out.stdout).ok())
        .map_or_else(
            || "valgrind (unknown version)".into(),
            |v| v.trim().to_string(),
        )
}

/// Counts `row`: callgrind runs at its units and twice as many; for a row
/// whose count follows the clock, the least of [`ROW_RUNS`] runs at each.
pub(crate) fn count(row: Row) -> Result<Count, String> {
    let units = row.units();
    let (short_ir, short_messages) = least(row, units)?;
    let (long_ir, long_messages) = least(row, 2 * units)?;
    if long_messages <= short_messages || long_ir <= short_ir {
        return Err(format!(
            "{}: {short_ir} instructions for {short_messages} messages, \
             {long_ir} for {long_messages}: the longer run did not do more",
            row.name()
        ));
    }
    Ok(Count {
        per_message: (long_ir - short_ir) as f64 / (long_messages - short_messages) as f64,
    })
}

/// Runs of each length for a row whose count follows the clock. What the
/// clock adds is extra work (a timer moved to another slot of the runtime's
/// wheel, a wake-up more), never less, so the least of a few runs is the
/// steadiest estimate: for `send().await`, single runs put it 1.6% apart.
const ROW_RUNS: usize = 3;

/// The least count of the runs of `row` at `units`.
fn least(row: Row, units: usize) -> Result<(u64, u64), String> {
    let runs = if row.follows_the_clock() { ROW_RUNS } else { 1 };
    let mut best: Option<(u64, u64)> = None;
    for _ in 0..runs {
        let (ir, messages) = run(row, units)?;
        if best.is_none_or(|(least, _)| ir < least) {
            best = Some((ir, messages));
        }
    }
    Ok(best.expect("at least one run"))
}

/// One callgrind run of `row` at `units`: instructions counted, messages
/// the row reported.
fn run(row: Row, units: usize) -> Result<(u64, u64), String> {
    let exe = std::env::current_exe().map_err(|e| format!("current_exe: {e}"))?;
    let output = Command::new("valgrind")
        .args([
            "--tool=callgrind",
            // The totals on stderr are all we read.
            "--callgrind-out-file=/dev/null",
            "--dump-line=no",
        ])
        .arg(exe)
        .args(["--row", &row.name(), "--units", &units.to_string()])
        // One thread per executor: smol's and async-std's global
        // executors would otherwise start one per core, and threads that
        // race add work that varies from run to run.
        .env("SMOL_THREADS", "1")
        .env("ASYNC_STD_THREAD_COUNT", "1")
        .output()
        .map_err(|e| format!("cannot start valgrind: {e}"))?;
    let stderr = String::from_utf8_lossy(&output.stderr);
    let stdout = String::from_utf8_lossy(&output.stdout);
    if !output.status.success() {
        return Err(format!(
            "{} under callgrind at {units} units failed ({}):\n{stderr}",
            row.name(),
            output.status
        ));
    }
    let ir = stderr
        .lines()
        .find_map(|line| line.split_once("Collected :").map(|(_, n)| n.trim()))
        .and_then(|n| n.parse::<u64>().ok())
        .ok_or_else(|| format!("no `Collected :` total in callgrind's output:\n{stderr}"))?;
    let messages = stdout
        .lines()
        .find_map(|line| line.strip_prefix("messages="))
        .and_then(|n| n.trim().parse::<u64>().ok())
        .ok_or_else(|| format!("{}: no `messages=` line in:\n{stdout}", row.name()))?;
    Ok((ir, messages))
}
