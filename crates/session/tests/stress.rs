//! tokio stress: tens of thousands of tracked sessions on a multi-thread runtime — random
//! deadlines, `JoinHandle::abort`, simulated disconnects, a reaper and a concurrent snapshot
//! reader — once per counter implementation. At the end nothing is active, every start has
//! exactly one end, and no snapshot taken meanwhile was ever inconsistent.
//!
//! `STRESS_SESSIONS` overrides the sessions per counter (default 20 000).

use std::future::pending;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::task::{Context, Poll};
use std::time::Duration;

use futures_core::Stream;
use livecount::{Counter, PerThread, Reference, Sharded, Single, Striped};
use livecount_session::{EndReason, SessionTracker, Snapshot};
use tokio::sync::mpsc;

/// An mpsc receiver as a `Stream` (frames from the client).
struct Frames(mpsc::Receiver<u32>);

impl Stream for Frames {
    type Item = u32;
    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<u32>> {
        self.0.poll_recv(cx)
    }
}

fn sessions() -> u64 {
    std::env::var("STRESS_SESSIONS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(20_000)
}

/// Reads snapshots until `done`, checking each one and that ends never go backwards; reaps
/// sessions idle for more than 20 ms now and then, racing the normal ends.
fn reader<C: Counter + 'static>(tracker: SessionTracker<C>, done: Arc<AtomicBool>) -> u64 {
    let mut last: Option<Snapshot> = None;
    let mut taken = 0u64;
    // Acquire: pairs with the Release store after the last session ended.
    while !done.load(Ordering::Acquire) {
        let s = tracker.snapshot();
        assert!(s.is_consistent(), "inconsistent snapshot {s:?}");
        if let Some(last) = last {
            assert!(s.sequence > last.sequence, "sequence went backwards");
            assert!(
                s.ended >= last.ended,
                "ended went backwards: {last:?} then {s:?}"
            );
            for reason in EndReason::ALL {
                assert!(s.ended_by(reason) >= last.ended_by(reason));
            }
        }
        last = Some(s);
        taken += 1;
        if taken.is_multiple_of(64) {
            tracker.reap(Duration::from_millis(20));
        }
        std::thread::yield_now();
    }
    taken
}

fn stress<C: Counter + Default + 'static>() {
    let n = sessions();
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_time()
        .build()
        .unwrap();
    let tracker = SessionTracker::<C>::default();
    let done = Arc::new(AtomicBool::new(false));
    let reader = {
        let (tracker, done) = (tracker.clone(), Arc::clone(&done));
        std::thread::spawn(move || reader(tracker, done))
    };
    runtime.block_on(async {
        // Seeded, so a failure replays with the same mix.
        let mut rng = fastrand::Rng::with_seed(0x9E37_79B9_7F4A_7C15);
        let mut tasks = Vec::with_capacity(n as usize);
        for i in 0..n {
            let ms = |rng: &mut fastrand::Rng, max| Duration::from_millis(rng.u64(..max));
            let task = match i % 4 {
                // Work against a deadline: Completed or TimedOut.
                0 => {
                    let work = tokio::time::sleep(ms(&mut rng, 3));
                    let tracked = tracker.track(work, ms(&mut rng, 4));
                    tokio::spawn(async move {
                        let _ = tracked.await;
                    })
                }
                // Never finishes: TimedOut.
                1 => {
                    let tracked = tracker.track(pending::<()>(), ms(&mut rng, 3) + ms(&mut rng, 2));
                    tokio::spawn(async move {
                        let _ = tracked.await;
                    })
                }
                // Aborted by its caller: Cancelled.
                2 => {
                    let tracked = tracker.track(pending::<()>(), Duration::from_secs(3600));
                    let task = tokio::spawn(async move {
                        let _ = tracked.await;
                    });
                    task.abort();
                    task
                }
                // A bidirectional stream whose peer disconnects: Disconnected.
                _ => {
                    let (tx, rx) = mpsc::channel(4);
                    let stream = tracker.track_stream(Frames(rx), Duration::from_secs(3600));
                    let detector = stream.handle();
                    tokio::spawn(async move {
                        tx.send(1).await.unwrap();
                        tokio::task::yield_now().await;
                        detector.end(EndReason::Disconnected);
                        drop(tx);
                    });
                    tokio::spawn(async move {
                        let mut stream = std::pin::pin!(stream);
                        while std::future::poll_fn(|cx| stream.as_mut().poll_next(cx))
                            .await
                            .is_some()
                        {}
                    })
                }
            };
            tasks.push(task);
        }
        for task in tasks {
            // Aborted tasks report `JoinError::Cancelled`; nothing else may fail.
            if let Err(e) = task.await {
                assert!(e.is_cancelled(), "{e}");
            }
        }
    });
    drop(runtime);
    // Release: pairs with the reader's Acquire.
    done.store(true, Ordering::Release);
    let snapshots = reader.join().unwrap();
    let s = tracker.snapshot();
    assert!(s.is_consistent(), "{s:?}");
    assert_eq!(tracker.active(), 0);
    assert_eq!((s.started, s.ended, s.active), (n, n, 0), "{s:?}");
    assert_eq!(
        s.ended_by(EndReason::Dropped),
        0,
        "every path ends explicitly: {s:?}"
    );
    for reason in [
        EndReason::TimedOut,
        EndReason::Cancelled,
        EndReason::Disconnected,
    ] {
        assert!(s.ended_by(reason) > 0, "no session ended {reason}: {s:?}");
    }
    assert!(tracker.sessions().is_empty());
    assert!(snapshots > 0);
    eprintln!(
        "{}: {n} sessions, {snapshots} concurrent snapshots, {:?}",
        std::any::type_name::<C>(),
        s.ended_by_reason
    );
}

macro_rules! stress {
    ($($name:ident: $counter:ty),* $(,)?) => {$(
        #[test]
        fn $name() {
            stress::<$counter>();
        }
    )*};
}

stress! {
    per_thread: PerThread,
    sharded: Sharded,
    striped: Striped,
    single: Single,
    reference: Reference,
}
