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

use std::collections::VecDeque;
use std::future::{Future, poll_fn};
use std::io::{self, BufWriter, Read, Write};
use std::pin::Pin;
use std::sync::{Arc, Mutex, PoisonError};
use std::task::{Context, Poll, Waker};
use std::thread;

use async_signal::{Signal, Signals};
use bytes::Bytes;
use childwire::{
    Command, Config, ExitReport, Oversized, Received, Receiver, Runtime, SendErrorKind, Sender,
    StderrMode, Transport,
};
use childwire_core::jsonrpc::oversized_error;
use childwire_core::{Frame, LineDecoder};
use futures_core::Stream;
#[cfg(unix)]
use rustix::process::{Pid, kill_process_group};

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
    // Before the child exists: a signal from here on is ours to handle,
    // never the default action that would end relay and orphan the child.
    let signals = match Signals::new([Signal::Term, Signal::Int, Signal::Hup]) {
        Ok(signals) => Some(signals),
        Err(err) => {
            note!("relay: cannot catch signals ({err}); SIGTERM will end relay, not the child");
            None
        }
    };

    // Transparent: the child gets the environment the host gave the relay.
    let mut command = Command::new(&options.command.program);
    command
        .args(&options.command.args)
        .stderr(StderrMode::Capture)
        // A host that SIGKILLs relay (or crashes) must not leave the server
        // running: on Linux the server dies with relay.
        .kill_on_parent_death(true);
    let mut config = Config::default();
    if !options.quiet {
        // Verbatim, as if the relay were not there; the tail is still kept
        // for the exit report.
        config.on_stderr_line(|line: &[u8]| {
            let mut stderr = io::stderr().lock();
            let _ = stderr.write_all(line);
            let _ = stderr.write_all(b"\n");
        });
    }
    // One limit for both directions: what the host may send is what the
    // child may answer.
    config.max_message_size(options.max_message_size);
    config.max_send_size(options.max_message_size);
    config.stdin_grace(options.stdin_grace);
    config.term_grace(options.term_grace);

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
    let max_message_size = options.max_message_size;
    let answers = Answers::default();
    let stdin_answers = answers.clone();
    let spawned = thread::Builder::new()
        .name("relay-stdin".to_owned())
        .spawn(move || {
            pump_stdin(
                &sender,
                stdin_log.as_ref(),
                &stdin_answers,
                max_message_size,
            )
        });
    if let Err(err) = spawned {
        note!("relay: cannot start the stdin thread: {err}; shutting the child down");
        // The sender went down with the closure; the clone shuts down.
        let _ = stopper.shutdown().await;
    }

    let mut stop = Stop {
        signals,
        signalled: 0,
        shutdown: None,
        pid: receiver.id(),
        options: &options,
    };
    let limit = options.max_message_size;
    let host = Host {
        log: log.as_ref(),
        answers: &answers,
        limit,
    };
    let report = pump_stdout(&mut receiver, &stopper, host, &mut stop).await;
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

/// What the stdout pump waits for.
enum Event {
    /// The next item from the child, `None` once its driver is gone.
    Child(Option<Received>),
    /// A signal to relay.
    Signal(Signal),
    /// relay's own answer to the host: the error for a request of the host's
    /// that was too large to relay.
    Answer(Bytes),
}

/// relay's own answers to the host, queued by the stdin thread for the
/// stdout pump, the one writer of stdout (so answers never interleave with
/// the child's messages inside a line).
#[derive(Clone, Default)]
struct Answers(Arc<Mutex<(VecDeque<Bytes>, Option<Waker>)>>);

impl Answers {
    fn push(&self, answer: Bytes) {
        let mut inner = self.0.lock().unwrap_or_else(PoisonError::into_inner);
        inner.0.push_back(answer);
        if let Some(waker) = inner.1.take() {
            waker.wake();
        }
    }

    fn poll_next(&self, cx: &mut Context<'_>) -> Poll<Bytes> {
        let mut inner = self.0.lock().unwrap_or_else(PoisonError::into_inner);
        match inner.0.pop_front() {
            Some(answer) => Poll::Ready(answer),
            None => {
                inner.1 = Some(cx.waker().clone());
                Poll::Pending
            }
        }
    }
}

/// What the stdout pump needs besides the child: the log, relay's own
/// answers, and the size limit they name.
#[derive(Clone, Copy)]
struct Host<'a> {
    log: Option<&'a Log>,
    answers: &'a Answers,
    limit: usize,
}

/// How relay ends the child when it is told to end itself.
struct Stop<'a> {
    signals: Option<Signals>,
    /// Signals received so far.
    signalled: u32,
    /// The shutdown the first signal started, polled along with the child's
    /// output until the exit report comes (which the receiver hands out).
    shutdown: Option<Pin<Box<dyn Future<Output = ()> + 'a>>>,
    /// The child's pid, which is also its process group's id (Unix: the
    /// second signal kills the group).
    #[cfg_attr(not(unix), allow(dead_code))]
    pid: Option<u32>,
    options: &'a RelayOptions,
}

