//! One server shared by many clients (`childwire-share`), on every runtime,
//! against misbehave's `mcp` scenario (a small MCP server with slow,
//! flooding and crashing tools that reports what it was told):
//!
//! - 5 clients x 100 concurrent requests, all with the same ids: every
//!   answer reaches its own client with its own id; the server is
//!   initialized once; when the last client leaves, the server exits by the
//!   MCP shutdown (its stdin closed: exit code 0);
//! - a client that leaves mid-request has its requests cancelled at the
//!   server, and the others go on;
//! - a server crash answers every client's requests in flight with an
//!   error, and the server restarts once, re-initialized by the share;
//! - a client that stops reading while the server floods is disconnected
//!   with its reason, its queue never past the bound, while the other gets
//!   every message.

use std::future::{Future, poll_fn};
use std::pin::pin;
use std::task::Poll;
use std::time::{Duration, Instant};

use childwire_async::{Command, Config, Exit, Runtime, Supervision};
use childwire_share::{Client, Disconnect, ShareConfig, SharedServer};
use futures_util::future::join_all;
use serde_json::{Value, json};

/// Bound for a whole case; only a failure waits this long.
const LIMIT: Duration = Duration::from_secs(60);

async fn within<R: Runtime, F: Future>(what: &str, future: F) -> F::Output {
    let runtime = R::current().expect("inside the runtime");
    let deadline = Instant::now() + LIMIT;
    let mut timer = runtime.timer(deadline);
    let mut future = pin!(future);
    poll_fn(|cx| {
        if let Poll::Ready(output) = future.as_mut().poll(cx) {
            return Poll::Ready(output);
        }
        if runtime.now() >= deadline || timer.as_mut().poll(cx).is_ready() {
            panic!("{what} did not end within {LIMIT:?}");
        }
        Poll::Pending
    })
    .await
}

/// Waits `duration` on runtime `R` (between retries of a request that
/// waits for an event, never to let things settle).
async fn pause<R: Runtime>(duration: Duration) {
    let runtime = R::current().expect("inside the runtime");
    let mut timer = runtime.timer(runtime.now() + duration);
    poll_fn(|cx| timer.as_mut().poll(cx)).await;
}

