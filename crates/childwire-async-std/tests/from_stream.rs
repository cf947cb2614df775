//! `from_stream`: one socket, as two clones of it, carries messages both ways, and
//! dropping one side ends the other side's stream (async-std's sockets do not
//! half-close on `poll_close`).

use async_std::net::{TcpListener, TcpStream};
use childwire_async_std::{ChannelConfig, Received, Transport};

async fn text(t: &mut Transport) -> String {
    match t.recv().await {
        Some(Received::Message(m)) => String::from_utf8(m.to_vec()).expect("UTF-8"),
        other => panic!("expected a message, got {other:?}"),
    }
}

#[test]
fn a_socket_carries_messages_both_ways_and_dropping_one_side_ends_the_other() {
    bounded(|| {
        async_std::task::block_on(async {
            let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
            let client = TcpStream::connect(listener.local_addr().expect("addr"))
                .await
                .expect("connect");
            let (socket, _) = listener.accept().await.expect("accept");
            let config = ChannelConfig::default();
            let mut client = childwire_async_std::from_stream(client, &config).expect("client");
            let mut server = childwire_async_std::from_stream(socket, &config).expect("server");

            client.send("ping").await.expect("send");
            assert_eq!(text(&mut server).await, "ping");
            server.send("pong").await.expect("reply");
            assert_eq!(text(&mut client).await, "pong");

            server.send("bye").await.expect("send before the end");
            assert_eq!(text(&mut client).await, "bye");
            drop(client);
            assert!(server.recv().await.is_none(), "the server reads EOF");
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
