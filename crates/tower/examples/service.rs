//! A tokio service with livecount sessions: HTTP routes counted by `SessionLayer` until their
//! response bodies end, and a WebSocket route counted by `WebSocketSessions`, whose sockets
//! end (`Shutdown`, close 1012 "service restart") once the server has shut down gracefully.
//! No drain deadline here: `livecount-service`'s `Backend` drains and lets calls finish.
//!
//! `cargo run -p livecount-tower --example service`, then `curl -N localhost:3000/ticks` or a
//! WebSocket client on `ws://localhost:3000/ws`; Ctrl-C prints the tracker's snapshot.

use std::convert::Infallible;
use std::time::Duration;

use axum::body::Body;
use axum::extract::ws::Message;
use axum::extract::{Extension, State, WebSocketUpgrade};
use axum::response::Response;
use axum::{Router, routing::get};
use futures_util::StreamExt;
use livecount_session::{EndHandle, EndReason, SessionTracker};
use livecount_tower::{SessionLayer, WebSocketSessions};
use tokio::net::TcpListener;
use tokio_util::sync::CancellationToken;

/// `/hello`, `/ticks` (a tick every 100 ms until the client goes or the server stops) and
/// `/ws` (echo), all counted on `tracker`.
fn app(tracker: SessionTracker) -> Router {
    Router::new()
        .route("/hello", get(|| async { "hello\n" }))
        .route("/ticks", get(ticks))
        .route_layer(SessionLayer::new(tracker.clone()))
        .route("/ws", get(echo))
        .with_state(WebSocketSessions::new(tracker))
}

async fn ticks(Extension(session): Extension<EndHandle>) -> Body {
    let ticks = futures_util::stream::unfold(0u64, |n| async move {
        tokio::time::sleep(Duration::from_millis(100)).await;
        Some((Ok::<_, Infallible>(format!("tick {n}\n")), n + 1))
    });
    Body::from_stream(ticks.take_until(session.drain_started()))
}

async fn echo(ws: WebSocketUpgrade, State(sessions): State<WebSocketSessions>) -> Response {
    sessions.upgrade(ws, |mut socket, _session| async move {
        while let Some(Ok(message)) = socket.recv().await {
            if matches!(message, Message::Close(_)) {
                break; // the peer's close, answered by the socket itself
            }
            socket.send(message).await?;
        }
        Ok::<_, axum::Error>(())
    })
}

/// Serves `app` on `listener` until `shutdown` is cancelled, then ends the sockets still
/// open (axum's graceful shutdown does not wait for upgraded connections).
pub(crate) async fn serve(
    listener: TcpListener,
    tracker: SessionTracker,
    shutdown: CancellationToken,
) -> std::io::Result<()> {
    let drain = tracker.clone();
    let signal = async move {
        shutdown.cancelled().await;
        drain.begin_drain(); // new sessions refused, streams and sockets told
    };
    axum::serve(listener, app(tracker.clone()))
        .with_graceful_shutdown(signal)
        .await?;
    tracker.end_all(EndReason::Shutdown);
    Ok(())
}

#[allow(dead_code)] // the integration test includes this file and runs `serve` itself
#[tokio::main]
async fn main() -> std::io::Result<()> {
    let (tracker, shutdown) = (SessionTracker::new(), CancellationToken::new());
    let ctrl_c = shutdown.clone();
    tokio::spawn(async move {
        let _ = tokio::signal::ctrl_c().await;
        ctrl_c.cancel();
    });
    serve(
        TcpListener::bind("127.0.0.1:3000").await?,
        tracker.clone(),
        shutdown,
    )
    .await?;
    println!("{:?}", tracker.snapshot());
    Ok(())
}
