//! Reading a recording: the NDJSON file `relay --log` and the wire tap
//! write (see `docs/recording.md`).
//!
//! One record per line. Every record has a `dir`; the replay needs these:
//!
//! | `dir` | fields read | becomes |
//! |---|---|---|
//! | `to_child` | `msg` (raw JSON), or `text`, or `oversized` | [`Event::ToChild`], [`Event::OversizedToChild`] |
//! | `from_child` | the same | [`Event::FromChild`], [`Event::OversizedFromChild`] |
//! | `stderr` | `line` | [`Event::Stderr`] |
//! | `exit` | `exit_code`, `signal`, `report` | [`Event::Exit`] |
//!
//! A `generation` record, or any record after an `exit` record, starts the
//! next generation (see [`Recording::generations`]); a `notice` of kind
//! `dropped` counts the records the recorder lost ([`Recording::dropped`]).
//! Timestamps (`t`, `ts`), other notices and anything else a reader does
//! not know are skipped, so recordings from newer writers stay readable.
//!
//! Reading is bounded ([`Limits`]): the file is read record by record, and
//! a record over a limit is refused before anything is allocated for it.

use std::collections::BTreeMap;
use std::fmt;
use std::io;
use std::str::FromStr;

use childwire_core::Exit;
use serde_json::value::RawValue;

/// One recorded event that the replay acts on, in the order recorded.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Event {
    /// A message the host sent the server, byte for byte.
    ToChild(Vec<u8>),
    /// A message the server sent the host, byte for byte.
    FromChild(Vec<u8>),
    /// A message to the server that was dropped for its size, in bytes.
    OversizedToChild(u64),
    /// A message from the server that was dropped for its size, in bytes.
    OversizedFromChild(u64),
    /// A line the server wrote to its stderr, without its line ending.
    Stderr(String),
    /// How the server ended.
    Exit(RecordedExit),
}

/// How the recorded server ended: its `exit` record.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RecordedExit {
    /// How the process ended.
    pub exit: Exit,
    /// The exit report as it was displayed, if recorded.
    pub report: Option<String>,
}

impl RecordedExit {
    /// Whether the server exited by itself, before its stdin was closed (a
    /// crash, a server that quits after an answer), as the report says
    /// ("... on its own ..."). Otherwise it ended once the host let it go
    /// (closed its stdin, or signalled it), and a replay waits for its stdin
    /// to close before it exits.
    #[must_use]
    pub fn on_its_own(&self) -> bool {
        // The report's first clause says how it ended; later ones quote
        // stderr, which may say anything.
        self.report
            .as_deref()
            .and_then(|report| report.split(';').next())
            .is_some_and(|head| head.contains(" on its own"))
    }

    /// The exit code a shell would report for it: the code's low byte, or
    /// 128 + N for signal N.
    #[must_use]
    pub fn shell_code(&self) -> u8 {
        match self.exit {
            // Exit codes are 0..=255 on Unix; keep the low byte as the OS does.
            Exit::Code(code) => (code & 0xff) as u8,
            Exit::Signal(signo) => 128u8.wrapping_add((signo & 0x7f) as u8),
        }
    }
}

impl Default for RecordedExit {
    /// Code 0, no report: how a replay ends when the recording has no exit
    /// record (it was cut short).
    fn default() -> Self {
        Self {
            exit: Exit::Code(0),
            report: None,
        }
    }
}

/// How much of a recording is read before it is refused: every record is
/// checked against these before anything is allocated for it, so a damaged
/// or hostile file (or an endless stream such as `/dev/zero`) ends with an
/// error instead of exhausting memory.
///
/// The replay keeps every recorded message in memory (any of them may be
/// asked for), so what it holds is bounded by `max_file_size`, plus one
/// record while it is read.
///
/// ```
/// use childwire_replay::{Limits, Recording};
///
/// let limits = Limits { max_file_size: 100, ..Limits::default() };
/// let text = r#"{"dir":"from_child","text":"a banner longer than the one hundred bytes this recording may have, in all"}"#;
/// let err = Recording::read(text.as_bytes(), &limits).unwrap_err();
/// assert!(err.to_string().contains("larger than the limit of 100 bytes"));
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    /// The most bytes read from the file, all records together.
    pub max_file_size: u64,
    /// The longest record (one line), in bytes.
    pub max_record_size: usize,
    /// The largest message an `oversized` record may stand for: a replay
    /// writes that many bytes in its place.
    pub max_oversized: u64,
}

