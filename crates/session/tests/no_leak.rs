//! A tracker's memory goes back once its handles and sessions are gone: net heap bytes,
//! measured by a counting global allocator (this test binary's own), return to where they
//! were — for a tracker whose sessions all ended on the thread that dropped it, for one whose
//! slots sit on other threads' free lists until those threads exit, and for one whose
//! session outlived every tracker handle. One test, so no other test allocates meanwhile.

use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicIsize, Ordering};

use livecount_session::{EndReason, SessionTracker};

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

/// Starts and ends `n` sessions (some with handles) with metadata on a fresh tracker.
fn churn(tracker: &SessionTracker<livecount::PerThread, String>, n: usize) {
    let held: Vec<_> = (0..n)
        .map(|i| tracker.start_with(format!("s{i}")))
        .collect();
    for (i, session) in held.into_iter().enumerate() {
        if i % 3 == 0 {
            let handle = session.handle();
            handle.end(EndReason::Cancelled);
        }
    }
    assert_eq!(tracker.active(), 0);
}

/// The net bytes `f` leaves behind, run on a thread of its own (whose exit gives back its
/// free lists).
fn net_on_a_thread(f: impl FnOnce() + Send + 'static) -> isize {
    let before = NET.load(Ordering::Relaxed);
    std::thread::spawn(f).join().unwrap();
    NET.load(Ordering::Relaxed) - before
}

#[test]
fn a_trackers_memory_goes_back_when_it_is_gone() {
    // Warm up: thread-index registrations, the coarse clock's first call, lazy statics.
    net_on_a_thread(|| churn(&SessionTracker::default(), 100));
    // And the counters' global list of free thread indices, which keeps its capacity: sixteen
    // threads alive at once give their indices back together, so the list has room for every
    // thread the phases below run at once (else it grows once, by 32 bytes, whenever five of
    // them happen to exit together, and the phase reads as a leak).
    net_on_a_thread(|| {
        let tracker = SessionTracker::<livecount::PerThread, String>::default();
        let all_started = std::sync::Arc::new(std::sync::Barrier::new(16));
        let threads: Vec<_> = (0..16)
            .map(|_| {
                let (tracker, all_started) = (tracker.clone(), all_started.clone());
                std::thread::spawn(move || {
                    tracker.start().end(EndReason::Completed);
                    all_started.wait();
                })
            })
            .collect();
        for thread in threads {
            thread.join().unwrap();
        }
    });

    // Sessions across several pages, all ended on the thread that drops the tracker.
    let net = net_on_a_thread(|| churn(&SessionTracker::default(), 5_000));
    assert_eq!(net, 0, "a tracker used and dropped on one thread leaked");

    // Sessions ended on other threads: their free lists hold the tracker's slots until they
    // exit; the tracker is freed by the last of them.
    let net = net_on_a_thread(|| {
        let tracker = SessionTracker::<livecount::PerThread, String>::default();
        let sessions: Vec<_> = (0..500)
            .map(|i| tracker.start_with(i.to_string()))
            .collect();
        let enders: Vec<_> = sessions
            .chunks(100)
            .map(|chunk| chunk.iter().map(|s| s.handle()).collect::<Vec<_>>())
            .map(|handles| {
                std::thread::spawn(move || {
                    for h in handles {
                        h.end(EndReason::Disconnected);
                    }
                })
            })
            .collect();
        for e in enders {
            e.join().unwrap();
        }
        drop(sessions);
        drop(tracker);
    });
    assert_eq!(net, 0, "slots ended on other threads leaked");

    // A session that outlives every tracker handle keeps the state alive, then frees it.
    let net = net_on_a_thread(|| {
        let tracker = SessionTracker::<livecount::PerThread, String>::default();
        let session = tracker.start_with("last".to_owned());
        drop(tracker);
        assert!(session.end(EndReason::Completed));
        drop(session);
    });
    assert_eq!(net, 0, "a session outliving its tracker leaked");

    // On one long-lived thread: a dropped tracker's slots on this thread's free list go back
    // when the thread next uses a tracker it has not used before.
    let before = NET.load(Ordering::Relaxed);
    churn(&SessionTracker::default(), 1_000);
    let after_first = NET.load(Ordering::Relaxed) - before;
    assert!(
        after_first > 0,
        "the free list should still hold the first tracker's slots"
    );
    churn(&SessionTracker::default(), 1);
    // The second tracker's (one page, its free list) is still held; the first's is gone.
    let after_second = NET.load(Ordering::Relaxed) - before;
    assert!(
        after_second < after_first,
        "the first tracker's memory stayed after this thread moved on: {after_first} → {after_second}"
    );
}
