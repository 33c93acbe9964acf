//! Sessions over gRPC: `livecount.agent.v1.Agent/Converse`, one bidirectional stream per
//! session, counted, admitted and bounded by the `livecount_service::Backend`'s layer on
//! its gRPC server (the handle a service of your own mounts), on the tracker the WebSocket
//! sessions share. The server is the Backend's too: ORCA and gRPC health beside
//! `Converse`, in-band ORCA in the trailers, HTTP 415 for requests that are not gRPC, at
//! most 100 streams per HTTP/2 connection, keepalive pings, Nagle off.
//!
//! # Endings
//!
//! Every call ends with exactly one status and its session with exactly one reason. The
//! rows marked *layer* are `livecount_tower`'s (its limits, the client's deadline, the
//! request body's failures); the rest are this agent's protocol:
//!
//! | ending | session ends | gRPC status |
//! | --- | --- | --- |
//! | `bye` | `Completed` | OK (the response stream ends) |
//! | maximum session length (`--max-session-secs`; *layer*) | `TimedOut` | `DEADLINE_EXCEEDED` "max session length" |
//! | the client stopped reading (`--write-timeout-secs`; *layer*) | `Disconnected`, the count freed at once | — (nobody reads it) |
//! | client half-closed its stream (no response in flight) | `Completed` | OK |
//! | client half-closed while a response streams | `Completed` once `done` is sent | OK |
//! | client reset the stream with `CANCEL` (the request body fails with the reset; *layer*) | `Cancelled` | — (nobody reads it) |
//! | client reset or dropped the call after half-closing (the transport drops the response) | `Cancelled` | — |
//! | connection lost, or the stream reset with another code (a proxy's `INTERNAL_ERROR` for its client's lost connection; the request body fails; *layer*) | `Disconnected` | — |
//! | the client's `grpc-timeout` passed (*layer*) | `TimedOut` | `DEADLINE_EXCEEDED` "deadline exceeded (grpc-timeout)" |
//! | the drain's deadline (`--drain-secs` after SIGTERM; a second SIGTERM brings it forward) | `Shutdown` | `UNAVAILABLE` "server shutting down" |
//! | bad frame: empty oneof, `chunks` out of range (an `Error` frame first) | `Failed` | `INVALID_ARGUMENT` with the error |
//! | undecodable message: bad protobuf bytes, compressed flag without `grpc-encoding`, a length prefix past the end of the stream (an `Error` frame first) | `Failed` | `INTERNAL` with tonic's text |
//! | idle timeout: no frame either way (`--idle-timeout-secs`; *layer*) | `Disconnected` | `DEADLINE_EXCEEDED` "idle timeout" |
//! | message above `--max-frame-bytes` | `Failed` | `RESOURCE_EXHAUSTED` |
//!
//! Undecodable messages are `INTERNAL`, not `INVALID_ARGUMENT`, because the gRPC
//! specification says so (`doc/statuscodes.md`: "Error parsing request proto" is
//! `INTERNAL`; `doc/compression.md`: a compressed flag without an encoding "MUST fail
//! with INTERNAL status"), and tonic and grpc-go answer the same: a client library can
//! tell a broken encoder (`INTERNAL`) from a request the protocol refuses
//! (`INVALID_ARGUMENT`). Both count `Failed`.
//!
//! Refused before a session starts (nothing is counted but the refusal):
//! `RESOURCE_EXHAUSTED` "at capacity: N sessions" at `--max-sessions` (the layer, at the
//! tracker's exact cap), `UNAVAILABLE` "draining: the server is shutting down" once the
//! drain began (the layer, on the tracker's drain; both counted `refused`); a `content-type` that is not
//! `application/grpc…` gets HTTP 415 with `grpc-status` `INVALID_ARGUMENT` from
//! `livecount_tower::grpc::GrpcOnlyLayer`, mounted outside the session layer, as the gRPC HTTP/2
//! protocol asks ("servers SHOULD respond with HTTP status of 415") and grpc-go does: such a
//! request is not a gRPC call, so it is not a session either; an unknown
//! `grpc-encoding` gets `UNIMPLEMENTED` from tonic before the handler runs.
//!
//! # Cancellation, half-close and disconnects
//!
//! tonic turns a request body the client reset (`RST_STREAM CANCEL`) into a clean end of
//! the stream, so the stream tonic hands over cannot tell a cancel from a half-close.
//! Two signals below tonic can: the session layer watches the request body (the agent's
//! idle timeout makes it `Inspected`) and ends the session the moment the body fails, before
//! tonic hides the error (`Cancelled` for a reset `CANCEL`, `Disconnected` for a dead
//! connection or a reset with another code, such as Envoy's `INTERNAL_ERROR` for a client
//! whose connection it lost),
//! and the transport drops the *response* stream when the stream is reset or the connection
//! dies. So the agent only asks whether its session is still open when the request stream
//! ends:
//!
//! * A **half-close** (the request stream ends cleanly) ends the session `Completed`, but
//!   only once the response in flight, if any, has been handed to the transport up to its
//!   `done` (or `interrupted`): gRPC's half-close means "no more requests", not "stop".
//!   With nothing in flight the call ends at once, OK. The session stays subject to the
//!   idle timeout meanwhile, as any client that stops sending is.
//! * A **cancel** is a reset request body (the layer's), or the response stream dropped
//!   while the session is open: `Cancelled`, whether a response streams or not. A tonic
//!   client that drops or aborts its call half-closes and then resets: mid-response that
//!   is a cancel; while nothing streams it is a cancel if the reset is read with the
//!   half-close, else the half-close already completed the call.
//! * A **dropped connection** fails the request body with a transport error:
//!   `Disconnected` (the layer's). The conversation reads its request before it looks at
//!   the response drop, so a dying connection is never counted as a cancel; the layer
//!   leaves a dropped response to the agent for up to a second
//!   (`SessionLayer::leave_drops_to_service`) before it would count it `Cancelled`.
//!
//! # Deadlines
//!
//! A client's `grpc-timeout` bounds the whole call, as gRPC specifies (tonic itself only
//! bounds the wait for response headers, which a streaming call gets at once); the session
//! layer enforces it, as it does `--max-session-secs`, whichever comes first. When it
//! passes, the session ends `TimedOut`: the deadline passed first, which is what that
//! reason means (as for `--max-session-secs`); `Cancelled` is kept for a client that
//! gave up on its own. A client that also cancels at its own deadline (grpc-go does)
//! races the server's timer by one network trip and may be counted `Cancelled`.
//!
//! # Admission
//!
//! The place under the tracker's cap goes with the session's end (the tracker gives it back
//! in the same exactly-once step), and the call's session ends before its last frames (an
//! `Error`, the status) are offered, for at most a second: a reader that stopped reading
//! holds neither (see `tests/hostile_grpc.rs`, `a_stalled_reader_frees_its_slot`).

