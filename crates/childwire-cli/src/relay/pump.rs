//! The relay's two pumps, both on childwire transports: host → child and
//! child → host.
//!
//! The host's side is childwire's server-side stdio transport (the relay's
//! own stdin and stdout), the child's side the child transport, so both
//! directions get the same framing, limits and batching: a burst costs a
//! few big writes, a lone message goes out at once, and when one side reads
//! slowly the `send` into it waits, the pump stops receiving, and the
//! backpressure reaches whoever writes on the other side. The two pumps run
//! in one future; the relay ends with the child's exit report, whether or
//! not its own stdin has ended.
//!
//! Both sides send with the [`Verbatim`](super::verbatim::Verbatim)
//! framing, a long line in pieces, so a message costs itself plus a piece
//! in either direction, never itself twice. Without `--log` and
//! `--restart`, a long line from the host goes to the child as it comes,
//! never held whole ([`HostLines`]): a child that echoes it costs the
//! relay the echo alone. The relay's stdout has one writer, the child →
//! host pump: a line going out in pieces must not have anything else
//! written between them, so the relay's own answers to the host wait in
//! [`Ends::answers`] until the line in flight is out.

use std::cell::{Cell, RefCell};
use std::collections::VecDeque;
use std::future::{Future, poll_fn};
use std::io::{self, Write};
use std::pin::{Pin, pin};
use std::rc::Rc;
use std::task::{Context, Poll};

use crate::signals::{Signal, Signals};
use bytes::Bytes;
use childwire::{
    ChannelConfig, Closed, Command, Config, ExitReport, Oversized, PollutionPolicy, Received,
    Receiver, SendErrorKind, Sender, StderrMode,
};
use childwire_core::Framing;
use childwire_core::jsonrpc::{IdScanner, oversized_error};

use super::child::{self, ChildEvent, FromChild, ToChild};
use super::exit_code;
use super::host::{Dropped, HostItem, HostLines, LONG, Why};
use super::log::{Direction, Log};
use super::options::{RelayOptions, StdoutNoise};
use super::verbatim::send_line;
use crate::rt::ExampleRuntime;

/// Exit codes of the relay's own failures, as shells use them.
const CANNOT_EXECUTE: u8 = 126;
const NOT_FOUND: u8 = 127;
const USAGE: u8 = 2;

