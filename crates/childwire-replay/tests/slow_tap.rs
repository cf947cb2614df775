//! A recorder whose writer blocks (a pipe nobody reads) does not hold up
//! the transport it taps, on every runtime: the host receives the whole
//! session while the writer is stuck, and the recording, once the writer
//! moves again, counts the records it had to drop.

use std::io::{self, Write};
use std::sync::mpsc;
use std::sync::{Arc, Condvar, Mutex};
use std::time::Duration;

use childwire::tap::Recorder;
use childwire::{ChannelConfig, Received, Runtime, Transport};
use childwire_replay::{Event, Limits, Recording, twin};

/// Messages the server sends at once: 12 MB of records, over the
/// recorder's 8 MiB queue.
const MESSAGES: usize = 12_000;

/// Bound for the session, checked from another thread: a tap that blocks
/// inside `recv` would stop any timer in the session's own task.
const LIMIT: Duration = Duration::from_secs(60);

/// A writer that blocks until the test opens its gate.
#[derive(Clone, Default)]
struct Gated {
    bytes: Arc<Mutex<Vec<u8>>>,
    open: Arc<(Mutex<bool>, Condvar)>,
}

impl Gated {
    fn open(&self) {
        *self.open.0.lock().unwrap() = true;
        self.open.1.notify_all();
    }
}

impl Write for Gated {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        let mut open = self.open.0.lock().unwrap();
        while !*open {
            open = self.open.1.wait(open).unwrap();
        }
        self.bytes.lock().unwrap().extend_from_slice(buf);
        Ok(buf.len())
    }

    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

/// A server that sends [`MESSAGES`] messages of 1 KB before anything is
/// asked, and exits when its stdin closes.
fn chatty_server() -> Recording {
    let padding = "x".repeat(1000);
    let mut events: Vec<Event> = (0..MESSAGES)
        .map(|n| {
            Event::FromChild(
                format!(r#"{{"jsonrpc":"2.0","method":"notifications/message","params":{{"n":{n},"data":"{padding}"}}}}"#)
                    .into_bytes(),
            )
        })
        .collect();
    events.push(Event::Exit(childwire_replay::RecordedExit::default()));
    Recording::from_events(events)
}

/// Receives everything the tapped server sends, then its exit: how many
/// messages came.
async fn session<R: Runtime>(recorder: Arc<Recorder<Gated>>) -> usize {
    let (stdout, stdin, _twin) = twin(chatty_server());
    let mut server = Transport::<R>::from_pipes(stdout, stdin, &ChannelConfig::default())
        .expect("inside the runtime")
        .with_tap(recorder);
    let mut messages = 0;
    while messages < MESSAGES {
        match server.recv().await {
            Some(Received::Message(_)) => messages += 1,
            other => panic!("after {messages} messages: {other:?}"),
        }
    }
    server.close().await.expect("closed");
    // A channel over pipes ends without an exit report.
    assert!(server.recv().await.is_none());
    messages
}

fn a_blocked_writer_does_not_stall_recv(runtime: &str, run: fn(Arc<Recorder<Gated>>) -> usize) {
    let gated = Gated::default();
    let recorder = Arc::new(Recorder::new(gated.clone()));
    let (done, finished) = mpsc::channel();
    let tapped = Arc::clone(&recorder);
    let host = std::thread::spawn(move || done.send(run(tapped)));
    let received = finished.recv_timeout(LIMIT);
    // Unstick the writer whatever happened, so that nothing hangs.
    gated.open();
    let received = received.unwrap_or_else(|_| {
        panic!("{runtime}: the session did not end within {LIMIT:?} with the writer blocked")
    });
    host.join().unwrap().unwrap();
    assert_eq!(received, MESSAGES, "{runtime}");

    let dropped = recorder.dropped();
    assert!(dropped > 0, "{runtime}: 12 MB did not fit in 8 MiB");
    recorder.flush().expect("written once the writer moves");
    let bytes = gated.bytes.lock().unwrap().clone();
    let recording = Recording::read(&bytes[..], &Limits::default()).expect("a recording");
    assert_eq!(
        recording.dropped(),
        dropped,
        "{runtime}: the recording says so"
    );
    let kept = recording.from_child().count() as u64;
    assert_eq!(kept + dropped, MESSAGES as u64, "{runtime}");
}

#[test]
fn a_blocked_writer_does_not_stall_recv_on_tokio() {
    a_blocked_writer_does_not_stall_recv("tokio", |recorder| {
        tokio::runtime::Runtime::new()
            .unwrap()
            .block_on(session::<childwire::tokio::Tokio>(recorder))
    });
}

#[test]
fn a_blocked_writer_does_not_stall_recv_on_smol() {
    a_blocked_writer_does_not_stall_recv("smol", |recorder| {
        smol::block_on(session::<childwire::smol::Smol>(recorder))
    });
}

#[test]
fn a_blocked_writer_does_not_stall_recv_on_async_std() {
    a_blocked_writer_does_not_stall_recv("async-std", |recorder| {
        async_std::task::block_on(session::<childwire::async_std::AsyncStd>(recorder))
    });
}
