//! The relay's two pumps: stdin → child on a plain thread, child → stdout
//! on the runtime.
//!
//! Stdin is read on a thread of its own with blocking reads in big chunks,
//! framed by childwire's [`LineDecoder`] (the same framer the transport
//! uses for the child's stdout), and each message is handed to the
//! transport with [`block_on`]: when the child reads slowly, `send` waits,
//! the thread stops reading, and backpressure reaches whoever writes to the
//! relay. Stdout goes through a `BufWriter` that is flushed only when no
//! further message is ready, so a burst costs a few big writes and a lone
//! message still goes out at once.

use std::future::poll_fn;
use std::io::{self, BufWriter, Read, Write};
use std::sync::Arc;
use std::task::Poll;
use std::thread;

use childwire::{
    Command, Config, ExitReport, Received, Receiver, Runtime, SendErrorKind, Sender, StderrMode,
    Transport,
};
use childwire_core::{Frame, LineDecoder};

use super::exit_code;
use super::log::{Direction, Log};
use super::options::RelayOptions;
use crate::rt::block_on;

/// Bytes asked of each read of stdin and buffered before each write to
/// stdout: a pipe's worth several times over.
const CHUNK: usize = 64 * 1024;

/// Exit codes of the relay's own failures, as shells use them.
const CANNOT_EXECUTE: u8 = 126;
const NOT_FOUND: u8 = 127;
const USAGE: u8 = 2;

pub(super) async fn run<R: Runtime>(options: RelayOptions) -> u8 {
    let log = match options.log.as_deref().map(Log::create).transpose() {
        Ok(log) => log,
        Err(err) => {
            let path = options.log.as_deref().unwrap_or_else(|| "?".as_ref());
            note!("relay: cannot open the log {}: {err}", path.display());
            return USAGE;
        }
    };

    // Transparent: the child gets the environment the host gave the relay.
    let mut command = Command::new(&options.command.program);
    command
        .args(&options.command.args)
        .stderr(StderrMode::Capture);
    let mut config = Config::default();
    if !options.quiet {
        // Verbatim, as if the relay were not there; the tail is still kept
        // for the exit report.
        config.on_stderr_line = Some(Arc::new(|line: &[u8]| {
            let mut stderr = io::stderr().lock();
            let _ = stderr.write_all(line);
            let _ = stderr.write_all(b"\n");
        }));
    }
    let max_message_size = config.max_message_size;

    let transport = match Transport::<R>::spawn(&command, config) {
        Ok(transport) => transport,
        Err(err) => {
            note!("relay: {err}");
            return if err.kind() == io::ErrorKind::NotFound {
                NOT_FOUND
            } else {
                CANNOT_EXECUTE
            };
        }
    };
    let (sender, mut receiver) = transport.split();
    let stopper = sender.clone();
    let stdin_log = log.clone();
    let spawned = thread::Builder::new()
        .name("relay-stdin".to_owned())
        .spawn(move || pump_stdin(&sender, stdin_log.as_ref(), max_message_size));
    if let Err(err) = spawned {
        note!("relay: cannot start the stdin thread: {err}; shutting the child down");
        // The sender went down with the closure; the clone shuts down.
        let _ = stopper.shutdown().await;
    }

    let report = pump_stdout(&mut receiver, &stopper, log.as_ref()).await;
    match report {
        Some(report) => {
            note!("relay: child {report}");
            if let Some(log) = &log {
                log.exit(&report);
                log.flush();
            }
            exit_code(&report)
        }
        None => {
            note!("relay: lost track of the child (its runtime stopped)");
            1
        }
    }
}

