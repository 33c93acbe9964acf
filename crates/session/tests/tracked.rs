//! The tokio adaptors against ends from elsewhere: an end from a handle, `tracker.end` /
//! `end_all` or the reaper wakes a task blocked on a `TrackedStream` / `Tracked` whose source
//! never yields, and it sees the end at that poll; `EndHandle::ended` wakes every waiter;
//! handles stay valid after the end; zero periods fail at the call.
//!
//! Every wait is bounded by a timeout far above what a woken task needs and far below the
//! adaptors' own deadlines (an hour), so a lost wake-up fails the test instead of hanging it.

use std::future::poll_fn;
use std::pin::{Pin, pin};
use std::task::{Context, Poll};
use std::time::Duration;

use futures_core::Stream;
use livecount::PerThread;
use livecount_session::{
    EndHandle, EndReason, EndedEarly, Phase, SessionTracker, StreamEnd, TrackedStream,
};
use tokio::sync::oneshot;
use tokio::time::timeout;

/// Far longer than any test runs: only an end from elsewhere can stop an adaptor.
const HOUR: Duration = Duration::from_secs(3600);
/// Generous bound on "woken at once" (CI machines are noisy).
const WAKE_BOUND: Duration = Duration::from_secs(10);

/// A source that never yields; reports its first poll, so the test ends the session only once
/// the reader is polling it.
struct Never(Option<oneshot::Sender<()>>);

impl Stream for Never {
    type Item = u32;

