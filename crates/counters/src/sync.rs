//! The one place that chooses between `std`, `loom` and `shuttle` primitives.
//!
//! Production code imports `crate::sync::…` and never mentions a model checker. The cfgs are
//! prefixed (`livecount_loom`, `livecount_shuttle`) so that turning a checker on for this crate
//! does not switch tokio, crossbeam or anything else into its own loom mode.
//!
//! A third cfg, `livecount_audit` (with neither checker), keeps `std`'s primitives but hands
//! out atomics that record every write's cache line and thread first: the contention audit
//! (`crate::audit`, `scripts/audit.sh`). Without it the atomics here are `std`'s own.
//!
//! A leaf, like sharded-slab's `sync.rs` and tokio's `loom` shim: it knows primitives only,
//! never this crate's types (the thread-index pool lives in `thread_id`, its cache in
//! `index_cache`). What differs between the backends beyond the primitives is said here once:
//! how a process-wide value is declared ([`global!`]) and whether a plain `std` thread-local
//! is one per modelled thread ([`MODEL_CHECKED`]).

#[cfg(not(any(livecount_loom, livecount_shuttle)))]
mod imp {
    // Under `livecount_audit`, the same atomics with every write recorded (see `crate::audit`,
    // which wraps every `std` atomic type under its `std` name); otherwise `std`'s themselves,
    // so a normal build is not touched by the audit. One list for both.
    #[cfg(livecount_audit)]
    use crate::audit as atomics;
    pub(crate) use atomics::{AtomicPtr, AtomicU64, AtomicUsize};
    #[cfg(not(livecount_audit))]
    use std::sync::atomic as atomics;
    pub(crate) use std::sync::atomic::Ordering;
    pub(crate) use std::sync::{Mutex, MutexGuard};
    pub(crate) use std::thread_local;

    /// No model checker: every thread is an OS thread with its own `std` thread-locals.
    pub(crate) const MODEL_CHECKED: bool = false;

    /// A handle on a process-wide value declared with [`global!`](super::global).
    pub(crate) type Global<T> = &'static T;

    /// Declares `fn name() -> Global<T>`: a process-wide value, here a plain `static` (so
    /// `init` must be a constant expression).
    macro_rules! global {
        ($(#[$attr:meta])* $vis:vis fn $name:ident() -> $ty:ty = $init:expr;) => {
            $(#[$attr])*
            $vis fn $name() -> $crate::sync::Global<$ty> {
                static GLOBAL: $ty = $init;
                &GLOBAL
            }
        };
    }
    pub(crate) use global;
}

#[cfg(livecount_loom)]
// Not mutated (cargo-mutants reads `mutants::skip`; no build sets `cfg(mutants)`):
// the model checker's shim, compiled only under it.
#[cfg_attr(mutants, mutants::skip)]
mod imp {
    pub(crate) use loom::sync::atomic::{AtomicPtr, AtomicU64, AtomicUsize, Ordering};
    pub(crate) use loom::sync::{Mutex, MutexGuard};
    pub(crate) use loom::thread_local;

    /// Loom runs every model thread on one OS thread: a `std` thread-local is shared by all.
    pub(crate) const MODEL_CHECKED: bool = true;

    /// A handle on a process-wide value. An `Arc`, because loom drops its lazy statics before
    /// the main thread's thread-locals, and a thread-local's destructor may still need it.
    pub(crate) type Global<T> = loom::sync::Arc<T>;

    /// Declares `fn name() -> Global<T>`: a value made afresh for every loom execution, so
    /// each iteration of a model starts from the same state.
    macro_rules! global {
        ($(#[$attr:meta])* $vis:vis fn $name:ident() -> $ty:ty = $init:expr;) => {
            $(#[$attr])*
            $vis fn $name() -> $crate::sync::Global<$ty> {
                loom::lazy_static! {
                    static ref GLOBAL: loom::sync::Arc<$ty> = loom::sync::Arc::new($init);
                }
                loom::sync::Arc::clone(&GLOBAL)
            }
        };
    }
    pub(crate) use global;
}

#[cfg(all(livecount_shuttle, not(livecount_loom)))]
// Not mutated (cargo-mutants reads `mutants::skip`; no build sets `cfg(mutants)`):
// the model checker's shim, compiled only under it.
#[cfg_attr(mutants, mutants::skip)]
mod imp {
    pub(crate) use shuttle::sync::atomic::{AtomicPtr, AtomicU64, AtomicUsize, Ordering};
    pub(crate) use shuttle::sync::{Mutex, MutexGuard};
    pub(crate) use shuttle::thread_local;

    /// Shuttle runs every model thread on one OS thread: a `std` thread-local is shared by all.
    pub(crate) const MODEL_CHECKED: bool = true;

    /// A handle on a process-wide value. An `Arc`, because the checker may drop its lazy
    /// statics before the main thread's thread-locals, and a destructor may still need it.
    pub(crate) type Global<T> = shuttle::sync::Arc<T>;

    /// Declares `fn name() -> Global<T>`: a value made afresh for every shuttle execution.
    macro_rules! global {
        ($(#[$attr:meta])* $vis:vis fn $name:ident() -> $ty:ty = $init:expr;) => {
            $(#[$attr])*
            $vis fn $name() -> $crate::sync::Global<$ty> {
                shuttle::lazy_static! {
                    static ref GLOBAL: shuttle::sync::Arc<$ty> = shuttle::sync::Arc::new($init);
                }
                shuttle::sync::Arc::clone(&GLOBAL)
            }
        };
    }
    pub(crate) use global;
}

pub(crate) use imp::*;

/// Locks `mutex`, ignoring poison: every critical section in this crate leaves its data
/// consistent before anything that could panic, so a poisoned lock still holds valid data.
pub(crate) fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}

/// Locks a mutex declared with [`global!`], whichever handle the backend gives ([`Global`]:
/// a `&'static` here, an `Arc` under a model checker).
pub(crate) fn lock_global<T>(global: &Global<Mutex<T>>) -> MutexGuard<'_, T> {
    lock(global)
}
