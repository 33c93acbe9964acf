//! tokio integration: [`Tracked`] futures and [`TrackedStream`]s with a deadline, a
//! background reaper and a background reporter.

use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use futures_core::Stream;
use livecount::Counter;
use pin_project_lite::pin_project;
use tokio::task::JoinHandle;
use tokio::time::Sleep;

use crate::phase::Phase;
use crate::reason::EndReason;
use crate::reporter::Reporter;
use crate::session::{EndHandle, Session};
use crate::tracker::SessionTracker;

/// The error of a [`Tracked`] future whose deadline passed first (the session ended
/// [`EndReason::TimedOut`]).
///
/// ```
/// use livecount_session::TimedOut;
/// assert_eq!(TimedOut.to_string(), "session deadline elapsed");
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TimedOut;

impl fmt::Display for TimedOut {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("session deadline elapsed")
    }
}

impl std::error::Error for TimedOut {}

/// Owns the session while it is tracked; ends it `Cancelled` if dropped unfinished (the
/// future or stream dropped, its task aborted).
struct CancelOnDrop<C: Counter, M>(Session<C, M>);

impl<C: Counter, M> Drop for CancelOnDrop<C, M> {
    fn drop(&mut self) {
        self.0.end(EndReason::Cancelled);
    }
}

pin_project! {
    /// A future run as a session: ends it [`Completed`](EndReason::Completed) when the future
    /// finishes, [`TimedOut`](EndReason::TimedOut) when the deadline passes first (resolving
    /// to `Err(TimedOut)`), and [`Cancelled`](EndReason::Cancelled) when dropped unfinished
    /// (including `JoinHandle::abort`). An end from an [`EndHandle`] meanwhile (a disconnect)
    /// wins the reason but does not stop the future: stop the handler yourself.
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() {
    /// use livecount_session::{EndReason, SessionTracker, Tracked};
    /// use std::time::Duration;
    ///
    /// let tracker: SessionTracker = SessionTracker::new();
    /// let tracked = Tracked::new(tracker.start(), async { 42 }, Duration::from_secs(5));
    /// let handle = tracked.handle();
    /// assert_eq!(tracked.await, Ok(42));
    /// assert_eq!(handle.reason(), Some(EndReason::Completed));
    /// # }
    /// ```
    #[must_use = "futures do nothing unless polled; dropping this ends the session `Cancelled`"]
    pub struct Tracked<F, C: Counter, M> {
        #[pin]
        future: F,
        #[pin]
        deadline: Sleep,
        session: Option<CancelOnDrop<C, M>>,
    }
}

impl<F: Future, C: Counter, M> Tracked<F, C, M> {
    /// Tracks `future` as `session`, with a deadline `timeout` from now.
    pub fn new(session: Session<C, M>, future: F, timeout: Duration) -> Self {
        Tracked {
            future,
            deadline: tokio::time::sleep(timeout),
            session: Some(CancelOnDrop(session)),
        }
    }

    /// A handle on the tracked session (for a disconnect detector, say).
    ///
    /// # Panics
    ///
    /// If called after the future completed.
    pub fn handle(&self) -> EndHandle<C, M> {
        self.session
            .as_ref()
            .expect("Tracked::handle after completion")
            .0
            .handle()
    }
}

impl<F: Future, C: Counter, M> Future for Tracked<F, C, M> {
    type Output = Result<F::Output, TimedOut>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let this = self.project();
        assert!(this.session.is_some(), "Tracked polled after completion");
        if let Poll::Ready(output) = this.future.poll(cx) {
            finish(this.session, EndReason::Completed);
            return Poll::Ready(Ok(output));
        }
        if this.deadline.poll(cx).is_ready() {
            finish(this.session, EndReason::TimedOut);
            return Poll::Ready(Err(TimedOut));
        }
        Poll::Pending
    }
}

