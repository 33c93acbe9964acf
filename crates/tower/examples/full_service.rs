//! Everything livecount offers a tokio service, mounted in 33 lines of user code: the
//! bodies of `echo` (5), `serve` (22) and `main` (6) as rustfmt lays them out, not counting
//! `use` lines, signatures, comments and the `DRAIN` and `MAX_SESSIONS` constants.
//!
//! * admission: the tracker is capped at `MAX_SESSIONS`, exactly, for WebSockets and gRPC
//!   streams together; past it a WebSocket upgrade gets `503` with `Retry-After` and a
//!   gRPC call `RESOURCE_EXHAUSTED`, before anything is counted, and the load report's
//!   capacity never exceeds the cap;
//! * WebSocket sessions: an echo on `/session`, counted by `WebSocketSessions` and held to
//!   its default limits (an hour at most, 60 s of client silence, 30 s for a send the
//!   client does not read, 64 KiB messages), each ending its session with its reason and
//!   close code;
//! * a tonic streaming RPC counted as a session until its stream ends: the gRPC health
//!   service's server-streaming `Health/Watch` (standing in for your own streaming
//!   service), under a `SessionLayer` (an hour at most, 30 s for a frame the client does
//!   not read) whose predicate counts only that path, so ORCA's own stream is no session;
//! * `/load` (JSON) and `/metrics` (Prometheus text): `livecount_report::router`;
//! * the HTTP side (WebSockets, `/load`, `/metrics`) served by `livecount_tower::serve`
//!   rather than `axum::serve`: a request-head timeout, pending connections bounded below
//!   the descriptor limit and a bounded graceful shutdown, so slowloris clients cannot
//!   exhaust the process's descriptors;
//! * ORCA out-of-band load reports (`OrcaService`) on the same tonic server;
//! * HAProxy agent-check (`serve_agent_check`): `up N%`, or `drain` while shutting down.
//!
//! One `LoadBoard` publishes a report from one `SessionTracker` every report interval (the
//! capacity model's default, 10 s), and every encoder serves that same report.
//!
//! Graceful shutdown, when the `CancellationToken` is cancelled: WebSockets end `Shutdown`
//! with a 1001 close, the board drains (agent-check says `drain`, ORCA streams end), and
//! both servers stop accepting and wait for their streams, for `DRAIN` at most. A stream
//! that does not end by itself (a `Watch` never does) is cut off there: its session is
//! counted ended `Shutdown` (`end_all`) and `serve` returns; its connection closes when the
//! runtime stops. A server's own error is returned once the drain is over.
//!
//! `cargo run -p livecount-tower --example full_service`, then a WebSocket client on
//! `ws://127.0.0.1:3000/session`, `curl 127.0.0.1:3000/load` (or `/metrics`), a gRPC
//! client on `127.0.0.1:50051` (`grpc.health.v1.Health/Watch`, ORCA's
//! `StreamCoreMetrics`) and HAProxy's agent-check on `127.0.0.1:9101`; Ctrl-C drains.
//! `tests/full_service.rs` runs `serve` on loopback and checks each of these.

use std::error::Error;
use std::sync::Arc;
use std::time::Duration;

use axum::extract::{State, WebSocketUpgrade};
use axum::{response::Response, routing::get};
use futures_util::FutureExt;
use livecount_capacity::CapacityConfig;
use livecount_report::{LoadBoard, OrcaService, router, serve_agent_check};
use livecount_session::{EndReason, SessionTracker};
use livecount_tower::{SessionLayer, WebSocketSessions};
use tokio::net::TcpListener;
use tokio_util::sync::CancellationToken;
use tokio_util::task::AbortOnDropHandle;
use tonic::transport::{Server, server::TcpIncoming};

/// The longest a graceful shutdown waits for streams to end (a real service waits a few of
/// its balancer's check intervals).
pub(crate) const DRAIN: Duration = Duration::from_secs(5);

/// The most sessions (WebSockets and Watch streams together) the service holds at once.
#[allow(dead_code)] // `main`'s: the integration test caps its own tracker
const MAX_SESSIONS: u64 = 1000;

/// `/session`: echoes every message back until the client or the server closes.
async fn echo(ws: WebSocketUpgrade, State(sessions): State<WebSocketSessions>) -> Response {
    sessions.upgrade(ws, |mut socket, _session| async move {
        while let Some(Ok(message)) = socket.recv().await {
            let _ = socket.send(message).await; // echoing a close fails; the next recv ends
        }
    })
}

/// Serves WebSockets, `/load` and `/metrics` on `http`, Health and ORCA on `grpc` and
/// agent-check on `check`, sessions counted on `tracker`, until `shutdown` is cancelled
/// and the drain is over.
pub(crate) async fn serve(
    http: TcpListener,
    grpc: TcpListener,
    check: TcpListener,
    tracker: SessionTracker,
    shutdown: CancellationToken,
) -> Result<(), Box<dyn Error + Send + Sync>> {
    let config = CapacityConfig::builder().build()?;
    let cap = tracker.max_sessions().unwrap_or(u64::MAX); // capacity never above the cap
    let board = Arc::new(LoadBoard::builder("b1", config).max_sessions(cap).build());
    let app = router(board.clone()).route("/session", get(echo));
    let app = app.with_state(WebSocketSessions::new(tracker.clone(), shutdown.clone()));
    let http = livecount_tower::serve(http, app)
        .with_graceful_shutdown(shutdown.clone().cancelled_owned());
    let watch = |r: &http::Request<_>| r.uri().path() == "/grpc.health.v1.Health/Watch";
    let grpc = Server::builder()
        .layer(SessionLayer::new(tracker.clone()).with_predicate(watch))
        .add_service(tonic_health::server::health_reporter().1)
        .add_service(OrcaService::server(board.clone()))
        .serve_with_incoming_shutdown(TcpIncoming::from(grpc), shutdown.clone().cancelled_owned());
    let http = AbortOnDropHandle::new(tokio::spawn(http.into_future()));
    let grpc = AbortOnDropHandle::new(tokio::spawn(grpc));
    let _publisher = AbortOnDropHandle::new(board.spawn_publisher(tracker.clone()));
    let _check = AbortOnDropHandle::new(tokio::spawn(serve_agent_check(check, board.clone())));
    shutdown.cancelled().await; // WebSockets close with 1001, the servers stop accepting
    board.set_draining(tracker.snapshot()); // agent-check says drain, ORCA streams end
    let drained = tokio::time::timeout(DRAIN, async { (http.await, grpc.await) }).await;
    tracker.end_all(EndReason::Shutdown); // the streams the drain cut off (a Watch never ends)
    drained.map_or(Ok(()), |(http, grpc)| Ok(http.and(grpc)??)) // a server's error
}

#[allow(dead_code)] // the integration test includes this file and runs `serve` itself
#[tokio::main]
async fn main() -> Result<(), Box<dyn Error + Send + Sync>> {
    let shutdown = CancellationToken::new();
    let bind = |port| TcpListener::bind(("127.0.0.1", port));
    let (http, grpc, check) = (bind(3000).await?, bind(50051).await?, bind(9101).await?);
    let tracker = SessionTracker::with_max_sessions(MAX_SESSIONS);
    let served = serve(http, grpc, check, tracker, shutdown.clone());
    tokio::join!(served, tokio::signal::ctrl_c().map(|_| shutdown.cancel())).0
}
