//! `serde` round trips of what a service publishes: `Snapshot`, `Window`,
//! `ByReason` and the duration histograms as maps of reason names. The `serde` feature is on for this crate's tests
//! through its dev-dependency on itself.

use std::time::{Duration, Instant, SystemTime};

use livecount_session::{EndReason, Phase, Session, SessionTracker, Snapshot, Window};

/// A tracker with two ended sessions and one open, generating, returned beside it: the
/// caller keeps it open while it looks.
fn busy_tracker() -> (SessionTracker, Session) {
    let tracker = SessionTracker::new();
    let mut talking = tracker.start();
    talking.set_phase(Phase::Generating);
    tracker.start().end(EndReason::TimedOut);
    tracker.start().end(EndReason::Completed);
    (tracker, talking)
}

#[test]
fn snapshot_round_trips_without_its_instant() {
    let (tracker, _talking) = busy_tracker();
    let before = SystemTime::now();
    let snapshot = tracker.snapshot();
    let json = serde_json::to_value(snapshot).unwrap();
    assert!(
        json.get("taken_at").is_none(),
        "an Instant has no meaning elsewhere: {json}"
    );
    assert_eq!(json["started"], 3);
    assert_eq!(json["active"], 1);
    assert_eq!(json["generating"], 1);
    assert_eq!(json["ended_by_reason"]["timed_out"], 1);
    assert_eq!(json["ended_by_reason"]["completed"], 1);
    assert_eq!(json["ended_by_reason"]["dropped"], 0);
    let unix_ms = json["taken_at_unix_ms"].as_u64().unwrap();
    let before_ms = before
        .duration_since(SystemTime::UNIX_EPOCH)
        .unwrap()
        .as_millis() as u64;
    assert!(
        unix_ms >= before_ms && unix_ms < before_ms + 60_000,
        "{unix_ms} vs {before_ms}"
    );

    let back: Snapshot = serde_json::from_value(json).unwrap();
    // Everything but the process-local instant comes back.
    assert_eq!(back.sequence, snapshot.sequence);
    assert_eq!(back.taken_at_unix_ms, snapshot.taken_at_unix_ms);
    assert_eq!(
        (
            back.started,
            back.ended,
            back.active,
            back.listening,
            back.generating
        ),
        (3, 2, 1, 0, 1)
    );
    assert_eq!(back.ended_by_reason, snapshot.ended_by_reason);
    assert!(back.is_consistent());
}

#[test]
fn window_round_trips() {
    let (tracker, _talking) = busy_tracker();
    let t0 = Instant::now();
    let before = tracker.snapshot_at(t0);
    tracker.start().end(EndReason::Failed);
    let after = tracker.snapshot_at(t0 + Duration::from_secs(10));
    let window = Window::between(&before, &after).expect("ten seconds passed");
    let json = serde_json::to_string(&window).unwrap();
    let back: Window = serde_json::from_str(&json).unwrap();
    assert_eq!(back, window);
    assert_eq!(back.length, Duration::from_secs(10));
    assert_eq!(back.ended_by_reason.get(EndReason::Failed), 1);
    assert_eq!(back.arrivals_per_sec, 0.1);
}

#[test]
fn reasons_and_phases_use_their_metric_names() {
    for reason in EndReason::ALL {
        assert_eq!(
            serde_json::to_value(reason).unwrap(),
            serde_json::Value::from(reason.as_str())
        );
        let back: EndReason = serde_json::from_value(reason.as_str().into()).unwrap();
        assert_eq!(back, reason);
    }
    for phase in Phase::ALL {
        assert_eq!(
            serde_json::to_value(phase).unwrap(),
            serde_json::Value::from(phase.as_str())
        );
    }
    // A map missing reasons reads them as 0; an unknown name is an error.
    let partial: livecount_session::ByReason = serde_json::from_str(r#"{"reaped": 4}"#).unwrap();
    assert_eq!((partial.get(EndReason::Reaped), partial.total()), (4, 4));
    assert!(serde_json::from_str::<livecount_session::ByReason>(r#"{"vanished": 1}"#).is_err());
}

#[test]
fn durations_travel_by_reason_name_and_default_to_empty() {
    let tracker = SessionTracker::new();
    let t0 = Instant::now();
    let call = tracker.try_start_at(t0).unwrap();
    call.end_at(EndReason::Completed, t0 + Duration::from_secs(3));
    let snapshot = tracker.snapshot();
    let mut json = serde_json::to_value(snapshot).unwrap();
    let completed = &json["durations"]["completed"];
    assert_eq!(completed["sum_micros"], 3_000_000);
    assert_eq!(
        completed["buckets"][4], 1,
        "3 s is in the bucket up to 5 s: {completed}"
    );
    assert_eq!(json["durations"]["failed"]["buckets"][0], 0);
    let back: Snapshot = serde_json::from_value(json.clone()).unwrap();
    assert_eq!(back.durations, snapshot.durations);
    assert!(back.is_consistent());

    // A snapshot from before durations existed reads with none.
    json.as_object_mut().unwrap().remove("durations");
    let old: Snapshot = serde_json::from_value(json).unwrap();
    assert_eq!(old.durations.total().count(), 0);
    assert_eq!(old.ended_by_reason, snapshot.ended_by_reason);
}
