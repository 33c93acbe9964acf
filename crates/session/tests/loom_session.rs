//! loom models of the session ending protocol: exhaustive interleavings (with a preemption
//! bound) of racing enders, a phase change racing an end, the reaper racing a normal end,
//! an end, `end_all` and the reaper racing (each recording the session's duration once),
//! snapshots racing ends and each other, phase changes from a handle racing the owner's
//! and an end, and an end racing a poll that registers for it (no lost wake-up), under the
//! C++11 memory model.
//!
//! What loom explores: the per-session state word, the two token cells (loom's `UnsafeCell`
//! reports any access that is not exclusive), the `livecount` counters and the per-reason
//! cells, and the end signal (the owner's waker slot, modelled by loom's `AtomicWaker`, and the
//! `ended()` waiter list behind a loom mutex), all of which switch to loom types under
//! `--cfg livecount_loom`. A lost wake-up shows as a deadlock: `loom::future::block_on` parks
//! the polling thread until its waker is woken, and loom fails an execution in which every
//! thread is parked. The session table is explored too: the slot's references and generation
//! live in the state word, the slot's data sits in a loom `UnsafeCell`, and every freed slot
//! goes through the pool (a loom mutex) to the next start, so a model's second start reuses
//! the first one's slot whenever the first is free by then. The table's pages, its carve
//! cursor and the tracker state's reference counts keep `std` atomics (single steps to loom).
//!
//! Run with `scripts/loom.sh` (release, debug assertions, `LOOM_MAX_PREEMPTIONS`, default 3).
//! Each model uses at most four threads including the main thread.
#![cfg(livecount_loom)]

use std::future::poll_fn;
use std::time::{Duration, Instant};

use livecount::{Counter, Sharded, Single};
use livecount_session::{DurationHistogram, EndReason, Phase, SessionTracker, Snapshot};
use loom::thread;

/// Runs `f` under loom: the workspace's one model runner (bounds, branches; see there).
fn model(default_bound: usize, f: impl Fn() + Sync + Send + 'static) {
    livecount::loom_model::bounded(default_bound, f);
}

/// After every session has ended: nothing active, everything balanced, one reason per end.
fn assert_balanced<C: Counter>(tracker: &SessionTracker<C>, sessions: u64) -> Snapshot {
    let s = tracker.snapshot();
    assert!(s.is_consistent(), "inconsistent snapshot {s:?}");
    assert_eq!(
        tracker.active(),
        0,
        "the counter was not decremented exactly once"
    );
    assert_eq!(
        (s.started, s.ended, s.active),
        (sessions, sessions, 0),
        "{s:?}"
    );
    assert_eq!((s.listening, s.generating), (0, 0), "{s:?}");
    // Every end's duration recorded once, under its reason.
    assert_eq!(s.durations.total().count(), sessions, "{s:?}");
    assert_eq!(s.durations.counts(), s.ended_by_reason, "{s:?}");
    s
}

/// Three enders (timeout, cancel, disconnect) on their own threads race the guard's drop on
/// the main thread: exactly one wins, its reason is the one recorded, the counter is
/// decremented once.
#[test]
fn three_enders_race_the_drop() {
    model(3, || {
        let tracker = SessionTracker::<Single>::default();
        let session = tracker.start();
        let enders: Vec<_> = [
            EndReason::TimedOut,
            EndReason::Cancelled,
            EndReason::Disconnected,
        ]
        .into_iter()
        .map(|reason| {
            let handle = session.handle();
            thread::spawn(move || (reason, handle.end(reason)))
        })
        .collect();
        let observer = session.handle();
        drop(session); // ends with `Dropped` unless an ender already won
        let winners: Vec<EndReason> = enders
            .into_iter()
            .map(|e| e.join().unwrap())
            .filter_map(|(reason, won)| won.then_some(reason))
            .collect();
        assert!(winners.len() <= 1, "two enders won: {winners:?}");
        let recorded = observer.reason().expect("ended");
        let expected = winners.first().copied().unwrap_or(EndReason::Dropped);
        assert_eq!(recorded, expected);
        let s = assert_balanced(&tracker, 1);
        assert_eq!(s.ended_by(expected), 1, "{s:?}");
    });
}

