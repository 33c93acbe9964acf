//! [`SessionLayer`] and [`SessionService`]: each HTTP request a session until its response
//! body ends; [`Predicate`] and [`CountAll`]: which requests count.

use std::fmt;
use std::task::{Context, Poll};
use std::time::Duration;

use http::{Request, Response};
use livecount::{Counter, PerThread};
use livecount_session::{Session, SessionTracker, StartError};
use tower_layer::Layer;
use tower_service::Service;

use crate::limits::{Inspected, Limit, PassThrough, StreamLimits, grpc_timeout, is_grpc};
use crate::request_body::RequestBody;
use crate::response_future::{RequestKind, ResponseFuture};
use crate::session_body::{Deferred, end_after};
use crate::traffic::{RequestLimits, Traffic};

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
/// | the maximum session length passed ([`StreamLimits`]) | [`TimedOut`](livecount_session::EndReason::TimedOut), gRPC `DEADLINE_EXCEEDED` "max session length" |
/// | a gRPC request's `grpc-timeout` passed first ([`grpc_timeout`](Self::grpc_timeout)) | `TimedOut`, gRPC `DEADLINE_EXCEEDED` "deadline exceeded (grpc-timeout)" |
/// | a response frame waited for the transport for the write timeout (the peer stopped reading) | [`Disconnected`](livecount_session::EndReason::Disconnected), no status (nobody reads it) |
/// | no frame either way for the idle timeout ([`Inspected`] only) | `Disconnected`, gRPC `DEADLINE_EXCEEDED` "idle timeout" |
/// | nothing from the client for the first-frame timeout ([`Inspected`] only) | `Disconnected`, gRPC `DEADLINE_EXCEEDED` "first frame timeout" |
/// | a request message above the limit ([`Inspected`] only) | `Failed`, gRPC `RESOURCE_EXHAUSTED` |
/// | the request body failed with a stream reset `CANCEL` (HTTP/2 `RST_STREAM`: the client cancelled; [`Inspected`] only) | `Cancelled` at once, no status (nobody reads it) |
/// | the request body failed otherwise (the connection or stream broke: an I/O error, a `GOAWAY`, a reset with another code such as a proxy's `INTERNAL_ERROR`, a body cut short; [`Inspected`] only) | `Disconnected` at once, no status |
/// | the tracker is at its cap ([`SessionTracker::with_max_sessions`]) | not started: counted refused; gRPC `RESOURCE_EXHAUSTED`, else 503 with `Retry-After`, the inner service not called |
/// | the tracker drains ([`SessionTracker::begin_drain`]) | not started: counted refused; gRPC `UNAVAILABLE` "draining: the server is shutting down", else 503 with `Retry-After`, the inner service not called |
/// | ended [`Shutdown`](livecount_session::EndReason::Shutdown) from elsewhere (`end_all` at a drain's deadline) | `Shutdown`, the body cut: gRPC `UNAVAILABLE` "server shutting down" in the trailers (the client reconnects elsewhere) |
///
/// A request body that ends cleanly (an HTTP/2 half-close, `END_STREAM`) ends nothing: the
/// response may go on. A failed one is classified by its error before the service sees it
/// (tonic turns a reset `CANCEL` into a clean end of its stream), so a service that holds
/// the [`EndHandle`](livecount_session::EndHandle) only asks whether the session is still
/// open to know whether its request ended cleanly; see [`RequestBody`].
///
/// A 4xx is the client's mistake, served correctly: `Completed`. A response that has no
/// body by HTTP's rules (to `HEAD`; 1xx, 204, 304; a 2xx to `CONNECT`) ends with its head,
/// since hyper drops its body unpolled. [`StreamLimits`] has the limits' defaults, what
/// each answers over plain HTTP, and why; the builder methods below set them.
///
/// A counted request carries its session's [`EndHandle`](livecount_session::EndHandle) in
/// its extensions, so the handler can move the session's phase, `touch` it, or end it with
/// a reason of its own (which then wins: the first end is the one counted); with tonic,
/// `request.extensions().get::<EndHandle>()`.
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
pub struct SessionLayer<C: Counter = PerThread, M = (), P = CountAll, R = PassThrough> {
    tracker: SessionTracker<C, M>,
    predicate: P,
    limits: StreamLimits,
    request_limits: Option<RequestLimits>,
    mode: R,
}

