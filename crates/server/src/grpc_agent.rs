//! Sessions over gRPC: `livecount.agent.v1.Agent/Converse`, one bidirectional stream per
//! session, counted, admitted and bounded by `livecount_tower::SessionLayer` (the same
//! library a service of your own mounts), on the tracker the WebSocket sessions share.
//!
//! # Endings
//!
//! Every call ends with exactly one status and its session with exactly one reason. The
//! limits' rows are the layer's; the rest are this agent's protocol and transport:
//!
//! | ending | session ends | gRPC status |
//! | --- | --- | --- |
//! | `bye` | `Completed` | OK (the response stream ends) |
//! | maximum session length (`--max-session-secs`, the layer's) | `TimedOut` | `DEADLINE_EXCEEDED` "max session length" |
//! | the client stopped reading (`--write-timeout-secs`, the layer's) | `Disconnected`, the count freed at once | — (nobody reads it) |
//! | client half-closed its stream (no response in flight) | `Completed` | OK |
//! | client half-closed while a response streams | `Completed` once `done` is sent | OK |
//! | client reset the stream / dropped the call (response dropped by the transport) | `Cancelled` | — (nobody reads it) |
//! | connection lost (request body fails) | `Disconnected` | — |
//! | the client's `grpc-timeout` passed | `TimedOut` | `DEADLINE_EXCEEDED` "deadline exceeded (grpc-timeout)" |
//! | shutdown | `Shutdown` | `UNAVAILABLE` "server shutting down" |
//! | bad frame: empty oneof, `chunks` out of range (an `Error` frame first) | `Failed` | `INVALID_ARGUMENT` with the error |
//! | undecodable message: bad protobuf bytes, compressed flag without `grpc-encoding`, a length prefix past the end of the stream (an `Error` frame first) | `Failed` | `INTERNAL` with tonic's text |
//! | idle timeout: no frame either way (`--idle-timeout-secs`, the layer's) | `Disconnected` | `DEADLINE_EXCEEDED` "idle timeout" |
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
//! tracker's exact cap), `UNAVAILABLE` "draining: the server is shutting down" once
//! shutdown began (both counted `rejected`); a `content-type` that is not
//! `application/grpc…` gets HTTP 415 with `grpc-status` `INVALID_ARGUMENT`, as the gRPC
//! HTTP/2 protocol asks ("servers SHOULD respond with HTTP status of 415") and grpc-go
//! does: such a request is not a gRPC call, so it is not a session either; an unknown
//! `grpc-encoding` gets `UNIMPLEMENTED` from tonic before the handler runs.
//!
//! # Cancellation, half-close and disconnects
//!
//! tonic turns a request body the client reset (`RST_STREAM CANCEL`) into a clean end of
//! the stream, so the stream tonic hands over cannot tell a cancel from a half-close.
//! Two signals below tonic can: [`GrpcOnly`] watches the request body and notes that it
//! failed before tonic hides the error, and the transport drops the *response* stream
//! when the stream is reset or the connection dies, before the stream has yielded its
//! end. So:
//!
//! * A **half-close** (the request stream ends cleanly) ends the session `Completed`, but
//!   only once the response in flight, if any, has been handed to the transport up to its
//!   `done` (or `interrupted`): gRPC's half-close means "no more requests", not "stop".
//!   With nothing in flight the call ends at once, OK. The session stays subject to the
//!   idle timeout meanwhile, as any client that stops sending is.
//! * A **cancel** is a reset request body, or the response stream dropped while the
//!   session is open: `Cancelled`, whether a response streams or not. A tonic client
//!   that drops or aborts its call half-closes and then resets: mid-response that is a
//!   cancel; while nothing streams it is a cancel if the reset is read with the
//!   half-close, else the half-close already completed the call.
//! * A **dropped connection** fails the request body with a transport error (one that
//!   tonic passes on): `Disconnected`. Request-side events are looked at before the
//!   response drop, so a dying connection is never counted as a cancel; the layer leaves
//!   a dropped response to this classification for up to a second
//!   (`SessionLayer::leave_drops_to_service`) before it would count it `Cancelled`.
//!
//! # Deadlines
//!
//! A client's `grpc-timeout` bounds the whole call, as gRPC specifies (tonic itself only
//! bounds the wait for response headers, which a streaming call gets at once). When it
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
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, OnceLock};
use std::task::{Context, Poll};
use std::time::Duration;