/// A phase change on the owner's thread races two enders: the `generating` token is given
/// back exactly once, whichever side gets there, and the end never waits for the change.
#[test]
fn phase_change_races_end() {
    model(3, || {
        let tracker = SessionTracker::<Single>::default();
        let mut session = tracker.start();
        let enders: Vec<_> = [EndReason::TimedOut, EndReason::Disconnected]
            .into_iter()
            .map(|reason| {
                let handle = session.handle();
                thread::spawn(move || handle.end(reason))
            })
            .collect();
        session.set_phase(Phase::Generating);
        session.set_phase(Phase::Listening);
        session.set_phase(Phase::Generating);
        let wins = enders
            .into_iter()
            .map(|e| usize::from(e.join().unwrap()))
            .sum::<usize>();
        assert_eq!(
            wins, 1,
            "exactly one ender wins (the owner never ends it here)"
        );
        assert_eq!(session.phase(), None);
        drop(session);
        assert_balanced(&tracker, 1);
    });
}

/// The reaper force-ends a leaked-looking session while its handler completes it: exactly one
/// of them wins, and the reaper reports the session only if it won.
#[test]
fn reaper_races_a_normal_end() {
    model(3, || {
        let tracker = SessionTracker::<Single>::default();
        let session = tracker.start();
        let handle = session.handle();
        let completer = thread::spawn(move || handle.end(EndReason::Completed));
        let reaper = {
            let tracker = tracker.clone();
            let later = Instant::now() + Duration::from_secs(3600);
            thread::spawn(move || tracker.reap_at(later, Duration::from_secs(60)).len())
        };
        let completed = completer.join().unwrap();
        let reaped = reaper.join().unwrap();
        assert_eq!(
            usize::from(completed) + reaped,
            1,
            "exactly one of them ends it"
        );
        let expected = if completed {
            EndReason::Completed
        } else {
            EndReason::Reaped
        };
        assert_eq!(session.reason(), Some(expected));
        drop(session);
        let s = assert_balanced(&tracker, 1);
        assert_eq!(s.ended_by(expected), 1);
    });
}

/// An end at a virtual 10 s (by a handle), `end_all` (on the real clock: a few µs) and the
/// reaper at a virtual hour race for one session, with a snapshot taken meanwhile: the
/// winner's duration, and only its, is recorded, once, in its reason's histogram and the
/// bucket its duration names; the snapshot's histograms count exactly its ends by reason.
#[test]
fn one_duration_per_end_under_end_all_and_the_reaper() {
    model(2, || {
        let tracker = SessionTracker::<Single>::default();
        let t0 = Instant::now();
        let session = tracker.try_start_at(t0).unwrap();
        let handle = session.handle();
        let completer = thread::spawn(move || {
            handle.end_at(EndReason::Completed, t0 + Duration::from_secs(10))
        });
        let reaper = {
            let tracker = tracker.clone();
            let later = t0 + Duration::from_secs(3600);
            thread::spawn(move || tracker.reap_at(later, Duration::from_secs(60)).len())
        };
        let cut = tracker.end_all(EndReason::Shutdown);
        let during = tracker.snapshot();
        assert!(during.is_consistent(), "{during:?}");
        let completed = usize::from(completer.join().unwrap());
        let reaped = reaper.join().unwrap();
        assert_eq!(completed + reaped + cut, 1, "exactly one of them ends it");
        let winner = session.reason().expect("ended");
        drop(session);
        let s = assert_balanced(&tracker, 1);
        for (reason, h) in s.durations.iter() {
            assert_eq!(h.count(), u64::from(reason == winner), "{reason}: {s:?}");
        }
        let h = s.durations.get(winner);
        let expected = match winner {
            EndReason::Completed => Some(Duration::from_secs(10)),
            EndReason::Reaped => Some(Duration::from_secs(3600)),
            // The real clock's reading: under a second, in the first bucket or the next.
            _ => None,
        };
        match expected {
            Some(lasted) => {
                assert_eq!(h.sum(), lasted, "{s:?}");
                assert_eq!(
                    h.buckets()[DurationHistogram::bucket_of(lasted)],
                    1,
                    "{s:?}"
                );
            }
            None => assert!(h.sum() < Duration::from_secs(1), "{s:?}"),
        }
    });
}

