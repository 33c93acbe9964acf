//! tokio integration: [`Tracked`] futures and [`TrackedStream`]s with a deadline, and a
//! background reaper.

use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Duration;

use futures_core::Stream;
use livecount::Counter;
use pin_project_lite::pin_project;
use tokio::task::JoinHandle;
use tokio::time::{Instant, Sleep};

use crate::phase::Phase;
use crate::reason::EndReason;
use crate::session::{EndHandle, Session};
use crate::tracker::SessionTracker;

/// The error of a [`Tracked`] future whose session ended before the future finished: its
/// deadline passed ([`EndReason::TimedOut`]) or something else ended it (an [`EndHandle`],
/// [`SessionTracker::end`] / [`end_all`](SessionTracker::end_all), the reaper). `reason` is
/// the reason the session recorded, whoever won.
///
/// ```
/// use livecount_session::{EndReason, EndedEarly};
///
/// let e = EndedEarly { reason: EndReason::TimedOut };
/// assert!(e.is_timeout());
/// assert_eq!(e.to_string(), "session ended (timed_out) before the future finished");
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct EndedEarly {
    /// Why the session ended.
    pub reason: EndReason,
}

impl EndedEarly {
    /// Whether the deadline ended it.
    pub fn is_timeout(&self) -> bool {
        self.reason == EndReason::TimedOut
    }
}

impl fmt::Display for EndedEarly {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "session ended ({}) before the future finished",
            self.reason
        )
    }
}

impl std::error::Error for EndedEarly {}

/// Why a [`TrackedStream`] stopped: one of its own limits, its source's end, or an end
/// from somewhere else. Read it with [`TrackedStream::stopped`] after the stream yielded
/// `None`, to answer the client for what actually happened: the stream's own deadline is
/// "session too long", its idle limit a missed heartbeat, and an end from elsewhere (a
/// transport's cancel or its own deadline, a shutdown's `end_all`, the reaper) is whatever
/// that end recorded.
///
/// Only the end that won counts: when the deadline fires just after a handle ended the
/// session, the stream reports [`Elsewhere`](StreamEnd::Elsewhere) with the handle's reason.
///
/// ```
/// # #[tokio::main(flavor = "current_thread", start_paused = true)]
/// # async fn main() {
/// use livecount_session::{EndReason, SessionTracker, StreamEnd};
/// use std::time::Duration;
///
/// # struct Never;
/// # impl futures_core::Stream for Never {
/// #     type Item = ();
/// #     fn poll_next(self: std::pin::Pin<&mut Self>, _: &mut std::task::Context<'_>)
/// #         -> std::task::Poll<Option<()>> { std::task::Poll::Pending }
/// # }
/// let tracker = SessionTracker::new();
/// let stream = tracker.track_stream(Never, Duration::from_secs(60));
/// let handle = stream.handle();
/// let mut stream = std::pin::pin!(stream);
/// assert_eq!(stream.stopped(), None); // still running
/// handle.end(EndReason::Cancelled); // the transport saw a reset
/// use futures_core::Stream as _;
/// assert_eq!(std::future::poll_fn(|cx| stream.as_mut().poll_next(cx)).await, None);
/// assert_eq!(stream.stopped(), Some(StreamEnd::Elsewhere(EndReason::Cancelled)));
/// # }
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum StreamEnd {
    /// The source ended, and so did the session: [`Completed`](EndReason::Completed).
    Finished,
    /// The stream's deadline passed: it ended the session
    /// [`TimedOut`](EndReason::TimedOut).
    Deadline,
    /// The source was silent for the [`idle_timeout`](TrackedStream::idle_timeout): the
    /// stream ended the session [`Disconnected`](EndReason::Disconnected).
    Idle,
    /// The session was ended by something other than the stream (an [`EndHandle`], the
    /// tracker, the reaper), with this reason, before the stream's own end could land.
    Elsewhere(EndReason),
}

impl StreamEnd {
    /// The reason the session recorded.
    ///
    /// ```
    /// use livecount_session::{EndReason, StreamEnd};
    ///
    /// assert_eq!(StreamEnd::Idle.reason(), EndReason::Disconnected);
    /// assert_eq!(StreamEnd::Elsewhere(EndReason::Shutdown).reason(), EndReason::Shutdown);
    /// ```
    pub fn reason(self) -> EndReason {
        match self {
            StreamEnd::Finished => EndReason::Completed,
            StreamEnd::Deadline => EndReason::TimedOut,
            StreamEnd::Idle => EndReason::Disconnected,
            StreamEnd::Elsewhere(reason) => reason,
        }
    }

