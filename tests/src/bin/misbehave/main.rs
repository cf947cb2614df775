//! `misbehave`: the child process the childwire conformance suite drives.
//!
//! `misbehave SCENARIO [ARGS...]` behaves in one scripted way, good or bad. Scenarios that echo
//! flush whenever their input buffer is empty, so one message in flight is answered at once and
//! many in flight are answered in batches.
//!
//! | scenario                     | behaviour |
//! |------------------------------|-----------|
//! | `echo`                       | echo every stdin line; exit 0 at stdin EOF |
//! | `echo-crlf`                  | echo, ending output lines with `\r\n` |
//! | `flood N [LEN]`              | write N numbered lines of LEN (100) bytes, then echo |
//! | `long-line N`                | N bytes of `a` without newline (64 KiB writes), `\n`, `{"after":"long"}`, then echo |
//! | `invalid-utf8`               | lines of invalid UTF-8, then `{"valid":true}`, then echo |
//! | `blank-lines`                | `\n\n{"a":1}\n\r\n\n{"b":2}\n`, then echo |
//! | `exit-after N CODE`          | write N lines `{"n":I}`, exit with CODE without reading stdin |
//! | `read-bytes N`               | read N bytes of stdin and exit (0, or 1 if stdin ended first) |
//! | `unterminated`               | `one\ntwo\nlast-without-newline`, exit 0 |
//! | `ignore-eof`                 | echo until EOF, then block forever (SIGTERM ends it) |
//! | `ignore-term`                | ignore SIGTERM (Windows: console control events), print `{"ready":true}`, echo until EOF, block forever |
//! | `tree [ignore-term]`         | start `misbehave branch`, print `{"tree":[BRANCH,LEAF]}` once both run, echo until EOF, block forever: a tree of three processes |
//! | `branch [ignore-term]`       | (the tree's middle) start a sleeper, report `ready LEAF` on stderr, block forever |
//! | `grandchild [ignore-term] [hold-pipes] [setsid\|setpgid\|double-fork]` | start `misbehave sleeper [ignore-term]`, print `{"grandchild":PID}` once it is ready, echo, exit 0 (see below) |
//! | `sleeper [ignore-term]`      | (the grandchild) report ready on stderr, block forever |
//! | `grandchild setsid hold-stdin [ignore-term]` | as `grandchild`, but the grandchild holds the child's stdin only (its stdout is null): a holder no check of the pipes the child writes finds |
//! | `grandchild setsid hold-pipes hop` | as `grandchild`, but the grandchild keeps changing its PID: it forks, the parent exits, the new process does the same, 200 times a second at most, holding the pipes all along, for at most 15 s (the PID printed is its first; every process of the line stays in its process group) |
//! | `sleeper [hop]`              | (the grandchild) with `hop`: after saying ready, fork and exit forever (see above) |
//! | `grandchild setsid\|setpgid reopen-stdout-rw\|reopen-stderr-rw` | as `grandchild`, but the sleeper opens its parent's stdout (or stderr) anew, read-write, through `/proc/PPID/fd/N` (Linux), then closes its own stdio: a holder no write-only check finds |
//! | `daemonize [ignore-term]`    | (the double fork's middle) start a `setsid` sleeper with this stdin/stdout, write its PID to stderr, exit 0 |
//!
//! The grandchild escapes its parent's process group with `setsid` (a new session, as Python's
//! `start_new_session=True`), `setpgid` (`setpgid(0, 0)`, a new group in the same session) or
//! `double-fork` (a daemon: started `setsid` by a middle process that exits at once, so it is
//! re-parented away from the child). With `hold-pipes` it inherits the child's stdin and stdout
//! (the transport's pipes); without, it holds none of them. The escapes are Unix's; elsewhere
//! they are usage errors.
//! | `stderr-flood MIB`           | write MIB MiB to stderr from a thread while echoing; `{"stderr_done":BYTES}` when written, `{"stderr_failed":..}` if a write fails |
//! | `no-read`                    | print `{"ready":true}`, block forever without reading stdin |
//! | `spin`                       | print `{"spinning":true}`, then compute forever (one core busy) without reading stdin or writing |
//! | `fail-start`                 | `Error: Cannot find module 'x'` on stderr, exit 1 |
//! | `slow-start N MS`            | N stderr lines `starting I of N`, one every MS ms (a first `npx -y` run), then `{"ready":true}`, then echo |
//! | `stderr-then-exit CODE`      | three stderr lines, exit with CODE |
//! | `stderr-lines N CODE`        | N stderr lines `line I of a chatty server` (I from 0), exit with CODE |
//! | `stderr-levels`              | three log lines on stderr (JSON-lines `warn`, pino `50`, `INFO:` prefix), exit 0 |
//! | `echo-then-log CODE`         | echo until EOF, then `INFO: echoed N lines` and a JSON-lines `error` record on stderr, exit with CODE |
//! | `print-env`                  | one `KEY=VALUE` line per variable (sorted), exit 0 |
//! | `print-cwd`                  | `cwd=PATH`, exit 0 |
//! | `print-args ARGS...`         | one `[I]=ARG` line per argument, exit 0 |
//! | `print-pgid`                 | `{"pid":P,"pgid":G}`, exit 0 |
//! | `print-stderr`               | `stderr=TARGET`, what fd 2 is (`/dev/null`, `pipe:[N]`, ...; Linux), exit 0 |
//! | `slow-reader`                | echo one line per 10 ms |
//! | `garbage BYTES SEED`         | BYTES pseudo-random bytes (dense in `\n`, `\r`, invalid UTF-8), `\n{"after":"garbage"}`, echo |
//! | `banner`                     | `Starting server on stdio...` and `Listening for JSON-RPC on stdin`, then echo (stdout pollution) |
//! | `polite lsp\|dap`             | echo, but answer LSP's `shutdown` (then exit 0 on `exit`, 1 on `exit` without `shutdown`) or DAP's `disconnect` (then exit 0); exit 3 at stdin EOF |
//! | `lsp`                        | three Content-Length frames `{"jsonrpc":"2.0","method":"n","params":I}` (an LSP server), then echo |
//! | `mcp`                        | a small MCP server for the share's tests: `slow`, `flood`, `crash` and `stats` tools, cancellations recorded (see `mcp.rs`) |
//! | `content-length-lie KIND`    | Content-Length framing: one lie (`short`: a header claiming fewer bytes than its body; `over-long`: a 9000-byte header block; `lf-only`: every other frame's header lines end with `\n`), then 20 good frames `{"jsonrpc":"2.0","method":"n","params":I}`, exit 0 |
//!
//! "Block forever" never ends on its own: only a signal does. Write errors (the reader went away)
//! end the program with code 1.

