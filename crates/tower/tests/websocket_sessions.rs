//! `WebSocketSessions` / `tracked_upgrade` over a real axum server on loopback, with
//! tokio-tungstenite clients: counted from the upgrade to the handler's end, left to finish
//! during a drain and ended `Shutdown` with a 1012 close at its deadline, nothing counted
//! for a refused upgrade, `Failed` for a failed one.

mod common;

use std::net::SocketAddr;
use std::time::Duration;

use axum::Router;
use axum::extract::ws::Message;
use axum::extract::{State, WebSocketUpgrade};
use axum::response::Response;
use axum::routing::get;
use common::settle;
use futures_util::{SinkExt, StreamExt};
use http::{Request, StatusCode};
use livecount_session::{EndReason, SessionTracker};
use livecount_tower::WebSocketSessions;
use livecount_tower::websocket::tracked_upgrade;
use tokio::task::JoinHandle;
use tokio_tungstenite::tungstenite;
use tokio_tungstenite::tungstenite::protocol::frame::coding::CloseCode;
use tokio_util::sync::CancellationToken;
use tower::ServiceExt;

const WAIT: Duration = Duration::from_secs(10);

async fn echo(ws: WebSocketUpgrade, State(sessions): State<WebSocketSessions>) -> Response {
    sessions.upgrade(ws, |mut socket, _session| async move {
        while let Some(message) = socket.recv().await {
            match message {
                Ok(Message::Close(_)) => return EndReason::Completed,
                Ok(message) => {
                    if socket.send(message).await.is_err() {
                        return EndReason::Disconnected;
                    }
                }
                Err(_) => return EndReason::Failed,
            }
        }
        EndReason::Disconnected
    })
}

async fn refuse(ws: WebSocketUpgrade, State(sessions): State<WebSocketSessions>) -> Response {
    // Splits the socket (the halves hold it) and fails at the first message.
    sessions.upgrade(ws, |socket, _session| async move {
        let (_sink, mut stream) = socket.split();
        stream.next().await;
        Err::<(), _>("bad request")
    })
}

async fn panic(ws: WebSocketUpgrade, State(sessions): State<WebSocketSessions>) -> Response {
    sessions.upgrade(ws, |_socket, _session| async move {
        if true {
            panic!("a handler bug (this panic is expected by the test)");
        }
    })
}

/// Through the socket's `Sink`: says "bye", closes, and only returns two seconds later.
async fn close_first(ws: WebSocketUpgrade, State(sessions): State<WebSocketSessions>) -> Response {
    sessions.upgrade(ws, |socket, _session| async move {
        let (mut sink, _stream) = socket.split();
        let _ = sink.send(Message::Text("bye".into())).await;
        let _ = sink.close().await;
        tokio::time::sleep(Duration::from_secs(2)).await;
        EndReason::Completed
    })
}

/// Messages fed (not flushed) through the socket's `Sink`, for `flood`'s counter.
static FED: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);

/// Feeds 400 messages of 64 KiB through the `Sink` to a client that never reads, counting
/// each one accepted: readiness must hold it back once the socket's buffers are full.
async fn flood(ws: WebSocketUpgrade, State(sessions): State<WebSocketSessions>) -> Response {
    sessions.upgrade(ws, |socket, _session| async move {
        let (mut sink, _stream) = socket.split();
        for _ in 0..400 {
            if sink
                .feed(Message::Binary(vec![7u8; 64 * 1024].into()))
                .await
                .is_err()
            {
                break;
            }
            FED.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        }
        EndReason::Completed
    })
}

fn app(tracker: &SessionTracker) -> Router {
    let sessions = WebSocketSessions::new(tracker.clone()).close_timeout(Duration::from_secs(2));
    Router::new()
        .route("/echo", get(echo))
        .route("/refuse", get(refuse))
        .route("/panic", get(panic))
        .route("/close_first", get(close_first))
        .route("/flood", get(flood))
        .with_state(sessions)
}

struct Server {
    addr: SocketAddr,
    tracker: SessionTracker,
    shutdown: CancellationToken,
    task: JoinHandle<()>,
}

