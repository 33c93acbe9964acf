//! Session durations on the real clock and under concurrent ends: a session's duration is
//! its real length to the clock's tick, and a snapshot read while threads end sessions has
//! each reason's histogram count equal to its ends, with a sum never short of them.

use std::time::{Duration, Instant};

use livecount_session::{DurationHistogram, EndReason, SessionTracker};

/// A session held 150 ms lands in the bucket up to 0.5 s, its sum within the coarse
/// clock's ticks of the real length.
#[test]
fn a_real_session_is_measured_on_the_trackers_clock() {
    let tracker = SessionTracker::new();
    let started = Instant::now();
    let session = tracker.start();
    std::thread::sleep(Duration::from_millis(150));
    let ended_before = Instant::now();
    session.end(EndReason::Completed);
    let real = started.elapsed();
    let h = tracker.snapshot().durations.get(EndReason::Completed);
    assert_eq!(h.count(), 1);
    assert_eq!(h.buckets()[1], 1, "{h:?}");
    // A coarse reading is never late and at most a few ticks early, at either end.
    let slack = Duration::from_millis(50);
    assert!(h.sum() <= real + slack, "{h:?} vs {real:?}");
    assert!(h.sum() + slack >= ended_before - started, "{h:?}");
}

/// Four threads end sessions of known virtual lengths while the main thread reads: every
/// snapshot's histograms count exactly its ends by reason, and its sums are never below
/// what the counted ends lasted (each thread's sessions all last the same, so a count
/// gives a floor). After the joins, everything is exact.
#[test]
fn concurrent_ends_keep_counts_exact_and_sums_never_short() {
    const PER_THREAD: u64 = 20_000;
    let tracker = SessionTracker::new();
    let t0 = Instant::now();
    let reasons = [
        EndReason::Completed,
        EndReason::TimedOut,
        EndReason::Cancelled,
        EndReason::Failed,
    ];
    std::thread::scope(|s| {
        for (i, reason) in reasons.into_iter().enumerate() {
            let tracker = tracker.clone();
            s.spawn(move || {
                let lasted = Duration::from_secs(1 + i as u64);
                for _ in 0..PER_THREAD {
                    let session = tracker.try_start_at(t0).unwrap();
                    session.end_at(reason, t0 + lasted);
                }
            });
        }
        for _ in 0..200 {
            let snap = tracker.snapshot();
            assert!(snap.is_consistent(), "{snap:?}");
            for (i, reason) in reasons.into_iter().enumerate() {
                let h = snap.durations.get(reason);
                assert_eq!(h.count(), snap.ended_by(reason));
                let floor = h.count() * (1 + i as u64) * 1_000_000;
                assert!(h.sum_micros() >= floor, "{reason}: {h:?}");
            }
        }
    });
    let snap = tracker.snapshot();
    for (i, reason) in reasons.into_iter().enumerate() {
        let lasted = Duration::from_secs(1 + i as u64);
        let h = snap.durations.get(reason);
        assert_eq!(h.count(), PER_THREAD);
        assert_eq!(h.sum(), lasted * PER_THREAD as u32);
        assert_eq!(
            h.buckets()[DurationHistogram::bucket_of(lasted)],
            PER_THREAD
        );
    }
}
