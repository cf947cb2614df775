//! What the end-to-end bench binaries share: the harness, the child, the
//! adapters, the contenders, the payloads, probes, and targets with a
//! verdict.
//!
//! Include it with `#[macro_use] #[path = "support/e2e.rs"] mod e2e;`; the
//! harness then is `e2e::harness`.

// Each bench binary uses a different subset of these helpers.
#![allow(dead_code, unused_macros)]

#[path = "../../../crates/childwire-core/benches/support/harness.rs"]
pub(crate) mod harness;

use std::fmt::Write as _;
use std::future::Future;
use std::io::BufRead;
use std::pin::Pin;
use std::process::ExitCode;
use std::time::{Duration, Instant};

use bytes::Bytes;
use childwire_async::{Config, ExitReport, Runtime, ShutdownError, Transport};
use childwire_bench::proc_status_kib;
use tokio_util::codec::{FramedRead, FramedWrite, LinesCodec};

use self::harness::{Args, Json, Table};

/// The child program, built by cargo with the benches.
pub(crate) const CHILD: &str = env!("CARGO_BIN_EXE_bench-child");

/// The default limit on one message, which the memory target is based on.
pub(crate) const MAX_MESSAGE_SIZE: usize = 16 * 1024 * 1024;

/// A bench binary's `main`: runs `bench` with the command-line flags. An
/// error ends the bench with `NAME: error` on stderr and exit status 1.
pub(crate) fn main(name: &str, bench: impl FnOnce(Args) -> Result<ExitCode, String>) -> ExitCode {
    START_LOAD.get_or_init(load_average);
    give_smol_every_core();
    bench(Args::from_env()).unwrap_or_else(|error| {
        eprintln!("{name}: {error}");
        ExitCode::FAILURE
    })
}

/// The load average when the bench started, for [`load_note`].
static START_LOAD: std::sync::OnceLock<Option<f64>> = std::sync::OnceLock::new();

/// Every runtime gets one worker thread per core: Tokio's multi-thread
/// runtime and async-std's global executor do by default, smol's global
/// executor runs one thread unless `SMOL_THREADS` says more (its documented
/// knob). Without this, smol's spawned tasks (the writer, a reader in a
/// task, every child's pair of tasks with N children, the background tasks)
/// would share one core where the others' share two, and its numbers would
/// measure that default, not childwire. A `SMOL_THREADS` already set is
/// kept.
#[allow(unsafe_code)] // `set_var`, before any thread: see below.
fn give_smol_every_core() {
    if std::env::var_os("SMOL_THREADS").is_some() {
        return;
    }
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    // SAFETY: called first thing in `main`, before the bench starts any
    // thread, so nothing reads the environment concurrently.
    unsafe { std::env::set_var("SMOL_THREADS", cores.to_string()) };
}

/// ` (--quick)` under `--quick`, for the line that says what a bench does.
pub(crate) fn quick_note(args: &Args) -> &'static str {
    if args.quick { " (--quick)" } else { "" }
}

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

    /// The runtime the adapter binds childwire to.
    pub(crate) fn runtime_name(self) -> &'static str {
        match self {
            Adapter::Tokio => "tokio",
            Adapter::Smol => "smol",
            Adapter::AsyncStd => "async-std",
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

/// How a bench sets an adapter up in a [`Contender`]: where the caller
/// runs, and whatever else the bench varies.
pub(crate) trait Setup: Copy {
    /// Every setup, in the order of the bench's table.
    fn all() -> Vec<Self>;

    /// The setup's part of a contender's name.
    fn label(self) -> String;

    /// Where the caller runs: the LinesCodec baseline is placed alike, so
    /// an adapter is compared with the baseline in the same place.
    fn placement(self) -> Placement;
}

impl Setup for Placement {
    fn all() -> Vec<Self> {
        Placement::ALL.to_vec()
    }

    fn label(self) -> String {
        self.name().to_string()
    }

    fn placement(self) -> Placement {
        self
    }
}

/// One side of the benches that time childwire against baselines on the
/// same child and payloads (throughput, latency).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Contender<S> {
    /// Plain blocking `std::process` pipes: the practical limit.
    Blocking,
    /// tokio-util's `LinesCodec` over `tokio::process` pipes: what users
    /// would write instead, its caller placed as an adapter's is.
    LinesCodec(Placement),
    /// A childwire adapter, set up as `S` says.
    Adapter(Adapter, S),
    /// No childwire: async-process's pipes (those the smol and async-std
    /// adapters use) read with futures-lite's `BufReader`, on the adapter's
    /// runtime with the caller placed alike. What that runtime itself
    /// costs, for a bench that shows it (see [`Lineup::with_references`]).
    AsyncProcess(Adapter, Placement),
}

