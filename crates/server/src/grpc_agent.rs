//! Sessions over gRPC: `livecount.agent.v1.Agent/Converse`, one bidirectional stream per
//! session, admitted and run exactly like a WebSocket session.
//!
//! The WebSocket close codes the conversation ends with become the call's status:
//!
//! | ending | close code | gRPC status |
//! | --- | --- | --- |
//! | `bye`, maximum session length | 1000 | OK (the response stream ends) |
//! | client ended its stream | — | OK |
//! | shutdown | 1001 | `UNAVAILABLE` "server shutting down" |
//! | bad frame (an `Error` frame is sent first) | 1007 | `INVALID_ARGUMENT` with the error |
//! | idle timeout | 1008 | `DEADLINE_EXCEEDED` "idle timeout" |
//! | message above `--max-frame-bytes` | 1009 | `RESOURCE_EXHAUSTED` |
//!
//! Refused before the session starts: `RESOURCE_EXHAUSTED` at `--max-sessions`,
//! `UNAVAILABLE` while draining, with the text of the HTTP 503.

use std::pin::Pin;
use std::sync::Arc;

use futures_util::{Stream, StreamExt, stream};
use tokio::sync::mpsc;
use tonic::{Code, Request, Response, Status, Streaming};

use crate::Agent;
use crate::agent::Refusal;
use crate::conversation::{Incoming, Outgoing};
use crate::generated::livecount::agent::v1 as pb;
use crate::protocol::{ClientFrame, ServerFrame};

/// The `Agent` gRPC service (`Converse`), serving sessions of one [`Agent`].
#[derive(Debug, Clone)]
pub struct AgentService {
    agent: Arc<Agent>,
}

impl AgentService {
    /// The service for `agent`, wrapped for a tonic server, its message size limited to
    /// the agent's `max_frame_bytes`.
    pub fn server(agent: Arc<Agent>) -> pb::agent_server::AgentServer<Self> {
        let limit = agent.config.max_frame_bytes;
        pb::agent_server::AgentServer::new(Self { agent }).max_decoding_message_size(limit)
    }
}

/// The response stream of a session.
type Frames = Pin<Box<dyn Stream<Item = Result<pb::ServerFrame, Status>> + Send>>;

#[tonic::async_trait]
impl pb::agent_server::Agent for AgentService {
    type ConverseStream = Frames;

    async fn converse(
        &self,
        request: Request<Streaming<pb::ClientFrame>>,
    ) -> Result<Response<Frames>, Status> {
        let permit = self.agent.admit().map_err(|r| refusal_status(&r))?;
        let (tx, rx) = mpsc::channel::<Outgoing>(64);
        let incoming = incoming(request.into_inner(), tx.clone());
        let agent = Arc::clone(&self.agent);
        tokio::spawn(async move {
            agent.run_session(permit, incoming, tx).await;
        });
        Ok(Response::new(outgoing(rx)))
    }
}

/// A refusal as a status: at capacity is `RESOURCE_EXHAUSTED`, draining `UNAVAILABLE`.
fn refusal_status(refusal: &Refusal) -> Status {
    let message = refusal.message();
    let message = message.trim_end();
    match refusal {
        Refusal::Draining => Status::unavailable(message),
        Refusal::AtCapacity { .. } => Status::resource_exhausted(message),
    }
}

/// A protobuf client frame as a protocol frame, range-checked like a JSON one.
fn client_frame(frame: pb::ClientFrame) -> Incoming {
    use pb::client_frame::Frame;
    let frame = match frame.frame {
        Some(Frame::Speak(pb::Speak { chunks })) => ClientFrame::Speak { chunks },
        Some(Frame::Interrupt(_)) => ClientFrame::Interrupt,
        Some(Frame::Idle(_)) => ClientFrame::Idle,
        Some(Frame::Bye(_)) => ClientFrame::Bye,
        None => {
            return Incoming::Malformed(
                "empty frame: set one of speak, interrupt, idle or bye".into(),
            );
        }
    };
    match frame.validate() {
        Ok(frame) => Incoming::Frame(frame),
        Err(message) => Incoming::Malformed(message),
    }
}

