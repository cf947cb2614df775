//! Support code for childwire's runnable examples.
//!
//! The examples themselves are thin `main` functions; the logic they share
//! lives here so it can be unit-tested without spawning processes:
//!
//! - [`protocol`]: MCP protocol revisions and JSON-RPC error codes, shared by
//!   the bundled server and the client example.
//! - [`mcp_server`]: the bundled example MCP server (`cargo run --example
//!   example_server`), a line-in/line-out state machine plus a stdio loop.
//! - [`mcp_client`]: the MCP client (`cargo run --example mcp_client`).
//! - [`relay`]: the stdio proxy (`cargo run --example relay -- CMD`).
//! - [`sdk_client`]: the command line and the session of `rmcp_client` and
//!   `turbomcp_client`, written once over each MCP SDK with childwire as its
//!   transport.
//! - [`rt`]: running a program on the runtime picked with `--runtime`.
//! - [`cli`]: options first, then the child's command, unchanged; and the
//!   `main` the examples share.

// Defined before the modules so every one of them can use them.
/// Prints one line to stdout. A closed stdout (`mcp_client | head`) is not
/// a panic: the session still ends properly.
macro_rules! say {
    ($($arg:tt)*) => {{
        use std::io::Write as _;
        let _ = writeln!(std::io::stdout().lock(), $($arg)*);
    }};
}

/// Prints one line to stderr, ignoring a closed stderr.
macro_rules! note {
    ($($arg:tt)*) => {{
        use std::io::Write as _;
        let _ = writeln!(std::io::stderr().lock(), $($arg)*);
    }};
}

pub mod cli;
pub mod mcp_client;
pub mod mcp_server;
pub mod protocol;
pub mod relay;
pub mod rt;
pub mod sdk_client;

/// The README's Rust snippets, compiled by `cargo test --doc` so they keep
/// up with the API.
#[cfg(doctest)]
#[doc = include_str!("../../README.md")]
struct ReadmeSnippets;

/// The published crates' READMEs (their crates.io pages), compiled the same
/// way.
#[cfg(doctest)]
mod crate_readmes {
    #[doc = include_str!("../../crates/childwire/README.md")]
    struct Childwire;
    #[doc = include_str!("../../crates/childwire-core/README.md")]
    struct Core;
    #[doc = include_str!("../../crates/childwire-async/README.md")]
    struct Async;
    #[doc = include_str!("../../crates/childwire-tokio/README.md")]
    struct Tokio;
    #[doc = include_str!("../../crates/childwire-smol/README.md")]
    struct Smol;
    #[doc = include_str!("../../crates/childwire-async-std/README.md")]
    struct AsyncStd;
    #[doc = include_str!("../../crates/childwire-rmcp/README.md")]
    struct Rmcp;
    #[doc = include_str!("../../crates/childwire-turbomcp/README.md")]
    struct Turbomcp;
}
