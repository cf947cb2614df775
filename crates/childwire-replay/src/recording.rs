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
//! Timestamps (`t`, `ts`), `notice` records and anything else a reader does
//! not know are skipped, so recordings from newer writers stay readable.

use std::collections::BTreeMap;
use std::fmt;
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

/// A recorded session: the events the replay acts on, in order.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Recording {
    events: Vec<Event>,
}

impl Recording {
    /// Reads a recording from its text.
    ///
    /// # Errors
    /// A line that is not a JSON object, a record without a `dir`, a
    /// message record with neither `msg`, `text` nor `oversized`, or a
    /// record after the exit record (`relay --log` appends: one file may
    /// hold several sessions, and a replay plays one).
    pub fn parse(text: &str) -> Result<Self, ParseError> {
        let mut events = Vec::new();
        let mut exited = false;
        for (index, line) in text.lines().enumerate() {
            let error = |reason: String| ParseError {
                line: index + 1,
                reason,
            };
            if line.trim().is_empty() {
                continue;
            }
            let Some(event) = parse_record(line).map_err(error)? else {
                continue;
            };
            if exited {
                return Err(error(
                    "a record after the exit record: the file holds more than one session".into(),
                ));
            }
            exited = matches!(event, Event::Exit(_));
            events.push(event);
        }
        Ok(Self { events })
    }

    /// A recording of these events.
    #[must_use]
    pub fn from_events(events: Vec<Event>) -> Self {
        Self { events }
    }

    /// The events, in the order recorded.
    #[must_use]
    pub fn events(&self) -> &[Event] {
        &self.events
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

    /// The exit record, if the recording has one.
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

/// The event a record line holds, `None` for a record the replay does not
/// act on.
fn parse_record(line: &str) -> Result<Option<Event>, String> {
    let fields: Fields<'_> = serde_json::from_str(line)
        .map_err(|err| format!("not a JSON object with a \"dir\" ({err})"))?;
    let dir: String = field(&fields, "dir")?.ok_or("no \"dir\"")?;
    Ok(match dir.as_str() {
        "to_child" => Some(message(&fields, Event::ToChild, Event::OversizedToChild)?),
        "from_child" => Some(message(
            &fields,
            Event::FromChild,
            Event::OversizedFromChild,
        )?),
        "stderr" => Some(Event::Stderr(
            field(&fields, "line")?.ok_or("a stderr record without \"line\"")?,
        )),
        "exit" => Some(Event::Exit(exit(&fields)?)),
        _ => None,
    })
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
    fields: &Fields<'_>,
    whole: fn(Vec<u8>) -> Event,
    oversized: fn(u64) -> Event,
) -> Result<Event, String> {
    if let Some(raw) = fields.get("msg") {
        return Ok(whole(raw.get().as_bytes().to_vec()));
    }
    if let Some(text) = field::<String>(fields, "text")? {
        return Ok(whole(text.into_bytes()));
    }
    if let Some(len) = field::<u64>(fields, "oversized")? {
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
                "{\"dir\":\"exit\",\"exit_code\":0}\n{\"dir\":\"to_child\",\"text\":\"x\"}",
                2,
                "more than one session",
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
}
