//! The `relay` example: a transparent stdio proxy in front of a child
//! process, with an optional NDJSON log of every message.
//!
//! Lines from the relay's stdin go to the child, the child's messages go to
//! the relay's stdout, one `\n` after each; nothing is lost or reordered.
//! Put it between an MCP host and a server (`relay --log mcp.ndjson npx
//! some-server`) to see their conversation.
//!
//! The host ends relay the way it ends any server: closing relay's stdin,
//! then SIGTERM, then SIGKILL. Either of the first two starts the MCP
//! shutdown of the child, with graces short enough that the child is gone
//! before the host's next step (a SIGKILL of relay would orphan it); a
//! second signal SIGKILLs the child's process group at once.
//!
//! With `--restart` a child that ends on its own is started again and the
//! host's session goes on: the host's handshake is replayed to the new
//! process, and the host's requests the old one never answered get errors
//! (see `child.rs`).

use std::future::Future;

use childwire::{Exit, ExitReport};

use crate::rt::{ExampleRuntime, Program};

mod child;
mod host;
pub mod log;
pub mod options;
mod pump;
mod verbatim;

pub use options::{Parsed, RelayOptions, USAGE, parse};

/// The `relay` program.
#[derive(Debug)]
pub struct Relay(pub RelayOptions);

impl Program for Relay {
    /// The process exit code: the child's, see [`exit_code`].
    type Output = u8;

    fn run<R: ExampleRuntime>(self) -> impl Future<Output = u8> {
        pump::run::<R>(self.0)
    }
}

/// The exit code that mirrors how the child ended: its own code, or 128 +
/// the signal number when a signal killed it, as shells report it.
#[must_use]
pub fn exit_code(report: &ExitReport) -> u8 {
    match report.exit {
        // Exit codes are 0..=255 on Unix; keep the low byte as the OS does.
        Exit::Code(code) => (code & 0xff) as u8,
        Exit::Signal(signo) => 128u8.wrapping_add((signo & 0x7f) as u8),
    }
}
