//! `ledger-host RUNTIME LEDGER_DIR PROGRAM [ARGS...]`: a host that spawns `PROGRAM ARGS...`
//! through childwire (its own process group, the default), records it in the spawn ledger in
//! `LEDGER_DIR`, prints `{"child":PID}` and blocks until it is killed. The suite SIGKILLs it and
//! checks that a later host's `reap_leftovers` ends what it left. RUNTIME is `tokio`, `smol` or
//! `async-std`.

use std::io::Write;

use childwire_async::{Command, Config, Ledger, Runtime, Transport};

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let [runtime, ledger, program, rest @ ..] = args.as_slice() else {
        eprintln!("usage: ledger-host tokio|smol|async-std LEDGER_DIR PROGRAM [ARGS...]");
        std::process::exit(2);
    };
    let ledger = Ledger::open(ledger).expect("open the ledger");
    let mut command = Command::new(program);
    command.args(rest);
    match runtime.as_str() {
        "tokio" => {
            let rt = tokio::runtime::Builder::new_multi_thread()
                .worker_threads(1)
                .enable_all()
                .build()
                .expect("a Tokio runtime");
            let _entered = rt.enter();
            host::<childwire_tokio::Tokio>(&command, &ledger);
        }
        "smol" => host::<childwire_smol::Smol>(&command, &ledger),
        "async-std" => host::<childwire_async_std::AsyncStd>(&command, &ledger),
        other => panic!("unknown runtime {other:?}"),
    }
}

fn host<R: Runtime>(command: &Command, ledger: &Ledger) -> ! {
    let transport = Transport::<R>::spawn(command, Config::default()).expect("spawn");
    let pid = transport.id().expect("a pid");
    let entry = ledger
        .record_child(pid, command.get_process_group(), None)
        .expect("record the child");
    let mut out = std::io::stdout().lock();
    writeln!(out, "{{\"child\":{pid},\"entry\":{:?}}}", entry.path()).expect("stdout");
    out.flush().expect("stdout");
    drop(out);
    // Keep the transport alive until we are killed.
    let _keep = (transport, entry);
    loop {
        std::thread::park();
    }
}
