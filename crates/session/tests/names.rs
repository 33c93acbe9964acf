//! The small public surface that doctests alone used to cover (nextest runs no doctests):
//! reason and phase names and their `Display`, error and id `Display`, and what a snapshot
//! says about itself.

use std::time::{Duration, SystemTime};

use livecount_session::{EndReason, Phase, SessionTracker, StartError};

#[test]
fn reasons_and_phases_have_their_metric_names() {
    let names: Vec<_> = EndReason::ALL.iter().map(|r| r.as_str()).collect();
    assert_eq!(
        names,
        [
            "completed",
            "timed_out",
            "cancelled",
            "disconnected",
            "failed",
            "shutdown",
            "reaped",
            "dropped"
        ]
    );
    for reason in EndReason::ALL {
        assert_eq!(reason.to_string(), reason.as_str());
    }
    assert_eq!(EndReason::COUNT, 8);
    assert_eq!(Phase::Listening.as_str(), "listening");
    assert_eq!(Phase::Generating.as_str(), "generating");
    assert_eq!(Phase::Generating.to_string(), "generating");
    assert_eq!(Phase::ALL, [Phase::Listening, Phase::Generating]);
}

#[test]
fn errors_and_ids_display() {
    assert_eq!(
        StartError::Full.to_string(),
        "session table full: 2147483616 slots in use"
    );
    let tracker = SessionTracker::new();
    let session = tracker.start();
    assert_eq!(session.id().to_string(), session.id().as_u64().to_string());
}

#[test]
fn a_snapshot_describes_itself() {
    let tracker = SessionTracker::new();
    let mut talking = tracker.start();
    talking.set_phase(Phase::Generating);
    let _silent = [tracker.start(), tracker.start()];
    tracker.start().end(EndReason::Cancelled);
    let s = tracker.snapshot();
    assert_eq!(
        (s.in_phase(Phase::Listening), s.in_phase(Phase::Generating)),
        (2, 1)
    );
    assert_eq!(
        (
            s.ended_by(EndReason::Cancelled),
            s.ended_by(EndReason::Completed)
        ),
        (1, 0)
    );
    assert_eq!(
        s.age(s.taken_at + Duration::from_secs(7)),
        Duration::from_secs(7)
    );
    assert_eq!(s.age(s.taken_at - Duration::from_secs(7)), Duration::ZERO);
    let now_ms = SystemTime::now()
        .duration_since(SystemTime::UNIX_EPOCH)
        .unwrap()
        .as_millis() as u64;
    assert!(
        now_ms.abs_diff(s.taken_at_unix_ms) < 60_000,
        "{}",
        s.taken_at_unix_ms
    );
    assert!(s.is_consistent());
    // Each agreement the snapshot promises, broken one at a time, is noticed.
    type Break = fn(&mut livecount_session::Snapshot);
    let broken: [Break; 5] = [
        |s| s.started = 0,
        |s| s.active += 1,
        |s| s.ended += 1,
        |s| s.listening += 1,
        |s| s.generating = 0,
    ];
    for (i, breaks) in broken.into_iter().enumerate() {
        let mut copy = s;
        breaks(&mut copy);
        assert!(!copy.is_consistent(), "break {i} went unnoticed: {copy:?}");
    }
}
