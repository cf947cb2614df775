//! Support code for childwire's runnable examples.
//!
//! The examples themselves are thin `main` functions; the logic they share
//! lives here so it can be unit-tested without spawning processes:
//!
//! - [`mcp_server`]: the bundled example MCP server (`cargo run --example
//!   example_server`), a line-in/line-out state machine plus a stdio loop.
//!
//! The MCP client (`cargo run --example mcp_client`) and the relay (`cargo
//! run --example relay`) are the `childwire` command's own programs, from the
//! `childwire-cli` crate; its modules are re-exported here under their old
//! names. The rmcp and TurboMCP examples are in `examples/sdk`, a package
//! of their own (`childwire-sdk-examples`), so that these build no MCP SDK
//! and need no newer Rust than the libraries.

pub use childwire_cli::{cli, mcp_client, protocol, relay, rt};

pub mod mcp_server;

/// The published crates' READMEs (their crates.io pages), compiled by `cargo
/// test --doc` so they keep up with the API. The root README is compiled by
/// `cargo xtask ci` in a crate of its own (`xtask/src/readme.rs`), with only
/// the dependencies it lists; the SDK adapters' in `examples/sdk`.
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
}