/// Four enders on one session (timeout, cancel, disconnect, and the drop on the main thread
/// after a shutdown by id).
#[test]
fn four_enders_by_handle_and_id() {
    model(3, || {
        let tracker = SessionTracker::<Single>::default();
        let session = tracker.start();
        let id = session.id();
        let mut enders: Vec<_> = [EndReason::TimedOut, EndReason::Cancelled]
            .into_iter()
            .map(|reason| {
                let handle = session.handle();
                thread::spawn(move || usize::from(handle.end(reason)))
            })
            .collect();
        let by_id = tracker.clone();
        enders.push(thread::spawn(move || {
            usize::from(by_id.end(id, EndReason::Shutdown))
        }));
        let ours = usize::from(session.end(EndReason::Disconnected));
        let wins: usize = enders.into_iter().map(|e| e.join().unwrap()).sum::<usize>() + ours;
        assert_eq!(wins, 1);
        drop(session);
        assert_balanced(&tracker, 1);
    });
}

/// Snapshots taken while sessions end (one generating) are coherent, never count an end
/// without its start, and never miss a session open during the whole read. `Sharded` keeps
/// totals with Relaxed start bumps: the weakest ordering the snapshot argument must survive.
#[test]
fn snapshot_races_ends() {
    model(3, || {
        let tracker = SessionTracker::<Sharded>::with_counters(
            Sharded::with_shards(2),
            Sharded::with_shards(2),
        );
        let kept = tracker.start(); // open throughout
        let mut racing = tracker.start();
        racing.set_phase(Phase::Generating);
        let ender = thread::spawn(move || {
            racing.end(EndReason::Failed);
        });
        let reader = {
            let tracker = tracker.clone();
            thread::spawn(move || {
                let s = tracker.snapshot();
                assert!(s.is_consistent(), "{s:?}");
                assert!(s.active >= 1, "missed the session open throughout: {s:?}");
                assert!(s.started <= 2 && s.ended <= 1, "{s:?}");
            })
        };
        ender.join().unwrap();
        reader.join().unwrap();
        drop(kept);
        assert_balanced(&tracker, 2);
    });
}

/// A poller takes snapshots while a session ends and another reader takes its own: every
/// snapshot is coherent, one poller's counts never go backwards, and every snapshot has a
/// sequence number of its own. That is what a publisher of the latest report (the
/// `LoadBoard` of `livecount-report`, which keeps whichever report has the higher sequence)
/// relies on; its lock-and-compare publication itself is tested there
/// (`concurrent_publishers_never_leave_an_older_report_last`), not under loom.
#[test]
fn pollers_see_coherent_snapshots_in_sequence() {
    model(3, || {
        let tracker = SessionTracker::<Sharded>::with_counters(
            Sharded::with_shards(2),
            Sharded::with_shards(2),
        );
        let session = tracker.start();
        let ender = thread::spawn(move || {
            session.end(EndReason::Completed);
        });
        let poller = {
            let tracker = tracker.clone();
            thread::spawn(move || {
                let first = tracker.snapshot();
                let second = tracker.snapshot();
                for s in [&first, &second] {
                    assert!(s.is_consistent(), "{s:?}");
                }
                assert!(second.sequence > first.sequence, "{first:?} {second:?}");
                assert!(
                    second.started >= first.started && second.ended >= first.ended,
                    "counts went backwards: {first:?} then {second:?}"
                );
                [first.sequence, second.sequence]
            })
        };
        let other = tracker.snapshot();
        assert!(other.is_consistent(), "{other:?}");
        ender.join().unwrap();
        let polled = poller.join().unwrap();
        assert!(
            !polled.contains(&other.sequence),
            "a sequence number taken twice"
        );
        let last = tracker.snapshot();
        assert!(last.is_consistent());
        assert_eq!((last.ended, last.active), (1, 0), "{last:?}");
    });
}