pin_project! {
    /// A stream run as a session: every item records activity (`touch`), the end of the
    /// stream ends the session [`Completed`](EndReason::Completed), the deadline passing ends
    /// it [`TimedOut`](EndReason::TimedOut) and the stream, and dropping it unfinished ends it
    /// [`Cancelled`](EndReason::Cancelled). After an end from an [`EndHandle`] (a disconnect)
    /// the stream yields `None` at its next poll.
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() {
    /// use livecount_session::{EndReason, SessionTracker, TrackedStream};
    /// use std::time::Duration;
    ///
    /// let tracker: SessionTracker = SessionTracker::new();
    /// let (tx, rx) = tokio::sync::mpsc::channel::<&str>(4);
    /// let frames = futures_stream(rx);
    /// let stream = TrackedStream::new(tracker.start(), frames, Duration::from_secs(30));
    /// let handle = stream.handle();
    /// let mut stream = std::pin::pin!(stream);
    /// tx.send("hello").await.unwrap();
    /// drop(tx); // the client closes its side
    /// assert_eq!(next(stream.as_mut()).await, Some("hello"));
    /// assert_eq!(next(stream.as_mut()).await, None);
    /// assert_eq!(handle.reason(), Some(EndReason::Completed));
    ///
    /// # fn futures_stream<T>(mut rx: tokio::sync::mpsc::Receiver<T>)
    /// #     -> impl futures_core::Stream<Item = T> + Unpin {
    /// #     struct S<T>(tokio::sync::mpsc::Receiver<T>);
    /// #     impl<T> futures_core::Stream for S<T> {
    /// #         type Item = T;
    /// #         fn poll_next(mut self: std::pin::Pin<&mut Self>, cx: &mut std::task::Context<'_>)
    /// #             -> std::task::Poll<Option<T>> { self.0.poll_recv(cx) }
    /// #     }
    /// #     S(rx)
    /// # }
    /// # async fn next<S: futures_core::Stream>(mut s: std::pin::Pin<&mut S>) -> Option<S::Item> {
    /// #     std::future::poll_fn(|cx| s.as_mut().poll_next(cx)).await
    /// # }
    /// # }
    /// ```
    #[must_use = "streams do nothing unless polled; dropping this ends the session `Cancelled`"]
    pub struct TrackedStream<S, C: Counter, M> {
        #[pin]
        stream: S,
        #[pin]
        deadline: Sleep,
        session: Option<CancelOnDrop<C, M>>,
    }
}

impl<S: Stream, C: Counter, M> TrackedStream<S, C, M> {
    /// Tracks `stream` as `session`, with a deadline `timeout` from now.
    pub fn new(session: Session<C, M>, stream: S, timeout: Duration) -> Self {
        TrackedStream {
            stream,
            deadline: tokio::time::sleep(timeout),
            session: Some(CancelOnDrop(session)),
        }
    }

    /// A handle on the tracked session.
    ///
    /// # Panics
    ///
    /// If called after the stream ended.
    pub fn handle(&self) -> EndHandle<C, M> {
        self.session
            .as_ref()
            .expect("TrackedStream::handle after the stream ended")
            .0
            .handle()
    }
}

impl<S, C: Counter, M> TrackedStream<S, C, M> {
    /// Moves the tracked session to `phase`; `false` once it has ended.
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() {
    /// use livecount_session::{Phase, SessionTracker};
    /// use std::time::Duration;
    ///
    /// let tracker: SessionTracker = SessionTracker::new();
    /// # struct Never;
    /// # impl futures_core::Stream for Never {
    /// #     type Item = ();
    /// #     fn poll_next(self: std::pin::Pin<&mut Self>, _: &mut std::task::Context<'_>)
    /// #         -> std::task::Poll<Option<()>> { std::task::Poll::Pending }
    /// # }
    /// let mut stream = std::pin::pin!(tracker.track_stream(Never, Duration::from_secs(5)));
    /// assert!(stream.as_mut().set_phase(Phase::Generating));
    /// assert_eq!(tracker.snapshot().generating, 1);
    /// # }
    /// ```
    pub fn set_phase(self: Pin<&mut Self>, phase: Phase) -> bool {
        match self.project().session {
            Some(guard) => guard.0.set_phase(phase),
            None => false,
        }
    }
}

impl<S: Stream, C: Counter, M> Stream for TrackedStream<S, C, M> {
    type Item = S::Item;

    fn poll_next(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<S::Item>> {
        let this = self.project();
        let Some(session) = this.session.as_ref() else {
            return Poll::Ready(None);
        };
        if session.0.reason().is_some() {
            // Ended elsewhere (a disconnect, the reaper, a shutdown): stop here.
            *this.session = None;
            return Poll::Ready(None);
        }
        // The deadline first, so a stream that is always ready cannot outrun it.
        if this.deadline.poll(cx).is_ready() {
            finish(this.session, EndReason::TimedOut);
            return Poll::Ready(None);
        }
        match this.stream.poll_next(cx) {
            Poll::Ready(Some(item)) => {
                session.0.touch();
                Poll::Ready(Some(item))
            }
            Poll::Ready(None) => {
                finish(this.session, EndReason::Completed);
                Poll::Ready(None)
            }
            Poll::Pending => Poll::Pending,
        }
    }
}

/// Ends the tracked session for `reason` and lets it go.
fn finish<C: Counter, M>(session: &mut Option<CancelOnDrop<C, M>>, reason: EndReason) {
    if let Some(guard) = session.take() {
        guard.0.end(reason); // the guard's drop then finds it ended and does nothing
    }
}

impl<C: Counter, M: Send + Sync + 'static> SessionTracker<C, M> {
    /// Starts a session and runs `future` as it, with a deadline `timeout` from now: see
    /// [`Tracked`].
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread", start_paused = true)]
    /// # async fn main() {
    /// use livecount_session::{EndReason, SessionTracker, TimedOut};
    /// use std::time::Duration;
    ///
    /// let tracker: SessionTracker = SessionTracker::new();
    /// let slow = tokio::time::sleep(Duration::from_secs(60));
    /// assert_eq!(tracker.track(slow, Duration::from_secs(1)).await, Err(TimedOut));
    /// assert_eq!(tracker.snapshot().ended_by(EndReason::TimedOut), 1);
    /// # }
    /// ```
    pub fn track<F: Future>(&self, future: F, timeout: Duration) -> Tracked<F, C, M> {
        Tracked::new(self.start(), future, timeout)
    }

    /// Starts a session and runs `stream` as it, with a deadline `timeout` from now: see
    /// [`TrackedStream`].
    pub fn track_stream<S: Stream>(&self, stream: S, timeout: Duration) -> TrackedStream<S, C, M> {
        TrackedStream::new(self.start(), stream, timeout)
    }
}

impl<C: Counter + 'static, M: Clone + Send + Sync + 'static> SessionTracker<C, M> {
    /// Spawns a task that calls [`reap`](SessionTracker::reap) every `every`, ending sessions
    /// idle longer than `idle_longer_than`. Time is tokio's clock, so a paused test runtime
    /// reaps by virtual time. Abort the returned handle to stop it.
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread", start_paused = true)]
    /// # async fn main() {
    /// use livecount_session::SessionTracker;
    /// use std::time::Duration;
    ///
    /// let tracker: SessionTracker = SessionTracker::new();
    /// let reaper = tracker.spawn_reaper(Duration::from_secs(10), Duration::from_secs(60));
    /// std::mem::forget(tracker.start()); // leaked guard
    /// tokio::time::sleep(Duration::from_secs(75)).await;
    /// assert_eq!(tracker.active(), 0);
    /// reaper.abort();
    /// # }
    /// ```
    pub fn spawn_reaper(&self, every: Duration, idle_longer_than: Duration) -> JoinHandle<()> {
        let tracker = self.clone();
        tokio::spawn(async move {
            let mut ticks = tokio::time::interval(every);
            loop {
                ticks.tick().await;
                tracker.reap_at(tokio::time::Instant::now().into_std(), idle_longer_than);
            }
        })
    }
}

impl<C: Counter + 'static, M: Send + Sync + 'static> Reporter<C, M> {
    /// Spawns a task that samples every [`interval`](Reporter::interval), stamping snapshots
    /// with tokio's clock. Abort the returned handle to stop it.
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread", start_paused = true)]
    /// # async fn main() {
    /// use livecount_session::{Reporter, SessionTracker};
    /// use std::sync::Arc;
    /// use std::time::Duration;
    ///
    /// let reporter = Arc::new(Reporter::new(SessionTracker::<livecount::Sharded>::new()));
    /// let task = Arc::clone(&reporter).spawn();
    /// tokio::time::sleep(Duration::from_secs(25)).await; // samples at 0 s, 10 s, 20 s
    /// let report = reporter.latest().unwrap();
    /// assert_eq!(report.window.unwrap().length, Duration::from_secs(10));
    /// task.abort();
    /// # }
    /// ```
    pub fn spawn(self: Arc<Self>) -> JoinHandle<()> {
        tokio::spawn(async move {
            let mut ticks = tokio::time::interval(self.interval());
            loop {
                ticks.tick().await;
                self.sample_at(tokio::time::Instant::now().into_std());
            }
        })
    }
}
