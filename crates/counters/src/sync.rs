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

    /// The process-wide pool of reusable thread indices.
    pub(crate) fn id_pool() -> &'static Mutex<IdPool> {
        &POOL
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
        static ref POOL: Mutex<IdPool> = Mutex::new(IdPool::new());
    }

    /// The pool of reusable thread indices, fresh for every loom execution.
    pub(crate) fn id_pool() -> &'static Mutex<IdPool> {
        &POOL
    }
}

#[cfg(all(livecount_shuttle, not(livecount_loom)))]
mod imp {
    pub(crate) use shuttle::sync::atomic::{AtomicPtr, AtomicU64, AtomicUsize, Ordering};
    pub(crate) use shuttle::sync::{Mutex, MutexGuard};
    pub(crate) use shuttle::thread_local;

    use crate::thread_id::IdPool;

    shuttle::lazy_static! {
        // Reset for every shuttle execution, so thread indices are deterministic per iteration.
        static ref POOL: Mutex<IdPool> = Mutex::new(IdPool::new());
    }

    /// The pool of reusable thread indices, fresh for every shuttle execution.
    pub(crate) fn id_pool() -> &'static Mutex<IdPool> {
        &POOL
    }
}

pub(crate) use imp::*;

/// Locks `mutex`, ignoring poison: every critical section in this crate leaves its data
/// consistent before anything that could panic, so a poisoned lock still holds valid data.
pub(crate) fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}
