//! [`SessionBody`]: a response body that holds its request's session until the body ends.

use std::fmt;
use std::pin::Pin;
use std::task::{Context, Poll, ready};
use std::time::Duration;

use http::{HeaderMap, StatusCode};
use http_body::{Body, Frame, SizeHint};
use livecount::{Counter, PerThread};
use livecount_session::{EndReason, Session};
use pin_project_lite::pin_project;

use crate::limits::Limit;
use crate::traffic::Traffic;

pin_project! {
    /// The response body [`SessionService`](crate::SessionService) returns: the inner body,
    /// holding the request's session until the body ends.
    ///
    /// * the body reaches its end (a `None` frame, or [`Body::is_end_stream`] turns true) →
    ///   the response's *outcome*: [`Completed`](EndReason::Completed), or
    ///   [`Failed`](EndReason::Failed) for a 5xx status or a gRPC error status (see
    ///   [`SessionLayer`](crate::SessionLayer));
    /// * the body yields an error → [`Failed`](EndReason::Failed);
    /// * the body is dropped before its end (the client went away, the stream was
    ///   cancelled) → [`Cancelled`](EndReason::Cancelled), unless the outcome was already a
    ///   failure (a 5xx that the client did not read to the end is still a failure);
    /// * a [limit](crate::StreamLimits) ended the session → the inner body is dropped and the
    ///   body ends: with trailers carrying the limit's `grpc-status` for a gRPC response,
    ///   at once for any other.
    ///
    /// A body of a request the layer's predicate did not count holds no session and passes
    /// everything through.
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() {
    /// use http_body_util::{BodyExt, Full};
    /// use livecount_session::{EndReason, SessionTracker};
    /// use livecount_tower::body::SessionBody;
    ///
    /// let tracker: SessionTracker = SessionTracker::new();
    /// let body = SessionBody::new(Full::new(bytes::Bytes::from("hi")), Some(tracker.start()));
    /// assert_eq!(tracker.active(), 1);
    /// let bytes = body.collect().await.unwrap().to_bytes(); // reads it to the end
    /// assert_eq!(bytes, "hi");
    /// let s = tracker.snapshot();
    /// assert_eq!((s.active, s.ended_by(EndReason::Completed)), (0, 1));
    /// # }
    /// ```
    pub struct SessionBody<B, C: Counter = PerThread, M = ()> {
        // `None` once a limit cut the body, or for an answer the layer made itself.
        #[pin]
        inner: Option<B>,
        session: Option<Session<C, M>>,
        traffic: Option<Traffic<C, M>>,
        outcome: EndReason,
        // Whether the response is gRPC: a cut ends with the limit's status in trailers.
        grpc: bool,
        // How a drop before the end leaves the session to the service for a while.
        deferred: Option<Deferred<C, M>>,
    }

    impl<B, C: Counter, M> PinnedDrop for SessionBody<B, C, M> {
        fn drop(this: Pin<&mut Self>) {
            let this = this.project();
            if let Some(session) = this.session.take() {
                // Before its end (at its end, `poll_frame` or `is_end_stream` ended it already).
                match (*this.outcome, this.deferred.take()) {
                    (EndReason::Completed, Some(deferred)) => (deferred.end)(session, deferred.grace),
                    (EndReason::Completed, None) => {
                        session.end(EndReason::Cancelled);
                    }
                    (failure, _) => {
                        session.end(failure);
                    }
                }
            }
        }
    }
}

/// A dropped response's session left to the service for `grace` (it holds the request's
/// `EndHandle` and may know better than "cancelled": a lost connection), then ended
/// `Cancelled` by `end`, a function made where the session's types are known to be `Send`.
pub(crate) struct Deferred<C: Counter, M> {
    pub(crate) grace: Duration,
    pub(crate) end: fn(Session<C, M>, Duration),
}

impl<C: Counter, M> Clone for Deferred<C, M> {
    fn clone(&self) -> Self {
        *self
    }
}

impl<C: Counter, M> Copy for Deferred<C, M> {}

impl<C: Counter, M> fmt::Debug for Deferred<C, M> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Deferred")
            .field("grace", &self.grace)
            .finish()
    }
}

/// Ends `session` `Cancelled` after `grace`, unless something ended it first (on a task of
/// the current runtime; at once outside one).
pub(crate) fn end_after<C: Counter + 'static, M: Send + Sync + 'static>(
    session: Session<C, M>,
    grace: Duration,
) {
    match tokio::runtime::Handle::try_current() {
        Ok(runtime) => {
            runtime.spawn(async move {
                tokio::time::sleep(grace).await;
                session.end(EndReason::Cancelled);
            });
        }
        Err(_) => {
            session.end(EndReason::Cancelled);
        }
    }
}

