//! Times and metadata through the public API on the real (coarse) clock: a session's start
//! is when it started, `touch()` from the guard or a handle moves its last activity, and
//! the registry hands back what `start_with` stored; a handle knows whether it has ended.

use std::time::{Duration, Instant};

use livecount_session::{EndReason, SessionTracker};

/// The coarse clock is at most a few ticks early: 20 ms of slack covers a 4 ms tick twice.
const SLACK: Duration = Duration::from_millis(20);

#[test]
fn a_session_starts_when_it_starts_and_touches_move_its_activity() {
    let tracker = SessionTracker::<livecount::PerThread, u32>::default();
    let created = Instant::now();
    std::thread::sleep(Duration::from_millis(60));
    let by_guard = tracker.start_with(1);
    let by_handle = tracker.start_with(2);
    let handle = by_handle.handle();
    let started = Instant::now();
    let infos = tracker.sessions();
    assert_eq!(infos.len(), 2);
    for info in &infos {
        assert!(
            info.started_at + SLACK >= started,
            "started_at too early: {info:?}"
        );
        assert!(
            info.started_at <= Instant::now(),
            "started_at from the future: {info:?}"
        );
        assert!(
            info.started_at > created + Duration::from_millis(40),
            "{info:?}"
        );
        assert_eq!(info.last_activity, info.started_at);
    }
    std::thread::sleep(Duration::from_millis(60));
    by_guard.touch();
    handle.touch();
    let touched = Instant::now();
    for info in tracker.sessions() {
        assert!(
            info.last_activity + SLACK >= touched,
            "touch() did not move the activity of session {:?}: {info:?}",
            info.metadata
        );
        assert!(info.last_activity >= info.started_at + Duration::from_millis(40));
    }
    // The reaper sees it too: idle for less than the 60 ms since the touch.
    assert!(tracker.reap(Duration::from_millis(40)).is_empty());
    drop((by_guard, by_handle, handle));
    // And finds a ghost: a guard that will never drop, idle for longer than zero.
    std::mem::forget(tracker.start_with(3));
    let reaped = tracker.reap(Duration::ZERO);
    assert_eq!(
        reaped.iter().map(|i| i.metadata).collect::<Vec<_>>(),
        [Some(3)]
    );
    assert_eq!(tracker.active(), 0);
}

#[test]
fn metadata_comes_back_and_a_handle_knows_the_end() {
    let tracker = SessionTracker::<livecount::PerThread, String>::default();
    let tagged = tracker.start_with("tenant-7".to_owned());
    let plain = tracker.start();
    assert_eq!(tagged.metadata().map(String::as_str), Some("tenant-7"));
    assert_eq!(plain.metadata(), None);
    let handle = tagged.handle();
    assert!(!handle.is_ended());
    assert!(handle.end(EndReason::Cancelled));
    assert!(handle.is_ended());
    assert_eq!(
        tagged.metadata().map(String::as_str),
        Some("tenant-7"),
        "kept until the guard goes"
    );
    drop(plain);
}
