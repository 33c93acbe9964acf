//! The one place that chooses between `std`, `loom` and `shuttle` primitives.
//!
//! Production code imports `crate::sync::…` and never mentions a model checker. The cfgs are
//! prefixed (`livecount_loom`, `livecount_shuttle`) so that turning a checker on for this crate
//! does not switch tokio, crossbeam or anything else into its own loom mode.

#[cfg(not(any(livecount_loom, livecount_shuttle)))]
mod imp {
    pub(crate) use std::sync::atomic::{AtomicPtr, AtomicU64, AtomicUsize, Ordering};
    pub(crate) use std::sync::{Mutex, MutexGuard};
    pub(crate) use std::thread_local;

    use crate::thread_id::IdPool;

    static POOL: Mutex<IdPool> = Mutex::new(IdPool::new());

    /// A handle on the pool of thread indices, kept by each thread's registration.
    pub(crate) type PoolRef = &'static Mutex<IdPool>;

    /// The process-wide pool of reusable thread indices.
    pub(crate) fn id_pool() -> PoolRef {
        &POOL
    }

    /// A copy of the calling thread's index in a `const`-initialised thread-local without a
    /// destructor: reading it is one thread-local load, with no initialisation or teardown
    /// state to check. The registration (which owns the index) fills and clears it.
    pub(crate) mod index_cache {
        use std::cell::Cell;

        use crate::cell_table::Location;

        std::thread_local! {
            static INDEX: Cell<usize> = const { Cell::new(usize::MAX) };
            /// The index's `Location` bits (`usize::MAX`: none): what `PerThread` reads.
            static LOCATION: Cell<usize> = const { Cell::new(usize::MAX) };
        }

        #[inline]
        pub(crate) fn get() -> Option<usize> {
            let index = INDEX.get();
            (index != usize::MAX).then_some(index)
        }

        #[inline]
        pub(crate) fn location() -> Option<Location> {
            let bits = LOCATION.get();
            // `usize::MAX` is no location's bits: its offset would not fit beside the bucket.
            (bits != usize::MAX).then(|| Location::from_bits(bits))
        }

        #[inline]
        pub(crate) fn set(index: Option<usize>) {
            INDEX.set(index.unwrap_or(usize::MAX));
            let location = index.and_then(Location::of);
            LOCATION.set(location.map_or(usize::MAX, Location::to_bits));
        }
    }
}

#[cfg(livecount_loom)]
mod imp {
    pub(crate) use loom::sync::atomic::{AtomicPtr, AtomicU64, AtomicUsize, Ordering};
    pub(crate) use loom::sync::{Mutex, MutexGuard};
    pub(crate) use loom::thread_local;

    use crate::thread_id::IdPool;

    loom::lazy_static! {
        // Reset for every loom execution, so thread indices are deterministic per iteration.
        static ref POOL: loom::sync::Arc<Mutex<IdPool>> = Default::default();
    }

    /// A handle on the pool. An `Arc`, because loom drops its lazy statics before the main
    /// thread's thread-locals, and a registration still needs the pool when it is dropped.
    pub(crate) type PoolRef = loom::sync::Arc<Mutex<IdPool>>;

    /// The pool of reusable thread indices, fresh for every loom execution.
    pub(crate) fn id_pool() -> PoolRef {
        PoolRef::clone(&POOL)
    }

    pub(crate) use super::model_index_cache as index_cache;
}

#[cfg(all(livecount_shuttle, not(livecount_loom)))]
mod imp {
    pub(crate) use shuttle::sync::atomic::{AtomicPtr, AtomicU64, AtomicUsize, Ordering};
    pub(crate) use shuttle::sync::{Mutex, MutexGuard};
    pub(crate) use shuttle::thread_local;

    use crate::thread_id::IdPool;

    shuttle::lazy_static! {
        // Reset for every shuttle execution, so thread indices are deterministic per iteration.
        static ref POOL: shuttle::sync::Arc<Mutex<IdPool>> = Default::default();
    }

    /// A handle on the pool. An `Arc`, because the checker may drop its lazy statics before
    /// the main thread's thread-locals, and a registration still needs the pool when dropped.
    pub(crate) type PoolRef = shuttle::sync::Arc<Mutex<IdPool>>;

    /// The pool of reusable thread indices, fresh for every shuttle execution.
    pub(crate) fn id_pool() -> PoolRef {
        PoolRef::clone(&POOL)
    }

    pub(crate) use super::model_index_cache as index_cache;
}

/// No index cache under a model checker: every lookup goes through the registration, whose
/// thread-local is the one the checker models.
#[cfg(any(livecount_loom, livecount_shuttle))]
pub(crate) mod model_index_cache {
    #[inline]
    pub(crate) fn get() -> Option<usize> {
        None
    }

    #[inline]
    pub(crate) fn location() -> Option<crate::cell_table::Location> {
        None
    }

    #[inline]
    pub(crate) fn set(_index: Option<usize>) {}
}

pub(crate) use imp::*;

/// Locks `mutex`, ignoring poison: every critical section in this crate leaves its data
/// consistent before anything that could panic, so a poisoned lock still holds valid data.
pub(crate) fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}

/// Locks the thread-index pool behind any kind of [`PoolRef`].
pub(crate) fn lock_pool(pool: &PoolRef) -> MutexGuard<'_, crate::thread_id::IdPool> {
    lock(pool)
}
