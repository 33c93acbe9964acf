//! [`ResponseFuture`]: the inner service's response future, holding the request's session.

use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll, ready};

use http::{Method, Response, StatusCode};
use livecount::{Counter, PerThread};
use livecount_session::{EndReason, Session};
use pin_project_lite::pin_project;

use crate::body::{SessionBody, head_outcome};

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
        #[pin]
        inner: F,
        session: Option<Session<C, M>>,
        request: RequestKind,
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
    pub(crate) fn new(inner: F, session: Option<Session<C, M>>, request: RequestKind) -> Self {
        ResponseFuture {
            inner,
            session,
            request,
        }
    }
}

impl<F, C, M, B, E> Future for ResponseFuture<F, C, M>
where
    F: Future<Output = Result<Response<B>, E>>,
    C: Counter,
{
    type Output = Result<Response<SessionBody<B, C, M>>, E>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let this = self.project();
        let result = ready!(this.inner.poll(cx));
        let session = this.session.take();
        Poll::Ready(match result {
            Ok(response) => {
                let outcome = head_outcome(response.status(), response.headers());
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
                Ok(response.map(|body| SessionBody::with_outcome(body, session, outcome)))
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
