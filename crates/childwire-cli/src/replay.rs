//! `childwire replay FILE`: a fake server made of a recording.
//!
//! The process stands in for the server recorded in FILE (`relay --log`,
//! or the wire tap): it reads NDJSON messages on stdin and answers each the
//! way the recorded server did, ids rewritten (the matching is
//! [`childwire_replay::Replayer`]'s), writes the recorded stderr lines to
//! stderr, and exits with the recorded code when its stdin closes (or where
//! the recorded server exited on its own). Any host on any runtime, in any
//! language, can run it in the server's place.
//!
//! Plain blocking I/O on one thread: the replay only ever answers what it
//! reads, so there is nothing to do concurrently.

use std::ffi::OsString;
use std::fs::File;
use std::io::{self, BufReader, Read, Write};
use std::path::PathBuf;
use std::process::ExitCode;

use childwire_core::{Frame, LineDecoder};
use childwire_replay::{Limits, Output, RecordedExit, Recording, Replayer};

use crate::cli::{ArgWalker, Parsed, UsageError};
use crate::relay::options::parse_size;

/// The help text.
pub const USAGE: &str = "\
Usage: childwire replay [OPTIONS] [--] FILE

Acts as the server recorded in FILE (written by `childwire relay --log`
or the wire tap): reads messages on stdin, one JSON-RPC message per line,
and answers each the way the recorded server did. A request is matched to
a recorded one with the same method that names the same thing (the tool of
tools/call, the prompt of prompts/get, the uri of resources/read), else to
the next one of its method by rank, and a line on stderr says so; other
requests match by rank (the second ping gets the answer to the second
recorded ping). Each response carries the live request's id. What the
server sent before the first request (banners, notifications) comes at
once; the recorded stderr lines go to stderr. A request the recording does
not have gets JSON-RPC error -32601 naming it, and a line on stderr. When
stdin closes, it exits with the recorded exit code (or dies of the
recorded signal); a server that exited on its own in the recording exits
where it did.

A recording of a supervised server holds one generation per child it
started; the first is replayed unless --generation picks another.

Options:
  --generation N   replay generation N of the recording (from 1)
  --max-size SIZE  refuse a recording larger than SIZE bytes (default 1GiB;
                   KiB, MiB and GiB suffixes work)
  -h, --help       print this help

Example:
  childwire relay --log session.ndjson -- npx -y @modelcontextprotocol/server-everything
  childwire replay session.ndjson
";

/// Longest message read from the host: the relay's default, so what the
/// relay let through replays.
const MAX_MESSAGE_SIZE: usize = crate::relay::options::DEFAULT_MAX_MESSAGE_SIZE;

/// What the user asked for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReplayOptions {
    /// The recording to replay.
    pub recording: PathBuf,
    /// The generation to replay, from 1; `None`: the first.
    pub generation: Option<usize>,
    /// The most bytes read from the recording.
    pub max_size: u64,
}

/// Parses `childwire replay`'s arguments.
pub fn parse(args: Vec<OsString>) -> Result<Parsed<ReplayOptions>, UsageError> {
    let mut args = ArgWalker::new(args);
    let mut generation = None;
    let mut max_size = Limits::default().max_file_size;
    while let Some(option) = args.next_option()? {
        match option.as_str() {
            "-h" | "--help" => return Ok(Parsed::Help),
            "--generation" => {
                let text = args.value("--generation")?;
                let n = text
                    .parse::<usize>()
                    .ok()
                    .filter(|&n| n > 0)
                    .ok_or_else(|| {
                        UsageError(format!(
                            "--generation expects a generation number from 1, got `{text}`"
                        ))
                    })?;
                generation = Some(n);
            }
            "--max-size" => {
                let text = args.value("--max-size")?;
                max_size = parse_size("--max-size", &text)? as u64;
            }
            other => return Err(UsageError(format!("unknown option `{other}`"))),
        }
    }
    let Some(command) = args.into_command() else {
        return Err(UsageError(
            "missing the recording (childwire replay FILE)".into(),
        ));
    };
    if let Some(extra) = command.args.first() {
        return Err(UsageError(format!(
            "unexpected argument `{}` after the recording",
            extra.to_string_lossy()
        )));
    }
    Ok(Parsed::Run(ReplayOptions {
        recording: command.program.into(),
        generation,
        max_size,
    }))
}

