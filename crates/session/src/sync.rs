//! The one place that chooses between `std` and `loom` primitives.
//!
//! Production code imports `crate::sync::…` and never mentions loom. The cfg is prefixed
//! (`livecount_loom`) so turning the model checker on for this workspace does not switch
//! tokio, sharded-slab or crossbeam into their own loom modes: under `livecount_loom` the
//! registry (sharded-slab) keeps its `std` atomics and is, to loom, a sequence of atomic steps.
//! What loom explores is the ending protocol: the per-session state word, the token cells,
//! the end signal (its waker slot and waiter list) and the counters.
//!
//! The owner's waker slot is the `atomic-waker` crate's `AtomicWaker` in production and loom's
//! model of the same contract under loom (a slot whose `register` / `wake` behave as if
//! serialised, waking the registrant itself when a `wake` overlaps its `register`): loom then
//! explores our use of the slot against the state word, not the slot's own internals, which
//! the crate tests itself.

#[cfg(not(livecount_loom))]
mod imp {
    pub(crate) use std::sync::atomic::{AtomicU64, Ordering};
    pub(crate) use std::sync::{Mutex, MutexGuard};

    /// One waker slot: the last registered waker, taken and woken by `wake`.
    #[derive(Debug, Default)]
    pub(crate) struct AtomicWaker(atomic_waker::AtomicWaker);

    impl AtomicWaker {
        /// Stores a clone of `waker` (unless the stored one would wake the same task).
        #[inline]
        pub(crate) fn register(&self, waker: &std::task::Waker) {
            self.0.register(waker);
        }

        /// Takes the stored waker, if any, and wakes it.
        #[inline]
        pub(crate) fn wake(&self) {
            self.0.wake();
        }
    }

    /// `std`'s `UnsafeCell` with loom's closure-based API, so both spell access the same way.
    #[derive(Debug)]
    pub(crate) struct UnsafeCell<T>(std::cell::UnsafeCell<T>);

    impl<T> UnsafeCell<T> {
        pub(crate) const fn new(value: T) -> Self {
            UnsafeCell(std::cell::UnsafeCell::new(value))
        }

        /// Runs `f` with a mutable pointer to the contents; the caller upholds exclusivity.
        #[inline]
        pub(crate) fn with_mut<R>(&self, f: impl FnOnce(*mut T) -> R) -> R {
            f(self.0.get())
        }
    }

    /// The calling thread's shard hint: a small number handed out round-robin on first use.
    #[inline]
    pub(crate) fn shard_hint() -> usize {
        use std::sync::atomic::AtomicUsize;
        static NEXT: AtomicUsize = AtomicUsize::new(0);
        std::thread_local! {
            // Relaxed: only spreads threads over shards; no data is published through it.
            static HINT: usize = NEXT.fetch_add(1, Ordering::Relaxed);
        }
        HINT.try_with(|hint| *hint).unwrap_or(0)
    }
}

#[cfg(livecount_loom)]
mod imp {
    pub(crate) use loom::cell::UnsafeCell;
    pub(crate) use loom::sync::atomic::{AtomicU64, Ordering};
    pub(crate) use loom::sync::{Mutex, MutexGuard};

    /// loom's model of a waker slot, with the production shim's method names.
    #[derive(Debug, Default)]
    pub(crate) struct AtomicWaker(loom::future::AtomicWaker);

    impl AtomicWaker {
        pub(crate) fn register(&self, waker: &std::task::Waker) {
            self.0.register_by_ref(waker);
        }

        pub(crate) fn wake(&self) {
            self.0.wake();
        }
    }

    /// Under loom every thread uses shard 0: a hint derived from loom's thread ids would change
    /// with every execution and make the explored state space non-deterministic.
    #[inline]
    pub(crate) fn shard_hint() -> usize {
        0
    }
}

pub(crate) use imp::*;

/// Locks `mutex`, ignoring poison: every critical section in this crate leaves its data
/// consistent before anything that could panic.
pub(crate) fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}
