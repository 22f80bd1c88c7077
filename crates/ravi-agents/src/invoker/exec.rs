//! Running a tool's future: panics caught, bounded by a deadline and by cancellation.
//!
//! The common case — a tool that finishes on its first poll — never arms a timer: the future
//! is polled once before any deadline machinery is built, which keeps the invoker's overhead
//! per call well under a microsecond. Only a future that actually waits gets a Tokio sleep and
//! a cancellation watch raced against it.

use std::any::Any;
use std::future::Future;
use std::panic::AssertUnwindSafe;
use std::pin::pin;
use std::task::Poll;
use std::time::{Duration, Instant};

use futures::FutureExt as _;
use ravi_kernel::CancellationToken;

/// How a tool's execution ended.
pub(crate) enum Finished<T> {
    /// It returned.
    Done(T),
    /// It panicked; the payload's message.
    Panicked(String),
    /// The deadline passed first.
    TimedOut,
    /// The run was cancelled first.
    Cancelled,
    /// It needed to wait, but there is no Tokio runtime to time it with.
    NoRuntime,
}

/// Drives `fut` to completion, a panic, the deadline or cancellation, whichever comes first.
pub(crate) async fn run<F: Future>(
    fut: F,
    deadline: Instant,
    cancel: &CancellationToken,
) -> Finished<F::Output> {
    let mut fut = pin!(AssertUnwindSafe(fut).catch_unwind());
    // First poll without a timer: most tools finish here.
    let first = futures::poll!(fut.as_mut());
    if let Poll::Ready(out) = first {
        return finished(out);
    }
    // The slow path is boxed so the timer's state does not bloat every call's future.
    Box::pin(wait(fut, deadline, cancel)).await
}

async fn wait<F: Future>(
    fut: std::pin::Pin<&mut F>,
    deadline: Instant,
    cancel: &CancellationToken,
) -> Finished<<F::Output as Unwound>::Value>
where
    F::Output: Unwound,
{
    if tokio::runtime::Handle::try_current().is_err() {
        return Finished::NoRuntime;
    }
    let sleep = tokio::time::sleep_until(tokio::time::Instant::from_std(deadline));
    tokio::select! {
        biased;
        out = fut => finished(out.into_result()),
        () = cancel.cancelled() => Finished::Cancelled,
        () = sleep => Finished::TimedOut,
    }
}

/// The output of a `catch_unwind` future, so [`wait`] can be generic over it.
pub(crate) trait Unwound {
    type Value;
    fn into_result(self) -> Result<Self::Value, Box<dyn Any + Send>>;
}

impl<T> Unwound for Result<T, Box<dyn Any + Send>> {
    type Value = T;
    fn into_result(self) -> Result<T, Box<dyn Any + Send>> {
        self
    }
}

fn finished<T>(out: Result<T, Box<dyn Any + Send>>) -> Finished<T> {
    match out {
        Ok(v) => Finished::Done(v),
        Err(panic) => Finished::Panicked(panic_message(panic.as_ref())),
    }
}

/// Runs `fut` for at most `limit`; `None` when the limit passed first (or no runtime exists to
/// time it, in which case the call fails closed as if it had timed out).
pub(crate) async fn bounded<F: Future>(limit: Duration, fut: F) -> Option<F::Output> {
    let mut fut = pin!(fut);
    if let Poll::Ready(out) = futures::poll!(fut.as_mut()) {
        return Some(out);
    }
    if tokio::runtime::Handle::try_current().is_err() {
        return None;
    }
    tokio::time::timeout(limit, fut).await.ok()
}

/// The message of a panic payload (`&str` or `String`), or a placeholder.
pub(crate) fn panic_message(payload: &(dyn Any + Send)) -> String {
    if let Some(s) = payload.downcast_ref::<&str>() {
        (*s).to_owned()
    } else if let Some(s) = payload.downcast_ref::<String>() {
        s.clone()
    } else {
        "a panic with a non-text payload".to_owned()
    }
}