    fn poll_next(mut self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<Option<u32>> {
        if let Some(polled) = self.0.take() {
            let _ = polled.send(());
        }
        Poll::Pending
    }
}

/// Starts a tracked stream over `Never` on its own task; returns its handle and the reader
/// task, which resolves to what the stream yielded once it stopped waiting, after the
/// reader's first poll (and a moment to park).
async fn blocked_reader(
    tracker: &SessionTracker,
) -> (EndHandle, tokio::task::JoinHandle<Option<u32>>) {
    let (polled, first_poll) = oneshot::channel();
    let stream = tracker.track_stream(Never(Some(polled)), HOUR);
    let handle = stream.handle();
    let reader = tokio::spawn(async move {
        let mut stream = pin!(stream);
        poll_fn(|cx| stream.as_mut().poll_next(cx)).await
    });
    first_poll.await.expect("the reader polls the stream");
    tokio::time::sleep(Duration::from_millis(20)).await; // let it park
    (handle, reader)
}

async fn assert_reader_stops(reader: tokio::task::JoinHandle<Option<u32>>) {
    let yielded = timeout(WAKE_BOUND, reader)
        .await
        .expect("the end did not wake the task blocked on the stream")
        .unwrap();
    assert_eq!(yielded, None);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn handle_end_wakes_a_stream_whose_source_never_yields() {
    let tracker = SessionTracker::new();
    let (handle, reader) = blocked_reader(&tracker).await;
    let ender = handle.clone();
    tokio::spawn(async move { assert!(ender.end(EndReason::Disconnected)) })
        .await
        .unwrap();
    assert_reader_stops(reader).await;
    assert_eq!(handle.reason(), Some(EndReason::Disconnected));
    assert_eq!(tracker.active(), 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn end_all_wakes_every_pending_stream() {
    let tracker = SessionTracker::new();
    let (first, first_reader) = blocked_reader(&tracker).await;
    let (second, second_reader) = blocked_reader(&tracker).await;
    assert_eq!(tracker.end_all(EndReason::Shutdown), 2);
    assert_reader_stops(first_reader).await;
    assert_reader_stops(second_reader).await;
    assert_eq!(first.reason(), Some(EndReason::Shutdown));
    assert_eq!(second.reason(), Some(EndReason::Shutdown));
    let s = tracker.snapshot();
    assert_eq!((s.active, s.ended_by(EndReason::Shutdown)), (0, 2));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tracker_end_by_id_wakes_a_pending_stream() {
    let tracker = SessionTracker::new();
    let (handle, reader) = blocked_reader(&tracker).await;
    assert!(tracker.end(handle.id(), EndReason::Failed));
    assert_reader_stops(reader).await;
    assert_eq!(handle.reason(), Some(EndReason::Failed));
}

/// Paused clock: the sweeper reaps the idle session at about 11 s of virtual time; the test
/// gives up at 60 s, long before the stream's own hour-long deadline would stop it.
#[tokio::test(start_paused = true)]
async fn reaping_wakes_a_pending_stream() {
    let tracker = SessionTracker::new();
    assert!(tracker.reap_after(Duration::from_secs(10)));
    let (handle, reader) = blocked_reader(&tracker).await;
    let yielded = timeout(Duration::from_secs(60), reader)
        .await
        .expect("the reaper's end did not wake the task blocked on the stream")
        .unwrap();
    assert_eq!(yielded, None);
    assert_eq!(handle.reason(), Some(EndReason::Reaped));
    assert_eq!(tracker.active(), 0);
}

/// Reaping stops when told to, and a touched session is not a ghost. (The reaper reads
/// tokio's clock, paused here, so the touches are stamped with it too.)
#[tokio::test(start_paused = true)]
async fn reaping_counts_from_the_last_touch_and_stops_when_turned_off() {
    let tracker = SessionTracker::new();
    assert!(tracker.reap_after(Duration::from_secs(10)));
    let touched = tracker.start();
    std::mem::forget(tracker.start()); // a ghost
    for _ in 0..3 {
        tokio::time::sleep(Duration::from_secs(6)).await;
        touched.touch_at(tokio::time::Instant::now().into_std());
    }
    // 18 s: the ghost is gone, the touched session stays.
    assert_eq!(tracker.active(), 1);
    assert_eq!(tracker.snapshot().ended_by(EndReason::Reaped), 1);
    assert!(tracker.reap_after(None));
    tokio::time::sleep(Duration::from_secs(60)).await;
    assert_eq!(tracker.active(), 1, "reaped after reaping was turned off");
    assert!(tracker.reap_after(Duration::from_secs(10)));
    tokio::time::sleep(Duration::from_secs(13)).await;
    assert_eq!(tracker.active(), 0);
}

/// Outside a runtime nothing could sweep: the call says so instead of pretending.
#[test]
fn reaping_outside_a_runtime_is_refused() {
    let tracker: SessionTracker = SessionTracker::new();
    assert!(!tracker.reap_after(Duration::from_secs(10)));
}

/// A tracked session's limits are the sweeper's: outside a runtime nothing would hold them,
/// so tracking panics at the call instead of never timing out.
#[test]
#[should_panic(expected = "a tracked session needs a tokio runtime")]
fn tracking_outside_a_runtime_panics_at_the_call() {
    let tracker: SessionTracker = SessionTracker::new();
    let _tracked = tracker.track(std::future::pending::<()>(), Duration::from_secs(1));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn handle_end_stops_a_pending_tracked_future() {
    let tracker = SessionTracker::new();
    let (started, running) = oneshot::channel();
    let tracked = tracker.track(
        async move {
            let _ = started.send(());
            std::future::pending::<()>().await
        },
        HOUR,
    );
    let handle = tracked.handle();
    let task = tokio::spawn(tracked);
    running.await.unwrap();
    tokio::time::sleep(Duration::from_millis(20)).await;
    assert!(handle.end(EndReason::Disconnected));
    let outcome = timeout(WAKE_BOUND, task)
        .await
        .expect("the end did not wake the tracked future")
        .unwrap();
    let ended = outcome.unwrap_err();
    assert_eq!(ended.reason, EndReason::Disconnected);
    assert!(!ended.is_timeout());
    assert_eq!(tracker.active(), 0);
}

#[tokio::test(start_paused = true)]
async fn a_deadline_resolves_to_timed_out() {
    let tracker = SessionTracker::new();
    let outcome = tracker
        .track(std::future::pending::<()>(), Duration::from_secs(2))
        .await;
    assert_eq!(
        outcome,
        Err(EndedEarly {
            reason: EndReason::TimedOut
        })
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ended_wakes_every_waiter() {
    let tracker = SessionTracker::new();
    let session = tracker.start();
    let handle = session.handle();
    let mut waiters = Vec::new();
    for _ in 0..4 {
        let clone = handle.clone();
        waiters.push(tokio::spawn(async move { clone.ended().await }));
    }
    // Two futures on one shared handle, in one task.
    let shared = handle.clone();
    waiters.push(tokio::spawn(async move {
        let (a, b) = tokio::join!(shared.ended(), shared.ended());
        assert_eq!(a, b);
        a
    }));
    // A waiter that gives up before the end must not disturb the others.
    {
        let mut quitter = pin!(handle.ended());
        assert!(futures_poll_once(quitter.as_mut()).await.is_pending());
    }
    tokio::time::sleep(Duration::from_millis(20)).await;
    assert!(session.end(EndReason::TimedOut));
    for waiter in waiters {
        let reason = timeout(WAKE_BOUND, waiter)
            .await
            .expect("an ended() waiter was not woken")
            .unwrap();
        assert_eq!(reason, EndReason::TimedOut);
    }
    assert_eq!(
        handle.ended().await,
        EndReason::TimedOut,
        "ready at once now"
    );
}

/// Polls `future` once.
async fn futures_poll_once<F: std::future::Future>(mut future: Pin<&mut F>) -> Poll<F::Output> {
    poll_fn(|cx| Poll::Ready(future.as_mut().poll(cx))).await
}

#[tokio::test]
async fn handles_stay_valid_after_the_end() {
    let tracker = SessionTracker::new();
    let mut tracked = pin!(tracker.track(async { 7 }, HOUR));
    assert_eq!(tracked.as_mut().await, Ok(7));
    let handle = tracked.handle(); // panicked before
    assert!(handle.is_ended());
    assert_eq!(handle.reason(), Some(EndReason::Completed));

    struct Done;
    impl Stream for Done {
        type Item = ();
        fn poll_next(self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<Option<()>> {
            Poll::Ready(None)
        }
    }
    let mut stream = pin!(tracker.track_stream(Done, HOUR));
    assert_eq!(poll_fn(|cx| stream.as_mut().poll_next(cx)).await, None);
    let handle = stream.handle(); // panicked before
    assert!(handle.is_ended());
    assert_eq!(handle.reason(), Some(EndReason::Completed));
    assert_eq!(poll_fn(|cx| stream.as_mut().poll_next(cx)).await, None);
    assert!(!stream.as_mut().set_phase(Phase::Generating));
}

/// A generator task separate from the reader marks the session `Generating` through a handle.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_generator_task_sets_the_phase_through_a_handle() {
    let tracker = SessionTracker::new();
    let (handle, reader) = blocked_reader(&tracker).await;
    let generator = handle.clone();
    tokio::spawn(async move { assert!(generator.set_phase(Phase::Generating)) })
        .await
        .unwrap();
    assert_eq!(tracker.snapshot().generating, 1);
    assert_eq!(handle.phase(), Some(Phase::Generating));
    handle.end(EndReason::Completed);
    assert_reader_stops(reader).await;
    let s = tracker.snapshot();
    assert_eq!((s.active, s.generating), (0, 0));
    assert!(!handle.set_phase(Phase::Listening));
}

#[tokio::test]
async fn tracked_adaptors_carry_metadata() {
    let tracker = SessionTracker::<PerThread, String>::default();
    let tracked = tracker.track_with("tenant-a".to_owned(), async { 1 }, HOUR);
    let stream = tracker.track_stream_with("tenant-b".to_owned(), Never(None), HOUR);
    let mut tenants: Vec<_> = tracker
        .sessions()
        .into_iter()
        .filter_map(|info| info.metadata)
        .collect();
    tenants.sort();
    assert_eq!(tenants, ["tenant-a", "tenant-b"]);
    assert_eq!(tracked.await, Ok(1));
    drop(stream);
    assert_eq!(tracker.snapshot().ended_by(EndReason::Cancelled), 1);
}

// === idle timeout ===

/// A source fed through a channel: items when the test sends them, the end when it drops
/// the sender.
struct Fed(tokio::sync::mpsc::UnboundedReceiver<u32>);

impl Stream for Fed {
    type Item = u32;

    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<u32>> {
        self.0.poll_recv(cx)
    }
}

/// Reads `stream` to its end on its own task: the items, and the (virtual) instant of the
/// end.
fn read_to_end<S>(stream: S) -> tokio::task::JoinHandle<(Vec<u32>, tokio::time::Instant)>
where
    S: Stream<Item = u32> + Send + 'static,
{
    tokio::spawn(async move {
        let mut stream = pin!(stream);
        let mut items = Vec::new();
        while let Some(item) = poll_fn(|cx| stream.as_mut().poll_next(cx)).await {
            items.push(item);
        }
        (items, tokio::time::Instant::now())
    })
}

/// Paused clock: the sweeper ends a session at its limit or up to two of its periods later
/// (a quarter of the tracker's `shortest` limit, between 10 ms and 1 s), never earlier;
/// plus the timer's 1 ms rounding.
fn assert_at(ended: tokio::time::Instant, expected: tokio::time::Instant, shortest: Duration) {
    assert!(ended >= expected, "ended {:?} early", expected - ended);
    let period = (shortest / 4).clamp(Duration::from_millis(10), Duration::from_secs(1));
    let late = ended - expected;
    assert!(
        late <= 2 * period + Duration::from_millis(1),
        "ended {late:?} late (period {period:?})"
    );
}

#[tokio::test(start_paused = true)]
async fn a_silent_source_ends_disconnected_at_the_idle_limit() {
    let tracker = SessionTracker::new();
    let start = tokio::time::Instant::now();
    let stream = tracker
        .track_stream(Never(None), HOUR)
        .idle_timeout(Duration::from_secs(5));
    let handle = stream.handle();
    let (items, ended) = timeout(Duration::from_secs(60), read_to_end(stream))
        .await
        .expect("the idle timeout did not end the stream")
        .unwrap();
    assert!(items.is_empty());
    assert_at(
        ended,
        start + Duration::from_secs(5),
        Duration::from_secs(5),
    );
    assert_eq!(handle.reason(), Some(EndReason::Disconnected));
    let s = tracker.snapshot();
    assert_eq!((s.active, s.ended_by(EndReason::Disconnected)), (0, 1));
}

#[tokio::test(start_paused = true)]
async fn items_keep_an_idle_stream_alive_and_the_limit_counts_from_the_last() {
    let tracker = SessionTracker::new();
    let (tx, rx) = tokio::sync::mpsc::unbounded_channel();
    let stream = tracker
        .track_stream(Fed(rx), HOUR)
        .idle_timeout(Duration::from_secs(5));
    let handle = stream.handle();
    let reader = read_to_end(stream);
    // An item every 3 s for 30 s: ten times past the limit counted from the start, never
    // silent for it.
    for item in 0..10 {
        tokio::time::sleep(Duration::from_secs(3)).await;
        tx.send(item).unwrap();
    }
    let last = tokio::time::Instant::now();
    tokio::time::sleep(Duration::from_secs(4)).await;
    assert_eq!(tracker.active(), 1, "ended though never silent for 5 s");
    let (items, ended) = timeout(Duration::from_secs(60), reader)
        .await
        .expect("the idle timeout did not end the stream")
        .unwrap();
    assert_eq!(items, (0..10).collect::<Vec<_>>());
    assert_at(ended, last + Duration::from_secs(5), Duration::from_secs(5));
    assert_eq!(handle.reason(), Some(EndReason::Disconnected));
    drop(tx);
}

#[tokio::test(start_paused = true)]
async fn the_deadline_wins_over_a_later_or_equal_idle_limit() {
    for (deadline, idle) in [(2, 5), (5, 5)] {
        let tracker = SessionTracker::new();
        let start = tokio::time::Instant::now();
        let stream = tracker
            .track_stream(Never(None), Duration::from_secs(deadline))
            .idle_timeout(Duration::from_secs(idle));
        let handle = stream.handle();
        let (_, ended) = timeout(Duration::from_secs(60), read_to_end(stream))
            .await
            .unwrap()
            .unwrap();
        assert_at(
            ended,
            start + Duration::from_secs(deadline),
            Duration::from_secs(deadline),
        );
        assert_eq!(
            handle.reason(),
            Some(EndReason::TimedOut),
            "{deadline} s / {idle} s"
        );
    }
}

/// The idle limit re-armed by items (5 s, pushed back every 3 s) must still give way to
/// the deadline (7 s) that comes before the pushed-back limit.
#[tokio::test(start_paused = true)]
async fn the_deadline_ends_a_stream_whose_items_keep_it_from_idling() {
    let tracker = SessionTracker::new();
    let (tx, rx) = tokio::sync::mpsc::unbounded_channel();
    let start = tokio::time::Instant::now();
    let stream = tracker
        .track_stream(Fed(rx), Duration::from_secs(7))
        .idle_timeout(Duration::from_secs(5));
    let handle = stream.handle();
    let reader = read_to_end(stream);
    let feeder = tokio::spawn(async move {
        for item in 0.. {
            tokio::time::sleep(Duration::from_secs(3)).await;
            if tx.send(item).is_err() {
                return;
            }
        }
    });
    let (items, ended) = timeout(Duration::from_secs(60), reader)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(items, [0, 1]);
    assert_at(
        ended,
        start + Duration::from_secs(7),
        Duration::from_secs(5),
    );
    assert_eq!(handle.reason(), Some(EndReason::TimedOut));
    feeder.abort();
}

#[tokio::test(start_paused = true)]
async fn a_zero_idle_limit_ends_the_stream_at_the_sweepers_next_look() {
    let tracker = SessionTracker::new();
    let (_tx, rx) = tokio::sync::mpsc::unbounded_channel();
    let start = tokio::time::Instant::now();
    let stream = tracker
        .track_stream(Fed(rx), HOUR)
        .idle_timeout(Duration::ZERO);
    let handle = stream.handle();
    let (items, ended) = timeout(Duration::from_secs(60), read_to_end(stream))
        .await
        .unwrap()
        .unwrap();
    assert!(items.is_empty());
    assert_at(ended, start, Duration::ZERO);
    assert_eq!(handle.reason(), Some(EndReason::Disconnected));
}

// === why it stopped ===

/// Polls `stream` until it yields `None` (within a minute of virtual time); returns why it
/// stopped, checking that it said nothing before and says the same on every later poll.
async fn stopped<S: Stream<Item = u32>>(stream: TrackedStream<S, PerThread, ()>) -> StreamEnd {
    let mut stream = pin!(stream);
    let run = async { while poll_fn(|cx| stream.as_mut().poll_next(cx)).await.is_some() {} };
    timeout(Duration::from_secs(60), run)
        .await
        .expect("the stream never stopped");
    assert_eq!(poll_fn(|cx| stream.as_mut().poll_next(cx)).await, None);
    stream
        .stopped()
        .expect("a stream that yielded None says why")
}

#[tokio::test(start_paused = true)]
async fn stopped_names_the_streams_own_ends() {
    let tracker = SessionTracker::new();
    // The source's end.
    let (tx, rx) = tokio::sync::mpsc::unbounded_channel();
    tx.send(1).unwrap();
    drop(tx);
    let stream = tracker.track_stream(Fed(rx), HOUR);
    assert_eq!(stream.stopped(), None, "a fresh stream has not stopped");
    let handle = stream.handle();
    assert_eq!(stopped(stream).await, StreamEnd::Finished);
    assert_eq!(handle.reason(), Some(EndReason::Completed));
    // The deadline.
    let stream = tracker.track_stream(Never(None), Duration::from_secs(2));
    let handle = stream.handle();
    assert_eq!(stopped(stream).await, StreamEnd::Deadline);
    assert_eq!(handle.reason(), Some(EndReason::TimedOut));
    // The idle limit.
    let stream = tracker
        .track_stream(Never(None), HOUR)
        .idle_timeout(Duration::from_secs(5));
    let handle = stream.handle();
    assert_eq!(stopped(stream).await, StreamEnd::Idle);
    assert_eq!(handle.reason(), Some(EndReason::Disconnected));
    assert_eq!(tracker.active(), 0);
}

#[tokio::test(start_paused = true)]
async fn stopped_names_an_end_from_elsewhere_with_its_reason() {
    let tracker = SessionTracker::new();
    // Ended while the reader waits on a silent source.
    let (handle, reader) = {
        let stream = tracker.track_stream(Never(None), HOUR);
        let handle = stream.handle();
        (handle, tokio::spawn(stopped(stream)))
    };
    tokio::time::sleep(Duration::from_millis(20)).await;
    handle.end(EndReason::Cancelled);
    assert_eq!(
        reader.await.unwrap(),
        StreamEnd::Elsewhere(EndReason::Cancelled)
    );
    // Ended before its first poll and before its own deadline: the end that landed is the
    // one reported, though the deadline passes before the stream is polled.
    let stream = tracker.track_stream(Never(None), Duration::from_secs(1));
    let handle = stream.handle();
    tokio::time::sleep(Duration::from_millis(500)).await;
    tracker.end_all(EndReason::Shutdown);
    tokio::time::sleep(Duration::from_secs(2)).await;
    assert_eq!(
        stopped(stream).await,
        StreamEnd::Elsewhere(EndReason::Shutdown)
    );
    assert_eq!(handle.reason(), Some(EndReason::Shutdown));
    assert_eq!(
        StreamEnd::Elsewhere(EndReason::Shutdown).reason(),
        EndReason::Shutdown
    );
    for (end, reason) in [
        (StreamEnd::Finished, EndReason::Completed),
        (StreamEnd::Deadline, EndReason::TimedOut),
        (StreamEnd::Idle, EndReason::Disconnected),
    ] {
        assert_eq!(end.reason(), reason);
    }
}

/// An unbounded deadline (`Duration::MAX`) saturates far in the future (30 years) instead
/// of overflowing: five years of (paused) time later the stream still runs, still counted.
#[tokio::test(start_paused = true)]
async fn an_unbounded_deadline_does_not_fire() {
    let tracker = SessionTracker::new();
    let mut stream = pin!(tracker.track_stream(Never(None), Duration::MAX));
    assert!(
        poll_fn(|cx| Poll::Ready(stream.as_mut().poll_next(cx)))
            .await
            .is_pending()
    );
    tokio::time::advance(Duration::from_secs(365 * 24 * 3600)).await;
    assert!(
        poll_fn(|cx| Poll::Ready(stream.as_mut().poll_next(cx)))
            .await
            .is_pending()
    );
    assert_eq!((tracker.active(), stream.stopped()), (1, None));
    let mut future = pin!(tracker.track(std::future::pending::<()>(), Duration::MAX));
    tokio::time::advance(Duration::from_secs(5 * 365 * 24 * 3600)).await;
    assert!(futures_poll_once(future.as_mut()).await.is_pending());
    assert_eq!(tracker.active(), 2);
}

/// What a tracked future that did not finish says about it: a timeout is one, a cancel is
/// not, and the message names the reason.
#[tokio::test(start_paused = true)]
async fn ended_early_says_why() {
    let tracker = SessionTracker::new();
    let timed_out = tracker
        .track(std::future::pending::<()>(), Duration::from_millis(10))
        .await
        .unwrap_err();
    assert!(timed_out.is_timeout());
    assert_eq!(timed_out.reason, EndReason::TimedOut);
    assert_eq!(
        timed_out.to_string(),
        "session ended (timed_out) before the future finished"
    );
    let mut cancelled = pin!(tracker.track(std::future::pending::<()>(), HOUR));
    assert!(futures_poll_once(cancelled.as_mut()).await.is_pending());
    tracker.end_all(EndReason::Cancelled);
    let early = cancelled.await.unwrap_err();
    assert!(!early.is_timeout());
    assert_eq!(early.reason, EndReason::Cancelled);
}

/// A tracked stream's phase changes reach the tracker and say whether they applied.
#[tokio::test]
async fn a_tracked_streams_phase_changes_count() {
    let tracker = SessionTracker::new();
    let mut stream = pin!(tracker.track_stream(Never(None), HOUR));
    assert!(stream.as_mut().set_phase(Phase::Generating));
    assert_eq!(tracker.snapshot().generating, 1);
    assert!(stream.as_mut().set_phase(Phase::Listening));
    assert_eq!(tracker.snapshot().generating, 0);
    tracker.end_all(EndReason::Shutdown);
    assert!(
        !stream.as_mut().set_phase(Phase::Generating),
        "an ended stream changed phase"
    );
}
