//! Windows and reports: the per-reason ends of a window are the difference of its two
//! snapshots, rates are per second of the window, a window needs time to pass, and a
//! reporter publishes in sequence order (a late sample is returned, not published).

use std::time::{Duration, Instant};

use livecount_session::{EndReason, Phase, Reporter, SessionTracker, Window};

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
    assert_eq!(w.pretend_qps, 4.0 / 2.0);
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

#[test]
fn a_reporter_publishes_in_sequence_and_windows_from_the_last_published() {
    let tracker = SessionTracker::new();
    let reporter = Reporter::new(tracker.clone()).with_interval(Duration::from_secs(5));
    assert_eq!(reporter.interval(), Duration::from_secs(5));
    assert!(reporter.latest().is_none());
    let t0 = Instant::now();
    let first = reporter.sample_at(t0);
    assert!(first.window.is_none());
    assert_eq!(
        reporter.latest().unwrap().snapshot.sequence,
        first.snapshot.sequence
    );
    let mut talking = tracker.start();
    talking.set_phase(Phase::Generating);
    let second = reporter.sample_at(t0 + Duration::from_secs(5));
    let w = second.window.expect("a window since the first");
    assert_eq!(w.length, Duration::from_secs(5));
    assert_eq!(w.arrivals_per_sec, 1.0 / 5.0);
    assert_eq!(second.snapshot.generating, 1);
    assert!(second.snapshot.sequence > first.snapshot.sequence);
    assert_eq!(*reporter.latest().unwrap(), *second);
    // Staleness is measured from the snapshot.
    assert_eq!(
        second.age(t0 + Duration::from_secs(8)),
        Duration::from_secs(3)
    );
    assert!(!second.is_stale(t0 + Duration::from_secs(8), Duration::from_secs(3)));
    assert!(second.is_stale(t0 + Duration::from_secs(9), Duration::from_secs(3)));
    assert!(std::ptr::eq(reporter.tracker(), reporter.tracker()));
    drop(talking);
}
