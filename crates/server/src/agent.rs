//! The agent: HTTP (WebSocket sessions, `/metrics`, `/load`, served by
//! [`HttpServer`] with a header-read timeout and a bound on pending connections), the
//! agent-check responder, gRPC (sessions and ORCA), the load reporter, and graceful
//! shutdown.

use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use axum::Router;
use axum::extract::State;
use axum::extract::ws::{CloseFrame, Message, WebSocket, WebSocketUpgrade};
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use futures_util::{SinkExt, StreamExt};
use livecount_session::{EndReason, SessionTracker};
use tokio::io::AsyncWriteExt;
use tokio::net::TcpListener;
use tokio::sync::{OwnedSemaphorePermit, Semaphore, mpsc, watch};
use tokio::task::JoinHandle;

use tonic::transport::server::TcpIncoming;

use crate::conversation::{Incoming, Limits, Outgoing, burn, converse};
use crate::grpc_agent::AgentService;
use crate::http_server::HttpServer;
use crate::orca::OrcaService;
use crate::protocol::ClientFrame;
use crate::{AgentConfig, LoadBoard, LoadReport, prometheus_text};

/// Shared state of a running agent.
#[derive(Debug)]
pub struct Agent {
    /// Settings.
    pub config: AgentConfig,
    /// The session tracker every connection registers with.
    pub tracker: SessionTracker,
    /// The published load reports.
    pub board: LoadBoard,
    admission: Arc<Semaphore>,
    shutdown: watch::Sender<bool>,
}

/// A started agent: its bound addresses and how to stop it.
#[derive(Debug)]
pub struct RunningAgent {
    /// The agent's state (tracker, board).
    pub agent: Arc<Agent>,
    /// Where HTTP listens.
    pub http: SocketAddr,
    /// Where the separate `/metrics` + `/load` listener is, if enabled.
    pub metrics: Option<SocketAddr>,
    /// Where agent-check listens, if enabled.
    pub agent_check: Option<SocketAddr>,
    /// Where gRPC (sessions and ORCA) listens, if enabled.
    pub grpc: Option<SocketAddr>,
    tasks: Vec<JoinHandle<()>>,
    grpc_task: Option<JoinHandle<()>>,
    stop_background: Arc<AtomicBool>,
}

impl Agent {
    pub(crate) fn limits(&self) -> Limits {
        Limits {
            max_session: self.config.max_session,
            idle_timeout: self.config.idle_timeout,
            write_timeout: self.config.write_timeout,
            work: self.config.work,
            chunk_gap: self.config.chunk_gap,
            end_when_writer_gone: true,
        }
    }

    /// Publishes a report now (the reporter does this every interval).
    pub fn publish(&self) -> Arc<LoadReport> {
        self.board.publish(self.tracker.snapshot())
    }

    /// Admission: a permit per session, refused at `max_sessions` or while draining.
    pub(crate) fn admit(&self) -> Result<OwnedSemaphorePermit, Refusal> {
        if self.board.is_draining() {
            self.board.note_rejected();
            return Err(Refusal::Draining);
        }
        Arc::clone(&self.admission)
            .try_acquire_owned()
            .map_err(|_| {
                self.board.note_rejected();
                Refusal::AtCapacity {
                    max: self.config.max_sessions,
                }
            })
    }

    /// Becomes `true` when shutdown begins.
    pub(crate) fn shutdown_signal(&self) -> watch::Receiver<bool> {
        self.shutdown.subscribe()
    }

    /// Runs one session over any transport: registers it, converses, ends it once, and
    /// releases `slot` (its admission permit) with the end, before the close frame.
    pub async fn run_session<S>(
        &self,
        slot: OwnedSemaphorePermit,
        incoming: S,
        out: mpsc::Sender<Outgoing>,
    ) -> EndReason
    where
        S: futures_util::Stream<Item = Incoming> + Unpin,
    {
        let session = self.tracker.start();
        converse(
            session,
            Some(slot),
            incoming,
            out,
            self.limits(),
            self.shutdown.subscribe(),
        )
        .await
    }
}

/// Why a session was refused before it started.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Refusal {
    /// Shutdown has begun.
    Draining,
    /// `max` sessions are open already.
    AtCapacity { max: u64 },
}

impl Refusal {
    /// The text of the HTTP 503 (and of the gRPC status).
    pub(crate) fn message(self) -> String {
        match self {
            Refusal::Draining => "draining: the server is shutting down\n".into(),
            Refusal::AtCapacity { max } => format!("at capacity: {max} sessions (max_sessions)\n"),
        }
    }
}

// === HTTP ===

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

async fn load_route(State(agent): State<Arc<Agent>>) -> Response {
    let report = agent.board.latest();
    let mut value = serde_json::to_value(&*report).expect("reports serialise");
    value["age_ms"] = report.age_ms().into();
    axum::Json(value).into_response()
}

async fn metrics_route(State(agent): State<Arc<Agent>>) -> Response {
    let body = prometheus_text::render(&agent.board.latest());
    ([(header::CONTENT_TYPE, "text/plain; version=0.0.4")], body).into_response()
}

/// `/load` and `/metrics` alone, for a separate scrape address.
fn load_router(agent: Arc<Agent>) -> Router {
    Router::new()
        .route("/load", get(load_route))
        .route("/metrics", get(metrics_route))
        .route("/healthz", get(|| async { "ok\n" }))
        .with_state(agent)
}