/// 1 GiB: the most a recording may hold, by default.
pub const DEFAULT_MAX_FILE_SIZE: u64 = 1 << 30;
/// 128 MiB: the longest record by default, room for a message at the
/// relay's 64 MiB limit written as an escaped string.
pub const DEFAULT_MAX_RECORD_SIZE: usize = 128 << 20;
/// 1 GiB: the largest dropped message a recording may stand for by default.
pub const DEFAULT_MAX_OVERSIZED: u64 = 1 << 30;

impl Default for Limits {
    fn default() -> Self {
        Self {
            max_file_size: DEFAULT_MAX_FILE_SIZE,
            max_record_size: DEFAULT_MAX_RECORD_SIZE,
            max_oversized: DEFAULT_MAX_OVERSIZED,
        }
    }
}

/// One generation: where its events start, and what the recorder lost.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
struct Generation {
    start: usize,
    dropped: u64,
}

/// A recorded session: the events the replay acts on, in order.
///
/// One file may hold several *generations*: the successive children of a
/// supervised transport (each ends with its `exit` record, and the next
/// starts with a `generation` record), or the sessions `relay --log`
/// appended one after another. [`generations`](Self::generations) says how
/// many, and [`generation`](Self::generation) takes one out to replay it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Recording {
    events: Vec<Event>,
    /// At least one; the first starts at 0.
    generations: Vec<Generation>,
}

impl Default for Recording {
    fn default() -> Self {
        Self::from_events(Vec::new())
    }
}

impl Recording {
    /// Reads a recording from its text, within the default [`Limits`].
    ///
    /// # Errors
    /// A line that is not a JSON object, a record without a `dir`, a
    /// message record with neither `msg`, `text` nor `oversized`, a `text`
    /// holding a raw line break (it would replay as two messages), or a
    /// record over a limit; the error names the line.
    pub fn parse(text: &str) -> Result<Self, ParseError> {
        Self::read(text.as_bytes(), &Limits::default())
    }

    /// Reads a recording from `input` record by record, within `limits`:
    /// a record over a limit is refused before anything is allocated for
    /// it, and reading stops at `limits.max_file_size` bytes.
    ///
    /// # Errors
    /// What [`parse`](Self::parse) refuses, a line that is not UTF-8, a
    /// record or a file over its limit, and a failed read (the line it
    /// failed on is named).
    pub fn read(mut input: impl io::BufRead, limits: &Limits) -> Result<Self, ParseError> {
        let mut reader = Reader::new(*limits);
        let mut line: Vec<u8> = Vec::new();
        let mut total: u64 = 0;
        loop {
            let number = reader.line + 1;
            let error = |reason: String| ParseError {
                line: number,
                reason,
            };
            line.clear();
            let mut ended = false;
            loop {
                let buf = match input.fill_buf() {
                    Ok(buf) => buf,
                    Err(err) if err.kind() == io::ErrorKind::Interrupted => continue,
                    Err(err) => return Err(error(format!("cannot read it: {err}"))),
                };
                if buf.is_empty() {
                    break;
                }
                let (taken, content) = match buf.iter().position(|&byte| byte == b'\n') {
                    Some(at) => (at + 1, at),
                    None => (buf.len(), buf.len()),
                };
                total = total.saturating_add(taken as u64);
                if total > limits.max_file_size {
                    return Err(error(format!(
                        "the recording is larger than the limit of {} bytes",
                        limits.max_file_size
                    )));
                }
                if line.len() + content > limits.max_record_size {
                    return Err(error(format!(
                        "a record longer than the limit of {} bytes",
                        limits.max_record_size
                    )));
                }
                line.extend_from_slice(&buf[..content]);
                input.consume(taken);
                if taken > content {
                    ended = true;
                    break;
                }
            }
            if !ended && line.is_empty() {
                return Ok(reader.finish());
            }
            let text =
                std::str::from_utf8(&line).map_err(|err| error(format!("not UTF-8 ({err})")))?;
            reader.line(text.strip_suffix('\r').unwrap_or(text))?;
        }
    }

    /// A recording of these events, one generation (whatever exits they
    /// hold).
    #[must_use]
    pub fn from_events(events: Vec<Event>) -> Self {
        Self {
            events,
            generations: vec![Generation::default()],
        }
    }

