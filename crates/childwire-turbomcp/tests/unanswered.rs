//! The requests a server never answered are listed in the report the exit handle gives (C37),
//! whichever way the transport learnt the end: `disconnect` first, or `receive` reading the
//! server's exit.
#![cfg(unix)]

use std::time::Duration;

use bytes::Bytes;
use childwire_turbomcp::{ChildProcessConfig, ChildwireTransport, ExitReport, Transport};
use turbomcp_protocol::MessageId;
use turbomcp_transport::core::TransportMessage;

/// Bound for one step that takes milliseconds when things work.
const STEP: Duration = Duration::from_secs(20);

fn request(id: u32) -> TransportMessage {
    TransportMessage::new(
        MessageId::Number(i64::from(id)),
        Bytes::from(format!(r#"{{"jsonrpc":"2.0","id":{id},"method":"ping"}}"#)),
    )
}

async fn connected(script: &str) -> ChildwireTransport {
    let transport = ChildwireTransport::new(ChildProcessConfig {
        command: "sh".into(),
        args: vec!["-c".into(), script.into()],
        ..ChildProcessConfig::default()
    });
    tokio::time::timeout(STEP, transport.connect())
        .await
        .expect("connect in time")
        .expect("connect");
    transport
}

async fn report(transport: &ChildwireTransport) -> ExitReport {
    tokio::time::timeout(STEP, transport.exit_handle().wait())
        .await
        .expect("the exit handle answers")
        .expect("the report is known")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn c37_disconnecting_lists_the_requests_still_waiting_in_the_report() {
    // Reads every request, answers none, exits at stdin's EOF.
    let transport = connected("cat >/dev/null").await;
    for id in [1, 2] {
        tokio::time::timeout(STEP, transport.send(request(id)))
            .await
            .expect("send in time")
            .expect("send");
    }
    tokio::time::timeout(STEP, transport.disconnect())
        .await
        .expect("disconnect in time")
        .expect("disconnect");
    let report = report(&transport).await;
    assert!(report.success(), "{report}");
    assert_eq!(
        report.unanswered_ids,
        [Bytes::from_static(b"1"), Bytes::from_static(b"2")],
        "{report}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn c37_a_server_that_exits_leaves_its_unanswered_request_in_the_handles_report() {
    let transport = connected("read line; echo cannot open database >&2; exit 3").await;
    tokio::time::timeout(STEP, transport.send(request(7)))
        .await
        .expect("send in time")
        .expect("send");
    let answer = tokio::time::timeout(STEP, transport.receive())
        .await
        .expect("receive in time")
        .expect("the error response")
        .expect("a message");
    let answer = String::from_utf8_lossy(&answer.payload).into_owned();
    assert!(answer.contains("exited with code 3"), "{answer}");
    tokio::time::timeout(STEP, transport.disconnect())
        .await
        .expect("disconnect in time")
        .expect("disconnect");
    let report = report(&transport).await;
    assert_eq!(
        report.unanswered_ids,
        [Bytes::from_static(b"7")],
        "{report}"
    );
}
