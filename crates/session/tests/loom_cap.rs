//! loom models of a capped tracker's admission: the cap is a mutual exclusion when it is 1
//! (no two sessions live at once, whatever the interleaving), a place freed by an end is
//! taken by a start racing it or refused, never both, and every attempt is counted once,
//! as a start or as a refusal.
//!
//! Run with `scripts/loom.sh` (release, debug assertions, `LOOM_MAX_PREEMPTIONS`).
#![cfg(livecount_loom)]

use livecount::Single;
use livecount_session::{EndReason, SessionTracker, StartError};
use loom::sync::Arc;
use loom::sync::atomic::{AtomicUsize, Ordering};
use loom::thread;

/// Runs `f` under loom: the workspace's one model runner (bounds, branches; see there).
fn model(default_bound: usize, f: impl Fn() + Sync + Send + 'static) {
    livecount::loom_model::bounded(default_bound, f);
}

fn capped(max: u64) -> SessionTracker<Single> {
    SessionTracker::with_counters_and_max(Single::new(), Single::new(), max)
}

/// Three threads each try to start and then end a session under a cap of 1: whoever gets
/// in is alone (a shared count of sessions held, raised after the start and lowered before
/// the end, never reads 2), and afterwards every attempt is a start or a refusal.
#[test]
fn a_cap_of_one_is_mutual_exclusion() {
    model(3, || {
        let tracker = capped(1);
        let held = Arc::new(AtomicUsize::new(0));
        let workers: Vec<_> = (0..3)
            .map(|_| {
                let (tracker, held) = (tracker.clone(), Arc::clone(&held));
                thread::spawn(move || match tracker.try_start() {
                    Ok(session) => {
                        // SeqCst: the count only has to be one total order with itself.
                        let before = held.fetch_add(1, Ordering::SeqCst);
                        assert_eq!(before, 0, "two sessions live under a cap of 1");
                        held.fetch_sub(1, Ordering::SeqCst);
                        session.end(EndReason::Completed);
                        true
                    }
                    Err(e) => {
                        assert_eq!(e, StartError::AtCapacity { max: 1 });
                        false
                    }
                })
            })
            .collect();
        let started = workers
            .into_iter()
            .map(|w| u64::from(w.join().unwrap()))
            .sum::<u64>();
        let s = tracker.snapshot();
        assert!(started >= 1, "the first attempt always finds room");
        assert_eq!((s.started, s.ended, s.active), (started, started, 0));
        assert_eq!(s.refused, 3 - started);
        assert_eq!(tracker.admitted(), Some(0));
    });
}

/// An end on another thread frees the one place while the main thread tries to start: the
/// start either got the place (after the end) or was refused (before it), and in both cases
/// the counts balance and the place is free at the end.
#[test]
fn an_end_racing_a_start_frees_the_place_once() {
    model(3, || {
        let tracker = capped(1);
        let first = tracker.try_start().expect("room for the first");
        let handle = first.handle();
        let ender = thread::spawn(move || handle.end(EndReason::Disconnected));
        let second = tracker.try_start();
        assert!(ender.join().unwrap(), "the only ender");
        assert_eq!(first.reason(), Some(EndReason::Disconnected));
        // (started, refused) by the end of each outcome.
        let expected = match second {
            Ok(session) => {
                assert_eq!(tracker.admitted(), Some(1));
                assert!(tracker.try_start().is_err(), "the place is taken");
                session.end(EndReason::Completed);
                (2, 1)
            }
            Err(e) => {
                assert_eq!(e, StartError::AtCapacity { max: 1 });
                (1, 1)
            }
        };
        drop(first);
        assert_eq!(tracker.admitted(), Some(0));
        let s = tracker.snapshot();
        assert!(s.is_consistent(), "{s:?}");
        assert_eq!(
            (s.started, s.refused, s.active),
            (expected.0, expected.1, 0)
        );
        assert!(tracker.try_start().is_ok(), "the place is free again");
    });
}

/// Two enders race for one session of a capped tracker: the place is given back once, so a
/// cap of 2 admits exactly two more afterwards.
#[test]
fn racing_enders_give_the_place_back_once() {
    model(3, || {
        let tracker = capped(2);
        let session = tracker.try_start().unwrap();
        let enders: Vec<_> = [EndReason::TimedOut, EndReason::Cancelled]
            .into_iter()
            .map(|reason| {
                let handle = session.handle();
                thread::spawn(move || handle.end(reason))
            })
            .collect();
        drop(session);
        for e in enders {
            e.join().unwrap();
        }
        assert_eq!(tracker.admitted(), Some(0));
        let (a, b) = (tracker.try_start(), tracker.try_start());
        assert!(a.is_ok() && b.is_ok());
        assert_eq!(
            tracker.try_start().unwrap_err(),
            StartError::AtCapacity { max: 2 }
        );
    });
}
