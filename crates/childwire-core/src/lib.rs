#![forbid(unsafe_code)]
//! The sans-IO core of childwire.
//!
//! (crate docs are written once the session type lands)

#[cfg(feature = "tokio-util")]
pub mod codec;
pub mod decoder;
pub mod encoder;
pub mod lifecycle;
pub mod report;
pub mod stderr_tail;