impl<S: Setup> Contender<S> {
    /// The baselines first, then every adapter in every setup.
    pub(crate) fn all() -> Vec<Self> {
        let mut all = vec![Contender::Blocking];
        all.extend(Placement::ALL.map(Contender::LinesCodec));
        for setup in S::all() {
            all.extend(Adapter::ALL.map(|a| Contender::Adapter(a, setup)));
        }
        all
    }

    /// The unjudged references for smol and async-std, in both placements:
    /// their own pipes with no childwire (see [`Lineup::with_references`]).
    pub(crate) fn async_process_references() -> Vec<Self> {
        [Adapter::Smol, Adapter::AsyncStd]
            .into_iter()
            .flat_map(|adapter| {
                Placement::ALL.map(|placement| Contender::AsyncProcess(adapter, placement))
            })
            .collect()
    }

    pub(crate) fn name(self) -> String {
        match self {
            Contender::Blocking => "blocking std::process".into(),
            Contender::LinesCodec(placement) => format!("tokio LinesCodec, {}", placement.name()),
            Contender::Adapter(adapter, setup) => {
                format!("{}, {}", adapter.name(), setup.label())
            }
            Contender::AsyncProcess(adapter, placement) => format!(
                "async-process on {}, {}",
                adapter.runtime_name(),
                placement.name()
            ),
        }
    }
}

/// The contenders a run times, interleaved so that load bursts hit them
/// alike.
pub(crate) struct Lineup<S> {
    pub(crate) contenders: Vec<Contender<S>>,
    /// Every contender runs: only then do the ratios between them mean
    /// anything, and only then are targets judged.
    pub(crate) complete: bool,
}

impl<S: Setup> Lineup<S> {
    /// Every contender, or only the one `--only NAME` names (e.g. to run
    /// it under `perf record`).
    pub(crate) fn from_env() -> Result<Self, String> {
        Self::with_references(Vec::new())
    }

    /// As [`Lineup::from_env`], with `references` after the adapters:
    /// contenders shown in the table to explain a result, never judged.
    pub(crate) fn with_references(references: Vec<Contender<S>>) -> Result<Self, String> {
        let only = flag_value("--only");
        let contenders: Vec<Contender<S>> = Contender::all()
            .into_iter()
            .chain(references)
            .filter(|c| only.as_deref().is_none_or(|o| c.name() == o))
            .collect();
        if contenders.is_empty() {
            return Err(format!("no contender named {only:?}"));
        }
        Ok(Self {
            contenders,
            complete: only.is_none(),
        })
    }

    /// Whether `contender` is judged against the targets: adapters are,
    /// when every contender ran.
    pub(crate) fn judges(&self, contender: Contender<S>) -> bool {
        self.complete && matches!(contender, Contender::Adapter(..))
    }

    /// Where `contender` is in the lineup, if it runs.
    pub(crate) fn position(&self, contender: Contender<S>) -> Option<usize>
    where
        S: PartialEq,
    {
        self.contenders.iter().position(|&c| c == contender)
    }

    /// The baselines `contender` is compared with: the blocking one, and
    /// LinesCodec with its caller placed alike. `None` for those `--only`
    /// left out.
    pub(crate) fn baselines(&self, contender: Contender<S>) -> (Option<usize>, Option<usize>)
    where
        S: PartialEq,
    {
        let placement = match contender {
            Contender::Adapter(_, setup) => setup.placement(),
            Contender::LinesCodec(placement) | Contender::AsyncProcess(_, placement) => placement,
            Contender::Blocking => Placement::BlockOn,
        };
        (
            self.position(Contender::Blocking),
            self.position(Contender::LinesCodec(placement)),
        )
    }