    /// What the stream recorded by ending the session for `own` itself: `own` if that end
    /// landed, else the reason that was there first.
    fn ended<C: Counter, M>(session: &Session<C, M>, own: StreamEnd) -> StreamEnd {
        if session.end(own.reason()) {
            own
        } else {
            // `end` refused: some reason is recorded, and it stays.
            StreamEnd::Elsewhere(session.reason().unwrap_or(own.reason()))
        }
    }
}

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
    /// finishes (resolving to `Ok(output)`), [`TimedOut`](EndReason::TimedOut) when the
    /// deadline passes first, and [`Cancelled`](EndReason::Cancelled) when dropped unfinished
    /// (including `JoinHandle::abort`).
    ///
    /// An end from anywhere else (an [`EndHandle`], [`SessionTracker::end`] /
    /// [`end_all`](SessionTracker::end_all), the reaper) wakes it, and at that poll it stops
    /// polling the inner future and resolves to `Err(EndedEarly { reason })` with the
    /// recorded reason, so the task (and whatever the future holds, once the `Tracked` is
    /// dropped, which `.await` and a spawned task's completion do at once) goes away with the
    /// count. A deadline ends it the same way: `Err(EndedEarly { reason: TimedOut })`.
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() {
    /// use livecount_session::{EndReason, SessionTracker, Tracked};
    /// use std::time::Duration;
    ///
    /// let tracker = SessionTracker::new();
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
        session: CancelOnDrop<C, M>,
        done: bool,
    }
}

impl<F: Future, C: Counter, M> Tracked<F, C, M> {
    /// Tracks `future` as `session`, with a deadline `timeout` from now.
    pub fn new(session: Session<C, M>, future: F, timeout: Duration) -> Self {
        Tracked {
            future,
            deadline: tokio::time::sleep(timeout),
            session: CancelOnDrop(session),
            done: false,
        }
    }
}

impl<F, C: Counter, M> Tracked<F, C, M> {
    /// A handle on the tracked session (for a disconnect detector, say). Valid at any time:
    /// after the end it is a handle on an ended session (`is_ended()`, its `reason()`).
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() {
    /// # use livecount_session::{EndReason, SessionTracker};
    /// # use std::time::Duration;
    /// let tracker = SessionTracker::new();
    /// let mut tracked = std::pin::pin!(tracker.track(async {}, Duration::from_secs(5)));
    /// tracked.as_mut().await.unwrap();
    /// assert_eq!(tracked.handle().reason(), Some(EndReason::Completed));
    /// # }
    /// ```
    pub fn handle(&self) -> EndHandle<C, M> {
        self.session.0.handle()
    }
}

impl<F: Future, C: Counter, M> Future for Tracked<F, C, M> {
    type Output = Result<F::Output, EndedEarly>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let this = self.project();
        assert!(!*this.done, "Tracked polled after completion");
        let session = &this.session.0;
        if let Some(reason) = session.reason() {
            // Ended elsewhere: stop here, without polling the future again.
            *this.done = true;
            return Poll::Ready(Err(EndedEarly { reason }));
        }
        if let Poll::Ready(output) = this.future.poll(cx) {
            *this.done = true;
            session.end(EndReason::Completed); // `false` if an end raced in: the work is done
            return Poll::Ready(Ok(output));
        }
        if this.deadline.poll(cx).is_ready() {
            *this.done = true;
            return Poll::Ready(Err(EndedEarly {
                reason: end_for(session, EndReason::TimedOut),
            }));
        }
        // Register for the end last: an end from now on wakes this task.
        match session.poll_ended(cx) {
            Poll::Ready(reason) => {
                *this.done = true;
                Poll::Ready(Err(EndedEarly { reason }))
            }
            Poll::Pending => Poll::Pending,
        }
    }
}

pin_project! {
    /// A stream run as a session: every item records activity (`touch`), the end of the
    /// stream ends the session [`Completed`](EndReason::Completed), the deadline passing ends
    /// it [`TimedOut`](EndReason::TimedOut) and the stream, and dropping it unfinished ends it
    /// [`Cancelled`](EndReason::Cancelled). With an
    /// [`idle_timeout`](TrackedStream::idle_timeout), a source silent for that long ends it
    /// [`Disconnected`](EndReason::Disconnected) (a missed heartbeat) and the stream too.
    ///
    /// An end from anywhere else (an [`EndHandle`], [`SessionTracker::end`] /
    /// [`end_all`](SessionTracker::end_all), the reaper) wakes the task polling it, and the
    /// stream yields `None` at that poll without polling its source again, even if the source
    /// never yields.
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() {
    /// use livecount_session::{EndReason, SessionTracker, TrackedStream};
    /// use std::time::Duration;
    ///
    /// let tracker = SessionTracker::new();
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
        // One timer for both limits: armed at the deadline or the idle limit, whichever
        // comes first, and re-armed only when it fires early for an idle limit that items
        // have pushed back since.
        #[pin]
        timer: Sleep,
        deadline: Instant,
        idle: Option<Idle>,
        session: CancelOnDrop<C, M>,
        // `Some` once the stream has yielded its `None`.
        stopped: Option<StreamEnd>,
    }
}

