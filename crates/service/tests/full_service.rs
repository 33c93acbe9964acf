//! Runs `examples/full_service.rs` itself (included, not rebuilt through `cargo run`) on
//! loopback: a WebSocket and a gRPC `Health/Watch` stream are counted, and `/load`,
//! `/metrics`, ORCA and agent-check all report them, while ORCA's own stream is not
//! counted; a client leaving its Watch ends it `Cancelled`; the signal starts a drain in
//! which the open socket and Watch go on (the socket's handler told to wrap up), every
//! signal says draining (ORCA ends, agent-check `drain`, `/ready` 503, gRPC health
//! `NOT_SERVING`, `/load`), new sessions are refused with their retry hint, and at the
//! deadline the socket closes 1012 and the Watch ends `UNAVAILABLE`. And the
//! example attacked as it is mounted: a burst of connects against its cap (WebSocket and
//! Watch together), an oversized message, a protocol violation, a reset mid-frame and a
//! client gone without a close, each ended once with its reason.

#[path = "../examples/full_service.rs"]
mod full_service;
#[path = "../../tower/tests/common/raw_ws.rs"]
mod raw_ws;

use std::net::SocketAddr;
use std::time::Duration;

use futures_util::{SinkExt, StreamExt};
use livecount_report::generated::xds::data::orca::v3::OrcaLoadReport;
use livecount_report::generated::xds::service::orca::v3::OrcaLoadReportRequest;
use livecount_report::generated::xds::service::orca::v3::open_rca_service_client::OpenRcaServiceClient;
use livecount_service::{Backend, EndReason};
use livecount_session::SessionTracker;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::time::timeout;
use tokio_tungstenite::tungstenite::{self, protocol::frame::coding::CloseCode};
use tokio_util::sync::CancellationToken;
use tonic::Streaming;
use tonic::transport::{Channel, Endpoint};
use tonic_health::pb::health_check_response::ServingStatus;
use tonic_health::pb::health_client::HealthClient;
use tonic_health::pb::{HealthCheckRequest, HealthCheckResponse};

type Socket = tokio_tungstenite::WebSocketStream<tokio_tungstenite::MaybeTlsStream<TcpStream>>;

/// The bound of every single wait (a report is published every 10 s: the board's default).
const WAIT: Duration = Duration::from_secs(30);

/// Everything the test reads or writes; the running `serve` is `server`.
struct Running {
    http: SocketAddr,
    grpc: SocketAddr,
    check: SocketAddr,
    tracker: SessionTracker,
    shutdown: CancellationToken,
    server: tokio::task::JoinHandle<std::io::Result<()>>,
}

async fn start() -> Running {
    start_with(full_service::backend(full_service::MAX_SESSIONS)).await
}

async fn start_with(backend: Backend) -> Running {
    let bind = || TcpListener::bind("127.0.0.1:0");
    let (http, grpc, check) = (
        bind().await.unwrap(),
        bind().await.unwrap(),
        bind().await.unwrap(),
    );
    let shutdown = CancellationToken::new();
    let addrs = [&http, &grpc, &check].map(|l| l.local_addr().unwrap());
    let tracker = backend.tracker().clone();
    let signal = shutdown.clone().cancelled_owned();
    let server = tokio::spawn(full_service::serve([http, grpc, check], backend, signal));
    Running {
        http: addrs[0],
        grpc: addrs[1],
        check: addrs[2],
        tracker,
        shutdown,
        server,
    }
}

/// Everything a TCP peer at `addr` sends after `request`, until it closes.
async fn exchange(addr: SocketAddr, request: &str) -> String {
    let talk = async {
        let mut conn = TcpStream::connect(addr).await.unwrap();
        conn.write_all(request.as_bytes()).await.unwrap();
        let mut text = String::new();
        conn.read_to_string(&mut text).await.unwrap();
        text
    };
    timeout(WAIT, talk).await.expect("answered in time")
}

/// The status code of a `GET path`.
async fn get_status(addr: SocketAddr, path: &str) -> u16 {
    let text = exchange(addr, &format!("GET {path} HTTP/1.0\r\nHost: x\r\n\r\n")).await;
    text.split(' ')
        .nth(1)
        .and_then(|code| code.parse().ok())
        .expect("an HTTP status line")
}

/// The body of a `GET path` answered 200.
async fn get(addr: SocketAddr, path: &str) -> String {
    let text = exchange(addr, &format!("GET {path} HTTP/1.0\r\nHost: x\r\n\r\n")).await;
    let (head, body) = text.split_once("\r\n\r\n").expect("an HTTP response");
    assert!(head.starts_with("HTTP/1.0 200"), "{head}");
    body.to_owned()
}