pub(super) async fn run<R: ExampleRuntime>(options: RelayOptions) -> u8 {
    // What relay says on stderr starts with its name.
    let name = options.name;
    let log = options
        .log
        .as_deref()
        .map(|path| Log::create::<R>(path, name));
    let log = match log.transpose() {
        Ok(log) => log,
        Err(err) => {
            let path = options.log.as_deref().unwrap_or_else(|| "?".as_ref());
            note!("{name}: cannot open the log {}: {err}", path.display());
            return USAGE;
        }
    };
    // Before the child exists: a signal from here on is ours to handle,
    // never the default action that would end relay and orphan the child.
    let signals = match Signals::new(CAUGHT) {
        Ok(signals) => Some(signals),
        Err(err) => {
            note!("{name}: cannot catch signals ({err}); SIGTERM will end relay, not the child");
            None
        }
    };

    // One limit for both directions and both sides: what the host may send
    // is what the child may answer.
    let limit = options.max_message_size;
    let mut host_config = ChannelConfig::default();
    host_config.max_message_size = limit;
    host_config.max_send_size = limit;
    // A long line from the host goes to the child as it comes, unless the
    // relay needs it whole: for the log's record, or for `--restart` (which
    // sends each line whole, and tracks its id).
    let framing = if options.log.is_none() && !options.restart {
        HostLines::streaming(LONG)
    } else {
        HostLines::default()
    };
    let host = match R::stdio_with(framing, &host_config) {
        Ok(host) => host,
        Err(err) => {
            note!("{name}: {err}");
            return CANNOT_EXECUTE;
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
    if let Some(log) = &log {
        config.tap(log.child_tap());
    }
    if !options.quiet {
        // Verbatim, as if the relay were not there; the tail is still kept
        // for the exit report.
        config.on_stderr_line(|line: &[u8]| {
            let mut stderr = io::stderr().lock();
            let _ = stderr.write_all(line);
            let _ = stderr.write_all(b"\n");
        });
    }
    config.pollution(Some(match options.stdout_noise {
        StdoutNoise::Pass => PollutionPolicy::Deliver,
        StdoutNoise::Drop => PollutionPolicy::Drop,
        // Marked `(stdout)` where the stderr lines go: relay's stderr (unless
        // --quiet) and the log.
        StdoutNoise::Log => PollutionPolicy::Divert,
    }));
    config.max_message_size(limit);
    config.max_send_size(limit);
    config.stdin_grace(options.stdin_grace);
    config.term_grace(options.term_grace);
    let (to_child, from_child) = match child::spawn::<R>(&command, config, options.restart, name) {
        Ok(child) => child,
        Err(err) => {
            note!("{name}: {err}");
            return if err.kind() == io::ErrorKind::NotFound {
                NOT_FOUND
            } else {
                CANNOT_EXECUTE
            };
        }
    };

    let (to_host, from_host) = host.split();
    let answers = RefCell::new(VecDeque::new());
    let ends = Ends {
        to_host: &to_host,
        to_child: &to_child,
        answers: &answers,
        log: log.as_ref(),
        limit,
        name,
    };
    let mut stop = Stop {
        signals,
        signalled: 0,
        shutdown: None,
        pid: Rc::clone(&from_child.pid),
        options: &options,
    };
    let report = {
        let mut inbound = pin!(host_to_child(from_host, ends));
        let mut inbound_done = false;
        let mut outbound = pin!(child_to_host(from_child, ends, &mut stop));
        // The stdin pump ends at the host's EOF (having started the child's
        // shutdown) or once the child takes no more; the relay ends with
        // the exit report, even if the host never closes its side. The
        // stdin pump goes first: an answer it queues for the host is seen
        // by the other pump in the same poll.
        poll_fn(|cx| {
            if !inbound_done {
                inbound_done = inbound.as_mut().poll(cx).is_ready();
            }
            outbound.as_mut().poll(cx)
        })
        .await
    };
    match report {
        Some(report) => {
            note!("{name}: child {report}");
            if let Some(log) = &log {
                log.flush();
            }
            exit_code(&report)
        }
        None => {
            note!("{name}: lost track of the child (its runtime stopped)");
            1
        }
    }
}

/// The signals relay handles as a host's request to end.
#[cfg(unix)]
const CAUGHT: [Signal; 3] = [Signal::Term, Signal::Int, Signal::Hup];
#[cfg(not(unix))]
const CAUGHT: [Signal; 1] = [Signal::Int];

/// What both pumps write to: the two senders, the relay's own answers for
/// the host, the log, the limit those answers name, and the name what the
/// relay says on stderr starts with.
struct Ends<'a, R: ExampleRuntime> {
    /// Written by the child → host pump alone.
    to_host: &'a Sender<R, HostLines>,
    to_child: &'a ToChild<R>,
    /// The relay's answers to the host's oversized requests, for the child
    /// → host pump to write between two lines.
    answers: &'a RefCell<VecDeque<Bytes>>,
    log: Option<&'a Log>,
    limit: usize,
    name: &'static str,
}

// By hand: a derive would ask `R: Copy`, and only references are copied.
impl<R: ExampleRuntime> Clone for Ends<'_, R> {
    fn clone(&self) -> Self {
        *self
    }
}

impl<R: ExampleRuntime> Copy for Ends<'_, R> {}