use std::pin::Pin;
use std::sync::{Arc, OnceLock};
use std::time::Duration;

use futures_util::{Stream, StreamExt, stream};
use livecount_session::{EndHandle, EndReason};
use tokio::sync::{mpsc, watch};
use tonic::{Code, Request, Response, Status, Streaming};

use crate::Agent;
use crate::conversation::{Ending, Incoming, Outgoing, converse, say_goodbye};
use crate::generated::livecount::agent::v1 as pb;
use crate::protocol::{ClientFrame, ServerFrame};

/// The path of `livecount.agent.v1.Agent/Converse`: the calls counted as sessions.
pub(crate) const CONVERSE_PATH: &str = "/livecount.agent.v1.Agent/Converse";

/// The longest a call's last frames (an `error`, the status) may wait after its session
/// has ended: a client that does not read them holds nothing but this task meanwhile.
const CLOSE_BOUND: Duration = Duration::from_secs(1);

/// How long a call whose response the transport dropped is left to the conversation (which
/// reads its request first: a failed request body is the layer's `Disconnected` or
/// `Cancelled`; else the client reset the call, `Cancelled`) before the layer counts it
/// `Cancelled` itself.
pub(crate) const DROP_GRACE: Duration = Duration::from_secs(1);

/// The `Agent` gRPC service (`Converse`), serving sessions of one [`Agent`].
#[derive(Debug, Clone)]
pub struct AgentService {
    agent: Arc<Agent>,
}