/// An end from a handle races the owner's poll that registers for it: the poll either sees the
/// end or is woken by it (a lost wake-up would leave `block_on` parked: a loom deadlock).
#[test]
fn end_wakes_the_owner_polling_for_it() {
    model(3, || {
        let tracker = SessionTracker::<Single>::default();
        let session = tracker.start();
        let handle = session.handle();
        let ender = thread::spawn(move || handle.end(EndReason::Disconnected));
        let reason = loom::future::block_on(poll_fn(|cx| session.poll_ended(cx)));
        assert_eq!(reason, EndReason::Disconnected);
        assert!(ender.join().unwrap());
        drop(session);
        assert_balanced(&tracker, 1);
    });
}

/// A shutdown by id and the reaper race each other and the owner's poll: whichever wins, the
/// owner wakes with its reason.
#[test]
fn tracker_end_and_reaper_wake_the_owner() {
    model(2, || {
        let tracker = SessionTracker::<Single>::default();
        let session = tracker.start();
        let id = session.id();
        let by_id = {
            let tracker = tracker.clone();
            thread::spawn(move || tracker.end(id, EndReason::Shutdown))
        };
        let reaper = {
            let tracker = tracker.clone();
            let later = Instant::now() + Duration::from_secs(3600);
            thread::spawn(move || tracker.reap_at(later, Duration::from_secs(60)).len())
        };
        let reason = loom::future::block_on(poll_fn(|cx| session.poll_ended(cx)));
        let by_id = by_id.join().unwrap();
        let reaped = reaper.join().unwrap();
        assert_eq!(
            usize::from(by_id) + reaped,
            1,
            "exactly one of them ends it"
        );
        let expected = if by_id {
            EndReason::Shutdown
        } else {
            EndReason::Reaped
        };
        assert_eq!(reason, expected);
        drop(session);
        assert_balanced(&tracker, 1);
    });
}

/// Two `ended()` waiters on their own threads (one on a clone, one sharing nothing else) race
/// the end: both wake with the reason.
#[test]
fn end_wakes_every_ended_waiter() {
    model(2, || {
        let tracker = SessionTracker::<Single>::default();
        let session = tracker.start();
        let waiters: Vec<_> = (0..2)
            .map(|_| {
                let handle = session.handle();
                thread::spawn(move || loom::future::block_on(handle.ended()))
            })
            .collect();
        assert!(session.end(EndReason::Failed));
        for waiter in waiters {
            assert_eq!(waiter.join().unwrap(), EndReason::Failed);
        }
        drop(session);
        assert_balanced(&tracker, 1);
    });
}

/// A generator thread sets the phase through a handle while the owner changes it too: the
/// `generating` count always matches the phase that stayed.
#[test]
fn handle_set_phase_races_the_owners() {
    model(3, || {
        let tracker = SessionTracker::<Single>::default();
        let mut session = tracker.start();
        let handle = session.handle();
        let generator = thread::spawn(move || handle.set_phase(Phase::Generating));
        assert!(session.set_phase(Phase::Generating));
        assert!(session.set_phase(Phase::Listening));
        assert!(generator.join().unwrap(), "live: the set_phase took effect");
        let generating = u64::from(session.phase() == Some(Phase::Generating));
        let s = tracker.snapshot();
        assert_eq!(
            (s.generating, s.listening),
            (generating, 1 - generating),
            "{s:?}"
        );
        drop(session);
        assert_balanced(&tracker, 1);
    });
}

