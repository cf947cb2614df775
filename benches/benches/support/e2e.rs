//! What the end-to-end bench binaries share: the child, the adapters, the
//! payloads, and targets with a verdict.
//!
//! Include it with `#[macro_use] #[path = "support/e2e.rs"] mod e2e;`, after
//! the harness module (it uses `harness::Json`).

// Each bench binary uses a different subset of these helpers.
#![allow(dead_code, unused_macros)]

use std::process::ExitCode;
use std::time::Duration;

use bytes::Bytes;

use crate::harness::{self, Args, Json, Table};

/// The child program, built by cargo with the benches.
pub(crate) const CHILD: &str = env!("CARGO_BIN_EXE_bench-child");

/// The default limit on one message, which the memory target is based on.
pub(crate) const MAX_MESSAGE_SIZE: usize = 16 * 1024 * 1024;

/// A childwire runtime adapter.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Adapter {
    Tokio,
    Smol,
    AsyncStd,
}

impl Adapter {
    pub(crate) const ALL: [Adapter; 3] = [Adapter::Tokio, Adapter::Smol, Adapter::AsyncStd];

    pub(crate) fn name(self) -> &'static str {
        match self {
            Adapter::Tokio => "childwire-tokio",
            Adapter::Smol => "childwire-smol",
            Adapter::AsyncStd => "childwire-async-std",
        }
    }

    pub(crate) fn from_name(name: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|a| a.name() == name)
    }
}

/// Where the bench's own future (the caller of `send`/`recv`) runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Placement {
    /// In the runtime's `block_on`, on the bench's main thread (what
    /// `#[tokio::main]`'s body gets): the driver task runs on another
    /// thread, so every wake-up crosses threads.
    BlockOn,
    /// In a task spawned on the runtime (how servers run their handlers):
    /// the runtime can keep it and the driver task on one thread.
    Task,
}

impl Placement {
    pub(crate) const ALL: [Placement; 2] = [Placement::BlockOn, Placement::Task];

    pub(crate) fn name(self) -> &'static str {
        match self {
            Placement::BlockOn => "block_on",
            Placement::Task => "spawned task",
        }
    }
}

/// Runs `$body` to completion on `$adapter`'s runtime, placed as
/// `$placement` says, with `$R` naming the adapter's
/// `childwire_async::Runtime` type, so one generic bench body serves all.
/// `$body` is moved into an `async move` block, `'static` for
/// [`Placement::Task`].
///
/// Tokio gets a multi-thread runtime (what `#[tokio::main]` gives users);
/// smol and async-std run the driver tasks on their global executors.
macro_rules! on_adapter {
    ($adapter:expr, $placement:expr, $R:ident => $body:expr) => {
        match ($adapter, $placement) {
            ($crate::e2e::Adapter::Tokio, $crate::e2e::Placement::BlockOn) => {
                type $R = childwire_tokio::Tokio;
                $crate::e2e::tokio_runtime().block_on(async move { $body })
            }
            ($crate::e2e::Adapter::Tokio, $crate::e2e::Placement::Task) => {
                type $R = childwire_tokio::Tokio;
                let runtime = $crate::e2e::tokio_runtime();
                runtime
                    .block_on(runtime.spawn(async move { $body }))
                    .expect("the bench task panicked")
            }
            ($crate::e2e::Adapter::Smol, $crate::e2e::Placement::BlockOn) => {
                type $R = childwire_smol::Smol;
                smol::block_on(async move { $body })
            }
            ($crate::e2e::Adapter::Smol, $crate::e2e::Placement::Task) => {
                type $R = childwire_smol::Smol;
                smol::block_on(smol::spawn(async move { $body }))
            }
            ($crate::e2e::Adapter::AsyncStd, $crate::e2e::Placement::BlockOn) => {
                type $R = childwire_async_std::AsyncStd;
                async_std::task::block_on(async move { $body })
            }
            ($crate::e2e::Adapter::AsyncStd, $crate::e2e::Placement::Task) => {
                type $R = childwire_async_std::AsyncStd;
                async_std::task::block_on(async_std::task::spawn(async move { $body }))
            }
        }
    };
    ($adapter:expr, $R:ident => $body:expr) => {
        on_adapter!($adapter, $crate::e2e::Placement::BlockOn, $R => $body)
    };
}

/// One shared multi-thread Tokio runtime per bench process, so its start-up
/// is never timed.
pub(crate) fn tokio_runtime() -> &'static tokio::runtime::Runtime {
    static RUNTIME: std::sync::OnceLock<tokio::runtime::Runtime> = std::sync::OnceLock::new();
    RUNTIME.get_or_init(|| {
        tokio::runtime::Builder::new_multi_thread()
            .enable_all()
            .build()
            .expect("a Tokio runtime")
    })
}

