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