impl<C: Counter, M> SessionLayer<C, M> {
    /// Counts every request on `tracker`, under the default [`StreamLimits`] (a session at
    /// most an hour long, a response frame waiting at most 30 s for a reader).
    ///
    /// ```
    /// # use livecount_session::SessionTracker;
    /// use livecount_tower::StreamLimits;
    ///
    /// let tracker: SessionTracker = SessionTracker::new();
    /// let layer = livecount_tower::SessionLayer::new(tracker.clone());
    /// assert_eq!(*layer.limits(), StreamLimits::default());
    /// ```
    pub fn new(tracker: SessionTracker<C, M>) -> Self {
        let limits = StreamLimits::default();
        SessionLayer {
            tracker,
            predicate: CountAll,
            request_limits: RequestLimits::new(&limits),
            limits,
            mode: PassThrough,
        }
    }
}

impl<C: Counter, M, P, R> SessionLayer<C, M, P, R> {
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
    pub fn with_predicate<Q>(self, predicate: Q) -> SessionLayer<C, M, Q, R> {
        SessionLayer {
            tracker: self.tracker,
            predicate,
            limits: self.limits,
            request_limits: self.request_limits,
            mode: self.mode,
        }
    }

    /// The tracker requests are counted on.
    pub fn tracker(&self) -> &SessionTracker<C, M> {
        &self.tracker
    }

    /// The limits requests are held to.
    pub fn limits(&self) -> &StreamLimits {
        &self.limits
    }

    /// Ends a session `TimedOut` this long after `call` (`None`: never). Default: an hour
    /// ([`StreamLimits::DEFAULT_MAX_SESSION`](crate::StreamLimits::DEFAULT_MAX_SESSION), which says why).
    ///
    /// ```
    /// use std::time::Duration;
    /// # let tracker: livecount_session::SessionTracker = Default::default();
    /// let layer = livecount_tower::SessionLayer::new(tracker).max_session(Duration::from_secs(1200));
    /// assert_eq!(layer.limits().max_session(), Some(Duration::from_secs(1200)));
    /// ```
    pub fn max_session(mut self, limit: impl Into<Option<Duration>>) -> Self {
        self.limits.max_session = limit.into();
        self.rebuilt()
    }

    /// Ends a session `Disconnected` when a response frame waits this long for the transport
    /// to take it (`None`: never). Default: 30 s
    /// ([`StreamLimits::DEFAULT_WRITE_TIMEOUT`](crate::StreamLimits::DEFAULT_WRITE_TIMEOUT), which says why).
    ///
    /// ```
    /// use std::time::Duration;
    /// # let tracker: livecount_session::SessionTracker = Default::default();
    /// let layer = livecount_tower::SessionLayer::new(tracker).write_timeout(Duration::from_secs(10));
    /// assert_eq!(layer.limits().write_timeout(), Some(Duration::from_secs(10)));
    /// ```
    pub fn write_timeout(mut self, limit: impl Into<Option<Duration>>) -> Self {
        self.limits.write_timeout = limit.into();
        self.rebuilt()
    }

    /// The `Retry-After` of a plain HTTP 503 at the tracker's cap (whole seconds, rounded
    /// up). Default: 1 s ([`StreamLimits::DEFAULT_RETRY_AFTER`](crate::StreamLimits::DEFAULT_RETRY_AFTER)).
    pub fn retry_after(mut self, after: Duration) -> Self {
        self.limits.retry_after = after;
        self
    }

    /// Leaves a response dropped before its end to the service for `grace`, and ends it
    /// `Cancelled` only then, if the service has not ended it. By default the drop ends the
    /// session `Cancelled` at once.
    ///
    /// hyper drops a response when the client resets its stream *and* when the connection
    /// dies, and the layer cannot tell which; a service that holds the request's
    /// [`EndHandle`](livecount_session::EndHandle) (from its extensions) sees its request
    /// body fail on a dead connection and can end the session
    /// [`Disconnected`](livecount_session::EndReason::Disconnected) first. The grace is
    /// how long its count may outlive the drop if the service says nothing.
    ///
    /// ```
    /// use std::time::Duration;
    /// # let tracker: livecount_session::SessionTracker = Default::default();
    /// let layer = livecount_tower::SessionLayer::new(tracker)
    ///     .leave_drops_to_service(Duration::from_millis(500));
    /// assert_eq!(layer.limits().drop_grace(), Some(Duration::from_millis(500)));
    /// ```
    pub fn leave_drops_to_service(mut self, grace: Duration) -> Self {
        self.limits.drop_grace = Some(grace);
        self
    }