impl<'a> Stop<'a> {
    fn poll_signal(&mut self, cx: &mut Context<'_>) -> Poll<Signal> {
        if let Some(shutdown) = &mut self.shutdown
            && shutdown.as_mut().poll(cx).is_ready()
        {
            self.shutdown = None;
        }
        let Some(signals) = &mut self.signals else {
            return Poll::Pending;
        };
        match Pin::new(signals).poll_next(cx) {
            Poll::Ready(Some(Ok(signal))) => Poll::Ready(signal),
            Poll::Ready(Some(Err(err))) => {
                note!("relay: waiting for signals failed ({err}); no longer catching them");
                self.signals = None;
                Poll::Pending
            }
            Poll::Ready(None) => {
                self.signals = None;
                Poll::Pending
            }
            Poll::Pending => Poll::Pending,
        }
    }

    /// A host ends its server with SIGTERM (or a terminal with SIGINT, a
    /// closed session with SIGHUP): the first runs the MCP shutdown on the
    /// child, whose end then arrives as the exit report like any other; a
    /// second one means "now": SIGKILL to the child's group at once.
    fn on_signal<R: Runtime>(&mut self, signal: Signal, stopper: &'a Sender<R>) {
        self.signalled += 1;
        let name = signal_name(signal);
        if self.signalled == 1 {
            note!(
                "relay: {name}: shutting the child down (closing its stdin, SIGTERM {} later, \
                 SIGKILL {} after that; a second signal kills it at once)",
                seconds(self.options.stdin_grace),
                seconds(self.options.term_grace),
            );
            self.shutdown = Some(Box::pin(async move {
                // The report comes through the receiver too; this only
                // has to start the sequence and keep it going.
                let _ = stopper.shutdown().await;
            }));
            return;
        }
        #[cfg(unix)]
        self.kill_group(name);
        // Windows: no process-group signal to send; the shutdown under way ends the child.
        #[cfg(not(unix))]
        note!("relay: {name}, a second signal: the shutdown under way ends the child");
    }

    /// SIGKILL to the child's process group, at once.
    #[cfg(unix)]
    fn kill_group(&self, name: &str) {
        note!("relay: {name}, a second signal: killing the child's process group with SIGKILL now");
        // Dropping the transport would not do it here: once a shutdown is
        // under way, childwire lets it run its course. The group's id is
        // the child's pid (childwire starts it as a group leader), and the
        // child is not reaped before its report, which has not come, so
        // the id cannot have been reused yet.
        let group = self
            .pid
            .and_then(|pid| i32::try_from(pid).ok())
            .and_then(Pid::from_raw);
        if let Some(group) = group
            && let Err(err) = kill_process_group(group, rustix::process::Signal::KILL)
        {
            // ESRCH: the whole group is gone already; the report follows.
            if err != rustix::io::Errno::SRCH {
                note!("relay: killing the child's group failed: {err}");
            }
        }
    }
}

fn signal_name(signal: Signal) -> &'static str {
    match signal {
        Signal::Term => "SIGTERM",
        Signal::Int => "SIGINT",
        Signal::Hup => "SIGHUP",
        _ => "a signal",
    }
}

fn seconds(duration: std::time::Duration) -> String {
    format!("{} s", duration.as_secs_f64())
}

/// Copies the child's messages to stdout until the exit report, which it
/// returns; signals to relay are handled on the way.
async fn pump_stdout<'a, R: Runtime>(
    receiver: &mut Receiver<R>,
    stopper: &'a Sender<R>,
    host: Host<'_>,
    stop: &mut Stop<'a>,
) -> Option<ExitReport> {
    let log = host.log;
    let mut out = Some(BufWriter::with_capacity(CHUNK, io::stdout().lock()));
    loop {
        let mut next = |cx: &mut Context<'_>| {
            if let Poll::Ready(signal) = stop.poll_signal(cx) {
                return Poll::Ready(Event::Signal(signal));
            }
            if let Poll::Ready(answer) = host.answers.poll_next(cx) {
                return Poll::Ready(Event::Answer(answer));
            }
            receiver.poll_recv(cx).map(Event::Child)
        };
        let ready = poll_fn(|cx| Poll::Ready(next(cx))).await;
        let event = match ready {
            Poll::Ready(event) => event,
            Poll::Pending => {
                // Nothing more right now: let what we have go.
                if let Some(writer) = &mut out
                    && let Err(err) = writer.flush()
                {
                    stdout_failed(&mut out, stopper, &err);
                }
                if let Some(log) = log {
                    log.flush();
                }
                poll_fn(&mut next).await
            }
        };
        let item = match event {
            Event::Signal(signal) => {
                stop.on_signal(signal, stopper);
                continue;
            }
            Event::Answer(answer) => {
                write_line(&mut out, stopper, &answer);
                continue;
            }
            Event::Child(item) => item,
        };
        match item? {
            Received::Message(message) => {
                if let Some(log) = log {
                    log.message(Direction::FromChild, &message);
                }
                write_line(&mut out, stopper, &message);
            }
            Received::Oversized(notice) => {
                // Whoever asked waits for this answer: it gets an error
                // for its id instead, and never hangs.
                if let Some(answer) = oversized(Direction::FromChild, &notice, host.limit, log) {
                    write_line(&mut out, stopper, &answer);
                }
            }
            Received::Exited(report) => {
                if let Some(writer) = &mut out
                    && let Err(err) = writer.flush()
                {
                    note!("relay: writing stdout failed: {err}");
                }
                return Some(*report);
            }
            // Malformed frames: line framing never has them.
            other => note!("relay: from the child: {other:?}"),
        }
    }
}

