//! `login-host RUNTIME PROGRAM [PRIME_MS]`: a host that spawns `PROGRAM` through childwire with
//! `EnvPolicy::LoginShell` (the login shell is `$SHELL`, as the suite sets it), sends it
//! `{"login":1}` and expects it back. With PRIME_MS, it first asks the login shell itself with
//! that timeout (`login_shell_env`). Prints one JSON-ish line per step:
//! `{"primed_ms":N,"ok":BOOL}` then `{"spawned_ms":N,"echo":true}` or
//! `{"spawned_ms":N,"error":"..."}`, and exits 0.

use std::io::Write;
use std::time::{Duration, Instant};

use childwire_async::{Command, Config, EnvPolicy, Received, Runtime, Transport};

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let (runtime, program, prime) = match args.as_slice() {
        [runtime, program] => (runtime, program, None),
        [runtime, program, ms] => (runtime, program, Some(ms.parse().expect("PRIME_MS"))),
        _ => {
            eprintln!("usage: login-host tokio|smol|async-std PROGRAM [PRIME_MS]");
            std::process::exit(2);
        }
    };
    if let Some(ms) = prime {
        let start = Instant::now();
        let primed = childwire_async::login_shell_env(Duration::from_millis(ms));
        say(&format!(
            "{{\"primed_ms\":{},\"ok\":{}}}",
            start.elapsed().as_millis(),
            primed.is_ok()
        ));
    }
    let mut command = Command::new(program);
    command.env_policy(EnvPolicy::LoginShell);
    match runtime.as_str() {
        "tokio" => {
            let rt = tokio::runtime::Builder::new_multi_thread()
                .worker_threads(1)
                .enable_all()
                .build()
                .expect("a Tokio runtime");
            let _entered = rt.enter();
            rt.block_on(host::<childwire_tokio::Tokio>(&command));
        }
        "smol" => smol::block_on(host::<childwire_smol::Smol>(&command)),
        "async-std" => async_std::task::block_on(host::<childwire_async_std::AsyncStd>(&command)),
        other => panic!("unknown runtime {other:?}"),
    }
}

fn say(line: &str) {
    let mut out = std::io::stdout().lock();
    writeln!(out, "{line}").expect("stdout");
    out.flush().expect("stdout");
}

async fn host<R: Runtime>(command: &Command) {
    let start = Instant::now();
    let mut transport = match Transport::<R>::spawn(command, Config::default()) {
        Ok(transport) => transport,
        Err(err) => {
            let ms = start.elapsed().as_millis();
            let text = err.to_string().replace('"', "'");
            return say(&format!("{{\"spawned_ms\":{ms},\"error\":\"{text}\"}}"));
        }
    };
    let ms = start.elapsed().as_millis();
    transport.send(r#"{"login":1}"#).await.expect("send");
    match transport.recv().await {
        Some(Received::Message(m)) => assert_eq!(&m.bytes()[..], br#"{"login":1}"#),
        other => panic!("no echo: {other:?}"),
    }
    transport.shutdown().await.expect("shutdown");
    say(&format!("{{\"spawned_ms\":{ms},\"echo\":true}}"));
}
