//! The conformance suite on Tokio (a multi-threaded runtime, as most hosts use).

mod rt {
    pub(crate) use childwire_tokio::*;

    use std::future::Future;
    use std::time::Duration;

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