/// Sends the host's messages to the child until the host's stdin ends, then
/// shuts the child down the MCP way.
async fn host_to_child<R: ExampleRuntime>(
    mut from_host: Receiver<R, HostLines>,
    ends: Ends<'_, R>,
) {
    let name = ends.name;
    // What is queued for the child is written out whenever the host has
    // nothing more at once (see `next`).
    let idle = || async {
        let _ = ends.to_child.flush().await;
    };
    // The long line going to the child in pieces, if one is.
    let mut long: Option<LongLine> = None;
    while let Some(item) = next(&mut from_host, ends.log, idle).await {
        let message = match item {
            Received::Message(message) => message,
            Received::Oversized(notice) => {
                // Never reaches the child; relay answers it in its place,
                // through the one writer of stdout.
                if let Some(answer) = oversized(Direction::ToChild, &notice, ends) {
                    ends.answers.borrow_mut().push_back(answer);
                }
                continue;
            }
            // Line framing yields no other notice.
            _ => continue,
        };
        let sent = match HostItem::read(message.into_bytes(), long.is_some()) {
            Some(HostItem::Line(message)) => {
                if message.contains(&b'\r') {
                    // A `\r` inside the line: relaying it would corrupt
                    // the stream, so it is dropped, loudly, and not logged
                    // as sent; a request is answered in its place.
                    note!("{name}: dropped a line from stdin: it holds a carriage return");
                    let mut id = IdScanner::new();
                    id.feed(&message);
                    if let Some(answer) = answer_carriage_return(id.id().as_ref()) {
                        ends.answers.borrow_mut().push_back(answer);
                    }
                    continue;
                }
                // Logged before the child can see it, so a request's record
                // always comes before its response's.
                if let Some(log) = ends.log {
                    log.to_child(&message);
                }
                ends.to_child.send_line(message).await
            }
            Some(HostItem::Start) => {
                long = Some(LongLine::default());
                Ok(())
            }
            Some(HostItem::Piece(piece)) => match long.as_mut() {
                Some(line) if !line.failed => {
                    let len = piece.len() as u64;
                    let sent = ends.to_child.send_piece(piece).await;
                    match sent {
                        Ok(()) => line.sent += len,
                        Err(_) => line.failed = true,
                    }
                    sent
                }
                // The rest of a line whose piece was refused.
                _ => Ok(()),
            },
            // The child's line ends here, whole or cut short.
            Some(HostItem::End) => {
                long = None;
                ends.to_child.end_line().await
            }
            Some(HostItem::Cut) => ends.to_child.end_line().await,
            Some(HostItem::Dropped(dropped)) => {
                let sent = long.take().map_or(0, |line| line.sent);
                if let Some(answer) = dropped_long(&dropped, sent, ends) {
                    ends.answers.borrow_mut().push_back(answer);
                }
                Ok(())
            }
            // The decoder marks nothing else.
            None => Ok(()),
        };
        match sent {
            Ok(()) => {}
            // The child takes no more (it exited or closed its stdin):
            // reading on would be pointless.
            Err(err) if matches!(err.kind(), SendErrorKind::Closed(_)) => return,
            Err(err) => note!("{name}: dropped a line from stdin: {err}"),
        }
    }
    // Everything the host sent reaches the child before the shutdown's
    // clock starts: its stdin grace is for the child to exit, not for a
    // large last message to be written (relay's grace is short). The
    // report comes through the other pump.
    let _ = ends.to_child.flush().await;
    let _ = ends.to_child.shutdown().await;
}