/// The child in `mode`, as childwire runs it.
pub(crate) fn command(mode: &str, args: &[&str]) -> childwire_async::Command {
    let mut command = childwire_async::Command::new(CHILD);
    command.arg(mode).args(args);
    command
}

/// The child in `mode`, as a plain `std::process` baseline runs it: stdin
/// and stdout piped, stderr inherited.
pub(crate) fn std_command(mode: &str, args: &[&str]) -> std::process::Command {
    let mut command = std::process::Command::new(CHILD);
    command
        .arg(mode)
        .args(args)
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped());
    command
}

/// `count` JSON-RPC requests of about `len` bytes each (no newline), with
/// distinct ids so a mixed-up echo would be caught.
pub(crate) fn payloads(count: usize, len: usize) -> Vec<Bytes> {
    (0..count)
        .map(|id| {
            let mut line = format!(
                r#"{{"jsonrpc":"2.0","id":{id},"method":"tools/call","params":{{"name":"echo","arguments":{{"text":""#
            );
            let tail = r#""}}}"#;
            while line.len() + tail.len() < len {
                line.push(char::from(b'a' + (line.len() % 26) as u8));
            }
            line.push_str(tail);
            Bytes::from(line)
        })
        .collect()
}

/// Durations measured by the bench itself (a transfer, not its set-up), so
/// `harness::Samples`, which times a closure, does not fit.
#[derive(Debug, Default, Clone)]
pub(crate) struct Timings {
    durations: Vec<Duration>,
}

impl Timings {
    pub(crate) fn push(&mut self, elapsed: Duration) {
        self.durations.push(elapsed);
    }

    /// The fastest: the one least disturbed by other processes.
    pub(crate) fn best(&self) -> Duration {
        self.durations.iter().copied().min().unwrap_or_default()
    }

    pub(crate) fn median(&self) -> Duration {
        percentile(&self.sorted(), 50.0)
    }

    pub(crate) fn sorted(&self) -> Vec<Duration> {
        let mut sorted = self.durations.clone();
        sorted.sort();
        sorted
    }

    pub(crate) fn all(&self) -> &[Duration] {
        &self.durations
    }

    pub(crate) fn extend(&mut self, more: impl IntoIterator<Item = Duration>) {
        self.durations.extend(more);
    }
}

/// The `p`th percentile (0–100) of `sorted` samples.
pub(crate) fn percentile(sorted: &[Duration], p: f64) -> Duration {
    if sorted.is_empty() {
        return Duration::ZERO;
    }
    let rank = ((p / 100.0) * (sorted.len() - 1) as f64).round() as usize;
    sorted[rank.min(sorted.len() - 1)]
}

/// Milliseconds with two decimals, for tables.
pub(crate) fn ms(d: Duration) -> String {
    format!("{:.2}", d.as_secs_f64() * 1e3)
}

/// Microseconds, for tables.
pub(crate) fn us(d: Duration) -> String {
    format!("{:.1}", d.as_secs_f64() * 1e6)
}

/// A performance target and whether the measurement meets it.
#[derive(Debug, Clone)]
pub(crate) struct Goal {
    /// What is compared, e.g. "childwire-tokio/blocking throughput".
    pub(crate) name: String,
    /// The measured value.
    pub(crate) value: f64,
    /// The bound it must respect.
    pub(crate) bound: Bound,
    /// The unit of `value` and the bound, e.g. "x" or " ms".
    pub(crate) unit: &'static str,
}

/// Which side of a limit a measured value must stay on.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Bound {
    AtLeast(f64),
    AtMost(f64),
    /// A yes/no outcome (value 1 or 0) that must be yes.
    Holds,
}

impl Goal {
    pub(crate) fn at_least(
        name: impl Into<String>,
        value: f64,
        min: f64,
        unit: &'static str,
    ) -> Self {
        Self {
            name: name.into(),
            value,
            bound: Bound::AtLeast(min),
            unit,
        }
    }

    pub(crate) fn at_most(
        name: impl Into<String>,
        value: f64,
        max: f64,
        unit: &'static str,
    ) -> Self {
        Self {
            name: name.into(),
            value,
            bound: Bound::AtMost(max),
            unit,
        }
    }

    pub(crate) fn holds(name: impl Into<String>, holds: bool) -> Self {
        Self {
            name: name.into(),
            value: f64::from(u8::from(holds)),
            bound: Bound::Holds,
            unit: "",
        }
    }

    pub(crate) fn passed(&self) -> bool {
        match self.bound {
            Bound::AtLeast(min) => self.value >= min,
            Bound::AtMost(max) => self.value <= max,
            Bound::Holds => self.value == 1.0,
        }
    }

