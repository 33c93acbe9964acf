//! What one tracked session costs: `start()` + `end(Completed)` back to back on 1 and 2
//! threads, against the bare counter, for profiling (`perf record`) and quick side-by-side
//! ratios. The picker's `lifecycle` workload is the measurement of record.
//!
//! `cargo run --release -p livecount-session --example pair_cost [-- PAIRS]`

use std::hint::black_box;
use std::sync::Barrier;
use std::time::Instant;

use livecount::{Counter, PerThread};
use livecount_session::{EndReason, SessionTracker};

fn per_pair(threads: usize, pairs: u64, f: impl Fn() + Sync) -> f64 {
    let barrier = Barrier::new(threads);
    let elapsed: Vec<f64> = std::thread::scope(|s| {
        let handles: Vec<_> = (0..threads)
            .map(|_| {
                s.spawn(|| {
                    barrier.wait();
                    let t0 = Instant::now();
                    for _ in 0..pairs {
                        f();
                    }
                    t0.elapsed().as_secs_f64()
                })
            })
            .collect();
        handles.into_iter().map(|h| h.join().unwrap()).collect()
    });
    let slowest = elapsed.iter().copied().fold(0.0, f64::max);
    1e9 * slowest / pairs as f64
}

fn main() {
    let pairs: u64 = std::env::args()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or(5_000_000);
    let tracker: SessionTracker<PerThread> = SessionTracker::default();
    if std::env::args().nth(2).as_deref() == Some("tracked") {
        // For `perf record`: the tracked pair alone, on one thread.
        let t = per_pair(1, pairs, || {
            black_box(tracker.start()).end(EndReason::Completed);
        });
        println!("1 thread: tracked {t:.1} ns per pair");
        return;
    }
    let bare = PerThread::new();
    for threads in [1, 2] {
        let t = per_pair(threads, pairs, || {
            black_box(tracker.start()).end(EndReason::Completed);
        });
        let b = per_pair(threads, pairs, || {
            let token = black_box(bare.increment());
            bare.decrement(token);
        });
        let single = std::sync::atomic::AtomicI64::new(0);
        let a = per_pair(threads, pairs, || {
            black_box(&single).fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            black_box(&single).fetch_sub(1, std::sync::atomic::Ordering::Relaxed);
        });
        println!(
            "{threads} thread(s): tracked {t:.1} ns per pair per thread, bare PerThread {b:.2} ns \
             ({:.0}×), AtomicI64 {a:.1} ns (tracked = {:.2}× AtomicI64)",
            t / b,
            t / a
        );
    }
    assert_eq!(tracker.active(), 0);
}