impl<B, C: Counter, M> SessionBody<B, C, M> {
    /// Wraps `inner`, ending `session` (if any) when the body ends as described above, with
    /// [`Completed`](EndReason::Completed) as the outcome of a normal end.
    pub fn new(inner: B, session: Option<Session<C, M>>) -> Self {
        SessionBody::with_outcome(inner, session, EndReason::Completed)
    }

    /// Wraps `inner`; a normal end ends `session` with `outcome` (a failure status).
    pub(crate) fn with_outcome(
        inner: B,
        session: Option<Session<C, M>>,
        outcome: EndReason,
    ) -> Self {
        SessionBody::limited(inner, session, None, outcome, false)
    }

    /// Wraps `inner` of a request under `traffic` (if any).
    pub(crate) fn limited(
        inner: B,
        session: Option<Session<C, M>>,
        traffic: Option<Traffic<C, M>>,
        outcome: EndReason,
        grpc: bool,
    ) -> Self {
        SessionBody {
            inner: Some(inner),
            session,
            traffic,
            outcome,
            grpc,
            deferred: None,
        }
    }

    /// The same body, leaving a drop before its end to the service as `deferred` says.
    pub(crate) fn deferring(mut self, deferred: Option<Deferred<C, M>>) -> Self {
        self.deferred = deferred;
        self
    }

    /// The body of an answer the layer made itself: empty, holding no session.
    pub(crate) fn local() -> Self {
        SessionBody {
            inner: None,
            session: None,
            traffic: None,
            outcome: EndReason::Completed,
            grpc: false,
            deferred: None,
        }
    }

    /// The session this body holds: `None` if the request was not counted or the body was
    /// polled to its end (a session ended otherwise is still held, ended).
    pub fn session(&self) -> Option<&Session<C, M>> {
        self.session.as_ref()
    }
}

/// An empty body holding no session (what the layer's own answers carry), so that a layer
/// mounted outside [`SessionLayer`](crate::SessionLayer) can make answers of this body type
/// ([`GrpcOnly`](crate::grpc::GrpcOnly)'s 415).
///
/// ```
/// use http_body::Body;
/// let body: livecount_tower::body::SessionBody<String> = Default::default();
/// assert!(body.is_end_stream() && body.session().is_none());
/// ```
impl<B, C: Counter, M> Default for SessionBody<B, C, M> {
    fn default() -> Self {
        SessionBody::local()
    }
}

/// Ends the session in `slot` (if still held) for `reason`.
fn finish<C: Counter, M>(slot: &mut Option<Session<C, M>>, reason: EndReason) {
    if let Some(session) = slot.take() {
        session.end(reason);
    }
}

/// What a body's `poll_frame` is ready with.
type Polled<B> = Option<Result<Frame<<B as Body>::Data>, <B as Body>::Error>>;

/// What a body under limits does next.
enum Step<T> {
    /// Pass on what the inner body gave.
    Inner(Poll<T>),
    /// A limit ended the session: cut the body.
    Cut(Limit),
}

impl<B: Body, C: Counter, M> SessionBody<B, C, M> {
    /// Polls the inner body of a live session under `traffic`, noting the transport's poll and
    /// checking for a limit's end first; registers for the end while the inner body waits.
    fn poll_limited(
        inner: Pin<&mut B>,
        session: &Session<C, M>,
        traffic: &Traffic<C, M>,
        cx: &mut Context<'_>,
    ) -> Step<Polled<B>> {
        traffic.polled();
        if let Some(limit) = traffic.ended_by(session.reason()) {
            return Step::Cut(limit);
        }
        match inner.poll_frame(cx) {
            Poll::Ready(frame) => {
                if let Some(Ok(_)) = frame {
                    traffic.yielded();
                }
                Step::Inner(Poll::Ready(frame))
            }
            Poll::Pending => match session.poll_ended(cx) {
                Poll::Ready(reason) => match traffic.ended_by(Some(reason)) {
                    Some(limit) => Step::Cut(limit),
                    None => Step::Inner(Poll::Pending),
                },
                Poll::Pending => Step::Inner(Poll::Pending),
            },
        }
    }
}

