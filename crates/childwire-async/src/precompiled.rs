//! What nearly every program runs, for a runtime crate to compile once.
//!
//! In a debug build (opt-level 0 or 1) rustc lets a crate use the copy of a
//! generic function that a crate below it already compiled for the same
//! types (shared generics). A transport's code is generic over its runtime,
//! so without a copy in the runtime's crate each program compiled the spawn,
//! the background task, `send`, `recv` and `shutdown` in its own crate,
//! which cargo builds incrementally, at a higher cost than a dependency. A
//! runtime crate (`childwire-tokio`, `childwire-smol`,
//! `childwire-async-std`) calls [`precompiled`] from a public function of
//! its own, compiled in debug builds only, which nothing calls: that
//! compiles these copies there, once, and programs link to them.
//!
//! Measured on the program of `benches/build-cost.sh` (Tokio, a cold debug
//! build on Rust 1.85, the CPU of each `rustc`): the program's own crate
//! went from 1.53-1.59 s to 0.85-0.88 s and `childwire-tokio` from 0.17 s
//! to 0.64-0.65 s (docs/performance.md has the whole build). A release build
//! shares no generics, so the runtime crates leave it out there.

use std::future::Future;
use std::pin::Pin;

use bytes::Bytes;
use childwire_core::{Command, Config};

use crate::{Runtime, Transport};

/// A future that runs what nearly every program does with a transport on
/// `R` (spawn, `send` of the usual payload types, `recv`, `shutdown`,
/// `split`). Never run: a runtime crate instantiates it so that its code
/// is compiled there (see the module).
#[doc(hidden)]
pub fn precompiled<R: Runtime>(command: Command) -> Pin<Box<dyn Future<Output = ()> + Send>> {
    Box::pin(async move {
        let Ok(mut child) = Transport::<R>::spawn(&command, Config::default()) else {
            return;
        };
        // The transport's `send`, `recv` and `shutdown` call its halves':
        // these compile both.
        let _ = child.send("").await;
        let _ = child.send(String::new()).await;
        let _ = child.send(Vec::new()).await;
        let _ = child.send(Bytes::new()).await;
        let _ = child.recv().await;
        let _ = child.shutdown().await;
        drop(child.split());
    })
}
