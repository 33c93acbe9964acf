//! [`Serve`]: a backend's servers, run until the shutdown signal, then drained in order.

use std::fmt;
use std::future::{Future, IntoFuture, pending};
use std::io;
use std::pin::Pin;
use std::time::Duration;

use std::convert::Infallible;

use axum::Router;
use axum::response::IntoResponse;
use http::Request;
use livecount_report::serve_agent_check;
use livecount_tower::SocketLimits;
use livecount_tower::drain::Drained;
use livecount_tower::grpc::GrpcOnlyLayer;
use tokio::net::TcpListener;
use tokio::task::JoinSet;
use tokio_util::sync::CancellationToken;
use tokio_util::task::AbortOnDropHandle;
use tonic::server::NamedService;
use tonic::service::Routes;
use tonic::transport::Server;
use tonic::transport::server::TcpIncoming;
use tower_service::Service;

use crate::Backend;

/// The servers a [`Backend`] runs, and its drain: made by [`Backend::serve`], given its
/// listeners, then `.await`ed.
///
/// Until the shutdown signal resolves (or a server fails), it serves:
///
/// * each [`http`](Serve::http) listener (one or more: an application port, a separate
///   scrape port) with `livecount_tower::serve`: a request-head timeout
///   ([`header_read_timeout`](crate::BackendBuilder::header_read_timeout)), pending
///   connections bounded below the descriptor limit
///   ([`max_pending_connections`](crate::BackendBuilder::max_pending_connections)), Nagle
///   off on every connection;
/// * the [`grpc`](Serve::grpc) listener with tonic: the services given, plus ORCA
///   out-of-band and gRPC health; every request but those two counted as a session by the
///   backend's [`layer`](Backend::layer) (admission, limits, first-frame timeout); in-band
///   ORCA in every call's trailers; HTTP 415 for requests that are not gRPC; at most
///   [`max_concurrent_streams`](crate::BackendBuilder::max_concurrent_streams) streams per
///   connection; HTTP/2 keepalive pings; Nagle off (tonic's `serve_with_incoming` ignores
///   `tcp_nodelay`, and with Nagle on a stream's headers and first frame wait for the
///   peer's delayed ACK, ~40 ms);
/// * HAProxy's [`agent_check`](Serve::agent_check) (`up N%`, `drain`);
/// * a load report published every report interval.
///
/// Then it drains, in the one order that cuts no call that ends in time:
///
/// 1. the sessions are told (WebSocket handlers' `drain_started`, the drain notice), new
///    sessions are refused (WebSocket `503` + `Retry-After`, gRPC `UNAVAILABLE`) and every
///    signal says draining at once (agent-check `drain`, ORCA streams end, `/ready` 503,
///    gRPC health `NOT_SERVING`, `/load`, `/metrics`) — while the servers keep serving;
/// 2. the open sessions run until they end or the drain deadline passes (or the
///    [`hurry`](Serve::hurry) signal resolves first, a second SIGTERM say);
/// 3. the rest end `Shutdown` (WebSocket 1012 "service restart", gRPC `UNAVAILABLE`) and
///    their close frames get [`SocketLimits::DEFAULT_CLOSE_TIMEOUT`];
/// 4. only now the servers stop accepting and finish, within [`Serve::STOP_BOUND`]; a
///    server still busy then is aborted.
///
/// It returns what the drain did, or the first server's error; the last report, with the
/// drain's ends in it, is then [`backend.board().latest()`](livecount_report::LoadBoard::latest).
#[must_use = "a Serve does nothing until it is awaited"]
pub struct Serve<F> {
    backend: Backend,
    shutdown: F,
    hurry: Pin<Box<dyn Future<Output = ()> + Send>>,
    http: Vec<(TcpListener, Router)>,
    grpc: Option<TcpListener>,
    services: Routes,
    agent_check: Option<TcpListener>,
}

impl<F> Serve<F> {
    /// How long the servers get to stop once the drain is over (every session has ended by
    /// then: they only close listeners and idle connections).
    pub const STOP_BOUND: Duration = Duration::from_secs(3);

    /// How often the gRPC server pings an idle HTTP/2 connection, and how long it waits for
    /// the answer before it closes it: a peer that vanished without a FIN (its streams and
    /// their places under the cap with it) is found within a minute and a half.
    pub const GRPC_KEEPALIVE: (Duration, Duration) =
        (Duration::from_secs(60), Duration::from_secs(20));

    pub(crate) fn new(backend: Backend, shutdown: F) -> Self {
        Serve {
            backend,
            shutdown,
            hurry: Box::pin(pending()),
            http: Vec::new(),
            grpc: None,
            services: Routes::default(),
            agent_check: None,
        }
    }

    /// Serves `app` on `listener`, with the backend as its state (so a handler takes
    /// `State<Backend>`; a router with a state of its own gives it with `with_state`
    /// first). Merge the backend's [`routes`](Backend::routes) in for `/load`, `/metrics`
    /// and `/ready`.
    pub fn http(mut self, listener: TcpListener, app: Router<Backend>) -> Self {
        self.http
            .push((listener, app.with_state(self.backend.clone())));
        self
    }

    /// Serves gRPC on `listener`: the services added with
    /// [`grpc_service`](Serve::grpc_service), ORCA and gRPC health.
    pub fn grpc(mut self, listener: TcpListener) -> Self {
        self.grpc = Some(listener);
        self
    }

    /// Adds a tonic service (a generated `FooServer`) to the gRPC server; its calls are
    /// sessions as the backend's [`count_grpc`](crate::BackendBuilder::count_grpc) rule
    /// says (by default, all of them).
    pub fn grpc_service<S>(mut self, service: S) -> Self
    where
        S: Service<Request<tonic::body::Body>, Error = Infallible>
            + NamedService
            + Clone
            + Send
            + Sync
            + 'static,
        S::Response: IntoResponse,
        S::Future: Send + 'static,
    {
        self.services = self.services.add_service(service);
        self
    }

