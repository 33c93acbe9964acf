//! [`Backend`]: the one handle a service holds, and [`BackendBuilder`], how it is made.

use std::fmt;
use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use axum::Router;
use axum::extract::ws::{Message, WebSocketUpgrade};
use axum::response::Response;
use http::Request;
use livecount_capacity::CapacityConfig;
use livecount_report::generated::xds::service::orca::v3::open_rca_service_server::OpenRcaServiceServer;
use livecount_report::inband::InbandFormat;
use livecount_report::{LoadBoard, OrcaService, PrequalEstimator};
use livecount_session::{EndHandle, SessionTracker};
use livecount_tower::body::Inspected;
use livecount_tower::grpc::InbandOrcaLayer;
use livecount_tower::serve::DEFAULT_HEADER_READ_TIMEOUT;
use livecount_tower::websocket::IntoEndReason;
use livecount_tower::{
    Predicate, SessionLayer, SocketLimits, StreamLimits, TrackedSocket, WebSocketSessions,
};
use tonic_health::pb::health_server::{Health, HealthServer};

use crate::Serve;

/// The paths of the services the handle mounts itself on the gRPC server: signals, never
/// sessions (ORCA's out-of-band stream, gRPC health).
const OWN_GRPC_SERVICES: [&str; 2] = [
    "/xds.service.orca.v3.OpenRcaService/",
    "/grpc.health.v1.Health/",
];

/// Which gRPC (and layered HTTP) requests are sessions: every one but the handle's own
/// services, or the paths a [`BackendBuilder::count_grpc`] rule picks.
#[derive(Clone)]
pub struct Counted(Option<PathRule>);

/// A rule on a request's path.
type PathRule = Arc<dyn Fn(&str) -> bool + Send + Sync>;

impl<B> Predicate<B> for Counted {
    fn counts(&self, request: &Request<B>) -> bool {
        let path = request.uri().path();
        match &self.0 {
            Some(rule) => rule(path),
            None => !OWN_GRPC_SERVICES.iter().any(|own| path.starts_with(own)),
        }
    }
}

impl fmt::Debug for Counted {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.0 {
            Some(_) => f.write_str("Counted(rule)"),
            None => f.write_str("Counted(all but ORCA and health)"),
        }
    }
}

/// The layer a [`Backend`] counts HTTP and gRPC streams with.
pub type BackendLayer = SessionLayer<livecount::PerThread, (), Counted, Inspected>;

/// One service's sessions and every signal about them, from one object: build it once, take
/// what you mount from it, and let [`serve`](Backend::serve) run the servers and the drain.
///
/// A `Backend` owns the session tracker (with the cap, if one is set), the load board built
/// from it (so the report's capacity never exceeds the cap: it is read, not copied), and the
/// drain. A clone is another handle on the same backend, cheap enough for axum's `State`.
///
/// | take | what it is | mount it |
/// |---|---|---|
/// | [`routes`](Backend::routes) | `/load` (JSON), `/metrics` (Prometheus), `/ready` (200, 503 while draining), `/prequal` | merged into your axum `Router` |
/// | [`websocket`](Backend::websocket) | a counted, capped, limited WebSocket session | in an axum handler, with the `Backend` as `State` |
/// | [`layer`](Backend::layer) | counts HTTP/gRPC requests until their bodies end | on your own routes or server (the gRPC server of [`serve`](Backend::serve) has it) |
/// | [`orca`](Backend::orca), [`health`](Backend::health), [`inband_orca`](Backend::inband_orca) | ORCA out-of-band, gRPC health, ORCA in-band | mounted by [`serve`](Backend::serve)'s gRPC server; here for servers of your own |
/// | [`serve`](Backend::serve) | runs HTTP, gRPC and agent-check listeners and drains them on a signal | `.await` it |
///
/// ```
/// use livecount_service::Backend;
///
/// let backend = Backend::builder("b1").max_sessions(1_000).build();
/// assert_eq!(backend.tracker().max_sessions(), Some(1_000));
/// assert_eq!(backend.board().latest().max_sessions, Some(1_000)); // read from the tracker
/// ```
#[derive(Clone)]
pub struct Backend {
    inner: Arc<Inner>,
}