    /// Whether a gRPC request's `grpc-timeout` bounds its session (default: `true`): it then
    /// ends `TimedOut` at the earlier of [`max_session`](Self::max_session) and the client's
    /// deadline, with `DEADLINE_EXCEEDED` "deadline exceeded (grpc-timeout)". gRPC makes the
    /// deadline bound the whole call; tonic bounds only the wait for the response headers.
    /// An invalid value (not 1 to 8 digits and one of `H M S m u n`) is ignored. The sweeper
    /// checks it (no timer per request), so the end comes at the deadline or up to two sweeper
    /// periods later (a quarter of the shortest limit, 10 ms to 1 s; see [`StreamLimits`]).
    ///
    /// ```
    /// # let tracker: livecount_session::SessionTracker = Default::default();
    /// let layer = livecount_tower::SessionLayer::new(tracker);
    /// assert!(layer.limits().grpc_timeout());
    /// assert!(!layer.grpc_timeout(false).limits().grpc_timeout());
    /// ```
    pub fn grpc_timeout(mut self, honour: bool) -> Self {
        self.limits.grpc_timeout = honour;
        self.rebuilt()
    }

    /// No limits at all: the layer as it was before limits, without a sweeper task.
    ///
    /// ```
    /// # let tracker: livecount_session::SessionTracker = Default::default();
    /// let layer = livecount_tower::SessionLayer::new(tracker).without_limits();
    /// assert_eq!(*layer.limits(), livecount_tower::StreamLimits::none());
    /// ```
    pub fn without_limits(mut self) -> Self {
        self.limits = StreamLimits::none();
        self.rebuilt()
    }

    /// Ends a session `Disconnected` when no frame passed in either direction for this long
    /// (`None`: never; the default, see [`StreamLimits`] for why). Request frames are seen
    /// by wrapping the request body, so the layer becomes [`Inspected`].
    ///
    /// ```
    /// use std::time::Duration;
    /// # let tracker: livecount_session::SessionTracker = Default::default();
    /// let layer = livecount_tower::SessionLayer::new(tracker).idle_timeout(Duration::from_secs(60));
    /// assert_eq!(layer.limits().idle_timeout(), Some(Duration::from_secs(60)));
    /// ```
    pub fn idle_timeout(
        mut self,
        limit: impl Into<Option<Duration>>,
    ) -> SessionLayer<C, M, P, Inspected> {
        self.limits.idle_timeout = limit.into();
        self.inspected()
    }

    /// Ends a session `Disconnected` whose client sent nothing at all for this long after
    /// `call` — no request frame, and its request was not complete at once (`None`: never;
    /// the default here, 10 s in a `Backend`'s layer:
    /// [`StreamLimits::DEFAULT_FIRST_FRAME_TIMEOUT`], which says why). gRPC status
    /// `DEADLINE_EXCEEDED` "first frame timeout". The layer becomes [`Inspected`].
    ///
    /// ```
    /// use livecount_tower::StreamLimits;
    /// # let tracker: livecount_session::SessionTracker = Default::default();
    /// let layer = livecount_tower::SessionLayer::new(tracker)
    ///     .first_frame_timeout(StreamLimits::DEFAULT_FIRST_FRAME_TIMEOUT);
    /// assert_eq!(layer.limits().first_frame_timeout(), Some(std::time::Duration::from_secs(10)));
    /// ```
    pub fn first_frame_timeout(
        mut self,
        limit: impl Into<Option<Duration>>,
    ) -> SessionLayer<C, M, P, Inspected> {
        self.limits.first_frame_timeout = limit.into();
        self.inspected()
    }

    /// Ends a session `Failed` when a gRPC request message declares more than `bytes` (or a
    /// plain request body exceeds it); `None`: never, the default (see [`StreamLimits`]).
    /// The layer becomes [`Inspected`].
    pub fn max_request_message(
        mut self,
        bytes: impl Into<Option<u64>>,
    ) -> SessionLayer<C, M, P, Inspected> {
        self.limits.max_request_message = bytes.into();
        self.inspected()
    }

