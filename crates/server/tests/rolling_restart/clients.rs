//! The rolling-restart test's clients: a steady stream of sessions through the balancer,
//! each with a planned duration, each knowing its backend, when it opened and how it ended.

use std::time::{Duration, Instant};

use futures_util::{SinkExt, StreamExt};
use livecount_server::generated::livecount::agent::v1 as pb;
use pb::client_frame::Frame as Client;
use pb::server_frame::Frame as Server;
use tokio::sync::{mpsc, watch};
use tokio::task::JoinHandle;
use tokio_tungstenite::tungstenite::{self, Message};
use tonic::transport::{Channel, Endpoint};

use crate::common::lb::Fleet;

/// One new session every this long, for the whole run.
const GAP: Duration = Duration::from_millis(150);
/// The shortest and longest planned session, milliseconds.
const SHORTEST_MS: u64 = 1_000;
const LONGEST_MS: u64 = 8_000;
/// A turn (speak 3 chunks, read them and `done`) every this long.
const TURN: Duration = Duration::from_millis(700);
/// Attempts at opening one session (a refusal is retried after 200 ms).
const ATTEMPTS: usize = 5;
/// The longest one step of a session may take.
const STEP: Duration = Duration::from_secs(10);

/// How a session ended, as its client saw it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Ending {
    /// The client said `bye` at its planned end and the server closed cleanly.
    Completed,
    /// The server ended it first: close 1012 / `UNAVAILABLE` "server shutting down".
    Shutdown,
    /// Anything else: the connection lost, another code or status, a timeout.
    Lost(String),
    /// Never opened: every attempt was refused.
    NeverOpened,
}

/// One session, as its client saw it. Times are seconds since the run began.
#[derive(Debug, Clone)]
pub(crate) struct Record {
    /// Its planned length.
    pub(crate) planned: Duration,
    /// When its first attempt began.
    pub(crate) first_attempt: f64,
    /// Refused attempts before it opened: `true` when the refusal carried its retry hint
    /// (503 with `Retry-After`, gRPC `UNAVAILABLE`), with what was seen.
    pub(crate) refusals: Vec<(bool, String)>,
    /// When its response headers (gRPC) or upgrade (WebSocket) came.
    pub(crate) opened_at: f64,
    /// The backend (fleet index) that took it, from the balancer's response header.
    pub(crate) backend: usize,
    pub(crate) ended_at: f64,
    pub(crate) ending: Ending,
}

impl Record {
    /// When it meant to end.
    pub(crate) fn planned_end(&self) -> f64 {
        self.opened_at + self.planned.as_secs_f64()
    }
}

/// Where sessions go, and how a balancer's header names the backend.
#[derive(Debug, Clone)]
pub(crate) enum Transport {
    /// gRPC `Converse` through Envoy (a few shared channels: Envoy balances per stream);
    /// the backend is the `x-livecount-upstream` address's port among `ports`.
    Grpc {
        channels: Vec<Channel>,
        ports: Vec<u16>,
    },
    /// WebSocket through HAProxy; the backend is the `x-livecount-backend` server name.
    WebSocket { url: String, names: Vec<String> },
}

impl Transport {
    pub(crate) async fn grpc(front: u16, fleet: &Fleet) -> Transport {
        let mut channels = Vec::new();
        for _ in 0..4 {
            let endpoint = Endpoint::from_shared(format!("http://127.0.0.1:{front}")).unwrap();
            let ch = tokio::time::timeout(STEP, endpoint.connect()).await;
            channels.push(ch.expect("connect within 10 s").expect("connect"));
        }
        let ports = fleet.backends.iter().map(|b| b.grpc).collect();
        Transport::Grpc { channels, ports }
    }

    pub(crate) fn websocket(front: u16, fleet: &Fleet) -> Transport {
        let names = fleet.backends.iter().map(|b| b.name.clone()).collect();
        let url = format!("ws://127.0.0.1:{front}/session");
        Transport::WebSocket { url, names }
    }
}