/// Copies the child's messages to the host until the exit report, which it
/// returns once everything before it was written; signals to relay are
/// handled on the way.
async fn child_to_host<'a, R: ExampleRuntime>(
    mut from_child: FromChild<R>,
    ends: Ends<'a, R>,
    stop: &mut Stop<'a>,
) -> Option<ExitReport> {
    let name = ends.name;
    // Whoever reads relay's stdout went away: the child's output is still
    // drained (to its report), but no longer written.
    let mut host_gone = false;
    loop {
        let mut poll_next = |cx: &mut Context<'_>| {
            if let Poll::Ready(signal) = stop.poll_signal(cx) {
                return Poll::Ready(Next::Signal(signal));
            }
            if let Some(answer) = ends.answers.borrow_mut().pop_front() {
                return Poll::Ready(Next::Answer(answer));
            }
            from_child.poll_next(cx).map(Next::Item)
        };
        let next = match poll_fn(|cx| Poll::Ready(poll_next(cx))).await {
            Poll::Ready(next) => next,
            Poll::Pending => {
                // Nothing more at once: what is queued for the host is
                // written out while waiting, as `next` does for the child
                // (a signal or the child's next line still comes first).
                let gone = host_gone;
                let mut flush = pin!(async {
                    if !gone {
                        let _ = ends.to_host.flush().await;
                    }
                });
                let mut flushed = false;
                poll_fn(|cx| {
                    if !flushed {
                        flushed = flush.as_mut().poll(cx).is_ready();
                    }
                    poll_next(cx)
                })
                .await
            }
        };
        let item = match next {
            Next::Signal(signal) => {
                stop.on_signal(signal, ends.to_child);
                continue;
            }
            Next::Answer(answer) => {
                if !host_gone {
                    write_to_host(ends, stop, answer, &mut host_gone).await;
                }
                continue;
            }
            Next::Item(item) => item?,
        };
        let item = match item {
            ChildEvent::Item(item) => item,
            // An error for a request the child ended before answering
            // (`--restart`).
            ChildEvent::Answer(answer) => {
                if !host_gone {
                    write_to_host(ends, stop, answer, &mut host_gone).await;
                }
                continue;
            }
            // One process ended and a new one follows (`--restart`).
            ChildEvent::Ended {
                report,
                last: false,
            } => {
                // Its exit record is the tap's, as every generation's.
                note!("{name}: child {report}; restarting it");
                continue;
            }
            ChildEvent::Ended { report, last: true } => {
                if let Some(log) = ends.log {
                    log.flush();
                }
                if !host_gone {
                    if let Err(err) = ends.to_host.flush().await {
                        note!("{name}: writing stdout failed: {err}");
                    }
                }
                return Some(report);
            }
        };
        let answer = match item {
            // Logged by the child transport's tap, as all that comes from it.
            Received::Message(message) => message.into_bytes(),
            Received::Oversized(notice) => {
                // Whoever asked waits for this answer: it gets an error
                // for its id instead, and never hangs.
                match oversized(Direction::FromChild, &notice, ends) {
                    Some(answer) => answer,
                    None => continue,
                }
            }
            // A line that is not JSON (a banner, a log line): named once
            // per kind on stderr; the line itself follows as a message and
            // is passed through verbatim like any other.
            Received::Pollution(notice) => {
                note!("{name}: the child's stdout: {notice}");
                continue;
            }
            // Malformed frames: line framing never has them; the end comes
            // as `ChildEvent::Ended`.
            other => {
                note!("{name}: from the child: {other:?}");
                continue;
            }
        };
        if !host_gone {
            write_to_host(ends, stop, answer, &mut host_gone).await;
        }
    }
}

/// A long line from the host on its way to the child in pieces.
#[derive(Default)]
struct LongLine {
    /// Bytes of it sent to the child.
    sent: u64,
    /// A piece was refused: the rest is not sent.
    failed: bool,
}

/// What the child → host pump takes next.
enum Next {
    Signal(Signal),
    /// One of the relay's own answers for the host.
    Answer(Bytes),
    /// From the child; `None` once its runtime is gone.
    Item(Option<ChildEvent>),
}

/// Writes one line to the host; when stdout fails, the host is gone: the
/// child is shut down and nothing more is written.
async fn write_to_host<'a, R: ExampleRuntime>(
    ends: Ends<'a, R>,
    stop: &mut Stop<'a>,
    line: Bytes,
    host_gone: &mut bool,
) {
    if let Err(err) = send_line(ends.to_host, line).await {
        *host_gone = true;
        let why = match err.kind() {
            SendErrorKind::Closed(Closed::PeerClosed) => "the host closed it".to_owned(),
            _ => err.to_string(),
        };
        note!(
            "{}: writing stdout failed ({why}); shutting the child down",
            ends.name
        );
        stop.shut_down(ends.to_child);
    }
}