use futures_util::{Stream, StreamExt, stream};
use http_body::Body;
use livecount_session::{EndHandle, EndReason};
use livecount_tower::SessionLayer;
use tokio::sync::{mpsc, watch};
use tonic::codegen::{Service, http};
use tonic::metadata::MetadataMap;
use tonic::server::NamedService;
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

/// How long a call whose response the transport dropped is left to `incoming` to classify
/// (a failed request body is a lost connection, `Disconnected`; else the client reset the
/// call, `Cancelled`) before the layer counts it `Cancelled` itself.
const DROP_GRACE: Duration = Duration::from_secs(1);

/// The text of a call refused because shutdown has begun.
const DRAINING: &str = "draining: the server is shutting down";

/// The `Agent` gRPC service (`Converse`), serving sessions of one [`Agent`].
#[derive(Debug, Clone)]
pub struct AgentService {
    agent: Arc<Agent>,
}

impl AgentService {
    /// The service for `agent`, wrapped for a tonic server: its message size limited to
    /// the agent's `max_frame_bytes`, requests that are not gRPC refused with HTTP 415.
    pub fn server(agent: Arc<Agent>) -> GrpcOnly<pb::agent_server::AgentServer<Self>> {
        let limit = agent.config.max_frame_bytes;
        GrpcOnly::new(
            pb::agent_server::AgentServer::new(Self { agent }).max_decoding_message_size(limit),
        )
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
        // Counted (and admitted under the cap) by the `SessionLayer` before the call got
        // here; a call it did not count arrived once shutdown had begun.
        let Some(handle) = request.extensions().get::<EndHandle>().cloned() else {
            self.agent.tracker.note_refused();
            return Err(Status::unavailable(DRAINING));
        };
        if self.agent.shutdown.is_cancelled() {
            // Counted just before shutdown began, after `end_all` ran.
            handle.end(EndReason::Shutdown);
            return Err(Status::unavailable(DRAINING));
        }
        let deadline = grpc_timeout(request.metadata())
            .and_then(|t| tokio::time::Instant::now().checked_add(t));
        let failed = request.extensions().get::<BodyFailed>().cloned();
        let call = Arc::new(Call::new(handle.clone()));
        let (tx, rx) = mpsc::channel::<Outgoing>(64);
        let incoming = incoming(
            request.into_inner(),
            tx.clone(),
            Arc::clone(&call),
            deadline,
            failed.unwrap_or_default(),
        );
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
    /// Ends the session for endings only the transport sees (cancel, deadline).
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
/// * the request lost (a transport error): `Disconnected`, no status (nobody reads it);
/// * the response dropped (the client reset or left): nothing here; the layer's body, dropped
///   before its end, ends the session `Cancelled` (or `incoming` already did);
/// * ended elsewhere: a shutdown gets `UNAVAILABLE`; a limit's status is the layer's, and a
///   cancel or the deadline's is `incoming`'s / `outgoing`'s.
async fn end_call(handle: &EndHandle, ending: Ending, out: &mpsc::Sender<Outgoing>) {
    let (reason, farewell, close) = match ending {
        Ending::Protocol {
            reason,
            farewell,
            close,
        } => (Some(reason), farewell, close),
        Ending::Lost => (Some(EndReason::Disconnected), None, None),
        Ending::WriterGone => (None, None, None),
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

/// The client's `grpc-timeout` (`1..=8` digits and a unit of `H M S m u n`), if valid.
fn grpc_timeout(metadata: &MetadataMap) -> Option<Duration> {
    let value = metadata.get("grpc-timeout")?.to_str().ok()?;
    let (digits, unit) = value.split_at(value.len().checked_sub(1)?);
    if digits.is_empty() || digits.len() > 8 || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    let n: u64 = digits.parse().ok()?;
    Some(match unit {
        "H" => Duration::from_secs(n * 3600),
        "M" => Duration::from_secs(n * 60),
        "S" => Duration::from_secs(n),
        "m" => Duration::from_millis(n),
        "u" => Duration::from_micros(n),
        "n" => Duration::from_nanos(n),
        _ => return None,
    })
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

/// A request stream error as [`Incoming`]. tonic's own decoding errors carry no source
/// (bad protobuf, bad compressed flag, a message cut off by the end of the stream):
/// `TooLarge` above the size limit, else undecodable. Transport errors carry the h2 or
/// hyper error as their source: `Lost`.
fn request_error(status: &Status, call: &Call) -> Incoming {
    if std::error::Error::source(status).is_some() {
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

/// The request stream as [`Incoming`], with the endings only the transport sees:
///
/// * its clean end is `Closed`, once no response is in flight (see the module docs);
///   a clean end of a request body that failed (tonic hides a reset that way) ends the
///   session `Cancelled`;
/// * the response stream dropped (the client reset the call or went away) ends the
///   session `Cancelled`, then says `Lost` so the conversation stops;
/// * the `grpc-timeout` deadline ends it `TimedOut`, then says `Lost`.
///
/// Request-side items come first (`biased`): a dying connection fails the request body
/// before the transport drops the response, and must count `Disconnected`.
fn incoming(
    requests: Streaming<pb::ClientFrame>,
    out: mpsc::Sender<Outgoing>,
    call: Arc<Call>,
    deadline: Option<tokio::time::Instant>,
    failed: BodyFailed,
) -> Pin<Box<dyn Stream<Item = Incoming> + Send>> {
    let marks = Arc::clone(&call);
    let reset = Arc::clone(&call);
    let mut responding = call.responding.subscribe();
    let frames = requests
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
            if failed.get() {
                // tonic ended the stream cleanly on a failed body: it was reset (CANCEL).
                reset.handle.end(EndReason::Cancelled);
                return Incoming::Lost;
            }
            let _ = responding.wait_for(|busy| !busy).await;
            Incoming::Closed
        }))
        .boxed();
    let cancel = Arc::clone(&call);
    let gone = stream::once(async move {
        out.closed().await;
        cancel.handle.end(EndReason::Cancelled);
        Incoming::Lost
    });
    let expired = stream::once(async move {
        match deadline {
            Some(at) => tokio::time::sleep_until(at).await,
            None => std::future::pending().await,
        }
        call.handle.end(EndReason::TimedOut);
        Incoming::Lost
    });
    Box::pin(Biased {
        first: frames,
        then: stream::select(gone.boxed(), expired.boxed()),
    })
}

/// Two streams merged, `first` always polled first; ends when `first` ends.
struct Biased<A, B> {
    first: A,
    then: B,
}

impl<A, B> Stream for Biased<A, B>
where
    A: Stream + Unpin,
    B: Stream<Item = A::Item> + Unpin,
{
    type Item = A::Item;

    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<A::Item>> {
        if let Poll::Ready(item) = self.first.poll_next_unpin(cx) {
            return Poll::Ready(item);
        }
        match self.then.poll_next_unpin(cx) {
            Poll::Ready(Some(item)) => Poll::Ready(Some(item)),
            _ => Poll::Pending,
        }
    }
}

/// The conversation's output as the response stream: frames, then the end of the
/// stream or a status, from the close code (or the deadline).
fn outgoing(rx: mpsc::Receiver<Outgoing>, call: Arc<Call>) -> Frames {
    // The state: the channel (None once the call's end was mapped), the last error text.
    let state = (Some(rx), None::<String>);
    Box::pin(stream::unfold(state, move |(rx, last_error)| {
        let call = Arc::clone(&call);
        async move {
            let mut rx = rx?;
            let Some(out) = rx.recv().await else {
                // Every sender is gone without a close: the end of the stream, OK, unless
                // the deadline ended the session.
                let expired = call.handle.reason() == Some(EndReason::TimedOut);
                let status = Status::deadline_exceeded("deadline exceeded (grpc-timeout)");
                return expired.then_some((Err(status), (None, None)));
            };
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

// === impl GrpcOnly ===

/// A gRPC service that refuses requests whose `content-type` is not
/// `application/grpc…` with HTTP 415 and `grpc-status` `INVALID_ARGUMENT` (tonic serves
/// them as if they were gRPC).
#[derive(Debug, Clone)]
pub struct GrpcOnly<S>(S);

impl<S> GrpcOnly<S> {
    /// `service`, refusing requests that are not gRPC. [`AgentService::server`] comes
    /// wrapped already; any other tonic service can be wrapped the same way:
    ///
    /// ```no_run
    /// # async fn serve(agent: std::sync::Arc<livecount_server::Agent>) {
    /// use livecount_report::OrcaService;
    /// use livecount_server::grpc_agent::GrpcOnly;
    ///
    /// let orca = GrpcOnly::new(OrcaService::server(std::sync::Arc::clone(&agent.board)));
    /// tonic::transport::Server::builder()
    ///     .add_service(orca)
    ///     .serve("127.0.0.1:50051".parse().unwrap())
    ///     .await
    ///     .unwrap();
    /// # }
    /// ```
    pub fn new(service: S) -> Self {
        Self(service)
    }
}

impl<S: NamedService> NamedService for GrpcOnly<S> {
    const NAME: &'static str = S::NAME;
}

/// Whether `request` says it is gRPC.
pub(crate) fn is_grpc<B>(request: &http::Request<B>) -> bool {
    request
        .headers()
        .get(http::header::CONTENT_TYPE)
        .is_some_and(|v| v.as_bytes().starts_with(b"application/grpc"))
}

/// The trailers-only 415 answer to a request that is not gRPC.
fn unsupported_media_type<B>(request: &http::Request<B>) -> http::Response<tonic::body::Body> {
    let got = request
        .headers()
        .get(http::header::CONTENT_TYPE)
        .map_or("none".into(), |v| {
            String::from_utf8_lossy(v.as_bytes()).into_owned()
        });
    let status = Status::invalid_argument(format!(
        "invalid gRPC request content-type {got:?}: expected application/grpc"
    ));
    let mut response = status.into_http::<tonic::body::Body>();
    *response.status_mut() = http::StatusCode::UNSUPPORTED_MEDIA_TYPE;
    response
}

impl<S, B> Service<http::Request<B>> for GrpcOnly<S>
where
    S: Service<http::Request<Watched<B>>, Response = http::Response<tonic::body::Body>>,
    S::Future: Send + 'static,
    S::Error: Send + 'static,
{
    type Response = S::Response;
    type Error = S::Error;
    type Future = Pin<Box<dyn Future<Output = Result<S::Response, S::Error>> + Send>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), S::Error>> {
        self.0.poll_ready(cx)
    }

    fn call(&mut self, request: http::Request<B>) -> Self::Future {
        if is_grpc(&request) {
            let failed = BodyFailed::default();
            let (parts, body) = request.into_parts();
            let body = Watched {
                body,
                failed: failed.clone(),
            };
            let mut request = http::Request::from_parts(parts, body);
            request.extensions_mut().insert(failed);
            Box::pin(self.0.call(request))
        } else {
            let response = unsupported_media_type(&request);
            Box::pin(std::future::ready(Ok(response)))
        }
    }
}

// === impl Watched ===

/// Set once a request body has failed (reset, connection error), before tonic sees the
/// error: tonic turns a reset (`CANCEL`) into a clean end, this tells them apart.
#[derive(Debug, Clone, Default)]
struct BodyFailed(Arc<AtomicBool>);

impl BodyFailed {
    fn get(&self) -> bool {
        // Relaxed: set and read by the task polling the body, in program order.
        self.0.load(Ordering::Relaxed)
    }
}

/// A request body that notes whether it failed, for [`GrpcOnly`] (see the module docs).
#[derive(Debug)]
pub struct Watched<B> {
    body: B,
    failed: BodyFailed,
}

impl<B: Body + Unpin> Body for Watched<B> {
    type Data = B::Data;
    type Error = B::Error;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<http_body::Frame<B::Data>, B::Error>>> {
        let frame = Pin::new(&mut self.body).poll_frame(cx);
        if let Poll::Ready(Some(Err(_))) = &frame {
            // Relaxed: see `BodyFailed::get`.
            self.failed.0.store(true, Ordering::Relaxed);
        }
        frame
    }

    fn is_end_stream(&self) -> bool {
        self.body.is_end_stream()
    }

    fn size_hint(&self) -> http_body::SizeHint {
        self.body.size_hint()
    }
}

// === serving ===

/// Serves `Agent/Converse` and ORCA's `OpenRcaService` (both refusing requests that are
/// not gRPC) on `listener` until shutdown, then stops gracefully: the streams end
/// themselves on the same signal.
///
/// Each `Converse` call is a session counted, admitted (at the tracker's cap:
/// `RESOURCE_EXHAUSTED`) and bounded by `livecount_tower::SessionLayer`, under the agent's
/// `--max-session-secs` (`DEADLINE_EXCEEDED` "max session length"), `--idle-timeout-secs`
/// (no frame either way: `DEADLINE_EXCEEDED` "idle timeout") and `--write-timeout-secs` (a
/// client that stopped reading: `Disconnected`); ORCA's own stream is not a session.
pub(crate) async fn serve_grpc(listener: tokio::net::TcpListener, agent: Arc<Agent>) {
    let mut stopped = agent.shutdown_signal();
    let until_stop = async move {
        let _ = stopped.wait_for(|s| *s).await;
    };
    let orca = GrpcOnly::new(livecount_report::OrcaService::server(Arc::clone(
        &agent.board,
    )));
    let shutdown = agent.shutdown.clone();
    let converse = move |request: &http::Request<tonic::body::Body>| {
        request.uri().path() == CONVERSE_PATH && is_grpc(request) && !shutdown.is_cancelled()
    };
    let sessions = SessionLayer::new(agent.tracker.clone())
        .with_predicate(converse)
        .max_session(agent.config.max_session)
        .write_timeout(agent.config.write_timeout)
        .idle_timeout(agent.config.idle_timeout)
        .leave_drops_to_service(DROP_GRACE);
    let _ = tonic::transport::Server::builder()
        .layer(sessions)
        .add_service(AgentService::server(agent))
        .add_service(orca)
        .serve_with_incoming_shutdown(
            tonic::transport::server::TcpIncoming::from(listener),
            until_stop,
        )
        .await;
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
    fn grpc_timeouts_parse_and_bad_ones_are_ignored() {
        let timeout = |v: &str| {
            let mut m = MetadataMap::new();
            m.insert("grpc-timeout", v.parse().unwrap());
            grpc_timeout(&m)
        };
        assert_eq!(timeout("300m"), Some(Duration::from_millis(300)));
        assert_eq!(timeout("2S"), Some(Duration::from_secs(2)));
        assert_eq!(timeout("1H"), Some(Duration::from_secs(3600)));
        assert_eq!(
            timeout("99999999H"),
            Some(Duration::from_secs(99_999_999 * 3600))
        );
        assert_eq!(timeout("5n"), Some(Duration::from_nanos(5)));
        for bad in ["", "m", "123456789m", "12x", "-1S", "1.5S"] {
            assert_eq!(timeout(bad), None, "{bad:?}");
        }
        assert_eq!(grpc_timeout(&MetadataMap::new()), None);
    }

    #[test]
    fn decoding_errors_are_malformed_and_transport_errors_lost() {
        let tracker: livecount_session::SessionTracker = Default::default();
        let session = tracker.start();
        let call = Call::new(session.handle());
        let lost = Status::from_error(Box::new(std::io::Error::other("reset")));
        assert_eq!(request_error(&lost, &call), Incoming::Lost);
        assert!(call.undecodable.get().is_none());
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
    }
}
