//! Everything livecount offers a tokio service, mounted in 40 lines of user code: the
//! bodies of `echo` (12), `serve` (22) and `main` (6) as rustfmt lays them out, not counting
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
//! * HAProxy agent-check (`serve_agent_check`): `up N%`, or `drain` while draining;
//! * readiness: `GET /ready` (from `router`) `200`, `503` while draining; gRPC health
//!   (`health_service`) `SERVING`, `NOT_SERVING` while draining.
//!
//! One `LoadBoard` publishes a report from one `SessionTracker` every report interval (the
//! capacity model's default, 10 s), and every encoder serves that same report.
//!
//! A drain that cuts no call that ends in time, when the `CancellationToken` is cancelled
//! (Ctrl-C; SIGTERM in a real deployment): the WebSocket handlers are told to wrap up
//! (`drain_started`; this echo says `draining` once and goes on), then `livecount_tower::drain`
//! refuses new sessions (a WebSocket `503` with `Retry-After`, a Watch `UNAVAILABLE`,
//! counted refused), makes every signal say draining at once (agent-check `drain`, ORCA
//! streams end, `/ready` and `/load`, gRPC health `NOT_SERVING`), lets the open sessions
//! run until they end or `DRAIN` passes, and ends the rest `Shutdown`: WebSockets close
//! 1012 "service restart", Watch streams end `UNAVAILABLE` (a `Watch` never ends by itself,
//! so an open one is always cut). Only then do the servers stop accepting and finish, for
//! `DRAIN` at most; a server's own error is returned.
//!
//! `cargo run -p livecount-tower --example full_service`, then a WebSocket client on
//! `ws://127.0.0.1:3000/session`, `curl 127.0.0.1:3000/load` (or `/metrics`), a gRPC
//! client on `127.0.0.1:50051` (`grpc.health.v1.Health/Watch`, ORCA's
//! `StreamCoreMetrics`) and HAProxy's agent-check on `127.0.0.1:9101`; Ctrl-C drains.
//! `tests/full_service.rs` runs `serve` on loopback and checks each of these.

use std::error::Error;
use std::future::pending;
use std::sync::Arc;
use std::time::Duration;

use axum::extract::{State, WebSocketUpgrade};
use axum::{extract::ws::Message, response::Response, routing::get};
use futures_util::FutureExt;
use livecount_capacity::CapacityConfig;
use livecount_report::{LoadBoard, OrcaService, health_service, router, serve_agent_check};
use livecount_session::SessionTracker;
use livecount_tower::{SessionLayer, WebSocketSessions, drain};
use tokio::net::TcpListener;
use tokio_util::sync::CancellationToken;
use tokio_util::task::AbortOnDropHandle;
use tonic::transport::{Server, server::TcpIncoming};

/// The drain's deadline: open sessions may finish this long after the signal; the ones
/// still open then end `Shutdown` (WebSocket 1012, gRPC `UNAVAILABLE`). Keep it below
/// Kubernetes' `terminationGracePeriodSeconds` (30 s by default), minus the time to stop.
pub(crate) const DRAIN: Duration = Duration::from_secs(5);

/// The most sessions (WebSockets and Watch streams together) the service holds at once.
#[allow(dead_code)] // `main`'s: the integration test caps its own tracker
const MAX_SESSIONS: u64 = 1000;

/// `/session`: echoes every message back until the client or the server closes; tells the
/// client once when the server begins to drain (time to wrap up and reconnect elsewhere).
async fn echo(ws: WebSocketUpgrade, State(sessions): State<WebSocketSessions>) -> Response {
    sessions.upgrade(ws, |mut socket, _session| async move {
        let (mut wrap_up, mut told) = (Box::pin(socket.drain_started()), false);
        loop {
            tokio::select! {
                () = &mut wrap_up, if !told => (told, _) = (true, socket.send(Message::text("draining")).await),
                message = socket.recv() => match message {
                    Some(Ok(message)) => drop(socket.send(message).await), // a close's echo fails
                    _ => break,
                },
            }
        }
    })
}

/// Serves WebSockets, `/load`, `/metrics` and `/ready` on `http`, Health and ORCA on
/// `grpc` and agent-check on `check`, sessions counted on `tracker`, until `shutdown` is
/// cancelled and the drain is over.
pub(crate) async fn serve(
    http: TcpListener,
    grpc: TcpListener,
    check: TcpListener,
    tracker: SessionTracker,
    shutdown: CancellationToken,
) -> Result<(), Box<dyn Error + Send + Sync>> {
    let (config, stop) = (CapacityConfig::builder().build()?, CancellationToken::new());
    let cap = tracker.max_sessions().unwrap_or(u64::MAX); // capacity never above the cap
    let board = Arc::new(LoadBoard::builder("b1", config).max_sessions(cap).build());
    let app = router(board.clone()).route("/session", get(echo));
    let app = app.with_state(WebSocketSessions::new(tracker.clone(), shutdown.clone()));
    let http =
        livecount_tower::serve(http, app).with_graceful_shutdown(stop.clone().cancelled_owned());
    let watch = |r: &http::Request<_>| r.uri().path() == "/grpc.health.v1.Health/Watch";
    let grpc = Server::builder()
        .layer(SessionLayer::new(tracker.clone()).with_predicate(watch))
        .add_service(health_service(&board))
        .add_service(OrcaService::server(board.clone()))
        // Nagle off: `serve_with_incoming` ignores `Server::tcp_nodelay`, and with Nagle on a
        // stream's response headers and first frame wait for the peer's delayed ACK (~40 ms).
        .serve_with_incoming_shutdown(
            TcpIncoming::from(grpc).with_nodelay(Some(true)),
            stop.clone().cancelled_owned(),
        );
    let http = AbortOnDropHandle::new(tokio::spawn(http.into_future()));
    let grpc = AbortOnDropHandle::new(tokio::spawn(grpc));
    let _publisher = AbortOnDropHandle::new(board.spawn_publisher(tracker.clone()));
    let _check = AbortOnDropHandle::new(tokio::spawn(serve_agent_check(check, board.clone())));
    shutdown.cancelled().await; // the signal: WebSocket handlers see it and wrap up
    drain(&tracker, &board, DRAIN, pending()).await; // refuse, say draining, wait, cut the rest
    stop.cancel(); // only now the servers stop accepting
    let stopped = tokio::time::timeout(DRAIN, async { (http.await, grpc.await) }).await;
    stopped.map_or(Ok(()), |(http, grpc)| Ok(http.and(grpc)??)) // a server's error
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
