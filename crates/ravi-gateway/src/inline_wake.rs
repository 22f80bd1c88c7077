//! A future adapter that answers a wake-up its future gives itself while being polled by
//! polling it again at once, instead of passing the wake-up to the runtime.
//!
//! Why: hyper's HTTP/1 connection wakes its own task when the request handler takes the
//! request body (the body channel tells the connection it may read more, even when the body
//! is complete). Tokio treats a task woken during its own poll as one that yielded: it goes to
//! the back of the run queue and **another worker thread is woken** to share the work, finds
//! nothing, and parks again. On a gateway that is a thread wake-up and two context switches
//! per request, a tenth of its CPU (docs/benchmarks.md, gateway). Re-polling in place costs
//! one more poll of the connection, which is what the runtime would have done anyway.
//!
//! A wake-up from elsewhere (a socket becoming readable, a timer, another task) while the
//! future is idle goes to the task's waker as usual; one arriving during a poll is never lost:
//! it makes the adapter poll again. After [`MAX_INLINE_POLLS`] polls in a row the adapter
//! hands the wake-up to the runtime, so a future that keeps waking itself still yields.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicU8, Ordering};
use std::task::{Context, Poll, Wake, Waker};

use futures::task::AtomicWaker;

/// Most polls in a row within one poll by the runtime.
const MAX_INLINE_POLLS: usize = 4;

/// Not being polled.
const IDLE: u8 = 0;
/// Being polled, not woken since the poll began.
const POLLING: u8 = 1;
/// Being polled, and woken since the poll began: poll again.
const POLLING_WOKEN: u8 = 2;

/// The waker handed to the inner future.
struct Flag {
    state: AtomicU8,
    /// The waker of the task polling the adapter.
    task: AtomicWaker,
}

impl Wake for Flag {
    fn wake(self: Arc<Self>) {
        self.wake_by_ref();
    }

    fn wake_by_ref(self: &Arc<Self>) {
        let mut state = self.state.load(Ordering::Acquire);
        loop {
            let next = match state {
                IDLE => {
                    self.task.wake();
                    return;
                }
                POLLING => POLLING_WOKEN,
                _ => return,
            };
            match self
                .state
                .compare_exchange_weak(state, next, Ordering::AcqRel, Ordering::Acquire)
            {
                Ok(_) => return,
                Err(now) => state = now,
            }
        }
    }
}

/// `F`, polled again at once when it wakes itself during a poll (see the module docs).
pub(crate) struct InlineWakes<F> {
    inner: Pin<Box<F>>,
    flag: Arc<Flag>,
    waker: Waker,
}

impl<F: Future> InlineWakes<F> {
    /// Wraps `inner`.
    pub(crate) fn new(inner: F) -> Self {
        let flag = Arc::new(Flag {
            state: AtomicU8::new(IDLE),
            task: AtomicWaker::new(),
        });
        Self {
            inner: Box::pin(inner),
            waker: Waker::from(Arc::clone(&flag)),
            flag,
        }
    }

    /// The wrapped future (e.g. to start a graceful shutdown of a connection).
    pub(crate) fn inner_mut(&mut self) -> Pin<&mut F> {
        self.inner.as_mut()
    }
}

impl<F: Future> Future for InlineWakes<F> {
    type Output = F::Output;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<F::Output> {
        let this = self.get_mut();
        this.flag.task.register(cx.waker());
        let mut inner_cx = Context::from_waker(&this.waker);
        for _ in 0..MAX_INLINE_POLLS {
            this.flag.state.store(POLLING, Ordering::Release);
            let polled = this.inner.as_mut().poll(&mut inner_cx);
            // Back to idle unless a wake-up came during the poll.
            let woken = this
                .flag
                .state
                .compare_exchange(POLLING, IDLE, Ordering::AcqRel, Ordering::Acquire)
                .is_err();
            if polled.is_ready() {
                this.flag.state.store(IDLE, Ordering::Release);
                return polled;
            }
            if !woken {
                return Poll::Pending;
            }
        }
        // Still waking itself: let the runtime schedule it like any other yield.
        this.flag.state.store(IDLE, Ordering::Release);
        cx.waker().wake_by_ref();
        Poll::Pending
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::AtomicUsize;

    /// Counts the wake-ups the runtime would get.
    struct Count(AtomicUsize);

    impl Wake for Count {
        fn wake(self: Arc<Self>) {
            self.0.fetch_add(1, Ordering::Relaxed);
        }
    }

    /// Wakes itself during its first `n` polls, then finishes.
    struct SelfWaking {
        left: usize,
        polls: usize,
    }

    impl Future for SelfWaking {
        type Output = usize;
        fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<usize> {
            self.polls += 1;
            if self.left == 0 {
                return Poll::Ready(self.polls);
            }
            self.left -= 1;
            cx.waker().wake_by_ref();
            Poll::Pending
        }
    }

    fn context_counting() -> (Arc<Count>, Waker) {
        let count = Arc::new(Count(AtomicUsize::new(0)));
        let waker = Waker::from(Arc::clone(&count));
        (count, waker)
    }

    #[test]
    fn a_wake_during_the_poll_polls_again_in_place() {
        let (count, waker) = context_counting();
        let mut cx = Context::from_waker(&waker);
        let mut f = std::pin::pin!(InlineWakes::new(SelfWaking { left: 2, polls: 0 }));
        assert_eq!(f.as_mut().poll(&mut cx), Poll::Ready(3));
        assert_eq!(
            count.0.load(Ordering::Relaxed),
            0,
            "the runtime was not woken"
        );
    }

    #[test]
    fn a_future_that_keeps_waking_itself_still_yields() {
        let (count, waker) = context_counting();
        let mut cx = Context::from_waker(&waker);
        let mut f = std::pin::pin!(InlineWakes::new(SelfWaking {
            left: 100,
            polls: 0
        }));
        assert!(f.as_mut().poll(&mut cx).is_pending());
        assert_eq!(count.0.load(Ordering::Relaxed), 1, "handed to the runtime");
        assert_eq!(f.inner_mut().polls, MAX_INLINE_POLLS);
    }

    #[test]
    fn a_wake_while_idle_reaches_the_task() {
        let (count, waker) = context_counting();
        let mut cx = Context::from_waker(&waker);
        let (tx, rx) = tokio::sync::oneshot::channel::<u8>();
        let mut f = std::pin::pin!(InlineWakes::new(rx));
        assert!(f.as_mut().poll(&mut cx).is_pending());
        std::thread::spawn(move || tx.send(7)).join().ok();
        assert_eq!(count.0.load(Ordering::Relaxed), 1);
        assert!(matches!(f.as_mut().poll(&mut cx), Poll::Ready(Ok(7))));
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn no_wake_from_another_thread_is_lost() {
        // Many short waits on values sent from other threads, racing the adapter's polls.
        for i in 0..2_000u32 {
            let (tx, rx) = tokio::sync::oneshot::channel::<u32>();
            let sender = std::thread::spawn(move || {
                let _ = tx.send(i);
            });
            let got = tokio::time::timeout(std::time::Duration::from_secs(5), InlineWakes::new(rx))
                .await
                .expect("a wake-up was lost")
                .expect("sent");
            assert_eq!(got, i);
            sender.join().ok();
        }
    }
}