impl<B: Body, C: Counter, M> Body for SessionBody<B, C, M> {
    type Data = B::Data;
    type Error = B::Error;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Self::Data>, Self::Error>>> {
        let mut this = self.project();
        let Some(inner) = this.inner.as_mut().as_pin_mut() else {
            return Poll::Ready(None); // cut, or made by the layer: nothing (left) to send
        };
        let Some(session) = this.session.as_ref() else {
            return inner.poll_frame(cx); // not counted, or already ended
        };
        let step = match this.traffic.as_ref() {
            Some(traffic) => Self::poll_limited(inner, session, traffic, cx),
            None => Step::Inner(inner.poll_frame(cx)),
        };
        let frame = match step {
            Step::Inner(polled) => ready!(polled),
            Step::Cut(limit) => {
                this.session.take(); // ended by the limit
                this.inner.set(None);
                let trailers = this.grpc.then(|| limit.grpc_headers());
                return Poll::Ready(trailers.map(|t| Ok(Frame::trailers(t))));
            }
        };
        let at_end = || {
            this.inner
                .as_ref()
                .get_ref()
                .as_ref()
                .is_some_and(B::is_end_stream)
        };
        match &frame {
            Some(Ok(frame)) => {
                // Trailers are a body's last frame (hyper sends them and polls no more), even
                // from a body that does not say so in `is_end_stream`.
                let trailers = frame.trailers_ref();
                if let Some(trailers) = trailers {
                    *this.outcome = grpc_outcome(trailers).unwrap_or(*this.outcome);
                }
                if trailers.is_some() || at_end() {
                    finish(this.session, *this.outcome);
                }
            }
            Some(Err(_)) => finish(this.session, EndReason::Failed),
            None => finish(this.session, *this.outcome),
        }
        Poll::Ready(frame)
    }

    fn is_end_stream(&self) -> bool {
        let Some(inner) = &self.inner else {
            return true;
        };
        let end = inner.is_end_stream();
        if end && let Some(session) = &self.session {
            // A body that is empty from the start is never polled (hyper asks this first and
            // drops it); end here so that it counts as completed, not cancelled. `end` takes
            // `&self`; the drop later finds the session ended and changes nothing.
            session.end(self.outcome);
        }
        end
    }

    fn size_hint(&self) -> SizeHint {
        match &self.inner {
            Some(inner) => inner.size_hint(),
            None => SizeHint::with_exact(0),
        }
    }
}

impl<B: fmt::Debug, C: Counter, M> fmt::Debug for SessionBody<B, C, M> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SessionBody")
            .field("inner", &self.inner)
            .field("session", &self.session)
            .field("outcome", &self.outcome)
            .finish_non_exhaustive()
    }
}

// === outcomes ===

/// The outcome a response's head promises: `Failed` for a 5xx status or a gRPC error status
/// in the headers (a trailers-only response), else `Completed`.
pub(crate) fn head_outcome(status: StatusCode, headers: &HeaderMap) -> EndReason {
    if status.is_server_error() {
        return EndReason::Failed;
    }
    grpc_outcome(headers).unwrap_or(EndReason::Completed)
}

/// The session reason a `grpc-status` header stands for; `None` without one.
///
/// `0` (OK) is `Completed`, `1` (CANCELLED) `Cancelled`, `4` (DEADLINE_EXCEEDED) `TimedOut`;
/// every other code, and an unreadable one, is `Failed`.
pub(crate) fn grpc_outcome(headers: &HeaderMap) -> Option<EndReason> {
    let status = headers.get("grpc-status")?;
    Some(match status.as_bytes() {
        b"0" => EndReason::Completed,
        b"1" => EndReason::Cancelled,
        b"4" => EndReason::TimedOut,
        _ => EndReason::Failed,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use http::HeaderValue;

    fn grpc(code: &'static str) -> HeaderMap {
        let mut headers = HeaderMap::new();
        headers.insert("grpc-status", HeaderValue::from_static(code));
        headers
    }

    #[test]
    fn grpc_codes_map_to_reasons() {
        assert_eq!(grpc_outcome(&HeaderMap::new()), None);
        assert_eq!(grpc_outcome(&grpc("0")), Some(EndReason::Completed));
        assert_eq!(grpc_outcome(&grpc("1")), Some(EndReason::Cancelled));
        assert_eq!(grpc_outcome(&grpc("4")), Some(EndReason::TimedOut));
        assert_eq!(grpc_outcome(&grpc("13")), Some(EndReason::Failed));
        assert_eq!(grpc_outcome(&grpc("x")), Some(EndReason::Failed));
    }

    #[test]
    fn server_errors_fail_and_client_errors_complete() {
        let none = HeaderMap::new();
        assert_eq!(head_outcome(StatusCode::OK, &none), EndReason::Completed);
        assert_eq!(
            head_outcome(StatusCode::NOT_FOUND, &none),
            EndReason::Completed
        );
        assert_eq!(
            head_outcome(StatusCode::BAD_GATEWAY, &none),
            EndReason::Failed
        );
        assert_eq!(head_outcome(StatusCode::OK, &grpc("3")), EndReason::Failed);
    }
}