/// What every clone of a [`Backend`] shares.
struct Inner {
    tracker: SessionTracker,
    board: Arc<LoadBoard>,
    sockets: WebSocketSessions,
    layer: BackendLayer,
    inband: InbandOrcaLayer,
    drain_deadline: Duration,
    max_concurrent_streams: Option<u32>,
    http: HttpSettings,
}

/// The bounds of [`Serve::http`](crate::Serve::http)'s servers.
#[derive(Clone, Copy, Debug)]
pub(crate) struct HttpSettings {
    pub(crate) header_read_timeout: Duration,
    pub(crate) max_pending: Option<usize>,
}

impl Backend {
    /// The default [`BackendBuilder::drain_deadline`]: 20 seconds, so that a drain and the
    /// servers' stop fit in Kubernetes' default `terminationGracePeriodSeconds` (30 s).
    pub const DEFAULT_DRAIN_DEADLINE: Duration = Duration::from_secs(20);

    /// The default [`BackendBuilder::max_concurrent_streams`] of the gRPC server: 100 per
    /// HTTP/2 connection (RFC 9113 § 6.5.2 asks for at least 100), so that one connection
    /// cannot hold more places under the cap than that; a proxy that needs more opens
    /// another connection, as Envoy and gRPC clients do.
    pub const DEFAULT_MAX_CONCURRENT_STREAMS: u32 = 100;

    /// Starts building a backend named `name` (the name in its load reports).
    pub fn builder(name: &str) -> BackendBuilder {
        BackendBuilder {
            name: name.to_owned(),
            max_sessions: None,
            capacity: None,
            drain_deadline: Self::DEFAULT_DRAIN_DEADLINE,
            first_frame_timeout: Some(StreamLimits::DEFAULT_FIRST_FRAME_TIMEOUT),
            idle_timeout: None,
            socket_idle_timeout: Some(SocketLimits::DEFAULT_IDLE_TIMEOUT),
            max_session: Some(StreamLimits::DEFAULT_MAX_SESSION),
            write_timeout: Some(StreamLimits::DEFAULT_WRITE_TIMEOUT),
            max_message_bytes: SocketLimits::DEFAULT_MAX_MESSAGE_BYTES,
            drop_grace: None,
            count: None,
            drain_notice: None,
            max_concurrent_streams: Some(Self::DEFAULT_MAX_CONCURRENT_STREAMS),
            http: HttpSettings {
                header_read_timeout: DEFAULT_HEADER_READ_TIMEOUT,
                max_pending: None,
            },
            inband: (Some(InbandFormat::Text), Some(InbandFormat::Bin)),
            cores: None,
            prequal: None,
        }
    }

    /// The session tracker: counts, the snapshot, `end_all`, the reaper.
    pub fn tracker(&self) -> &SessionTracker {
        &self.inner.tracker
    }

    /// The load board: the latest report every signal serves.
    pub fn board(&self) -> &Arc<LoadBoard> {
        &self.inner.board
    }

    /// How long a drain lets open sessions run before it ends them `Shutdown`.
    pub fn drain_deadline(&self) -> Duration {
        self.inner.drain_deadline
    }

    /// Whether the drain has begun: the tracker's flag, the one drain state every signal
    /// and every session reads.
    pub fn is_draining(&self) -> bool {
        self.inner.tracker.is_draining()
    }

