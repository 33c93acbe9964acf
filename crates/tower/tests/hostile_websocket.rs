//! `WebSocketSessions` as a service author mounts it (public API only: a tracker, the
//! sessions, an axum router), against hostile and careless clients on loopback with raw
//! TCP: a silent peer, a peer that stops reading, an oversized message, RFC 6455 violations,
//! a reset mid-frame, a peer gone without a close, the maximum length, an end from
//! elsewhere, and a burst of 10 000 connects against a cap. After each: the ending it
//! caused (reason and close code), active 0, started = ended.

mod common;
#[path = "common/raw_ws.rs"]
mod raw_ws;

use std::net::SocketAddr;
use std::process::Stdio;
use std::time::{Duration, Instant};

use axum::Router;
use axum::extract::ws::Message;
use axum::extract::{State, WebSocketUpgrade};
use axum::response::Response;
use axum::routing::get;
use common::{assert_only, settle};
use futures_util::{SinkExt, StreamExt};
use livecount_session::{EndReason, SessionTracker};
use livecount_tower::WebSocketSessions;
use livecount_tower::websocket::SocketEnd;
use raw_ws::{close_code, frame, raw_upgrade, text, trickle, upgrade_request, within};
use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt};
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

/// `/session` echoes every message; `/push` sends 16 KiB messages without end and reads
/// nothing (a server-push stream).
fn app(sessions: WebSocketSessions) -> Router {
    async fn echo(ws: WebSocketUpgrade, State(sessions): State<WebSocketSessions>) -> Response {
        sessions.upgrade(ws, |mut socket, _session| async move {
            while let Some(Ok(message)) = socket.recv().await {
                if socket.send(message).await.is_err() {
                    break;
                }
            }
        })
    }
    async fn push(ws: WebSocketUpgrade, State(sessions): State<WebSocketSessions>) -> Response {
        sessions.upgrade(ws, |mut socket, _session| async move {
            let chunk = vec![7u8; 16 * 1024];
            while socket
                .send(Message::Binary(chunk.clone().into()))
                .await
                .is_ok()
            {}
        })
    }
    /// Answers the first message with last words and close 4000, after the end.
    async fn once(ws: WebSocketUpgrade, State(sessions): State<WebSocketSessions>) -> Response {
        sessions.upgrade(ws, |mut socket, _session| async move {
            let _ = socket.recv().await;
            SocketEnd::new(EndReason::Failed)
                .say(Message::Text("last words".into()))
                .close(4000, "done with you")
        })
    }
    Router::new()
        .route("/session", get(echo))
        .route("/push", get(push))
        .route("/once", get(once))
        .with_state(sessions)
}

struct Service {
    addr: SocketAddr,
    tracker: SessionTracker,
    shutdown: CancellationToken,
    task: JoinHandle<()>,
}

/// The service on loopback, its sockets held to `limits`, its tracker capped at `max`.
async fn serve(
    limits: impl FnOnce(WebSocketSessions) -> WebSocketSessions,
    max: Option<u64>,
) -> Service {
    let tracker = max.map_or_else(SessionTracker::new, SessionTracker::with_max_sessions);
    let shutdown = CancellationToken::new();
    let sessions =
        WebSocketSessions::new(tracker.clone()).close_timeout(Duration::from_millis(500));
    let sessions = limits(sessions);
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let graceful = shutdown.clone().cancelled_owned();
    let task = tokio::spawn(async move {
        axum::serve(listener, app(sessions))
            .with_graceful_shutdown(graceful)
            .await
            .unwrap();
    });
    Service {
        addr,
        tracker,
        shutdown,
        task,
    }
}

impl Service {
    /// Waits for every session to end, checks the counts balance, and stops the service.
    async fn settled(self) -> livecount_session::Snapshot {
        let tracker = self.tracker.clone();
        settle(|| tracker.active() == 0, "every session ended").await;
        let s = self.tracker.snapshot();
        assert!(s.is_consistent(), "{s:?}");
        assert_eq!((s.active, s.started), (0, s.ended), "{s:?}");
        self.shutdown.cancel();
        within(10, self.task).await.unwrap();
        s
    }
}