    /// Ends the drain's wait early when `hurry` resolves (it is polled only once the drain
    /// has begun): the sessions still open end `Shutdown` at once, and the servers stop.
    /// For a second SIGTERM, an operator who will not wait out the deadline. Default:
    /// never, the drain waits out its deadline.
    pub fn hurry(mut self, hurry: impl Future<Output = ()> + Send + 'static) -> Self {
        self.hurry = Box::pin(hurry);
        self
    }

    /// Answers HAProxy's agent-check on `listener`.
    pub fn agent_check(mut self, listener: TcpListener) -> Self {
        self.agent_check = Some(listener);
        self
    }
}

impl<F: Future<Output = ()> + Send + 'static> Serve<F> {
    async fn run(self) -> io::Result<Drained> {
        let Serve {
            backend,
            shutdown,
            hurry,
            http,
            grpc,
            services,
            agent_check,
        } = self;
        let stop = CancellationToken::new();
        let mut servers = JoinSet::new();
        let settings = backend.http_settings();
        for (listener, app) in http {
            let app = match trace_context(&backend) {
                Some(layer) => app.layer(layer),
                None => app,
            };
            let mut server = livecount_tower::serve(listener, app)
                .header_read_timeout(settings.header_read_timeout);
            if let Some(max) = settings.max_pending {
                server = server.max_pending(max);
            }
            let server = server
                .with_graceful_shutdown(stop.clone().cancelled_owned())
                .shutdown_timeout(Self::STOP_BOUND);
            servers.spawn(async move {
                server.await;
                Ok(())
            });
        }
        if let Some(listener) = grpc {
            servers.spawn(serve_grpc(
                backend.clone(),
                listener,
                services,
                stop.clone(),
            ));
        }
        let board = backend.board();
        let _publisher = AbortOnDropHandle::new(board.spawn_publisher(backend.tracker().clone()));
        let _check = agent_check.map(|check| {
            AbortOnDropHandle::new(tokio::spawn(serve_agent_check(check, board.clone())))
        });
        // A server that fails before the signal starts the drain too: its error is returned.
        let failed = tokio::select! {
            () = shutdown => None,
            Some(early) = servers.join_next() => Some(flatten(early)),
        };
        let drained = backend.drain(hurry).await;
        stop.cancel(); // only now: the servers stop accepting
        if drained.cut > 0 {
            // The cut sessions' close frames go out from their own tasks, each bounded by
            // the close timeout: give them that long before the servers' tasks go.
            tokio::time::sleep(SocketLimits::DEFAULT_CLOSE_TIMEOUT).await;
        }
        let stopped = tokio::time::timeout(Self::STOP_BOUND, async {
            let mut first = Ok(());
            while let Some(done) = servers.join_next().await {
                first = first.and(flatten(done));
            }
            first
        });
        let stopped = stopped.await.unwrap_or(Ok(())); // past the bound: aborted on drop
        board.publish(backend.tracker().snapshot()); // the drain's ends in the last report
        failed.unwrap_or(Ok(())).and(stopped).map(|()| drained)
    }
}

/// The caller's trace context around the layers that start sessions, if they are traced
/// ([`Backend::otlp_traces`], or `trace_sessions` on the tracker).
#[cfg(feature = "otlp-traces")]
fn trace_context(backend: &Backend) -> Option<livecount_report::otlp::TraceContextLayer> {
    backend
        .tracker()
        .is_traced()
        .then_some(livecount_report::otlp::TraceContextLayer)
}

/// Without `otlp-traces`: no context to carry.
#[cfg(not(feature = "otlp-traces"))]
fn trace_context(_: &Backend) -> Option<tower_layer::Identity> {
    None
}

/// A server task's outcome: its error, or a panic as an error.
fn flatten(done: Result<io::Result<()>, tokio::task::JoinError>) -> io::Result<()> {
    done.map_err(io::Error::other).and_then(|served| served)
}

/// The gRPC server of [`Serve::grpc`].
async fn serve_grpc(
    backend: Backend,
    listener: TcpListener,
    services: Routes,
    stop: CancellationToken,
) -> io::Result<()> {
    let (interval, timeout) = Serve::<()>::GRPC_KEEPALIVE;
    Server::builder()
        .max_concurrent_streams(backend.max_concurrent_streams())
        .http2_keepalive_interval(Some(interval))
        .http2_keepalive_timeout(Some(timeout))
        .layer(GrpcOnlyLayer::new()) // outermost: a 415 is no session
        .layer(tower::util::option_layer(trace_context(&backend)))
        .layer(backend.inband_orca())
        .layer(backend.layer())
        .add_routes(
            services
                .add_service(backend.orca())
                .add_service(backend.health()),
        )
        .serve_with_incoming_shutdown(
            TcpIncoming::from(listener).with_nodelay(Some(true)),
            stop.cancelled_owned(),
        )
        .await
        .map_err(io::Error::other)
}

impl<F: Future<Output = ()> + Send + 'static> IntoFuture for Serve<F> {
    type Output = io::Result<Drained>;
    type IntoFuture = Pin<Box<dyn Future<Output = io::Result<Drained>> + Send>>;

    fn into_future(self) -> Self::IntoFuture {
        Box::pin(self.run())
    }
}

impl<F> fmt::Debug for Serve<F> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Serve")
            .field("backend", &self.backend)
            .field("http", &self.http.len())
            .field("grpc", &self.grpc.is_some())
            .field("agent_check", &self.agent_check.is_some())
            .finish_non_exhaustive()
    }
}