    /// This layer with request bodies inspected.
    fn inspected(self) -> SessionLayer<C, M, P, Inspected> {
        SessionLayer {
            tracker: self.tracker,
            predicate: self.predicate,
            limits: self.limits,
            request_limits: None,
            mode: Inspected,
        }
        .rebuilt()
    }

    /// This layer with a request_limits for its limits.
    fn rebuilt(mut self) -> Self {
        self.request_limits = RequestLimits::new(&self.limits);
        self
    }
}

impl<S, C: Counter, M, P: Clone, R: Copy> Layer<S> for SessionLayer<C, M, P, R> {
    type Service = SessionService<S, C, M, P, R>;

    fn layer(&self, inner: S) -> Self::Service {
        SessionService {
            inner,
            tracker: self.tracker.clone(),
            predicate: self.predicate.clone(),
            limits: self.limits,
            request_limits: self.request_limits,
            mode: self.mode,
        }
    }
}

impl<C: Counter, M, P: Clone, R: Copy> Clone for SessionLayer<C, M, P, R> {
    fn clone(&self) -> Self {
        SessionLayer {
            tracker: self.tracker.clone(),
            predicate: self.predicate.clone(),
            limits: self.limits,
            request_limits: self.request_limits,
            mode: self.mode,
        }
    }
}

impl<C: Counter, M, P, R> fmt::Debug for SessionLayer<C, M, P, R> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SessionLayer")
            .field("limits", &self.limits)
            .finish_non_exhaustive()
    }
}

/// The service [`SessionLayer`] builds: `inner`, with each counted request a session until
/// its response body ([`SessionBody`](crate::body::SessionBody)) ends. See [`SessionLayer`] for
/// the reasons and [`StreamLimits`] for the limits.
///
/// Per request it adds one session start and end (the tracker's own cost), and with limits
/// on (the default) the session's limits armed in its own slot for the tracker's sweeper
/// (see the crate's performance notes); the future and the body wrap the inner ones in
/// place, without boxing.
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
pub struct SessionService<S, C: Counter = PerThread, M = (), P = CountAll, R = PassThrough> {
    inner: S,
    tracker: SessionTracker<C, M>,
    predicate: P,
    limits: StreamLimits,
    request_limits: Option<RequestLimits>,
    mode: R,
}

impl<S, C: Counter, M> SessionService<S, C, M> {
    /// Counts every request to `inner` on `tracker`, under the default [`StreamLimits`]
    /// (held by the tracker's one sweeper, as every layer on it is).
    pub fn new(inner: S, tracker: SessionTracker<C, M>) -> Self {
        SessionLayer::new(tracker).layer(inner)
    }
}

