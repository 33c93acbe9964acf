//! `PrequalEstimator::record` allocates nothing (it runs at every session start, on the
//! session's own thread), while a probe may: counted by a global allocator, on this
//! thread only.

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use livecount_report::PrequalEstimator;

/// The system allocator, counting the allocations of threads that ask it to.
struct Counting;

static ALLOCATIONS: AtomicUsize = AtomicUsize::new(0);

thread_local! {
    /// Whether this thread's allocations are counted (const-initialised: reading it
    /// allocates nothing).
    static COUNTED: Cell<bool> = const { Cell::new(false) };
}

// SAFETY: every call is forwarded unchanged to `System`, which upholds `GlobalAlloc`'s
// contract; the count on the side changes no allocation.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        if COUNTED.with(Cell::get) {
            // Relaxed: a count read by the same thread.
            ALLOCATIONS.fetch_add(1, Ordering::Relaxed);
        }
        // SAFETY: the caller's `layout` is valid for `System` as it is for us.
        unsafe { System.alloc(layout) }
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: `ptr` came from `alloc` above with this `layout`.
        unsafe { System.dealloc(ptr, layout) }
    }
}

#[global_allocator]
static ALLOCATOR: Counting = Counting;

/// Allocations made by `f` on this thread.
fn allocations(f: impl FnOnce()) -> usize {
    // Relaxed: written and read by this thread only (others are not counted).
    let before = ALLOCATIONS.load(Ordering::Relaxed);
    COUNTED.with(|c| c.set(true));
    f();
    COUNTED.with(|c| c.set(false));
    ALLOCATIONS.load(Ordering::Relaxed) - before
}

#[test]
fn recording_allocates_nothing_and_the_counter_would_see_it_if_it_did() {
    let estimator = PrequalEstimator::new();
    let recorded = allocations(|| {
        for i in 0..10_000u64 {
            estimator.record(i % 50, Duration::from_micros(i));
            estimator.record(u64::MAX, Duration::MAX);
        }
    });
    assert_eq!(recorded, 0);
    // The counter works: a probe's copy of the ring is an allocation.
    let probed = allocations(|| {
        assert!(estimator.probe(25).latency_ms.is_some());
    });
    assert!(probed >= 1, "{probed}");
}
