//! The verdicts: each childwire row against the committed baseline, and the
//! targets (ratios of rows of the same run).
//!
//! The policy, in one place:
//! - A childwire row more than [`MAX_REGRESSION`] above its baseline FAILS
//!   the gate (`--check`, which `cargo xtask ci` runs). Counts do not move
//!   from run to run, so any change is a change of the code, its
//!   dependencies or the toolchain; if it is wanted, the new baseline is
//!   written with `--save-baseline` and committed, reviewed like code.
//! - Rows of other crates (LinesCodec, the plain loops) are shown with their
//!   change but never fail: they are the yardstick, not the thing measured.
//!   Nor does a childwire row whose count changes between identical runs
//!   (`Row::varies`, today the `Sink` row).
//! - A target is judged on the same run's rows. A missed one is printed as
//!   MISSED and listed; it fails the gate only once its [`Target::enforced`]
//!   is set. Today one is: a child's default `recv()` at most 1.03x the
//!   same with every optional check off (issue 36). The others are each
//!   to be enforced once met: `send().await` at most 2.0x
//!   `FramedWrite::feed` and NDJSON encode at most 1.5x `LinesCodec`'s
//!   (issue 36's bars; both missed today, see docs/performance.md).

use std::fmt::Write as _;
use std::path::PathBuf;

use super::rows::{Contender, Format, Row, SIZES, TYPICAL, size_name};
use super::transport_rows::{RecvWay, SendWay, Setting};

/// The largest rise over the baseline a childwire row may show: 3%.
pub(crate) const MAX_REGRESSION: f64 = 0.03;

/// The committed baseline: `row<TAB>instructions per message` lines.
pub(crate) fn baseline_path() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("baseline")
        .join("instructions.txt")
}

/// The baseline's rows, in file order; empty when there is no file.
pub(crate) fn read_baseline() -> Result<Vec<(String, f64)>, String> {
    let path = baseline_path();
    let text = match std::fs::read_to_string(&path) {
        Ok(text) => text,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(e) => return Err(format!("{}: {e}", path.display())),
    };
    let mut rows = Vec::new();
    for (number, line) in text.lines().enumerate() {
        if line.starts_with('#') || line.trim().is_empty() {
            continue;
        }
        let parsed = line
            .split_once('\t')
            .and_then(|(name, value)| Some((name.to_string(), value.trim().parse::<f64>().ok()?)));
        match parsed {
            Some(row) => rows.push(row),
            None => {
                return Err(format!(
                    "{}:{}: expected `row<TAB>number`, got {line:?}",
                    path.display(),
                    number + 1
                ));
            }
        }
    }
    Ok(rows)
}

/// Writes `rows` as the new baseline, with what they were measured with.
pub(crate) fn write_baseline(rows: &[(Row, f64)], measured_with: &str) -> Result<PathBuf, String> {
    let path = baseline_path();
    let mut text = String::from(
        "# Instructions per message (callgrind Ir), one row per line: `row<TAB>count`.\n\
         # Written by `cargo xtask bench --save-baseline`; `cargo xtask bench --check` fails\n\
         # when a childwire row rises more than 3% above its line here. See docs/performance.md.\n",
    );
    let _ = writeln!(text, "# measured with: {measured_with}");
    for (row, per_message) in rows {
        let _ = writeln!(text, "{}\t{per_message:.1}", row.name());
    }
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    }
    std::fs::write(&path, text).map_err(|e| format!("{}: {e}", path.display()))?;
    Ok(path)
}

/// What the baseline says of one row.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) enum Change {
    /// No line for it: a new row, judged once a baseline is saved.
    New,
    /// Within the tolerance, or a row the gate does not judge.
    Steady(f64),
    /// A childwire row below its baseline by more than the tolerance: the
    /// baseline is due for an update, so that the gain is kept.
    Improved(f64),
    /// A childwire row above its baseline by more than the tolerance.
    Regressed(f64),
}

impl Change {
    pub(crate) fn of(row: Row, now: f64, baseline: Option<f64>) -> Change {
        let Some(base) = baseline else {
            return Change::New;
        };
        let change = now / base - 1.0;
        if !row.is_gated() {
            Change::Steady(change)
        } else if change > MAX_REGRESSION {
            Change::Regressed(change)
        } else if change < -MAX_REGRESSION {
            Change::Improved(change)
        } else {
            Change::Steady(change)
        }
    }

