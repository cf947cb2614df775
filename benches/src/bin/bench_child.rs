//! The child program of childwire's end-to-end benchmarks.
//!
//! `bench-child MODE [ARG]`:
//! - `cat`: copies stdin to stdout as it arrives (64 KiB reads, no
//!   buffering in between), exits at EOF. The echo server of the
//!   throughput, latency and scale benches.
//! - `flood BYTES`: writes `BYTES` bytes with no newline, then `\n`, then one
//!   valid JSON-RPC line, and exits. The memory-under-attack bench.
//! - `eof-exit`: writes `ready`, reads stdin to EOF, then writes
//!   `exit-at NANOS` (CLOCK_MONOTONIC) and exits, so the bench knows when
//!   the child's own exit began.
//! - `ignore-term`: ignores SIGTERM, writes `ready`, and then never exits on
//!   its own (stdin EOF included): only SIGKILL ends it.
//! - `ones [started]`: writes 1-byte lines (`1\n`) as fast as the pipe takes
//!   them, until the pipe closes: the most messages per byte, so a receive
//!   bound that does not count per-message overhead shows. With `started`,
//!   writes `started` to stderr once its first 64 KiB are in the pipe.
//! - `escape PIDFILE`: starts `bench-child ones started` in a process group
//!   of its own holding this stdout (a descendant that escaped the child's
//!   group), waits until it has started flooding, writes its PID to
//!   `PIDFILE`, and exits: the pipe outlives the child, and is being
//!   written when the child's exit is seen.
//!
//! - `answer`: answers each request line: `"method":"echo","params":`
//!   becomes `"result":` (the rest of the line as it was); a request
//!   `{"jsonrpc":"2.0","id":ID,"method":"flood","params":N}` gets N
//!   `notifications/message` lines of 200 B, then `{"jsonrpc":"2.0","id":ID,
//!   "result":N}`. Writes once per read's worth of requests. The share
//!   bench's server.
//!
//! The pipes are used as raw file descriptors: `std::io::stdout()` is line
//! buffered, which would add copies and syscalls the bench would then
//! measure.

use std::fs::File;
use std::io::{self, Read, Write};
use std::os::fd::AsFd;
use std::process::ExitCode;
use std::time::Duration;

use childwire_bench::{VALID_LINE, monotonic_nanos};

const CHUNK: usize = 64 * 1024;

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let result = match args.first().map(String::as_str) {
        Some("cat") => cat(),
        Some("flood") => match args.get(1).and_then(|n| n.parse().ok()) {
            Some(bytes) => flood(bytes),
            None => Err(io::Error::other("flood needs a byte count")),
        },
        Some("eof-exit") => eof_exit(),
        Some("answer") => answer(),
        Some("ignore-term") => ignore_term(),
        Some("ones") => ones(args.get(1).is_some_and(|arg| arg == "started")),
        Some("escape") => match args.get(1) {
            Some(pidfile) => escape(pidfile),
            None => Err(io::Error::other("escape needs a PID file")),
        },
        _ => Err(io::Error::other(
            "usage: bench-child cat | flood BYTES | eof-exit | ignore-term | ones | escape PIDFILE | answer",
        )),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        // The parent closing the pipes early is a normal end for a bench.
        Err(err) if err.kind() == io::ErrorKind::BrokenPipe => ExitCode::SUCCESS,
        Err(err) => {
            eprintln!("bench-child: {err}");
            ExitCode::FAILURE
        }
    }
}

fn raw_stdin() -> io::Result<File> {
    Ok(File::from(io::stdin().as_fd().try_clone_to_owned()?))
}

fn raw_stdout() -> io::Result<File> {
    Ok(File::from(io::stdout().as_fd().try_clone_to_owned()?))
}

fn cat() -> io::Result<()> {
    let (mut input, mut output) = (raw_stdin()?, raw_stdout()?);
    let mut buf = vec![0; CHUNK];
    loop {
        match input.read(&mut buf) {
            Ok(0) => return Ok(()),
            Ok(n) => output.write_all(&buf[..n])?,
            Err(err) if err.kind() == io::ErrorKind::Interrupted => {}
            Err(err) => return Err(err),
        }
    }
}