fn on_every_runtime<F, Fut>(case: F)
where
    F: Fn(&'static str) -> Fut,
    Fut: Future<Output = ()>,
{
    tokio::runtime::Runtime::new()
        .unwrap()
        .block_on(tokio_case(&case));
    smol::block_on(smol_case(&case));
    async_std::task::block_on(async_std_case(&case));
}

async fn tokio_case<F: Fn(&'static str) -> Fut, Fut: Future<Output = ()>>(case: &F) {
    case("tokio").await;
}
async fn smol_case<F: Fn(&'static str) -> Fut, Fut: Future<Output = ()>>(case: &F) {
    case("smol").await;
}
async fn async_std_case<F: Fn(&'static str) -> Fut, Fut: Future<Output = ()>>(case: &F) {
    case("async-std").await;
}

fn server_command() -> Command {
    let mut command = Command::new(env!("CARGO_BIN_EXE_misbehave"));
    command.arg("mcp");
    command
}

fn call(id: Value, name: &str, arguments: Value) -> String {
    json!({"jsonrpc": "2.0", "id": id, "method": "tools/call",
        "params": {"name": name, "arguments": arguments}})
    .to_string()
}

async fn recv_json<R: Runtime>(client: &Client<R>) -> Value {
    let message = client.recv().await.expect("a message");
    serde_json::from_slice(&message).expect("JSON")
}

/// The next response (notifications skipped).
async fn response<R: Runtime>(client: &mut Client<R>) -> Value {
    loop {
        let message = recv_json(client).await;
        if message.get("method").is_none() {
            return message;
        }
    }
}

/// `initialize` and `notifications/initialized`, as a host would.
async fn initialize<R: Runtime>(client: &mut Client<R>, name: &str) -> Value {
    client
        .send(
            json!({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
                "protocolVersion": "2025-06-18", "capabilities": {},
                "clientInfo": {"name": name, "version": "1"}}})
            .to_string(),
        )
        .await
        .expect("sent");
    let answer = response(client).await;
    assert_eq!(answer["id"], json!(0), "{answer}");
    client
        .send(r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#)
        .await
        .expect("sent");
    answer
}

/// The server's `stats`, asked again (with a short pause) until `until`
/// holds or the case's deadline passes; other responses that arrive
/// meanwhile go to `others`.
async fn stats_until<R: Runtime>(
    client: &mut Client<R>,
    first_id: u64,
    others: &mut Vec<Value>,
    until: impl Fn(&Value) -> bool,
) -> Value {
    for id in first_id.. {
        client
            .send(call(json!(id), "stats", json!({})))
            .await
            .expect("sent");
        let answer = loop {
            let answer = response(client).await;
            if answer["id"] == json!(id) {
                break answer;
            }
            others.push(answer);
        };
        if let Some(stats) = answer.get("result") {
            if until(stats) {
                return stats.clone();
            }
        }
        pause::<R>(Duration::from_millis(10)).await;
    }
    unreachable!()
}

async fn five_by_a_hundred<R: Runtime>(runtime: &str) {
    let server =
        SharedServer::<R>::spawn(&server_command(), Config::default(), ShareConfig::default())
            .expect("spawned");
    let mut clients: Vec<Client<R>> = (0..5).map(|_| server.connect().expect("joined")).collect();
    within::<R, _>("5 x 100 requests", async {
        for (n, client) in clients.iter_mut().enumerate() {
            let answer = initialize(client, &format!("host-{n}")).await;
            assert_eq!(answer["result"]["protocolVersion"], "2025-06-18");
        }
        join_all(clients.iter_mut().enumerate().map(|(c, client)| async move {
            // The same ids in every client; answers come back out of order.
            for id in 1..=100u64 {
                let ms = (id * 7 + c as u64 * 3) % 20;
                client
                    .send(call(json!(id), "slow", json!({"ms": ms, "client": c, "n": id})))
                    .await
                    .expect("sent");
            }
            let mut seen = [false; 101];
            for _ in 0..100 {
                let answer = response(client).await;
                let id = answer["id"].as_u64().expect("a numeric id") as usize;
                assert!(!seen[id], "{runtime}: client {c} got {id} twice");
                seen[id] = true;
                assert_eq!(
                    answer["result"]["echo"],
                    json!({"ms": (id as u64 * 7 + c as u64 * 3) % 20, "client": c, "n": id}),
                    "{runtime}: client {c}'s request {id} got another's answer"
                );
            }
        }))
        .await;
        let stats = stats_until(&mut clients[0], 1000, &mut Vec::new(), |_| true).await;
        assert_eq!(stats["initialize"], json!(1), "{runtime}: one initialize");
        assert_eq!(stats["initialized"], json!(1), "{runtime}: one initialized");
        assert_eq!(server.in_flight(), 0);
        drop(clients);
        let report = server.stopped().await.expect("a child's report");
        assert_eq!(
            report.exit,
            Exit::Code(0),
            "{runtime}: the server exits on its stdin's EOF: {report}"
        );
        assert!(!report.unexpected(), "{runtime}: {report}");
    })
    .await;
}

#[test]
fn five_clients_a_hundred_requests_each_every_answer_to_its_own_client() {
    on_every_runtime(|runtime| async move {
        match runtime {
            "tokio" => five_by_a_hundred::<childwire_tokio::Tokio>(runtime).await,
            "smol" => five_by_a_hundred::<childwire_smol::Smol>(runtime).await,
            _ => five_by_a_hundred::<childwire_async_std::AsyncStd>(runtime).await,
        }
    });
}

async fn leaves_mid_request<R: Runtime>(runtime: &str) {
    let server =
        SharedServer::<R>::spawn(&server_command(), Config::default(), ShareConfig::default())
            .expect("spawned");
    let mut a = server.connect().expect("joined");
    let mut b = server.connect().expect("joined");
    within::<R, _>("a client leaving", async {
        initialize(&mut a, "a").await;
        initialize(&mut b, "b").await;
        for id in 1..=3 {
            a.send(call(json!(id), "slow", json!({"ms": 60_000})))
                .await
                .expect("sent");
        }
        b.send(call(json!(1), "slow", json!({"ms": 300, "b": true})))
            .await
            .expect("sent");
        // The server has a's three requests before a goes: it answers b's
        // stats after reading them.
        let mut others = Vec::new();
        let stats = stats_until(&mut b, 100, &mut others, |_| true).await;
        assert_eq!(stats["cancelled"], json!([]));
        drop(a);
        let stats = stats_until(&mut b, 200, &mut others, |stats| {
            stats["cancelled"].as_array().is_some_and(|c| c.len() == 3)
        })
        .await;
        let cancelled: Vec<u64> = stats["cancelled"]
            .as_array()
            .unwrap()
            .iter()
            .map(|id| id.as_u64().expect("the share's numeric ids"))
            .collect();
        assert!(
            cancelled[0] != cancelled[1] && cancelled[1] != cancelled[2],
            "{runtime}: {cancelled:?}"
        );
        // b goes on: its slow call is answered, and new ones too.
        let answer = match others.pop() {
            Some(answer) => answer,
            None => response(&mut b).await,
        };
        assert!(others.is_empty(), "{runtime}: {others:?}");
        assert_eq!(answer["id"], json!(1));
        assert_eq!(answer["result"]["echo"]["b"], json!(true));
        b.send(call(json!(2), "echo", json!({"still": "here"})))
            .await
            .expect("sent");
        assert_eq!(response(&mut b).await["result"]["echo"]["still"], "here");
        assert_eq!(server.counters().cancelled_on_leave, 3);
    })
    .await;
}

#[test]
fn a_client_that_leaves_mid_request_has_its_requests_cancelled_and_the_others_go_on() {
    on_every_runtime(|runtime| async move {
        match runtime {
            "tokio" => leaves_mid_request::<childwire_tokio::Tokio>(runtime).await,
            "smol" => leaves_mid_request::<childwire_smol::Smol>(runtime).await,
            _ => leaves_mid_request::<childwire_async_std::AsyncStd>(runtime).await,
        }
    });
}

async fn crash_and_restart<R: Runtime>(runtime: &str) {
    let mut supervision = Supervision::default();
    supervision.restart.initial_backoff = Duration::from_millis(10);
    let server = SharedServer::<R>::spawn_supervised(
        &server_command(),
        Config::default(),
        supervision,
        ShareConfig::default(),
    )
    .expect("spawned");
    let mut a = server.connect().expect("joined");
    let mut b = server.connect().expect("joined");
    within::<R, _>("a crash and a restart", async {
        initialize(&mut a, "a").await;
        initialize(&mut b, "b").await;
        let before = stats_until(&mut a, 100, &mut Vec::new(), |_| true).await;
        for id in 1..=2 {
            a.send(call(json!(id), "slow", json!({"ms": 60_000})))
                .await
                .expect("sent");
        }
        b.send(call(json!(7), "slow", json!({"ms": 60_000})))
            .await
            .expect("sent");
        b.send(call(json!(8), "crash", json!({"code": 3})))
            .await
            .expect("sent");
        // Every request in flight is answered with an error naming the exit.
        let mut failed = Vec::new();
        for (client, count) in [(&mut a, 2), (&mut b, 2)] {
            for _ in 0..count {
                let answer = response(client).await;
                assert_eq!(
                    answer["error"]["code"],
                    json!(-32000),
                    "{runtime}: {answer}"
                );
                let message = answer["error"]["message"].as_str().unwrap();
                assert!(
                    message.contains("exited with code 3"),
                    "{runtime}: {message}"
                );
                failed.push(answer["id"].clone());
            }
        }
        failed.sort_by_key(|id| id.as_u64());
        assert_eq!(failed, [json!(1), json!(2), json!(7), json!(8)]);
        // The new server answers once it is up, initialized by the share.
        let after = stats_until(&mut a, 200, &mut Vec::new(), |_| true).await;
        assert_ne!(after["pid"], before["pid"], "{runtime}: a new process");
        assert_eq!(
            after["initialize"],
            json!(1),
            "{runtime}: re-initialized once"
        );
        assert_eq!(after["initialized"], json!(1));
        assert_eq!(server.restarts(), 1, "{runtime}: one restart for all");
        b.send(call(json!(9), "echo", json!({"b": 2})))
            .await
            .expect("sent");
        assert_eq!(response(&mut b).await["result"]["echo"]["b"], json!(2));
        assert_eq!(server.restarts(), 1);
    })
    .await;
}

#[test]
fn a_server_crash_answers_every_request_in_flight_and_restarts_once() {
    on_every_runtime(|runtime| async move {
        match runtime {
            "tokio" => crash_and_restart::<childwire_tokio::Tokio>(runtime).await,
            "smol" => crash_and_restart::<childwire_smol::Smol>(runtime).await,
            _ => crash_and_restart::<childwire_async_std::AsyncStd>(runtime).await,
        }
    });
}

async fn slow_reader<R: Runtime>(runtime: &str) {
    const BOUND: usize = 64 * 1024;
    let mut config = ShareConfig::default();
    config.client_queue_bytes = BOUND;
    let server =
        SharedServer::<R>::spawn(&server_command(), Config::default(), config).expect("spawned");
    let mut reader = server.connect().expect("joined");
    let mut stalled = server.connect().expect("joined");
    within::<R, _>("a flood past a stalled client", async {
        initialize(&mut reader, "reader").await;
        initialize(&mut stalled, "stalled").await;
        // 2000 notifications of 1000 bytes to every client: 2 MB, 30 times
        // the stalled client's bound.
        reader
            .send(call(
                json!(1),
                "flood",
                json!({"count": 2000, "size": 1000}),
            ))
            .await
            .expect("sent");
        let mut notes = 0;
        loop {
            let Some(message) = reader.recv().await else {
                panic!(
                    "{runtime}: the reader's stream ended after {notes}: {:?}",
                    reader.disconnected()
                );
            };
            let message: Value = serde_json::from_slice(&message).expect("JSON");
            if message.get("method").is_some() {
                assert_eq!(message["params"]["n"], json!(notes), "{runtime}: in order");
                notes += 1;
                assert!(
                    stalled.queued() <= BOUND + 2048,
                    "{runtime}: over the bound"
                );
            } else {
                assert_eq!(message["result"]["flooded"], json!(2000));
                break;
            }
        }
        assert_eq!(notes, 2000, "{runtime}: the reader got every one");
        // The stalled client: what was queued, then the end and why.
        let mut queued = 0;
        while stalled.recv().await.is_some() {
            queued += 1;
        }
        assert!(queued < 100, "{runtime}: {queued}");
        let Some(Disconnect::StoppedReading { bound, .. }) = stalled.disconnected() else {
            panic!("{runtime}: the stalled client was not disconnected");
        };
        assert_eq!(bound, BOUND);
        assert!(
            stalled
                .send(call(json!(2), "echo", json!({})))
                .await
                .is_err()
        );
        assert_eq!(server.counters().disconnected, 1);
    })
    .await;
}

#[test]
fn a_client_that_stops_reading_is_disconnected_and_the_other_gets_everything() {
    on_every_runtime(|runtime| async move {
        match runtime {
            "tokio" => slow_reader::<childwire_tokio::Tokio>(runtime).await,
            "smol" => slow_reader::<childwire_smol::Smol>(runtime).await,
            _ => slow_reader::<childwire_async_std::AsyncStd>(runtime).await,
        }
    });
}

#[cfg(target_os = "linux")]
async fn dropped_unused<R: Runtime>(runtime: &str) {
    let server =
        SharedServer::<R>::spawn(&server_command(), Config::default(), ShareConfig::default())
            .expect("spawned");
    let pid = server.id().expect("a child");
    let exit = server.clone();
    within::<R, _>("an unused share's end", async {
        drop(server);
        // Another handle still there: the server stays.
        pause::<R>(Duration::from_millis(50)).await;
        assert!(process_runs(pid), "{runtime}: the server stopped early");
        drop(exit);
        while process_runs(pid) {
            pause::<R>(Duration::from_millis(10)).await;
        }
    })
    .await;
}

/// Whether `pid` is a process that has not ended (a zombie has).
#[cfg(target_os = "linux")]
fn process_runs(pid: u32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat")).is_ok_and(|stat| {
        !stat
            .rsplit(')')
            .next()
            .unwrap_or("")
            .trim_start()
            .starts_with('Z')
    })
}

#[cfg(target_os = "linux")]
#[test]
fn a_share_no_one_can_join_any_more_stops_its_server() {
    on_every_runtime(|runtime| async move {
        match runtime {
            "tokio" => dropped_unused::<childwire_tokio::Tokio>(runtime).await,
            "smol" => dropped_unused::<childwire_smol::Smol>(runtime).await,
            _ => dropped_unused::<childwire_async_std::AsyncStd>(runtime).await,
        }
    });
}
