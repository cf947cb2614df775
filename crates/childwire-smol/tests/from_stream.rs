//! `from_stream`: one socket, as two clones of it, carries messages both ways, and
//! closing one side's write direction ends the other side's stream only.

use childwire_smol::{ChannelConfig, Received, Transport};
use smol::net::{TcpListener, TcpStream};

async fn text(t: &mut Transport) -> String {
    match t.recv().await {
        Some(Received::Message(m)) => String::from_utf8(m.to_vec()).expect("UTF-8"),
        other => panic!("expected a message, got {other:?}"),
    }
}

#[test]
fn a_socket_carries_messages_both_ways_and_a_half_close_ends_one_direction() {
    bounded(|| {
        smol::block_on(async {
            let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
            let client = TcpStream::connect(listener.local_addr().expect("addr"))
                .await
                .expect("connect");
            let (socket, _) = listener.accept().await.expect("accept");
            let config = ChannelConfig::default();
            let mut client = childwire_smol::from_stream(client, &config).expect("client");
            let mut server = childwire_smol::from_stream(socket, &config).expect("server");

            client.send("ping").await.expect("send");
            assert_eq!(text(&mut server).await, "ping");
            server.send("pong").await.expect("reply");
            assert_eq!(text(&mut client).await, "pong");

            client.close().await.expect("close the client's write side");
            assert!(server.recv().await.is_none(), "the server reads EOF");
            server
                .send("bye")
                .await
                .expect("the other direction is open");
            assert_eq!(text(&mut client).await, "bye");
        })
    });
}

/// Runs `test` on a thread of its own: a hang fails after 20 s instead of
/// stalling the run, and a panic fails the test.
fn bounded(test: impl FnOnce() + Send + 'static) {
    let (done, finished) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        test();
        let _ = done.send(());
    });
    finished
        .recv_timeout(std::time::Duration::from_secs(20))
        .expect("the test finished (no hang, no panic)");
}