/// The request stream as [`Incoming`]: its end is `Closed`, an error `Lost` (or
/// `TooLarge` above the size limit). The response stream being dropped (the client
/// went away) is `Lost` too, so the session ends even while it only sends.
fn incoming(
    requests: Streaming<pb::ClientFrame>,
    out: mpsc::Sender<Outgoing>,
) -> Pin<Box<dyn Stream<Item = Incoming> + Send>> {
    let frames = requests
        .map(|item| match item {
            Ok(frame) => client_frame(frame),
            Err(status) if status.code() == Code::OutOfRange => Incoming::TooLarge,
            Err(status) if status.code() == Code::ResourceExhausted => Incoming::TooLarge,
            Err(_) => Incoming::Lost,
        })
        .chain(stream::once(async { Incoming::Closed }));
    let gone = stream::once(async move { out.closed().await }).map(|()| Incoming::Lost);
    Box::pin(stream::select(frames, gone))
}

/// The conversation's output as the response stream: frames, then the end of the
/// stream or a status, from the close code.
fn outgoing(rx: mpsc::Receiver<Outgoing>) -> Frames {
    // The state: the channel (None once a close was mapped), the last error frame's text.
    let state = (Some(rx), None::<String>);
    Box::pin(stream::unfold(state, |(rx, last_error)| async move {
        let mut rx = rx?;
        match rx.recv().await? {
            Outgoing::Frame(frame) => {
                let last_error = match &frame {
                    ServerFrame::Error { message } => Some(message.clone()),
                    _ => last_error,
                };
                Some((Ok(server_frame(frame)), (Some(rx), last_error)))
            }
            Outgoing::Close { code, reason } => {
                let status = close_status(code, reason, last_error)?;
                Some((Err(status), (None, None)))
            }
        }
    }))
}

/// The status for a WebSocket close code; `None` for a normal end (OK).
fn close_status(code: u16, reason: &str, last_error: Option<String>) -> Option<Status> {
    Some(match code {
        1000 => return None,
        1001 => Status::unavailable(reason),
        1007 => Status::invalid_argument(last_error.unwrap_or_else(|| reason.into())),
        1008 => Status::deadline_exceeded(reason),
        1009 => Status::resource_exhausted(reason),
        _ => Status::internal(reason),
    })
}

/// A protocol frame as a protobuf frame.
fn server_frame(frame: ServerFrame) -> pb::ServerFrame {
    use pb::server_frame::Frame;
    let frame = match frame {
        ServerFrame::Chunk { seq } => Frame::Chunk(pb::Chunk { seq }),
        ServerFrame::Done { chunks } => Frame::Done(pb::Done { chunks }),
        ServerFrame::Interrupted { sent } => Frame::Interrupted(pb::Interrupted { sent }),
        ServerFrame::Error { message } => Frame::Error(pb::Error { message }),
    };
    pb::ServerFrame { frame: Some(frame) }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn frames_map_both_ways_and_bad_ones_are_malformed() {
        let speak = |chunks| pb::ClientFrame {
            frame: Some(pb::client_frame::Frame::Speak(pb::Speak { chunks })),
        };
        assert_eq!(
            client_frame(speak(3)),
            Incoming::Frame(ClientFrame::Speak { chunks: 3 })
        );
        assert!(matches!(client_frame(speak(0)), Incoming::Malformed(m) if m.contains("chunks")));
        assert!(
            matches!(client_frame(pb::ClientFrame { frame: None }), Incoming::Malformed(m) if m.contains("empty"))
        );
        assert_eq!(
            server_frame(ServerFrame::Done { chunks: 2 }).frame,
            Some(pb::server_frame::Frame::Done(pb::Done { chunks: 2 }))
        );
        assert!(close_status(1000, "bye", None).is_none());
        let idle = close_status(1008, "idle timeout", None).unwrap();
        assert_eq!(
            (idle.code(), idle.message()),
            (Code::DeadlineExceeded, "idle timeout")
        );
        let bad = close_status(1007, "invalid frame", Some("why".into())).unwrap();
        assert_eq!((bad.code(), bad.message()), (Code::InvalidArgument, "why"));
    }
}
