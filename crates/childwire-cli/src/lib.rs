//! The programs behind the `childwire` command, written once over every
//! runtime: [`mcp_client`] (`childwire probe`) and [`relay`]
//! (`childwire relay`).
//!
//! This library exists so the repository's examples (`cargo run --example
//! mcp_client`, `cargo run --example relay`) run the very same code as the
//! installed command. Its API follows the command's needs, not semver
//! promises to other users.
//!
//! - [`protocol`]: MCP protocol revisions and JSON-RPC error codes.
//! - [`mcp_client`]: the MCP client that says what it sees.
//! - [`relay`]: the stdio proxy with an optional NDJSON log.
//! - [`replay`]: a fake server made of a recording (`childwire replay`).
//! - [`rt`]: running a program on the runtime picked with `--runtime`.
//! - [`cli`]: options first, then the child's command, unchanged; and the
//!   `main` the programs share.

// Defined before the modules so every one of them can use them.
/// Prints one line to stdout. A closed stdout (`mcp_client | head`) is not
/// a panic: the session still ends properly.
macro_rules! say {
    ($($arg:tt)*) => {{
        use std::io::Write as _;
        if !$crate::quiet() {
            let _ = writeln!(std::io::stdout().lock(), $($arg)*);
        }
    }};
}

/// Prints one line to stderr, ignoring a closed stderr.
macro_rules! note {
    ($($arg:tt)*) => {{
        use std::io::Write as _;
        let _ = writeln!(std::io::stderr().lock(), $($arg)*);
    }};
}

/// Whether the narration is off (`probe --json`: stdout carries one JSON
/// document and nothing else).
static QUIET: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

/// Turns the narration on stdout off (`true`) or on, for the whole process.
pub fn set_quiet(quiet: bool) {
    QUIET.store(quiet, std::sync::atomic::Ordering::Relaxed);
}

/// Whether the narration on stdout is off.
pub fn quiet() -> bool {
    QUIET.load(std::sync::atomic::Ordering::Relaxed)
}

pub mod cli;
pub mod mcp_client;
pub mod protocol;
pub mod relay;
#[cfg(feature = "replay")]
pub mod replay;
pub mod rt;
pub mod signals;
// `childwire share` and `childwire connect`: one server for many host sessions
// (on Tokio).
#[cfg(feature = "share")]
pub mod share;
