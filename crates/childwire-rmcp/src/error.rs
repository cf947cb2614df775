//! The transport's error.

use std::fmt;

use childwire::{ExitReport, SendError, ShutdownError};

/// Why the transport could not send or close.
///
/// When the server has ended, the error carries its [`ExitReport`], so what
/// reaches the user says how and why ("exited with code 3 …; last stderr:
/// cannot open database") instead of only "connection closed".
#[derive(Debug)]
#[non_exhaustive]
pub enum Error {
    /// The message could not be serialized to JSON.
    Serialize(serde_json::Error),
    /// The message could not be sent: the server closed its stdin, a write
    /// timed out, or the transport is shutting down. `exit` is the server's
    /// exit report when its end was already known.
    Send {
        /// What childwire refused, and why.
        source: SendError<Vec<u8>>,
        /// How the server ended, if it has.
        exit: Option<Box<ExitReport>>,
    },
    /// The server has ended; nothing more can be sent to it.
    Exited(Box<ExitReport>),
    /// The graceful shutdown could not complete (the runtime is shutting
    /// down); the child was killed.
    Shutdown(ShutdownError),
}

impl Error {
    /// The server's exit report, if the error comes from its end.
    pub fn exit_report(&self) -> Option<&ExitReport> {
        match self {
            Error::Send { source, exit } => exit.as_deref().or(source.exit_report()),
            Error::Exited(report) => Some(report),
            Error::Serialize(_) | Error::Shutdown(_) => None,
        }
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Error::Serialize(err) => write!(f, "could not serialize the message: {err}"),
            Error::Send { source, exit } => {
                write!(f, "could not send to the MCP server: {source}")?;
                match exit {
                    // Said once: a send refused for the end carries the report.
                    Some(report) if source.exit_report().is_none() => {
                        write!(f, "; the server {report}")
                    }
                    _ => Ok(()),
                }
            }
            Error::Exited(report) => write!(f, "the MCP server {report}"),
            Error::Shutdown(err) => write!(f, "could not shut the MCP server down: {err}"),
        }
    }
}

impl std::error::Error for Error {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            Error::Serialize(err) => Some(err),
            Error::Send { source, .. } => Some(source),
            Error::Shutdown(err) => Some(err),
            Error::Exited(_) => None,
        }
    }
}
