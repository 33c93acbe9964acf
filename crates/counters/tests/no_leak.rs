//! Dropping a counter frees every cell it allocated: net heap bytes return to where they
//! were, measured by a counting global allocator (this test binary's own).

use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicIsize, Ordering};

use livecount::{Counter, PerThread, Striped};

/// The system allocator, keeping the net number of bytes allocated.
struct Counting;

static NET: AtomicIsize = AtomicIsize::new(0);

// SAFETY: every call is forwarded unchanged to `System`, which upholds `GlobalAlloc`'s
// contract; the byte count on the side changes no allocation.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        NET.fetch_add(layout.size() as isize, Ordering::Relaxed);
        // SAFETY: the caller's `layout` is valid for `System` as it is for us.
        unsafe { System.alloc(layout) }
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        NET.fetch_sub(layout.size() as isize, Ordering::Relaxed);
        // SAFETY: `ptr` came from `alloc` above with this `layout`.
        unsafe { System.dealloc(ptr, layout) }
    }
}

#[global_allocator]
static ALLOCATOR: Counting = Counting;

/// Net bytes after building, using and dropping `n` counters made by `new`, on this thread.
fn net_after<C: Counter>(n: usize, new: impl Fn() -> C) -> isize {
    let before = NET.load(Ordering::Relaxed);
    for _ in 0..n {
        let counter = new();
        let t = counter.increment();
        counter.decrement(t);
        assert!(counter.totals().is_some());
    }
    NET.load(Ordering::Relaxed) - before
}

#[test]
fn dropping_a_counter_frees_its_cells() {
    // Warm up: this thread's index registration and any lazy statics allocate once.
    net_after(1, PerThread::new);
    // 1 000 counters, each with a bucket of cells (128 bytes a cell): a leak would be
    // ≥ 128 000 bytes; nothing else here allocates.
    // (`Striped` shares the cell table, but one thread never opens its stripes.)
    assert_eq!(
        settled(|| net_after(1_000, PerThread::new)),
        0,
        "PerThread leaked its cells"
    );
    dropping_a_counter_frees_buckets_past_the_first();
    dropping_a_striped_frees_every_table();
}

/// The net bytes of the quietest of three tries of `f`. Rarely, the test harness's own
/// thread allocates during a measurement (seen once in a dozen `cargo test` runs, on the
/// first run of a fresh build); a leak shows in every try, that does not.
fn settled(f: impl Fn() -> isize) -> isize {
    (0..3)
        .map(|_| f())
        .min_by_key(|n| n.unsigned_abs())
        .expect("three tries")
}

/// Several threads on one `PerThread` use thread indices past 0, so the counter allocates
/// buckets past the first (bucket `k` holds `2^k` cells): dropping it frees each with its own
/// size. Called from the one test, so no other test allocates meanwhile.
fn dropping_a_counter_frees_buckets_past_the_first() {
    // Warm up (the index pool's free list grows to hold six indices). Spawning and joining
    // threads leaves a few bytes of its own behind each time (56 here, without any counter),
    // so the measure is against the same threads that touch no counter.
    six_threads(true);
    let threads_alone = six_threads(false);
    assert_eq!(
        six_threads(true) - threads_alone,
        0,
        "a bucket was freed with the wrong size"
    );
}

/// Net bytes left after six threads, alive at once, count (if `count`) on one `PerThread`
/// that is then dropped.
fn six_threads(count: bool) -> isize {
    use std::sync::{Arc, Barrier};
    let before = NET.load(Ordering::Relaxed);
    let counter = Arc::new(PerThread::new());
    let barrier = Arc::new(Barrier::new(6));
    let threads: Vec<_> = (0..6)
        .map(|_| {
            let (counter, barrier) = (Arc::clone(&counter), Arc::clone(&barrier));
            std::thread::spawn(move || {
                // All alive at once: six distinct indices, three buckets or more.
                barrier.wait();
                if count {
                    let t = counter.increment();
                    counter.decrement(t);
                }
                barrier.wait();
            })
        })
        .collect();
    for t in threads {
        t.join().unwrap();
    }
    assert_eq!(counter.load(), 0);
    drop(counter);
    NET.load(Ordering::Relaxed) - before
}

/// A `Striped` that contention has grown past its first table (two stripes, then four)
/// frees every table with its own size when dropped: net bytes against the same threads
/// on a counter that never grew. Called from the one test, as above.
fn dropping_a_striped_frees_every_table() {
    // Warm up: the threads' index registrations and the pool's free list.
    eight_threads_on_striped(true);
    let threads_alone = eight_threads_on_striped(false);
    assert_eq!(
        settled(|| eight_threads_on_striped(true) - threads_alone),
        0,
        "Striped leaked a table or freed one with the wrong size"
    );
}

/// Net bytes left after eight threads contend (if `contend`) on one `Striped` capped at four
/// stripes until it has four, or start and end one session each (it never grows); it is
/// then dropped.
fn eight_threads_on_striped(contend: bool) -> isize {
    use std::sync::{Arc, Barrier};
    use std::time::{Duration, Instant};
    let before = NET.load(Ordering::Relaxed);
    let counter = Arc::new(Striped::with_max_stripes(4));
    let barrier = Arc::new(Barrier::new(8));
    let deadline = Instant::now() + Duration::from_secs(20);
    let threads: Vec<_> = (0..8)
        .map(|_| {
            let (counter, barrier) = (Arc::clone(&counter), Arc::clone(&barrier));
            std::thread::spawn(move || {
                barrier.wait();
                loop {
                    let t = counter.increment();
                    counter.decrement(t);
                    let grown = counter.stripes() == counter.max_stripes();
                    if !contend || grown || Instant::now() > deadline {
                        break;
                    }
                }
                barrier.wait();
            })
        })
        .collect();
    for t in threads {
        t.join().unwrap();
    }
    assert_eq!(counter.load(), 0);
    if contend {
        assert_eq!(
            counter.stripes(),
            4,
            "eight threads never grew the stripes to 4 in 20 s"
        );
    }
    drop(counter);
    NET.load(Ordering::Relaxed) - before
}
