//! `CountingAlloc`: a global allocator that can count live heap bytes, so the memory workload
//! measures what each contender really allocates (its own heap, lazily grown cells, the
//! registries behind a metric) instead of trusting what it documents.
//!
//! Counting is off except inside [`measure`]: the timed workloads never pay for it.

#![allow(unsafe_code)]

use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicBool, AtomicIsize, Ordering};

static COUNTING: AtomicBool = AtomicBool::new(false);
static LIVE: AtomicIsize = AtomicIsize::new(0);
static INSTALLED: AtomicBool = AtomicBool::new(false);

/// The system allocator, counting live heap bytes only while the memory workload measures a
/// contender (the timed workloads never pay for it). A binary that runs the picker installs
/// it, or the memory figures are left out:
///
/// ```
/// #[global_allocator]
/// static ALLOC: livecount_picker::CountingAlloc = livecount_picker::CountingAlloc;
/// # fn main() {}
/// ```
#[derive(Debug)]
pub struct CountingAlloc;

impl CountingAlloc {
    #[inline]
    fn note(delta: isize) {
        // Relaxed: the counter is read only after the measured threads were joined.
        if COUNTING.load(Ordering::Relaxed) {
            LIVE.fetch_add(delta, Ordering::Relaxed);
        }
        INSTALLED.store(true, Ordering::Relaxed);
    }
}

// SAFETY:
// - every method forwards to `System` with the caller's arguments unchanged, so `System`'s
//   guarantees are ours; the bookkeeping touches only atomics and never allocates.
unsafe impl GlobalAlloc for CountingAlloc {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        Self::note(layout.size() as isize);
        // SAFETY: forwarded unchanged; the caller upholds `GlobalAlloc::alloc`'s contract.
        unsafe { System.alloc(layout) }
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        Self::note(layout.size() as isize);
        // SAFETY: forwarded unchanged.
        unsafe { System.alloc_zeroed(layout) }
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        Self::note(-(layout.size() as isize));
        // SAFETY: forwarded unchanged; `ptr` came from this allocator, i.e. from `System`.
        unsafe { System.dealloc(ptr, layout) }
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        Self::note(new_size as isize - layout.size() as isize);
        // SAFETY: forwarded unchanged.
        unsafe { System.realloc(ptr, layout, new_size) }
    }
}

/// Whether the running binary installed [`CountingAlloc`].
pub(crate) fn installed() -> bool {
    drop(std::hint::black_box(Box::new(0u64)));
    INSTALLED.load(Ordering::Relaxed)
}

/// Runs `f` with counting on and returns its result and the net heap bytes it left live, or
/// `None` for the bytes if [`CountingAlloc`] is not the global allocator. Not reentrant.
pub(crate) fn measure<T>(f: impl FnOnce() -> T) -> (T, Option<isize>) {
    let installed = installed();
    let before = LIVE.load(Ordering::Relaxed);
    COUNTING.store(true, Ordering::SeqCst);
    let out = f();
    COUNTING.store(false, Ordering::SeqCst);
    let after = LIVE.load(Ordering::Relaxed);
    (out, installed.then_some(after - before))
}
