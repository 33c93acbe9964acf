//! `EndHandle::ended()` futures and the wakers they leave with the session, polled by hand
//! with counting wakers: the end wakes the task that polled last, each waiter has one place,
//! and a future dropped before the end takes its waker back.

use std::future::Future;
use std::pin::pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::task::{Context, Poll, Wake, Waker};

use livecount_session::{EndReason, SessionTracker};

/// A waker that counts its wakes.
#[derive(Default)]
struct Counting(AtomicUsize);

impl Wake for Counting {
    fn wake(self: Arc<Self>) {
        self.wake_by_ref();
    }

    fn wake_by_ref(self: &Arc<Self>) {
        self.0.fetch_add(1, Ordering::SeqCst);
    }
}

fn counting() -> (Arc<Counting>, Waker) {
    let count = Arc::new(Counting::default());
    let waker = Waker::from(Arc::clone(&count));
    (count, waker)
}

fn wakes(count: &Counting) -> usize {
    count.0.load(Ordering::SeqCst)
}

/// A future polled twice by the same task and dropped before the end leaves nothing behind:
/// no clone of its waker stays with the session, and the end wakes nobody.
#[test]
fn a_dropped_future_takes_its_waker_back() {
    let tracker = SessionTracker::new();
    let session = tracker.start();
    let handle = session.handle();
    let (count, waker) = counting();
    {
        let mut ended = pin!(handle.ended());
        let mut cx = Context::from_waker(&waker);
        assert!(ended.as_mut().poll(&mut cx).is_pending());
        assert!(ended.as_mut().poll(&mut cx).is_pending());
        assert_eq!(
            Arc::strong_count(&count),
            3,
            "the session holds one clone of the waker"
        );
    }
    assert_eq!(
        Arc::strong_count(&count),
        2,
        "the dropped future left its waker behind"
    );
    session.end(EndReason::Completed);
    assert_eq!(wakes(&count), 0, "the end woke a future that was gone");
}

/// A future moved to another task (polled with another waker) is woken through the new one.
#[test]
fn the_end_wakes_the_task_that_polled_last() {
    let tracker = SessionTracker::new();
    let session = tracker.start();
    let handle = session.handle();
    let (first, first_waker) = counting();
    let (second, second_waker) = counting();
    let mut ended = pin!(handle.ended());
    assert!(
        ended
            .as_mut()
            .poll(&mut Context::from_waker(&first_waker))
            .is_pending()
    );
    assert!(
        ended
            .as_mut()
            .poll(&mut Context::from_waker(&second_waker))
            .is_pending()
    );
    assert_eq!(
        Arc::strong_count(&first),
        2,
        "the replaced waker is still held"
    );
    session.end(EndReason::Disconnected);
    assert_eq!((wakes(&first), wakes(&second)), (0, 1));
    assert_eq!(
        ended.as_mut().poll(&mut Context::from_waker(&second_waker)),
        Poll::Ready(EndReason::Disconnected)
    );
}

/// Several waiters each hold their own place; the end wakes every one exactly once, and the
/// session keeps none of their wakers afterwards.
#[test]
fn every_waiter_is_woken_once() {
    let tracker = SessionTracker::new();
    let session = tracker.start();
    let handle = session.handle();
    let counts: Vec<_> = (0..3).map(|_| counting()).collect();
    let mut futures: Vec<_> = counts.iter().map(|_| Box::pin(handle.ended())).collect();
    for (future, (_, waker)) in futures.iter_mut().zip(&counts) {
        let mut cx = Context::from_waker(waker);
        assert!(future.as_mut().poll(&mut cx).is_pending());
        assert!(future.as_mut().poll(&mut cx).is_pending());
    }
    assert!(handle.end(EndReason::Shutdown));
    for (count, _) in &counts {
        assert_eq!(wakes(count), 1);
        assert_eq!(
            Arc::strong_count(count),
            2,
            "the session kept a woken waker"
        );
    }
    drop(futures);
    drop(session);
}
