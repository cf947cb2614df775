//! The conformance suite on smol: the driver and the suite's tasks run on
//! smol's global executor, the test itself in `smol::block_on`.

mod rt {
    pub(crate) use childwire_smol::*;

    use std::future::Future;
    use std::time::Duration;

    /// The runtime's name, as `pdeath-host` takes it.
    pub(crate) const NAME: &str = "smol";

    /// There is no runtime to drop: the background task runs on a global executor that lives as
    /// long as the process.
    pub(crate) fn on_a_dropped_runtime<T: Send + 'static>(
        _start: impl FnOnce() -> T + Send + 'static,
    ) -> Result<T, &'static str> {
        Err("smol runs the driver on a global executor, which cannot be dropped")
    }

    pub(crate) fn block_on<F: Future>(future: F) -> F::Output {
        smol::block_on(future)
    }

    pub(crate) async fn timeout<F: Future>(limit: Duration, future: F) -> Option<F::Output> {
        smol::future::or(async { Some(future.await) }, async {
            smol::Timer::after(limit).await;
            None
        })
        .await
    }

    pub(crate) fn spawn<F>(future: F) -> impl Future<Output = F::Output> + Send + 'static
    where
        F: Future + Send + 'static,
        F::Output: Send + 'static,
    {
        // smol's tasks hand a panic on to whoever awaits them.
        smol::spawn(future)
    }
}

#[path = "../suite/mod.rs"]
mod suite;
