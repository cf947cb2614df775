//! One server shared by many clients (`childwire-share`), against the
//! transport it shares, through a real child (`bench-child answer`):
//!
//! - **Round trip**: one ~200-byte request in flight at a time, sent and
//!   its answer received by one caller in `block_on`: p50 and p99 for a
//!   direct `Transport` and for a share's `Client`, per runtime, in
//!   interleaved blocks (each on a fresh child after a warm-up).
//! - **A stalled client under a flood**: the server writes N notifications
//!   of 200 B to every client; the reading client's throughput alone, then
//!   with a second client that stopped reading (joined well before, so its
//!   read grace has passed). The stalled client's queue never passes its
//!   bound (sampled while the flood runs): it is disconnected there, and
//!   the reader's throughput is the figure to compare. Also the process's
//!   peak RSS growth during the stalled run.
//!
//! Reports only (a shared machine's wall clock), never a verdict.
//! `cargo xtask bench [--quick]`, or
//! `cargo bench -p childwire-bench --bench share -- [--quick]`.

#[macro_use]
#[path = "support/e2e.rs"]
mod e2e;

use std::process::ExitCode;
use std::time::{Duration, Instant};

use childwire_async::{Command, Config, Received, Runtime, Transport};
use childwire_share::{Disconnect, ShareConfig, SharedServer};
use e2e::harness::{Args, Table};

const WARM_UP: usize = 200;
/// The stalled client's bound in the flood runs.
const BOUND: usize = 1 << 20;

fn main() -> ExitCode {
    e2e::main("share", bench)
}

fn child() -> Command {
    let mut command = Command::new(e2e::CHILD);
    command.arg("answer");
    command
}

/// `{"jsonrpc":"2.0","id":7,"method":"echo","params":"…"}`, 200 bytes.
fn request() -> String {
    let head = r#"{"jsonrpc":"2.0","id":7,"method":"echo","params":""#;
    let tail = r#""}"#;
    let mut line = String::from(head);
    while line.len() + tail.len() < 200 {
        line.push('x');
    }
    line.push_str(tail);
    line
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Way {
    Direct,
    Share,
}

impl Way {
    fn name(self) -> &'static str {
        match self {
            Way::Direct => "Transport send + recv",
            Way::Share => "share Client send + recv",
        }
    }
}

/// `trips` timed round trips after a warm-up, on a fresh child.
async fn round_trips<R: Runtime>(way: Way, trips: usize) -> Result<Vec<Duration>, String> {
    let request = request();
    let mut times = Vec::with_capacity(trips);
    let transport =
        Transport::<R>::spawn(&child(), Config::default()).map_err(|e| format!("spawn: {e}"))?;
    match way {
        Way::Direct => {
            let mut transport = transport;
            for n in 0..WARM_UP + trips {
                let start = Instant::now();
                transport
                    .send(request.as_str())
                    .await
                    .map_err(|e| format!("send: {e}"))?;
                match transport.recv().await {
                    Some(Received::Message(_)) => {}
                    other => return Err(format!("recv: {other:?}")),
                }
                if n >= WARM_UP {
                    times.push(start.elapsed());
                }
            }
            transport
                .shutdown()
                .await
                .map_err(|e| format!("shutdown: {e}"))?;
        }
        Way::Share => {
            let server = SharedServer::from_transport(
                transport,
                childwire_core::DEFAULT_MAX_MESSAGE_SIZE,
                ShareConfig::default(),
            )
            .map_err(|e| format!("share: {e}"))?;
            let client = server.connect().map_err(|e| format!("connect: {e}"))?;
            for n in 0..WARM_UP + trips {
                let start = Instant::now();
                client
                    .send(request.as_str())
                    .await
                    .map_err(|e| format!("send: {e}"))?;
                client.recv().await.ok_or("recv: the share ended")?;
                if n >= WARM_UP {
                    times.push(start.elapsed());
                }
            }
            drop(client);
            server.stopped().await;
        }
    }
    Ok(times)
}

fn on(name: &str, way: Way, trips: usize) -> Result<Vec<Duration>, String> {
    match name {
        "tokio" => tokio::runtime::Builder::new_multi_thread()
            .enable_all()
            .build()
            .map_err(|e| e.to_string())?
            .block_on(round_trips::<childwire_tokio::Tokio>(way, trips)),
        "smol" => smol::block_on(round_trips::<childwire_smol::Smol>(way, trips)),
        _ => async_std::task::block_on(round_trips::<childwire_async_std::AsyncStd>(way, trips)),
    }
}

/// What one flood run saw.
struct Flood {
    elapsed: Duration,
    stalled_max_queued: usize,
    stalled_reason: Option<Disconnect>,
    rss_growth_kib: u64,
}

