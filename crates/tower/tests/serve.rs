//! `livecount_tower::serve` on loopback: slowloris request heads are closed within the head
//! timeout while descriptors stay bounded and fresh clients (HTTP and WebSocket) are
//! served; an idle keep-alive connection is closed after the head timeout; upgraded
//! connections and requests in flight are not shed before heads still arriving; an
//! oversized head is refused; graceful shutdown waits for the request in flight and is
//! bounded; a connection closed before its head (shed, timed out, shut down) is answered
//! `503` with `Retry-After`, which a client whose head comes late still reads.
//! (`serve_rlimit.rs` runs the server under a lowered `RLIMIT_NOFILE`.)
//!
//! Every wait is bounded, and every test takes `SERIAL` so that descriptor counts are not
//! disturbed by another test of this binary under `cargo test` (nextest runs each test in
//! a process of its own anyway).

use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::Duration;

use axum::Router;
use axum::extract::State;
use axum::extract::ws::WebSocketUpgrade;
use axum::response::Response;
use axum::routing::get;
use futures_util::{SinkExt, StreamExt};
use livecount_tower::serve;
use livecount_tower::serve::Serve;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{Notify, Semaphore, oneshot};
use tokio::task::JoinHandle;
use tokio::time::{Instant, timeout};
use tokio_tungstenite::tungstenite::Message;

/// The bound of a single wait.
const WAIT: Duration = Duration::from_secs(10);

/// One test at a time in this process (see the module docs).
static SERIAL: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

/// A request head that never ends: trickled a byte at a time, it is a slowloris.
fn endless_head(i: usize) -> u8 {
    const START: &[u8] = b"GET / HTTP/1.1\r\nHost: x\r\nX-Slow: ";
    START.get(i).copied().unwrap_or(b'a')
}

/// `/gate`: says it started, then answers once a permit is released.
#[derive(Clone)]
struct Gate {
    started: Arc<Notify>,
    release: Arc<Semaphore>,
}

impl Default for Gate {
    fn default() -> Self {
        Self {
            started: Arc::default(),
            release: Arc::new(Semaphore::new(0)),
        }
    }
}

async fn gated(State(gate): State<Gate>) -> &'static str {
    gate.started.notify_one();
    let _permit = gate.release.acquire().await.unwrap();
    "done"
}

async fn echo(ws: WebSocketUpgrade) -> Response {
    ws.on_upgrade(|mut socket| async move {
        while let Some(Ok(message)) = socket.recv().await {
            if socket.send(message).await.is_err() {
                break;
            }
        }
    })
}

