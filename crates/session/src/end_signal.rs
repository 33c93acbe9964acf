//! `EndSignal`: the wakers of the tasks waiting for one session's end.
//!
//! Two kinds of waiter, kept apart so the common one never takes a lock:
//!
//! * the **owner**: whoever holds the [`Session`](crate::Session) guard and polls
//!   [`Session::poll_ended`](crate::Session::poll_ended) (the tracked adaptors do, at every
//!   `Pending`). One task, so one lock-free slot (`AtomicWaker`);
//! * **handles**: any number of [`EndHandle::ended`](crate::EndHandle::ended) futures, each with
//!   a place in a list behind a mutex. The list is empty (`Vec::new`, no allocation) until
//!   someone waits on a handle, and the ender locks it only then.
//!
//! Whether anyone registered is not recorded here but in the session's state word (the WAITS
//! bits, see `lifecycle.rs`), which the ending CAS reads anyway: an end nobody waits on costs
//! nothing extra.

use std::fmt;
use std::task::Waker;

use crate::sync::{AtomicWaker, Mutex, lock};

/// The wakers waiting for one session's end; see the module docs.
pub(crate) struct EndSignal {
    owner: AtomicWaker,
    /// `EndHandle::ended` futures' wakers; a future keeps its index, `None` marks a free place.
    handles: Mutex<Vec<Option<Waker>>>,
}

impl EndSignal {
    pub(crate) fn new() -> Self {
        EndSignal {
            owner: AtomicWaker::default(),
            handles: Mutex::new(Vec::new()),
        }
    }

    /// Registers the owner's waker (replacing the previous one).
    #[inline]
    pub(crate) fn register_owner(&self, waker: &Waker) {
        self.owner.register(waker);
    }

    /// Registers a handle waiter's waker in its place `slot`, taking a place on first use.
    pub(crate) fn register_waiter(&self, slot: &mut Option<usize>, waker: &Waker) {
        let mut handles = lock(&self.handles);
        match *slot {
            // A place taken before an end emptied the list is gone: take a new one then.
            Some(index) if index < handles.len() => match &mut handles[index] {
                Some(old) if old.will_wake(waker) => {}
                place => *place = Some(waker.clone()),
            },
            _ => {
                let index = match handles.iter().position(Option::is_none) {
                    Some(free) => free,
                    None => {
                        handles.push(None);
                        handles.len() - 1
                    }
                };
                handles[index] = Some(waker.clone());
                *slot = Some(index);
            }
        }
    }

    /// Frees a handle waiter's place. After an end emptied the list the index may name a
    /// newer waiter's place; freeing it is harmless then, because every waiter registered
    /// after the end sees the end itself (its announcing `fetch_or` returns ENDED).
    pub(crate) fn forget_waiter(&self, slot: Option<usize>) {
        let Some(index) = slot else { return };
        if let Some(place) = lock(&self.handles).get_mut(index) {
            *place = None;
        }
    }

    /// Wakes the owner and/or every handle waiter. Called once, by the `end` winner; inline,
    /// so the end nobody waits on (the common one) costs two tested bits, not a call.
    #[inline]
    pub(crate) fn wake(&self, owner: bool, handles: bool) {
        if owner || handles {
            self.wake_slow(owner, handles);
        }
    }

    #[cold]
    fn wake_slow(&self, owner: bool, handles: bool) {
        #[cfg(all(test, not(livecount_loom)))]
        WAKE_CALLS.with(|calls| {
            let (o, h) = calls.get();
            calls.set((o + usize::from(owner), h + usize::from(handles)));
        });
        if owner {
            self.owner.wake();
        }
        if handles {
            // Take the wakers out, wake them outside the lock.
            let wakers = std::mem::take(&mut *lock(&self.handles));
            wakers.into_iter().flatten().for_each(Waker::wake);
        }
    }
}

impl EndSignal {
    /// Drops every registered waker unwoken: a slot being freed for reuse must not keep (or
    /// later wake) the tasks that waited on its previous session.
    pub(crate) fn clear(&self) {
        self.owner.clear();
        lock(&self.handles).clear();
    }
}

#[cfg(all(test, not(livecount_loom)))]
std::thread_local! {
    /// How many owner wakes and waiter-list wakes this thread's ends asked for (tests only:
    /// the WAITS bits exist so that an end nobody waits on wakes nothing).
    static WAKE_CALLS: std::cell::Cell<(usize, usize)> = const { std::cell::Cell::new((0, 0)) };
}

/// This thread's (owner, waiter-list) wake counts so far.
#[cfg(all(test, not(livecount_loom)))]
pub(crate) fn wake_calls() -> (usize, usize) {
    WAKE_CALLS.with(std::cell::Cell::get)
}

impl fmt::Debug for EndSignal {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("EndSignal").finish_non_exhaustive()
    }
}

#[cfg(all(test, not(livecount_loom)))]
mod tests {
    use std::sync::Arc;
    use std::task::{Wake, Waker};

    use super::*;

    struct Held;

    impl Wake for Held {
        fn wake(self: Arc<Self>) {}
    }

    /// `clear` drops the owner's waker and every waiter's, unwoken.
    #[test]
    fn clear_drops_every_registered_waker() {
        let held = Arc::new(Held);
        let waker = Waker::from(Arc::clone(&held));
        let signal = EndSignal::new();
        signal.register_owner(&waker);
        let (mut first, mut second) = (None, None);
        signal.register_waiter(&mut first, &waker);
        signal.register_waiter(&mut second, &waker);
        assert_eq!(
            Arc::strong_count(&held),
            5,
            "ours, the waker, the owner's, two waiters'"
        );
        signal.clear();
        assert_eq!(Arc::strong_count(&held), 2, "clear kept a waker");
    }
}