/// Starts the workload: session `i` (planned 1–8 s, from `seed` and `i`) opens at
/// `i × 150 ms` until `stop` says so. The handle gives every session's record once all
/// have ended.
pub(crate) fn load(
    transport: Transport,
    seed: u64,
    t0: Instant,
) -> (watch::Sender<bool>, JoinHandle<Vec<Record>>) {
    let (stop, mut stopped) = watch::channel(false);
    let task = tokio::spawn(async move {
        let mut clients = Vec::new();
        let mut ticks = tokio::time::interval(GAP);
        for i in 0u64.. {
            tokio::select! {
                _ = ticks.tick() => {}
                _ = stopped.wait_for(|s| *s) => break,
            }
            let mut rng =
                fastrand::Rng::with_seed(seed ^ (i + 1).wrapping_mul(0x9E37_79B9_7F4A_7C15));
            let planned = Duration::from_millis(rng.u64(SHORTEST_MS..=LONGEST_MS));
            clients.push(tokio::spawn(session(transport.clone(), i, planned, t0)));
        }
        let mut records = Vec::new();
        for c in clients {
            records.push(c.await.expect("client task"));
        }
        records
    });
    (stop, task)
}

/// One session from its first attempt to its end.
async fn session(transport: Transport, i: u64, planned: Duration, t0: Instant) -> Record {
    let mut record = Record {
        planned,
        first_attempt: t0.elapsed().as_secs_f64(),
        refusals: Vec::new(),
        opened_at: 0.0,
        backend: usize::MAX,
        ended_at: 0.0,
        ending: Ending::NeverOpened,
    };
    let ending = match transport {
        Transport::Grpc { channels, ports } => {
            let ch = channels[i as usize % channels.len()].clone();
            grpc(ch, &ports, &mut record, t0).await
        }
        Transport::WebSocket { url, names } => websocket(&url, &names, &mut record, t0).await,
    };
    record.ended_at = t0.elapsed().as_secs_f64();
    record.ending = ending;
    record
}

// === WebSocket ===

