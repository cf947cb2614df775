//! The conformance suite on Tokio (a multi-threaded runtime, as most hosts use).

mod rt {
    pub(crate) use childwire_tokio::*;

    use std::future::Future;
    use std::time::Duration;

    /// The runtime's name, as `pdeath-host` takes it.
    pub(crate) const NAME: &str = "tokio";

    /// Runs `start` inside a runtime of its own, on a thread of its own, then drops that runtime
    /// (as a host does at exit, or a panic unwinding through it) and hands the result back.
    pub(crate) fn on_a_dropped_runtime<T: Send + 'static>(
        start: impl FnOnce() -> T + Send + 'static,
    ) -> Result<T, &'static str> {
        std::thread::spawn(move || {
            let runtime = tokio::runtime::Builder::new_multi_thread()
                .worker_threads(1)
                .enable_all()
                .build()
                .expect("a Tokio runtime");
            let out = {
                let _entered = runtime.enter();
                start()
            };
            drop(runtime);
            out
        })
        .join()
        .map_err(|_| "the runtime's thread panicked")
    }

    pub(crate) fn block_on<F: Future>(future: F) -> F::Output {
        tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()
            .expect("a Tokio runtime")
            .block_on(future)
    }

    pub(crate) async fn timeout<F: Future>(limit: Duration, future: F) -> Option<F::Output> {
        tokio::time::timeout(limit, future).await.ok()
    }

    pub(crate) fn spawn<F>(future: F) -> impl Future<Output = F::Output> + Send + 'static
    where
        F: Future + Send + 'static,
        F::Output: Send + 'static,
    {
        let task = tokio::spawn(future);
        async move {
            match task.await {
                Ok(output) => output,
                Err(err) => match err.try_into_panic() {
                    Ok(panic) => std::panic::resume_unwind(panic),
                    Err(err) => panic!("task failed: {err}"),
                },
            }
        }
    }
}

#[path = "../suite/mod.rs"]
mod suite;
