//! `livecount_tower::serve` under `RLIMIT_NOFILE` 200 against 220 slowloris request heads
//! (trickled a byte at a time): with the default settings the
//! bound on pending connections is derived from the limit, so the server never runs out
//! of descriptors and a fresh WebSocket session is served promptly; and when the process
//! runs out anyway (files opened after the server started), a failing `accept` sheds the
//! oldest pending connection instead of stalling until head timeouts free one.
//!
//! The limit applies to a whole process, so the server runs in a child: this test binary
//! re-run with `--exact child_server` and `CHILD_ROLE` set, which lowers its limit before
//! anything else, serves on loopback, prints its address, answers `fds` on stdin with its
//! descriptor count and stops when stdin closes (or after `CHILD_LIFETIME`). The
//! slowlorises and the fresh client run in the parent, under its own limit.

#![cfg(target_os = "linux")] // /proc/self/fd, and the limit applies to sockets as on Linux

use std::net::SocketAddr;
use std::process::Stdio;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::Duration;

use axum::Router;
use axum::extract::ws::WebSocketUpgrade;
use axum::response::Response;
use axum::routing::get;
use futures_util::{SinkExt, StreamExt};
use rustix::process::{Resource, Rlimit, getrlimit, setrlimit};
use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader, Lines};
use tokio::net::{TcpListener, TcpStream};
use tokio::process::{Child, ChildStdin, ChildStdout, Command};
use tokio::time::{Instant, timeout};
use tokio_tungstenite::tungstenite::Message;

/// Set in the child's environment: the number of files it opens once serving.
const CHILD_ROLE: &str = "LIVECOUNT_SERVE_RLIMIT_CHILD";
/// The child's soft `RLIMIT_NOFILE`.
const LIMIT: u64 = 200;
/// Slowloris connections held open against the child.
const ATTACKERS: usize = 220;
/// The child stops by itself after this long, should the parent vanish.
const CHILD_LIFETIME: Duration = Duration::from_secs(60);
/// The bound of a single wait in the parent.
const WAIT: Duration = Duration::from_secs(10);

// === the child ===

