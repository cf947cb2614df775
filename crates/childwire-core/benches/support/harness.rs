//! A small benchmark harness shared by childwire's bench binaries.
//!
//! Include it with `#[path = ".../benches/support/harness.rs"] mod harness;`.
//! It stays std-only so a bench builds fast; it measures ratios against
//! baselines timed in the same run, because absolute numbers on shared
//! machines drift while ratios hold.

// Each bench binary uses a different subset of these helpers.
#![allow(dead_code)]

use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

/// Command-line flags every bench binary understands.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Args {
    /// Small inputs and few repetitions: proves the bench works, not how fast.
    pub(crate) quick: bool,
    /// Exit with status 1 when a target is missed.
    pub(crate) check: bool,
}

impl Args {
    /// Reads `--quick` and `--check`; ignores the rest (`cargo bench` passes
    /// `--bench`, and filters are meaningless for these fixed tables).
    pub(crate) fn from_env() -> Self {
        let mut args = Self {
            quick: false,
            check: false,
        };
        for arg in std::env::args().skip(1) {
            match arg.as_str() {
                "--quick" => args.quick = true,
                "--check" => args.check = true,
                _ => {}
            }
        }
        args
    }
}

/// Timings of one contender over several repetitions.
#[derive(Debug, Default, Clone)]
pub(crate) struct Samples {
    durations: Vec<Duration>,
}

impl Samples {
    /// Times one call of `run` and records it.
    pub(crate) fn measure<T>(&mut self, run: impl FnOnce() -> T) -> T {
        let start = Instant::now();
        let out = std::hint::black_box(run());
        self.durations.push(start.elapsed());
        out
    }

    /// The fastest repetition: the one least disturbed by other processes.
    pub(crate) fn best(&self) -> Duration {
        self.durations.iter().copied().min().unwrap_or_default()
    }

    /// The median repetition.
    pub(crate) fn median(&self) -> Duration {
        let mut sorted = self.durations.clone();
        sorted.sort();
        sorted.get(sorted.len() / 2).copied().unwrap_or_default()
    }

    /// Every repetition, in order.
    pub(crate) fn all(&self) -> &[Duration] {
        &self.durations
    }
}

/// Throughput in GiB/s for `bytes` processed in `elapsed`.
pub(crate) fn gib_per_s(bytes: usize, elapsed: Duration) -> f64 {
    let secs = elapsed.as_secs_f64().max(1e-12);
    bytes as f64 / secs / (1u64 << 30) as f64
}

/// A performance target: `value` must be at least `min`.
#[derive(Debug, Clone)]
pub(crate) struct Target {
    /// What is compared, e.g. "decoder/memchr".
    pub(crate) name: String,
    /// The measured value (usually a ratio).
    pub(crate) value: f64,
    /// The smallest acceptable value.
    pub(crate) min: f64,
}

impl Target {
    /// Whether the target is met.
    pub(crate) fn passed(&self) -> bool {
        self.value >= self.min
    }

    /// `PASS` or `MISS`, for tables.
    pub(crate) fn verdict(&self) -> &'static str {
        if self.passed() { "PASS" } else { "MISS" }
    }

    /// The target as JSON.
    pub(crate) fn to_json(&self) -> Json {
        Json::object([
            ("name", Json::from(self.name.as_str())),
            ("value", Json::from(self.value)),
            ("min", Json::from(self.min)),
            ("passed", Json::Bool(self.passed())),
        ])
    }
}

/// A plain text table with right-aligned columns (except the first).
#[derive(Debug)]
pub(crate) struct Table {
    header: Vec<String>,
    rows: Vec<Vec<String>>,
}

impl Table {
    /// A table with these column titles.
    pub(crate) fn new<S: Into<String>>(header: impl IntoIterator<Item = S>) -> Self {
        Self {
            header: header.into_iter().map(Into::into).collect(),
            rows: Vec::new(),
        }
    }

    /// Appends a row; it should have as many cells as the header.
    pub(crate) fn row<S: Into<String>>(&mut self, cells: impl IntoIterator<Item = S>) {
        self.rows.push(cells.into_iter().map(Into::into).collect());
    }

