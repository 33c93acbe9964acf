//! Everything livecount offers a tokio service, from one [`Backend`], in 14 lines of user
//! code (the bodies of `echo`, `backend`, `serve` and `main` as rustfmt lays them out, not
//! counting `use` lines, signatures, comments and the constants):
//!
//! * admission: at most `MAX_SESSIONS` sessions, WebSockets and gRPC streams together,
//!   exactly; past it a WebSocket upgrade gets `503` with `Retry-After` and a gRPC call
//!   `RESOURCE_EXHAUSTED`, and the load report's capacity never exceeds the cap;
//! * WebSocket sessions: an echo on `/session`, each held to the default limits (an hour at
//!   most, 10 s to send a first message, 60 s of silence, 30 s for a send the client does
//!   not read, 64 KiB messages) and ended with its reason and close code;
//! * a gRPC stream counted as a session until it ends: the gRPC health service's
//!   server-streaming `Health/Watch`, standing in for your own streaming service
//!   (`own_services.rs` mounts one);
//! * `/load` (JSON), `/metrics` (Prometheus) and `/ready`; ORCA out-of-band and in-band and
//!   gRPC health on the gRPC port; HAProxy's agent-check;
//! * the drain on Ctrl-C (SIGTERM in a real deployment): each open socket is told
//!   `draining`, new sessions are refused, every signal says draining, open sessions run
//!   for up to `DRAIN`, the rest are ended (WebSocket 1012, gRPC `UNAVAILABLE`), and only
//!   then do the servers stop.
//!
//! `cargo run -p livecount-service --example full_service`, then a WebSocket client on
//! `ws://127.0.0.1:3000/session`, `curl 127.0.0.1:3000/load`, a gRPC client on
//! `127.0.0.1:50051` and HAProxy's agent-check on `127.0.0.1:9101`; Ctrl-C drains.
//! `tests/full_service.rs` runs `serve` on loopback and checks each of these.

use std::future::Future;
use std::time::Duration;

use axum::extract::ws::Message;
use axum::extract::{State, WebSocketUpgrade};
use axum::{response::Response, routing::get};
use futures_util::FutureExt;
use livecount_service::Backend;
use tokio::net::TcpListener;
use tokio::signal::ctrl_c;

/// The drain's deadline: open sessions may finish this long after the signal.
pub(crate) const DRAIN: Duration = Duration::from_secs(5);

/// The most sessions (WebSockets and Watch streams together) the service holds at once.
pub(crate) const MAX_SESSIONS: u64 = 1000;

/// The gRPC stream counted as a session.
const WATCH: &str = "/grpc.health.v1.Health/Watch";

/// `/session`: echoes every message back until the client or the server closes.
async fn echo(ws: WebSocketUpgrade, State(backend): State<Backend>) -> Response {
    backend.websocket(ws, |mut socket, _session| async move {
        while let Some(Ok(message)) = socket.recv().await
            && socket.send(message).await.is_ok()
        {}
    })
}

/// The service's backend: capped, counting `Health/Watch` streams, telling sockets when it
/// drains.
pub(crate) fn backend(max_sessions: u64) -> Backend {
    let config = Backend::builder("b1").max_sessions(max_sessions);
    let config = config.count_grpc(|p| p == WATCH).drain_deadline(DRAIN);
    config.drain_notice(Message::text("draining")).build()
}

/// Serves WebSockets, `/load`, `/metrics` and `/ready` on `http`, Health and ORCA on `grpc`
/// and agent-check on `check` until `shutdown`, then drains.
pub(crate) async fn serve(
    [http, grpc, check]: [TcpListener; 3],
    backend: Backend,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> std::io::Result<()> {
    let app = backend.routes().route("/session", get(echo));
    let served = backend.serve(shutdown).http(http, app);
    served.grpc(grpc).agent_check(check).await.map(drop)
}

#[allow(dead_code)] // the integration test includes this file and runs `serve` itself
#[tokio::main]
async fn main() -> std::io::Result<()> {
    let bind = |port| TcpListener::bind(("127.0.0.1", port));
    let listeners = [bind(3000).await?, bind(50051).await?, bind(9101).await?];
    serve(listeners, backend(MAX_SESSIONS), ctrl_c().map(drop)).await
}