/// Polls `/load` (every 50 ms, within `WAIT`) until it reports `active` sessions.
async fn load_shows(addr: SocketAddr, active: u64) -> serde_json::Value {
    let poll = async {
        loop {
            let report: serde_json::Value =
                serde_json::from_str(&get(addr, "/load").await).unwrap();
            if report["active"] == active {
                return report;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    };
    timeout(WAIT, poll)
        .await
        .unwrap_or_else(|_| panic!("/load never showed active {active}"))
}

/// Waits (within `WAIT`) until `done` holds; panics naming `what` if not.
async fn settle(mut done: impl FnMut() -> bool, what: &str) {
    let poll = async {
        while !done() {
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    };
    assert!(timeout(WAIT, poll).await.is_ok(), "timed out: {what}");
}

/// A WebSocket on `/session` that has echoed `text` once.
async fn echoing_socket(addr: SocketAddr, text: &str) -> Socket {
    let url = format!("ws://{addr}/session");
    let (mut socket, _) = timeout(WAIT, tokio_tungstenite::connect_async(url))
        .await
        .unwrap()
        .unwrap();
    socket.send(tungstenite::Message::text(text)).await.unwrap();
    let echoed = timeout(WAIT, socket.next()).await.unwrap().unwrap();
    assert_eq!(echoed.unwrap(), tungstenite::Message::text(text));
    socket
}

async fn channel(addr: SocketAddr) -> Channel {
    let endpoint = Endpoint::from_shared(format!("http://{addr}")).unwrap();
    timeout(WAIT, endpoint.connect()).await.unwrap().unwrap()
}

/// A `Health/Watch` stream of the whole server, past its first answer (`SERVING`).
async fn watch(channel: &Channel) -> Streaming<HealthCheckResponse> {
    let request = HealthCheckRequest::default(); // service "": the server as a whole
    let mut client = HealthClient::new(channel.clone());
    let call = client.watch(request);
    let mut stream = timeout(WAIT, call).await.unwrap().unwrap().into_inner();
    let first = timeout(WAIT, stream.message()).await.unwrap().unwrap();
    assert_eq!(first.unwrap().status, ServingStatus::Serving as i32);
    stream
}

async fn next_report(orca: &mut Streaming<OrcaLoadReport>) -> Option<OrcaLoadReport> {
    timeout(WAIT, orca.message()).await.unwrap().unwrap()
}

/// `up ready N%` with 1 ≤ N ≤ 100, or `drain`.
fn is_agent_reply(reply: &str, draining: bool) -> bool {
    if draining {
        return reply == "drain\n";
    }
    let weight = reply
        .strip_prefix("up ready ")
        .and_then(|r| r.strip_suffix("%\n"));
    weight
        .and_then(|w| w.parse::<u32>().ok())
        .is_some_and(|w| (1..=100).contains(&w))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_full_example_counts_reports_and_drains() {
    let running = start().await;
    let tracker = &running.tracker;

    // A WebSocket that echoes, and a Watch stream: two sessions.
    let mut socket = echoing_socket(running.http, "echo?").await;
    let grpc = channel(running.grpc).await;
    let first_watch = watch(&grpc).await;

    // Every encoder reports the two (ORCA's own stream is open meanwhile, not counted).
    let report = load_shows(running.http, 2).await;
    assert_eq!(
        (report["started"].as_u64(), report["draining"].as_bool()),
        (Some(2), Some(false))
    );
    let metrics = get(running.http, "/metrics").await;
    assert!(
        metrics.contains("\nlivecount_active_sessions 2\n"),
        "{metrics}"
    );
    let mut orca_client = OpenRcaServiceClient::new(grpc.clone());
    let orca_call = orca_client.stream_core_metrics(OrcaLoadReportRequest::default());
    let mut orca = timeout(WAIT, orca_call)
        .await
        .unwrap()
        .unwrap()
        .into_inner();
    let first_report = next_report(&mut orca)
        .await
        .expect("a first report at once");
    assert_eq!(first_report.named_metrics["active_sessions"], 2.0);
    let reply = exchange(running.check, "").await;
    assert!(is_agent_reply(&reply, false), "{reply:?}");
    assert_eq!(tracker.active(), 2, "the ORCA stream is no session");

    // A client that leaves its Watch stream: the response body is dropped unfinished.
    drop(first_watch);
    settle(
        || tracker.snapshot().ended_by(EndReason::Cancelled) == 1,
        "Watch cancelled",
    )
    .await;
    assert_eq!((tracker.active(), tracker.snapshot().ended), (1, 1));

    // A Watch that is still open at shutdown: it never ends by itself.
    let _open_watch = watch(&grpc).await;
    assert_eq!(tracker.active(), 2);

    assert_eq!(get_status(running.http, "/ready").await, 200);

    // The signal: the drain begins. The socket's handler is told to wrap up, and goes on.
    let began = std::time::Instant::now();
    running.shutdown.cancel();
    match timeout(WAIT, socket.next()).await.unwrap() {
        Some(Ok(tungstenite::Message::Text(text))) => assert_eq!(text.as_str(), "draining"),
        other => panic!("expected the handler's wrap-up message, got {other:?}"),
    }
    socket
        .send(tungstenite::Message::text("still here"))
        .await
        .unwrap();
    let echoed = timeout(WAIT, socket.next())
        .await
        .unwrap()
        .unwrap()
        .unwrap();
    assert_eq!(
        echoed,
        tungstenite::Message::text("still here"),
        "open sessions go on"
    );
    // Every signal says draining within the drain's first moments.
    assert!(
        next_report(&mut orca).await.is_none(),
        "ORCA streams end when draining"
    );
    let reply = exchange(running.check, "").await;
    assert!(is_agent_reply(&reply, true), "{reply:?}");
    assert_eq!(get_status(running.http, "/ready").await, 503);
    let report: serde_json::Value =
        serde_json::from_str(&get(running.http, "/load").await).unwrap();
    assert_eq!(report["draining"].as_bool(), Some(true));
    let health = HealthClient::new(grpc.clone())
        .check(HealthCheckRequest::default())
        .await
        .unwrap()
        .into_inner();
    assert_eq!(health.status, ServingStatus::NotServing as i32);
    // New sessions are refused with their retry hint, and counted refused, not started.
    let head = raw_ws::upgrade_request(running.http, "/session", None)
        .await
        .1;
    assert!(head.starts_with("HTTP/1.1 503"), "{head}");
    assert!(
        head.to_ascii_lowercase().contains("retry-after: 1"),
        "{head}"
    );
    let refused = HealthClient::new(grpc.clone())
        .watch(HealthCheckRequest::default())
        .await
        .unwrap_err();
    assert_eq!(refused.code(), tonic::Code::Unavailable, "{refused:?}");
    assert_eq!(tracker.snapshot().refused, 2);
    assert_eq!(tracker.active(), 2, "the socket and the open Watch go on");

    // At the deadline: the socket closes 1012 "service restart", the Watch ends UNAVAILABLE.
    match timeout(WAIT, socket.next()).await.unwrap() {
        Some(Ok(tungstenite::Message::Close(Some(frame)))) => {
            assert_eq!(frame.code, CloseCode::Restart)
        }
        other => panic!("expected a 1012 close, got {other:?}"),
    }
    assert!(
        began.elapsed() >= full_service::DRAIN,
        "not before the deadline"
    );
    let mut open_watch = _open_watch;
    let cut = loop {
        match timeout(WAIT, open_watch.message()).await.unwrap() {
            Ok(Some(_)) => continue, // the NOT_SERVING update
            other => break other,
        }
    };
    let status = cut.expect_err("the Watch cut at the deadline");
    assert_eq!(status.code(), tonic::Code::Unavailable, "{status:?}");

    let stopped = timeout(WAIT, running.server)
        .await
        .expect("serve returns after the drain");
    stopped.unwrap().unwrap();
    let s = tracker.snapshot();
    assert!(s.is_consistent(), "{s:?}");
    assert_eq!(
        (s.started, s.ended, s.active, s.refused),
        (3, 3, 0, 2),
        "{s:?}"
    );
    assert_eq!(
        s.ended_by(EndReason::Cancelled),
        1,
        "the Watch its client left"
    );
    assert_eq!(
        s.ended_by(EndReason::Shutdown),
        2,
        "the socket and the Watch cut off at the deadline: {s:?}"
    );
    // Everything `serve` started has stopped: agent-check no longer accepts.
    settle_refused(running.check).await;
}

/// Waits (within `WAIT`) until connecting to `addr` is refused.
async fn settle_refused(addr: SocketAddr) {
    let poll = async {
        while TcpStream::connect(addr).await.is_ok() {
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    };
    assert!(
        timeout(WAIT, poll).await.is_ok(),
        "agent-check still listening on {addr}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_client_that_closes_its_socket_completes_its_session() {
    // The echo answers the client's close frame; the session ends `Completed`, not `Failed`
    // (as it would if the handler returned the error of echoing the close).
    let running = start().await;
    let mut socket = echoing_socket(running.http, "bye").await;
    timeout(WAIT, socket.close(None)).await.unwrap().unwrap();
    let tracker = &running.tracker;
    settle(|| tracker.snapshot().ended == 1, "the session ended").await;
    let s = tracker.snapshot();
    assert_eq!(
        (s.active, s.ended_by(EndReason::Completed)),
        (0, 1),
        "{s:?}"
    );

    // Nothing open: shutdown does not wait out the drain (a generous bound: it takes ms).
    running.shutdown.cancel();
    let stopped = timeout(full_service::DRAIN, running.server).await;
    stopped
        .expect("serve returns before the drain bound")
        .unwrap()
        .unwrap();
}

/// The example under attack, capped at 8: 200 WebSocket connects at once upgrade exactly 8
/// (the rest get `503` with `Retry-After`), a Watch call past the cap gets
/// `RESOURCE_EXHAUSTED` (one cap for both), `/load` never reports capacity above it; then
/// an oversized message (1009), an unmasked frame (1002), a reset mid-frame and a client
/// gone without a close each end their session with its reason, and everything balances.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_example_holds_its_cap_and_ends_hostile_clients_once() {
    const CAP: u64 = 8;
    let running = start_with(full_service::backend(CAP)).await;
    let addr = running.http;
    let burst: Vec<_> = (0..200)
        .map(|_| tokio::spawn(async move { raw_ws::upgrade_request(addr, "/session", None).await }))
        .collect();
    let mut held = Vec::new();
    for client in burst {
        let (conn, head) = timeout(WAIT, client).await.unwrap().unwrap();
        if head.starts_with("HTTP/1.1 101") {
            held.push(conn);
        } else {
            assert!(head.starts_with("HTTP/1.1 503"), "{head}");
            assert!(
                head.to_ascii_lowercase().contains("retry-after: 1"),
                "{head}"
            );
        }
    }
    assert_eq!(held.len() as u64, CAP, "upgraded past the cap");
    let channel = channel(running.grpc).await;
    let refused = HealthClient::new(channel)
        .watch(HealthCheckRequest::default())
        .await
        .unwrap_err();
    assert_eq!(
        refused.code(),
        tonic::Code::ResourceExhausted,
        "{refused:?}"
    );
    let load: serde_json::Value = serde_json::from_str(&get(addr, "/load").await).unwrap();
    assert!(
        load["effective_capacity"].as_f64().unwrap() <= CAP as f64,
        "{load}"
    );
    let s = running.tracker.snapshot();
    assert_eq!(
        (s.active, s.started, s.refused),
        (CAP, CAP, 200 - CAP + 1),
        "{s:?}"
    );

    // Four of the held sockets misbehave; the other four leave cleanly.
    let big = raw_ws::text(&"x".repeat(70 * 1024));
    let unmasked = raw_ws::frame(true, 0, 0x1, b"{}", false);
    let mut rest = held.split_off(4);
    let mut it = held.into_iter();
    let (mut a, mut b, mut c, d) = (
        it.next().unwrap(),
        it.next().unwrap(),
        it.next().unwrap(),
        it.next().unwrap(),
    );
    a.write_all(&big).await.unwrap();
    assert_eq!(raw_ws::close_code(&mut a).await, Some(1009));
    raw_ws::trickle(&mut b, &unmasked).await;
    assert_eq!(raw_ws::close_code(&mut b).await, Some(1002));
    let hello = raw_ws::text("a message that never arrives whole");
    c.write_all(&hello[..hello.len() / 2]).await.unwrap();
    c.set_zero_linger().unwrap();
    drop(c); // reset mid-frame
    drop(d); // FIN, no close frame
    for conn in &mut rest {
        let close = raw_ws::frame(true, 0, 0x8, &1000u16.to_be_bytes(), true);
        conn.write_all(&close).await.unwrap();
        assert_eq!(
            raw_ws::close_code(conn).await,
            Some(1000),
            "the close reply"
        );
    }
    let tracker = running.tracker.clone();
    settle(|| tracker.active() == 0, "every session ended").await;
    let s = tracker.snapshot();
    assert!(s.is_consistent(), "{s:?}");
    assert_eq!(
        [
            EndReason::Failed,
            EndReason::Disconnected,
            EndReason::Completed
        ]
        .map(|r| s.ended_by(r)),
        [2, 2, 4],
        "{s:?}"
    );
    assert_eq!((s.started, s.ended), (CAP, CAP));
    running.shutdown.cancel();
    timeout(WAIT, running.server)
        .await
        .unwrap()
        .unwrap()
        .unwrap();
}