    /// The table as text, one line per row, with a rule under the header.
    pub(crate) fn render(&self) -> String {
        let columns = self.header.len();
        let mut widths: Vec<usize> = self.header.iter().map(|h| h.chars().count()).collect();
        for row in &self.rows {
            for (i, cell) in row.iter().enumerate().take(columns) {
                widths[i] = widths[i].max(cell.chars().count());
            }
        }
        let mut out = String::new();
        let line = |cells: &[String], out: &mut String| {
            for (i, cell) in cells.iter().enumerate().take(columns) {
                let sep = if i == 0 { "" } else { "  " };
                if i == 0 {
                    let _ = write!(out, "{sep}{cell:<w$}", w = widths[i]);
                } else {
                    let _ = write!(out, "{sep}{cell:>w$}", w = widths[i]);
                }
            }
            out.push('\n');
        };
        line(&self.header, &mut out);
        let rule: usize = widths.iter().sum::<usize>() + 2 * columns.saturating_sub(1);
        out.push_str(&"-".repeat(rule));
        out.push('\n');
        for row in &self.rows {
            line(row, &mut out);
        }
        out
    }
}

/// Just enough JSON to write results files without a serde dependency.
#[derive(Debug, Clone)]
pub(crate) enum Json {
    /// `null`.
    Null,
    /// `true` / `false`.
    Bool(bool),
    /// A number; non-finite values are written as `null`.
    Num(f64),
    /// A string.
    Str(String),
    /// An array.
    Arr(Vec<Json>),
    /// An object, keys in insertion order.
    Obj(Vec<(String, Json)>),
}

impl Json {
    /// An object from `(key, value)` pairs.
    pub(crate) fn object<K: Into<String>>(pairs: impl IntoIterator<Item = (K, Json)>) -> Self {
        Json::Obj(pairs.into_iter().map(|(k, v)| (k.into(), v)).collect())
    }

    /// The value as compact JSON text.
    pub(crate) fn render(&self) -> String {
        let mut out = String::new();
        self.write_to(&mut out);
        out
    }

    fn write_to(&self, out: &mut String) {
        match self {
            Json::Null => out.push_str("null"),
            Json::Bool(b) => out.push_str(if *b { "true" } else { "false" }),
            Json::Num(n) if n.is_finite() => {
                let _ = write!(out, "{n}");
            }
            Json::Num(_) => out.push_str("null"),
            Json::Str(s) => write_json_string(s, out),
            Json::Arr(items) => {
                out.push('[');
                for (i, item) in items.iter().enumerate() {
                    if i > 0 {
                        out.push(',');
                    }
                    item.write_to(out);
                }
                out.push(']');
            }
            Json::Obj(pairs) => {
                out.push('{');
                for (i, (key, value)) in pairs.iter().enumerate() {
                    if i > 0 {
                        out.push(',');
                    }
                    write_json_string(key, out);
                    out.push(':');
                    value.write_to(out);
                }
                out.push('}');
            }
        }
    }
}

impl From<&str> for Json {
    fn from(s: &str) -> Self {
        Json::Str(s.to_string())
    }
}

impl From<f64> for Json {
    fn from(n: f64) -> Self {
        Json::Num(n)
    }
}

impl From<usize> for Json {
    fn from(n: usize) -> Self {
        Json::Num(n as f64)
    }
}

impl From<Duration> for Json {
    /// Durations are written in seconds.
    fn from(d: Duration) -> Self {
        Json::Num(d.as_secs_f64())
    }
}

impl From<&[Duration]> for Json {
    /// Every sample of a contender, in seconds.
    fn from(durations: &[Duration]) -> Self {
        Json::Arr(durations.iter().map(|&d| Json::from(d)).collect())
    }
}

fn write_json_string(s: &str, out: &mut String) {
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            c if (c as u32) < 0x20 => {
                let _ = write!(out, "\\u{:04x}", c as u32);
            }
            c => out.push(c),
        }
    }
    out.push('"');
}

/// Cargo's target directory: `$CARGO_TARGET_DIR`, else the nearest ancestor
/// of this executable holding cargo's `CACHEDIR.TAG`.
pub(crate) fn target_dir() -> PathBuf {
    if let Some(dir) = std::env::var_os("CARGO_TARGET_DIR") {
        return PathBuf::from(dir);
    }
    let exe = std::env::current_exe().unwrap_or_default();
    exe.ancestors()
        .find(|dir| dir.join("CACHEDIR.TAG").is_file())
        .map(Path::to_path_buf)
        .unwrap_or_else(|| PathBuf::from("target"))
}

/// Writes `results` to `target/childwire-bench/<name>.json` and returns the
/// path.
pub(crate) fn write_results(name: &str, results: &Json) -> std::io::Result<PathBuf> {
    let dir = target_dir().join("childwire-bench");
    std::fs::create_dir_all(&dir)?;
    let path = dir.join(format!("{name}.json"));
    std::fs::write(&path, results.render() + "\n")?;
    Ok(path)
}

/// Seconds since the Unix epoch, to tell result files apart.
pub(crate) fn unix_time() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0)
}