    /// The events, in the order recorded, every generation's.
    #[must_use]
    pub fn events(&self) -> &[Event] {
        &self.events
    }

    /// How many generations the recording holds: 1 for a single session
    /// (or an empty recording).
    #[must_use]
    pub fn generations(&self) -> usize {
        self.generations.len()
    }

    /// Generation `n` (from 1) alone, to replay it; `None` past the last.
    #[must_use]
    pub fn generation(&self, n: usize) -> Option<Recording> {
        let generation = self.generations.get(n.checked_sub(1)?)?;
        let end = self
            .generations
            .get(n)
            .map_or(self.events.len(), |next| next.start);
        Some(Self {
            events: self.events[generation.start..end].to_vec(),
            generations: vec![Generation {
                start: 0,
                dropped: generation.dropped,
            }],
        })
    }

    /// Takes the generations apart, in order.
    #[must_use]
    pub fn into_generations(self) -> Vec<Recording> {
        let mut events = self.events;
        let mut out = Vec::with_capacity(self.generations.len());
        for generation in self.generations.iter().rev() {
            out.push(Self {
                events: events.split_off(generation.start),
                generations: vec![Generation {
                    start: 0,
                    dropped: generation.dropped,
                }],
            });
        }
        out.reverse();
        out
    }

    /// How many records the recorder dropped (its writer fell behind and
    /// it said so in the recording): the replay may lack some of what
    /// happened.
    #[must_use]
    pub fn dropped(&self) -> u64 {
        self.generations
            .iter()
            .map(|generation| generation.dropped)
            .sum()
    }

    /// The messages the host sent, in order: what a test sends the replay.
    pub fn to_child(&self) -> impl Iterator<Item = &[u8]> {
        self.events.iter().filter_map(|event| match event {
            Event::ToChild(message) => Some(message.as_slice()),
            _ => None,
        })
    }

    /// The messages the server sent, in order.
    pub fn from_child(&self) -> impl Iterator<Item = &[u8]> {
        self.events.iter().filter_map(|event| match event {
            Event::FromChild(message) => Some(message.as_slice()),
            _ => None,
        })
    }

    /// The first exit record, if the recording has one (the first
    /// generation's end).
    #[must_use]
    pub fn exit(&self) -> Option<&RecordedExit> {
        self.events.iter().find_map(|event| match event {
            Event::Exit(exit) => Some(exit),
            _ => None,
        })
    }

    /// Takes the events out.
    #[must_use]
    pub fn into_events(self) -> Vec<Event> {
        self.events
    }
}

impl FromStr for Recording {
    type Err = ParseError;

    fn from_str(text: &str) -> Result<Self, ParseError> {
        Self::parse(text)
    }
}

/// A recording being read, line by line.
struct Reader {
    limits: Limits,
    /// Lines read so far.
    line: usize,
    recording: Recording,
    /// The current generation ended (its exit record was read): the next
    /// event starts a new one.
    ended: bool,
}

impl Reader {
    fn new(limits: Limits) -> Self {
        Self {
            limits,
            line: 0,
            recording: Recording::default(),
            ended: false,
        }
    }

    fn line(&mut self, text: &str) -> Result<(), ParseError> {
        self.line += 1;
        if text.trim().is_empty() {
            return Ok(());
        }
        let error = |reason: String| ParseError {
            line: self.line,
            reason,
        };
        match parse_record(text, &self.limits).map_err(error)? {
            None => {}
            Some(Record::Event(event)) => {
                if self.ended {
                    self.start_generation();
                }
                self.ended = matches!(event, Event::Exit(_));
                self.recording.events.push(event);
            }
            Some(Record::Generation) => {
                let current = self.recording.generations.last().map_or(0, |g| g.start);
                if self.ended || self.recording.events.len() > current {
                    // After an exit, or after a generation cut short.
                    self.start_generation();
                }
            }
            Some(Record::Dropped(records)) => {
                // After an exit too: counted in the generation that ended.
                if let Some(generation) = self.recording.generations.last_mut() {
                    generation.dropped = generation.dropped.saturating_add(records);
                }
            }
        }
        Ok(())
    }

    fn start_generation(&mut self) {
        self.ended = false;
        self.recording.generations.push(Generation {
            start: self.recording.events.len(),
            dropped: 0,
        });
    }

    fn finish(self) -> Recording {
        self.recording
    }
}

