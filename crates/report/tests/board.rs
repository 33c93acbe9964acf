//! `LoadBoard` without the servers: what a published report carries (name, wall-clock time,
//! age) and which of two racing publishers' snapshots wins.

use std::sync::Arc;
use std::time::{SystemTime, UNIX_EPOCH};

use livecount_capacity::CapacityConfig;
use livecount_report::{LoadBoard, LoadReport, ManualUtilisation};
use livecount_session::SessionTracker;

fn board(name: &str) -> LoadBoard {
    let (source, handle) = ManualUtilisation::new();
    handle.set(0.2);
    LoadBoard::builder(name, CapacityConfig::builder().build().expect("valid"))
        .utilisation(source)
        .build()
}

fn unix_now_ms() -> u64 {
    let now = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .expect("after 1970");
    u64::try_from(now.as_millis()).expect("fits")
}

#[test]
fn a_report_carries_the_boards_name_and_its_wall_clock_time() {
    let board = board("voice-7");
    assert_eq!(board.name(), "voice-7");
    let tracker = SessionTracker::new();
    let before = unix_now_ms();
    let report = board.publish(tracker.snapshot());
    let after = unix_now_ms();
    assert_eq!(report.name, "voice-7");
    assert!(
        (before..=after).contains(&report.taken_at_unix_ms),
        "taken at {} ms, published between {before} and {after}",
        report.taken_at_unix_ms
    );
    assert!(
        report.age_ms() < 5_000,
        "a fresh report is {} ms old",
        report.age_ms()
    );
}

#[test]
fn age_counts_wall_clock_milliseconds_and_never_goes_negative() {
    let mut report = LoadReport::empty("b1");
    report.taken_at_unix_ms = unix_now_ms() - 5_000;
    let age = report.age_ms();
    assert!((5_000..60_000).contains(&age), "5 s old, age_ms {age}");
    // Taken "in the future" (the clock went back since): 0, not a wrapped huge age.
    report.taken_at_unix_ms = unix_now_ms() + 60_000;
    assert_eq!(report.age_ms(), 0);
}

#[test]
fn an_older_snapshot_never_replaces_a_newer_report() {
    let board = board("b1");
    let tracker = SessionTracker::new();
    let older = tracker.snapshot();
    let _session = tracker.start();
    let newer = tracker.snapshot();
    assert!(older.sequence < newer.sequence);
    let published = board.publish(newer);
    assert_eq!((published.sequence, published.active), (newer.sequence, 1));
    // The publisher that took its snapshot first but lost the race for the lock.
    let late = board.publish(older);
    assert!(Arc::ptr_eq(&late, &published), "the newer report stays");
    assert_eq!(board.latest().sequence, newer.sequence);
    // The same snapshot again is no older: it is published anew (a fresh utilisation
    // sample and time), not dropped.
    let again = board.publish(newer);
    assert!(
        !Arc::ptr_eq(&again, &published),
        "an equal sequence republishes"
    );
    assert_eq!(again.sequence, newer.sequence);
    // Draining is the tracker's flag, carried by its snapshots: published, and said.
    tracker.begin_drain();
    let draining = board.publish(tracker.snapshot_at(newer.taken_at));
    assert!(draining.draining && draining.sequence > newer.sequence);
    assert!(board.latest().draining);
    assert_eq!(board.latest().agent_reply(), "drain\n");
    // A snapshot taken before the drain is not news, and cannot undo it.
    let late = board.publish(newer);
    assert!(Arc::ptr_eq(&late, &draining));
    assert!(board.latest().draining && board.is_draining());
}
