//! The requests a server never answered are listed in the report the exit handle gives (C37),
//! whichever way the transport learnt the end: closing it first, or reading the server's exit.
#![cfg(unix)]

use std::time::Duration;

use bytes::Bytes;
use childwire::Exit;
use childwire_rmcp::{ChildwireTransport, Command, Config, ExitReport};
use rmcp::RoleClient;
use rmcp::service::TxJsonRpcMessage;
use rmcp::transport::Transport;

/// Bound for one step that takes milliseconds when things work.
const STEP: Duration = Duration::from_secs(20);

fn request(id: u32) -> TxJsonRpcMessage<RoleClient> {
    serde_json::from_str(&format!(r#"{{"jsonrpc":"2.0","id":{id},"method":"ping"}}"#))
        .expect("a ping request")
}

fn spawn(script: &str) -> ChildwireTransport<RoleClient> {
    let mut command = Command::new("sh");
    command.args(["-c", script]);
    ChildwireTransport::spawn(&command, Config::default()).expect("spawn")
}

async fn report(exit: &childwire_rmcp::ExitHandle) -> ExitReport {
    tokio::time::timeout(STEP, exit.wait())
        .await
        .expect("the exit handle answers")
        .expect("the report is known")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn c37_closing_the_transport_lists_the_requests_still_waiting_in_the_report() {
    // Reads every request, answers none, exits at stdin's EOF.
    let mut transport = spawn("cat >/dev/null");
    let exit = transport.exit_handle();
    for id in [1, 2] {
        tokio::time::timeout(STEP, transport.send(request(id)))
            .await
            .expect("send in time")
            .expect("send");
    }
    tokio::time::timeout(STEP, transport.close())
        .await
        .expect("close in time")
        .expect("close");
    let report = report(&exit).await;
    assert_eq!(report.exit, Exit::Code(0), "{report}");
    assert_eq!(
        report.unanswered_ids,
        [Bytes::from_static(b"1"), Bytes::from_static(b"2")],
        "{report}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn c37_a_server_that_exits_leaves_its_unanswered_request_in_the_handles_report() {
    let mut transport = spawn("read line; echo cannot open database >&2; exit 3");
    let exit = transport.exit_handle();
    tokio::time::timeout(STEP, transport.send(request(7)))
        .await
        .expect("send in time")
        .expect("send");
    // The request's error response, made up when the server's end was read.
    let answer = tokio::time::timeout(STEP, transport.receive())
        .await
        .expect("receive in time")
        .expect("the error response");
    let answer = serde_json::to_string(&answer).expect("JSON");
    assert!(answer.contains("exited with code 3"), "{answer}");
    tokio::time::timeout(STEP, transport.close())
        .await
        .expect("close in time")
        .expect("close");
    let report = report(&exit).await;
    assert_eq!(report.exit, Exit::Code(3), "{report}");
    assert_eq!(
        report.unanswered_ids,
        [Bytes::from_static(b"7")],
        "{report}"
    );
}
