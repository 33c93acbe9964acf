//! [`ResponseFuture`]: the inner service's response future, holding the request's session.

use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll, ready};

use http::Response;
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
    pub(crate) fn new(inner: F, session: Option<Session<C, M>>) -> Self {
        ResponseFuture { inner, session }
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

impl<F, C: Counter, M> fmt::Debug for ResponseFuture<F, C, M> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ResponseFuture")
            .field("session", &self.session)
            .finish_non_exhaustive()
    }
}
