//! Support code for the SDK examples (`cargo run -p childwire-sdk-examples
//! --example rmcp_client`, `... --example turbomcp_client`): their command
//! line and their session, written once in [`sdk_client`] over each MCP SDK
//! with childwire as its transport.
//!
//! They live apart from the other examples because rmcp and TurboMCP are
//! large and need a newer Rust (1.89) than the libraries (1.85).

pub use childwire_cli::{cli, mcp_client};

pub mod sdk_client;

/// The SDK adapters' READMEs (their crates.io pages), compiled by `cargo
/// test --doc` so they keep up with the API.
#[cfg(doctest)]
mod crate_readmes {
    #[doc = include_str!("../../../crates/childwire-rmcp/README.md")]
    struct Rmcp;
    #[doc = include_str!("../../../crates/childwire-turbomcp/README.md")]
    struct Turbomcp;
}