    /// Calls `run(contender, round, its timings)` for every contender in
    /// each of `rounds` rounds; the first error ends the run.
    pub(crate) fn run(
        &self,
        rounds: usize,
        mut run: impl FnMut(Contender<S>, usize, &mut Timings) -> Result<(), String>,
    ) -> Result<Vec<Timings>, String> {
        let mut timings = vec![Timings::default(); self.contenders.len()];
        for round in 0..rounds {
            for (&contender, timings) in self.contenders.iter().zip(&mut timings) {
                run(contender, round, timings)
                    .map_err(|error| format!("{}: {error}", contender.name()))?;
            }
        }
        Ok(timings)
    }

    /// The contenders as a JSON array: each one's name, then `fields(i)`
    /// of contender `i`.
    pub(crate) fn json<const N: usize>(
        &self,
        fields: impl Fn(usize) -> [(&'static str, Json); N],
    ) -> Json {
        let contender = |(i, c): (usize, &Contender<S>)| {
            Json::object(std::iter::once(("name", Json::Str(c.name()))).chain(fields(i)))
        };
        Json::Arr(self.contenders.iter().enumerate().map(contender).collect())
    }
}

/// Runs `$body` to completion on `$adapter`'s runtime, placed as
/// `$placement` says, with `$R` naming the adapter's
/// `childwire_async::Runtime` type, so one generic bench body serves all.
/// `$body` is moved into an `async move` block, `'static` for
/// [`Placement::Task`].
///
/// Tokio gets a multi-thread runtime (what `#[tokio::main]` gives users);
/// smol and async-std run the driver tasks on their global executors, each
/// with a thread per core, as Tokio's (see `give_smol_every_core`).
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

/// Runs `body` on the shared Tokio runtime, placed as `placement` says:
/// for the LinesCodec baselines, placed like the adapters they are
/// compared with.
pub(crate) fn on_tokio<T: Send + 'static>(
    placement: Placement,
    body: impl Future<Output = T> + Send + 'static,
) -> T {
    let runtime = tokio_runtime();
    match placement {
        Placement::BlockOn => runtime.block_on(body),
        Placement::Task => runtime
            .block_on(runtime.spawn(body))
            .expect("the bench task panicked"),
    }
}

/// Runs `body` on `adapter`'s runtime, placed as `placement` says and set
/// up as for the adapter (see [`on_adapter!`]), for a contender with no
/// childwire in it.
pub(crate) fn on_runtime<T: Send + 'static>(
    adapter: Adapter,
    placement: Placement,
    body: impl Future<Output = T> + Send + 'static,
) -> T {
    match (adapter, placement) {
        (Adapter::Tokio, _) => on_tokio(placement, body),
        (Adapter::Smol, Placement::BlockOn) => smol::block_on(body),
        (Adapter::Smol, Placement::Task) => smol::block_on(smol::spawn(body)),
        (Adapter::AsyncStd, Placement::BlockOn) => async_std::task::block_on(body),
        (Adapter::AsyncStd, Placement::Task) => {
            async_std::task::block_on(async_std::task::spawn(body))
        }
    }
}

/// A task spawned on the bench's runtime, awaited for its output.
pub(crate) type Task<T> = Pin<Box<dyn Future<Output = T> + Send>>;

/// What a user of each adapter calls to run a task in the background:
/// the runtime's own `spawn`. The benches' writers run this way, as users
/// write them (a writer task, the reader in the caller).
pub(crate) trait Spawn: Runtime {
    /// Spawns `task` on the runtime; the returned future is its output.
    fn spawn_task<T: Send + 'static>(task: impl Future<Output = T> + Send + 'static) -> Task<T>;
}

impl Spawn for childwire_tokio::Tokio {
    fn spawn_task<T: Send + 'static>(task: impl Future<Output = T> + Send + 'static) -> Task<T> {
        let handle = tokio::spawn(task);
        Box::pin(async move { handle.await.expect("a bench task panicked") })
    }
}