impl AgentService {
    /// The service for `agent`, wrapped for a tonic server: its message size limited to
    /// the agent's `max_frame_bytes`; the agent hands it to `Serve::grpc_service`.
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
        // Counted (and admitted under the cap, refused while draining) by the
        // `SessionLayer` before the call got here.
        let Some(handle) = request.extensions().get::<EndHandle>().cloned() else {
            return Err(Status::internal(
                "a Converse call the session layer did not count",
            ));
        };
        let call = Arc::new(Call::new(handle.clone()));
        let (tx, rx) = mpsc::channel::<Outgoing>(64);
        let incoming = incoming(request.into_inner(), Arc::clone(&call));
        let agent = Arc::clone(&self.agent);
        tokio::spawn(async move {
            let clock = Some(agent.first_chunk_clock());
            let ending = converse(handle.clone(), incoming, tx.clone(), agent.pace(), clock).await;
            end_call(&handle, ending, &tx).await;
        });
        Ok(Response::new(outgoing(rx, call)))
    }
}

/// What the two halves of one call tell each other.
#[derive(Debug)]
struct Call {
    /// The session: whether it is still open says whether the request ended cleanly.
    handle: EndHandle,
    /// `true` from a `speak` or `interrupt` until its `done` or `interrupted` has been
    /// handed to the transport: a half-close waits for it.
    responding: watch::Sender<bool>,
    /// tonic's text for a request it could not decode: the call ends `INTERNAL`.
    undecodable: OnceLock<String>,
}

impl Call {
    fn new(handle: EndHandle) -> Self {
        Self {
            handle,
            responding: watch::Sender::new(false),
            undecodable: OnceLock::new(),
        }
    }
}

/// Ends the call's session as its conversation says, *then* offers its last frames (an
/// `error`, the close that becomes the status) for at most [`CLOSE_BOUND`]:
///
/// * the protocol's ending: its reason, farewell and close;
/// * the request lost: already ended by the layer (a reset `Cancelled`, a dead connection
///   `Disconnected`), so `Disconnected` here changes nothing; no status (nobody reads it);
/// * the response dropped with the session open (the client reset or left after its
///   half-close: no request body left to fail): `Cancelled`;
/// * ended elsewhere: a shutdown gets `UNAVAILABLE`; a limit's or the deadline's status is
///   the layer's.
async fn end_call(handle: &EndHandle, ending: Ending, out: &mpsc::Sender<Outgoing>) {
    let (reason, farewell, close) = match ending {
        Ending::Protocol {
            reason,
            farewell,
            close,
        } => (Some(reason), farewell, close),
        Ending::Lost => (Some(EndReason::Disconnected), None, None),
        Ending::WriterGone => (Some(EndReason::Cancelled), None, None),
        Ending::Elsewhere(EndReason::Shutdown) => (None, None, Some(SHUTDOWN_CLOSE)),
        Ending::Elsewhere(_) => (None, None, None),
    };
    if let Some(reason) = reason {
        handle.end(reason);
    }
    let close = close.map(|(code, reason)| Outgoing::Close { code, reason });
    let last = farewell.map(Outgoing::Frame).into_iter().chain(close);
    say_goodbye(out, last, CLOSE_BOUND).await;
}

/// The close of a shutdown, which becomes `UNAVAILABLE` "server shutting down".
const SHUTDOWN_CLOSE: (u16, &str) = (1001, "server shutting down");

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

/// A request stream error as [`Incoming`]: `Lost` if the session ended already (the layer
/// ended it for the failed request body: a reset, a dead connection); else one of tonic's
/// own decoding errors (bad protobuf, bad compressed flag, a message cut off by the end of
/// the stream): `TooLarge` above the size limit, else undecodable.
fn request_error(status: &Status, call: &Call) -> Incoming {
    if call.handle.is_ended() {
        return Incoming::Lost;
    }
    match status.code() {
        Code::OutOfRange | Code::ResourceExhausted => Incoming::TooLarge,
        _ => {
            let _ = call.undecodable.set(status.message().to_owned());
            Incoming::Malformed(format!("undecodable message: {}", status.message()))
        }
    }
}