/// `count` notifications to every client, read by one; with `stalled`, a
/// second client that joined before and never reads.
async fn flood<R: Runtime>(count: u64, stalled: bool) -> Result<Flood, String> {
    let mut config = ShareConfig::default();
    config.client_queue_bytes = BOUND;
    let server = SharedServer::<R>::spawn(&child(), Config::default(), config)
        .map_err(|e| format!("spawn: {e}"))?;
    let reader = server.connect().map_err(|e| format!("connect: {e}"))?;
    let idle = if stalled {
        let idle = server.connect().map_err(|e| format!("connect: {e}"))?;
        // Past its read grace: it counts as a client that stopped reading.
        let grace = ShareConfig::default().read_grace + Duration::from_millis(100);
        let rt = R::current().map_err(|e| e.to_string())?;
        let mut timer = rt.timer(rt.now() + grace);
        std::future::poll_fn(|cx| timer.as_mut().poll(cx)).await;
        Some(idle)
    } else {
        None
    };
    let rss_before = childwire_bench::proc_status_kib(None, "VmHWM").unwrap_or(0);
    let start = Instant::now();
    reader
        .send(format!(
            r#"{{"jsonrpc":"2.0","id":1,"method":"flood","params":{count}}}"#
        ))
        .await
        .map_err(|e| format!("send: {e}"))?;
    let mut notes = 0u64;
    let mut stalled_max_queued = 0;
    loop {
        let message = reader.recv().await.ok_or("the reader was cut off")?;
        if message.starts_with(br#"{"jsonrpc":"2.0","method""#) {
            notes += 1;
            if notes % 1024 == 0 {
                if let Some(idle) = &idle {
                    stalled_max_queued = stalled_max_queued.max(idle.queued());
                }
            }
        } else {
            break;
        }
    }
    let elapsed = start.elapsed();
    if notes != count {
        return Err(format!("the reader got {notes} of {count} notifications"));
    }
    let rss_after = childwire_bench::proc_status_kib(None, "VmHWM").unwrap_or(0);
    let stalled_reason = idle.as_ref().and_then(|idle| idle.disconnected());
    drop((reader, idle));
    server.stopped().await;
    Ok(Flood {
        elapsed,
        stalled_max_queued,
        stalled_reason,
        rss_growth_kib: rss_after.saturating_sub(rss_before),
    })
}

fn flood_on(name: &str, count: u64, stalled: bool) -> Result<Flood, String> {
    match name {
        "tokio" => tokio::runtime::Builder::new_multi_thread()
            .enable_all()
            .build()
            .map_err(|e| e.to_string())?
            .block_on(flood::<childwire_tokio::Tokio>(count, stalled)),
        "smol" => smol::block_on(flood::<childwire_smol::Smol>(count, stalled)),
        _ => async_std::task::block_on(flood::<childwire_async_std::AsyncStd>(count, stalled)),
    }
}

fn bench(args: Args) -> Result<ExitCode, String> {
    let (trips, blocks, count) = if args.quick {
        (1_000, 2, 50_000)
    } else {
        (5_000, 5, 200_000)
    };
    let runtimes = ["tokio", "smol", "async-std"];
    eprintln!(
        "share: {trips} round trips of 200 B per contender through `bench-child answer` in {blocks} \
         interleaved blocks; floods of {count} notifications{}",
        e2e::quick_note(&args)
    );

    let mut table = Table::new([
        "round trip, caller in block_on",
        "p50 us",
        "p99 us",
        "p50 vs direct",
        "p99 vs direct",
    ]);
    for runtime in runtimes {
        let mut all = [Vec::new(), Vec::new()];
        for _ in 0..blocks {
            for (i, way) in [Way::Direct, Way::Share].into_iter().enumerate() {
                all[i].extend(on(runtime, way, trips / blocks)?);
            }
        }
        for times in &mut all {
            times.sort();
        }
        let p = |i: usize, q: f64| e2e::percentile(&all[i], q);
        for (i, way) in [Way::Direct, Way::Share].into_iter().enumerate() {
            let ratio = |q: f64| p(i, q).as_secs_f64() / p(0, q).as_secs_f64().max(1e-12);
            table.row([
                format!("{runtime}: {}", way.name()),
                e2e::us(p(i, 50.0)),
                e2e::us(p(i, 99.0)),
                format!("{:.2}x", ratio(50.0)),
                format!("{:.2}x", ratio(99.0)),
            ]);
        }
    }
    print!("{}", table.render());

    let mut floods = Table::new([
        "flood, one reader",
        "alone: msgs/s",
        "with a stalled client: msgs/s",
        "ratio",
        "stalled client's queue, max sampled",
        "bound",
        "stalled client",
        "peak RSS growth, stalled run",
    ]);
    for runtime in runtimes {
        let alone = flood_on(runtime, count, false)?;
        let with = flood_on(runtime, count, true)?;
        let rate = |flood: &Flood| count as f64 / flood.elapsed.as_secs_f64().max(1e-9);
        floods.row([
            runtime.to_string(),
            format!("{:.0}", rate(&alone)),
            format!("{:.0}", rate(&with)),
            format!("{:.2}x", rate(&with) / rate(&alone)),
            format!("{} KiB", with.stalled_max_queued / 1024),
            format!("{} KiB", BOUND / 1024),
            match &with.stalled_reason {
                Some(reason) => format!("disconnected: {reason}"),
                None => "still connected".to_string(),
            },
            format!("{} KiB", with.rss_growth_kib),
        ]);
    }
    println!();
    print!("{}", floods.render());
    Ok(ExitCode::SUCCESS)
}