// The workspace denies unsafe code. This program needs a few OS calls std does not offer
// (ignoring SIGTERM or Windows' console control events, reading its own process group); they are
// in `unix.rs`, each with its SAFETY note, and nothing else here is unsafe.
#![allow(unsafe_code)]

mod content_length;
mod echo;
mod mcp;
mod polite;
mod unix;

use std::ffi::OsString;
use std::io::{self, BufRead, BufReader, BufWriter, Read, Write};
use std::process::{Command, Stdio};
use std::str::FromStr;
use std::thread;
use std::time::Duration;

use childwire_conformance::lines::numbered_line;
use echo::{Echo, echo};

const ECHO: Echo = Echo::Lines { eol: b"\n" };

/// How long `sleeper hop` hops before its line ends itself: past any test's wait for it to be
/// ended (`tests/suite/containment.rs` waits 8 s at most), so an escape still fails the test, yet
/// bounded: 3,000 PIDs in all at [`HOP_PAUSE`].
const HOP_LIFETIME: Duration = Duration::from_secs(15);
/// How long each process of `sleeper hop` sleeps before it forks: at most 200 new PIDs a second.
/// The exited ones are re-parented to init and stay zombies until it reaps them (some container
/// inits take a second or more): faster hopping fills the PID space of a small machine
/// (`pid_max` 32768) and ends every shell on it.
const HOP_PAUSE: Duration = Duration::from_millis(5);