/// Short limits, so each test sees its limit pass within a second.
fn short(sessions: WebSocketSessions) -> WebSocketSessions {
    sessions
        .idle_timeout(Duration::from_millis(300))
        .write_timeout(Duration::from_millis(300))
        .max_message_bytes(1024)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_silent_peer_is_disconnected_at_the_idle_timeout_with_1008() {
    let service = serve(short, None).await;
    // From before the upgrade: the server's wait begins before the client reads the 101.
    let start = Instant::now();
    let mut conn = raw_upgrade(service.addr, "/session", None).await;
    assert_eq!(close_code(&mut conn).await, Some(1008));
    let took = start.elapsed();
    assert!(
        took >= Duration::from_millis(300) && took < Duration::from_secs(2),
        "{took:?}"
    );
    let tracker = service.tracker.clone();
    service.settled().await;
    assert_only(&tracker, EndReason::Disconnected);
}

/// A client that talks (pings every 100 ms) is not idle, however long it stays silent
/// otherwise; it then leaves with a close frame: `Completed`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pings_keep_a_quiet_client_alive() {
    let service = serve(short, None).await;
    let url = format!("ws://{}/session", service.addr);
    let (mut client, _) = within(5, tokio_tungstenite::connect_async(url))
        .await
        .unwrap();
    for _ in 0..10 {
        client
            .send(tokio_tungstenite::tungstenite::Message::Ping(
                vec![1].into(),
            ))
            .await
            .unwrap();
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert_eq!(
        service.tracker.active(),
        1,
        "cut while pinging every 100 ms"
    );
    client.close(None).await.unwrap();
    // The close handshake completes: the server's reply, not a dropped connection.
    loop {
        match within(5, client.next()).await {
            Some(Ok(tokio_tungstenite::tungstenite::Message::Close(_))) => break,
            Some(Ok(_echoed)) => {}
            other => panic!("expected the close reply, got {other:?}"),
        }
    }
    let tracker = service.tracker.clone();
    service.settled().await;
    assert_only(&tracker, EndReason::Completed);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_peer_that_stops_reading_is_disconnected_at_the_write_timeout() {
    let service = serve(short, None).await;
    let fds_before = raw_ws::open_fds();
    let _conn = raw_upgrade(service.addr, "/push", Some(4096)).await; // never read
    let start = Instant::now();
    let tracker = service.tracker.clone();
    settle(
        || tracker.snapshot().ended == 1,
        "the stalled session ended",
    )
    .await;
    let took = start.elapsed();
    assert!(took < Duration::from_secs(3), "{took:?}");
    assert!(raw_ws::open_fds() <= fds_before + 2, "descriptors leaked");
    service.settled().await;
    assert_only(&tracker, EndReason::Disconnected);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_oversized_message_fails_the_session_with_1009() {
    let service = serve(short, None).await;
    let mut conn = raw_upgrade(service.addr, "/session", None).await;
    conn.write_all(&text(&"x".repeat(2000))).await.unwrap();
    assert_eq!(close_code(&mut conn).await, Some(1009));
    let tracker = service.tracker.clone();
    service.settled().await;
    assert_only(&tracker, EndReason::Failed);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn protocol_violations_fail_with_their_rfc_6455_code() {
    let service = serve(short, None).await;
    let cases: Vec<(&str, Vec<u8>, u16)> = vec![
        (
            "invalid UTF-8",
            frame(true, 0, 0x1, &[b'{', 0xff, 0xfe], true),
            1007,
        ),
        (
            "unmasked client frame",
            frame(true, 0, 0x1, b"{}", false),
            1002,
        ),
        ("RSV1 set", frame(true, 0b100, 0x1, b"{}", true), 1002),
        ("fragmented ping", frame(false, 0, 0x9, b"p", true), 1002),
        (
            "reserved data opcode",
            frame(true, 0, 0x3, b"x", true),
            1002,
        ),
    ];
    let n = cases.len() as u64;
    for (what, bytes, expected) in cases {
        let mut conn = raw_upgrade(service.addr, "/session", None).await;
        trickle(&mut conn, &bytes).await;
        assert_eq!(close_code(&mut conn).await, Some(expected), "{what}");
    }
    let s = service.settled().await;
    assert_eq!((s.ended, s.ended_by(EndReason::Failed)), (n, n), "{s:?}");
}

/// Half a frame, then a TCP reset (SO_LINGER 0): the connection is lost mid-frame.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_reset_mid_frame_is_disconnected() {
    let service = serve(short, None).await;
    let mut conn = raw_upgrade(service.addr, "/session", None).await;
    let whole = text("a message that never arrives whole");
    conn.write_all(&whole[..whole.len() / 2]).await.unwrap();
    tokio::time::sleep(Duration::from_millis(50)).await;
    conn.set_zero_linger().unwrap();
    drop(conn);
    let tracker = service.tracker.clone();
    service.settled().await;
    assert_only(&tracker, EndReason::Disconnected);
}

/// The handler sees its stream end and returns `()` (which says `Completed`), but the
/// client left without a close frame: the transport's word wins, `Disconnected`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_peer_gone_without_a_close_is_disconnected_whatever_the_handler_says() {
    let service = serve(short, None).await;
    let mut conn = raw_upgrade(service.addr, "/session", None).await;
    conn.write_all(&text("hello")).await.unwrap();
    let mut echo = [0u8; 7];
    within(5, conn.read_exact(&mut echo)).await.unwrap();
    drop(conn); // FIN, no close frame
    let tracker = service.tracker.clone();
    service.settled().await;
    assert_only(&tracker, EndReason::Disconnected);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_maximum_length_times_out_with_1000() {
    let limits = |s| {
        short(s)
            .max_session(Duration::from_millis(400))
            .idle_timeout(None)
    };
    let service = serve(limits, None).await;
    let start = Instant::now();
    let mut conn = raw_upgrade(service.addr, "/session", None).await;
    assert_eq!(close_code(&mut conn).await, Some(1000));
    assert!(start.elapsed() >= Duration::from_millis(400));
    let tracker = service.tracker.clone();
    service.settled().await;
    assert_only(&tracker, EndReason::TimedOut);
}

/// `end_all` (a drain's last step) reaches open sockets: 1012 "service restart".
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_end_from_elsewhere_closes_the_socket_with_its_reason() {
    let service = serve(|s| s, None).await;
    let mut conn = raw_upgrade(service.addr, "/session", None).await;
    let tracker = service.tracker.clone();
    settle(|| tracker.active() == 1, "the session started").await;
    assert_eq!(tracker.end_all(EndReason::Shutdown), 1);
    assert_eq!(close_code(&mut conn).await, Some(1012));
    service.settled().await;
    assert_only(&tracker, EndReason::Shutdown);
}

/// A handler's last words go out after its end: the client reads the message and close
/// 4000, and the session had already ended `Failed` when they were sent (a client that
/// never reads them still leaves the count at 0).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn last_words_are_said_after_the_end() {
    let service = serve(short, None).await;
    let url = format!("ws://{}/once", service.addr);
    let (mut client, _) = within(5, tokio_tungstenite::connect_async(url))
        .await
        .unwrap();
    client
        .send(tokio_tungstenite::tungstenite::Message::text("hi"))
        .await
        .unwrap();
    let said = within(5, client.next()).await.unwrap().unwrap();
    assert_eq!(said.into_text().unwrap().as_str(), "last words");
    match within(5, client.next()).await.unwrap().unwrap() {
        tokio_tungstenite::tungstenite::Message::Close(Some(frame)) => {
            assert_eq!(u16::from(frame.code), 4000);
        }
        other => panic!("expected close 4000, got {other:?}"),
    }
    // A second client that never reads its last words: the count is back all the same.
    let mut conn = raw_upgrade(service.addr, "/once", Some(4096)).await;
    conn.write_all(&text("hi")).await.unwrap();
    let tracker = service.tracker.clone();
    settle(|| tracker.snapshot().ended == 2, "both ended").await;
    let s = service.settled().await;
    assert_eq!(s.ended_by(EndReason::Failed), 2, "{s:?}");
}

// === a burst against the cap ===

/// The cap the burst meets, and how many connect at once.
const CAP: u64 = 64;
const BURST: u64 = 10_000;
/// Set in the child process that serves the burst.
const BURST_CHILD: &str = "LIVECOUNT_TEST_BURST_SERVER";

/// 10 000 clients connect at once to a service capped at 64, each holding its socket until
/// every one has its answer: exactly 64 are upgraded (so never more than 64 were admitted,
/// not even for an instant, or more would hold a 101) and every other gets `503` with
/// `Retry-After`; the tracker counts 64 started and 9 936 refused, and once the clients
/// leave, 64 ended and active 0. The service runs in a child process (this test binary,
/// re-run as this same test with [`BURST_CHILD`] set: [`burst_server`]) so that neither
/// side needs 20 000 descriptors.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_burst_of_10_000_connects_never_passes_the_cap() {
    if std::env::var_os(BURST_CHILD).is_some() {
        return burst_server().await;
    }
    let test = "a_burst_of_10_000_connects_never_passes_the_cap";
    let mut child = tokio::process::Command::new(std::env::current_exe().unwrap())
        .args(["--exact", test, "--nocapture"])
        .env(BURST_CHILD, "1")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .unwrap();
    let mut lines = tokio::io::BufReader::new(child.stdout.take().unwrap()).lines();
    let addr: SocketAddr = loop {
        let line = within(30, lines.next_line())
            .await
            .unwrap()
            .expect("a port");
        if let Some(addr) = line.strip_prefix("LISTENING ") {
            break addr.parse().unwrap();
        }
    };
    let (go, ready) = tokio::sync::watch::channel(false);
    let start = Instant::now();
    let clients: Vec<_> = (0..BURST)
        .map(|_| {
            let mut ready = ready.clone();
            tokio::spawn(async move {
                let _ = ready.wait_for(|go| *go).await;
                let (conn, head) = tokio::time::timeout(
                    Duration::from_secs(60),
                    upgrade_request(addr, "/session", None),
                )
                .await
                .expect("an answer within a minute");
                if head.starts_with("HTTP/1.1 101") {
                    Some(conn) // held until every client has its answer
                } else {
                    assert!(head.starts_with("HTTP/1.1 503"), "{head}");
                    assert!(
                        head.to_ascii_lowercase().contains("retry-after: 1"),
                        "{head}"
                    );
                    None
                }
            })
        })
        .collect();
    go.send_replace(true);
    let mut held = Vec::new();
    for client in clients {
        held.extend(client.await.unwrap());
    }
    let took = start.elapsed();
    println!(
        "{BURST} connects answered in {took:?}: {} upgraded",
        held.len()
    );
    assert_eq!(held.len() as u64, CAP, "upgraded past the cap");
    let stats = stats(addr).await;
    assert_eq!(
        (stats[0], stats[1], stats[2]),
        (CAP, CAP, BURST - CAP),
        "active, started, refused"
    );
    drop(held); // every upgraded client leaves without a close frame
    let mut last = stats;
    for _ in 0..500 {
        last = self::stats(addr).await;
        if last[0] == 0 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert_eq!(
        last,
        [0, CAP, BURST - CAP, CAP, CAP],
        "active, started, refused, ended, disconnected"
    );
    drop(child.stdin.take()); // the child stops when its stdin closes
    let status = within(30, child.wait()).await.unwrap();
    assert!(status.success(), "the burst server failed: {status}");
}

/// The child's tracker as `[active, started, refused, ended, disconnected]`.
async fn stats(addr: SocketAddr) -> [u64; 5] {
    let body = common::http_exchange(addr, "GET", "/stats").await;
    let body = body.split("\r\n\r\n").nth(1).expect("a body");
    let values: Vec<u64> = body.split(',').map(|v| v.trim().parse().unwrap()).collect();
    values.try_into().expect("five figures")
}

/// The burst test's server, in its child process: the echo service capped at [`CAP`] plus
/// `/stats`, until its stdin closes.
async fn burst_server() {
    let tracker = SessionTracker::with_max_sessions(CAP);
    let shutdown = CancellationToken::new();
    let sessions = WebSocketSessions::new(tracker.clone());
    let stats = {
        let tracker = tracker.clone();
        move || {
            let s = tracker.snapshot();
            let d = s.ended_by(EndReason::Disconnected);
            async move { format!("{},{},{},{},{}", s.active, s.started, s.refused, s.ended, d) }
        }
    };
    let listener = tokio::net::TcpSocket::new_v4().unwrap();
    listener.bind("127.0.0.1:0".parse().unwrap()).unwrap();
    let listener = listener.listen(4096).unwrap();
    println!("LISTENING {}", listener.local_addr().unwrap());
    let app = app(sessions).route("/stats", get(stats));
    let graceful = shutdown.clone().cancelled_owned();
    let server = tokio::spawn(async move {
        axum::serve(listener, app)
            .with_graceful_shutdown(graceful)
            .await
            .unwrap();
    });
    let mut stdin = tokio::io::stdin();
    let mut sink = [0u8; 64];
    while stdin.read(&mut sink).await.is_ok_and(|n| n > 0) {}
    shutdown.cancel();
    within(10, server).await.unwrap();
}
