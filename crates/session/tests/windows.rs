//! Windows: the per-reason ends of a window are the difference of its two snapshots, rates
//! are per second of the window, and a window needs time to pass.

use std::time::{Duration, Instant};

use livecount_session::{EndReason, SessionTracker, Window};

#[test]
fn a_windows_reasons_are_the_difference_of_its_snapshots() {
    let tracker = SessionTracker::new();
    let t0 = Instant::now();
    tracker.start().end(EndReason::Failed);
    tracker.start().end(EndReason::Completed);
    let before = tracker.snapshot_at(t0);
    for _ in 0..3 {
        tracker.start().end(EndReason::Completed);
    }
    tracker.start().end(EndReason::TimedOut);
    let kept: Vec<_> = (0..4).map(|_| tracker.start()).collect();
    let after = tracker.snapshot_at(t0 + Duration::from_secs(2));
    let w = Window::between(&before, &after).expect("time passed");
    for reason in EndReason::ALL {
        assert_eq!(
            w.ended_by_reason.get(reason),
            after.ended_by(reason) - before.ended_by(reason),
            "{reason}"
        );
    }
    assert_eq!(w.ended_by_reason.get(EndReason::Completed), 3);
    assert_eq!(w.ended_by_reason.get(EndReason::Failed), 0);
    assert_eq!(w.ended_by_reason.total(), 4);
    assert_eq!(w.length, Duration::from_secs(2));
    assert_eq!(w.arrivals_per_sec, 8.0 / 2.0);
    assert_eq!(w.ends_per_sec, 4.0 / 2.0);
    assert_eq!(w.mean_active, (0.0 + 4.0) / 2.0);
    drop(kept);
}

#[test]
fn a_window_needs_time_to_pass() {
    let tracker = SessionTracker::new();
    let t0 = Instant::now();
    let a = tracker.snapshot_at(t0);
    let b = tracker.snapshot_at(t0);
    assert_eq!(Window::between(&a, &b), None, "a zero-length window");
    let later = tracker.snapshot_at(t0 + Duration::from_secs(1));
    assert_eq!(Window::between(&later, &a), None, "a window backwards");
    assert!(Window::between(&a, &later).is_some());
}

/// Rates are per second of the time between the two snapshots' instants, and a snapshot's
/// age (how stale a consumer should think it) is measured from its own instant.
#[test]
fn rates_are_per_second_of_the_span_and_age_is_the_snapshots() {
    let tracker = SessionTracker::new();
    let t0 = Instant::now();
    let first = tracker.snapshot_at(t0);
    let talking = tracker.start();
    let second = tracker.snapshot_at(t0 + Duration::from_secs(5));
    assert!(second.sequence > first.sequence);
    let w = Window::between(&first, &second).expect("five seconds passed");
    assert_eq!(w.length, Duration::from_secs(5));
    assert_eq!(w.arrivals_per_sec, 1.0 / 5.0);
    assert_eq!(w.ends_per_sec, 0.0);
    assert_eq!(
        second.age(t0 + Duration::from_secs(8)),
        Duration::from_secs(3)
    );
    drop(talking);
}
