//! A capped [`Backend`], built and served only through the public API, against a client
//! that opens sessions and never says a word: many HTTP/2 connections of gRPC streams that
//! never send a frame, and WebSockets that never send a message. The probes (gRPC health,
//! `/load`) keep being answered while the attacker holds the cap; every silent session ends
//! at the first-frame timeout — not before, and within two sweeps after — `Disconnected`
//! with its documented status or close code; the places come back to a well-behaved client,
//! whose stream outlives the timeout, and the count returns to zero with started = ended.

#[path = "../../tower/tests/common/raw_h2.rs"]
mod raw_h2;
#[path = "../../tower/tests/common/raw_ws.rs"]
mod raw_ws;

use std::future::IntoFuture;
use std::net::SocketAddr;
use std::time::{Duration, Instant};

use livecount_service::{Backend, EndReason};
use tokio::net::{TcpListener, TcpStream};
use tokio::time::timeout;
use tokio_util::sync::CancellationToken;
use tonic_health::pb::HealthCheckRequest;
use tonic_health::pb::health_check_response::ServingStatus;
use tonic_health::pb::health_client::HealthClient;

const WATCH: &str = "/grpc.health.v1.Health/Watch";
const CAP: u64 = 20;
const FIRST_FRAME: Duration = Duration::from_secs(1);
/// The bound of every single wait.
const WAIT: Duration = Duration::from_secs(20);

/// A silent stream's outcome: `grpc-status` and `grpc-message`, from a trailers-only
/// answer or the trailers.
async fn grpc_status(response: h2::client::ResponseFuture) -> (String, String) {
    let response = timeout(WAIT, response).await.unwrap().unwrap();
    let field = |map: &http::HeaderMap, name| map.get(name).map(|v| v.to_str().unwrap().to_owned());
    if let Some(status) = field(response.headers(), "grpc-status") {
        return (
            status,
            field(response.headers(), "grpc-message").unwrap_or_default(),
        );
    }
    let mut body = response.into_body();
    while let Some(data) = timeout(WAIT, body.data()).await.unwrap() {
        data.unwrap();
    }
    let trailers = timeout(WAIT, body.trailers())
        .await
        .unwrap()
        .unwrap()
        .unwrap();
    let status = field(&trailers, "grpc-status").unwrap();
    (status, field(&trailers, "grpc-message").unwrap_or_default())
}

