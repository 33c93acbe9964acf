//! [`DrainStarted`]: a future that resolves when a session's tracker begins to drain.

use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};

use livecount::{Counter, PerThread};

use crate::session::EndHandle;

/// Resolves when the tracker of a session begins to drain
/// ([`SessionTracker::begin_drain`](crate::SessionTracker::begin_drain)), at once if it has;
/// made by [`EndHandle::drain_started`]. It holds a handle on the session (so it is
/// `'static`), and a place in the tracker's list of drain waiters while it waits, given up
/// when it is dropped.
#[must_use = "futures do nothing unless polled"]
pub struct DrainStarted<C: Counter = PerThread, M = ()> {
    handle: EndHandle<C, M>,
    /// Its place in the tracker's waiter list, once it has waited.
    place: Option<usize>,
}

impl<C: Counter, M> DrainStarted<C, M> {
    pub(crate) fn new(handle: EndHandle<C, M>) -> Self {
        DrainStarted {
            handle,
            place: None,
        }
    }
}

// Nothing in it is pinned structurally: it only holds a handle and an index.
impl<C: Counter, M> Unpin for DrainStarted<C, M> {}

impl<C: Counter, M> Future for DrainStarted<C, M> {
    type Output = ();

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        let this = self.get_mut();
        let tally = this.handle.tally();
        if tally.is_draining() {
            return Poll::Ready(());
        }
        tally
            .drain_waiters
            .register_waiter(&mut this.place, cx.waker());
        // Checked again after registering: a `begin_drain` that woke the list before this
        // registration took the list's lock first, so its flag is seen here (see
        // `Tally::begin_drain`).
        if tally.is_draining() {
            return Poll::Ready(());
        }
        Poll::Pending
    }
}

impl<C: Counter, M> Drop for DrainStarted<C, M> {
    fn drop(&mut self) {
        let place = self.place.take();
        self.handle.tally().drain_waiters.forget_waiter(place);
    }
}

impl<C: Counter, M> fmt::Debug for DrainStarted<C, M> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("DrainStarted")
            .field("session", &self.handle.id())
            .field("draining", &self.handle.is_draining())
            .finish()
    }
}