async fn websocket(url: &str, names: &[String], record: &mut Record, t0: Instant) -> Ending {
    type Ws = tokio_tungstenite::WebSocketStream<
        tokio_tungstenite::MaybeTlsStream<tokio::net::TcpStream>,
    >;
    let mut ws: Ws = loop {
        if record.refusals.len() == ATTEMPTS {
            return Ending::NeverOpened;
        }
        let attempt = tokio::time::timeout(STEP, tokio_tungstenite::connect_async(url)).await;
        match attempt {
            Ok(Ok((ws, response))) => {
                let header = response.headers().get("x-livecount-backend");
                let name = header.and_then(|v| v.to_str().ok()).unwrap_or_default();
                record.backend = names.iter().position(|n| n == name).unwrap_or_else(|| {
                    panic!("no backend named in x-livecount-backend: {response:?}")
                });
                break ws;
            }
            Ok(Err(tungstenite::Error::Http(response))) => {
                let hint =
                    response.status() == 503 && response.headers().contains_key("retry-after");
                record
                    .refusals
                    .push((hint, format!("HTTP {}", response.status())));
            }
            Ok(Err(e)) => record.refusals.push((false, e.to_string())),
            Err(_) => record
                .refusals
                .push((false, "no upgrade within 10 s".into())),
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    };
    record.opened_at = t0.elapsed().as_secs_f64();
    let end = tokio::time::Instant::now() + record.planned;
    loop {
        // A turn only when it ends well before the planned end; meanwhile the socket is
        // read, so a close from the server is seen when it comes.
        let next = tokio::time::Instant::now() + TURN;
        let last = next + Duration::from_millis(300) >= end;
        let until = if last { end } else { next };
        tokio::select! {
            () = tokio::time::sleep_until(until) => {}
            msg = ws.next() => return ws_end(msg),
        }
        if last {
            break;
        }
        let speak = Message::text(r#"{"type":"speak","chunks":3}"#);
        if ws.send(speak).await.is_err() {
            return ws_end(ws.next().await);
        }
        loop {
            match tokio::time::timeout(STEP, ws.next()).await {
                Err(_) => return Ending::Lost("no frame within 10 s".into()),
                Ok(Some(Ok(Message::Text(t)))) if t.contains("\"done\"") => break,
                Ok(Some(Ok(Message::Text(_)))) => {}
                Ok(msg) => return ws_end(msg),
            }
        }
    }
    if ws.send(Message::text(r#"{"type":"bye"}"#)).await.is_err() {
        return ws_end(ws.next().await);
    }
    loop {
        match tokio::time::timeout(STEP, ws.next()).await {
            Err(_) => return Ending::Lost("no close within 10 s of bye".into()),
            Ok(Some(Ok(Message::Close(frame)))) => {
                let code = frame.map(|f| u16::from(f.code));
                return match code {
                    Some(1000) | None => Ending::Completed,
                    Some(1012) => Ending::Shutdown,
                    Some(other) => Ending::Lost(format!("close {other} after bye")),
                };
            }
            Ok(Some(Ok(_))) => {}
            Ok(msg) => return ws_end(msg),
        }
    }
}

/// A message that ended the session from the server's side.
fn ws_end(msg: Option<Result<Message, tungstenite::Error>>) -> Ending {
    match msg {
        Some(Ok(Message::Close(Some(f)))) if u16::from(f.code) == 1012 => Ending::Shutdown,
        Some(Ok(Message::Close(f))) => Ending::Lost(format!("close {f:?}")),
        Some(Ok(other)) => Ending::Lost(format!("unexpected {other:?}")),
        Some(Err(e)) => Ending::Lost(e.to_string()),
        None => Ending::Lost("connection ended without a close".into()),
    }
}

// === gRPC ===

async fn grpc(ch: Channel, ports: &[u16], record: &mut Record, t0: Instant) -> Ending {
    let (tx, mut response) = loop {
        if record.refusals.len() == ATTEMPTS {
            return Ending::NeverOpened;
        }
        let (tx, mut rx) = mpsc::channel(16);
        let requests = futures_util::stream::poll_fn(move |cx| rx.poll_recv(cx));
        let mut client = pb::agent_client::AgentClient::new(ch.clone());
        match tokio::time::timeout(STEP, client.converse(requests)).await {
            Ok(Ok(response)) => {
                let header = response.metadata().get("x-livecount-upstream");
                let addr = header.and_then(|v| v.to_str().ok()).unwrap_or_default();
                let port = addr.rsplit_once(':').and_then(|(_, p)| p.parse().ok());
                record.backend = ports
                    .iter()
                    .position(|p| Some(*p) == port)
                    .unwrap_or_else(|| {
                        panic!(
                            "no backend in x-livecount-upstream: {:?}",
                            response.metadata()
                        )
                    });
                break (tx, response.into_inner());
            }
            Ok(Err(status)) => {
                let hint = status.code() == tonic::Code::Unavailable;
                record
                    .refusals
                    .push((hint, format!("{:?}: {}", status.code(), status.message())));
            }
            Err(_) => record
                .refusals
                .push((false, "no headers within 10 s".into())),
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    };
    record.opened_at = t0.elapsed().as_secs_f64();
    let end = tokio::time::Instant::now() + record.planned;
    let frame = |f| pb::ClientFrame { frame: Some(f) };
    loop {
        let next = tokio::time::Instant::now() + TURN;
        let last = next + Duration::from_millis(300) >= end;
        tokio::select! {
            () = tokio::time::sleep_until(if last { end } else { next }) => {}
            msg = response.message() => return grpc_end(msg),
        }
        if last {
            break;
        }
        let spoke = tx.send(frame(Client::Speak(pb::Speak { chunks: 3 }))).await;
        if spoke.is_err() {
            return grpc_end(response.message().await);
        }
        loop {
            match tokio::time::timeout(STEP, response.message()).await {
                Err(_) => return Ending::Lost("no frame within 10 s".into()),
                Ok(Ok(Some(pb::ServerFrame {
                    frame: Some(Server::Done(_)),
                }))) => break,
                Ok(Ok(Some(pb::ServerFrame {
                    frame: Some(Server::Chunk(_)),
                }))) => {}
                Ok(msg) => return grpc_end(msg),
            }
        }
    }
    if tx.send(frame(Client::Bye(pb::Bye {}))).await.is_err() {
        return grpc_end(response.message().await);
    }
    match tokio::time::timeout(STEP, response.message()).await {
        Err(_) => Ending::Lost("no end within 10 s of bye".into()),
        Ok(Ok(None)) => Ending::Completed,
        Ok(msg) => grpc_end(msg),
    }
}

/// A message or status that ended the call from the server's side.
fn grpc_end(msg: Result<Option<pb::ServerFrame>, tonic::Status>) -> Ending {
    match msg {
        Err(s) if s.code() == tonic::Code::Unavailable && s.message().contains("shutting down") => {
            Ending::Shutdown
        }
        Err(s) => Ending::Lost(format!("{:?}: {}", s.code(), s.message())),
        Ok(None) => Ending::Lost("the call ended OK without a bye".into()),
        Ok(Some(f)) => Ending::Lost(format!("unexpected {f:?}")),
    }
}