/// A recording that could not be read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ParseError {
    /// The line it failed on, from 1.
    pub line: usize,
    /// What is wrong with it.
    pub reason: String,
}

impl fmt::Display for ParseError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "line {}: {}", self.line, self.reason)
    }
}

impl std::error::Error for ParseError {}

/// One record as its raw fields.
type Fields<'a> = BTreeMap<String, &'a RawValue>;

/// What a record line means to the replay.
enum Record {
    Event(Event),
    /// A new generation starts (a supervised child was restarted).
    Generation,
    /// The recorder dropped this many records here.
    Dropped(u64),
}

/// What a record line holds, `None` for a record the replay does not act
/// on.
fn parse_record(line: &str, limits: &Limits) -> Result<Option<Record>, String> {
    let fields: Fields<'_> = serde_json::from_str(line)
        .map_err(|err| format!("not a JSON object with a \"dir\" ({err})"))?;
    let dir: String = field(&fields, "dir")?.ok_or("no \"dir\"")?;
    let event = match dir.as_str() {
        "to_child" => message(limits, &fields, Event::ToChild, Event::OversizedToChild)?,
        "from_child" => message(limits, &fields, Event::FromChild, Event::OversizedFromChild)?,
        "stderr" => {
            Event::Stderr(field(&fields, "line")?.ok_or("a stderr record without \"line\"")?)
        }
        "exit" => Event::Exit(exit(&fields)?),
        "generation" => return Ok(Some(Record::Generation)),
        "notice" if field::<String>(&fields, "kind")?.as_deref() == Some("dropped") => {
            let records = field::<u64>(&fields, "records")?
                .ok_or("a \"dropped\" notice without \"records\"")?;
            return Ok(Some(Record::Dropped(records)));
        }
        _ => return Ok(None),
    };
    Ok(Some(Record::Event(event)))
}

/// Field `name` as a `T`; `None` when absent or `null`.
fn field<T: serde::de::DeserializeOwned>(
    fields: &Fields<'_>,
    name: &str,
) -> Result<Option<T>, String> {
    match fields.get(name) {
        None => Ok(None),
        Some(raw) => serde_json::from_str::<Option<T>>(raw.get())
            .map_err(|err| format!("field \"{name}\": {err}")),
    }
}

fn message(
    limits: &Limits,
    fields: &Fields<'_>,
    whole: fn(Vec<u8>) -> Event,
    oversized: fn(u64) -> Event,
) -> Result<Event, String> {
    if let Some(raw) = fields.get("msg") {
        return Ok(whole(raw.get().as_bytes().to_vec()));
    }
    if let Some(text) = field::<String>(fields, "text")? {
        if text.contains('\n') {
            return Err(
                "a \"text\" holding a raw line break: one line on the wire cannot hold one, \
                 and it would replay as two messages"
                    .into(),
            );
        }
        return Ok(whole(text.into_bytes()));
    }
    if let Some(len) = field::<u64>(fields, "oversized")? {
        if len > limits.max_oversized {
            return Err(format!(
                "an \"oversized\" message of {len} bytes, over the limit of {} bytes",
                limits.max_oversized
            ));
        }
        return Ok(oversized(len));
    }
    Err("a message record with neither \"msg\", \"text\" nor \"oversized\"".into())
}

