//! HTTP: WebSocket sessions at `/session`, the Backend's (admission at the tracker's cap,
//! the session's limits, the drain), and its `/load`, `/metrics`, `/ready` and `/prequal`.
//!
//! What is the agent's own here is only its protocol over the socket: JSON text frames in,
//! [`converse`] in between, JSON text frames out, and the ending the protocol decides
//! (`bye`, a bad frame, replies never read) as the library's [`SocketEnd`], whose last words
//! go out after the session has ended.

use std::sync::Arc;

use axum::Router;
use axum::extract::State;
use axum::extract::ws::{Message, WebSocketUpgrade};
use axum::response::Response;
use axum::routing::get;
use futures_util::{SinkExt, StreamExt};
use livecount_service::{Backend, EndHandle, EndReason, TrackedSocket};
use livecount_tower::websocket::SocketEnd;
use tokio::sync::mpsc;

use crate::Agent;
use crate::conversation::{Ending, Incoming, Outgoing, converse};
use crate::protocol::ClientFrame;

/// `/session`, `/load`, `/metrics`, `/ready`, `/prequal` and `/healthz`, every response (a
/// WebSocket upgrade's too) with the in-band ORCA header `--inband-orca` chose.
pub(crate) fn router(agent: &Arc<Agent>) -> Router<Backend> {
    Router::new()
        .route("/session", get(session_route))
        .with_state(Arc::clone(agent))
        .merge(scrape_router(&agent.backend))
        .layer(agent.backend.inband_orca())
}

/// `/load`, `/metrics`, `/ready`, `/prequal` and `/healthz` alone, for a separate scrape
/// address.
pub(crate) fn scrape_router(backend: &Backend) -> Router<Backend> {
    backend.routes().route("/healthz", get(|| async { "ok\n" }))
}

async fn session_route(State(agent): State<Arc<Agent>>, ws: WebSocketUpgrade) -> Response {
    let backend = agent.backend.clone();
    backend.websocket(ws, move |socket, handle| {
        websocket_session(agent, socket, handle)
    })
}

/// Maps WebSocket messages to [`Incoming`]; pings and pongs are axum's. A read error is
/// [`Incoming::Lost`]: the library has classified it (1009 for a message above
/// `--max-frame-bytes`, 1002 / 1007 for RFC 6455 violations, `Disconnected` for a lost
/// connection), and its word on the ending wins.
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
        Err(_) => Some(Incoming::Lost),
    }
}

/// Runs the agent's protocol on an upgraded socket: the conversation and the writer that
/// turns its frames into text messages. The writer's sends are watched by the library's
/// write timeout (a client that stopped reading ends `Disconnected`); once the conversation
/// has its ending, the writer is dropped with whatever it still held, and the ending's last
/// words go out after the end.
async fn websocket_session(
    agent: Arc<Agent>,
    socket: TrackedSocket,
    handle: EndHandle,
) -> SocketEnd {
    let (mut sink, stream) = socket.split();
    let (tx, mut rx) = mpsc::channel::<Outgoing>(64);
    let writer = async move {
        while let Some(out) = rx.recv().await {
            // The conversation's own closes are the library's to send, after the end.
            if let Outgoing::Frame(frame) = out
                && sink
                    .send(Message::Text(frame.to_json().into()))
                    .await
                    .is_err()
            {
                return;
            }
        }
    };
    let frames = stream.filter_map(|msg| std::future::ready(incoming(msg)));
    let clock = Some(agent.first_chunk_clock());
    let talk = converse(handle, frames, tx, agent.pace(), clock);
    tokio::pin!(talk, writer);
    let ending = tokio::select! {
        ending = &mut talk => ending,
        // A failed send: the conversation sees its writer gone and stops.
        () = &mut writer => talk.await,
    };
    socket_end(ending)
}

/// The library's ending for the conversation's.
fn socket_end(ending: Ending) -> SocketEnd {
    match ending {
        Ending::Protocol {
            reason,
            farewell,
            close,
        } => {
            let mut end = SocketEnd::new(reason);
            if let Some(frame) = farewell {
                end = end.say(Message::Text(frame.to_json().into()));
            }
            match close {
                Some((code, why)) => end.close(code, why),
                None => end,
            }
        }
        Ending::Lost | Ending::WriterGone => SocketEnd::new(EndReason::Disconnected),
        Ending::Elsewhere(reason) => SocketEnd::new(reason),
    }
}