/// The idle timeout of a [`TrackedStream`]: its limit, and when the last item came.
#[derive(Clone, Copy, Debug)]
struct Idle {
    limit: Duration,
    last_item: Instant,
}

impl Idle {
    /// When the stream has been silent for the limit, unless another item comes.
    fn due(&self) -> Instant {
        after(self.last_item, self.limit)
    }
}

/// `from + d`, saturating at about 30 years on (as tokio's own `sleep` does) instead of
/// overflowing.
fn after(from: Instant, d: Duration) -> Instant {
    const FAR: Duration = Duration::from_secs(30 * 365 * 24 * 3600);
    from.checked_add(d).unwrap_or(from + FAR)
}

impl<S: Stream, C: Counter, M> TrackedStream<S, C, M> {
    /// Tracks `stream` as `session`, with a deadline `timeout` from now.
    pub fn new(session: Session<C, M>, stream: S, timeout: Duration) -> Self {
        let deadline = after(Instant::now(), timeout);
        TrackedStream {
            stream,
            timer: tokio::time::sleep_until(deadline),
            deadline,
            idle: None,
            session: CancelOnDrop(session),
            stopped: None,
        }
    }

    /// Ends the session [`Disconnected`](EndReason::Disconnected) and the stream when no
    /// item has come for `limit` (counted from this call, then from each item): the client
    /// missed its heartbeat. [`Reaped`](EndReason::Reaped) stays the reaper's, for sessions
    /// nothing tracks. A deadline due no later than the idle limit wins: `TimedOut`.
    ///
    /// Cheap per item: one read of tokio's clock, no timer reset. The one timer is re-armed
    /// only when the idle limit it was armed for comes and items have pushed it back, at
    /// most once per `limit`. A zero `limit` ends the stream at its first poll.
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread", start_paused = true)]
    /// # async fn main() {
    /// use livecount_session::{EndReason, SessionTracker};
    /// use std::time::Duration;
    ///
    /// # struct Never;
    /// # impl futures_core::Stream for Never {
    /// #     type Item = ();
    /// #     fn poll_next(self: std::pin::Pin<&mut Self>, _: &mut std::task::Context<'_>)
    /// #         -> std::task::Poll<Option<()>> { std::task::Poll::Pending }
    /// # }
    /// let tracker = SessionTracker::new();
    /// let stream = tracker
    ///     .track_stream(Never, Duration::from_secs(3600))
    ///     .idle_timeout(Duration::from_secs(30));
    /// let handle = stream.handle();
    /// let mut stream = std::pin::pin!(stream);
    /// use futures_core::Stream as _;
    /// let next = std::future::poll_fn(|cx| stream.as_mut().poll_next(cx));
    /// assert_eq!(next.await, None); // after 30 s of (virtual) silence
    /// assert_eq!(handle.reason(), Some(EndReason::Disconnected));
    /// # }
    /// ```
    pub fn idle_timeout(mut self, limit: Duration) -> Self {
        let idle = Idle {
            limit,
            last_item: Instant::now(),
        };
        // Not polled yet, so neither timer was ever registered: replacing it costs nothing.
        self.timer = tokio::time::sleep_until(idle.due().min(self.deadline));
        self.idle = Some(idle);
        self
    }
}

impl<S, C: Counter, M> TrackedStream<S, C, M> {
    /// A handle on the tracked session. Valid at any time: after the stream ended it is a
    /// handle on an ended session (`is_ended()`, its `reason()`).
    pub fn handle(&self) -> EndHandle<C, M> {
        self.session.0.handle()
    }

    /// Moves the tracked session to `phase`; `false` once it has ended.
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() {
    /// use livecount_session::{Phase, SessionTracker};
    /// use std::time::Duration;
    ///
    /// let tracker = SessionTracker::new();
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
        self.project().session.0.set_phase(phase)
    }