fn exit(fields: &Fields<'_>) -> Result<RecordedExit, String> {
    let code = field::<i32>(fields, "exit_code")?;
    let signal = field::<i32>(fields, "signal")?;
    let exit = match (signal, code) {
        (Some(signal), _) => Exit::Signal(signal),
        (None, Some(code)) => Exit::Code(code),
        (None, None) => {
            return Err("an exit record with neither \"exit_code\" nor \"signal\"".into());
        }
    };
    Ok(RecordedExit {
        exit,
        report: field(fields, "report")?,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_the_format_example() {
        let text = r#"{"t":0.000000,"ts":"2026-11-25T09:30:00.000100Z","dir":"to_child","msg":{"jsonrpc":"2.0", "id":1,"method":"initialize","params":{}}}
{"t":0.012034,"ts":"2026-11-25T09:30:00.012134Z","dir":"stderr","line":"INFO: ready","level":"info"}
{"t":0.012100,"dir":"notice","kind":"pollution","text":"a banner on stdout","bytes":"hello"}

{"t":0.013001,"ts":"2026-11-25T09:30:00.013101Z","dir":"from_child","msg":{"jsonrpc":"2.0","id":1,"result":{}}}
{"t":0.013002,"dir":"from_child","text":"Starting server on stdio"}
{"t":0.013003,"dir":"from_child","oversized":70000000}
{"t":0.013004,"dir":"future_kind","whatever":[1]}
{"t":0.500000,"ts":"2026-11-25T09:30:00.500100Z","dir":"exit","exit_code":3,"signal":null,"report":"exited with code 3 on its own after 0.5 s"}
"#;
        let recording = Recording::parse(text).unwrap();
        assert_eq!(
            recording.events(),
            [
                Event::ToChild(
                    br#"{"jsonrpc":"2.0", "id":1,"method":"initialize","params":{}}"#.to_vec()
                ),
                Event::Stderr("INFO: ready".into()),
                Event::FromChild(br#"{"jsonrpc":"2.0","id":1,"result":{}}"#.to_vec()),
                Event::FromChild(b"Starting server on stdio".to_vec()),
                Event::OversizedFromChild(70_000_000),
                Event::Exit(RecordedExit {
                    exit: Exit::Code(3),
                    report: Some("exited with code 3 on its own after 0.5 s".into()),
                }),
            ]
        );
        let exit = recording.exit().unwrap();
        assert!(exit.on_its_own());
        assert_eq!(exit.shell_code(), 3);
    }

    #[test]
    fn reads_an_old_relay_log_and_a_signal() {
        let old = r#"{"ts":"2025-06-18T09:30:00.123456Z","dir":"to_child","msg":{"id":1,"method":"ping"}}
{"ts":"2025-06-18T09:30:05.000100Z","dir":"exit","exit_code":0,"report":"exited with code 0 after stdin was closed, 1 ms after shutdown"}"#;
        let recording = Recording::parse(old).unwrap();
        assert_eq!(recording.to_child().count(), 1);
        assert!(!recording.exit().unwrap().on_its_own());

        let killed = r#"{"dir":"exit","exit_code":null,"signal":9,"report":"killed by SIGKILL on its own after 3 ms; last stderr: stopped on its own"}"#;
        let exit = Recording::parse(killed).unwrap().exit().cloned().unwrap();
        assert_eq!(exit.exit, Exit::Signal(9));
        assert_eq!(exit.shell_code(), 137);
        assert!(exit.on_its_own());
        let quoted = RecordedExit {
            exit: Exit::Code(1),
            report: Some(
                "exited with code 1 after SIGTERM after 2 s; last stderr: on its own".into(),
            ),
        };
        assert!(
            !quoted.on_its_own(),
            "stderr quoted in the report does not count"
        );
    }

    #[test]
    fn bad_records_name_their_line() {
        for (text, line, says) in [
            (
                "{\"dir\":\"to_child\",\"text\":\"ok\"}\n{\"dir\":\"from_child\",\"text\":\"a\\nb\"}",
                2,
                "raw line break",
            ),
            (
                "{\"dir\":\"notice\",\"kind\":\"dropped\"}",
                1,
                "without \"records\"",
            ),
            ("\n{\"dir\":\"to_child\"}", 2, "neither"),
            (
                "{\"dir\":\"to_child\",\"text\":\"x\"}\nnot json",
                2,
                "not a JSON object",
            ),
            ("{\"ts\":\"x\"}", 1, "no \"dir\""),
            ("{\"dir\":\"stderr\",\"line\":3}", 1, "field \"line\""),
            (
                "{\"dir\":\"exit\",\"report\":\"x\"}",
                1,
                "neither \"exit_code\"",
            ),
        ] {
            let err = Recording::parse(text).unwrap_err();
            assert_eq!(err.line, line, "{text}: {err}");
            assert!(err.to_string().contains(says), "{text}: {err}");
        }
    }

    #[test]
    fn an_oversized_record_over_the_limit_is_refused_before_anything_is_allocated() {
        // 5 GiB: allocating it would abort the test process.
        let text = "{\"dir\":\"to_child\",\"text\":\"x\"}\n{\"dir\":\"from_child\",\"oversized\":5368709119}";
        let err = Recording::parse(text).unwrap_err();
        assert_eq!(err.line, 2, "{err}");
        assert!(
            err.reason.contains("5368709119 bytes, over the limit"),
            "{err}"
        );
        let limits = Limits {
            max_oversized: 6 << 30,
            ..Limits::default()
        };
        let recording = Recording::read(text.as_bytes(), &limits).unwrap();
        assert_eq!(
            recording.events()[1],
            Event::OversizedFromChild(5_368_709_119)
        );
    }

    #[test]
    fn a_file_or_a_record_over_its_limit_is_refused_where_it_goes_over() {
        let record = "{\"dir\":\"from_child\",\"text\":\"0123456789\"}\n";
        let text = record.repeat(100);
        let limits = Limits {
            max_file_size: 10 * record.len() as u64 + 5,
            ..Limits::default()
        };
        let err = Recording::read(text.as_bytes(), &limits).unwrap_err();
        assert_eq!(err.line, 11, "{err}");
        assert!(err.reason.contains("larger than the limit"), "{err}");

        let limits = Limits {
            max_record_size: 20,
            ..Limits::default()
        };
        let err = Recording::read(text.as_bytes(), &limits).unwrap_err();
        assert_eq!(err.line, 1, "{err}");
        assert!(err.reason.contains("longer than the limit of 20"), "{err}");
        // Exactly at the limits: read.
        let limits = Limits {
            max_file_size: text.len() as u64,
            max_record_size: record.len() - 1,
            ..Limits::default()
        };
        let recording = Recording::read(text.as_bytes(), &limits).unwrap();
        assert_eq!(recording.from_child().count(), 100);
    }

    /// An endless stream without a line break: stops at the record limit.
    #[test]
    fn an_endless_stream_stops_at_a_limit() {
        let endless = std::io::repeat(b'x');
        let limits = Limits {
            max_record_size: 1 << 20,
            ..Limits::default()
        };
        let err = Recording::read(std::io::BufReader::new(endless), &limits).unwrap_err();
        assert_eq!(err.line, 1);
        assert!(err.reason.contains("longer than the limit"), "{err}");
        let lines = std::io::repeat(b'\n');
        let limits = Limits {
            max_file_size: 1 << 20,
            ..Limits::default()
        };
        let err = Recording::read(std::io::BufReader::new(lines), &limits).unwrap_err();
        assert!(err.reason.contains("larger than the limit"), "{err}");
    }

    #[test]
    fn generations_split_at_exits_and_generation_records() {
        let text = r#"{"dir":"to_child","msg":{"id":1,"method":"ping"}}
{"dir":"from_child","msg":{"id":1,"result":{}}}
{"dir":"exit","exit_code":1,"report":"exited with code 1 on its own after 3 ms"}
{"dir":"generation","generation":2}
{"dir":"to_child","msg":{"id":1,"method":"tools/list"}}
{"dir":"notice","kind":"dropped","records":3,"text":"3 records dropped"}
{"dir":"exit","exit_code":0,"report":"exited with code 0 after stdin was closed"}
{"dir":"stderr","line":"an appended session, no marker"}
{"dir":"generation","generation":2}
{"dir":"to_child","text":"a session cut short, then a marker"}
"#;
        let recording = Recording::parse(text).unwrap();
        assert_eq!(recording.generations(), 4);
        assert_eq!(recording.dropped(), 3);
        let first = recording.generation(1).unwrap();
        assert_eq!(first.events().len(), 3);
        assert_eq!(first.exit().unwrap().exit, Exit::Code(1));
        let second = recording.generation(2).unwrap();
        assert_eq!(
            second.to_child().collect::<Vec<_>>(),
            [&br#"{"id":1,"method":"tools/list"}"#[..]]
        );
        assert_eq!(
            (second.dropped(), second.exit().unwrap().exit),
            (3, Exit::Code(0))
        );
        assert_eq!(
            recording.generation(3).unwrap().events(),
            [Event::Stderr("an appended session, no marker".into())]
        );
        assert_eq!(recording.generation(4).unwrap().to_child().count(), 1);
        assert_eq!(recording.generation(0), None);
        assert_eq!(recording.generation(5), None);
        let all = recording.clone().into_generations();
        assert_eq!(all.len(), 4);
        assert_eq!(all[1], second);
        // A marker first, or a dropped notice after the last exit, starts nothing.
        let one = "{\"dir\":\"generation\",\"generation\":1}\n{\"dir\":\"exit\",\"exit_code\":0}\n{\"dir\":\"notice\",\"kind\":\"dropped\",\"records\":1}";
        let recording = Recording::parse(one).unwrap();
        assert_eq!((recording.generations(), recording.dropped()), (1, 1));
    }
}