/// Copies the child's messages to stdout until the exit report, which it
/// returns.
async fn pump_stdout<R: Runtime>(
    receiver: &mut Receiver<R>,
    stopper: &Sender<R>,
    log: Option<&Log>,
) -> Option<ExitReport> {
    let mut out = Some(BufWriter::with_capacity(CHUNK, io::stdout().lock()));
    loop {
        let ready = poll_fn(|cx| Poll::Ready(receiver.poll_recv(cx))).await;
        let item = match ready {
            Poll::Ready(item) => item,
            Poll::Pending => {
                // Nothing more right now: let what we have go.
                if let Some(writer) = &mut out {
                    if let Err(err) = writer.flush() {
                        stdout_failed(&mut out, stopper, &err);
                    }
                }
                if let Some(log) = log {
                    log.flush();
                }
                receiver.recv().await
            }
        };
        match item? {
            Received::Message(message) => {
                if let Some(log) = log {
                    log.message(Direction::FromChild, &message);
                }
                if let Some(writer) = &mut out {
                    if let Err(err) = writer
                        .write_all(&message)
                        .and_then(|()| writer.write_all(b"\n"))
                    {
                        stdout_failed(&mut out, stopper, &err);
                    }
                }
            }
            Received::Malformed(notice) => note!("relay: from the child: {notice}"),
            Received::Oversized(notice) => {
                note!("relay: from the child: {notice}");
                if let Some(log) = log {
                    log.oversized(Direction::FromChild, &notice);
                }
            }
            Received::Exited(report) => {
                if let Some(writer) = &mut out {
                    if let Err(err) = writer.flush() {
                        note!("relay: writing stdout failed: {err}");
                    }
                }
                return Some(*report);
            }
        }
    }
}

/// Whoever reads our stdout is gone: nothing can be delivered any more, so
/// the child is shut down (from a thread, as the receive loop must go on
/// draining until the exit report).
fn stdout_failed<R: Runtime>(
    out: &mut Option<BufWriter<io::StdoutLock<'static>>>,
    stopper: &Sender<R>,
    err: &io::Error,
) {
    note!("relay: writing stdout failed ({err}); shutting the child down");
    // Dropping the writer would flush into the broken pipe again.
    if let Some(writer) = out.take() {
        let _ = writer.into_parts();
    }
    let stopper = stopper.clone();
    thread::spawn(move || block_on(stopper.shutdown()));
}

/// Reads stdin to its end, sends each line to the child, then shuts the
/// child down the MCP way.
fn pump_stdin<R: Runtime>(sender: &Sender<R>, log: Option<&Log>, max_message_size: usize) {
    let mut stdin = io::stdin().lock();
    let mut chunk = vec![0; CHUNK];
    let mut decoder = LineDecoder::new(max_message_size);
    loop {
        match stdin.read(&mut chunk) {
            Ok(0) => break,
            Ok(n) => decoder.handle_data(&chunk[..n]),
            Err(err) if err.kind() == io::ErrorKind::Interrupted => continue,
            Err(err) => {
                note!("relay: reading stdin failed ({err}); treating it as closed");
                break;
            }
        }
        if !forward(&mut decoder, sender, log) {
            return;
        }
        if let Some(log) = log {
            log.flush();
        }
    }
    decoder.handle_eof();
    if forward(&mut decoder, sender, log) {
        let _ = block_on(sender.shutdown());
    }
}

/// Sends every message the decoder holds; `false` once the child can take
/// no more (it exited or closed its stdin): reading on would be pointless.
fn forward<R: Runtime>(decoder: &mut LineDecoder, sender: &Sender<R>, log: Option<&Log>) -> bool {
    while let Some(frame) = decoder.poll_frame() {
        match frame {
            Frame::Message(message) => {
                let bytes = message.into_bytes();
                match block_on(sender.send(bytes.clone())) {
                    Ok(()) => {
                        if let Some(log) = log {
                            log.message(Direction::ToChild, &bytes);
                        }
                    }
                    Err(err) if matches!(err.kind(), SendErrorKind::Closed(_)) => return false,
                    // A `\r` inside the line: relaying it would corrupt
                    // the stream (C06), so it is dropped, loudly.
                    Err(err) => note!("relay: dropped a line from stdin: {err}"),
                }
            }
            Frame::Oversized(notice) => {
                note!("relay: from stdin: {notice}");
                if let Some(log) = log {
                    log.oversized(Direction::ToChild, &notice);
                }
            }
            // Line framing yields no other notice.
            _ => {}
        }
    }
    true
}