    /// Why the stream stopped, once it has yielded `None`; `None` while it runs (see
    /// [`StreamEnd`]).
    pub fn stopped(&self) -> Option<StreamEnd> {
        self.stopped
    }
}

impl<S: Stream, C: Counter, M> Stream for TrackedStream<S, C, M> {
    type Item = S::Item;

    fn poll_next(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<S::Item>> {
        let this = self.project();
        if this.stopped.is_some() {
            return Poll::Ready(None);
        }
        let session = &this.session.0;
        if let Some(reason) = session.reason() {
            // Ended elsewhere (a disconnect, the reaper, a shutdown): stop here.
            *this.stopped = Some(StreamEnd::Elsewhere(reason));
            return Poll::Ready(None);
        }
        // The timer first, so a stream that is always ready cannot outrun it.
        if let Some(own) = expired(this.timer, *this.deadline, this.idle.as_ref(), cx) {
            *this.stopped = Some(StreamEnd::ended(session, own));
            return Poll::Ready(None);
        }
        match this.stream.poll_next(cx) {
            Poll::Ready(Some(item)) => {
                session.touch();
                if let Some(idle) = this.idle {
                    idle.last_item = Instant::now();
                }
                Poll::Ready(Some(item))
            }
            Poll::Ready(None) => {
                *this.stopped = Some(StreamEnd::ended(session, StreamEnd::Finished));
                Poll::Ready(None)
            }
            // Register for the end last: an end from now on wakes this task.
            Poll::Pending => match session.poll_ended(cx) {
                Poll::Ready(reason) => {
                    *this.stopped = Some(StreamEnd::Elsewhere(reason));
                    Poll::Ready(None)
                }
                Poll::Pending => Poll::Pending,
            },
        }
    }
}

/// Polls a [`TrackedStream`]'s timer: which limit came, the deadline (`TimedOut`) or the
/// idle limit (`Disconnected`), else `None` with the timer registered for the earlier of
/// the two.
///
/// The timer fired at the instant it was armed for. That is the deadline, or an idle limit:
/// still the limit if no item came since it was armed, else pushed back by the items, and
/// then the timer is re-armed for the new limit (a later instant, so this loop ends).
fn expired(
    mut timer: Pin<&mut Sleep>,
    deadline: Instant,
    idle: Option<&Idle>,
    cx: &mut Context<'_>,
) -> Option<StreamEnd> {
    while timer.as_mut().poll(cx).is_ready() {
        let fired_at = timer.deadline();
        let Some(idle) = idle.filter(|_| fired_at < deadline) else {
            return Some(StreamEnd::Deadline);
        };
        let due = idle.due();
        if due <= fired_at {
            return Some(StreamEnd::Idle);
        }
        timer.as_mut().reset(due.min(deadline));
    }
    None
}

/// Ends `session` for `reason` and returns the reason it recorded (another, if an end raced
/// in first).
fn end_for<C: Counter, M>(session: &Session<C, M>, reason: EndReason) -> EndReason {
    session.end(reason);
    session.reason().unwrap_or(reason)
}

impl<C: Counter, M: Send + Sync + 'static> SessionTracker<C, M> {
    /// Starts a session and runs `future` as it, with a deadline `timeout` from now: see
    /// [`Tracked`].
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread", start_paused = true)]
    /// # async fn main() {
    /// use livecount_session::{EndReason, EndedEarly, SessionTracker};
    /// use std::time::Duration;
    ///
    /// let tracker = SessionTracker::new();
    /// let slow = tokio::time::sleep(Duration::from_secs(60));
    /// let ended = tracker.track(slow, Duration::from_secs(1)).await.unwrap_err();
    /// assert_eq!(ended, EndedEarly { reason: EndReason::TimedOut });
    /// assert_eq!(tracker.snapshot().ended_by(EndReason::TimedOut), 1);
    /// # }
    /// ```
    ///
    /// # Panics
    ///
    /// As [`start`](SessionTracker::start) does.
    pub fn track<F: Future>(&self, future: F, timeout: Duration) -> Tracked<F, C, M> {
        Tracked::new(self.start(), future, timeout)
    }

