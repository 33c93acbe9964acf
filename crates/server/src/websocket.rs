//! HTTP: WebSocket sessions at `/session`, and the load board's `/load`, `/metrics` and
//! `/prequal` (from `livecount-report`), served by [`HttpServer`](crate::http_server::HttpServer).

use std::sync::Arc;

use axum::Router;
use axum::extract::State;
use axum::extract::ws::{CloseFrame, Message, WebSocket, WebSocketUpgrade};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use futures_util::{SinkExt, StreamExt};
use tokio::sync::{OwnedSemaphorePermit, mpsc};

use crate::Agent;
use crate::conversation::{Incoming, Outgoing};
use crate::protocol::ClientFrame;

/// `/session`, `/load`, `/metrics`, `/prequal` and `/healthz`.
pub(crate) fn router(agent: Arc<Agent>) -> Router {
    Router::new()
        .route("/session", get(session_route))
        .with_state(Arc::clone(&agent))
        .merge(scrape_router(&agent))
}

/// `/load`, `/metrics`, `/prequal` and `/healthz` alone, for a separate scrape address.
pub(crate) fn scrape_router(agent: &Agent) -> Router {
    livecount_report::router(Arc::clone(&agent.board)).route("/healthz", get(|| async { "ok\n" }))
}

async fn session_route(State(agent): State<Arc<Agent>>, ws: WebSocketUpgrade) -> Response {
    let permit = match agent.admit() {
        Ok(permit) => permit,
        Err(refusal) => {
            return (StatusCode::SERVICE_UNAVAILABLE, refusal.message()).into_response();
        }
    };
    let bytes = agent.config.max_frame_bytes;
    ws.max_message_size(bytes)
        .max_frame_size(bytes)
        .on_upgrade(move |socket| async move { websocket_session(&agent, permit, socket).await })
}

/// Maps WebSocket messages to [`Incoming`]; pings and pongs are handled by axum.
fn incoming(msg: Result<Message, axum::Error>) -> Option<Incoming> {
    match msg {
        Ok(Message::Text(text)) => Some(match ClientFrame::parse(text.as_str()) {
            Ok(frame) => Incoming::Frame(frame),
            Err(e) => Incoming::Malformed(e),
        }),
        Ok(Message::Binary(_)) => Some(Incoming::Malformed(
            "binary frames are not supported: send JSON text".into(),
        )),
        Ok(Message::Ping(_) | Message::Pong(_)) => None,
        Ok(Message::Close(_)) => Some(Incoming::Closed),
        Err(e) => Some(transport_error(e)),
    }
}

/// Classifies a WebSocket read error by its type (axum wraps tungstenite's error):
/// a message above the limit is 1009, invalid UTF-8 in a text frame (or a close reason)
/// 1007, any other framing violation 1002 (RFC 6455 §7.4.1); I/O errors and a reset
/// are a lost connection.
///
/// The close frame can still be sent: tungstenite fails only the read (its stream half
/// is fused, the connection stays `Active`), so the writer sends it as any other.
///
/// A control frame that declares more than `max_frame_bytes` is refused by tungstenite
/// before its opcode is judged, so it gets 1009, not 1002; one of 126 bytes up to the
/// limit is a protocol error (1002).
fn transport_error(e: axum::Error) -> Incoming {
    use tungstenite::Error as Ws;
    use tungstenite::error::ProtocolError;
    let Ok(e) = e.into_inner().downcast::<Ws>() else {
        return Incoming::Lost;
    };
    match *e {
        Ws::Capacity(_) => Incoming::TooLarge,
        Ws::Utf8(_) => Incoming::Violation {
            code: 1007,
            reason: "invalid UTF-8",
        },
        Ws::Protocol(ProtocolError::ResetWithoutClosingHandshake) => Incoming::Lost,
        Ws::Protocol(_) => Incoming::Violation {
            code: 1002,
            reason: "protocol error",
        },
        _ => Incoming::Lost,
    }
}

/// Runs a session on an upgraded WebSocket. The writer task is bounded: a frame the
/// socket does not take within the write timeout ends it (dropping its half of the
/// socket, so the session sees `Disconnected`), and once the session has ended it gets
/// one write timeout to say its last frames before it is aborted.
async fn websocket_session(agent: &Agent, slot: OwnedSemaphorePermit, socket: WebSocket) {
    let (mut sink, stream) = socket.split();
    let (tx, mut rx) = mpsc::channel::<Outgoing>(64);
    let limit = agent.config.write_timeout;
    let mut writer = tokio::spawn(async move {
        while let Some(out) = rx.recv().await {
            let msg = match out {
                Outgoing::Frame(frame) => Message::Text(frame.to_json().into()),
                Outgoing::Close { code, reason } => Message::Close(Some(CloseFrame {
                    code,
                    reason: reason.into(),
                })),
            };
            let closing = matches!(msg, Message::Close(_));
            let sent = tokio::time::timeout(limit, sink.send(msg)).await;
            if !matches!(sent, Ok(Ok(()))) {
                return;
            }
            if closing {
                break;
            }
        }
        let _ = tokio::time::timeout(limit, sink.close()).await;
    });
    let frames = stream.filter_map(|msg| std::future::ready(incoming(msg)));
    agent.run_session(slot, Box::pin(frames), tx).await;
    if tokio::time::timeout(limit, &mut writer).await.is_err() {
        writer.abort();
    }
}