async fn serve() -> Server {
    let tracker = SessionTracker::new();
    let shutdown = CancellationToken::new();
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let router = app(&tracker);
    let graceful = shutdown.clone().cancelled_owned();
    let task = tokio::spawn(async move {
        axum::serve(listener, router)
            .with_graceful_shutdown(graceful)
            .await
            .unwrap();
    });
    Server {
        addr,
        tracker,
        shutdown,
        task,
    }
}

type Client =
    tokio_tungstenite::WebSocketStream<tokio_tungstenite::MaybeTlsStream<tokio::net::TcpStream>>;

async fn connect(addr: SocketAddr, path: &str) -> Client {
    let url = format!("ws://{addr}{path}");
    let (client, response) = tokio::time::timeout(WAIT, tokio_tungstenite::connect_async(url))
        .await
        .expect("connect in time")
        .expect("upgrade");
    assert_eq!(response.status(), StatusCode::SWITCHING_PROTOCOLS);
    client
}

async fn next(client: &mut Client) -> Option<Result<tungstenite::Message, tungstenite::Error>> {
    tokio::time::timeout(WAIT, client.next())
        .await
        .expect("a message in time")
}

async fn stop(server: Server) {
    server.shutdown.cancel();
    tokio::time::timeout(WAIT, server.task)
        .await
        .expect("the server stops in time")
        .unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_socket_counts_from_the_upgrade_until_its_handler_returns() {
    let server = serve().await;
    let mut client = connect(server.addr, "/echo").await;
    assert_eq!(
        server.tracker.active(),
        1,
        "counted before the 101 reached the client"
    );
    client
        .send(tungstenite::Message::text("ping"))
        .await
        .unwrap();
    assert_eq!(
        next(&mut client).await.unwrap().unwrap(),
        tungstenite::Message::text("ping")
    );
    assert_eq!(server.tracker.active(), 1);
    client.close(None).await.unwrap();
    while next(&mut client).await.is_some() {}
    settle(|| server.tracker.active() == 0, "the handler returned").await;
    common::assert_only(&server.tracker, EndReason::Completed);
    stop(server).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_handler_error_fails_the_session() {
    let server = serve().await;
    let mut client = connect(server.addr, "/refuse").await;
    client.send(tungstenite::Message::text("hi")).await.unwrap();
    while let Some(Ok(_)) = next(&mut client).await {}
    settle(|| server.tracker.active() == 0, "the handler failed").await;
    common::assert_only(&server.tracker, EndReason::Failed);
    stop(server).await;
}

/// Says goodbye and returns as soon as the drain begins (or echoes until then).
async fn wrap_up(ws: WebSocketUpgrade, State(sessions): State<WebSocketSessions>) -> Response {
    sessions.upgrade(ws, |mut socket, _session| async move {
        let wrap_up = socket.drain_started();
        tokio::pin!(wrap_up);
        loop {
            tokio::select! {
                message = socket.recv() => match message {
                    Some(Ok(message)) => { let _ = socket.send(message).await; }
                    _ => return EndReason::Disconnected,
                },
                () = &mut wrap_up => {
                    assert!(socket.is_draining());
                    let _ = socket.send(Message::Text("goodbye".into())).await;
                    return EndReason::Completed;
                }
            }
        }
    })
}

/// A drain: the tracker's drain begun (the signal), then [`drain`] to its deadline.
/// Open sockets go on (an echo still echoes), a handler that watches the signal wraps up,
/// a new upgrade is refused `503` with `Retry-After` and counted refused, a socket the
/// client closes in time ends `Completed`, and the one still open at the deadline gets a
/// 1012 "service restart" close and ends `Shutdown`: every session once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_drain_lets_open_sockets_finish_and_closes_the_rest_with_service_restart() {
    let tracker = SessionTracker::new();
    let config = livecount_capacity::CapacityConfig::builder()
        .build()
        .unwrap();
    let board = std::sync::Arc::new(livecount_report::LoadBoard::new("t", config));
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let router = app(&tracker).route(
        "/wrap_up",
        get(wrap_up).with_state(WebSocketSessions::new(tracker.clone())),
    );
    // The server keeps serving through the drain (refusals, the deadline's closes).
    let server = tokio::spawn(async move { axum::serve(listener, router).await.unwrap() });
    let (mut ends_in_time, mut outlives) =
        (connect(addr, "/echo").await, connect(addr, "/echo").await);
    let mut polite = connect(addr, "/wrap_up").await;
    assert_eq!(tracker.active(), 3);

    tracker.begin_drain(); // the signal
    match next(&mut polite).await {
        Some(Ok(tungstenite::Message::Text(text))) => assert_eq!(text.as_str(), "goodbye"),
        other => panic!("expected the handler's goodbye, got {other:?}"),
    }
    ends_in_time
        .send(tungstenite::Message::text("still here"))
        .await
        .unwrap();
    match next(&mut ends_in_time).await {
        Some(Ok(tungstenite::Message::Text(text))) => assert_eq!(text.as_str(), "still here"),
        other => panic!("an open socket goes on during the drain: {other:?}"),
    }
    let url = format!("ws://{addr}/echo");
    match tokio::time::timeout(WAIT, tokio_tungstenite::connect_async(url))
        .await
        .unwrap()
    {
        Err(tungstenite::Error::Http(response)) => {
            assert_eq!(response.status(), StatusCode::SERVICE_UNAVAILABLE);
            assert!(response.headers().contains_key(http::header::RETRY_AFTER));
        }
        other => panic!("expected a 503 refusal while draining, got {other:?}"),
    }
    ends_in_time.close(None).await.unwrap();
    while next(&mut ends_in_time).await.is_some() {}
    settle(
        || tracker.active() == 1,
        "the in-time socket and the polite one ended",
    )
    .await;

    let deadline = Duration::from_millis(300);
    let drained = livecount_tower::drain(&tracker, &board, deadline, std::future::pending()).await;
    assert_eq!(
        (drained.open_at_start, drained.cut, drained.hurried),
        (1, 1, false)
    );
    assert!(drained.waited >= deadline);
    match next(&mut outlives).await {
        Some(Ok(tungstenite::Message::Close(Some(frame)))) => {
            assert_eq!(frame.code, CloseCode::Restart);
            assert_eq!(frame.reason.as_str(), "service restart");
        }
        other => panic!("expected a 1012 close, got {other:?}"),
    }
    let s = tracker.snapshot();
    assert_eq!((s.started, s.ended, s.active, s.refused), (3, 3, 0, 1));
    assert_eq!(s.ended_by(EndReason::Shutdown), 1);
    assert_eq!(s.ended_by(EndReason::Completed), 2);
    assert!(board.latest().draining);
    server.abort();
}

fn upgrade_request(path: &str) -> Request<axum::body::Body> {
    Request::get(path)
        .header("connection", "upgrade")
        .header("upgrade", "websocket")
        .header("sec-websocket-version", "13")
        .header("sec-websocket-key", "dGhlIHNhbXBsZSBub25jZQ==")
        .body(axum::body::Body::empty())
        .unwrap()
}

#[tokio::test]
async fn a_refused_upgrade_counts_nothing() {
    let tracker = SessionTracker::new();
    let router = app(&tracker);
    let plain = Request::get("/echo")
        .body(axum::body::Body::empty())
        .unwrap();
    let response = router.clone().oneshot(plain).await.unwrap();
    assert!(response.status().is_client_error(), "{}", response.status());
    // Upgrade headers, but a connection that cannot be upgraded (no hyper behind it).
    let response = router.oneshot(upgrade_request("/echo")).await.unwrap();
    assert!(response.status().is_client_error(), "{}", response.status());
    assert_eq!(tracker.snapshot().started, 0);
}

#[tokio::test]
async fn a_failed_upgrade_ends_the_session_it_started_failed() {
    let tracker = SessionTracker::new();
    let router = app(&tracker);
    let mut request = upgrade_request("/echo");
    // An upgrade hyper will never complete: its future fails at once.
    let on_upgrade = hyper::upgrade::on(&mut request);
    request.extensions_mut().insert(on_upgrade);
    let response = router.oneshot(request).await.unwrap();
    assert_eq!(response.status(), StatusCode::SWITCHING_PROTOCOLS);
    settle(|| tracker.active() == 0, "the failed upgrade ended it").await;
    common::assert_only(&tracker, EndReason::Failed);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tracked_upgrade_is_the_same_in_one_call() {
    let tracker: SessionTracker = SessionTracker::new();
    let shutdown = CancellationToken::new();
    let state = tracker.clone();
    let router = Router::new()
        .route(
            "/once",
            get(
                |ws: WebSocketUpgrade, State(tracker): State<SessionTracker>| async move {
                    tracked_upgrade(ws, &tracker, |mut socket, _| async move {
                        let _ = socket.recv().await;
                    })
                },
            ),
        )
        .with_state(state);
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let graceful = shutdown.clone().cancelled_owned();
    let task = tokio::spawn(async move {
        axum::serve(listener, router)
            .with_graceful_shutdown(graceful)
            .await
            .unwrap();
    });
    let mut client = connect(addr, "/once").await;
    client
        .send(tungstenite::Message::text("one"))
        .await
        .unwrap();
    while let Some(Ok(_)) = next(&mut client).await {}
    settle(|| tracker.active() == 0, "the handler returned").await;
    common::assert_only(&tracker, EndReason::Completed);
    stop(Server {
        addr,
        tracker,
        shutdown,
        task,
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_handler_that_panics_fails_the_session() {
    let server = serve().await;
    let mut client = connect(server.addr, "/panic").await;
    while let Some(Ok(_)) = next(&mut client).await {}
    settle(|| server.tracker.active() == 0, "the task unwound").await;
    common::assert_only(&server.tracker, EndReason::Failed);
    stop(server).await;
}

#[tokio::test]
async fn no_upgrade_is_counted_once_the_drain_began() {
    let tracker = SessionTracker::new();
    let router = app(&tracker);
    tracker.begin_drain();
    let mut request = upgrade_request("/echo");
    let on_upgrade = hyper::upgrade::on(&mut request);
    request.extensions_mut().insert(on_upgrade);
    let response = router.oneshot(request).await.unwrap();
    assert_eq!(response.status(), StatusCode::SERVICE_UNAVAILABLE);
    assert_eq!(tracker.snapshot().started, 0);
}

/// Closing through the socket's `Sink` closes the connection then, not when the handler
/// returns: the client gets the message and the close frame within a second while the
/// handler still sleeps.
#[tokio::test]
async fn a_close_through_the_sink_reaches_the_client_at_once() {
    let server = serve().await;
    let mut client = connect(server.addr, "/close_first").await;
    let within = Duration::from_secs(1);
    let first = tokio::time::timeout(within, client.next())
        .await
        .expect("bye in time");
    assert!(matches!(first, Some(Ok(tungstenite::Message::Text(t))) if t.as_str() == "bye"));
    let second = tokio::time::timeout(within, client.next())
        .await
        .expect("the close frame arrives before the handler returns");
    assert!(
        matches!(second, Some(Ok(tungstenite::Message::Close(_))) | None),
        "{second:?}"
    );
    server.shutdown.cancel();
    let _ = tokio::time::timeout(WAIT, server.task).await;
}

/// Back-pressure reaches a handler that only feeds the `Sink`: against a client that never
/// reads, it is held back long before its 400 × 64 KiB are all accepted.
#[tokio::test]
async fn feeding_a_client_that_never_reads_is_held_back() {
    let server = serve().await;
    let _client = connect(server.addr, "/flood").await; // never read
    tokio::time::sleep(Duration::from_secs(2)).await;
    let fed = FED.load(std::sync::atomic::Ordering::Relaxed);
    assert!(fed > 0, "the handler ran");
    assert!(
        fed < 400,
        "all {fed} messages (25 MiB) accepted with nobody reading"
    );
    server.shutdown.cancel();
    let _ = tokio::time::timeout(WAIT, server.task).await;
}