async fn get(addr: SocketAddr, path: &str) -> String {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let mut conn = TcpStream::connect(addr).await.unwrap();
    let request = format!("GET {path} HTTP/1.1\r\nhost: x\r\nconnection: close\r\n\r\n");
    conn.write_all(request.as_bytes()).await.unwrap();
    let mut reply = String::new();
    timeout(WAIT, conn.read_to_string(&mut reply))
        .await
        .unwrap()
        .unwrap();
    reply
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn silent_sessions_give_their_places_back_at_the_first_frame_timeout() {
    let backend = Backend::builder("b1")
        .max_sessions(CAP)
        .first_frame_timeout(FIRST_FRAME)
        .count_grpc(|path| path == WATCH)
        .build();
    let tracker = backend.tracker().clone();
    let bind = || TcpListener::bind("127.0.0.1:0");
    let (http, grpc) = (bind().await.unwrap(), bind().await.unwrap());
    let (http_addr, grpc_addr) = (http.local_addr().unwrap(), grpc.local_addr().unwrap());
    let shutdown = CancellationToken::new();
    let app = backend.routes().route(
        "/session",
        axum::routing::get(
            |ws: axum::extract::WebSocketUpgrade,
             axum::extract::State(backend): axum::extract::State<Backend>| async move {
                backend.websocket(ws, |mut socket, _| async move {
                    while let Some(Ok(message)) = socket.recv().await
                        && socket.send(message).await.is_ok()
                    {}
                })
            },
        ),
    );
    let served = backend
        .serve(shutdown.clone().cancelled_owned())
        .http(http, app)
        .grpc(grpc);
    let server = tokio::spawn(served.into_future());

    // The attack: 4 connections of 10 silent streams each, and 5 silent WebSockets.
    let mut connections = Vec::new();
    let mut streams = Vec::new();
    for _ in 0..4 {
        let mut conn = raw_h2::raw_h2(grpc_addr, 65_535).await;
        for _ in 0..10 {
            let (response, send) = conn.call(WATCH).await;
            streams.push((Instant::now(), response, send));
        }
        connections.push(conn);
    }
    let mut sockets = Vec::new();
    for _ in 0..5 {
        let (conn, head) = raw_ws::upgrade_request(http_addr, "/session", None).await;
        sockets.push((Instant::now(), conn, head));
    }

    // The probes are answered while the cap is held.
    let probe_started = Instant::now();
    let channel = tonic::transport::Endpoint::from_shared(format!("http://{grpc_addr}"))
        .unwrap()
        .connect()
        .await
        .unwrap();
    let health = HealthClient::new(channel.clone())
        .check(HealthCheckRequest::default())
        .await
        .unwrap()
        .into_inner();
    assert_eq!(health.status, ServingStatus::Serving as i32);
    let load = get(http_addr, "/load").await;
    assert!(load.starts_with("HTTP/1.1 200"), "{load}");
    assert!(
        probe_started.elapsed() < FIRST_FRAME,
        "probes waited on the attacker"
    );
    assert_eq!(tracker.active(), CAP, "the attacker holds the cap");

    // Every admitted silent stream ends at the timeout, the rest were refused at once.
    let mut cut = 0;
    for (opened, response, _send) in streams {
        let (status, message) = grpc_status(response).await;
        match status.as_str() {
            "4" => {
                let lasted = opened.elapsed();
                assert_eq!(message, "first frame timeout");
                assert!(lasted >= FIRST_FRAME, "ended early: {lasted:?}");
                assert!(lasted < FIRST_FRAME * 3, "ended late: {lasted:?}");
                cut += 1;
            }
            "8" => {} // RESOURCE_EXHAUSTED: past the cap
            other => panic!("unexpected grpc-status {other} {message:?}"),
        }
    }
    // The sockets: each upgraded one closed 1008, the others refused 503 at the cap.
    for (opened, mut conn, head) in sockets {
        if head.starts_with("HTTP/1.1 101") {
            assert_eq!(raw_ws::close_code(&mut conn).await, Some(1008));
            assert!(opened.elapsed() >= FIRST_FRAME);
            cut += 1;
        } else {
            assert!(head.starts_with("HTTP/1.1 503"), "{head}");
        }
    }
    assert_eq!(cut, CAP, "every admitted silent session was cut");

    // The places are back: a well-behaved Watch is admitted and served.
    let mut watch = HealthClient::new(channel)
        .watch(HealthCheckRequest::default())
        .await
        .unwrap()
        .into_inner();
    let first = timeout(WAIT, watch.message())
        .await
        .unwrap()
        .unwrap()
        .unwrap();
    assert_eq!(first.status, ServingStatus::Serving as i32);
    // A client that sent its request is heard: the timeout is no limit on its session,
    // whether it ended its request (tonic's Watch) or left it open after one message.
    let mut raw = raw_h2::raw_h2(grpc_addr, 65_535).await;
    let (_open_response, mut open_request) = raw.call(WATCH).await;
    let empty_message = bytes::Bytes::from_static(&[0, 0, 0, 0, 0]); // HealthCheckRequest {}
    open_request.send_data(empty_message, false).unwrap();
    tokio::time::sleep(FIRST_FRAME * 2).await;
    assert_eq!(tracker.active(), 2, "a heard stream was cut");
    drop((watch, open_request, _open_response, raw));
    drop(connections);

    let settled = async {
        while tracker.active() != 0 {
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    };
    timeout(WAIT, settled).await.unwrap();
    let s = tracker.snapshot();
    assert!(s.is_consistent(), "{s:?}");
    assert_eq!((s.started, s.ended), (CAP + 2, CAP + 2), "{s:?}");
    // The silent ones, and the raw heard stream whose connection was dropped; the Watch
    // its client left is `Cancelled`.
    assert_eq!(s.ended_by(EndReason::Disconnected), CAP + 1, "{s:?}");
    assert_eq!(s.ended_by(EndReason::Cancelled), 1, "{s:?}");
    assert_eq!(s.refused, 40 + 5 - CAP, "{s:?}");
    shutdown.cancel();
    let drained = timeout(WAIT, server).await.unwrap().unwrap().unwrap();
    assert_eq!(drained.cut, 0);
}
