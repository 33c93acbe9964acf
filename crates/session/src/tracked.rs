//! tokio integration: [`Tracked`] futures and [`TrackedStream`]s with a deadline (and an
//! idle limit), held by the tracker's one sweeper like every other [`Limits`], and reaping
//! by the same sweeper.

use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Duration;

use futures_core::Stream;
use livecount::Counter;
use pin_project_lite::pin_project;

use crate::limits::{EndCause, Limits};
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

    /// What a recorded end with `reason` was, seen from the stream: one of its own limits
    /// (the sweeper ended it for the stream's deadline or idle limit) or an end from
    /// elsewhere.
    fn of<C: Counter, M>(session: &Session<C, M>, reason: EndReason) -> StreamEnd {
        match session.ended_by() {
            Some(EndCause::MaxSession) => StreamEnd::Deadline,
            Some(EndCause::Idle) => StreamEnd::Idle,
            _ => StreamEnd::Elsewhere(reason),
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
        session: CancelOnDrop<C, M>,
        done: bool,
    }
}

impl<F: Future, C: Counter + 'static, M: Send + Sync + 'static> Tracked<F, C, M> {
    /// Tracks `future` as `session`, with a deadline `timeout` from now, held by the
    /// tracker's sweeper (see [`Limits`]: the end comes at the deadline or up to two sweeper
    /// periods later, never earlier).
    ///
    /// # Panics
    ///
    /// Outside a tokio runtime (nothing would hold the deadline), or when every handle of
    /// the session's tracker is gone.
    pub fn new(session: Session<C, M>, future: F, timeout: Duration) -> Self {
        hold(
            &session,
            Limits {
                max_session: Some(timeout),
                ..Limits::default()
            },
        );
        Tracked {
            future,
            session: CancelOnDrop(session),
            done: false,
        }
    }
}

/// Holds a tracked session to `limits`, or panics: a deadline nothing holds is a bug to
/// see at once, not a session that never times out.
fn hold<C: Counter + 'static, M: Send + Sync + 'static>(session: &Session<C, M>, limits: Limits) {
    assert!(
        session.hold_to(limits),
        "a tracked session needs a tokio runtime and a live tracker: nothing would hold its limits"
    );
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
        // The limits the session is held to (the sweeper's, re-armed by `idle_timeout`).
        limits: Limits,
        session: CancelOnDrop<C, M>,
        // `Some` once the stream has yielded its `None`.
        stopped: Option<StreamEnd>,
    }
}

impl<S: Stream, C: Counter + 'static, M: Send + Sync + 'static> TrackedStream<S, C, M> {
    /// Tracks `stream` as `session`, with a deadline `timeout` from now, held by the
    /// tracker's sweeper (see [`Limits`]: the end comes at the deadline or up to two sweeper
    /// periods later, never earlier).
    ///
    /// # Panics
    ///
    /// As [`Tracked::new`]: outside a tokio runtime, or when every handle of the session's
    /// tracker is gone.
    pub fn new(session: Session<C, M>, stream: S, timeout: Duration) -> Self {
        let limits = Limits {
            max_session: Some(timeout),
            ..Limits::default()
        };
        hold(&session, limits);
        TrackedStream {
            stream,
            limits,
            session: CancelOnDrop(session),
            stopped: None,
        }
    }

    /// Ends the session [`Disconnected`](EndReason::Disconnected) and the stream when no
    /// item has come for `limit` (counted from this call, then from each item): the client
    /// missed its heartbeat. [`Reaped`](EndReason::Reaped) stays the reaper's, for sessions
    /// nothing tracks. A deadline due no later than the idle limit wins: `TimedOut`.
    ///
    /// Cheap per item: a relaxed add on the session's own slot, no clock read, no timer.
    /// The tracker's sweeper sees the silence (at the limit or up to two sweeper periods
    /// later); a zero `limit` ends the stream at the sweeper's next look.
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
        self.limits.idle = Some(limit);
        hold(&self.session.0, self.limits);
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
            // Ended: by the sweeper for one of the stream's limits, or elsewhere (a
            // disconnect, the reaper, a shutdown). Stop here.
            *this.stopped = Some(StreamEnd::of(session, reason));
            return Poll::Ready(None);
        }
        match this.stream.poll_next(cx) {
            Poll::Ready(Some(item)) => {
                session.touch();
                session.note_frame();
                Poll::Ready(Some(item))
            }
            Poll::Ready(None) => {
                *this.stopped = Some(StreamEnd::ended(session, StreamEnd::Finished));
                Poll::Ready(None)
            }
            // Register for the end last: an end from now on wakes this task.
            Poll::Pending => match session.poll_ended(cx) {
                Poll::Ready(reason) => {
                    *this.stopped = Some(StreamEnd::of(session, reason));
                    Poll::Ready(None)
                }
                Poll::Pending => Poll::Pending,
            },
        }
    }
}

impl<C: Counter + 'static, M: Send + Sync + 'static> SessionTracker<C, M> {
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

impl<C, M> SessionTracker<C, M>
where
    C: Counter + Send + Sync + 'static,
    M: Send + Sync + 'static,
{
    /// Reaps ghosts: from now on the tracker's sweeper (the one task that holds sessions to
    /// their [`Limits`](crate::Limits), spawned on the current runtime if none runs) ends
    /// every session untouched for longer than `idle` ([`touch`](crate::Session::touch),
    /// a phase change or its start) with [`EndReason::Reaped`], as [`reap`](Self::reap)
    /// would; `None` stops reaping. Time is tokio's clock, so a paused test runtime reaps by
    /// virtual time; a ghost is reaped after `idle` and at most two sweeper periods (a
    /// quarter of the shortest limit, between 10 ms and 1 s) more.
    ///
    /// Each reaped session's tracked future or stream is woken and ends at once (see
    /// [`TrackedStream`]). Returns `false`, reaping nothing, outside a tokio runtime.
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread", start_paused = true)]
    /// # async fn main() {
    /// use livecount_session::SessionTracker;
    /// use std::time::Duration;
    ///
    /// let tracker = SessionTracker::new();
    /// assert!(tracker.reap_after(Duration::from_secs(60)));
    /// std::mem::forget(tracker.start()); // leaked guard
    /// tokio::time::sleep(Duration::from_secs(59)).await;
    /// assert_eq!(tracker.active(), 1);
    /// tokio::time::sleep(Duration::from_secs(3)).await;
    /// assert_eq!(tracker.active(), 0);
    /// # }
    /// ```
    pub fn reap_after(&self, idle: impl Into<Option<Duration>>) -> bool {
        if tokio::runtime::Handle::try_current().is_err() {
            return false;
        }
        self.sweeper().reap_after(idle.into());
        crate::sweeper::ensure(self)
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
