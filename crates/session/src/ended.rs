//! [`Ended`]: the future [`EndHandle::ended`](crate::EndHandle::ended) returns.

use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};

use livecount::{Counter, PerThread};

use crate::reason::EndReason;
use crate::session_id::SessionId;
use crate::slots::Slot;

/// Resolves to the session's [`EndReason`] once it has ended, whoever ended it; returned by
/// [`EndHandle::ended`](crate::EndHandle::ended). Dropping it unresolved gives up its place in
/// the session's waiter list.
///
/// ```
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() {
/// use livecount_session::{EndReason, SessionTracker};
///
/// let tracker = SessionTracker::new();
/// let session = tracker.start();
/// let handle = session.handle();
/// tracker.end_all(EndReason::Shutdown);
/// assert_eq!(handle.ended().await, EndReason::Shutdown); // ended already: at once
/// # drop(session);
/// # }
/// ```
#[must_use = "futures do nothing unless polled"]
pub struct Ended<'a, C: Counter = PerThread, M = ()> {
    /// Held by the `EndHandle` this future borrows.
    core: &'a Slot<C, M>,
    /// Our place in the session's waiter list, once polled.
    slot: Option<usize>,
}

impl<'a, C: Counter, M> Ended<'a, C, M> {
    pub(crate) fn new(core: &'a Slot<C, M>) -> Self {
        Ended { core, slot: None }
    }
}

impl<C: Counter, M> Future for Ended<'_, C, M> {
    type Output = EndReason;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<EndReason> {
        let this = self.get_mut(); // `Unpin`: a reference and an index
        let ready = this.core.life.poll_end_waiter(&mut this.slot, cx);
        if ready.is_ready() && this.slot.is_some() {
            // Our waker may still sit in the list (if the end came before our bit, nobody
            // empties it): give the place back now rather than when the session is freed.
            this.core.life.forget_waiter(this.slot.take());
        }
        ready
    }
}

impl<C: Counter, M> Drop for Ended<'_, C, M> {
    fn drop(&mut self) {
        if self.slot.is_some() {
            self.core.life.forget_waiter(self.slot.take());
        }
    }
}

impl<C: Counter, M> fmt::Debug for Ended<'_, C, M> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Ended")
            .field("id", &SessionId(self.core.id()))
            .field("reason", &self.core.life.reason())
            .finish()
    }
}