    /// `/load`, `/metrics`, `/ready` and `/prequal` for any axum state: merge them into the
    /// service's router.
    pub fn routes<S: Clone + Send + Sync + 'static>(&self) -> Router<S> {
        livecount_report::router(Arc::clone(&self.inner.board))
    }

    /// Answers an upgrade request with a counted WebSocket session running `handler`, or
    /// with `503` and `Retry-After` at the cap or while draining; see
    /// [`WebSocketSessions`] for every ending and its close code.
    pub fn websocket<F, Fut>(&self, ws: WebSocketUpgrade, handler: F) -> Response
    where
        F: FnOnce(TrackedSocket, EndHandle) -> Fut + Send + 'static,
        Fut: Future + Send + 'static,
        Fut::Output: IntoEndReason,
    {
        self.inner.sockets.upgrade(ws, handler)
    }

    /// The layer that counts requests as sessions until their bodies end, with the
    /// backend's admission and limits (the first-frame timeout among them).
    pub fn layer(&self) -> BackendLayer {
        self.inner.layer.clone()
    }

    /// ORCA's out-of-band service (`xds.service.orca.v3.OpenRcaService`), which
    /// [`serve`](Backend::serve)'s gRPC server mounts.
    pub fn orca(&self) -> OpenRcaServiceServer<OrcaService> {
        livecount_report::OrcaService::server(Arc::clone(&self.inner.board))
    }

    /// gRPC health: `SERVING`, `NOT_SERVING` once the drain begins; mounted by
    /// [`serve`](Backend::serve)'s gRPC server.
    pub fn health(&self) -> HealthServer<impl Health> {
        livecount_report::health_service(&self.inner.board)
    }

    /// The latest report on every response as in-band ORCA (HTTP headers, gRPC
    /// trailers), in the [`inband_orca`](BackendBuilder::inband_orca) forms, each report
    /// encoded once for every layer taken; [`serve`](Backend::serve)'s gRPC server has it,
    /// an HTTP router gets it with `.layer(backend.inband_orca())`.
    pub fn inband_orca(&self) -> InbandOrcaLayer {
        self.inner.inband.clone()
    }

    /// Publishes a report of the tracker's counts now (the publisher [`serve`](Backend::serve)
    /// runs does this every report interval), and returns it.
    pub fn publish(&self) -> Arc<livecount_report::LoadReport> {
        self.inner.board.publish(self.inner.tracker.snapshot())
    }

    /// Serves the listeners given to the returned [`Serve`] until `shutdown` resolves,
    /// then drains in the one right order; see [`Serve`].
    pub fn serve<F>(&self, shutdown: F) -> Serve<F>
    where
        F: Future<Output = ()> + Send + 'static,
    {
        Serve::new(self.clone(), shutdown)
    }

    /// The drain, for a service that runs its own servers (what [`serve`](Backend::serve)
    /// does after its signal): the sessions are told (WebSocket handlers wrap up), new
    /// sessions are refused, every signal says draining, the open ones run until they end
    /// or the deadline (or `hurry`), and the rest end `Shutdown`. Stop your servers only
    /// after it returns, so the signals and refusals are served throughout.
    pub async fn drain(&self, hurry: impl Future<Output = ()>) -> livecount_tower::drain::Drained {
        let inner = &self.inner;
        livecount_tower::drain(&inner.tracker, &inner.board, inner.drain_deadline, hurry).await
    }

    /// Exports the load report as OpenTelemetry metrics over OTLP/gRPC to `endpoint`
    /// (`http://host:4317`) every 10 s; the handle flushes the last report when dropped
    /// or shut down.
    ///
    /// # Errors
    ///
    /// An endpoint that is not a URI, or no runtime to export on.
    #[cfg(feature = "otlp")]
    #[cfg_attr(docsrs, doc(cfg(feature = "otlp")))]
    pub fn otlp(
        &self,
        endpoint: &str,
    ) -> Result<livecount_report::otlp::OtlpHandle, livecount_report::otlp::OtlpError> {
        livecount_report::otlp::builder(endpoint).install(&self.inner.board)
    }

    /// Traces every session from now on and exports the spans over OTLP/gRPC as `traces`
    /// says (`livecount_report::otlp::traces(endpoint)`, its sample ratio, interval and
    /// timeout), through a global `tracing` subscriber this installs; [`serve`](Backend::serve)
    /// then reads each request's W3C `traceparent` so its session span is the caller's
    /// child. Call it before `serve`; shut the returned export down after the drain, so
    /// the last sessions' spans go out.
    ///
    /// A service with its own subscriber composes instead: `traces.install(name)`, its
    /// `layer()` in that subscriber, and `backend.tracker().trace_sessions(name)`.
    ///
    /// ```no_run
    /// # async fn run() -> Result<(), Box<dyn std::error::Error>> {
    /// let backend = livecount_service::Backend::builder("b1").build();
    /// let traces = backend.otlp_traces(
    ///     livecount_report::otlp::traces("http://127.0.0.1:4317").sample_ratio(0.5),
    /// )?;
    /// // ... backend.serve(signal).http(...).await?;
    /// traces.shutdown().await?;
    /// # Ok(()) }
    /// ```
    ///
    /// # Errors
    ///
    /// What [`TracesBuilder::install`](livecount_report::otlp::TracesBuilder::install)
    /// refuses, or a global subscriber already set (compose as above).
    #[cfg(feature = "otlp-traces")]
    #[cfg_attr(docsrs, doc(cfg(feature = "otlp-traces")))]
    pub fn otlp_traces(
        &self,
        traces: livecount_report::otlp::TracesBuilder,
    ) -> Result<livecount_report::otlp::TraceExport, livecount_report::otlp::OtlpError> {
        let name = self.inner.board.name();
        let export = traces.install(name)?;
        export.set_global_default()?;
        self.inner.tracker.trace_sessions(name);
        Ok(export)
    }

    pub(crate) fn max_concurrent_streams(&self) -> Option<u32> {
        self.inner.max_concurrent_streams
    }

    pub(crate) fn http_settings(&self) -> HttpSettings {
        self.inner.http
    }
}