/// Writes one message and its `\n` to the host.
fn write_line<R: Runtime>(
    out: &mut Option<BufWriter<io::StdoutLock<'static>>>,
    stopper: &Sender<R>,
    message: &[u8],
) {
    if let Some(writer) = out
        && let Err(err) = writer
            .write_all(message)
            .and_then(|()| writer.write_all(b"\n"))
    {
        stdout_failed(out, stopper, &err);
    }
}

/// A message over `--max-message-size` was dropped on its way `dir`: said
/// on stderr, logged, and, when it carried a top-level JSON-RPC id, the
/// error that answers it in its place, for the host.
///
/// The one place an oversized message is handled. Dropping it silently
/// would leave whoever sent a request waiting forever. Both ways the answer
/// goes to the host: a response too large from the child fails the host's
/// request of that id; a request too large from the host never reaches the
/// child and is answered by relay. (A request the child sends, such as
/// sampling, is small; an oversized message from the child is taken for a
/// response.)
fn oversized(dir: Direction, notice: &Oversized, limit: usize, log: Option<&Log>) -> Option<Bytes> {
    let from = match dir {
        Direction::FromChild => "from the child",
        Direction::ToChild => "from stdin",
    };
    note!("relay: {from}: {notice}");
    if let Some(log) = log {
        log.oversized(dir, notice);
    }
    let id = notice.json_rpc_id()?;
    // A notification has no id and wants no answer; `null` answers nobody.
    (&id[..] != b"null").then(|| oversized_error(id, notice.len, limit))
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
fn pump_stdin<R: Runtime>(
    sender: &Sender<R>,
    log: Option<&Log>,
    answers: &Answers,
    max_message_size: usize,
) {
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
        if !forward(&mut decoder, sender, log, answers) {
            return;
        }
        if let Some(log) = log {
            log.flush();
        }
    }
    decoder.handle_eof();
    if forward(&mut decoder, sender, log, answers) {
        // Everything the host sent reaches the child before the shutdown's
        // clock starts: its stdin grace is for the child to exit, not for a
        // large last message to be written (relay's grace is short).
        let _ = block_on(sender.flush());
        let _ = block_on(sender.shutdown());
    }
}

/// Sends every message the decoder holds; `false` once the child can take
/// no more (it exited or closed its stdin): reading on would be pointless.
fn forward<R: Runtime>(
    decoder: &mut LineDecoder,
    sender: &Sender<R>,
    log: Option<&Log>,
    answers: &Answers,
) -> bool {
    while let Some(frame) = decoder.poll_frame() {
        match frame {
            Frame::Message(message) => {
                let bytes = message.into_bytes();
                if bytes.contains(&b'\r') {
                    // A `\r` inside the line: relaying it would corrupt
                    // the stream (C06), so it is dropped, loudly, and not
                    // logged as sent.
                    note!("relay: dropped a line from stdin: it holds a carriage return");
                    continue;
                }
                // Logged before the child can see it, so a request's record
                // always comes before its response's.
                if let Some(log) = log {
                    log.message(Direction::ToChild, &bytes);
                }
                match block_on(sender.send(bytes)) {
                    Ok(()) => {}
                    Err(err) if matches!(err.kind(), SendErrorKind::Closed(_)) => return false,
                    Err(err) => note!("relay: dropped a line from stdin: {err}"),
                }
            }
            Frame::Oversized(notice) => {
                let limit = decoder.max_message_size();
                if let Some(answer) = oversized(Direction::ToChild, &notice, limit, log) {
                    answers.push(answer);
                }
            }
            // Line framing yields no other notice.
            _ => {}
        }
    }
    true
}