/// A phase change through a handle races the owner's and an end: the phase token is given
/// back exactly once, and an ended session reports `false`.
#[test]
fn handle_set_phase_races_an_end() {
    model(2, || {
        let tracker = SessionTracker::<Single>::default();
        let mut session = tracker.start();
        let generator = {
            let handle = session.handle();
            thread::spawn(move || handle.set_phase(Phase::Generating))
        };
        let ender = {
            let handle = session.handle();
            thread::spawn(move || handle.end(EndReason::TimedOut))
        };
        session.set_phase(Phase::Generating);
        generator.join().unwrap();
        assert!(ender.join().unwrap());
        assert!(!session.set_phase(Phase::Listening), "ended");
        drop(session);
        assert_balanced(&tracker, 1);
    });
}

/// ABA on a recycled slot: a stale id ending "its" session races the guard's drop and a new
/// start that reuses the slot (under loom every freed slot goes straight back to the pool,
/// and the next start takes it). The stale id may end the old session, never the new one:
/// the generation in the state word makes its CAS fail.
#[test]
fn a_stale_id_never_ends_the_sessions_reusing_its_slot() {
    model(3, || {
        let tracker = SessionTracker::<Single>::default();
        let old = tracker.start();
        let id = old.id();
        let stale = {
            let tracker = tracker.clone();
            thread::spawn(move || tracker.end(id, EndReason::Shutdown))
        };
        drop(old);
        let new = tracker.start();
        let stale_won = stale.join().unwrap();
        assert_eq!(
            new.reason(),
            None,
            "a stale id ended the slot's next session"
        );
        assert_ne!(new.id(), id, "a reused slot kept its generation");
        let s = tracker.snapshot();
        assert_eq!(
            (
                s.ended_by(EndReason::Shutdown),
                s.ended_by(EndReason::Dropped)
            ),
            (u64::from(stale_won), u64::from(!stale_won)),
            "{s:?}"
        );
        drop(new);
        assert_balanced(&tracker, 2);
    });
}

/// A handle outlives its session's guard while the slot is contended: the handle's release
/// on another thread races the main thread's next starts. The slot is freed exactly once, by
/// whoever drops the last reference, and only then reused; the handle keeps seeing its own
/// session's end until it is dropped.
#[test]
fn a_handle_outliving_its_guard_keeps_the_slot_until_released() {
    model(3, || {
        let tracker = SessionTracker::<Single, u32>::default();
        let first = tracker.start_with(1);
        let handle = first.handle();
        drop(first);
        let releaser = thread::spawn(move || {
            assert_eq!(handle.reason(), Some(EndReason::Dropped));
            handle.end(EndReason::Cancelled) // too late: changes nothing
        });
        let second = tracker.start_with(2);
        assert_eq!(second.metadata(), Some(&2));
        assert_eq!(second.reason(), None);
        assert!(
            !releaser.join().unwrap(),
            "an ended session was ended again"
        );
        let third = tracker.start_with(3);
        assert_ne!(second.id(), third.id());
        assert_eq!((second.reason(), third.reason()), (None, None));
        drop((second, third));
        let s = tracker.snapshot();
        assert_eq!((s.started, s.ended, s.active), (3, 3, 0), "{s:?}");
        assert_eq!(s.ended_by(EndReason::Dropped), 3, "{s:?}");
    });
}

/// A registry walk (`sessions()`) races the end, free and reuse of the slot it is reading:
/// it takes a reference before reading, so what it reports for an id is that session's own
/// metadata (loom's `UnsafeCell` reports any read that is not ordered after the write), and
/// the slot is never reused under it.
#[test]
fn a_walk_never_reads_a_slot_being_reused() {
    model(3, || {
        let tracker = SessionTracker::<Single, u32>::default();
        let first = tracker.start_with(1);
        let first_id = first.id();
        let walker = {
            let tracker = tracker.clone();
            thread::spawn(move || tracker.sessions())
        };
        drop(first);
        let second = tracker.start_with(2);
        let second_id = second.id();
        for info in walker.join().unwrap() {
            let expected = if info.id == first_id {
                1
            } else {
                assert_eq!(info.id, second_id, "{info:?}");
                2
            };
            assert_eq!(info.metadata, Some(expected), "{info:?}");
        }
        drop(second);
        assert_balanced_tagged(&tracker, 2);
    });
}

