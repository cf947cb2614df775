//! Running an example on the runtime the user picked with `--runtime`, and
//! two runtime-independent helpers: a deadline on any future, and a
//! `block_on` for plain threads.
//!
//! The examples are written once, generic over childwire's
//! [`Runtime`]; only [`run_on`] names a runtime.

use std::fmt;
use std::future::{Future, poll_fn};
use std::pin::pin;
use std::str::FromStr;
use std::sync::Arc;
use std::task::{Context, Poll, Wake, Waker};
use std::thread::{self, Thread};
use std::time::Instant;

use childwire::Runtime;

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

/// A program that runs on any childwire runtime.
pub trait Program {
    /// What the program returns (typically its exit code).
    type Output;

    /// The program's body on runtime `R`.
    fn run<R: Runtime>(self) -> impl Future<Output = Self::Output>;
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
        RuntimeChoice::Tokio => {
            // Multi-threaded, so the task driving the child keeps moving
            // while `main` blocks on stdout.
            let runtime = tokio::runtime::Runtime::new()
                .map_err(|err| Unavailable(format!("could not start Tokio: {err}")))?;
            Ok(runtime.block_on(program.run::<childwire::tokio::Tokio>()))
        }
        RuntimeChoice::Smol => Ok(smol::block_on(program.run::<childwire::smol::Smol>())),
        RuntimeChoice::AsyncStd => Ok(async_std::task::block_on(
            program.run::<childwire::async_std::AsyncStd>(),
        )),
    }
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

/// Runs `future` on the current thread, parking it while the future waits.
///
/// For a plain thread that feeds a transport: childwire's handles wake
/// whoever waits on them from the driver task, whatever thread polls them.
pub fn block_on<F: Future>(future: F) -> F::Output {
    struct Unpark(Thread);
    impl Wake for Unpark {
        fn wake(self: Arc<Self>) {
            self.0.unpark();
        }
        fn wake_by_ref(self: &Arc<Self>) {
            self.0.unpark();
        }
    }

    let waker = Waker::from(Arc::new(Unpark(thread::current())));
    let mut cx = Context::from_waker(&waker);
    let mut future = pin!(future);
    loop {
        if let Poll::Ready(output) = future.as_mut().poll(&mut cx) {
            return output;
        }
        // A wake that came before `park` makes it return at once, and a
        // spurious return just polls again: no wake-up is ever lost.
        thread::park();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn runtime_names_round_trip() {
        for choice in [
            RuntimeChoice::Tokio,
            RuntimeChoice::Smol,
            RuntimeChoice::AsyncStd,
        ] {
            assert_eq!(choice.to_string().parse::<RuntimeChoice>(), Ok(choice));
        }
        let err = "glommio".parse::<RuntimeChoice>().unwrap_err();
        assert!(err.contains("glommio") && err.contains("smol"), "{err}");
    }

    #[test]
    fn block_on_waits_for_a_wake_from_another_thread() {
        let (tx, rx) = std::sync::mpsc::channel::<Waker>();
        let mut woken = false;
        let helper = thread::spawn(move || rx.recv().unwrap().wake());
        let value = block_on(poll_fn(|cx| {
            if woken {
                return Poll::Ready(7);
            }
            woken = true;
            tx.send(cx.waker().clone()).unwrap();
            Poll::Pending
        }));
        helper.join().unwrap();
        assert_eq!(value, 7);
    }
}