/// The request stream as [`Incoming`]; its clean end is `Closed`, once no response is in
/// flight (see the module docs). A stream that ends with the session already ended did not
/// end cleanly (tonic ends it so on a reset, which the layer counted `Cancelled`): `Lost`.
fn incoming(
    requests: Streaming<pb::ClientFrame>,
    call: Arc<Call>,
) -> Pin<Box<dyn Stream<Item = Incoming> + Send>> {
    let marks = Arc::clone(&call);
    let mut responding = call.responding.subscribe();
    requests
        .map(move |item| match item {
            Ok(frame) => {
                let frame = client_frame(frame);
                if let Incoming::Frame(ClientFrame::Speak { .. } | ClientFrame::Interrupt) = frame {
                    marks.responding.send_replace(true);
                }
                frame
            }
            Err(status) => request_error(&status, &marks),
        })
        .chain(stream::once(async move {
            if call.handle.is_ended() {
                return Incoming::Lost;
            }
            let _ = responding.wait_for(|busy| !busy).await;
            Incoming::Closed
        }))
        .boxed()
}

/// The conversation's output as the response stream: frames, then the end of the
/// stream or a status, from the close code.
fn outgoing(rx: mpsc::Receiver<Outgoing>, call: Arc<Call>) -> Frames {
    // The state: the channel (None once the call's end was mapped), the last error text.
    let state = (Some(rx), None::<String>);
    Box::pin(stream::unfold(state, move |(rx, last_error)| {
        let call = Arc::clone(&call);
        async move {
            let mut rx = rx?;
            // Every sender gone without a close: the end of the stream, OK.
            let out = rx.recv().await?;
            match out {
                Outgoing::Frame(frame) => {
                    let last_error = match &frame {
                        ServerFrame::Error { message } => Some(message.clone()),
                        ServerFrame::Done { .. } | ServerFrame::Interrupted { .. } => {
                            call.responding.send_replace(false);
                            last_error
                        }
                        ServerFrame::Chunk { .. } => last_error,
                    };
                    Some((Ok(server_frame(frame)), (Some(rx), last_error)))
                }
                Outgoing::Close { code, reason } => {
                    let undecodable = call.undecodable.get().cloned();
                    let status = close_status(code, reason, last_error, undecodable)?;
                    Some((Err(status), (None, None)))
                }
            }
        }
    }))
}

/// The status for a WebSocket close code; `None` for a normal end (OK). A bad frame
/// (1007) is `INTERNAL` if tonic could not decode it, else `INVALID_ARGUMENT`.
fn close_status(
    code: u16,
    reason: &str,
    last_error: Option<String>,
    undecodable: Option<String>,
) -> Option<Status> {
    Some(match code {
        1000 => return None,
        1001 => Status::unavailable(reason),
        1007 => match undecodable {
            Some(message) => Status::internal(message),
            None => Status::invalid_argument(last_error.unwrap_or_else(|| reason.into())),
        },
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
    }

    #[test]
    fn close_codes_map_to_statuses() {
        assert!(close_status(1000, "bye", None, None).is_none());
        let idle = close_status(1008, "idle timeout", None, None).unwrap();
        assert_eq!(
            (idle.code(), idle.message()),
            (Code::DeadlineExceeded, "idle timeout")
        );
        let bad = close_status(1007, "invalid frame", Some("why".into()), None).unwrap();
        assert_eq!((bad.code(), bad.message()), (Code::InvalidArgument, "why"));
        let broken = close_status(1007, "invalid frame", Some("x".into()), Some("t".into()));
        let broken = broken.unwrap();
        assert_eq!((broken.code(), broken.message()), (Code::Internal, "t"));
    }

    #[test]
    fn decoding_errors_are_malformed_and_errors_after_the_end_lost() {
        let tracker: livecount_session::SessionTracker = Default::default();
        let session = tracker.start();
        let call = Call::new(session.handle());
        let big = Status::out_of_range("decoded message length too large");
        assert_eq!(request_error(&big, &call), Incoming::TooLarge);
        let bad = Status::internal("failed to decode Protobuf message");
        assert!(
            matches!(request_error(&bad, &call), Incoming::Malformed(m) if m.contains("decode"))
        );
        assert_eq!(
            call.undecodable.get().map(String::as_str),
            Some("failed to decode Protobuf message")
        );
        // The layer ended the session for the failed request body: whatever tonic says.
        session.end(EndReason::Disconnected);
        let lost = Status::from_error(Box::new(std::io::Error::other("reset")));
        assert_eq!(request_error(&lost, &call), Incoming::Lost);
    }
}
