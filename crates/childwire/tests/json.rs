//! `send_json` / `recv_json` (feature `serde`) through a real child.

use childwire::tokio::{Command, Config, Transport};
use childwire::{RecvJsonError, SendJsonError};
use serde_json::{Value, json};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn typed_json_goes_out_as_one_line_and_comes_back_deserialized() {
    let mut cat = Transport::spawn(&Command::new("cat"), Config::default()).expect("spawn cat");
    // A string holding a newline: compact JSON escapes it, so it stays one line.
    let request = json!({"jsonrpc": "2.0", "id": 1, "params": {"text": "two\nlines"}});
    cat.send_json(&request).await.expect("send_json");
    let echoed: Value = cat.recv_json().await.expect("an item").expect("JSON");
    assert_eq!(echoed, request);

    // Not JSON of the expected type: an error that keeps the bytes, and the
    // stream goes on.
    // A line shaped like a message is one: whether its JSON is valid is the
    // JSON layer's business (a line not shaped like one, a banner, would go
    // with the child's stderr by default and never come here).
    cat.send("{not json}").await.expect("send");
    match cat.recv_json::<Value>().await {
        Some(Err(RecvJsonError::Parse { message, .. })) => {
            assert_eq!(&message[..], b"{not json}");
        }
        other => panic!("expected a parse error, got {other:?}"),
    }
    // A value serde cannot serialize (a map with non-string keys).
    let bad: std::collections::HashMap<Vec<u8>, u8> = [(vec![1], 1)].into();
    assert!(matches!(
        cat.send_json(&bad).await,
        Err(SendJsonError::Serialize(_))
    ));

    let report = cat.shutdown().await.expect("shutdown");
    assert!(report.success(), "{report}");
    assert!(matches!(
        cat.recv_json::<Value>().await,
        Some(Err(RecvJsonError::Exited(_)))
    ));
    assert!(cat.recv_json::<Value>().await.is_none());
}
