//! The one place that chooses between `std` and `loom` primitives (and, under the
//! `livecount_audit` cfg, `std`'s atomics with their writes recorded: see `livecount`'s
//! `sync` and `scripts/audit.sh`).
//!
//! Production code imports `crate::sync::…` and never mentions loom. The cfg is prefixed
//! (`livecount_loom`) so turning the model checker on for this workspace does not switch
//! tokio or crossbeam into their own loom modes: under `livecount_loom` the session table's
//! pages and carve cursor keep `std` atomics and are, to loom, single steps. What loom
//! explores is the ending protocol and the slot lifetime: the per-session state word (with
//! its references and generation), the token cells and the slot's data cell, the end signal
//! (its waker slot and waiter list), the tracker state's reference counts, the pool every
//! freed slot goes through, and the counters.
//!
//! The owner's waker slot is the `atomic-waker` crate's `AtomicWaker` in production and loom's
//! model of the same contract under loom (a slot whose `register` / `wake` behave as if
//! serialised, waking the registrant itself when a `wake` overlaps its `register`): loom then
//! explores our use of the slot against the state word, not the slot's own internals, which
//! the crate tests itself.

#[cfg(not(livecount_loom))]
mod imp {
    // Under `livecount_audit`, `std`'s atomics with every write recorded (`livecount::audit`,
    // one recorder for both crates); otherwise `std`'s themselves. One list for both.
    pub(crate) use atomics::{AtomicBool, AtomicU64};
    #[cfg(livecount_audit)]
    use livecount::audit as atomics;
    #[cfg(not(livecount_audit))]
    use std::sync::atomic as atomics;
    pub(crate) use std::sync::atomic::{Ordering, fence};
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

        /// Drops the stored waker, if any, without waking it.
        pub(crate) fn clear(&self) {
            drop(self.0.take());
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
        /// Under `livecount_audit` it counts as a write of the cell's first line.
        #[inline]
        #[cfg_attr(livecount_audit, track_caller)]
        pub(crate) fn with_mut<R>(&self, f: impl FnOnce(*mut T) -> R) -> R {
            #[cfg(livecount_audit)]
            livecount::audit::record(self.0.get().addr(), std::panic::Location::caller());
            f(self.0.get())
        }

        /// Runs `f` with a shared pointer to the contents; the caller rules out writers.
        #[inline]
        pub(crate) fn with<R>(&self, f: impl FnOnce(*const T) -> R) -> R {
            f(self.0.get())
        }
    }
}

#[cfg(livecount_loom)]
mod imp {
    pub(crate) use loom::cell::UnsafeCell;
    pub(crate) use loom::sync::atomic::{AtomicBool, AtomicU64, Ordering, fence};
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

        pub(crate) fn clear(&self) {
            drop(self.0.take_waker());
        }
    }
}

pub(crate) use imp::*;

/// Atomics that stay `std`'s even under loom (the session table's pages, carve cursor and
/// reference counts, and a slot's last activity: see `slots`), and are recorded under
/// `livecount_audit` like the rest.
pub(crate) mod plain {
    pub(crate) use atomics::{AtomicPtr, AtomicU64, AtomicUsize};
    #[cfg(all(livecount_audit, not(livecount_loom)))]
    use livecount::audit as atomics;
    #[cfg(not(all(livecount_audit, not(livecount_loom))))]
    use std::sync::atomic as atomics;
}

/// Locks `mutex`, ignoring poison: every critical section in this crate leaves its data
/// consistent before anything that could panic.
pub(crate) fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}