impl fmt::Debug for Backend {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Backend")
            .field("name", &self.inner.board.name())
            .field("max_sessions", &self.inner.tracker.max_sessions())
            .field("draining", &self.is_draining())
            .field("drain_deadline", &self.inner.drain_deadline)
            .finish_non_exhaustive()
    }
}

/// Configures a [`Backend`]; every setting has a default meant for a service on the open
/// internet.
#[must_use = "a builder does nothing until `build`"]
pub struct BackendBuilder {
    name: String,
    max_sessions: Option<u64>,
    capacity: Option<CapacityConfig>,
    drain_deadline: Duration,
    first_frame_timeout: Option<Duration>,
    idle_timeout: Option<Duration>,
    socket_idle_timeout: Option<Duration>,
    max_session: Option<Duration>,
    write_timeout: Option<Duration>,
    max_message_bytes: usize,
    drop_grace: Option<Duration>,
    count: Option<PathRule>,
    drain_notice: Option<Message>,
    max_concurrent_streams: Option<u32>,
    http: HttpSettings,
    inband: (Option<InbandFormat>, Option<InbandFormat>),
    cores: Option<f64>,
    prequal: Option<Arc<PrequalEstimator>>,
}

impl BackendBuilder {
    /// Admits at most `max` sessions at once, WebSockets and counted streams together,
    /// exactly under any burst; past it a WebSocket upgrade gets `503` with `Retry-After`
    /// and a gRPC call `RESOURCE_EXHAUSTED`. The load report's capacity never exceeds it.
    /// Default: no cap.
    pub fn max_sessions(mut self, max: u64) -> Self {
        self.max_sessions = Some(max);
        self
    }

    /// The capacity model's settings (target utilisation, report interval, …). Default:
    /// `CapacityConfig::builder().build()`'s.
    pub fn capacity(mut self, config: CapacityConfig) -> Self {
        self.capacity = Some(config);
        self
    }

    /// How long a drain lets open sessions run before it ends them `Shutdown` (WebSocket
    /// 1012, gRPC `UNAVAILABLE`). Default [`Backend::DEFAULT_DRAIN_DEADLINE`].
    pub fn drain_deadline(mut self, deadline: Duration) -> Self {
        self.drain_deadline = deadline;
        self
    }

    /// Ends a session whose client sent nothing this long after it opened: a WebSocket
    /// with no message (close 1008 "first message timeout"), a counted stream with no
    /// request frame (`DEADLINE_EXCEEDED` "first frame timeout"), both `Disconnected`.
    /// `None` turns it off. Default [`StreamLimits::DEFAULT_FIRST_FRAME_TIMEOUT`] (10 s),
    /// which says why.
    pub fn first_frame_timeout(mut self, limit: impl Into<Option<Duration>>) -> Self {
        self.first_frame_timeout = limit.into();
        self
    }

    /// Ends a counted stream when no frame passed either way for this long
    /// (`Disconnected`, `DEADLINE_EXCEEDED` "idle timeout"); WebSockets have their own,
    /// [`websocket_idle_timeout`](Self::websocket_idle_timeout). Default: off for streams
    /// (a gRPC client that waits quietly sends no message at all, only HTTP/2 pings; see
    /// [`StreamLimits`]).
    pub fn idle_timeout(mut self, limit: impl Into<Option<Duration>>) -> Self {
        self.idle_timeout = limit.into();
        self
    }