/// The next item from `receiver`; the log is flushed, and `idle` run while
/// waiting, whenever none is ready at once, so a burst is logged in a few
/// writes and a lone message at once.
///
/// `idle` writes out what the other side's sender still has queued: a
/// `send` writes only what the pipe takes at that moment, so without it
/// the tail of a long line (or a line sent while the pipe was full) would
/// wait for the next `send`, which a host waiting for its answer never
/// makes.
async fn next<R: ExampleRuntime, F: Framing, W: Future<Output = ()>>(
    receiver: &mut Receiver<R, F>,
    log: Option<&Log>,
    idle: impl FnOnce() -> W,
) -> Option<Received> {
    if let Poll::Ready(item) = poll_fn(|cx| Poll::Ready(receiver.poll_recv(cx))).await {
        return item;
    }
    if let Some(log) = log {
        log.flush();
    }
    let mut idle = pin!(idle());
    let mut idle_done = false;
    poll_fn(|cx| {
        if !idle_done {
            idle_done = idle.as_mut().poll(cx).is_ready();
        }
        receiver.poll_recv(cx)
    })
    .await
}

/// How relay ends the child when it is told to end itself.
struct Stop<'a> {
    signals: Option<Signals>,
    /// Signals received so far.
    signalled: u32,
    /// The shutdown under way, polled along with the child's output until
    /// the exit report comes (which the receiver hands out).
    shutdown: Option<Pin<Box<dyn Future<Output = ()> + 'a>>>,
    /// The running child's pid, which is also its process group's id.
    pid: Rc<Cell<Option<u32>>>,
    options: &'a RelayOptions,
}