/// The last tracker handle and the last session (with a handle of its own) go on different
/// threads: the session keeps the tracker state alive, its end is counted, and whichever
/// reference is last frees the state (loom reports an access to a freed cell or atomic).
#[test]
fn the_last_handle_and_the_last_session_race_to_free_the_tracker() {
    model(3, || {
        let tracker = SessionTracker::<Single>::default();
        let session = tracker.start();
        let handle = session.handle();
        let ender = thread::spawn(move || {
            let won = session.end(EndReason::Completed);
            drop(session);
            won
        });
        let releaser = thread::spawn(move || {
            assert!(
                !handle.end(EndReason::Cancelled) || handle.reason() == Some(EndReason::Cancelled)
            );
            drop(handle);
        });
        drop(tracker);
        let _ = ender.join().unwrap();
        releaser.join().unwrap();
    });
}

fn assert_balanced_tagged(tracker: &SessionTracker<Single, u32>, sessions: u64) {
    let s = tracker.snapshot();
    assert!(s.is_consistent(), "inconsistent snapshot {s:?}");
    assert_eq!(
        (s.started, s.ended, s.active),
        (sessions, sessions, 0),
        "{s:?}"
    );
}

/// A waker that counts nothing; its `Arc`'s strong count says who still holds a clone.
struct Held;

impl std::task::Wake for Held {
    fn wake(self: std::sync::Arc<Self>) {}
}

/// The owner's poll registers its waker while a handle ends the session: if the end lands
/// between the registration and the poll's announcing `fetch_or`, nobody wakes (or takes)
/// the waker; freeing the slot must drop it, or the slot would keep the task's waker for as
/// long as the slot sits unused.
#[test]
fn a_freed_slot_keeps_no_waker() {
    model(3, || {
        let tracker = SessionTracker::<Single>::default();
        let session = tracker.start();
        let handle = session.handle();
        let ender = thread::spawn(move || {
            handle.end(EndReason::Shutdown);
        });
        let held = std::sync::Arc::new(Held);
        let waker = std::task::Waker::from(std::sync::Arc::clone(&held));
        let _ = session.poll_ended(&mut std::task::Context::from_waker(&waker));
        ender.join().unwrap();
        drop(session);
        drop(waker);
        assert_eq!(
            std::sync::Arc::strong_count(&held),
            1,
            "the freed slot kept a clone of the waker"
        );
    });
}

/// Two limits found at once (the sweeper's idle end, and the edge's message-size end through
/// `end_for`) race the owner's own end and the drain's `end_all`: exactly one end wins, and
/// `ended_by` names a limit exactly when a limit's end won, and the one that won.
#[test]
fn limit_ends_race_the_owner_and_the_drain() {
    use livecount_session::EndCause;
    model(2, || {
        let tracker = SessionTracker::<Single>::default();
        let session = tracker.start();
        let (idle, too_large) = (session.handle(), session.handle());
        let sweeper = thread::spawn(move || idle.end_for(EndCause::Idle));
        let edge = thread::spawn(move || too_large.end_for(EndCause::TooLarge));
        let cut = {
            let tracker = tracker.clone();
            thread::spawn(move || tracker.end_all(EndReason::Shutdown))
        };
        let owner = session.end(EndReason::Completed);
        let (idle, too_large, cut) = (
            sweeper.join().unwrap(),
            edge.join().unwrap(),
            cut.join().unwrap(),
        );
        let wins = [owner, idle, too_large, cut == 1];
        assert_eq!(wins.iter().filter(|&&w| w).count(), 1, "{wins:?}");
        let reason = session.reason().unwrap();
        let expected = match () {
            () if idle => Some(EndCause::Idle),
            () if too_large => Some(EndCause::TooLarge),
            () => None,
        };
        assert_eq!(session.handle().ended_by(), expected, "{reason:?}");
        drop(session);
        assert_balanced(&tracker, 1);
    });
}