impl Spawn for childwire_smol::Smol {
    fn spawn_task<T: Send + 'static>(task: impl Future<Output = T> + Send + 'static) -> Task<T> {
        Box::pin(smol::spawn(task))
    }
}

impl Spawn for childwire_async_std::AsyncStd {
    fn spawn_task<T: Send + 'static>(task: impl Future<Output = T> + Send + 'static) -> Task<T> {
        Box::pin(async_std::task::spawn(task))
    }
}

/// Waits `duration` on `R`'s clock.
pub(crate) async fn sleep<R: Runtime>(duration: Duration) -> Result<(), String> {
    let rt = R::current().map_err(|e| e.to_string())?;
    let mut timer = rt.timer(rt.now() + duration);
    std::future::poll_fn(|cx| childwire_async::Timer::poll(timer.as_mut(), cx)).await;
    Ok(())
}

/// `task`'s output, or an error naming `what` if it takes longer than
/// `limit`: a probe that hangs is a failure to report, not a bench that
/// never ends.
pub(crate) async fn within<R: Runtime, T>(
    limit: Duration,
    what: &str,
    task: impl Future<Output = T>,
) -> Result<T, String> {
    let task = std::pin::pin!(task);
    let timeout = std::pin::pin!(sleep::<R>(limit));
    match futures_util::future::select(task, timeout).await {
        futures_util::future::Either::Left((out, _)) => Ok(out),
        futures_util::future::Either::Right((slept, _)) => {
            slept?;
            Err(format!("{what} took over {limit:?}"))
        }
    }
}

/// The child in `mode`, as childwire runs it.
pub(crate) fn command(mode: &str, args: &[&str]) -> childwire_async::Command {
    let mut command = childwire_async::Command::new(CHILD);
    command.arg(mode).args(args);
    command
}

/// The child in `mode` under childwire on runtime `R`, stdout pollution
/// not looked for: the bench children speak plain-text lines ("ready",
/// exit stamps, payloads of any shape), which it would name.
pub(crate) fn spawn<R: Runtime>(
    mode: &str,
    args: &[&str],
    mut config: Config,
) -> Result<Transport<R>, String> {
    config.pollution(None);
    spawn_as_given(mode, args, config)
}

/// The child in `mode` under childwire on runtime `R`, with `config` as it
/// is: for a child that writes only JSON messages (`cat` echoing
/// [`payload`]s), so that `Config::default()` is what users get.
pub(crate) fn spawn_as_given<R: Runtime>(
    mode: &str,
    args: &[&str],
    config: Config,
) -> Result<Transport<R>, String> {
    Transport::<R>::spawn(&command(mode, args), config).map_err(|e| e.to_string())
}

