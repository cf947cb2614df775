//! Support code for childwire's runnable examples.
//!
//! The examples themselves are thin `main` functions; the logic they share
//! lives here so it can be unit-tested without spawning processes:
//!
//! - [`mcp_server`]: the bundled example MCP server (`cargo run --example
//!   example_server`), a line-in/line-out state machine plus a stdio loop.
//! - [`sdk_client`]: the command line and the session of `rmcp_client` and
//!   `turbomcp_client`, written once over each MCP SDK with childwire as its
//!   transport.
//!
//! The MCP client (`cargo run --example mcp_client`) and the relay (`cargo
//! run --example relay`) are the `childwire` command's own programs, from the
//! `childwire-cli` crate; its modules are re-exported here under their old
//! names.

pub use childwire_cli::{cli, mcp_client, protocol, relay, rt};

pub mod mcp_server;
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