fn answer() -> io::Result<()> {
    const ECHO: &[u8] = br#","method":"echo","params":"#;
    const FLOOD: &[u8] = br#","method":"flood","params":"#;
    let find = |line: &[u8], what: &[u8]| line.windows(what.len()).position(|w| w == what);
    let mut input = io::BufReader::with_capacity(CHUNK, raw_stdin()?);
    let mut output = io::BufWriter::with_capacity(CHUNK, raw_stdout()?);
    let mut line = Vec::new();
    loop {
        line.clear();
        if io::BufRead::read_until(&mut input, b'\n', &mut line)? == 0 {
            return output.flush();
        }
        if let Some(at) = find(&line, ECHO) {
            output.write_all(&line[..at])?;
            output.write_all(br#","result":"#)?;
            output.write_all(&line[at + ECHO.len()..])?;
        } else if let Some(at) = find(&line, FLOOD) {
            let count: u64 = std::str::from_utf8(&line[at + FLOOD.len()..])
                .ok()
                .and_then(|rest| rest.trim_end().trim_end_matches('}').parse().ok())
                .unwrap_or(0);
            let note = format!(
                r#"{{"jsonrpc":"2.0","method":"notifications/message","params":{{"level":"info","data":"{}"}}}}"#,
                "x".repeat(120)
            );
            for _ in 0..count {
                output.write_all(note.as_bytes())?;
                output.write_all(b"\n")?;
            }
            output.write_all(&line[..at])?;
            output.write_all(format!(r#","result":{count}}}"#).as_bytes())?;
            output.write_all(b"\n")?;
        }
        // Nothing more read ahead: what was answered goes out now.
        if input.buffer().is_empty() {
            output.flush()?;
        }
    }
}

fn flood(bytes: u64) -> io::Result<()> {
    let mut output = raw_stdout()?;
    let buf = vec![b'x'; CHUNK];
    let mut left = bytes;
    while left > 0 {
        let n = left.min(CHUNK as u64) as usize;
        output.write_all(&buf[..n])?;
        left -= n as u64;
    }
    output.write_all(b"\n")?;
    output.write_all(VALID_LINE)?;
    output.write_all(b"\n")
}

fn ones(tell_started: bool) -> io::Result<()> {
    let mut output = raw_stdout()?;
    let buf = b"1\n".repeat(CHUNK / 2);
    output.write_all(&buf)?;
    if tell_started {
        io::stderr().write_all(b"started\n")?;
    }
    loop {
        output.write_all(&buf)?;
    }
}

fn escape(pidfile: &str) -> io::Result<()> {
    use std::os::unix::process::CommandExt;
    let mut grandchild = std::process::Command::new(std::env::current_exe()?)
        .args(["ones", "started"])
        .stdin(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        // Out of the child's group: a group signal does not reach it.
        .process_group(0)
        .spawn()?;
    // Exit only once it floods: started later, the sweep after this exit
    // could end it before it wrote a byte, and nothing would be tested.
    let mut started = [0; 1];
    if let Some(mut stderr) = grandchild.stderr.take() {
        stderr.read_exact(&mut started)?;
    }
    std::fs::write(pidfile, grandchild.id().to_string())
}

fn eof_exit() -> io::Result<()> {
    let mut output = raw_stdout()?;
    output.write_all(b"ready\n")?;
    io::copy(&mut raw_stdin()?, &mut io::sink())?;
    output.write_all(format!("exit-at {}\n", monotonic_nanos()).as_bytes())
}

fn ignore_term() -> io::Result<()> {
    ignore_sigterm()?;
    raw_stdout()?.write_all(b"ready\n")?;
    io::copy(&mut raw_stdin()?, &mut io::sink())?;
    loop {
        std::thread::sleep(Duration::from_secs(3600));
    }
}

#[allow(unsafe_code)]
fn ignore_sigterm() -> io::Result<()> {
    // SAFETY: setting a signal's disposition to SIG_IGN runs no handler code,
    // and nothing else in this single-threaded program handles signals.
    let previous = unsafe { libc::signal(libc::SIGTERM, libc::SIG_IGN) };
    if previous == libc::SIG_ERR {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}
