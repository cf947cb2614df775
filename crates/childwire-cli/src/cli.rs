//! Command-line parsing shared by the examples: options first, then the
//! child's command line, passed on unchanged; and [`run_main`], the whole
//! `main` of an example that runs a [`Program`].
//!
//! Hand-written rather than a parser crate because the split is the whole
//! point: once the command starts, every argument belongs to it, even one
//! that looks like an option (`relay npx -y server --port 3`), as with `env`
//! or `cargo run --`.

use std::collections::VecDeque;
use std::ffi::{OsStr, OsString};
use std::io::Write as _;
use std::process::ExitCode;
use std::time::Duration;

use crate::rt::{Program, RuntimeChoice, run_on};

/// A usage error: the message to print before pointing at `--help`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UsageError(pub String);

impl std::fmt::Display for UsageError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for UsageError {}

/// The outcome of parsing a command line.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Parsed<T> {
    /// Run with these options.
    Run(T),
    /// Print the usage and exit.
    Help,
}

/// The `main` of an example named `name`: parses its arguments, prints
/// `usage` for `--help`, explains a usage error with exit code 2, or runs
/// the [`Program`] that `program` makes of the options on the runtime it
/// names and exits with the code it returns (1 if the runtime cannot start).
pub fn run_main<T, P>(
    name: &str,
    usage: &str,
    parse: impl FnOnce(Vec<OsString>) -> Result<Parsed<T>, UsageError>,
    program: impl FnOnce(T) -> (RuntimeChoice, P),
) -> ExitCode
where
    P: Program<Output = u8>,
{
    run_with_args(
        name,
        usage,
        std::env::args_os().skip(1).collect(),
        parse,
        program,
    )
}

/// [`run_main`] over the given arguments (without the program's name, nor
/// the subcommand's: `childwire relay` passes what follows `relay`).
pub fn run_with_args<T, P>(
    name: &str,
    usage: &str,
    args: Vec<OsString>,
    parse: impl FnOnce(Vec<OsString>) -> Result<Parsed<T>, UsageError>,
    program: impl FnOnce(T) -> (RuntimeChoice, P),
) -> ExitCode
where
    P: Program<Output = u8>,
{
    let options = match parse(args) {
        Ok(Parsed::Run(options)) => options,
        Ok(Parsed::Help) => {
            // A closed stdout (`--help | head`) is not worth a panic.
            let _ = std::io::stdout().write_all(usage.as_bytes());
            return ExitCode::SUCCESS;
        }
        Err(err) => {
            note!("{name}: {err} (see --help)");
            return ExitCode::from(2);
        }
    };
    let (runtime, program) = program(options);
    match run_on(runtime, program) {
        Ok(code) => ExitCode::from(code),
        Err(err) => {
            note!("{name}: {err}");
            ExitCode::FAILURE
        }
    }
}

/// A program and its arguments, as given.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ChildCommand {
    /// The program (found on `PATH` unless it is a path).
    pub program: OsString,
    /// Its arguments, unchanged.
    pub args: Vec<OsString>,
}

/// Walks the command line: options until the first non-option or `--`,
/// then the child's command.
#[derive(Debug)]
pub struct ArgWalker {
    rest: VecDeque<OsString>,
    /// A value written as `--name=value`, waiting for [`Self::value`].
    inline: Option<OsString>,
}

impl ArgWalker {
    /// Walks `args` (without the program name).
    pub fn new(args: impl IntoIterator<Item = OsString>) -> Self {
        Self {
            rest: args.into_iter().collect(),
            inline: None,
        }
    }

    /// The next option's name (`--call`, `-h`), or `None` where the child's
    /// command begins. A `--` ends the options and is consumed.
    pub fn next_option(&mut self) -> Result<Option<String>, UsageError> {
        if let Some(value) = self.inline.take() {
            return Err(UsageError(format!(
                "unexpected value `{}`",
                value.to_string_lossy()
            )));
        }
        let Some(arg) = self.rest.front() else {
            return Ok(None);
        };
        if arg == "--" {
            self.rest.pop_front();
            return Ok(None);
        }
        let bytes = arg.as_encoded_bytes();
        if !bytes.starts_with(b"-") || bytes == b"-" {
            return Ok(None);
        }
        let arg = self.rest.pop_front().unwrap_or_default();
        let Some(arg) = arg.to_str() else {
            return Err(UsageError(format!(
                "option `{}` is not valid UTF-8",
                arg.to_string_lossy()
            )));
        };
        Ok(Some(match arg.split_once('=') {
            Some((name, value)) if name.starts_with("--") => {
                self.inline = Some(value.into());
                name.to_owned()
            }
            _ => arg.to_owned(),
        }))
    }

