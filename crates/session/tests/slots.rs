//! The session table's promises, through the public API: no thread limit, slots reused under
//! churn on one thread and when sessions end on another thread than their start, and ids
//! that change generation when a slot is reused.

use std::sync::{Arc, Barrier, mpsc};

use livecount_session::{EndReason, SessionTracker};

/// The slot index an id names (its low 32 bits).
fn index(id: livecount_session::SessionId) -> u64 {
    id.as_u64() & u64::from(u32::MAX)
}

/// More threads than `sharded-slab`'s 4096 (the old registry's limit) hold a session each, at
/// once: every start succeeds and is counted.
#[test]
fn threads_have_no_limit() {
    const THREADS: usize = 4_200;
    let tracker = SessionTracker::new();
    let barrier = Arc::new(Barrier::new(THREADS + 1));
    let threads: Vec<_> = (0..THREADS)
        .map(|_| {
            let (tracker, barrier) = (tracker.clone(), Arc::clone(&barrier));
            std::thread::Builder::new()
                .stack_size(64 * 1024)
                .spawn(move || {
                    let session = tracker.try_start();
                    barrier.wait(); // all hold theirs
                    barrier.wait(); // the main thread has counted
                    session.map(|s| s.end(EndReason::Completed))
                })
                .expect("spawn")
        })
        .collect();
    barrier.wait();
    assert_eq!(tracker.active(), THREADS as u64);
    barrier.wait();
    for t in threads {
        assert_eq!(t.join().unwrap(), Ok(true));
    }
    let s = tracker.snapshot();
    assert_eq!(
        (s.started, s.ended, s.active),
        (THREADS as u64, THREADS as u64, 0)
    );
}

/// One thread starting and ending 100 000 sessions one after another uses a handful of
/// slots: each end's slot is the next start's.
#[test]
fn churn_on_one_thread_reuses_slots() {
    let tracker = SessionTracker::new();
    let mut highest = 0;
    for _ in 0..100_000 {
        let session = tracker.start();
        highest = highest.max(index(session.id()));
    }
    assert!(highest < 64, "slot index {highest} after sequential churn");
}

/// Sessions started on one thread and ended on another (a handoff through a bounded
/// channel): freed slots flow back through the pool, so the table stays bounded by what is
/// in flight and cached, not by how many sessions there were.
#[test]
fn handoff_churn_stays_bounded() {
    let tracker = SessionTracker::new();
    let (send, receive) = mpsc::sync_channel(16);
    let ender = std::thread::spawn(move || {
        for session in receive {
            drop(session);
        }
    });
    let mut highest = 0;
    for _ in 0..100_000 {
        let session = tracker.start();
        highest = highest.max(index(session.id()));
        send.send(session).unwrap();
    }
    drop(send);
    ender.join().unwrap();
    assert!(highest < 1024, "slot index {highest} after handoff churn");
    assert_eq!(tracker.active(), 0);
}

/// A reused slot's id is a new one (its generation moved), so the old id is stale: it
/// neither ends nor finds the new session.
#[test]
fn a_reused_slot_gets_a_new_id() {
    let tracker = SessionTracker::new();
    let old = tracker.start();
    let old_id = old.id();
    drop(old);
    let new = tracker.start();
    assert_eq!(index(new.id()), index(old_id), "the slot was not reused");
    assert_ne!(new.id(), old_id);
    assert!(!tracker.end(old_id, EndReason::Shutdown));
    assert_eq!(new.reason(), None);
    assert!(tracker.end(new.id(), EndReason::Shutdown));
}

/// A handle keeps its slot: the next start takes another one, and the handle still reports
/// its own session's end.
#[test]
fn a_handle_keeps_its_slot_from_reuse() {
    let tracker = SessionTracker::new();
    let first = tracker.start();
    let handle = first.handle();
    first.end(EndReason::Failed);
    drop(first);
    let second = tracker.start();
    assert_ne!(index(second.id()), index(handle.id()));
    assert_eq!(handle.reason(), Some(EndReason::Failed));
    let held = handle.id();
    drop(handle);
    let third = tracker.start();
    assert_eq!(
        index(third.id()),
        index(held),
        "the released slot is the next one used"
    );
    assert_ne!(third.id(), held);
}

/// A session's references (guard, handles, walkers) live in 23 bits of its state word. Like
/// `Arc`, cloning past the limit aborts the process rather than carry into the generation:
/// a child process clones handles until it dies, and must die by `SIGABRT` with exactly the
/// documented number held (2^23 − 2 references: the guard and 2^23 − 3 handles).
#[test]
fn too_many_handles_abort_before_the_count_overflows() {
    const MOST: u64 = (1 << 23) - 3;
    if std::env::var_os("LIVECOUNT_REFS_CHILD").is_some() {
        let tracker = SessionTracker::new();
        let session = tracker.start();
        let mut handles = Vec::with_capacity(1 << 23);
        for held in 1..=MOST + 8 {
            handles.push(session.handle());
            if held + 2 >= MOST {
                eprintln!("held {held}");
            }
        }
        eprintln!("no abort");
        std::process::exit(0);
    }
    let out = std::process::Command::new(std::env::current_exe().unwrap())
        .args([
            "--exact",
            "too_many_handles_abort_before_the_count_overflows",
            "--nocapture",
        ])
        .env("LIVECOUNT_REFS_CHILD", "1")
        .output()
        .expect("run the child");
    let stderr = String::from_utf8_lossy(&out.stderr);
    #[cfg(unix)]
    {
        use std::os::unix::process::ExitStatusExt;
        assert_eq!(
            out.status.signal(),
            Some(6),
            "not aborted: {:?}\n{stderr}",
            out.status
        );
    }
    assert!(!stderr.contains("no abort"), "{stderr}");
    let last = stderr.lines().rfind(|l| l.starts_with("held "));
    assert_eq!(last, Some(format!("held {MOST}").as_str()), "{stderr}");
}
