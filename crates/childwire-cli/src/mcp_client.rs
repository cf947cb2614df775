//! The `mcp_client` example: an MCP client over stdio that says what it
//! sees.
//!
//! [`Client`] is the whole program, generic over the runtime; the example's
//! `main` parses the command line with [`options::parse`] and runs it with
//! [`run_on`](crate::rt::run_on).

use std::future::Future;

use crate::rt::{ExampleRuntime, Program};

pub mod describe;
mod findings;
pub mod locate;
pub mod options;
mod run;
pub mod session;

pub use options::{BundledServer, ClientOptions, Parsed, USAGE, parse};

/// The `mcp_client` program.
#[derive(Debug)]
pub struct Client(pub ClientOptions);

impl Program for Client {
    /// The process exit code: 0 when every step succeeded and the server
    /// ended when asked, 1 otherwise.
    type Output = u8;

    fn run<R: ExampleRuntime>(self) -> impl Future<Output = u8> {
        run::run::<R>(self.0)
    }
}