impl<'a> Stop<'a> {
    fn poll_signal(&mut self, cx: &mut Context<'_>) -> Poll<Signal> {
        if self
            .shutdown
            .as_mut()
            .is_some_and(|shutdown| shutdown.as_mut().poll(cx).is_ready())
        {
            self.shutdown = None;
        }
        let Some(signals) = &mut self.signals else {
            return Poll::Pending;
        };
        match futures_core::Stream::poll_next(Pin::new(signals), cx) {
            Poll::Ready(Some(Ok(signal))) => Poll::Ready(signal),
            Poll::Ready(Some(Err(err))) => {
                note!(
                    "{}: waiting for signals failed ({err}); no longer catching them",
                    self.options.name
                );
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

    /// Starts the child's shutdown; its report arrives like any other.
    fn shut_down<R: ExampleRuntime>(&mut self, to_child: &'a ToChild<R>) {
        if self.shutdown.is_some() {
            return;
        }
        self.shutdown = Some(Box::pin(async move {
            // The report comes through the receiver too; this only has to
            // start the sequence and keep it going.
            let _ = to_child.shutdown().await;
        }));
    }

    /// A host ends its server with SIGTERM (or a terminal with SIGINT, a
    /// closed session with SIGHUP): the first runs the MCP shutdown on the
    /// child, whose end then arrives as the exit report like any other; a
    /// second one means "now": SIGKILL to the child's group at once.
    fn on_signal<R: ExampleRuntime>(&mut self, signal: Signal, to_child: &'a ToChild<R>) {
        self.signalled += 1;
        let (name, signal) = (self.options.name, signal_name(signal));
        if self.signalled == 1 {
            note!(
                "{name}: {signal}: shutting the child down (closing its stdin, SIGTERM {} later, \
                 SIGKILL {} after that; a second signal kills it at once)",
                seconds(self.options.stdin_grace),
                seconds(self.options.term_grace),
            );
            self.shut_down(to_child);
            return;
        }
        note!("{name}: {signal}, a second signal: killing the child's process group now");
        kill_group(self.pid.get(), name);
    }
}

/// SIGKILL to the child's process group. Dropping the transport would not
/// do it here: once a shutdown is under way, childwire lets it run its
/// course. The group's id is the child's pid (childwire starts it as a
/// group leader), and the child is not reaped before its report, which has
/// not come, so the id cannot have been reused yet.
#[cfg(unix)]
fn kill_group(pid: Option<u32>, name: &str) {
    use rustix::process::{Pid, kill_process_group};
    let group = pid
        .and_then(|pid| i32::try_from(pid).ok())
        .and_then(Pid::from_raw);
    let Some(group) = group else {
        return;
    };
    if let Err(err) = kill_process_group(group, rustix::process::Signal::KILL) {
        // ESRCH: the whole group is gone already; the report follows.
        if err != rustix::io::Errno::SRCH {
            note!("{name}: killing the child's group failed: {err}");
        }
    }
}

/// Elsewhere there is no group to signal from here: the shutdown already
/// under way ends the child (and its job) when its graces run out.
#[cfg(not(unix))]
fn kill_group(_pid: Option<u32>, name: &str) {
    note!("{name}: the shutdown under way ends the child when its graces run out");
}

fn signal_name(signal: Signal) -> &'static str {
    match signal {
        #[cfg(unix)]
        Signal::Term => "SIGTERM",
        Signal::Int => "SIGINT",
        #[cfg(unix)]
        Signal::Hup => "SIGHUP",
        _ => "a signal",
    }
}

fn seconds(duration: std::time::Duration) -> String {
    format!("{} s", duration.as_secs_f64())
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
fn oversized<R: ExampleRuntime>(
    dir: Direction,
    notice: &Oversized,
    ends: Ends<'_, R>,
) -> Option<Bytes> {
    let from = match dir {
        Direction::FromChild => "from the child",
        Direction::ToChild => "from stdin",
    };
    note!("{}: {from}: {notice}", ends.name);
    if let (Some(log), Direction::ToChild) = (ends.log, dir) {
        log.oversized_to_child(notice);
    }
    answer_oversized(notice.json_rpc_id(), notice.len, ends.limit)
}

/// The error that answers a message of `len` bytes over `limit` with id
/// `id`, if it wants one: a notification has no id and wants no answer;
/// `null` answers nobody.
fn answer_oversized(id: Option<&Bytes>, len: u64, limit: usize) -> Option<Bytes> {
    let id = id?;
    (&id[..] != b"null").then(|| oversized_error(id, len, limit))
}

/// The error that answers a request from the host dropped for the `\r` it
/// holds (line framing cannot carry one), if it has an id: -32600, Invalid
/// Request. A notification (no id) and `null` answer nobody.
fn answer_carriage_return(id: Option<&Bytes>) -> Option<Bytes> {
    let id = id.filter(|id| !id.is_empty() && &id[..] != b"null")?;
    let mut out = br#"{"jsonrpc":"2.0","id":"#.to_vec();
    out.extend_from_slice(id);
    out.extend_from_slice(
        br#","error":{"code":-32600,"message":"the line holds a carriage return, which line framing cannot carry; relay dropped it"}}"#,
    );
    Some(Bytes::from(out))
}

/// A long line from the host, dropped after its first `sent` bytes had
/// gone to the child (see `host.rs`): said on stderr as a line dropped
/// whole is, with what the child got, logged, and, when it was over the
/// limit, the error that answers its id in its place, for the host.
fn dropped_long<R: ExampleRuntime>(
    dropped: &Dropped,
    sent: u64,
    ends: Ends<'_, R>,
) -> Option<Bytes> {
    let name = ends.name;
    let got = format!(
        "it went to the child as it came, and the child got its first {sent} bytes, \
         as a line of their own"
    );
    match dropped.why {
        Why::CarriageReturn => {
            note!("{name}: dropped a line from stdin: it holds a carriage return; {got}");
            answer_carriage_return(dropped.id.as_ref())
        }
        Why::Oversized => {
            // As the line decoder's notice says it.
            let id = dropped.id.as_ref().map_or(String::new(), |id| {
                format!(" (JSON-RPC id {})", String::from_utf8_lossy(id))
            });
            note!(
                "{name}: from stdin: dropped a {}-byte message over the size limit{id}; {got}; \
                 it began: {:?}",
                dropped.len,
                String::from_utf8_lossy(&dropped.head)
            );
            if let Some(log) = ends.log {
                log.oversized_to_child(&Oversized::new(dropped.len, dropped.head.clone()));
            }
            answer_oversized(dropped.id.as_ref(), dropped.len, ends.limit)
        }
    }
}
