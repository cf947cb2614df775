//! `pdeath-host RUNTIME MISBEHAVE`: a host that spawns `MISBEHAVE ignore-eof` through childwire
//! with parent-death safety on, from a worker thread that then exits, and waits to be killed.
//!
//! It proves the child outlives the worker thread (a message round trip after the thread is gone
//! from `/proc/self/task`), prints `{"child":PID}`, and blocks forever: the suite then SIGKILLs it
//! and checks that the child dies with it. The child ignores stdin's EOF, so only the parent-death
//! signal can end it. RUNTIME is `tokio`, `smol` or `async-std`.
//!
//! On Windows there is no parent-death signal and no `/proc`: the child's job object ends it when
//! the host dies and its handle closes, and the worker thread's exit is its join.

use std::future::Future;
use std::io::Write;
use std::thread;
use std::time::Duration;

use childwire_async::{Command, Config, Received, Runtime, Transport};

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let [runtime, misbehave] = args.as_slice() else {
        eprintln!("usage: pdeath-host tokio|smol|async-std MISBEHAVE");
        std::process::exit(2);
    };
    let mut command = Command::new(misbehave);
    command.arg("ignore-eof").kill_on_parent_death(true);
    match runtime.as_str() {
        "tokio" => {
            let rt = tokio::runtime::Builder::new_multi_thread()
                .worker_threads(1)
                .enable_all()
                .build()
                .expect("a Tokio runtime");
            let handle = rt.handle().clone();
            host::<childwire_tokio::Tokio>(
                &command,
                move |spawn| {
                    let _entered = handle.enter();
                    spawn()
                },
                |fut| rt.block_on(fut),
            );
        }
        "smol" => {
            host::<childwire_smol::Smol>(&command, |spawn| spawn(), |fut| smol::block_on(fut))
        }
        "async-std" => host::<childwire_async_std::AsyncStd>(
            &command,
            |spawn| spawn(),
            |fut| async_std::task::block_on(fut),
        ),
        other => panic!("unknown runtime {other:?}"),
    }
}

type Spawned<R> = (Transport<R>, Option<String>);

/// This thread's ID as `/proc` names it (Linux); elsewhere `None`.
fn own_tid() -> Option<String> {
    if !cfg!(target_os = "linux") {
        return None;
    }
    let me = std::fs::read_link("/proc/thread-self").expect("/proc/thread-self");
    Some(
        me.file_name()
            .expect("a tid")
            .to_string_lossy()
            .into_owned(),
    )
}

fn host<R: Runtime>(
    command: &Command,
    in_worker: impl FnOnce(Box<dyn FnOnce() -> Spawned<R> + Send>) -> Spawned<R> + Send + 'static,
    block_on: impl Fn(std::pin::Pin<Box<dyn Future<Output = ()> + '_>>),
) -> ! {
    let command = command.clone();
    // The worker thread spawns the child, then exits.
    let worker = thread::spawn(move || {
        in_worker(Box::new(move || {
            let transport = Transport::<R>::spawn(&command, Config::default()).expect("spawn");
            (transport, own_tid())
        }))
    });
    let (mut transport, tid) = worker.join().expect("the worker thread");
    // The thread is fully gone (its exit, and any parent-death signal, is done) once its task
    // entry has left /proc.
    if let Some(tid) = tid {
        let task = format!("/proc/self/task/{tid}");
        assert!(
            childwire_conformance::wait_until(Duration::from_secs(20), || {
                !std::path::Path::new(&task).exists()
            }),
            "the worker thread did not exit"
        );
    }
    let pid = transport.id().expect("a pid");
    block_on(Box::pin(async {
        transport.send(r#"{"ping":1}"#).await.expect("send");
        match transport.recv().await {
            Some(Received::Message(m)) => assert_eq!(&m.bytes()[..], br#"{"ping":1}"#),
            other => panic!("the child died with the worker thread: {other:?}"),
        }
    }));
    let mut out = std::io::stdout().lock();
    writeln!(out, "{{\"child\":{pid}}}").expect("stdout");
    out.flush().expect("stdout");
    drop(out);
    // Keep the transport (and the runtime) alive until we are killed.
    let _keep = transport;
    loop {
        thread::park();
    }
}
