//! [`SessionLayer`] and [`SessionService`]: each HTTP request a session until its response
//! body ends; [`Predicate`] and [`CountAll`]: which requests count.

use std::fmt;
use std::task::{Context, Poll};

use http::{Request, Response};
use livecount::{Counter, PerThread};
use livecount_session::SessionTracker;
use tower_layer::Layer;
use tower_service::Service;

use crate::future::{RequestKind, ResponseFuture};

/// Which requests a [`SessionLayer`] counts. Implemented by [`CountAll`] and by every
/// `Fn(&Request<B>) -> bool` (`Clone` if the layer is to be cloned).
///
/// ```
/// use http::Request;
/// use livecount_tower::Predicate;
///
/// let api_only = |request: &Request<()>| request.uri().path().starts_with("/api/");
/// assert!(api_only.counts(&Request::get("/api/chat").body(()).unwrap()));
/// assert!(!api_only.counts(&Request::get("/healthz").body(()).unwrap()));
/// ```
pub trait Predicate<B> {
    /// Whether `request` is counted as a session.
    fn counts(&self, request: &Request<B>) -> bool;
}

/// The default [`Predicate`]: every request is a session.
///
/// ```
/// use livecount_tower::{CountAll, Predicate};
/// assert!(CountAll.counts(&http::Request::new(())));
/// ```
#[derive(Clone, Copy, Debug, Default)]
pub struct CountAll;

impl<B> Predicate<B> for CountAll {
    #[inline]
    fn counts(&self, _: &Request<B>) -> bool {
        true
    }
}

impl<B, F: Fn(&Request<B>) -> bool> Predicate<B> for F {
    #[inline]
    fn counts(&self, request: &Request<B>) -> bool {
        self(request)
    }
}

/// A tower [`Layer`] that counts each HTTP request as a session on a [`SessionTracker`],
/// from the moment the service accepts it (`call`) until its response body ends.
///
/// How the session ends, exactly once:
///
/// | what happened | reason |
/// |---|---|
/// | the response body reached its end | [`Completed`](livecount_session::EndReason::Completed) |
/// | … with a 5xx status, or a gRPC `grpc-status` other than 0 in the headers or trailers | [`Failed`](livecount_session::EndReason::Failed) (gRPC 1 CANCELLED: `Cancelled`, 4 DEADLINE_EXCEEDED: `TimedOut`) |
/// | the response body yielded an error | `Failed` |
/// | the inner service returned `Err` | `Failed` |
/// | the response body was dropped before its end (client gone, stream cancelled) | [`Cancelled`](livecount_session::EndReason::Cancelled) (a 5xx stays `Failed`) |
/// | the response future was dropped before it completed | `Cancelled` |
///
/// A 4xx is the client's mistake, served correctly: `Completed`. A response that has no
/// body by HTTP's rules (to `HEAD`; 1xx, 204, 304; a 2xx to `CONNECT`) ends with its head,
/// since hyper drops its body unpolled.
///
/// ```
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() {
/// use http::{Request, Response};
/// use http_body_util::{BodyExt, Full};
/// use livecount_session::{EndReason, SessionTracker};
/// use livecount_tower::SessionLayer;
/// use tower::{ServiceBuilder, ServiceExt};
///
/// let tracker: SessionTracker = SessionTracker::new();
/// let service = ServiceBuilder::new()
///     .layer(SessionLayer::new(tracker.clone()))
///     .service_fn(|_: Request<()>| async {
///         Ok::<_, std::convert::Infallible>(Response::new(Full::new(bytes::Bytes::from("hello"))))
///     });
/// let response = service.oneshot(Request::new(())).await.unwrap();
/// assert_eq!(tracker.active(), 1); // headers are out, the body is not
/// response.into_body().collect().await.unwrap();
/// let s = tracker.snapshot();
/// assert_eq!((s.active, s.ended_by(EndReason::Completed)), (0, 1));
/// # }
/// ```
pub struct SessionLayer<C: Counter = PerThread, M = (), P = CountAll> {
    tracker: SessionTracker<C, M>,
    predicate: P,
}

impl<C: Counter, M> SessionLayer<C, M> {
    /// Counts every request on `tracker`.
    ///
    /// ```
    /// # use livecount_session::SessionTracker;
    /// let tracker: SessionTracker = SessionTracker::new();
    /// let layer = livecount_tower::SessionLayer::new(tracker.clone());
    /// # let _ = layer;
    /// ```
    pub fn new(tracker: SessionTracker<C, M>) -> Self {
        SessionLayer {
            tracker,
            predicate: CountAll,
        }
    }
}

impl<C: Counter, M, P> SessionLayer<C, M, P> {
    /// Counts only the requests `predicate` accepts; the others pass through uncounted.
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() {
    /// use http::{Request, Response};
    /// use livecount_session::SessionTracker;
    /// use livecount_tower::SessionLayer;
    /// use tower::{ServiceBuilder, ServiceExt};
    ///
    /// let tracker: SessionTracker = SessionTracker::new();
    /// let layer = SessionLayer::new(tracker.clone())
    ///     .with_predicate(|r: &Request<()>| r.uri().path() != "/healthz");
    /// let service = ServiceBuilder::new().layer(layer).service_fn(|_: Request<()>| async {
    ///     Ok::<_, std::convert::Infallible>(Response::new(http_body_util::Empty::<bytes::Bytes>::new()))
    /// });
    /// let _response = service.oneshot(Request::get("/healthz").body(()).unwrap()).await;
    /// assert_eq!(tracker.snapshot().started, 0);
    /// # }
    /// ```
    pub fn with_predicate<Q>(self, predicate: Q) -> SessionLayer<C, M, Q> {
        SessionLayer {
            tracker: self.tracker,
            predicate,
        }
    }

    /// The tracker requests are counted on.
    pub fn tracker(&self) -> &SessionTracker<C, M> {
        &self.tracker
    }
}

impl<S, C: Counter, M, P: Clone> Layer<S> for SessionLayer<C, M, P> {
    type Service = SessionService<S, C, M, P>;

    fn layer(&self, inner: S) -> Self::Service {
        SessionService {
            inner,
            tracker: self.tracker.clone(),
            predicate: self.predicate.clone(),
        }
    }
}

impl<C: Counter, M, P: Clone> Clone for SessionLayer<C, M, P> {
    fn clone(&self) -> Self {
        SessionLayer {
            tracker: self.tracker.clone(),
            predicate: self.predicate.clone(),
        }
    }
}

impl<C: Counter, M, P> fmt::Debug for SessionLayer<C, M, P> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SessionLayer").finish_non_exhaustive()
    }
}

