//! Running an example on the runtime the user picked with `--runtime`, and
//! a deadline on any future on any runtime.
//!
//! The examples are written once, generic over [`ExampleRuntime`]
//! (childwire's [`Runtime`] plus this process's own stdio as a transport);
//! only [`run_on`] and the three impls of that trait name a runtime.

use std::fmt;
use std::future::{Future, poll_fn};
use std::pin::pin;
use std::str::FromStr;
use std::task::Poll;
use std::time::Instant;

use childwire::{ChannelConfig, NoRuntime, Runtime, Transport};
use childwire_core::Framing;

#[cfg(not(any(feature = "tokio", feature = "smol", feature = "async-std")))]
compile_error!("the childwire command needs a runtime: enable `tokio`, `smol` or `async-std`");

/// The async runtimes childwire has an adapter for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum RuntimeChoice {
    /// Tokio (`childwire-tokio`).
    #[default]
    Tokio,
    /// smol (`childwire-smol`).
    Smol,
    /// async-std (`childwire-async-std`).
    AsyncStd,
}

impl RuntimeChoice {
    /// The names `--runtime` accepts.
    pub const NAMES: &str = "tokio, smol, async-std";

    /// The cargo feature that builds this runtime in.
    pub fn feature(self) -> &'static str {
        match self {
            Self::Tokio => "tokio",
            Self::Smol => "smol",
            Self::AsyncStd => "async-std",
        }
    }

    /// Whether this build has the runtime (its feature was on).
    pub fn is_built(self) -> bool {
        match self {
            Self::Tokio => cfg!(feature = "tokio"),
            Self::Smol => cfg!(feature = "smol"),
            Self::AsyncStd => cfg!(feature = "async-std"),
        }
    }

    /// Every runtime, built in or not.
    pub const ALL: [RuntimeChoice; 3] = [Self::Tokio, Self::Smol, Self::AsyncStd];
}

impl FromStr for RuntimeChoice {
    type Err = String;

    fn from_str(name: &str) -> Result<Self, String> {
        match name {
            "tokio" => Ok(Self::Tokio),
            "smol" => Ok(Self::Smol),
            "async-std" | "async_std" => Ok(Self::AsyncStd),
            other => Err(format!(
                "unknown runtime `{other}` (expected one of: {})",
                Self::NAMES
            )),
        }
    }
}

impl fmt::Display for RuntimeChoice {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Self::Tokio => "tokio",
            Self::Smol => "smol",
            Self::AsyncStd => "async-std",
        })
    }
}

/// A runtime the examples run on: childwire's [`Runtime`], plus a transport
/// over this process's own stdin and stdout (the relay talks to its host
/// through it).
pub trait ExampleRuntime: Runtime {
    /// `framing` over this process's stdin and stdout, with `config`'s limits.
    fn stdio_with<F: Framing>(
        framing: F,
        config: &ChannelConfig,
    ) -> Result<Transport<Self, F>, NoRuntime>;
}

#[cfg(feature = "tokio")]
impl ExampleRuntime for childwire::tokio::Tokio {
    fn stdio_with<F: Framing>(
        framing: F,
        config: &ChannelConfig,
    ) -> Result<Transport<Self, F>, NoRuntime> {
        use childwire::tokio::TokioIo;
        Transport::from_pipes_with(
            framing,
            TokioIo(tokio::io::stdin()),
            TokioIo(tokio::io::stdout()),
            config,
        )
    }
}

#[cfg(feature = "smol")]
impl ExampleRuntime for childwire::smol::Smol {
    fn stdio_with<F: Framing>(
        framing: F,
        config: &ChannelConfig,
    ) -> Result<Transport<Self, F>, NoRuntime> {
        use childwire::smol::FuturesIo;
        // The blocking thread behind each copies through a buffer of this
        // size; the default, 8 MiB, is read ahead from stdin or queued for
        // stdout once a long message passes, on top of the transport's
        // own bounds.
        const BUFFER: usize = 64 * 1024;
        Transport::from_pipes_with(
            framing,
            FuturesIo(smol::Unblock::with_capacity(BUFFER, std::io::stdin())),
            FuturesIo(smol::Unblock::with_capacity(BUFFER, std::io::stdout())),
            config,
        )
    }
}

