//! Work that must finish once begun (a call forwarded upstream must be
//! settled; a protocol must not stop halfway through a change of state),
//! even when the request that began it is dropped because its client went
//! away or its time ran out.
//!
//! A task of its own would do that, but costs every request a task and a
//! wake-up across threads (about a tenth of an MCP call's CPU,
//! docs/performance.md). [`run_to_end`] instead runs the work in the
//! request's own task and moves it into a task of its own only if the
//! request is dropped before it finished.

use std::future::Future;
use std::panic::AssertUnwindSafe;
use std::pin::Pin;
use std::task::{Context, Poll};

/// The work panicked (as a spawned task's `JoinError` would say).
#[derive(Debug, thiserror::Error)]
#[error("the work panicked")]
pub struct Panicked;

/// `work`, run to its end: see the module's documentation.
pub fn run_to_end<F>(work: F) -> RunToEnd<F>
where
    F: Future + Send + 'static,
    F::Output: Send + 'static,
{
    RunToEnd {
        work: Some(Box::pin(work)),
    }
}

/// The future [`run_to_end`] returns.
pub struct RunToEnd<F>
where
    F: Future + Send + 'static,
    F::Output: Send + 'static,
{
    /// `None` once finished (or panicked): nothing left to hand over.
    work: Option<Pin<Box<F>>>,
}

impl<F> Future for RunToEnd<F>
where
    F: Future + Send + 'static,
    F::Output: Send + 'static,
{
    type Output = Result<F::Output, Panicked>;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let Some(work) = self.work.as_mut() else {
            return Poll::Ready(Err(Panicked));
        };
        // A panic stays in the work, as it would in a task of its own.
        match std::panic::catch_unwind(AssertUnwindSafe(|| work.as_mut().poll(cx))) {
            Ok(Poll::Pending) => Poll::Pending,
            Ok(Poll::Ready(out)) => {
                self.work = None;
                Poll::Ready(Ok(out))
            }
            Err(_) => {
                self.work = None;
                Poll::Ready(Err(Panicked))
            }
        }
    }
}

impl<F> Drop for RunToEnd<F>
where
    F: Future + Send + 'static,
    F::Output: Send + 'static,
{
    fn drop(&mut self) {
        if let Some(work) = self.work.take() {
            // Outside a runtime (it is shutting down) nothing can run it.
            if let Ok(runtime) = tokio::runtime::Handle::try_current() {
                runtime.spawn(work);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicBool, Ordering};
    use std::sync::Arc;
    use std::time::Duration;

    #[tokio::test]
    async fn finished_work_gives_its_output() {
        assert_eq!(run_to_end(async { 7 }).await.unwrap(), 7);
    }

    #[tokio::test]
    async fn work_dropped_midway_still_runs_to_its_end() {
        let ended = Arc::new(AtomicBool::new(false));
        let (go, wait) = tokio::sync::oneshot::channel::<()>();
        let work = {
            let ended = ended.clone();
            run_to_end(async move {
                let _ = wait.await;
                ended.store(true, Ordering::SeqCst);
            })
        };
        // The request gives up after its first poll.
        let gave_up = tokio::time::timeout(Duration::from_millis(10), work).await;
        assert!(gave_up.is_err(), "still waiting when dropped");
        assert!(!ended.load(Ordering::SeqCst));
        go.send(()).unwrap();
        for _ in 0..100 {
            if ended.load(Ordering::SeqCst) {
                return;
            }
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        panic!("the dropped work never ran to its end");
    }

    #[tokio::test]
    async fn a_panic_is_an_error_not_the_callers_panic() {
        let out = run_to_end(async {
            if true {
                panic!("inside the work");
            }
        })
        .await;
        assert!(out.is_err());
    }
}