/// Checks what `shutdown()` returned: an echo run must end with a clean
/// exit, or its timing means nothing.
pub(crate) fn clean_exit(shutdown: Result<ExitReport, ShutdownError>) -> Result<(), String> {
    let report = shutdown.map_err(|e| format!("shutdown: {e}"))?;
    if !report.success() {
        return Err(format!("child did not exit cleanly: {report}"));
    }
    Ok(())
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

/// A child spawned by `std::process`, with its stdin and stdout taken.
pub(crate) type StdPipes = (
    std::process::Child,
    std::process::ChildStdin,
    std::process::ChildStdout,
);

/// The child in `mode`, spawned by `std::process`, and its two pipes.
pub(crate) fn std_spawn(mode: &str, args: &[&str]) -> Result<StdPipes, String> {
    let mut child = std_command(mode, args)
        .spawn()
        .map_err(|e| format!("spawn: {e}"))?;
    let stdin = child.stdin.take().ok_or("no stdin")?;
    let stdout = child.stdout.take().ok_or("no stdout")?;
    Ok((child, stdin, stdout))
}

/// Reads the next line into `line` (cleared first), newline included;
/// 0 bytes at the end of the stream.
pub(crate) fn read_line(reader: &mut impl BufRead, line: &mut Vec<u8>) -> Result<usize, String> {
    line.clear();
    reader
        .read_until(b'\n', line)
        .map_err(|e| format!("read: {e}"))
}

/// A child spawned by async-process, with its stdin and stdout taken.
pub(crate) type AsyncProcessPipes = (
    smol::process::Child,
    smol::process::ChildStdin,
    smol::process::ChildStdout,
);

/// The child in `mode` under async-process (smol's `smol::process`), for
/// the references without childwire on smol and async-std; killed if the
/// bench gives up on it.
pub(crate) fn async_process_spawn(mode: &str) -> Result<AsyncProcessPipes, String> {
    let mut child = smol::process::Command::from(std_command(mode, &[]))
        // Said again: async-process cannot see how the std command set
        // them, and makes only the pipes it was told of.
        .stdin(smol::process::Stdio::piped())
        .stdout(smol::process::Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .map_err(|e| format!("spawn: {e}"))?;
    let stdin = child.stdin.take().ok_or("no stdin")?;
    let stdout = child.stdout.take().ok_or("no stdout")?;
    Ok((child, stdin, stdout))
}

/// `command` under `tokio::process`, for the LinesCodec baselines; killed
/// if the bench gives up on it.
pub(crate) fn tokio_spawn(command: std::process::Command) -> Result<tokio::process::Child, String> {
    tokio::process::Command::from(command)
        .kill_on_drop(true)
        .spawn()
        .map_err(|e| format!("spawn: {e}"))
}

/// The LinesCodec baselines' writing and reading ends.
pub(crate) type CodecPipes = (
    FramedWrite<tokio::process::ChildStdin, LinesCodec>,
    FramedRead<tokio::process::ChildStdout, LinesCodec>,
);

/// `LinesCodec` on both pipes of `child`, reading with the limit childwire
/// uses by default.
pub(crate) fn lines_codec_pipes(child: &mut tokio::process::Child) -> Result<CodecPipes, String> {
    let stdin = child.stdin.take().ok_or("no stdin")?;
    let stdout = child.stdout.take().ok_or("no stdout")?;
    let reader = LinesCodec::new_with_max_length(MAX_MESSAGE_SIZE);
    Ok((
        FramedWrite::new(stdin, LinesCodec::new()),
        FramedRead::new(stdout, reader),
    ))
}

/// What every payload is made of: `{"jsonrpc":"2.0","id":ID,` this,
/// filler text, then [`PAYLOAD_TAIL`].
const PAYLOAD_HEAD: &str = r#""method":"echo","params":""#;
const PAYLOAD_TAIL: &str = r#""}"#;
/// The filler, copied in whole slices: building a 1 MiB payload costs a
/// memcpy, as serialising one would, not a loop per character.
const FILLER: &str = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_";

/// A JSON-RPC request of `len` bytes (no newline; longer only when `len`
/// is below the ~60 bytes the envelope takes), with id `id` so a mixed-up
/// echo would be caught. The throughput and latency benches build one per
/// message, in every contender alike, as a caller serialising its
/// messages does.
pub(crate) fn payload(id: usize, len: usize) -> String {
    let mut line = String::with_capacity(len.max(64));
    let _ = write!(line, r#"{{"jsonrpc":"2.0","id":{id},{PAYLOAD_HEAD}"#);
    let mut fill = len.saturating_sub(line.len() + PAYLOAD_TAIL.len());
    while fill > 0 {
        let n = fill.min(FILLER.len());
        line.push_str(&FILLER[..n]);
        fill -= n;
    }
    line.push_str(PAYLOAD_TAIL);
    line
}

/// The length of [`payload`]`(id, len)`, without building it.
pub(crate) fn payload_len(id: usize, len: usize) -> usize {
    let digits = id.checked_ilog10().map_or(1, |d| d as usize + 1);
    let envelope = r#"{"jsonrpc":"2.0","id":,"#.len() + digits;
    len.max(envelope + PAYLOAD_HEAD.len() + PAYLOAD_TAIL.len())
}

/// `count` payloads built ahead (see [`payload`]), for benches that do not
/// time building them.
pub(crate) fn payloads(count: usize, len: usize) -> Vec<Bytes> {
    (0..count).map(|id| Bytes::from(payload(id, len))).collect()
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
    /// The lowest and highest value over the repetitions, when `value` is
    /// their median: a bound inside it is neither met nor missed.
    pub(crate) spread: Option<(f64, f64)>,
}

/// A goal's outcome.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Verdict {
    Met,
    Missed,
    /// The median is on one side of the bound, some repetitions on the
    /// other: this run cannot tell.
    WithinSpread,
}

/// Which side of a limit a measured value must stay on.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Bound {
    AtLeast(f64),
    AtMost(f64),
    /// Strictly less: "below" a baseline, where a tie is not a win.
    Below(f64),
    /// A yes/no outcome (value 1 or 0) that must be yes.
    Holds,
}

impl Goal {
    /// `value` must respect `bound`; `unit` is printed after both.
    pub(crate) fn new(
        name: impl Into<String>,
        value: f64,
        bound: Bound,
        unit: &'static str,
    ) -> Self {
        Self {
            name: name.into(),
            value,
            bound,
            unit,
            spread: None,
        }
    }

    /// A goal judged on the median of repetitions: `values` (the ratio of
    /// each repetition, contenders interleaved), their median the value,
    /// their range the spread.
    pub(crate) fn median_of(
        name: impl Into<String>,
        values: &[f64],
        bound: Bound,
        unit: &'static str,
    ) -> Self {
        let (median, low, high) = median_and_range(values);
        let mut goal = Self::new(name, median, bound, unit);
        goal.spread = Some((low, high));
        goal
    }

    pub(crate) fn holds(name: impl Into<String>, holds: bool) -> Self {
        Self::new(name, f64::from(u8::from(holds)), Bound::Holds, "")
    }

    /// Whether `value` respects the bound.
    fn respects(&self, value: f64) -> bool {
        match self.bound {
            Bound::AtLeast(min) => value >= min,
            Bound::AtMost(max) => value <= max,
            Bound::Below(max) => value < max,
            Bound::Holds => value == 1.0,
        }
    }

    pub(crate) fn outcome(&self) -> Verdict {
        let median = self.respects(self.value);
        match self.spread {
            // Some repetitions on the other side of the bound than the
            // median: the bound lies within the spread.
            Some((low, high)) if self.respects(low) != median || self.respects(high) != median => {
                Verdict::WithinSpread
            }
            _ if median => Verdict::Met,
            _ => Verdict::Missed,
        }
    }

    /// Not missed: met, or within the spread (which `--check` does not
    /// count as a miss).
    pub(crate) fn passed(&self) -> bool {
        self.outcome() != Verdict::Missed
    }

    pub(crate) fn verdict(&self) -> &'static str {
        match self.outcome() {
            Verdict::Met => "PASS",
            Verdict::Missed => "MISS",
            Verdict::WithinSpread => "within spread",
        }
    }

    /// ` (1.10-1.31)` after a median, or nothing.
    fn range(&self) -> String {
        match self.spread {
            Some((low, high)) => format!(" ({low:.2}-{high:.2})"),
            None => String::new(),
        }
    }

    /// `1.23x (>= 0.8x) PASS`, for a table cell.
    pub(crate) fn cell(&self) -> String {
        let unit = self.unit;
        match self.bound {
            Bound::AtLeast(min) => format!(
                "{:.2}{unit}{} (>= {min}{unit}) {}",
                self.value,
                self.range(),
                self.verdict()
            ),
            Bound::AtMost(max) => format!(
                "{:.2}{unit}{} (<= {max}{unit}) {}",
                self.value,
                self.range(),
                self.verdict()
            ),
            Bound::Below(max) => format!(
                "{:.2}{unit}{} (< {max}{unit}) {}",
                self.value,
                self.range(),
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
            Bound::Below(max) => ("below", Json::from(max)),
            Bound::Holds => ("holds", Json::Null),
        };
        let (low, high) = self.spread.unwrap_or((self.value, self.value));
        Json::object([
            ("name", Json::from(self.name.as_str())),
            ("value", Json::from(self.value)),
            ("low", Json::from(low)),
            ("high", Json::from(high)),
            ("bound", Json::from(kind)),
            ("limit", limit),
            ("verdict", Json::from(self.verdict())),
            ("passed", Json::Bool(self.passed())),
        ])
    }
}

/// The median of `values`, their lowest and their highest (all NaN when
/// there are none).
pub(crate) fn median_and_range(values: &[f64]) -> (f64, f64, f64) {
    let mut sorted = values.to_vec();
    sorted.sort_by(f64::total_cmp);
    match sorted.len() {
        0 => (f64::NAN, f64::NAN, f64::NAN),
        n => {
            let median = if n % 2 == 1 {
                sorted[n / 2]
            } else {
                (sorted[n / 2 - 1] + sorted[n / 2]) / 2.0
            };
            (median, sorted[0], sorted[n - 1])
        }
    }
}

/// `median (low-high)` of `values`, each shown with `decimals` decimals.
pub(crate) fn median_cell(values: &[f64], decimals: usize) -> String {
    let (median, low, high) = median_and_range(values);
    format!("{median:.decimals$} ({low:.decimals$}-{high:.decimals$})")
}

/// The machine's load: cores, and the 1-minute load average from
/// `/proc/loadavg` (`None` where there is none).
pub(crate) fn load_average() -> Option<f64> {
    std::fs::read_to_string("/proc/loadavg")
        .ok()?
        .split_whitespace()
        .next()?
        .parse()
        .ok()
}

/// `2 cores, load average 0.31 at the start, 1.85 at the end`: what the
/// machine was doing besides the bench, printed under its tables.
pub(crate) fn load_note(at_start: Option<f64>) -> String {
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    let show = |load: Option<f64>| load.map_or("unknown".to_string(), |l| format!("{l:.2}"));
    format!(
        "machine: {cores} cores, 1-minute load average {} at the start, {} at the end",
        show(at_start),
        show(load_average())
    )
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
    let start_load = START_LOAD.get().copied().flatten();
    println!("{}", load_note(start_load));
    let mut fields = vec![
        ("bench".to_string(), Json::from(name)),
        (
            "load_average".to_string(),
            Json::object([
                ("start", start_load.map_or(Json::Null, Json::Num)),
                ("end", load_average().map_or(Json::Null, Json::Num)),
            ]),
        ),
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

/// Runs this bench binary again as `--probe NAME [--quick]` and parses its
/// `key=value` result line, so the probe's peak memory is its own.
pub(crate) fn run_probe(name: &str, args: &Args) -> Result<Probe, String> {
    let exe = std::env::current_exe().map_err(|e| format!("current_exe: {e}"))?;
    let output = std::process::Command::new(exe)
        .arg("--probe")
        .arg(name)
        .args(args.quick.then_some("--quick"))
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
    Ok(Probe {
        fields: parse_fields(line),
    })
}

/// What a probe reported: `key=value` fields.
pub(crate) struct Probe {
    fields: Vec<(String, String)>,
}

impl Probe {
    /// A field as the probe printed it.
    pub(crate) fn text(&self, key: &str) -> Option<&str> {
        self.fields
            .iter()
            .find(|(k, _)| k == key)
            .map(|(_, v)| v.as_str())
    }

    /// A numeric field; NaN when it is missing or not a number, so the
    /// table shows the gap instead of a made-up value.
    pub(crate) fn num(&self, key: &str) -> f64 {
        self.text(key)
            .and_then(|v| v.parse::<f64>().ok())
            .unwrap_or(f64::NAN)
    }
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

/// What a probe process measures of itself around its run.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Footprint {
    /// RSS before the run, KiB.
    pub(crate) start_kib: u64,
    /// Peak RSS (`VmHWM`) after it, KiB.
    pub(crate) peak_kib: u64,
    /// Wall time of the run.
    pub(crate) seconds: f64,
}

/// Runs `run` in the probe process and measures its [`Footprint`].
pub(crate) fn footprint<T>(run: impl FnOnce() -> T) -> (T, Footprint) {
    let start_kib = proc_status_kib(None, "VmRSS").unwrap_or(0);
    let started = Instant::now();
    let out = run();
    let seconds = started.elapsed().as_secs_f64();
    let peak_kib = proc_status_kib(None, "VmHWM").unwrap_or(0);
    (
        out,
        Footprint {
            start_kib,
            peak_kib,
            seconds,
        },
    )
}
