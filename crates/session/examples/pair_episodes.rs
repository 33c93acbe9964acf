//! Whether a tracked session's cost is steady over time: one thread, one tracker, the same
//! `start()` + `end(Completed)` + drop loop timed in consecutive chunks of 2 million pairs
//! (about 50 ms each), interleaved with chunks of the `AtomicI64` increment + decrement pair.
//! On the 2-core development VM the atomic pair stays within a few percent while the tracked
//! pair switches between two levels for stretches of 100 ms or more; a benchmark repetition
//! that lands in the slow stretch reads about 1.4× the fast one (see
//! `results/session-table/REPORT.md`).
//!
//! `cargo run --release -p livecount-session --example pair_episodes [-- CHUNKS]`

use std::hint::black_box;
use std::sync::atomic::{AtomicI64, Ordering};
use std::time::Instant;

use livecount::PerThread;
use livecount_session::{EndReason, SessionTracker};

const PAIRS: u64 = 2_000_000;

fn ns_per_pair(f: impl Fn()) -> f64 {
    let t0 = Instant::now();
    for _ in 0..PAIRS {
        f();
    }
    t0.elapsed().as_secs_f64() * 1e9 / PAIRS as f64
}

fn main() {
    let chunks: usize = match std::env::args().nth(1) {
        None => 12,
        Some(arg) => match arg.parse() {
            Ok(n) if (1..=10_000).contains(&n) => n,
            _ => {
                eprintln!("pair_episodes: CHUNKS must be a whole number in 1..=10000, got {arg:?}");
                std::process::exit(2);
            }
        },
    };
    let tracker = SessionTracker::<PerThread>::default();
    let atomic = AtomicI64::new(0);
    println!("chunk  tracked ns/pair  AtomicI64 ns/pair  ratio");
    for chunk in 0..chunks {
        let tracked = ns_per_pair(|| {
            let session = black_box(black_box(&tracker).start());
            session.end(EndReason::Completed);
        });
        let bare = ns_per_pair(|| {
            let a = black_box(&atomic);
            black_box(a.fetch_add(1, Ordering::Relaxed));
            a.fetch_sub(1, Ordering::Relaxed);
        });
        println!(
            "{chunk:5}  {tracked:15.1}  {bare:17.1}  {:5.2}",
            tracked / bare
        );
    }
    assert_eq!(tracker.active(), 0, "every session ended");
}