fn router(agent: Arc<Agent>) -> Router {
    Router::new()
        .route("/session", get(session_route))
        .route("/load", get(load_route))
        .route("/metrics", get(metrics_route))
        .route("/healthz", get(|| async { "ok\n" }))
        .with_state(agent)
}

// === agent-check ===

async fn agent_check(listener: TcpListener, agent: Arc<Agent>) {
    loop {
        let Ok((mut conn, _)) = listener.accept().await else {
            continue;
        };
        let reply = agent.board.latest().agent_reply();
        tokio::spawn(async move {
            let _ = conn.write_all(reply.as_bytes()).await;
            let _ = conn.shutdown().await;
        });
    }
}

// === gRPC ===

/// Serves `Agent/Converse` and ORCA's `OpenRcaService` until shutdown, then stops
/// gracefully (the streams end themselves on the same signal).
async fn serve_grpc(listener: TcpListener, agent: Arc<Agent>) {
    let mut stopped = agent.shutdown_signal();
    let until_stop = async move {
        let _ = stopped.wait_for(|s| *s).await;
    };
    let _ = tonic::transport::Server::builder()
        .add_service(AgentService::server(Arc::clone(&agent)))
        .add_service(OrcaService::server(agent))
        .serve_with_incoming_shutdown(TcpIncoming::from(listener), until_stop)
        .await;
}

// === lifecycle ===

fn background_load(share: f64, stop: Arc<AtomicBool>) {
    if share <= 0.0 {
        return;
    }
    std::thread::spawn(move || {
        let period = Duration::from_millis(10);
        while !stop.load(Ordering::Relaxed) {
            burn(period.mul_f64(share));
            std::thread::sleep(period.mul_f64(1.0 - share));
        }
    });
}

impl RunningAgent {
    /// Binds every listener and starts serving.
    pub async fn start(config: AgentConfig) -> std::io::Result<Self> {
        let http = crate::agent_config::listen("--http", config.http).await?;
        let metrics = match config.metrics {
            Some(addr) => Some(crate::agent_config::listen("--metrics", addr).await?),
            None => None,
        };
        let check = match config.agent_check {
            Some(addr) => Some(crate::agent_config::listen("--agent-check", addr).await?),
            None => None,
        };
        let grpc = match config.grpc {
            Some(addr) => Some(crate::agent_config::listen("--grpc", addr).await?),
            None => None,
        };
        let board = LoadBoard::new(&config.name, config.capacity, config.cores);
        let agent = Arc::new(Agent {
            admission: Arc::new(Semaphore::new(
                config.max_sessions.min(Semaphore::MAX_PERMITS as u64) as usize,
            )),
            tracker: SessionTracker::new(),
            board,
            shutdown: watch::channel(false).0,
            config,
        });
        let stop_background = Arc::new(AtomicBool::new(false));
        background_load(agent.config.background_load, Arc::clone(&stop_background));
        let mut running = RunningAgent {
            http: http.local_addr()?,
            metrics: metrics.as_ref().map(TcpListener::local_addr).transpose()?,
            agent_check: check.as_ref().map(TcpListener::local_addr).transpose()?,
            grpc: grpc.as_ref().map(TcpListener::local_addr).transpose()?,
            agent: Arc::clone(&agent),
            tasks: Vec::new(),
            grpc_task: grpc.map(|listener| tokio::spawn(serve_grpc(listener, Arc::clone(&agent)))),
            stop_background,
        };
        let server = HttpServer::new(
            agent.config.header_read_timeout,
            agent.config.max_pending_connections,
        );
        let app = router(Arc::clone(&agent));
        let stopped = agent.shutdown.subscribe();
        running
            .tasks
            .push(tokio::spawn(server.clone().serve(http, app, stopped)));
        if let Some(listener) = metrics {
            let app = load_router(Arc::clone(&agent));
            let stopped = agent.shutdown.subscribe();
            running
                .tasks
                .push(tokio::spawn(server.serve(listener, app, stopped)));
        }
        if let Some(listener) = check {
            running
                .tasks
                .push(tokio::spawn(agent_check(listener, Arc::clone(&agent))));
        }
        let reporter = Arc::clone(&agent);
        running.tasks.push(tokio::spawn(async move {
            let mut tick = tokio::time::interval(reporter.config.report_interval);
            loop {
                tick.tick().await;
                reporter.publish();
            }
        }));
        agent.publish();
        Ok(running)
    }

    /// Graceful shutdown: say `drain`, refuse new sessions, end open ones `Shutdown`
    /// (close code 1001), wait up to the drain period for them to go, then stop.
    pub async fn shutdown(self) -> Arc<LoadReport> {
        let agent = &self.agent;
        agent.board.set_draining(agent.tracker.snapshot());
        let _ = agent.shutdown.send(true);
        let deadline = tokio::time::Instant::now() + agent.config.drain;
        while agent.tracker.active() > 0 && tokio::time::Instant::now() < deadline {
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        agent.tracker.end_all(EndReason::Shutdown);
        self.stop_background.store(true, Ordering::Relaxed);
        for task in &self.tasks[1..] {
            task.abort();
        }
        let mut tasks = self.tasks;
        let http = tasks.remove(0);
        let _ = tokio::time::timeout(agent.config.drain, http).await;
        if let Some(mut grpc) = self.grpc_task {
            // Graceful: open streams end on the shutdown signal; a client that does not
            // read its last frames gets the drain period, then the connection is cut.
            if tokio::time::timeout(agent.config.drain, &mut grpc)
                .await
                .is_err()
            {
                grpc.abort();
            }
        }
        agent.publish()
    }
}
