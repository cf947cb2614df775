//! `stderr-host RUNTIME show|capture PROGRAM ARGS...`: a host that spawns PROGRAM through
//! childwire with the default config, its stderr left at the default mode (`show`) or set to
//! `StderrMode::Capture` (`capture`), receives until the exit report, and prints the report on
//! stdout. The suite reads the host's own stderr: what the user of such a host would see.
//! RUNTIME is `tokio`, `smol` or `async-std`.

use childwire_async::{Command, Config, Received, Runtime, StderrMode, Transport};

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let [runtime, mode, program, rest @ ..] = args.as_slice() else {
        eprintln!("usage: stderr-host tokio|smol|async-std show|capture PROGRAM ARGS...");
        std::process::exit(2);
    };
    let mut command = Command::new(program);
    command.args(rest);
    match mode.as_str() {
        "show" => {}
        "capture" => {
            command.stderr(StderrMode::Capture);
        }
        other => panic!("unknown mode {other:?}"),
    }
    let report = match runtime.as_str() {
        "tokio" => tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .expect("a Tokio runtime")
            .block_on(host::<childwire_tokio::Tokio>(&command)),
        "smol" => smol::block_on(host::<childwire_smol::Smol>(&command)),
        "async-std" => async_std::task::block_on(host::<childwire_async_std::AsyncStd>(&command)),
        other => panic!("unknown runtime {other:?}"),
    };
    println!("{report}");
}

/// Receives until the exit report; its text.
async fn host<R: Runtime>(command: &Command) -> String {
    let mut server = Transport::<R>::spawn(command, Config::default()).expect("spawn");
    while let Some(item) = server.recv().await {
        if let Received::Exited(report) = item {
            return report.to_string();
        }
    }
    panic!("the stream ended without an exit report");
}