impl<S, C: Counter, M, P, R> SessionService<S, C, M, P, R> {
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

/// What `call` decided for a request.
enum Admission<C: Counter, M> {
    /// The predicate did not count it.
    Uncounted,
    /// Counted, with its traffic noted if limits apply.
    Counted(Session<C, M>, Option<Traffic<C, M>>),
    /// Refused: at the tracker's cap (`AtCapacity`, `Some(max)`), with a full session table
    /// (`AtCapacity`, `None`), or because the tracker drains (`Draining`).
    Refused(Limit, Option<u64>),
}

impl<S, C, M, P, R> SessionService<S, C, M, P, R>
where
    C: Counter + 'static,
    M: Send + Sync + 'static,
{
    /// Starts (or refuses) the session of `request` (`grpc` if it says so).
    fn admit<B>(&self, request: &Request<B>, grpc: bool) -> Admission<C, M>
    where
        P: Predicate<B>,
    {
        if !self.predicate.counts(request) {
            return Admission::Uncounted;
        }
        let session = match self.tracker.try_start() {
            Ok(session) => session,
            // Counted refused by the tracker itself.
            Err(StartError::AtCapacity { max }) => {
                return Admission::Refused(Limit::AtCapacity, Some(max));
            }
            Err(StartError::Draining) => return Admission::Refused(Limit::Draining, None),
            // The table is full (two billion sessions): refused here, counted here.
            Err(_) => {
                self.tracker.note_refused();
                return Admission::Refused(Limit::AtCapacity, None);
            }
        };
        session.trace_transport(if grpc { "grpc" } else { "http" });
        let deadline = match grpc && self.limits.grpc_timeout {
            true => grpc_timeout(request.headers()),
            false => None,
        };
        let traffic = self
            .request_limits
            .as_ref()
            .and_then(|limits| limits.arm(&session, deadline));
        Admission::Counted(session, traffic)
    }

    /// How a response dropped before its end is left to the service, if it is.
    fn deferred(&self) -> Option<Deferred<C, M>> {
        let end = end_after::<C, M>;
        self.limits.drop_grace.map(|grace| Deferred { grace, end })
    }

    /// The whole seconds of `Retry-After`, rounded up.
    fn retry_after(&self) -> u64 {
        let after = self.limits.retry_after;
        after.as_secs() + u64::from(after.subsec_nanos() > 0)
    }
}

impl<S, C, M, P, ReqBody, ResBody> Service<Request<ReqBody>> for SessionService<S, C, M, P>
where
    S: Service<Request<ReqBody>, Response = Response<ResBody>>,
    C: Counter + 'static,
    M: Send + Sync + 'static,
    P: Predicate<ReqBody>,
{
    type Response = Response<crate::body::SessionBody<ResBody, C, M>>;
    type Error = S::Error;
    type Future = ResponseFuture<S::Future, C, M>;

    #[inline]
    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, mut request: Request<ReqBody>) -> Self::Future {
        let kind = RequestKind::of(request.method());
        let grpc = is_grpc(request.headers());
        match self.admit(&request, grpc) {
            Admission::Uncounted => {
                ResponseFuture::new(self.inner.call(request), None, None, kind, grpc)
            }
            Admission::Counted(session, traffic) => {
                request.extensions_mut().insert(session.handle());
                ResponseFuture::new(self.inner.call(request), Some(session), traffic, kind, grpc)
                    .deferring(self.deferred())
            }
            Admission::Refused(limit, cap) => {
                ResponseFuture::refused(limit, grpc, self.retry_after(), cap)
            }
        }
    }
}

impl<S, C, M, P, ReqBody, ResBody> Service<Request<ReqBody>>
    for SessionService<S, C, M, P, Inspected>
where
    S: Service<Request<RequestBody<ReqBody, C, M>>, Response = Response<ResBody>>,
    ReqBody: http_body::Body,
    C: Counter + 'static,
    M: Send + Sync + 'static,
    P: Predicate<ReqBody>,
{
    type Response = Response<crate::body::SessionBody<ResBody, C, M>>;
    type Error = S::Error;
    type Future = ResponseFuture<S::Future, C, M>;

    #[inline]
    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, mut request: Request<ReqBody>) -> Self::Future {
        let kind = RequestKind::of(request.method());
        let grpc = is_grpc(request.headers());
        let limit = self.limits.max_request_message;
        let (session, traffic) = match self.admit(&request, grpc) {
            Admission::Uncounted => (None, None),
            Admission::Counted(session, traffic) => {
                request.extensions_mut().insert(session.handle());
                (Some(session), traffic)
            }
            Admission::Refused(limit, cap) => {
                return ResponseFuture::refused(limit, grpc, self.retry_after(), cap);
            }
        };
        if let Some(traffic) = &traffic
            && request.body().is_end_stream()
        {
            traffic.heard(); // the whole request came with its head
        }
        let request = request.map(|body| RequestBody::new(body, traffic.clone(), limit, grpc));
        ResponseFuture::new(self.inner.call(request), session, traffic, kind, grpc)
            .deferring(self.deferred())
    }
}

impl<S: Clone, C: Counter, M, P: Clone, R: Copy> Clone for SessionService<S, C, M, P, R> {
    fn clone(&self) -> Self {
        SessionService {
            inner: self.inner.clone(),
            tracker: self.tracker.clone(),
            predicate: self.predicate.clone(),
            limits: self.limits,
            request_limits: self.request_limits,
            mode: self.mode,
        }
    }
}

impl<S: fmt::Debug, C: Counter, M, P, R> fmt::Debug for SessionService<S, C, M, P, R> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SessionService")
            .field("inner", &self.inner)
            .field("limits", &self.limits)
            .finish_non_exhaustive()
    }
}