fn app(gate: &Gate) -> Router {
    Router::new()
        .route("/", get(|| async { "hello" }))
        .route("/ws", get(echo))
        .route("/gate", get(gated))
        .route("/stuck", get(std::future::pending::<&'static str>))
        .with_state(gate.clone())
}

/// A running server: where it listens, how to stop it, and its task.
struct Server {
    addr: SocketAddr,
    stop: oneshot::Sender<()>,
    task: JoinHandle<()>,
}

impl Server {
    /// Signals shutdown and waits (bounded) for `serve` to return.
    async fn shut_down(self) {
        let _ = self.stop.send(());
        timeout(WAIT, self.task).await.unwrap().unwrap();
    }
}

/// Serves `app(gate)` configured by `configure`, shutting down within `shutdown_timeout`.
async fn start(
    gate: &Gate,
    configure: impl FnOnce(Serve<Router>) -> Serve<Router>,
    shutdown_timeout: Duration,
) -> Server {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let (stop, stopped) = oneshot::channel::<()>();
    let server = configure(serve(listener, app(gate)))
        .with_graceful_shutdown(async {
            stopped.await.ok();
        })
        .shutdown_timeout(shutdown_timeout);
    let task = tokio::spawn(server.into_future());
    Server { addr, stop, task }
}

/// The descriptors this process has open.
fn open_fds() -> usize {
    std::fs::read_dir("/proc/self/fd").map_or(0, Iterator::count)
}

/// Everything a peer sends after `request` until it closes.
async fn exchange(addr: SocketAddr, request: &str) -> String {
    let talk = async {
        let mut conn = TcpStream::connect(addr).await.unwrap();
        conn.write_all(request.as_bytes()).await.unwrap();
        let mut text = Vec::new();
        let _ = conn.read_to_end(&mut text).await; // a reset after the answer is fine
        String::from_utf8_lossy(&text).into_owned()
    };
    timeout(WAIT, talk).await.expect("answered in time")
}

/// A WebSocket upgrade on `/ws` and one echo; how long both took.
async fn websocket_echo(addr: SocketAddr, text: &str) -> Duration {
    let began = Instant::now();
    let session = async {
        let (mut socket, _) = tokio_tungstenite::connect_async(format!("ws://{addr}/ws"))
            .await
            .unwrap();
        socket.send(Message::text(text)).await.unwrap();
        let echoed = socket.next().await.unwrap().unwrap();
        assert_eq!(echoed, Message::text(text));
        socket
    };
    let socket = timeout(WAIT, session)
        .await
        .expect("a fresh session in time");
    drop(socket);
    began.elapsed()
}

/// Whether the server has closed `conn` (EOF or reset) within `within`; data it sends
/// first (an error response) is skipped.
async fn closed_within(conn: &mut TcpStream, within: Duration) -> bool {
    let deadline = Instant::now() + within;
    let mut buf = [0u8; 1024];
    loop {
        match tokio::time::timeout_at(deadline, conn.read(&mut buf)).await {
            Ok(Ok(0) | Err(_)) => return true,
            Ok(Ok(_)) => {}
            Err(_) => return false,
        }
    }
}

/// A slowloris: trickles `endless_head` a byte every 100 ms until the server closes the
/// connection, then returns how long that took (`None` if still open after `give_up`).
async fn slowloris(addr: SocketAddr, give_up: Duration) -> Option<Duration> {
    let mut conn = timeout(WAIT, TcpStream::connect(addr)).await.ok()?.ok()?;
    let began = Instant::now();
    for i in 0.. {
        if began.elapsed() > give_up {
            return None;
        }
        if conn.write_all(&[endless_head(i)]).await.is_err()
            || closed_within(&mut conn, Duration::from_millis(100)).await
        {
            return Some(began.elapsed());
        }
    }
    unreachable!()
}

/// `n` connections that each sent part of a request head and then wait.
async fn half_sent_heads(addr: SocketAddr, n: usize) -> Vec<TcpStream> {
    let mut held = Vec::with_capacity(n);
    for _ in 0..n {
        let mut conn = timeout(WAIT, TcpStream::connect(addr))
            .await
            .unwrap()
            .unwrap();
        conn.write_all(b"GET / HTTP/1.1\r\n").await.unwrap();
        held.push(conn);
        tokio::time::sleep(Duration::from_millis(5)).await; // accepted in this order
    }
    held
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn slowloris_heads_are_closed_in_time_with_descriptors_bounded_and_fresh_clients_served() {
    const ATTACKERS: usize = 256;
    const MAX_PENDING: usize = 64;
    let _serial = SERIAL.lock().await;
    let head_timeout = Duration::from_secs(1);
    let gate = Gate::default();
    let configure = |s: Serve<Router>| s.header_read_timeout(head_timeout).max_pending(MAX_PENDING);
    let server = start(&gate, configure, WAIT).await;
    let baseline = open_fds();

    // Sample the descriptors open every 5 ms while the attack lasts.
    let (peak, sampling) = (
        Arc::new(AtomicUsize::new(0)),
        Arc::new(AtomicBool::new(true)),
    );
    let sampler = tokio::spawn({
        let (peak, sampling) = (Arc::clone(&peak), Arc::clone(&sampling));
        async move {
            // Relaxed: a stop flag and a maximum read after the join.
            while sampling.load(Ordering::Relaxed) {
                peak.fetch_max(open_fds(), Ordering::Relaxed);
                tokio::time::sleep(Duration::from_millis(5)).await;
            }
        }
    });
    let give_up = head_timeout + Duration::from_secs(3);
    let attackers: Vec<_> = (0..ATTACKERS)
        .map(|_| tokio::spawn(slowloris(server.addr, give_up)))
        .collect();
    tokio::time::sleep(Duration::from_millis(300)).await; // every head is trickling

    // Meanwhile fresh clients are served: a whole answer, and a WebSocket session.
    let began = Instant::now();
    let answer = exchange(server.addr, "GET / HTTP/1.0\r\nHost: x\r\n\r\n").await;
    let fresh_get = began.elapsed();
    assert!(
        answer.starts_with("HTTP/1.0 200") && answer.ends_with("hello"),
        "{answer:?}"
    );
    let fresh_ws = websocket_echo(server.addr, "still here").await;

    let mut slowest = Duration::ZERO;
    for (i, attacker) in attackers.into_iter().enumerate() {
        let closed = timeout(WAIT, attacker).await.unwrap().unwrap();
        let closed = closed.unwrap_or_else(|| panic!("slowloris {i} still open after {give_up:?}"));
        slowest = slowest.max(closed);
    }
    sampling.store(false, Ordering::Relaxed);
    sampler.await.unwrap();
    let peak = peak.load(Ordering::Relaxed);
    eprintln!(
        "{ATTACKERS} slowloris heads: the last closed after {slowest:?}; descriptors {baseline} \
         before, {peak} at peak; a fresh GET took {fresh_get:?}, a fresh WebSocket {fresh_ws:?}"
    );
    // Each is closed by the head timeout (hyper's timer, plus scheduling slack).
    assert!(
        slowest <= head_timeout + Duration::from_millis(1500),
        "{slowest:?}"
    );
    // Our client ends, at most MAX_PENDING server ends, and a few for the fresh clients
    // and the runtime; without the bound it would be 2 × ATTACKERS.
    let bound = baseline + ATTACKERS + MAX_PENDING + 16;
    assert!(
        peak <= bound,
        "{peak} descriptors open at peak, bound {bound}"
    );
    server.shut_down().await;
}

/// A client whose head the network delays: it connects, sends nothing for `delay`, then a
/// whole head, and returns everything the server sent until it closed (`None` if it
/// stayed open for `WAIT`).
async fn late_head(addr: SocketAddr, delay: Duration) -> Option<String> {
    let mut conn = timeout(WAIT, TcpStream::connect(addr))
        .await
        .unwrap()
        .unwrap();
    tokio::time::sleep(delay).await;
    // The server may have closed by now: the write still succeeds locally.
    let _ = conn.write_all(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n").await;
    let mut text = Vec::new();
    // A reset after the answer is fine: what was read before it is kept.
    let _ = timeout(WAIT, conn.read_to_end(&mut text)).await.ok()?;
    Some(String::from_utf8_lossy(&text).into_owned())
}

/// Whether `answer` is the server's own `503` with `Retry-After`.
fn is_unavailable(answer: &str) -> bool {
    answer.starts_with("HTTP/1.1 503 Service Unavailable\r\n")
        && answer.contains("\r\nretry-after: 1\r\n")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_connection_closed_before_its_head_is_answered_503_with_retry_after() {
    let _serial = SERIAL.lock().await;
    let gate = Gate::default();

    // Shed: the late client is the oldest connection waiting for a head when, on a bound
    // of 2, two more connect.
    let server = start(&gate, |s| s.max_pending(2), WAIT).await;
    let shed = tokio::spawn(late_head(server.addr, Duration::from_millis(500)));
    tokio::time::sleep(Duration::from_millis(100)).await; // accepted first
    let held = half_sent_heads(server.addr, 2).await;
    let shed = timeout(WAIT, shed).await.unwrap().unwrap();
    assert!(
        shed.as_deref().is_some_and(is_unavailable),
        "shed: {shed:?}"
    );
    drop(held);

    // Shut down: a connection with no head yet is answered, not dropped.
    let mut silent = timeout(WAIT, TcpStream::connect(server.addr))
        .await
        .unwrap()
        .unwrap();
    tokio::time::sleep(Duration::from_millis(100)).await; // accepted
    server.shut_down().await;
    let mut answer = Vec::new();
    let _ = timeout(WAIT, silent.read_to_end(&mut answer))
        .await
        .unwrap();
    let answer = String::from_utf8_lossy(&answer);
    assert!(is_unavailable(&answer), "shut down: {answer:?}");

    // The head timeout: a head 300 ms later than the 200 ms timeout is answered.
    let head_timeout = Duration::from_millis(200);
    let server = start(&gate, |s| s.header_read_timeout(head_timeout), WAIT).await;
    let late = late_head(server.addr, head_timeout + Duration::from_millis(300)).await;
    assert!(
        late.as_deref().is_some_and(is_unavailable),
        "timed out: {late:?}"
    );
    // A whole head in time is served as ever.
    let answer = exchange(server.addr, "GET / HTTP/1.0\r\nHost: x\r\n\r\n").await;
    assert!(answer.starts_with("HTTP/1.0 200"), "{answer:?}");
    server.shut_down().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_idle_keep_alive_connection_is_closed_after_the_head_timeout() {
    let _serial = SERIAL.lock().await;
    let head_timeout = Duration::from_millis(500);
    let gate = Gate::default();
    let server = start(&gate, |s| s.header_read_timeout(head_timeout), WAIT).await;
    let mut conn = timeout(WAIT, TcpStream::connect(server.addr))
        .await
        .unwrap()
        .unwrap();
    // Two requests on the connection: keep-alive is honoured.
    for _ in 0..2 {
        conn.write_all(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n")
            .await
            .unwrap();
        let mut text = Vec::new();
        while !text.ends_with(b"hello") {
            let mut buf = [0u8; 512];
            let n = timeout(WAIT, conn.read(&mut buf)).await.unwrap().unwrap();
            assert!(n > 0, "closed before the answer");
            text.extend_from_slice(&buf[..n]);
        }
        assert!(text.starts_with(b"HTTP/1.1 200"));
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    // Then idle: closed once the next head has not arrived within the timeout.
    let idle_since = Instant::now() - Duration::from_millis(200);
    assert!(closed_within(&mut conn, head_timeout + Duration::from_secs(1)).await);
    let idle = idle_since.elapsed();
    eprintln!("an idle keep-alive connection was closed after {idle:?}");
    assert!(
        idle >= head_timeout - Duration::from_millis(50),
        "closed early: {idle:?}"
    );
    server.shut_down().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn upgraded_connections_are_not_pending_and_are_never_shed() {
    let _serial = SERIAL.lock().await;
    let gate = Gate::default();
    let server = start(&gate, |s| s.max_pending(2), WAIT).await;
    let url = format!("ws://{}/ws", server.addr);
    let mut sockets = Vec::new();
    for i in 0..5 {
        let (mut socket, _) = timeout(WAIT, tokio_tungstenite::connect_async(&url))
            .await
            .unwrap()
            .unwrap();
        socket.send(Message::text(format!("{i}"))).await.unwrap();
        assert!(timeout(WAIT, socket.next()).await.unwrap().is_some());
        sockets.push(socket);
    }
    // Six half-sent heads on a bound of 2: the oldest four are shed, no socket is.
    let mut held = half_sent_heads(server.addr, 6).await;
    let mut shed = 0;
    for conn in &mut held {
        shed += usize::from(closed_within(conn, Duration::from_millis(200)).await);
    }
    assert_eq!(shed, 4, "the bound applies to the heads");
    for (i, socket) in sockets.iter_mut().enumerate() {
        socket
            .send(Message::text(format!("again {i}")))
            .await
            .unwrap();
        let echoed = timeout(WAIT, socket.next()).await.unwrap();
        assert_eq!(
            echoed.unwrap().unwrap(),
            Message::text(format!("again {i}"))
        );
    }
    drop(sockets);
    server.shut_down().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_request_in_flight_is_shed_after_the_heads_still_arriving() {
    let _serial = SERIAL.lock().await;
    let gate = Gate::default();
    let server = start(&gate, |s| s.max_pending(3), WAIT).await;
    let in_flight = tokio::spawn(exchange(
        server.addr,
        "GET /gate HTTP/1.0\r\nHost: x\r\n\r\n",
    ));
    timeout(WAIT, gate.started.notified()).await.unwrap();
    // It is the oldest pending connection, but busy: the heads behind it go first.
    let mut held = half_sent_heads(server.addr, 5).await;
    let mut shed = 0;
    for conn in &mut held {
        shed += usize::from(closed_within(conn, Duration::from_millis(200)).await);
    }
    assert_eq!(shed, 3);
    gate.release.add_permits(1);
    let answer = timeout(WAIT, in_flight).await.unwrap().unwrap();
    assert!(
        answer.starts_with("HTTP/1.0 200") && answer.ends_with("done"),
        "{answer:?}"
    );
    server.shut_down().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_oversized_request_head_is_refused() {
    let _serial = SERIAL.lock().await;
    let gate = Gate::default();
    let server = start(&gate, |s| s, WAIT).await;
    let head = |bytes: usize| format!("GET / HTTP/1.0\r\nX-Big: {}\r\n\r\n", "a".repeat(bytes));
    // 30 KiB is served, 40 KiB (hyper's own bound is ~400 KiB) answered 431 or cut off.
    let answer = exchange(server.addr, &head(30 * 1024)).await;
    assert!(answer.starts_with("HTTP/1.0 200"), "{answer:?}");
    let answer = exchange(server.addr, &head(40 * 1024)).await;
    assert!(
        answer.is_empty() || answer.starts_with("HTTP/1.1 431"),
        "{answer:?}"
    );
    server.shut_down().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn graceful_shutdown_finishes_the_request_in_flight_then_returns() {
    let _serial = SERIAL.lock().await;
    let gate = Gate::default();
    let server = start(&gate, |s| s, WAIT).await;
    let keep_alive = "GET /gate HTTP/1.1\r\nHost: x\r\n\r\n";
    let in_flight = tokio::spawn(exchange(server.addr, keep_alive));
    let idle = timeout(WAIT, TcpStream::connect(server.addr))
        .await
        .unwrap();
    let mut idle = idle.unwrap();
    timeout(WAIT, gate.started.notified()).await.unwrap();

    let signalled = Instant::now();
    server.stop.send(()).unwrap();
    // The listener is closed at once, and so is a connection with no request.
    assert!(closed_within(&mut idle, Duration::from_secs(2)).await);
    let refused = async {
        while TcpStream::connect(server.addr).await.is_ok() {
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    };
    timeout(WAIT, refused).await.expect("the listener closes");
    // The request in flight holds the server until it is answered.
    tokio::time::sleep(Duration::from_millis(200)).await;
    assert!(
        !server.task.is_finished(),
        "returned with a request in flight"
    );
    gate.release.add_permits(1);
    // Its answer is whole, and its keep-alive connection is then closed.
    let answer = timeout(WAIT, in_flight).await.unwrap().unwrap();
    assert!(
        answer.starts_with("HTTP/1.1 200") && answer.ends_with("done"),
        "{answer:?}"
    );
    timeout(Duration::from_secs(2), server.task)
        .await
        .expect("serve returns once the connection has closed")
        .unwrap();
    eprintln!(
        "graceful shutdown returned {:?} after the signal",
        signalled.elapsed()
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn graceful_shutdown_is_bounded_by_its_timeout() {
    let _serial = SERIAL.lock().await;
    let gate = Gate::default();
    let shutdown_timeout = Duration::from_millis(300);
    let server = start(&gate, |s| s, shutdown_timeout).await;
    let mut stuck = timeout(WAIT, TcpStream::connect(server.addr))
        .await
        .unwrap()
        .unwrap();
    stuck
        .write_all(b"GET /stuck HTTP/1.1\r\nHost: x\r\n\r\n")
        .await
        .unwrap();
    tokio::time::sleep(Duration::from_millis(100)).await; // the request is in flight

    let signalled = Instant::now();
    server.stop.send(()).unwrap();
    timeout(WAIT, server.task)
        .await
        .expect("serve returns at the shutdown timeout")
        .unwrap();
    let took = signalled.elapsed();
    eprintln!("a stuck request held shutdown for {took:?} (timeout {shutdown_timeout:?})");
    assert!(
        took >= shutdown_timeout - Duration::from_millis(10),
        "{took:?}"
    );
    assert!(
        took <= shutdown_timeout + Duration::from_secs(1),
        "{took:?}"
    );
    // The stuck connection was closed, not left open.
    assert!(closed_within(&mut stuck, Duration::from_secs(2)).await);
}

#[tokio::test]
async fn an_explicit_bound_is_capped_below_the_descriptor_limit() {
    let _serial = SERIAL.lock().await;
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let limit = rustix::process::getrlimit(rustix::process::Resource::Nofile).current;
    let server = serve(listener, app(&Gate::default()));
    let derived = server.effective_max_pending();
    let capped = server.max_pending(usize::MAX).effective_max_pending();
    eprintln!("soft limit {limit:?}: derived bound {derived}, usize::MAX capped to {capped}");
    assert!(derived <= livecount_tower::serve::MAX_DEFAULT_PENDING);
    if let Some(limit) = limit {
        assert!(derived as u64 <= limit / 2, "{derived} of {limit}");
        assert!(
            (capped as u64) < limit - open_fds() as u64,
            "{capped} of {limit}"
        );
    }
}
