//! A capped tracker on real threads: the cap holds while threads start and end sessions as
//! fast as they can (a count of sessions held, raised after each start and lowered before
//! its end, never passes it), and every attempt is counted once, started or refused.

use std::sync::Arc;
use std::sync::Barrier;
use std::sync::atomic::{AtomicU64, Ordering};

use livecount::{PerThread, Sharded};
use livecount_session::{EndReason, SessionTracker, StartError};

fn hammer(tracker: SessionTracker<impl livecount::Counter + 'static>, max: u64) {
    const THREADS: usize = 8;
    const ATTEMPTS: u64 = 5_000;
    let held = Arc::new(AtomicU64::new(0));
    let most = Arc::new(AtomicU64::new(0));
    let barrier = Arc::new(Barrier::new(THREADS));
    let workers: Vec<_> = (0..THREADS)
        .map(|t| {
            let (tracker, held, most) = (tracker.clone(), Arc::clone(&held), Arc::clone(&most));
            let barrier = Arc::clone(&barrier);
            std::thread::spawn(move || {
                barrier.wait();
                let mut started = 0u64;
                for i in 0..ATTEMPTS {
                    match tracker.try_start() {
                        Ok(session) => {
                            started += 1;
                            // SeqCst: one total order of the held count with itself.
                            let now = held.fetch_add(1, Ordering::SeqCst) + 1;
                            most.fetch_max(now, Ordering::SeqCst);
                            assert!(now <= max, "{now} sessions held under a cap of {max}");
                            if (i + t as u64).is_multiple_of(7) {
                                std::thread::yield_now(); // hold it a little longer
                            }
                            held.fetch_sub(1, Ordering::SeqCst);
                            // Ended by a handle, by the guard or by its drop.
                            match i % 3 {
                                0 => drop(session),
                                1 => assert!(session.end(EndReason::Completed)),
                                _ => assert!(session.handle().end(EndReason::Cancelled)),
                            }
                        }
                        Err(e) => assert_eq!(e, StartError::AtCapacity { max }),
                    }
                }
                started
            })
        })
        .collect();
    let started: u64 = workers.into_iter().map(|w| w.join().unwrap()).sum();
    let s = tracker.snapshot();
    assert!(s.is_consistent(), "{s:?}");
    assert_eq!((s.started, s.ended, s.active), (started, started, 0));
    assert_eq!(s.started + s.refused, THREADS as u64 * ATTEMPTS);
    assert_eq!(tracker.admitted(), Some(0));
    assert!(most.load(Ordering::SeqCst) <= max);
    if max == 1 {
        // A holder that yields lets another thread try: the cap was met, so it was tested.
        assert!(s.refused > 0, "eight threads never met a cap of 1: {s:?}");
    }
}

#[test]
fn the_cap_holds_under_eight_threads() {
    for max in [1, 3] {
        hammer(
            SessionTracker::<PerThread>::with_counters_and_max(
                PerThread::new(),
                PerThread::new(),
                max,
            ),
            max,
        );
        hammer(
            SessionTracker::with_counters_and_max(Sharded::default(), Sharded::default(), max),
            max,
        );
    }
}

/// A place held by a leaked guard stays taken until the reaper ends it, and then is free.
#[test]
fn a_leaked_guard_holds_its_place_until_reaped() {
    let tracker = SessionTracker::with_max_sessions(1);
    std::mem::forget(tracker.try_start().unwrap());
    assert_eq!(
        tracker.try_start().unwrap_err(),
        StartError::AtCapacity { max: 1 }
    );
    let far = std::time::Instant::now() + std::time::Duration::from_secs(3600);
    assert_eq!(tracker.reap_at(far, std::time::Duration::ZERO).len(), 1);
    assert!(tracker.try_start().is_ok());
    assert_eq!(tracker.snapshot().ended_by(EndReason::Reaped), 1);
}

/// `start` on a capped tracker at its cap panics with the reason (a service uses
/// `try_start`), and counts nothing but the refusal.
#[test]
fn start_at_the_cap_panics_naming_it() {
    let tracker = SessionTracker::with_max_sessions(0);
    let clone = tracker.clone();
    let panic = std::panic::catch_unwind(std::panic::AssertUnwindSafe(move || drop(clone.start())))
        .unwrap_err();
    let message = panic.downcast_ref::<String>().unwrap();
    assert!(
        message.contains("at capacity: 0 live sessions"),
        "{message}"
    );
    let s = tracker.snapshot();
    assert_eq!((s.started, s.refused), (0, 1));
}
