//! `try_start` at the registry's thread limit: `sharded-slab` gives each thread using it a
//! process-wide index below `StartError::MAX_THREADS` (4096) and panics on the next thread;
//! `try_start` must return `StartError::ThreadLimit` there, count nothing, and work again once
//! threads exit. Its own test binary: the index space is per process.

use std::sync::{Arc, Barrier, mpsc};

use livecount_session::{SessionTracker, StartError};

/// Keeps the default panic hook for everything but `sharded-slab`'s limit panics, which
/// `try_start` catches by design (thousands of them would drown the output).
fn quiet_slab_limit_panics() {
    let default = std::panic::take_hook();
    std::panic::set_hook(Box::new(move |info| {
        let text = info
            .payload()
            .downcast_ref::<String>()
            .map(String::as_str)
            .unwrap_or_default();
        let slab_limit = text.contains("Thread count overflowed") || text.contains("thread ID");
        if !slab_limit {
            default(info);
        }
    }));
}

#[test]
fn try_start_past_the_thread_limit_is_an_error_not_a_panic() {
    quiet_slab_limit_panics();
    let tracker = SessionTracker::new();
    let threads = StartError::MAX_THREADS + 8;
    // Every thread holds its session (and its registry index) until all have tried.
    let hold = Arc::new(Barrier::new(threads + 1));
    let (results, outcomes) = mpsc::channel();
    let workers: Vec<_> = (0..threads)
        .map(|_| {
            let tracker = tracker.clone();
            let hold = Arc::clone(&hold);
            let results = results.clone();
            std::thread::Builder::new()
                .stack_size(64 * 1024)
                .spawn(move || {
                    let started = tracker.try_start();
                    results.send(started.as_ref().err().copied()).unwrap();
                    hold.wait();
                    drop(started);
                })
                .expect("spawn a worker thread")
        })
        .collect();
    drop(results);
    let outcomes: Vec<Option<StartError>> = outcomes.iter().take(threads).collect();
    let started = outcomes.iter().filter(|o| o.is_none()).count();
    let limited = outcomes
        .iter()
        .filter(|o| **o == Some(StartError::ThreadLimit))
        .count();
    assert_eq!(started + limited, threads, "no other error: {outcomes:?}");
    assert!(limited >= 8, "{limited} threads past the limit");
    assert!(
        (StartError::MAX_THREADS - 16..=StartError::MAX_THREADS).contains(&started),
        "{started} threads started a session"
    );
    // Nothing was counted for the refused starts.
    assert_eq!(tracker.active(), started as u64);
    hold.wait();
    for worker in workers {
        worker.join().expect("no worker panicked");
    }
    let s = tracker.snapshot();
    assert_eq!(
        (s.started, s.ended, s.active),
        (started as u64, started as u64, 0)
    );
    // The exited threads' indices are free again, but `sharded-slab` recycles the ones past
    // its limit too (first in, first out): a new thread may draw one of those and be refused,
    // one of the next few then draws a good one.
    let again: Vec<_> = (0..limited + 1)
        .map(|_| {
            let tracker = tracker.clone();
            std::thread::spawn(move || tracker.try_start().map(|_| ()))
                .join()
                .unwrap()
        })
        .collect();
    assert!(again.contains(&Ok(())), "{again:?}");
    assert!(
        again
            .iter()
            .all(|a| *a == Ok(()) || *a == Err(StartError::ThreadLimit))
    );
    assert_eq!(tracker.active(), 0);
}