    /// Ends a WebSocket session whose client sent nothing this long while its handler
    /// waits to read (`Disconnected`, close 1008 "idle timeout"); `None`: never. Default
    /// [`SocketLimits::DEFAULT_IDLE_TIMEOUT`] (60 s), on unlike a stream's: a WebSocket client
    /// that is quiet on purpose keeps its socket alive with pings or a heartbeat, so a
    /// peer gone without a FIN is found within a minute.
    pub fn websocket_idle_timeout(mut self, limit: impl Into<Option<Duration>>) -> Self {
        self.socket_idle_timeout = limit.into();
        self
    }

    /// Ends a session, WebSocket or counted stream, this long after it began: `TimedOut`
    /// (WebSocket close 1000, gRPC `DEADLINE_EXCEEDED` "max session length"); `None`:
    /// never. Default [`StreamLimits::DEFAULT_MAX_SESSION`] (1 h): a session that outlives every
    /// deploy holds its place through every drain until it is cut.
    pub fn max_session(mut self, limit: impl Into<Option<Duration>>) -> Self {
        self.max_session = limit.into();
        self
    }

    /// Ends a session whose client has not taken a frame for this long (it stopped
    /// reading): `Disconnected`, its place back at once; `None`: never. Default
    /// [`StreamLimits::DEFAULT_WRITE_TIMEOUT`] (30 s): a reader that stalls longer is gone, and its
    /// buffered replies should not hold memory and a place under the cap.
    pub fn write_timeout(mut self, limit: impl Into<Option<Duration>>) -> Self {
        self.write_timeout = limit.into();
        self
    }

    /// Ends a WebSocket session whose client sends a message or frame above `bytes` (at
    /// least 1): `Failed`, close 1009. Default [`SocketLimits::DEFAULT_MAX_MESSAGE_BYTES`] (64 KiB), far
    /// below tungstenite's 64 MiB per socket. A gRPC service bounds its own messages
    /// (tonic's `max_decoding_message_size`, 4 MiB by default).
    pub fn max_message_bytes(mut self, bytes: usize) -> Self {
        self.max_message_bytes = bytes;
        self
    }

    /// Leaves a counted stream whose response the transport dropped to the service for
    /// `grace` before the layer ends it `Cancelled` (see
    /// [`SessionLayer::leave_drops_to_service`]): a service that reads its request body
    /// can tell a dead connection (`Disconnected`) from a client's reset first. Default:
    /// off, the drop ends the session `Cancelled` at once (right for a service that does
    /// not look).
    pub fn leave_drops_to_service(mut self, grace: Duration) -> Self {
        self.drop_grace = Some(grace);
        self
    }

    /// Closes an HTTP connection of [`Serve::http`](crate::Serve::http) whose request head
    /// has not fully arrived this long after it opened (or after its last response); one
    /// whose first head never reached the service is answered `503` with `Retry-After` first.
    /// Default [`livecount_tower::serve::DEFAULT_HEADER_READ_TIMEOUT`] (10 s), which says why
    /// (slowloris).
    pub fn header_read_timeout(mut self, timeout: Duration) -> Self {
        self.http.header_read_timeout = timeout;
        self
    }

    /// At most this many connections of each [`Serve::http`](crate::Serve::http) listener
    /// without a response yet (or an upgrade) at once; at the bound the oldest is closed
    /// (answered `503` with `Retry-After` if none of its requests reached the service).
    /// `None`: `livecount_tower::serve`'s default, half the descriptors `RLIMIT_NOFILE`
    /// leaves free, at most [`livecount_tower::serve::MAX_DEFAULT_PENDING`]; never above what
    /// the descriptor limit leaves either way. Default `None`.
    pub fn max_pending_connections(mut self, max: impl Into<Option<usize>>) -> Self {
        self.http.max_pending = max.into();
        self
    }

    /// The in-band ORCA forms of [`inband_orca`](Backend::inband_orca): `http` on HTTP
    /// responses and WebSocket upgrades (a header), `grpc` in gRPC trailers; `None` turns
    /// a form off. Default `(Some(Text), Some(Bin))`: Envoy reads `TEXT` headers, and gRPC
    /// clients read only `BIN` trailers.
    pub fn inband_orca(mut self, http: Option<InbandFormat>, grpc: Option<InbandFormat>) -> Self {
        self.inband = (http, grpc);
        self
    }