#[cfg(feature = "async-std")]
impl ExampleRuntime for childwire::async_std::AsyncStd {
    fn stdio_with<F: Framing>(
        framing: F,
        config: &ChannelConfig,
    ) -> Result<Transport<Self, F>, NoRuntime> {
        use childwire::async_std::FuturesIo;
        Transport::from_pipes_with(
            framing,
            FuturesIo(async_std::io::stdin()),
            FuturesIo(async_std::io::stdout()),
            config,
        )
    }
}

/// A program that runs on any childwire runtime.
pub trait Program {
    /// What the program returns (typically its exit code).
    type Output;

    /// The program's body on runtime `R`.
    fn run<R: ExampleRuntime>(self) -> impl Future<Output = Self::Output>;
}

/// The runtime could not be started.
#[derive(Debug)]
pub struct Unavailable(String);

impl fmt::Display for Unavailable {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for Unavailable {}

/// Runs `program` to completion on the chosen runtime, from a plain `main`.
pub fn run_on<P: Program>(choice: RuntimeChoice, program: P) -> Result<P::Output, Unavailable> {
    match choice {
        #[cfg(feature = "tokio")]
        RuntimeChoice::Tokio => {
            // Multi-threaded, so the task driving the child keeps moving
            // while `main` blocks on stdout.
            let runtime = tokio::runtime::Runtime::new()
                .map_err(|err| Unavailable(format!("could not start Tokio: {err}")))?;
            let output = runtime.block_on(program.run::<childwire::tokio::Tokio>());
            // Not a plain drop: that waits for every blocking thread, and a
            // read of this process's stdin (the relay's host) never ends
            // until the host writes or closes it.
            runtime.shutdown_background();
            Ok(output)
        }
        #[cfg(feature = "smol")]
        RuntimeChoice::Smol => Ok(smol::block_on(program.run::<childwire::smol::Smol>())),
        #[cfg(feature = "async-std")]
        RuntimeChoice::AsyncStd => Ok(async_std::task::block_on(
            program.run::<childwire::async_std::AsyncStd>(),
        )),
        #[allow(unreachable_patterns)]
        other => Err(not_built(other)),
    }
}

/// Why `choice` cannot run here: its cargo feature was off in this build.
fn not_built(choice: RuntimeChoice) -> Unavailable {
    let feature = choice.feature();
    Unavailable(format!(
        "this build has no {choice} runtime: it is the cargo feature `{feature}` \
         (`cargo install childwire-cli --features {feature}`, or `--features {feature}` \
         on `cargo run`)"
    ))
}

/// Waits for `future` until `deadline` on runtime `R`'s timer; `None` if the
/// deadline came first.
pub async fn timeout_at<R: Runtime, F: Future>(deadline: Instant, future: F) -> Option<F::Output> {
    let mut future = pin!(future);
    let Ok(runtime) = R::current() else {
        // No runtime, no timer: wait without a deadline.
        return Some(future.await);
    };
    let mut timer = runtime.timer(deadline);
    poll_fn(|cx| {
        if let Poll::Ready(output) = future.as_mut().poll(cx) {
            return Poll::Ready(Some(output));
        }
        // Checked by hand too: a runtime may poll an elapsed timer late.
        if runtime.now() >= deadline || timer.as_mut().poll(cx).is_ready() {
            return Poll::Ready(None);
        }
        Poll::Pending
    })
    .await
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn runtime_names_round_trip() {
        for choice in RuntimeChoice::ALL {
            assert_eq!(choice.to_string().parse::<RuntimeChoice>(), Ok(choice));
        }
        let err = "glommio".parse::<RuntimeChoice>().unwrap_err();
        assert!(err.contains("glommio") && err.contains("smol"), "{err}");
    }

    #[test]
    fn a_runtime_left_out_of_the_build_names_its_feature() {
        let message = not_built(RuntimeChoice::AsyncStd).to_string();
        assert!(
            message.contains("no async-std runtime") && message.contains("--features async-std"),
            "{message}"
        );
    }

    /// The default build: Tokio alone.
    #[cfg(not(feature = "smol"))]
    #[test]
    fn run_on_a_runtime_not_built_is_an_error_not_a_panic() {
        struct Nothing;
        impl Program for Nothing {
            type Output = ();
            async fn run<R: ExampleRuntime>(self) {}
        }
        let error = run_on(RuntimeChoice::Smol, Nothing).unwrap_err();
        assert!(error.to_string().contains("`smol`"), "{error}");
    }
}