/// `childwire replay ARGS`: the whole command, exit code included.
pub fn main(args: Vec<OsString>) -> ExitCode {
    let options = match parse(args) {
        Ok(Parsed::Run(options)) => options,
        Ok(Parsed::Help) => {
            let _ = io::stdout().write_all(USAGE.as_bytes());
            return ExitCode::SUCCESS;
        }
        Err(err) => {
            note!("childwire replay: {err} (see --help)");
            return ExitCode::from(2);
        }
    };
    let recording = match read(&options) {
        Ok(recording) => recording,
        Err(err) => {
            note!("childwire replay: {err}");
            return ExitCode::FAILURE;
        }
    };
    let exit = serve(
        Replayer::new(recording),
        io::stdin().lock(),
        io::stdout().lock(),
    );
    end(&exit)
}

/// The recording `options` name, read record by record within the limits,
/// the generation asked for taken out.
fn read(options: &ReplayOptions) -> Result<Recording, String> {
    let path = options.recording.display();
    let file =
        File::open(&options.recording).map_err(|err| format!("cannot read {path}: {err}"))?;
    let limits = Limits {
        max_file_size: options.max_size,
        ..Limits::default()
    };
    let recording =
        Recording::read(BufReader::with_capacity(64 * 1024, file), &limits).map_err(|err| {
            let hint = if err.reason.contains("larger than the limit") {
                " (raise it with --max-size)"
            } else {
                ""
            };
            format!("{path}: {err}{hint}")
        })?;
    let Some(n) = options.generation else {
        return Ok(recording);
    };
    let count = recording.generations();
    recording
        .into_generations()
        .into_iter()
        .nth(n - 1)
        .ok_or_else(|| format!("{path}: no generation {n}: the recording holds {count}"))
}

/// Plays `replayer` over `input` and `output` until it exits; returns how.
///
/// A host that stops reading (a closed stdout) does not stop the replay:
/// it goes on until its stdin closes, as a server would.
pub fn serve(mut replayer: Replayer, mut input: impl Read, mut output: impl Write) -> RecordedExit {
    let mut decoder = LineDecoder::new(MAX_MESSAGE_SIZE);
    let mut chunk = vec![0; 64 * 1024];
    write_notes(&mut replayer);
    loop {
        if let Some(exit) = write_outputs(&mut replayer, &mut output) {
            return exit;
        }
        let read = match input.read(&mut chunk) {
            Ok(read) => read,
            Err(err) if err.kind() == io::ErrorKind::Interrupted => continue,
            Err(err) => {
                note!("childwire replay: reading stdin failed, ending as at its end: {err}");
                0
            }
        };
        if read == 0 {
            decoder.handle_eof();
        } else {
            decoder.handle_data(&chunk[..read]);
        }
        while let Some(frame) = decoder.poll_frame() {
            match frame {
                Frame::Message(message) => {
                    replayer.handle_message(&message);
                    // Answered first, so that stderr says things in order.
                    let exit = write_outputs(&mut replayer, &mut output);
                    write_notes(&mut replayer);
                    if let Some(exit) = exit {
                        return exit;
                    }
                }
                Frame::Oversized(notice) => {
                    note!("childwire replay: dropped a message from the host: {notice}");
                }
                other => note!("childwire replay: {other:?}"),
            }
        }
        if read == 0 {
            replayer.handle_eof();
        }
    }
}

/// Says on stderr what a person should know about the replay.
fn write_notes(replayer: &mut Replayer) {
    while let Some(note) = replayer.poll_note() {
        note!("childwire replay: {note}");
    }
}

/// Writes out what the replayer has to say; the exit, when that comes.
fn write_outputs(replayer: &mut Replayer, output: &mut impl Write) -> Option<RecordedExit> {
    let mut exit = None;
    while let Some(next) = replayer.poll_output() {
        // Write errors are the host's business (it closed our stdout):
        // ignored, as a server that does not check would.
        match next {
            Output::Message(message) => {
                let _ = output.write_all(&message);
                let _ = output.write_all(b"\n");
            }
            Output::Oversized(len) => {
                let _ = write_filler(output, len);
            }
            Output::Stderr(line) => note!("{line}"),
            Output::Exit(recorded) => exit = Some(recorded),
        }
    }
    let _ = output.flush();
    exit
}