    /// `+0.4%`, for the table.
    pub(crate) fn percent(self) -> String {
        match self {
            Change::New => "-".into(),
            Change::Steady(c) | Change::Improved(c) | Change::Regressed(c) => {
                format!("{:+.1}%", c * 100.0)
            }
        }
    }

    pub(crate) fn verdict(self, row: Row) -> &'static str {
        match self {
            Change::New => "new: no baseline",
            Change::Regressed(_) => "REGRESSED",
            Change::Improved(_) => "improved: save a new baseline",
            Change::Steady(_) if row.is_gated() => "ok",
            Change::Steady(_) if row.is_childwire() => "shown: varies run to run",
            Change::Steady(_) => "reference",
        }
    }
}

/// A target: `row` at most `limit` times `yardstick`, in instructions.
#[derive(Debug, Clone)]
pub(crate) struct Target {
    pub(crate) row: Row,
    pub(crate) yardstick: Row,
    pub(crate) limit: f64,
    /// Whether missing it fails the gate (see the module's policy).
    pub(crate) enforced: bool,
}

impl Target {
    /// The targets of issues 27 and 36.
    pub(crate) fn all() -> Vec<Target> {
        let mut targets = vec![
            // What a spawned child's defaults (stdout pollution named) cost
            // on each message, over a transport with every check off.
            Target {
                row: Row::RecvWith(RecvWay::Recv, Setting::ChildDefault),
                yardstick: Row::RecvWith(RecvWay::Recv, Setting::ChecksOff),
                limit: 1.03,
                enforced: true,
            },
            // Payload validation included: `send` checks every payload.
            // 2.0x is issue 36's bar (1.3x the aim); not met yet, so shown
            // as MISSED and not enforced.
            Target {
                row: Row::Send(SendWay::Send),
                yardstick: Row::Send(SendWay::FramedWriteFeed),
                limit: 2.0,
                enforced: false,
            },
            // The encoder alone, its check included (LinesCodec checks
            // nothing): issue 36's bar, not met yet.
            Target {
                row: Row::Encode(Format::Ndjson, Contender::Childwire, TYPICAL),
                yardstick: Row::Encode(Format::Ndjson, Contender::LinesCodec, TYPICAL),
                limit: 1.5,
                enforced: false,
            },
            Target {
                row: Row::Recv(RecvWay::Recv),
                yardstick: Row::Recv(RecvWay::FramedReadNext),
                limit: 1.0,
                enforced: false,
            },
            Target {
                row: Row::Decode(Format::Ndjson, Contender::Childwire, 100),
                yardstick: Row::Decode(Format::Ndjson, Contender::LinesCodec, 100),
                limit: 0.5,
                enforced: false,
            },
        ];
        targets.extend(SIZES.into_iter().filter(|&s| s != 100).map(|size| Target {
            row: Row::Decode(Format::ContentLength, Contender::Childwire, size),
            yardstick: Row::Decode(Format::ContentLength, Contender::Floor, size),
            limit: 1.0,
            enforced: false,
        }));
        targets
    }

    pub(crate) fn name(&self) -> String {
        let what = match self.row {
            Row::Send(_) => format!("send().await / FramedWrite::feed, {}", size_name(TYPICAL)),
            Row::Recv(_) => format!("recv() / FramedRead::next, {}", size_name(TYPICAL)),
            Row::RecvWith(..) => format!(
                "recv() with a child's default config / with every optional check off, {}",
                size_name(TYPICAL)
            ),
            Row::Decode(Format::Ndjson, _, size) => {
                format!("NDJSON decode / LinesCodec, {}", size_name(size))
            }
            Row::Encode(Format::Ndjson, _, size) => {
                format!("NDJSON encode / LinesCodec, {}", size_name(size))
            }
            Row::Decode(Format::ContentLength, _, size) => format!(
                "Content-Length decode / BufRead headers + read_exact, {}",
                size_name(size)
            ),
            _ => self.row.name(),
        };
        format!("{what} <= {}x", self.limit)
    }

    /// The ratio in this run, if both rows ran.
    pub(crate) fn ratio(&self, counts: &[(Row, f64)]) -> Option<f64> {
        let find = |row: Row| counts.iter().find(|(r, _)| *r == row).map(|&(_, c)| c);
        Some(find(self.row)? / find(self.yardstick)?)
    }
}