/// The service [`SessionLayer`] builds: `inner`, with each counted request a session until
/// its response body ([`SessionBody`](crate::SessionBody)) ends. See [`SessionLayer`] for
/// the reasons.
///
/// Per request it adds one session start and end (the tracker's own cost, which includes
/// allocating the session's shared core) and nothing of its own: the future and the body
/// wrap the inner ones in place, without boxing.
///
/// ```
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() {
/// use http::{Request, Response};
/// use livecount_session::{EndReason, SessionTracker};
/// use livecount_tower::SessionService;
/// use tower::ServiceExt;
///
/// let tracker: SessionTracker = SessionTracker::new();
/// let inner = tower::service_fn(|_: Request<()>| async { Err::<Response<String>, _>("backend down") });
/// let service = SessionService::new(inner, tracker.clone());
/// assert!(service.oneshot(Request::new(())).await.is_err());
/// assert_eq!(tracker.snapshot().ended_by(EndReason::Failed), 1);
/// # }
/// ```
pub struct SessionService<S, C: Counter = PerThread, M = (), P = CountAll> {
    inner: S,
    tracker: SessionTracker<C, M>,
    predicate: P,
}

impl<S, C: Counter, M> SessionService<S, C, M> {
    /// Counts every request to `inner` on `tracker`.
    pub fn new(inner: S, tracker: SessionTracker<C, M>) -> Self {
        SessionService {
            inner,
            tracker,
            predicate: CountAll,
        }
    }
}

impl<S, C: Counter, M, P> SessionService<S, C, M, P> {
    /// The wrapped service.
    pub fn get_ref(&self) -> &S {
        &self.inner
    }

    /// The wrapped service, mutably.
    pub fn get_mut(&mut self) -> &mut S {
        &mut self.inner
    }

    /// The wrapped service, unwrapped.
    pub fn into_inner(self) -> S {
        self.inner
    }
}

impl<S, C, M, P, ReqBody, ResBody> Service<Request<ReqBody>> for SessionService<S, C, M, P>
where
    S: Service<Request<ReqBody>, Response = Response<ResBody>>,
    C: Counter,
    M: Send + Sync + 'static,
    P: Predicate<ReqBody>,
{
    type Response = Response<crate::SessionBody<ResBody, C, M>>;
    type Error = S::Error;
    type Future = ResponseFuture<S::Future, C, M>;

    #[inline]
    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, request: Request<ReqBody>) -> Self::Future {
        let session = self
            .predicate
            .counts(&request)
            .then(|| self.tracker.start());
        let kind = RequestKind::of(request.method());
        ResponseFuture::new(self.inner.call(request), session, kind)
    }
}

impl<S: Clone, C: Counter, M, P: Clone> Clone for SessionService<S, C, M, P> {
    fn clone(&self) -> Self {
        SessionService {
            inner: self.inner.clone(),
            tracker: self.tracker.clone(),
            predicate: self.predicate.clone(),
        }
    }
}

impl<S: fmt::Debug, C: Counter, M, P> fmt::Debug for SessionService<S, C, M, P> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SessionService")
            .field("inner", &self.inner)
            .finish_non_exhaustive()
    }
}
