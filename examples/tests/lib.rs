//! The tests of childwire's runnable examples (`tests/`-style files here:
//! `mcp_client.rs`, `relay.rs`), and the published crates' READMEs compiled
//! as doctests. A package of its own, apart from the examples: `cargo run
//! --example mcp_client`, the first command a new user runs, builds the
//! examples' package with its dev-dependencies, and must build what it runs
//! and no more.

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
