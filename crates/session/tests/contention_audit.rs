//! The contention audit of the session tracker (`--cfg livecount_audit`, run by
//! `scripts/audit.sh`): N threads start sessions and end them (`Completed`) on their own
//! thread, or hand each to a partner thread that ends it, while the shims of `livecount`
//! and this crate record which thread writes which line.
//!
//! The design (crate docs, "Implementation notes"): a start + end "writes no line another
//! thread's sessions write". On its own thread, then, only first-use writes may be shared:
//! claiming a page of slots (the carve cursor, the page pointer) and the tracker state's
//! reference count for the thread's free list, and the counters' cell tables. Handed off, a
//! session's own slot moves to the ender by design (the starter publishes it, the ender's CAS
//! ends it and frees it), and the slot comes back to a starter through the pool, a batch of
//! 32 at a time, each batch moving the tracker state's reference count once each way. Nothing
//! else may be shared: not the counters, not the ends-by-reason cells.

#![cfg(livecount_audit)]

use std::collections::BTreeMap;
use std::sync::Mutex;
use std::sync::mpsc::{Receiver, SyncSender, sync_channel};

use livecount::audit::{self, Audit, BLOCK_BYTES, Summary, Writer};
use livecount_session::{EndReason, Session, SessionTracker};

/// Sessions per thread (per starting thread in a hand-off).
const PAIRS: u64 = 10_000;

/// Where the design lets a handed-off session's writes be shared: the slot's lifecycle (state
/// word, token cells) and the table (the slot's data and last activity, the state's
/// reference count per batch).
const HAND_OFF_SITES: [&str; 2] = ["session/src/lifecycle.rs", "session/src/slots.rs"];

fn same_thread(tracker: &SessionTracker, threads: usize) -> (Audit, u64) {
    let audit = audit::run(threads, |_| {
        for _ in 0..PAIRS {
            let session = tracker.start();
            session.end(EndReason::Completed);
        }
    });
    (audit, threads as u64 * PAIRS)
}

fn hand_off(tracker: &SessionTracker, threads: usize) -> (Audit, u64) {
    assert!(
        threads >= 2 && threads.is_multiple_of(2),
        "a hand-off runs pairs of threads, not {threads}"
    );
    let pairs = threads / 2;
    type Channel = (SyncSender<Session>, Mutex<Receiver<Session>>);
    let channels: Vec<Channel> = (0..pairs)
        .map(|_| {
            let (tx, rx) = sync_channel(256);
            (tx, Mutex::new(rx))
        })
        .collect();
    let audit = audit::run(threads, |i| {
        let (tx, rx) = &channels[i / 2];
        if i % 2 == 0 {
            for _ in 0..PAIRS {
                tx.send(tracker.start())
                    .expect("the ender waits for every session");
            }
        } else {
            let rx = rx.lock().unwrap();
            for _ in 0..PAIRS {
                let session = rx.recv().expect("the starter sends every session");
                session.end(EndReason::Completed);
            }
        }
    });
    (audit, pairs as u64 * PAIRS)
}

fn report(workload: &str, threads: usize, (audit, pairs): &(Audit, u64)) -> Summary {
    audit::emit(
        workload,
        "SessionTracker (PerThread)",
        threads,
        *pairs,
        audit,
    );
    let s = audit.summary(BLOCK_BYTES, Writer::Thread);
    // A start publishes with a store and an end is a CAS, at least: fewer recorded writes
    // means the tracker's path escaped the shims.
    assert!(
        s.writes >= 2 * pairs,
        "{workload}: {} writes for {pairs} sessions",
        s.writes
    );
    s
}

/// Shared writes outside `allowed` files: first use only (at most a few per thread).
fn shared_outside(audit: &Audit, allowed: &[&str]) -> BTreeMap<&'static str, u64> {
    audit
        .shared_writes_by_file(BLOCK_BYTES)
        .into_iter()
        .filter(|(file, _)| !allowed.iter().any(|a| file.ends_with(a)))
        .collect()
}

/// First-use writes a thread may make to shared lines: claiming slots (carve cursor, page
/// pointer, the state's reference count for its batch and its free list) and a cell in each
/// of the three cell tables (two counters, the ends by reason), a bucket's pointer and the
/// table's high-water mark each.
const FIRST_USE_PER_THREAD: u64 = 10;

#[test]
fn a_session_on_its_own_thread_writes_no_shared_line() {
    for threads in audit::thread_counts() {
        let result = same_thread(&SessionTracker::new(), threads);
        let s = report("same thread", threads, &result);
        assert!(
            s.shared_writes <= FIRST_USE_PER_THREAD * threads as u64,
            "{threads} threads: {} writes to shared lines for {} sessions: {:?}",
            s.shared_writes,
            result.1,
            result.0.shared_writes_by_file(BLOCK_BYTES)
        );
    }
}

#[test]
fn a_handed_off_session_shares_only_its_slot_and_the_batch_counts() {
    for threads in audit::thread_counts()
        .into_iter()
        .filter(|&n| n >= 2 && n.is_multiple_of(2))
    {
        let result = hand_off(&SessionTracker::new(), threads);
        report("hand-off", threads, &result);
        let elsewhere = shared_outside(&result.0, &HAND_OFF_SITES);
        let first_use = FIRST_USE_PER_THREAD * threads as u64;
        assert!(
            elsewhere.values().sum::<u64>() <= first_use,
            "{threads} threads: shared writes outside the slot and the table: {elsewhere:?}"
        );
    }
}