    /// [`track`](SessionTracker::track) with the session carrying `metadata` (returned by the
    /// registry walks, like [`start_with`](SessionTracker::start_with)'s).
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() {
    /// use livecount_session::SessionTracker;
    /// use std::time::Duration;
    ///
    /// let tracker = SessionTracker::<livecount::PerThread, &str>::default();
    /// let tracked = tracker.track_with("tenant-7", async { 1 }, Duration::from_secs(5));
    /// assert_eq!(tracker.sessions()[0].metadata, Some("tenant-7"));
    /// assert_eq!(tracked.await, Ok(1));
    /// # }
    /// ```
    ///
    /// # Panics
    ///
    /// As [`start`](SessionTracker::start) does.
    pub fn track_with<F: Future>(
        &self,
        metadata: M,
        future: F,
        timeout: Duration,
    ) -> Tracked<F, C, M> {
        Tracked::new(self.start_with(metadata), future, timeout)
    }

    /// Starts a session and runs `stream` as it, with a deadline `timeout` from now: see
    /// [`TrackedStream`].
    ///
    /// # Panics
    ///
    /// As [`start`](SessionTracker::start) does.
    pub fn track_stream<S: Stream>(&self, stream: S, timeout: Duration) -> TrackedStream<S, C, M> {
        TrackedStream::new(self.start(), stream, timeout)
    }

    /// [`track_stream`](SessionTracker::track_stream) with the session carrying `metadata`.
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() {
    /// use livecount_session::SessionTracker;
    /// use std::time::Duration;
    ///
    /// # struct Never;
    /// # impl futures_core::Stream for Never {
    /// #     type Item = ();
    /// #     fn poll_next(self: std::pin::Pin<&mut Self>, _: &mut std::task::Context<'_>)
    /// #         -> std::task::Poll<Option<()>> { std::task::Poll::Pending }
    /// # }
    /// let tracker = SessionTracker::<livecount::PerThread, String>::default();
    /// let peer = "10.0.0.7:5100".to_owned();
    /// let stream = tracker.track_stream_with(peer, Never, Duration::from_secs(5));
    /// assert_eq!(stream.handle().id(), tracker.sessions()[0].id);
    /// assert_eq!(tracker.sessions()[0].metadata.as_deref(), Some("10.0.0.7:5100"));
    /// # }
    /// ```
    ///
    /// # Panics
    ///
    /// As [`start`](SessionTracker::start) does.
    pub fn track_stream_with<S: Stream>(
        &self,
        metadata: M,
        stream: S,
        timeout: Duration,
    ) -> TrackedStream<S, C, M> {
        TrackedStream::new(self.start_with(metadata), stream, timeout)
    }
}

impl<C: Counter + 'static, M: Clone + Send + Sync + 'static> SessionTracker<C, M> {
    /// Spawns a task that calls [`reap`](SessionTracker::reap) every `every`, ending sessions
    /// idle longer than `idle_longer_than`. Time is tokio's clock, so a paused test runtime
    /// reaps by virtual time. Abort the returned handle to stop it.
    ///
    /// Each reaped session's tracked future or stream is woken and ends at once (see
    /// [`TrackedStream`]).
    ///
    /// # Panics
    ///
    /// At the call (not inside the task) if `every` is zero, and, as `tokio::spawn` does,
    /// outside a tokio runtime.
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread", start_paused = true)]
    /// # async fn main() {
    /// use livecount_session::SessionTracker;
    /// use std::time::Duration;
    ///
    /// let tracker = SessionTracker::new();
    /// let reaper = tracker.spawn_reaper(Duration::from_secs(10), Duration::from_secs(60));
    /// std::mem::forget(tracker.start()); // leaked guard
    /// tokio::time::sleep(Duration::from_secs(75)).await;
    /// assert_eq!(tracker.active(), 0);
    /// reaper.abort();
    /// # }
    /// ```
    pub fn spawn_reaper(&self, every: Duration, idle_longer_than: Duration) -> JoinHandle<()> {
        assert!(
            !every.is_zero(),
            "spawn_reaper: the reaping period `every` must be non-zero"
        );
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

#[cfg(test)]
mod tests {
    use super::*;

    /// The stream's own end loses to one already recorded (a handle's end that raced in
    /// between the stream's check and its end): it reports that one.
    #[test]
    fn an_own_end_that_loses_the_race_reports_the_winner() {
        let tracker: SessionTracker = SessionTracker::new();
        let session = tracker.start();
        assert_eq!(StreamEnd::ended(&session, StreamEnd::Idle), StreamEnd::Idle);
        let session = tracker.start();
        session.handle().end(EndReason::Cancelled);
        for own in [StreamEnd::Finished, StreamEnd::Deadline, StreamEnd::Idle] {
            assert_eq!(
                StreamEnd::ended(&session, own),
                StreamEnd::Elsewhere(EndReason::Cancelled)
            );
        }
        assert_eq!(session.reason(), Some(EndReason::Cancelled));
    }
}