/// The server role; does nothing unless run as the child of one of the tests below.
#[test]
fn child_server() {
    let Ok(hog) = std::env::var(CHILD_ROLE) else {
        return;
    };
    let hog: usize = hog.parse().expect("a number of files");
    let hard = getrlimit(Resource::Nofile).maximum;
    let limit = Rlimit {
        current: Some(LIMIT),
        maximum: hard,
    };
    setrlimit(Resource::Nofile, limit).expect("lowering RLIMIT_NOFILE");
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    runtime.block_on(serve_until_stdin_closes(hog));
    // The blocking stdin read may still be waiting if the lifetime ran out.
    runtime.shutdown_timeout(Duration::from_secs(1));
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

/// Serves with the default settings, opens `hog` files, and reports on stdout.
async fn serve_until_stdin_closes(hog: usize) {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let app = Router::new().route("/ws", get(echo));
    let server = livecount_tower::serve(listener, app)
        .with_graceful_shutdown(async {
            stopped.await.ok();
        })
        .shutdown_timeout(Duration::from_secs(1));
    let bound = server.effective_max_pending();
    let server = tokio::spawn(server.into_future());
    let open = open_fds();
    let files: Vec<_> = (0..hog)
        .map(|_| std::fs::File::open("/dev/null").unwrap())
        .collect();
    println!("addr {addr} bound {bound} fds {open}");
    let mut commands = BufReader::new(tokio::io::stdin()).lines();
    let deadline = Instant::now() + CHILD_LIFETIME;
    while let Ok(Ok(Some(command))) = tokio::time::timeout_at(deadline, commands.next_line()).await
    {
        if command == "fds" {
            println!("fds {}", open_fds());
        }
    }
    drop(files);
    let _ = stop.send(());
    let _ = timeout(Duration::from_secs(5), server).await;
}

/// The descriptors this process has open (0 if it cannot even list them).
fn open_fds() -> usize {
    std::fs::read_dir("/proc/self/fd").map_or(0, Iterator::count)
}

// === the parent ===

/// A child serving on `addr`, and its pipes.
struct ChildServer {
    process: Child,
    stdin: ChildStdin,
    stdout: Lines<BufReader<ChildStdout>>,
    addr: SocketAddr,
    /// The child's line at start: its bound and descriptors open.
    started: String,
}

impl ChildServer {
    async fn spawn(hog: usize) -> Self {
        let exe = std::env::current_exe().unwrap();
        let mut process = Command::new(exe)
            .args([
                "child_server",
                "--exact",
                "--nocapture",
                "--test-threads",
                "1",
            ])
            .env(CHILD_ROLE, hog.to_string())
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .kill_on_drop(true)
            .spawn()
            .unwrap();
        let stdin = process.stdin.take().unwrap();
        let mut stdout = BufReader::new(process.stdout.take().unwrap()).lines();
        let started = Self::line(&mut stdout, "addr ").await;
        let addr = started.split(' ').nth(1).unwrap().parse().unwrap();
        Self {
            process,
            stdin,
            stdout,
            addr,
            started,
        }
    }

    /// The child's next line holding `prefix`, from there on (libtest prints its own lines,
    /// and `test child_server ... ` before the first of the child's).
    async fn line(stdout: &mut Lines<BufReader<ChildStdout>>, prefix: &str) -> String {
        let find = async {
            while let Some(line) = stdout.next_line().await.unwrap() {
                if let Some(at) = line.find(prefix) {
                    return line[at..].to_owned();
                }
            }
            panic!("the child ended before saying {prefix:?}")
        };
        timeout(WAIT, find)
            .await
            .expect("the child answers in time")
    }

    /// The descriptors the child has open now.
    async fn open_fds(&mut self) -> usize {
        self.stdin.write_all(b"fds\n").await.unwrap();
        let line = Self::line(&mut self.stdout, "fds ").await;
        line["fds ".len()..].parse().unwrap()
    }

    /// Closes its stdin and waits (bounded) for it to exit; kills it otherwise.
    async fn stop(mut self) {
        drop(self.stdin);
        if timeout(WAIT, self.process.wait()).await.is_err() {
            self.process.kill().await.unwrap();
            panic!("the child did not stop when its stdin closed");
        }
    }
}

/// `ATTACKERS` slowlorises: each trickles a never-ending head a byte every 100 ms until
/// the server closes it, or `stop` (or `CHILD_LIFETIME`). They do not reconnect: see
/// `pending.rs` on attackers that do.
struct Attack {
    stop: Arc<AtomicBool>,
    connects: Arc<AtomicUsize>,
    tasks: Vec<tokio::task::JoinHandle<()>>,
}

impl Attack {
    fn start(addr: SocketAddr) -> Self {
        let stop = Arc::new(AtomicBool::new(false));
        let connects = Arc::new(AtomicUsize::new(0));
        let tasks = (0..ATTACKERS)
            .map(|_| tokio::spawn(slowloris(addr, Arc::clone(&stop), Arc::clone(&connects))))
            .collect();
        Self {
            stop,
            connects,
            tasks,
        }
    }

    /// Waits (bounded) until every attacker has connected at least once, then a little.
    async fn established(&self) {
        let all = async {
            // Relaxed: a counter read for progress only.
            while self.connects.load(Ordering::Relaxed) < ATTACKERS {
                tokio::time::sleep(Duration::from_millis(10)).await;
            }
        };
        timeout(WAIT, all).await.expect("every attacker connected");
        tokio::time::sleep(Duration::from_millis(500)).await;
    }

    async fn stop(self) {
        // Relaxed: a stop flag; each attacker checks it between bytes.
        self.stop.store(true, Ordering::Relaxed);
        for task in self.tasks {
            timeout(WAIT, task).await.unwrap().unwrap();
        }
    }
}

async fn slowloris(addr: SocketAddr, stop: Arc<AtomicBool>, connects: Arc<AtomicUsize>) {
    const START: &[u8] = b"GET /ws HTTP/1.1\r\nHost: x\r\nX-Slow: ";
    let give_up = Instant::now() + CHILD_LIFETIME;
    // Past the listener's backlog, a connect waits for its SYN to be retransmitted.
    let mut conn = timeout(WAIT, TcpStream::connect(addr))
        .await
        .unwrap()
        .unwrap();
    // Relaxed: a progress counter, and the stop flag (see `Attack::stop`).
    connects.fetch_add(1, Ordering::Relaxed);
    for i in 0.. {
        let byte = START.get(i).copied().unwrap_or(b'a');
        let stopped = stop.load(Ordering::Relaxed) || Instant::now() > give_up;
        if stopped || conn.write_all(&[byte]).await.is_err() {
            return;
        }
        let mut buf = [0u8; 256];
        if let Ok(Ok(0) | Err(_)) = timeout(Duration::from_millis(100), conn.read(&mut buf)).await {
            return; // closed by the server
        }
    }
}

/// A fresh WebSocket session (upgrade and one echo); how long it took.
async fn fresh_session(addr: SocketAddr) -> Duration {
    let began = Instant::now();
    let session = async {
        let (mut socket, _) = tokio_tungstenite::connect_async(format!("ws://{addr}/ws"))
            .await
            .unwrap();
        socket.send(Message::text("fresh")).await.unwrap();
        let echoed = socket.next().await.unwrap().unwrap();
        assert_eq!(echoed, Message::text("fresh"));
    };
    // The old server made it wait for head timeouts (10 s): 5 s is a failure.
    timeout(Duration::from_secs(5), session)
        .await
        .expect("a fresh session while the slowlorises hold on");
    began.elapsed()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn under_rlimit_200_the_derived_bound_keeps_descriptors_free_and_serves_a_fresh_session() {
    let mut child = ChildServer::spawn(0).await;
    let attack = Attack::start(child.addr);
    attack.established().await;
    let took = fresh_session(child.addr).await;
    let fds = child.open_fds().await;
    attack.stop().await;
    eprintln!(
        "RLIMIT_NOFILE {LIMIT}, {ATTACKERS} slowlorises: child `{}`, {fds} descriptors open \
         under attack; a fresh WebSocket session took {took:?}",
        child.started
    );
    assert!(took < Duration::from_secs(2), "{took:?}");
    // Half the limit for pending connections, minus those open at start, plus the fresh
    // session's and a few of the runtime's: never near the limit.
    assert!(
        fds as u64 <= LIMIT / 2 + 16,
        "{fds} descriptors open of {LIMIT}"
    );
    child.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn out_of_descriptors_on_accept_the_oldest_is_shed_and_a_fresh_session_is_served() {
    // 120 files opened after the bound was derived: the process runs out before the bound.
    let mut child = ChildServer::spawn(120).await;
    let attack = Attack::start(child.addr);
    attack.established().await;
    let took = fresh_session(child.addr).await;
    let fds = child.open_fds().await;
    attack.stop().await;
    eprintln!(
        "RLIMIT_NOFILE {LIMIT} with 120 files held, {ATTACKERS} slowlorises: child `{}`, \
         {fds} descriptors open (0: too many to list); a fresh WebSocket session took \
         {took:?}",
        child.started
    );
    assert!(took < Duration::from_secs(3), "{took:?}");
    child.stop().await;
}
