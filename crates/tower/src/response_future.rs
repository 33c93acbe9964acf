//! [`ResponseFuture`]: the inner service's response future, holding the request's session.

use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};

use http::header::{CONTENT_TYPE, RETRY_AFTER};
use http::{HeaderValue, Method, Response, StatusCode};
use livecount::{Counter, PerThread};
use livecount_session::{EndReason, Session};
use pin_project_lite::pin_project;

use crate::limits::{Limit, is_grpc};
use crate::session_body::{Deferred, SessionBody, head_outcome};
use crate::traffic::Traffic;

pin_project! {
    /// The future [`SessionService`](crate::SessionService) returns. On the response it moves
    /// the session into the [`SessionBody`]; on `Err` it ends the session
    /// [`Failed`](EndReason::Failed); dropped before completing, it ends it
    /// [`Cancelled`](EndReason::Cancelled).
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() {
    /// use http::{Request, Response};
    /// use livecount_session::{EndReason, SessionTracker};
    /// use livecount_tower::SessionService;
    /// use tower::Service;
    ///
    /// let tracker: SessionTracker = SessionTracker::new();
    /// let mut service = SessionService::new(
    ///     tower::service_fn(|_: Request<()>| std::future::pending::<Result<Response<String>, ()>>()),
    ///     tracker.clone(),
    /// );
    /// let future = service.call(Request::new(())); // accepted: counted
    /// assert_eq!(tracker.active(), 1);
    /// drop(future); // the caller gave up
    /// assert_eq!(tracker.snapshot().ended_by(EndReason::Cancelled), 1);
    /// # }
    /// ```
    #[must_use = "futures do nothing unless polled; dropping this ends the session `Cancelled`"]
    pub struct ResponseFuture<F, C: Counter = PerThread, M = ()> {
        // `None`: refused at admission, the inner service never called.
        #[pin]
        inner: Option<F>,
        session: Option<Session<C, M>>,
        traffic: Option<Traffic<C, M>>,
        request: RequestKind,
        // Whether the request is gRPC: the layer's own answers are then gRPC statuses.
        grpc: bool,
        // The `Retry-After` seconds of a plain refusal.
        retry_after: u64,
        // The cap a refusal met, for its message.
        cap: Option<u64>,
        // What a refusal answers (at capacity, or draining).
        refusal: Limit,
        // Passed on to the body: how a drop before its end is left to the service.
        deferred: Option<Deferred<C, M>>,
    }

    impl<F, C: Counter, M> PinnedDrop for ResponseFuture<F, C, M> {
        fn drop(this: Pin<&mut Self>) {
            if let Some(session) = this.project().session.take() {
                session.end(EndReason::Cancelled);
            }
        }
    }
}

impl<F, C: Counter, M> ResponseFuture<F, C, M> {
    /// The future of `inner`, called for a request counted as `session` (if any) and
    /// noted on `traffic` (if any).
    pub(crate) fn new(
        inner: F,
        session: Option<Session<C, M>>,
        traffic: Option<Traffic<C, M>>,
        request: RequestKind,
        grpc: bool,
    ) -> Self {
        ResponseFuture {
            inner: Some(inner),
            session,
            traffic,
            request,
            grpc,
            retry_after: 0,
            cap: None,
            refusal: Limit::AtCapacity,
            deferred: None,
        }
    }

    /// The same future, its body leaving a drop before its end to the service as
    /// `deferred` says.
    pub(crate) fn deferring(mut self, deferred: Option<Deferred<C, M>>) -> Self {
        self.deferred = deferred;
        self
    }

    /// The layer's refusal (`limit`: at capacity, or draining): a gRPC `RESOURCE_EXHAUSTED`
    /// or `UNAVAILABLE`, or a 503 with `Retry-After: retry_after` seconds.
    pub(crate) fn refused(limit: Limit, grpc: bool, retry_after: u64, cap: Option<u64>) -> Self {
        ResponseFuture {
            inner: None,
            session: None,
            traffic: None,
            request: RequestKind::Other,
            grpc,
            retry_after,
            cap,
            refusal: limit,
            deferred: None,
        }
    }
}

/// An answer the layer makes itself, for `limit`: a trailers-only gRPC status, or the
/// limit's HTTP status (with `Retry-After` at capacity).
fn answer<B, C: Counter, M>(
    limit: Limit,
    grpc: bool,
    retry_after: u64,
    cap: Option<u64>,
) -> Response<SessionBody<B, C, M>> {
    let mut response = Response::new(SessionBody::local());
    if grpc {
        let headers = response.headers_mut();
        *headers = limit.grpc_headers();
        headers.insert(CONTENT_TYPE, HeaderValue::from_static("application/grpc"));
        if let Some(max) = cap.filter(|_| limit == Limit::AtCapacity) {
            let message = format!("at capacity: {max} sessions");
            if let Ok(message) = HeaderValue::try_from(message) {
                headers.insert("grpc-message", message);
            }
        }
    } else {
        *response.status_mut() = limit.http_status();
        if matches!(limit, Limit::AtCapacity | Limit::Draining) {
            response
                .headers_mut()
                .insert(RETRY_AFTER, retry_after.into());
        }
    }
    response
}

/// Polls `inner` for a live session under `traffic`: a limit's end first, and registered for
/// the end while the inner future waits.
fn poll_limited<F: Future, C: Counter, M>(
    inner: Pin<&mut F>,
    session: &Session<C, M>,
    traffic: &Traffic<C, M>,
    cx: &mut Context<'_>,
) -> Result<Poll<F::Output>, Limit> {
    if let Some(limit) = traffic.ended_by(session.reason()) {
        return Err(limit);
    }
    match inner.poll(cx) {
        Poll::Ready(output) => Ok(Poll::Ready(output)),
        Poll::Pending => match session.poll_ended(cx) {
            Poll::Ready(reason) => traffic
                .ended_by(Some(reason))
                .map_or(Ok(Poll::Pending), Err),
            Poll::Pending => Ok(Poll::Pending),
        },
    }
}

impl<F, C, M, B, E> Future for ResponseFuture<F, C, M>
where
    F: Future<Output = Result<Response<B>, E>>,
    C: Counter,
{
    type Output = Result<Response<SessionBody<B, C, M>>, E>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let mut this = self.project();
        let Some(inner) = this.inner.as_mut().as_pin_mut() else {
            let (retry_after, cap) = (*this.retry_after, *this.cap);
            return Poll::Ready(Ok(answer(*this.refusal, *this.grpc, retry_after, cap)));
        };
        let polled = match (this.session.as_ref(), this.traffic.as_ref()) {
            (Some(session), Some(traffic)) => poll_limited(inner, session, traffic, cx),
            _ => Ok(inner.poll(cx)),
        };
        // A limit that ended the session while the inner future ran (a request message
        // above the limit, read by the handler) answers instead of the handler.
        let limit = match polled {
            Ok(Poll::Pending) => return Poll::Pending,
            Ok(Poll::Ready(result)) => match (this.session.as_ref(), this.traffic.as_ref()) {
                (Some(session), Some(traffic)) => traffic.ended_by(session.reason()).ok_or(result),
                _ => Err(result),
            },
            Err(limit) => Ok(limit),
        };
        let result = match limit {
            Ok(limit) => {
                this.session.take(); // ended by the limit
                this.inner.set(None);
                return Poll::Ready(Ok(answer(limit, *this.grpc, 0, None)));
            }
            Err(result) => result,
        };
        let session = this.session.take();
        let traffic = this.traffic.take();
        Poll::Ready(match result {
            Ok(response) => {
                let outcome = head_outcome(response.status(), response.headers());
                let grpc = is_grpc(response.headers());
                let session = match this.request.has_body(response.status()) {
                    true => session,
                    false => {
                        // hyper drops a body it must not send unpolled: end at the head.
                        if let Some(session) = session {
                            session.end(outcome);
                        }
                        None
                    }
                };
                let traffic = traffic.filter(|_| session.is_some());
                let deferred = this.deferred.take();
                Ok(response.map(|body| {
                    SessionBody::limited(body, session, traffic, outcome, grpc).deferring(deferred)
                }))
            }
            Err(error) => {
                if let Some(session) = session {
                    session.end(EndReason::Failed);
                }
                Err(error)
            }
        })
    }
}

/// What the request says about its response's body.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum RequestKind {
    /// A response to it has a body unless its status rules one out.
    Other,
    /// `HEAD`: its response never has a body.
    Head,
    /// `CONNECT`: a 2xx response to it is a tunnel, not a body.
    Connect,
}

impl RequestKind {
    pub(crate) fn of(method: &Method) -> Self {
        if method == Method::HEAD {
            RequestKind::Head
        } else if method == Method::CONNECT {
            RequestKind::Connect
        } else {
            RequestKind::Other
        }
    }

    /// Whether a response with `status` to such a request carries a body (RFC 9110 §6.4.1):
    /// not to `HEAD`, not with 1xx (a 101 upgrade among them), 204 or 304, not a 2xx to
    /// `CONNECT`.
    fn has_body(self, status: StatusCode) -> bool {
        !(self == RequestKind::Head
            || status.is_informational()
            || status == StatusCode::NO_CONTENT
            || status == StatusCode::NOT_MODIFIED
            || (self == RequestKind::Connect && status.is_success()))
    }
}

impl<F, C: Counter, M> fmt::Debug for ResponseFuture<F, C, M> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ResponseFuture")
            .field("session", &self.session)
            .finish_non_exhaustive()
    }
}