fn main() {
    let args: Vec<OsString> = std::env::args_os().skip(1).collect();
    let code = match run(&args) {
        Ok(code) => code,
        Err(Failure::Usage(why)) => {
            // stderr may be closed too; there is no one else to tell.
            let _ = writeln!(io::stderr(), "misbehave: {why}\nsee the table in main.rs");
            2
        }
        Err(Failure::Io(err)) => {
            let _ = writeln!(io::stderr(), "misbehave: {err}");
            1
        }
    };
    std::process::exit(code)
}

enum Failure {
    Usage(String),
    Io(io::Error),
}

impl From<io::Error> for Failure {
    fn from(err: io::Error) -> Self {
        Failure::Io(err)
    }
}

fn run(args: &[OsString]) -> Result<i32, Failure> {
    let Some((scenario, rest)) = args.split_first() else {
        return Err(Failure::Usage("no scenario given".into()));
    };
    let scenario = scenario
        .to_str()
        .ok_or_else(|| Failure::Usage("scenario name is not UTF-8".into()))?;
    match scenario {
        "echo" => echo(ECHO)?,
        "mcp" => mcp::serve()?,
        "echo-crlf" => echo(Echo::Lines { eol: b"\r\n" })?,
        "answer" => {
            let pause_ms: u64 = number(rest, 0, "PAUSE_MS", Some(0))?;
            echo::answer(Duration::from_millis(pause_ms))?;
        }
        "flood" => {
            flood(
                number(rest, 0, "N", None)?,
                number(rest, 1, "LEN", Some(100))?,
            )?;
            echo(ECHO)?;
        }
        "long-line" => {
            long_line(number(rest, 0, "N", None)?)?;
            echo(ECHO)?;
        }
        "invalid-utf8" => {
            say(b"\xff\xfe bad\n{\"s\":\"\xc3\x28\"}\n\xed\xa0\x80 surrogate\n{\"valid\":true}\n")?;
            echo(ECHO)?;
        }
        "banner" => {
            say(b"Starting server on stdio...\nListening for JSON-RPC on stdin\n")?;
            echo(ECHO)?;
        }
        "polite" => {
            let protocol = match rest.first().and_then(|arg| arg.to_str()) {
                Some("lsp") => polite::Protocol::Lsp,
                Some("dap") => polite::Protocol::Dap,
                _ => return Err(Failure::Usage("polite needs `lsp` or `dap`".into())),
            };
            return Ok(polite::polite(protocol)?);
        }
        "lsp" => {
            content_length::good_frames(3)?;
            echo(ECHO)?;
        }
        "blank-lines" => {
            say(b"\n\n{\"a\":1}\n\r\n\n{\"b\":2}\n")?;
            echo(ECHO)?;
        }
        "exit-after" => {
            let lines: u64 = number(rest, 0, "N", None)?;
            let code = number(rest, 1, "CODE", None)?;
            let mut out = BufWriter::new(io::stdout().lock());
            for n in 0..lines {
                writeln!(out, "{{\"n\":{n}}}")?;
            }
            out.flush()?;
            return Ok(code);
        }
        "read-bytes" => {
            let want: u64 = number(rest, 0, "N", None)?;
            let got = io::copy(&mut io::stdin().lock().take(want), &mut io::sink())?;
            return Ok(if got == want { 0 } else { 1 });
        }
        "unterminated" => say(b"one\ntwo\nlast-without-newline")?,
        "ignore-eof" => {
            echo(ECHO)?;
            block_forever();
        }
        "ignore-term" => {
            unix::ignore_sigterm()?;
            say(b"{\"ready\":true}\n")?;
            echo(ECHO)?;
            block_forever();
        }
        "grandchild" => {
            let flags = Flags::parse(
                rest,
                &[
                    "ignore-term",
                    "hold-pipes",
                    "setsid",
                    "setpgid",
                    "double-fork",
                    "reopen-stdout-rw",
                    "reopen-stderr-rw",
                    "hold-stdin",
                    "hop",
                ],
            )?;
            let escape = if flags.has("setsid") {
                Escape::Setsid
            } else if flags.has("setpgid") {
                Escape::Setpgid
            } else {
                Escape::Stay
            };
            if !cfg!(unix) && (!matches!(escape, Escape::Stay) || flags.has("double-fork")) {
                return Err(Failure::Usage(
                    "setsid, setpgid and double-fork are Unix's".into(),
                ));
            }
            let reopen = ["reopen-stdout-rw", "reopen-stderr-rw"]
                .into_iter()
                .find(|flag| flags.has(flag));
            if reopen.is_some() && (!cfg!(target_os = "linux") || matches!(escape, Escape::Stay)) {
                return Err(Failure::Usage(
                    "reopen-*-rw needs /proc (Linux) and setsid or setpgid".into(),
                ));
            }
            if (flags.has("hold-stdin") || flags.has("hop"))
                && !(cfg!(unix) && matches!(escape, Escape::Setsid))
            {
                return Err(Failure::Usage(
                    "hold-stdin and hop need setsid (Unix)".into(),
                ));
            }
            let pid = if flags.has("hold-stdin") {
                let mut args = vec!["sleeper"];
                if flags.has("ignore-term") {
                    args.push("ignore-term");
                }
                start_holding(&args, Hold::Stdin, escape)?.0
            } else if flags.has("hop") {
                let hold = if flags.has("hold-pipes") {
                    Hold::Both
                } else {
                    Hold::None
                };
                start_holding(&["sleeper", "hop"], hold, escape)?.0
            } else if let Some(reopen) = reopen {
                let mut args = vec!["sleeper", reopen];
                if flags.has("ignore-term") {
                    args.push("ignore-term");
                }
                start_waiting(&args, false, escape)?.0
            } else if flags.has("double-fork") {
                daemonize_grandchild(flags.has("ignore-term"), flags.has("hold-pipes"))?
            } else {
                start_grandchild(flags.has("ignore-term"), flags.has("hold-pipes"), escape)?
            };
            say(format!("{{\"grandchild\":{pid}}}\n").as_bytes())?;
            echo(ECHO)?;
        }
        "daemonize" => {
            let ignore_term = Flags::parse(rest, &["ignore-term"])?.has("ignore-term");
            // stdin and stdout are the child's, passed on: the daemon holds them.
            let pid = start_grandchild(ignore_term, true, Escape::Setsid)?;
            // stderr is the child's private pipe for this one line.
            writeln!(io::stderr(), "{pid}")?;
        }
        "sleeper" => {
            let flags = Flags::parse(
                rest,
                &["ignore-term", "reopen-stdout-rw", "reopen-stderr-rw", "hop"],
            )?;
            if flags.has("ignore-term") {
                unix::ignore_sigterm()?;
            }
            // The parent's pipe, opened anew read-write: held until the end.
            let held = if flags.has("reopen-stdout-rw") {
                Some(reopen_parents_rw(1)?)
            } else if flags.has("reopen-stderr-rw") {
                Some(reopen_parents_rw(2)?)
            } else {
                None
            };
            // stderr is the parent's private readiness pipe (see `start_grandchild`).
            writeln!(io::stderr(), "ready")?;
            if held.is_some() {
                unix::close_stdio();
            }
            if flags.has("hop") {
                unix::hop_forever(HOP_PAUSE, HOP_LIFETIME);
            }
            block_forever();
        }
        "tree" => {
            let ignore_term = Flags::parse(rest, &["ignore-term"])?.has("ignore-term");
            let mut args = vec!["branch"];
            if ignore_term {
                unix::ignore_sigterm()?;
                args.push("ignore-term");
            }
            let (branch, leaf) = start_waiting(&args, false, Escape::Stay)?;
            let leaf: u32 = leaf
                .parse()
                .map_err(|_| io::Error::other(format!("the branch said ready {leaf:?}")))?;
            say(format!("{{\"tree\":[{branch},{leaf}]}}\n").as_bytes())?;
            echo(ECHO)?;
            block_forever();
        }
        "branch" => {
            let ignore_term = Flags::parse(rest, &["ignore-term"])?.has("ignore-term");
            if ignore_term {
                unix::ignore_sigterm()?;
            }
            let leaf = start_grandchild(ignore_term, false, Escape::Stay)?;
            // stderr is the tree's private readiness pipe, as for a sleeper.
            writeln!(io::stderr(), "ready {leaf}")?;
            block_forever();
        }
        "stderr-flood" => {
            let mib: u64 = number(rest, 0, "MIB", None)?;
            thread::spawn(move || flood_stderr(mib * 1024 * 1024));
            echo(ECHO)?;
        }
        "no-read" => {
            say(b"{\"ready\":true}\n")?;
            block_forever();
        }
        "spin" => {
            say(b"{\"spinning\":true}\n")?;
            spin();
        }
        "fail-start" => {
            writeln!(io::stderr(), "Error: Cannot find module 'x'")?;
            return Ok(1);
        }
        "slow-start" => {
            let lines: u64 = number(rest, 0, "N", None)?;
            let pause = Duration::from_millis(number(rest, 1, "MS", None)?);
            for i in 1..=lines {
                thread::sleep(pause);
                writeln!(io::stderr(), "starting {i} of {lines}")?;
            }
            say(b"{\"ready\":true}\n")?;
            echo(ECHO)?;
        }
        "stderr-lines" => {
            let lines: u64 = number(rest, 0, "N", None)?;
            let code = number(rest, 1, "CODE", None)?;
            let mut err = io::stderr().lock();
            for i in 0..lines {
                writeln!(err, "line {i} of a chatty server")?;
            }
            return Ok(code);
        }
        "stderr-then-exit" => {
            let code = number(rest, 0, "CODE", None)?;
            let mut err = io::stderr().lock();
            for i in 1..=3 {
                writeln!(err, "stderr line {i} of 3")?;
            }
            return Ok(code);
        }
        "stderr-levels" => {
            let mut err = io::stderr().lock();
            writeln!(err, r#"{{"level":"warn","message":"disk almost full"}}"#)?;
            writeln!(
                err,
                r#"{{"level":50,"time":1,"pid":7,"msg":"tool failed"}}"#
            )?;
            writeln!(err, "INFO: listening on stdio")?;
            return Ok(0);
        }
        "echo-then-log" => {
            let code = number(rest, 0, "CODE", None)?;
            let lines = echo_counted()?;
            let mut err = io::stderr().lock();
            writeln!(err, "INFO: echoed {lines} lines")?;
            writeln!(err, r#"{{"level":"error","msg":"bye"}}"#)?;
            return Ok(code);
        }
        "print-env" => {
            let mut vars: Vec<(OsString, OsString)> = std::env::vars_os().collect();
            vars.sort();
            let lines: Vec<Vec<u8>> = vars.iter().map(|(k, v)| env_line(k, v)).collect();
            say_lines(&lines)?;
        }
        "print-cwd" => {
            let cwd = std::env::current_dir()?;
            say_lines(&[[b"cwd=".as_slice(), &unix::os_bytes(cwd.as_os_str())].concat()])?;
        }
        "print-args" => {
            let lines: Vec<Vec<u8>> = rest
                .iter()
                .enumerate()
                .map(|(i, arg)| [format!("[{i}]=").into_bytes(), unix::os_bytes(arg)].concat())
                .collect();
            say_lines(&lines)?;
        }
        "print-pgid" => {
            let line = format!(
                "{{\"pid\":{},\"pgid\":{}}}\n",
                std::process::id(),
                unix::pgid()?
            );
            say(line.as_bytes())?;
        }
        "print-stderr" => {
            let target = std::fs::read_link("/proc/self/fd/2")?;
            say_lines(&[[b"stderr=".as_slice(), &unix::os_bytes(target.as_os_str())].concat()])?;
        }
        "slow-reader" => echo(Echo::Slow {
            pause: Duration::from_millis(10),
        })?,
        "garbage" => {
            let bytes = garbage(
                number(rest, 0, "BYTES", None)?,
                number(rest, 1, "SEED", None)?,
            );
            say(&bytes)?;
            say(b"\n{\"after\":\"garbage\"}\n")?;
            echo(ECHO)?;
        }
        "content-length-lie" => {
            let kind = rest.first().and_then(|kind| kind.to_str()).unwrap_or("");
            let lie = content_length::Lie::parse(kind).ok_or_else(|| {
                Failure::Usage(format!(
                    "content-length-lie takes short, over-long or lf-only, got {kind:?}"
                ))
            })?;
            content_length::lie_then_good_frames(lie)?;
        }
        other => return Err(Failure::Usage(format!("unknown scenario {other:?}"))),
    }
    Ok(0)
}

/// Writes and flushes at once, so the reader sees it without waiting for more.
/// Echoes stdin lines, each flushed at once, until EOF; how many there were.
fn echo_counted() -> io::Result<u64> {
    let mut lines = 0;
    for line in io::stdin().lock().split(b'\n') {
        let mut line = line?;
        line.push(b'\n');
        say(&line)?;
        lines += 1;
    }
    Ok(lines)
}

fn say(bytes: &[u8]) -> io::Result<()> {
    let mut out = io::stdout().lock();
    out.write_all(bytes)?;
    out.flush()
}

fn say_lines(lines: &[Vec<u8>]) -> io::Result<()> {
    let mut out = BufWriter::new(io::stdout().lock());
    for line in lines {
        out.write_all(line)?;
        out.write_all(b"\n")?;
    }
    out.flush()
}

/// Computes forever: CPU time advances, nothing is read or written.
fn spin() -> ! {
    let mut x: u64 = 1;
    loop {
        x = std::hint::black_box(x.wrapping_mul(6_364_136_223_846_793_005).wrapping_add(1));
    }
}

fn block_forever() -> ! {
    loop {
        thread::park();
    }
}

/// Argument `index` parsed as a number, or `default` when it is absent.
fn number<T: FromStr>(
    rest: &[OsString],
    index: usize,
    name: &str,
    default: Option<T>,
) -> Result<T, Failure> {
    match rest.get(index) {
        None => default.ok_or_else(|| Failure::Usage(format!("missing argument {name}"))),
        Some(arg) => arg
            .to_str()
            .and_then(|s| s.parse().ok())
            .ok_or_else(|| Failure::Usage(format!("{name} must be a number, got {arg:?}"))),
    }
}

/// Optional words after a scenario name, each from a known set.
struct Flags(Vec<String>);

impl Flags {
    fn parse(rest: &[OsString], known: &[&str]) -> Result<Flags, Failure> {
        let mut flags = Vec::new();
        for arg in rest {
            match arg.to_str() {
                Some(flag) if known.contains(&flag) => flags.push(flag.to_owned()),
                _ => {
                    return Err(Failure::Usage(format!(
                        "unknown flag {arg:?}, expected {known:?}"
                    )));
                }
            }
        }
        Ok(Flags(flags))
    }

    fn has(&self, flag: &str) -> bool {
        self.0.iter().any(|f| f == flag)
    }
}

fn flood(lines: u64, len: usize) -> io::Result<()> {
    let mut out = BufWriter::with_capacity(64 * 1024, io::stdout().lock());
    for n in 0..lines {
        out.write_all(&numbered_line(n, len))?;
        out.write_all(b"\n")?;
    }
    out.flush()
}

fn long_line(len: u64) -> io::Result<()> {
    const CHUNK: usize = 64 * 1024;
    let chunk = [b'a'; CHUNK];
    let mut out = io::stdout().lock();
    let mut left = len;
    while left > 0 {
        let n = usize::try_from(left).map_or(CHUNK, |left| left.min(CHUNK));
        out.write_all(&chunk[..n])?;
        left -= n as u64;
    }
    out.write_all(b"\n{\"after\":\"long\"}\n")?;
    out.flush()
}

/// Where the grandchild goes relative to its parent's process group.
#[derive(Clone, Copy)]
enum Escape {
    /// It stays in the group, as a launcher's children do.
    Stay,
    /// A new session (and group): `setsid()`.
    Setsid,
    /// A new group in the same session: `setpgid(0, 0)`.
    Setpgid,
}

/// Starts `misbehave sleeper` and returns its PID once it is ready (signal disposition set), so a
/// test never races the grandchild's own startup.
///
/// Unless `hold_pipes`, the grandchild gets null stdin/stdout: it then cannot keep our pipes (and
/// the transport's) open after we exit. Its stderr is a private pipe for the readiness line only.
fn start_grandchild(ignore_term: bool, hold_pipes: bool, escape: Escape) -> io::Result<u32> {
    let mut args = vec!["sleeper"];
    if ignore_term {
        args.push("ignore-term");
    }
    start_waiting(&args, hold_pipes, escape).map(|(pid, _)| pid)
}

/// Starts `misbehave ARGS` (a scenario that says `ready[ REST]` on stderr and blocks) as in
/// [`start_grandchild`]; its PID and REST once it said so.
fn start_waiting(args: &[&str], hold_pipes: bool, escape: Escape) -> io::Result<(u32, String)> {
    let hold = if hold_pipes { Hold::Both } else { Hold::None };
    start_holding(args, hold, escape)
}

/// Which of our stdin and stdout a grandchild inherits (the others are null).
#[derive(Clone, Copy)]
enum Hold {
    None,
    Stdin,
    Both,
}

/// [`start_waiting`], the grandchild holding `hold` of our stdin and stdout.
fn start_holding(args: &[&str], hold: Hold, escape: Escape) -> io::Result<(u32, String)> {
    let mut cmd = Command::new(std::env::current_exe()?);
    cmd.args(args);
    match hold {
        Hold::None => {
            cmd.stdin(Stdio::null()).stdout(Stdio::null());
        }
        Hold::Stdin => {
            cmd.stdout(Stdio::null());
        }
        Hold::Both => {}
    }
    cmd.stderr(Stdio::piped());
    match escape {
        Escape::Stay => {}
        #[cfg(unix)]
        Escape::Setsid => unix::setsid_on_spawn(&mut cmd),
        #[cfg(unix)]
        Escape::Setpgid => {
            use std::os::unix::process::CommandExt;
            cmd.process_group(0);
        }
        #[cfg(not(unix))]
        Escape::Setsid | Escape::Setpgid => {
            return Err(io::Error::new(
                io::ErrorKind::Unsupported,
                "setsid and setpgid are Unix's",
            ));
        }
    }
    let mut child = cmd.spawn()?;
    let stderr = child
        .stderr
        .take()
        .ok_or_else(|| io::Error::other("grandchild has no stderr pipe"))?;
    let mut ready = String::new();
    BufReader::new(stderr).read_line(&mut ready)?;
    let rest = match ready.trim_end().strip_prefix("ready") {
        Some("") => "",
        Some(rest) if rest.starts_with(' ') => &rest[1..],
        _ => return Err(io::Error::other(format!("grandchild said {ready:?}"))),
    };
    // Not waited for on purpose: it is meant to outlive us, as a launcher's child would.
    Ok((child.id(), rest.to_owned()))
}

/// The parent's descriptor `fd` opened anew, read-write, through `/proc` (for a pipe, a new open
/// file on the same pipe, with both access modes).
#[cfg(unix)]
fn reopen_parents_rw(fd: u32) -> io::Result<std::fs::File> {
    let parent = std::os::unix::process::parent_id();
    std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .open(format!("/proc/{parent}/fd/{fd}"))
}

/// `/proc` is Linux's (the scenario refuses these flags elsewhere).
#[cfg(not(unix))]
fn reopen_parents_rw(_fd: u32) -> io::Result<std::fs::File> {
    Err(io::Error::new(io::ErrorKind::Unsupported, "no /proc here"))
}

/// The double fork of a daemon: `misbehave daemonize` starts the `setsid` sleeper (with our
/// stdin/stdout when `hold_pipes`), reports its PID on a private pipe and exits; we reap it, so the
/// sleeper is left without its parent, re-parented to init (or the nearest subreaper).
fn daemonize_grandchild(ignore_term: bool, hold_pipes: bool) -> io::Result<u32> {
    let mut cmd = Command::new(std::env::current_exe()?);
    cmd.arg("daemonize");
    if ignore_term {
        cmd.arg("ignore-term");
    }
    if !hold_pipes {
        cmd.stdin(Stdio::null()).stdout(Stdio::null());
    }
    let mut middle = cmd.stderr(Stdio::piped()).spawn()?;
    let stderr = middle
        .stderr
        .take()
        .ok_or_else(|| io::Error::other("the middle process has no stderr pipe"))?;
    let mut line = String::new();
    BufReader::new(stderr).read_line(&mut line)?;
    let status = middle.wait()?;
    if !status.success() {
        return Err(io::Error::other(format!("daemonize failed: {status}")));
    }
    line.trim_end()
        .parse()
        .map_err(|_| io::Error::other(format!("daemonize said {line:?}")))
}

/// Writes `total` bytes of 1 KiB lines to stderr, then tells stdout it is done. If nobody drains
/// stderr this blocks, and the `stderr_done` line never comes; if writing fails, a
/// `{"stderr_failed":"REASON","after":BYTES}` line comes instead.
fn flood_stderr(total: u64) {
    let mut line = b"stderr flood line ".to_vec();
    line.resize(1023, b'~');
    line.push(b'\n');
    let chunk = line.repeat(64);
    let mut written = 0u64;
    let mut err = io::stderr();
    while written < total {
        let n = usize::try_from(total - written).map_or(chunk.len(), |left| left.min(chunk.len()));
        if let Err(e) = err.write_all(&chunk[..n]) {
            // Say so on stdout: a test waiting for "stderr_done" then fails with the reason.
            let _ = say(format!("{{\"stderr_failed\":\"{e}\",\"after\":{written}}}\n").as_bytes());
            return;
        }
        written += n as u64;
    }
    let _ = say(format!("{{\"stderr_done\":{written}}}\n").as_bytes());
}

/// `KEY=VALUE`, with line breaks inside the value escaped so one variable stays one line.
fn env_line(key: &std::ffi::OsStr, value: &std::ffi::OsStr) -> Vec<u8> {
    let mut line = unix::os_bytes(key);
    line.push(b'=');
    for &b in &unix::os_bytes(value) {
        match b {
            b'\n' => line.extend_from_slice(b"\\n"),
            b'\r' => line.extend_from_slice(b"\\r"),
            _ => line.push(b),
        }
    }
    line
}

/// Deterministic bytes for a seed, dense in what trips framers: `\n`, `\r`, `\r\n`, empty lines,
/// invalid UTF-8.
fn garbage(len: usize, seed: u64) -> Vec<u8> {
    let mut state = seed | 1;
    let mut next = move || {
        // xorshift64: good enough to scatter bytes, and reproducible from the seed.
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        state
    };
    (0..len)
        .map(|_| {
            let r = next();
            match r % 16 {
                0 | 1 => b'\n',
                2 => b'\r',
                3 => 0xff,
                _ => (r >> 8) as u8,
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn os(args: &[&str]) -> Vec<OsString> {
        args.iter().map(OsString::from).collect()
    }

    #[test]
    fn numbers_parse_with_defaults_and_reject_junk() {
        let rest = os(&["12", "x"]);
        assert_eq!(number::<u64>(&rest, 0, "N", None).ok(), Some(12));
        assert!(number::<u64>(&rest, 1, "LEN", Some(5)).is_err());
        assert_eq!(number::<usize>(&rest, 2, "LEN", Some(5)).ok(), Some(5));
        assert!(number::<u64>(&rest, 2, "N", None).is_err());
        assert_eq!(number::<i32>(&os(&["-3"]), 0, "CODE", None).ok(), Some(-3));
    }

    #[test]
    fn flags_accept_known_words_in_any_order() {
        let flags = Flags::parse(
            &os(&["hold-pipes", "ignore-term"]),
            &["ignore-term", "hold-pipes"],
        )
        .ok()
        .expect("known flags");
        assert!(flags.has("ignore-term") && flags.has("hold-pipes"));
        assert!(Flags::parse(&os(&["bogus"]), &["ignore-term"]).is_err());
        assert!(
            !Flags::parse(&[], &["ignore-term"])
                .ok()
                .expect("empty")
                .has("ignore-term")
        );
    }

    #[test]
    fn env_lines_stay_single_lines() {
        let line = env_line("K".as_ref(), "a\nb\rc=d".as_ref());
        assert_eq!(line, b"K=a\\nb\\rc=d");
    }

    #[test]
    fn garbage_is_reproducible_and_dense_in_framing_bytes() {
        let a = garbage(100_000, 7);
        assert_eq!(a, garbage(100_000, 7));
        assert_ne!(a, garbage(100_000, 8));
        let newlines = a.iter().filter(|&&b| b == b'\n').count();
        let crs = a.iter().filter(|&&b| b == b'\r').count();
        assert!(
            newlines > 10_000 && crs > 5_000,
            "{newlines} newlines, {crs} CRs"
        );
        assert!(std::str::from_utf8(&a).is_err());
    }
}
