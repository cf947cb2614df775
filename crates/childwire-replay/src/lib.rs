#![forbid(unsafe_code)]
#![cfg_attr(docsrs, feature(doc_cfg))]
//! A fake child process built from a recording: it answers a host the way
//! the recorded server did, so a captured failure becomes a test.
//!
//! Record a session with `childwire relay --log FILE -- SERVER...` (or the
//! wire tap), then let the host under test talk to the recording instead
//! of the server:
//!
//! - as a process, with any runtime and any host, Rust or not:
//!   `childwire replay FILE` talks NDJSON on its stdin and stdout, writes
//!   the recorded stderr lines to its stderr and exits with the recorded
//!   code;
//! - in a test without a process: as in-memory pipes for a transport
//!   (`twin`, feature `transport`), or as the [`Replayer`] state machine
//!   itself: feed it what the host sends, write out what it hands back.
//!
//! Requests are matched by method and order (the second `tools/call` the
//! host sends gets the answer to the second recorded `tools/call`), and each
//! response carries the id of the live request, numbers and strings alike.
//! A request the recording does not have gets a JSON-RPC error
//! ([`NOT_IN_RECORDING`]) that names it. The recording format is described
//! in the repository's `docs/recording.md`.
//!
//! ```
//! use childwire_replay::{Output, Recording, Replayer};
//!
//! let recording: Recording = concat!(
//!     r#"{"dir":"to_child","msg":{"jsonrpc":"2.0","id":1,"method":"tools/list"}}"#, "\n",
//!     r#"{"dir":"from_child","msg":{"jsonrpc":"2.0","id":1,"result":{"tools":[]}}}"#, "\n",
//!     r#"{"dir":"exit","exit_code":0,"report":"exited with code 0 after stdin was closed"}"#,
//! ).parse()?;
//! let mut server = Replayer::new(recording);
//!
//! server.handle_message(br#"{"jsonrpc":"2.0","id":42,"method":"tools/list"}"#);
//! assert_eq!(
//!     server.poll_output(),
//!     Some(Output::Message(br#"{"jsonrpc":"2.0","id":42,"result":{"tools":[]}}"#.to_vec()))
//! );
//!
//! // Not in the recording: an error that says so.
//! server.handle_message(br#"{"jsonrpc":"2.0","id":43,"method":"tools/call"}"#);
//! let Some(Output::Message(error)) = server.poll_output() else { panic!() };
//! assert!(String::from_utf8(error)?.contains("`tools/call` request #1 is not in the recording"));
//!
//! server.handle_eof();
//! assert!(matches!(server.poll_output(), Some(Output::Exit(_))));
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

mod message;
pub mod recording;
pub mod replayer;
#[cfg(feature = "transport")]
#[cfg_attr(docsrs, doc(cfg(feature = "transport")))]
pub mod twin;

pub use recording::{Event, Limits, ParseError, RecordedExit, Recording};
pub use replayer::{NOT_IN_RECORDING, Note, Output, Replayer, Unmatched};
#[cfg(feature = "transport")]
pub use twin::{Twin, TwinStdin, TwinStdout, twin};

/// The README (the crate's page on crates.io), compiled by `cargo test
/// --doc` so its example keeps up with the API.
#[cfg(doctest)]
#[doc = include_str!("../README.md")]
struct Readme;
