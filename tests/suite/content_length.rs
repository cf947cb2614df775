//! Child stdout → caller with `Content-Length` framing: a lying peer costs one frame (C35).
//!
//! `misbehave content-length-lie KIND` tells one lie, then writes 20 good frames and exits; every
//! good frame must arrive, with at most one notice for the lie.

use childwire_core::ContentLength;

use super::rt::{self, Received};
use super::support::*;

/// The child's 20 good frames' bodies.
fn good_bodies() -> Vec<String> {
    (0..20)
        .map(|n| format!("{{\"jsonrpc\":\"2.0\",\"method\":\"n\",\"params\":{n}}}"))
        .collect()
}

/// Spawns `misbehave content-length-lie KIND` with `Content-Length` framing and receives
/// everything up to its exit report: the messages, and the notices as `(reason, head)`.
async fn receive_all(kind: &str) -> (Vec<String>, Vec<(childwire_core::MalformedReason, Vec<u8>)>) {
    let cmd = misbehave(&["content-length-lie", kind]);
    let mut t = rt::Transport::spawn_with(ContentLength, &cmd, config())
        .unwrap_or_else(|err| panic!("spawn failed: {err}"));
    let pid = t.id().expect("a running child has a pid");
    let mut messages = Vec::new();
    let mut notices = Vec::new();
    loop {
        let item = within(STEP, "recv", t.recv())
            .await
            .expect("the stream ended without an exit report");
        match item {
            Received::Message(m) => {
                messages.push(String::from_utf8(m.bytes().to_vec()).expect("UTF-8"));
            }
            Received::Malformed(m) => notices.push((m.reason, m.head.to_vec())),
            Received::Exited(report) => {
                assert!(report.exit.success(), "{report}");
                assert_eq!(report.counters.malformed, notices.len() as u64, "{report}");
                break;
            }
            other => panic!("unexpected item: {other:?}"),
        }
    }
    assert!(
        within(STEP, "recv after the report", t.recv())
            .await
            .is_none(),
        "the report is last"
    );
    assert_reaped(pid).await;
    (messages, notices)
}

#[test]
fn c35_a_header_claiming_fewer_bytes_than_its_body_costs_one_notice_and_20_frames_arrive() {
    run(async {
        let (messages, notices) = receive_all("short").await;
        // The lie's 5 claimed bytes are its message: nothing tells them from one.
        let mut expected = vec!["{\"jso".to_string()];
        expected.extend(good_bodies());
        assert_eq!(messages, expected);
        assert_eq!(
            notices,
            [(
                childwire_core::MalformedReason::InvalidHeader,
                b"nrpc\":\"2.0\",\"method\":\"lie\"}".to_vec()
            )]
        );
    });
}

#[test]
fn c35_an_over_long_header_block_costs_its_own_frame_only() {
    run(async {
        let (messages, notices) = receive_all("over-long").await;
        assert_eq!(messages, good_bodies());
        assert_eq!(notices.len(), 1, "{notices:?}");
        assert_eq!(notices[0].0, childwire_core::MalformedReason::InvalidHeader);
        assert!(
            notices[0]
                .1
                .starts_with(b"Content-Length: 38\r\nX-Padding: ppp")
        );
    });
}

#[test]
fn c35_headers_ended_by_lf_alone_are_read_frame_by_frame() {
    run(async {
        let (messages, notices) = receive_all("lf-only").await;
        assert_eq!(messages, good_bodies());
        assert_eq!(notices, []);
    });
}
