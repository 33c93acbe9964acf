//! loom models of a drain racing starts and ends: every attempt is counted once (a start or
//! a refusal `Draining`), a start after `begin_drain` returned on its thread is refused,
//! and `end_all` at the deadline with the owners' own ends still ends every session
//! exactly once (SIGTERM twice: a second `begin_drain` and an early `end_all` change
//! nothing of that).
//!
//! Run with `scripts/loom.sh` (release, debug assertions, `LOOM_MAX_PREEMPTIONS`).
#![cfg(livecount_loom)]

use livecount::Single;
use livecount_session::{EndReason, SessionTracker, StartError};
use loom::thread;

/// Runs `f` under loom: the workspace's one model runner (bounds, branches; see there).
fn model(default_bound: usize, f: impl Fn() + Sync + Send + 'static) {
    livecount::loom_model::bounded(default_bound, f);
}

/// A tracker whose slots exist before the race: four sessions started and ended here put
/// slots back in the shared pool, so the client's start takes one from there rather than
/// carving a new page. Pages are published through std atomics (Release/Acquire) that loom
/// does not track, so a page carved during the race would read to loom as an unordered
/// creation when `end_all` walks it.
fn tracker(cap: Option<u64>) -> SessionTracker<Single> {
    let tracker = match cap {
        Some(max) => SessionTracker::with_counters_and_max(Single::new(), Single::new(), max),
        None => SessionTracker::with_counters(Single::new(), Single::new()),
    };
    let warm: Vec<_> = (0..4).map(|_| tracker.try_start_with(())).collect();
    drop(warm);
    let _ = tracker.snapshot();
    tracker
}

/// A client starts a session and ends it (`Completed`) while the drain begins and ends
/// everything still open (`Shutdown`), twice over (a second signal): the attempt is a start
/// or a refusal, never both; a started session ends once, by whichever end won; the counts
/// balance.
fn drain_races_a_session(cap: Option<u64>) {
    model(3, move || {
        let tracker = tracker(cap);
        let open = tracker.start();
        let client = {
            let tracker = tracker.clone();
            thread::spawn(move || match tracker.try_start() {
                Ok(session) => Some(session.end(EndReason::Completed)),
                Err(e) => {
                    assert_eq!(e, StartError::Draining);
                    None
                }
            })
        };
        assert!(tracker.begin_drain());
        // Started after the drain on this thread: always refused.
        assert_eq!(tracker.try_start().unwrap_err(), StartError::Draining);
        let cut = tracker.end_all(EndReason::Shutdown);
        assert!(!tracker.begin_drain(), "the second signal");
        let cut_again = tracker.end_all(EndReason::Shutdown);
        let client = client.join().unwrap();
        assert_eq!(open.reason(), Some(EndReason::Shutdown));
        let s = tracker.snapshot();
        let client_started = u64::from(client.is_some());
        // Four warm-up sessions (ended `Dropped`) come first.
        assert_eq!(s.started, 4 + 1 + client_started);
        assert_eq!((s.ended, s.active), (s.started, 0));
        assert_eq!(
            s.refused,
            2 - client_started,
            "refused: the main thread's, and the client's if it was"
        );
        // Each session ended once: the client's own end won or an end_all cut it.
        let client_cut = u64::from(client == Some(false));
        assert_eq!((cut + cut_again) as u64, 1 + client_cut);
        assert_eq!(s.ended_by(EndReason::Shutdown), 1 + client_cut);
        assert_eq!(
            s.ended_by(EndReason::Completed),
            u64::from(client == Some(true))
        );
        assert_eq!(s.ended_by(EndReason::Dropped), 4);
        if let Some(max) = cap {
            assert!(
                max >= 6,
                "room for the warm-up, the open session and the client"
            );
            assert_eq!(tracker.admitted(), Some(0), "every place given back");
        }
    });
}

#[test]
fn a_drain_racing_a_session_counts_each_attempt_and_end_once() {
    drain_races_a_session(None);
}

#[test]
fn a_drain_racing_a_session_on_a_capped_tracker_gives_every_place_back() {
    drain_races_a_session(Some(6));
}

/// A task waiting for the drain ([`EndHandle::drain_started`](livecount_session::EndHandle::drain_started)) on one thread while the drain
/// begins on another, twice over: the waiter is always woken (a lost wake-up leaves
/// `block_on` parked, which loom reports as a deadlock), and a waiter that starts after
/// the drain resolves at once. Every snapshot taken after `begin_drain` returned says
/// draining.
#[test]
fn a_task_waiting_for_the_drain_is_always_woken() {
    model(3, || {
        let tracker = tracker(None);
        let session = tracker.start();
        let waiter = {
            let handle = session.handle();
            thread::spawn(move || loom::future::block_on(handle.drain_started()))
        };
        assert!(!tracker.snapshot().draining);
        assert!(tracker.begin_drain());
        assert!(
            !tracker.begin_drain(),
            "the second signal wakes nobody twice"
        );
        assert!(tracker.snapshot().draining);
        waiter.join().unwrap();
        loom::future::block_on(session.handle().drain_started()); // already drained
        session.end(EndReason::Completed);
    });
}
