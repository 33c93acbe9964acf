//! The cost of one session start + end through the tracker (guard, registry, state word,
//! reason count) against the bare counter's increment + decrement, on 1 and 2 threads.
//!
//!     cargo run --release -p livecount-session --example lifecycle_cost [iterations]
//!
//! Every thread waits on a barrier, then runs `iterations` start+end pairs back to back; each thread
//! times its own loop from the barrier, and the slowest thread's time is divided by its
//! iterations (so on 2 threads it is the time one pair takes while the other thread does the
//! same). `black_box` keeps tokens and guards from being optimised away. Each row is the best
//! of five runs. Ballpark: a shared 2-core VM is noisy.

use std::hint::black_box;
use std::sync::Barrier;
use std::time::{Duration, Instant};

use livecount::{Counter, PerThread, Sharded, Single};
use livecount_session::{EndReason, SessionTracker};

/// Runs `op` `iterations` times on each of `threads` threads started together; returns the
/// longest thread's time. Each thread times itself from the barrier: on 2 cores the main
/// thread may not even be scheduled while the workers run.
fn time(threads: usize, iterations: u64, op: &(dyn Fn() + Sync)) -> Duration {
    let barrier = Barrier::new(threads);
    std::thread::scope(|s| {
        let workers: Vec<_> = (0..threads)
            .map(|_| {
                s.spawn(|| {
                    op(); // warm: register the thread with the counter and the slab
                    barrier.wait();
                    let start = Instant::now();
                    for _ in 0..iterations {
                        op();
                    }
                    start.elapsed()
                })
            })
            .collect();
        workers
            .into_iter()
            .map(|w| w.join().unwrap())
            .max()
            .unwrap()
    })
}

fn best(threads: usize, iterations: u64, op: &(dyn Fn() + Sync)) -> f64 {
    (0..5)
        .map(|_| time(threads, iterations, op).as_nanos() as f64 / iterations as f64)
        .fold(f64::INFINITY, f64::min)
}

fn row<C: Counter + Default + 'static>(name: &str, iterations: u64) {
    let counter = C::default();
    let bare = || {
        let counter = black_box(&counter); // keep the loop from folding updates together
        let token = black_box(counter.increment());
        counter.decrement(token);
    };
    let tracker = SessionTracker::<C>::default();
    let tracked = || {
        let session = black_box(tracker.start());
        session.end(EndReason::Completed);
    };
    let dropped = || drop(black_box(tracker.start()));
    for threads in [1, 2] {
        let (b, t, d) = (
            best(threads, iterations, &bare),
            best(threads, iterations, &tracked),
            best(threads, iterations, &dropped),
        );
        println!(
            "| {name:<9} | {threads} | {b:>7.1} | {t:>7.1} | {d:>7.1} | {:>+7.1} |",
            t - b
        );
    }
    assert_eq!(tracker.active(), 0);
}

fn main() {
    let iterations = std::env::args()
        .nth(1)
        .and_then(|a| a.parse().ok())
        .unwrap_or(1_000_000);
    println!("ns per start+end, best of 5, {iterations} pairs per thread");
    println!(
        "| counter   | threads | bare counter | tracker: start + end(Completed) | tracker: start + drop | tracker overhead |"
    );
    println!("|---|---|---|---|---|---|");
    row::<PerThread>("PerThread", iterations);
    row::<Sharded>("Sharded", iterations);
    row::<Single>("Single", iterations);
    let clock = best(1, iterations, &|| {
        black_box(Instant::now());
    });
    println!("(Instant::now() alone: {clock:.1} ns; a start reads the coarse clock instead)");
}