/// A line of `len` bytes standing in for a message the recording only
/// has the size of: a JSON string, so the host's framing sees what it saw.
fn write_filler(output: &mut impl Write, len: u64) -> io::Result<()> {
    let mut left = len.saturating_sub(2);
    output.write_all(b"\"")?;
    let piece = [b'x'; 64 * 1024];
    while left > 0 {
        let now = left.min(piece.len() as u64);
        output.write_all(&piece[..now as usize])?;
        left -= now;
    }
    output.write_all(b"\"\n")
}

/// Ends this process the way the recorded server ended.
fn end(exit: &RecordedExit) -> ExitCode {
    let _ = io::stdout().flush();
    let _ = io::stderr().flush();
    #[cfg(unix)]
    if let childwire_core::Exit::Signal(signo) = exit.exit {
        if let Some(signal) = rustix::process::Signal::from_named_raw(signo) {
            // Dies here unless the signal's default is to go on (SIGCHLD)
            // or it is ignored (SIGPIPE, in a Rust program): then the code
            // a shell would show.
            let _ = rustix::process::kill_process(rustix::process::getpid(), signal);
        }
    }
    ExitCode::from(exit.shell_code())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn recording(lines: &[&str]) -> Replayer {
        Replayer::new(Recording::parse(&lines.join("\n")).unwrap())
    }

    #[test]
    fn serves_a_session_over_byte_streams() {
        let replayer = recording(&[
            r#"{"dir":"from_child","text":"banner"}"#,
            r#"{"dir":"to_child","msg":{"jsonrpc":"2.0","id":1,"method":"ping"}}"#,
            r#"{"dir":"from_child","msg":{"jsonrpc":"2.0","id":1,"result":{}}}"#,
            r#"{"dir":"from_child","oversized":10}"#,
            r#"{"dir":"exit","exit_code":7,"report":"exited with code 7 after stdin was closed"}"#,
        ]);
        // The request arrives in two reads, with a CRLF and a blank line.
        let first: &[u8] = br#"{"jsonrpc":"2.0","id":"a","#;
        let input = first.chain(&b"\"method\":\"ping\"}\r\n\n"[..]);
        let mut output = Vec::new();
        let exit = serve(replayer, input, &mut output);
        assert_eq!(exit.shell_code(), 7);
        assert_eq!(
            String::from_utf8(output).unwrap(),
            "banner\n{\"jsonrpc\":\"2.0\",\"id\":\"a\",\"result\":{}}\n\"xxxxxxxx\"\n"
        );
    }

    #[test]
    fn arguments() {
        let parsed = parse(vec!["s.ndjson".into()]).unwrap();
        assert_eq!(
            parsed,
            Parsed::Run(ReplayOptions {
                recording: "s.ndjson".into(),
                generation: None,
                max_size: 1 << 30,
            })
        );
        let parsed = parse(
            ["--generation", "2", "--max-size=10MiB", "--", "s.ndjson"]
                .map(OsString::from)
                .to_vec(),
        )
        .unwrap();
        assert_eq!(
            parsed,
            Parsed::Run(ReplayOptions {
                recording: "s.ndjson".into(),
                generation: Some(2),
                max_size: 10 << 20,
            })
        );
        for (args, says) in [
            (&["--generation", "0", "f"][..], "from 1"),
            (&["--generation", "x", "f"][..], "`x`"),
            (&["--generation"][..], "needs a value"),
            (&["--max-size", "-1", "f"][..], "positive number"),
        ] {
            let err = parse(args.iter().map(OsString::from).collect()).unwrap_err();
            assert!(err.0.contains(says), "{args:?}: {err}");
        }
        assert_eq!(parse(vec!["--help".into()]).unwrap(), Parsed::Help);
        assert!(
            parse(vec![])
                .unwrap_err()
                .0
                .contains("missing the recording")
        );
        assert!(
            parse(vec!["a".into(), "b".into()])
                .unwrap_err()
                .0
                .contains("`b`")
        );
        assert!(parse(vec!["--log".into()]).unwrap_err().0.contains("--log"));
    }
}