    /// The value of option `name`, as text.
    pub fn value(&mut self, name: &str) -> Result<String, UsageError> {
        let value = self.os_value(name)?;
        value.into_string().map_err(|value| {
            UsageError(format!("the value of {name} is not valid UTF-8: {value:?}"))
        })
    }

    /// The value of option `name`, as given.
    pub fn os_value(&mut self, name: &str) -> Result<OsString, UsageError> {
        self.inline
            .take()
            .or_else(|| self.rest.pop_front())
            .ok_or_else(|| UsageError(format!("{name} needs a value")))
    }

    /// The child's command: everything left, or `None` if nothing is.
    pub fn into_command(self) -> Option<ChildCommand> {
        let mut rest = self.rest;
        let program = rest.pop_front()?;
        Some(ChildCommand {
            program,
            args: rest.into(),
        })
    }
}

/// Parses `KEY=VALUE` for `--env`.
pub fn parse_env(pair: &OsStr) -> Result<(OsString, OsString), UsageError> {
    let Some(text) = pair.to_str() else {
        return Err(UsageError(format!(
            "--env {}: not valid UTF-8",
            pair.to_string_lossy()
        )));
    };
    match text.split_once('=') {
        Some((key, value)) if !key.is_empty() => Ok((key.into(), value.into())),
        _ => Err(UsageError(format!("--env expects KEY=VALUE, got `{text}`"))),
    }
}

/// Parses a duration in seconds, such as `30` or `0.5`.
pub fn parse_seconds(name: &str, text: &str) -> Result<Duration, UsageError> {
    text.parse::<f64>()
        .ok()
        .and_then(|secs| Duration::try_from_secs_f64(secs).ok())
        .filter(|duration| !duration.is_zero())
        .ok_or_else(|| {
            UsageError(format!(
                "{name} expects a positive number of seconds, got `{text}`"
            ))
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn walker(args: &[&str]) -> ArgWalker {
        ArgWalker::new(args.iter().map(OsString::from))
    }

    #[test]
    fn options_stop_at_the_command_and_the_rest_is_passed_unchanged() {
        let mut args = walker(&[
            "--timeout=5",
            "--call",
            "echo",
            "npx",
            "-y",
            "pkg",
            "--flag",
        ]);
        assert_eq!(args.next_option().unwrap().as_deref(), Some("--timeout"));
        assert_eq!(args.value("--timeout").unwrap(), "5");
        assert_eq!(args.next_option().unwrap().as_deref(), Some("--call"));
        assert_eq!(args.value("--call").unwrap(), "echo");
        assert_eq!(args.next_option().unwrap(), None);
        let command = args.into_command().unwrap();
        assert_eq!(command.program, "npx");
        assert_eq!(command.args, ["-y", "pkg", "--flag"]);
    }

    #[test]
    fn double_dash_ends_the_options_even_before_a_dash_program() {
        let mut args = walker(&["--", "--weird-program", "--x"]);
        assert_eq!(args.next_option().unwrap(), None);
        let command = args.into_command().unwrap();
        assert_eq!(command.program, "--weird-program");
        assert_eq!(command.args, ["--x"]);
    }

    #[test]
    fn missing_values_and_stray_inline_values_are_usage_errors() {
        let mut args = walker(&["--call"]);
        args.next_option().unwrap();
        assert!(
            args.value("--call")
                .unwrap_err()
                .0
                .contains("needs a value")
        );

        let mut args = walker(&["--quiet=yes"]);
        assert_eq!(args.next_option().unwrap().as_deref(), Some("--quiet"));
        assert!(args.next_option().is_err());
    }

    #[test]
    fn env_pairs_split_at_the_first_equals_sign() {
        assert_eq!(
            parse_env(OsStr::new("A=b=c")).unwrap(),
            ("A".into(), "b=c".into())
        );
        assert_eq!(
            parse_env(OsStr::new("EMPTY=")).unwrap(),
            ("EMPTY".into(), "".into())
        );
        assert!(parse_env(OsStr::new("=x")).is_err());
        assert!(parse_env(OsStr::new("NOEQUALS")).is_err());
    }

    #[test]
    fn seconds_accept_fractions_and_refuse_nonsense() {
        assert_eq!(
            parse_seconds("--timeout", "0.5").unwrap(),
            Duration::from_millis(500)
        );
        for bad in ["0", "-1", "soon", "NaN", "inf"] {
            assert!(parse_seconds("--timeout", bad).is_err(), "{bad}");
        }
    }
}