    pub(crate) fn verdict(&self) -> &'static str {
        if self.passed() { "PASS" } else { "MISS" }
    }

    /// `1.23x (>= 0.8x) PASS`, for a table cell.
    pub(crate) fn cell(&self) -> String {
        let unit = self.unit;
        match self.bound {
            Bound::AtLeast(min) => format!(
                "{:.2}{unit} (>= {min}{unit}) {}",
                self.value,
                self.verdict()
            ),
            Bound::AtMost(max) => format!(
                "{:.2}{unit} (<= {max}{unit}) {}",
                self.value,
                self.verdict()
            ),
            Bound::Holds => format!(
                "{} {}",
                if self.passed() { "yes" } else { "no" },
                self.verdict()
            ),
        }
    }

    pub(crate) fn to_json(&self) -> Json {
        let (kind, limit) = match self.bound {
            Bound::AtLeast(min) => ("at_least", Json::from(min)),
            Bound::AtMost(max) => ("at_most", Json::from(max)),
            Bound::Holds => ("holds", Json::Null),
        };
        Json::object([
            ("name", Json::from(self.name.as_str())),
            ("value", Json::from(self.value)),
            ("bound", Json::from(kind)),
            ("limit", limit),
            ("passed", Json::Bool(self.passed())),
        ])
    }
}

/// Prints the tables and every goal, writes `results` (plus the goals) to
/// `target/childwire-bench/<name>.json`, and turns missed goals into the
/// exit status under `--check`.
pub(crate) fn finish(
    name: &str,
    args: &Args,
    tables: &[Table],
    goals: &[Goal],
    results: Json,
) -> ExitCode {
    for (i, table) in tables.iter().enumerate() {
        if i > 0 {
            println!();
        }
        print!("{}", table.render());
    }
    if !goals.is_empty() {
        let mut targets = Table::new(["target", "result"]);
        for goal in goals {
            targets.row([goal.name.clone(), goal.cell()]);
        }
        println!();
        print!("{}", targets.render());
    }
    let mut fields = vec![
        ("bench".to_string(), Json::from(name)),
        (
            "unix_time".to_string(),
            Json::Num(harness::unix_time() as f64),
        ),
        ("quick".to_string(), Json::Bool(args.quick)),
        (
            "targets".to_string(),
            Json::Arr(goals.iter().map(Goal::to_json).collect()),
        ),
    ];
    if let Json::Obj(more) = results {
        fields.extend(more);
    }
    match harness::write_results(name, &Json::Obj(fields)) {
        Ok(path) => eprintln!("results: {}", path.display()),
        Err(error) => eprintln!("{name}: could not write results: {error}"),
    }
    let missed = goals.iter().filter(|g| !g.passed()).count();
    if missed > 0 {
        eprintln!("{name}: {missed} target(s) missed");
        if args.check {
            return ExitCode::FAILURE;
        }
    }
    ExitCode::SUCCESS
}

/// Command-line value after `flag`, e.g. `--probe tokio`.
pub(crate) fn flag_value(flag: &str) -> Option<String> {
    let mut args = std::env::args().skip_while(|a| a != flag);
    args.next()?;
    args.next()
}

/// Runs this bench binary again as `--probe NAME ARGS...` and parses its
/// `key=value` result line, so the probe's peak memory is its own.
pub(crate) fn run_probe(name: &str, args: &[String]) -> Result<Vec<(String, String)>, String> {
    let exe = std::env::current_exe().map_err(|e| format!("current_exe: {e}"))?;
    let output = std::process::Command::new(exe)
        .arg("--probe")
        .arg(name)
        .args(args)
        .stderr(std::process::Stdio::inherit())
        .output()
        .map_err(|e| format!("probe {name}: {e}"))?;
    let stdout = String::from_utf8_lossy(&output.stdout);
    let line = stdout
        .lines()
        .find_map(|l| l.strip_prefix("probe-result "))
        .ok_or_else(|| {
            format!(
                "probe {name} ({}) printed no result: {stdout}",
                output.status
            )
        })?;
    Ok(parse_fields(line))
}

/// `a=1 b=two note=rest of line` → pairs; `note` takes the rest of the line.
fn parse_fields(line: &str) -> Vec<(String, String)> {
    let mut fields = Vec::new();
    let mut rest = line.trim();
    while !rest.is_empty() {
        let (key, after) = rest.split_once('=').unwrap_or((rest, ""));
        if key == "note" {
            fields.push((key.to_string(), after.to_string()));
            break;
        }
        let (value, next) = after.split_once(' ').unwrap_or((after, ""));
        fields.push((key.to_string(), value.to_string()));
        rest = next.trim_start();
    }
    fields
}

/// A field of a probe's result.
pub(crate) fn field<'a>(fields: &'a [(String, String)], key: &str) -> Option<&'a str> {
    fields
        .iter()
        .find(|(k, _)| k == key)
        .map(|(_, v)| v.as_str())
}