    /// Measures the report's utilisation as this process's CPU time against `cores`.
    /// Default: the CPUs this process may use (`available_parallelism`); set it when the
    /// process's share is smaller (a container's CPU quota).
    pub fn cores(mut self, cores: f64) -> Self {
        self.cores = Some(cores);
        self
    }

    /// Every report carries a Prequal probe (`/prequal`, ORCA named metrics) from
    /// `estimator`, into which the service records each session's time to first response
    /// at its requests in flight. Default: none (only the service knows what its latency
    /// is).
    pub fn prequal(mut self, estimator: Arc<PrequalEstimator>) -> Self {
        self.prequal = Some(estimator);
        self
    }

    /// Counts as sessions only the requests whose path `rule` accepts (gRPC paths are
    /// `/package.Service/Method`). Default: every request on the gRPC server but ORCA's
    /// and gRPC health's, which are signals.
    pub fn count_grpc(mut self, rule: impl Fn(&str) -> bool + Send + Sync + 'static) -> Self {
        self.count = Some(Arc::new(rule));
        self
    }

    /// Sends every open WebSocket's client `notice` once when the drain begins (see
    /// [`WebSocketSessions::drain_notice`]). Default: none.
    pub fn drain_notice(mut self, notice: Message) -> Self {
        self.drain_notice = Some(notice);
        self
    }

    /// The most streams one HTTP/2 connection to the gRPC server may hold at once (`None`:
    /// tonic's default, no limit). Default [`Backend::DEFAULT_MAX_CONCURRENT_STREAMS`].
    pub fn max_concurrent_streams(mut self, max: impl Into<Option<u32>>) -> Self {
        self.max_concurrent_streams = max.into();
        self
    }

    /// The backend.
    pub fn build(self) -> Backend {
        let tracker = match self.max_sessions {
            Some(max) => SessionTracker::with_max_sessions(max),
            None => SessionTracker::new(),
        };
        let config = match self.capacity {
            Some(config) => config,
            // The builder's defaults are valid by construction.
            None => CapacityConfig::builder()
                .build()
                .expect("the default capacity model"),
        };
        let mut board = LoadBoard::builder(&self.name, config);
        if let Some(cap) = tracker.max_sessions() {
            board = board.max_sessions(cap);
        }
        if let Some(cores) = self.cores {
            board = board.cores(cores);
        }
        if let Some(estimator) = self.prequal {
            board = board.prequal(estimator);
        }
        let board = Arc::new(board.build());
        let mut sockets = WebSocketSessions::new(tracker.clone())
            .first_message_timeout(self.first_frame_timeout)
            .idle_timeout(self.socket_idle_timeout)
            .max_session(self.max_session)
            .write_timeout(self.write_timeout)
            .max_message_bytes(self.max_message_bytes);
        if let Some(notice) = self.drain_notice {
            sockets = sockets.drain_notice(notice);
        }
        let mut layer = SessionLayer::new(tracker.clone())
            .with_predicate(Counted(self.count))
            .max_session(self.max_session)
            .write_timeout(self.write_timeout)
            .first_frame_timeout(self.first_frame_timeout)
            .idle_timeout(self.idle_timeout);
        if let Some(grace) = self.drop_grace {
            layer = layer.leave_drops_to_service(grace);
        }
        let (http, grpc) = self.inband;
        let inband = InbandOrcaLayer::new(Arc::clone(&board))
            .http_format(http)
            .grpc_format(grpc);
        Backend {
            inner: Arc::new(Inner {
                tracker,
                board,
                sockets,
                layer,
                inband,
                drain_deadline: self.drain_deadline,
                max_concurrent_streams: self.max_concurrent_streams,
                http: self.http,
            }),
        }
    }
}

impl fmt::Debug for BackendBuilder {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("BackendBuilder")
            .field("name", &self.name)
            .field("max_sessions", &self.max_sessions)
            .field("drain_deadline", &self.drain_deadline)
            .field("first_frame_timeout", &self.first_frame_timeout)
            .finish_non_exhaustive()
    }
}
