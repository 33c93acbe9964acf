//! Two storms against one agent process.
//!
//! * 2 200 WebSocket sessions from four `livecount-agent drive` processes; two of the
//!   drivers are SIGKILLed mid-stream with all their sessions open. The agent must settle
//!   to active 0 with started = ended, and its reasons must be what the clients did: every
//!   clean close `completed`, every abrupt drop (the drivers' own kills and every session
//!   of a SIGKILLed process) `disconnected`, nothing else.
//! * A handshake storm: 6 000 well-behaved WebSocket opens among 6 000 hostile
//!   connections (slowloris, half-sent heads, silent, dropped before or right after the
//!   head) in 2 s, on an agent with a small bound on pending connections and a 2 s head
//!   timeout, beside four threads that burn the CPU. Every well-behaved client must read
//!   an answer, `101` or `503` with `Retry-After`, never an end of stream or a reset; each
//!   outcome is counted, and the agent settles to active 0 with started = ended. (On two
//!   cores, before the server answered the connections it sheds or times out before
//!   their head, ~200 of the 6 000 read an end of stream or a reset.)
//!
//! `#[ignore]`d (heavy: seconds of thousands of connections): `scripts/test.sh` runs them
//! in release in its phase alone on the machine.

use std::collections::BTreeMap;
use std::io::{BufRead, BufReader};
use std::net::SocketAddr;
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

mod common;

use common::Procs;
use futures_util::{SinkExt, StreamExt};
use livecount_server::load_driver::fetch_load;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio_tungstenite::tungstenite::error::ProtocolError;
use tokio_tungstenite::tungstenite::{Error, Message};

const BIN: &str = env!("CARGO_BIN_EXE_livecount-agent");
const PER_DRIVER: u64 = 550;

/// Starts the agent on a free port with `flags` and returns its HTTP address (read from
/// its banner).
fn start_agent(procs: &mut Procs, flags: &[&str]) -> String {
    let mut child = Command::new(BIN)
        .args(["serve", "--http", "127.0.0.1:0", "--name", "storm"])
        .args(["--report-secs", "0.2", "--chunk-gap-ms", "1"])
        .args(flags)
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("the agent starts");
    let stderr = child.stderr.take().expect("stderr piped");
    procs.0.push(child);
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(stderr).lines().map_while(Result::ok) {
            if let Some(rest) = line.split("ws://").nth(1) {
                let _ = tx.send(rest.split('/').next().unwrap_or_default().to_owned());
            }
        }
    });
    rx.recv_timeout(Duration::from_secs(30))
        .expect("the agent prints its address within 30 s")
}

fn driver(target: &str, seed: u64, hold_secs: u32) -> Child {
    Command::new(BIN)
        .args(["drive", "--target", target])
        .args(["--sessions", &PER_DRIVER.to_string(), "--ramp-secs", "2"])
        .args([
            "--hold-secs",
            &hold_secs.to_string(),
            "--speak-every-secs",
            "0.7",
        ])
        .args([
            "--chunks",
            "3",
            "--kill-share",
            "0.25",
            "--interrupt-share",
            "0.2",
        ])
        .args(["--seed", &seed.to_string()])
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("a driver starts")
}

/// Polls `/load` until `done` holds, for at most `limit`.
async fn wait_load(
    addr: &str,
    limit: Duration,
    done: impl Fn(&serde_json::Value) -> bool,
) -> serde_json::Value {
    let until = Instant::now() + limit;
    let mut last = serde_json::Value::Null;
    while Instant::now() < until {
        if let Some(v) = fetch_load(addr).await {
            if done(&v) {
                return v;
            }
            last = v;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    panic!("/load never got there within {limit:?}; last: {last}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "heavy (2 200 sessions, four processes): run by scripts/test.sh in release"]
async fn a_storm_with_sigkilled_clients_settles_exactly() {
    let mut procs = Procs(Vec::new());
    let flags = ["--max-sessions", "5000", "--idle-timeout-secs", "120"];
    let addr = start_agent(&mut procs, &flags);
    // Two drivers that finish (hold 4 s), two that are SIGKILLed with every session open
    // (hold 60 s: none of theirs ends before the kill).
    let mut survivors = vec![driver(&addr, 1, 4), driver(&addr, 2, 4)];
    let doomed = vec![driver(&addr, 3, 60), driver(&addr, 4, 60)];
    let total = 4 * PER_DRIVER;
    let peak = wait_load(&addr, Duration::from_secs(60), |v| {
        v["started"].as_u64() >= Some(total)
    })
    .await;
    assert_eq!(peak["refused"], 0, "{peak}");
    for mut d in doomed {
        d.kill().expect("SIGKILL a driver"); // SIGKILL: no close frame, no FIN handshake of ours
        let _ = d.wait();
    }
    let mut summaries = Vec::new();
    for d in &mut survivors {
        let until = Instant::now() + Duration::from_secs(60);
        while d.try_wait().expect("wait on a driver").is_none() {
            assert!(
                Instant::now() < until,
                "a driver did not finish within 60 s"
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        assert!(d.wait().unwrap().success(), "a surviving driver failed");
        let mut out = String::new();
        std::io::Read::read_to_string(&mut d.stdout.take().unwrap(), &mut out).unwrap();
        let last = out.lines().last().expect("a JSON summary");
        summaries.push(serde_json::from_str::<serde_json::Value>(last).unwrap());
    }
    procs.0.extend(survivors);
    let sum = |k: &str| {
        summaries
            .iter()
            .map(|s| s[k].as_u64().unwrap())
            .sum::<u64>()
    };
    assert_eq!(sum("opened"), 2 * PER_DRIVER, "{summaries:?}");
    assert_eq!(
        (sum("refused"), sum("ended_by_server")),
        (0, 0),
        "{summaries:?}"
    );

    let settled = wait_load(&addr, Duration::from_secs(60), |v| v["active"] == 0).await;
    let reasons = &settled["ended_by_reason"];
    assert_eq!(settled["started"], total, "{settled}");
    assert_eq!(settled["ended"], total, "{settled}");
    assert_eq!(reasons["completed"], sum("closed"), "{settled}");
    // The drivers' own kills, and every session of the two SIGKILLed processes.
    assert_eq!(
        reasons["disconnected"],
        sum("killed") + 2 * PER_DRIVER,
        "{settled}"
    );
    let others: u64 = reasons
        .as_object()
        .unwrap()
        .iter()
        .filter(|(r, _)| !matches!(r.as_str(), "completed" | "disconnected"))
        .map(|(_, n)| n.as_u64().unwrap())
        .sum();
    assert_eq!(others, 0, "{settled}");
    eprintln!(
        "storm: {total} sessions, {} completed, {} disconnected ({} driver kills + {} SIGKILLed)",
        reasons["completed"],
        reasons["disconnected"],
        sum("killed"),
        2 * PER_DRIVER
    );
}

// === a handshake storm ===

/// Well-behaved WebSocket opens, and hostile connections, each spread over `SPREAD`.
const WELL_BEHAVED: usize = 6000;
const HOSTILE: usize = 6000;
const SPREAD: Duration = Duration::from_secs(2);
/// The agent's bound on pending connections, and its head timeout: small, so that the
/// hostile connections keep it shedding and timing heads out for the whole storm (the
/// defaults, 4 096 and 10 s, need a far larger storm to get there); the timeout long
/// enough that the hostile heads fill the bound (at 1 s they are gone too soon).
const MAX_PENDING: &str = "128";
const HEAD_TIMEOUT_SECS: &str = "2";
/// The agent's session cap: some well-behaved opens are refused at it (`503` too).
const MAX_SESSIONS: &str = "500";
/// How long a hostile connection holds on at most; a well-behaved client's wait for its
/// connection, and for the answer to its head.
const HOSTILE_HOLD: Duration = Duration::from_secs(5);
const CONNECT_WAIT: Duration = Duration::from_secs(20);
const ANSWER_WAIT: Duration = Duration::from_secs(20);

/// How a well-behaved client's open ended.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
enum Outcome {
    /// `101`: upgraded, then ended with `bye`.
    Upgraded,
    /// `503` with `Retry-After` from the session cap (its body says so).
    AtCapacity,
    /// `503` with `Retry-After` and no body: shed, or its head late, before any head of
    /// it reached the service.
    Unavailable,
    /// No answer, or another one: what must not happen.
    Unanswered(String),
}

/// A well-behaved client: connects, sends its upgrade head at once (tungstenite writes it
/// whole), reads the answer; upgraded, it holds the session 300 ms and says `bye`.
async fn well_behaved(addr: SocketAddr) -> Outcome {
    let unanswered = |why: &str| Outcome::Unanswered(why.to_owned());
    let stream = match tokio::time::timeout(CONNECT_WAIT, TcpStream::connect(addr)).await {
        Ok(Ok(stream)) => stream,
        Ok(Err(e)) => return unanswered(&format!("connect: {:?}", e.kind())),
        Err(_) => return unanswered("connect: timed out"),
    };
    let open = tokio_tungstenite::client_async(format!("ws://{addr}/session"), stream);
    match tokio::time::timeout(ANSWER_WAIT, open).await {
        Ok(Ok((mut ws, _))) => {
            tokio::time::sleep(Duration::from_millis(300)).await;
            let bye = async {
                ws.send(Message::text(r#"{"type":"bye"}"#)).await.ok()?;
                while let Some(Ok(msg)) = ws.next().await {
                    if msg.is_close() {
                        break;
                    }
                }
                Some(())
            };
            let _ = tokio::time::timeout(Duration::from_secs(5), bye).await;
            Outcome::Upgraded
        }
        Ok(Err(Error::Http(answer))) => {
            let retry = answer.headers().contains_key("retry-after");
            let body = answer.body().as_deref().unwrap_or_default();
            match (answer.status().as_u16(), retry) {
                (503, true) if body.starts_with(b"at capacity") => Outcome::AtCapacity,
                (503, true) if body.is_empty() => Outcome::Unavailable,
                (status, _) => unanswered(&format!("status {status}, retry-after {retry}")),
            }
        }
        Ok(Err(Error::Protocol(ProtocolError::HandshakeIncomplete))) => unanswered("end of stream"),
        Ok(Err(Error::Io(e))) => unanswered(&format!("{:?}", e.kind())),
        Ok(Err(e)) => unanswered(&e.to_string()),
        Err(_) => unanswered("no answer in time"),
    }
}

/// The hostile connections, by what they do after connecting.
#[derive(Debug, Clone, Copy)]
enum Hostile {
    /// Trickles a never-ending head, a byte every 100 ms.
    Slowloris,
    /// Sends half a head and waits.
    HalfSent,
    /// Sends nothing and waits.
    Silent,
    /// Closes at once.
    Dropped,
    /// Sends a whole upgrade head and closes without reading the answer.
    DroppedAfterHead,
}

impl Hostile {
    const ALL: [Hostile; 5] = [
        Hostile::Slowloris,
        Hostile::HalfSent,
        Hostile::Silent,
        Hostile::Dropped,
        Hostile::DroppedAfterHead,
    ];

    /// Runs one such connection until the server answers or closes it, or for at most
    /// `HOSTILE_HOLD`.
    async fn run(self, addr: SocketAddr) {
        let Ok(Ok(mut conn)) = tokio::time::timeout(CONNECT_WAIT, TcpStream::connect(addr)).await
        else {
            return;
        };
        let head = b"GET /session HTTP/1.1\r\nHost: x\r\nUpgrade: websocket\r\n\
            Connection: Upgrade\r\nSec-WebSocket-Version: 13\r\n\
            Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n\r\n";
        let trickle = match self {
            Hostile::Dropped => return,
            Hostile::DroppedAfterHead => {
                let _ = conn.write_all(head).await;
                return;
            }
            Hostile::HalfSent => {
                let _ = conn.write_all(&head[..40]).await;
                false
            }
            Hostile::Silent => false,
            Hostile::Slowloris => true,
        };
        let give_up = Instant::now() + HOSTILE_HOLD;
        for i in 0.. {
            if Instant::now() > give_up {
                return;
            }
            if trickle {
                let byte = head.get(i).copied().filter(|b| *b != b'\r').unwrap_or(b'a');
                if conn.write_all(&[byte]).await.is_err() {
                    return;
                }
            }
            let mut buf = [0u8; 256];
            // Anything read (an answer, the end, a reset): the server let go.
            let read = tokio::time::timeout(Duration::from_millis(100), conn.read(&mut buf));
            if read.await.is_ok() {
                return;
            }
        }
    }
}

/// `n` threads that keep a core busy each until `stop`, or for a minute at most.
fn burn_cpu(n: usize, stop: &Arc<AtomicBool>) -> Vec<std::thread::JoinHandle<()>> {
    let until = Instant::now() + Duration::from_secs(60);
    (0..n)
        .map(|_| {
            let stop = Arc::clone(stop);
            std::thread::spawn(move || {
                let mut x = 1u64;
                // Relaxed: a stop flag; nothing is published with it.
                while !stop.load(Ordering::Relaxed) && Instant::now() < until {
                    for _ in 0..10_000 {
                        x = std::hint::black_box(
                            x.wrapping_mul(6_364_136_223_846_793_005).wrapping_add(1),
                        );
                    }
                }
            })
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "heavy (12 000 connections beside CPU burners): run by scripts/test.sh in release"]
async fn every_well_behaved_open_in_a_hostile_storm_is_answered() {
    let mut procs = Procs(Vec::new());
    let flags = [
        "--max-sessions",
        MAX_SESSIONS,
        "--max-pending-connections",
        MAX_PENDING,
        "--header-read-timeout-secs",
        HEAD_TIMEOUT_SECS,
    ];
    let addr: SocketAddr = start_agent(&mut procs, &flags).parse().unwrap();
    let stop = Arc::new(AtomicBool::new(false));
    let burners = burn_cpu(4, &stop);

    let mut hostile = Vec::with_capacity(HOSTILE);
    for i in 0..HOSTILE {
        let kind = Hostile::ALL[i % Hostile::ALL.len()];
        let delay = SPREAD.mul_f64(i as f64 / HOSTILE as f64);
        hostile.push(tokio::spawn(async move {
            tokio::time::sleep(delay).await;
            kind.run(addr).await;
        }));
    }
    let mut clients = Vec::with_capacity(WELL_BEHAVED);
    for i in 0..WELL_BEHAVED {
        let delay = SPREAD.mul_f64(i as f64 / WELL_BEHAVED as f64);
        clients.push(tokio::spawn(async move {
            tokio::time::sleep(delay).await;
            well_behaved(addr).await
        }));
    }
    let mut outcomes = BTreeMap::<Outcome, u64>::new();
    for client in clients {
        *outcomes.entry(client.await.unwrap()).or_default() += 1;
    }
    stop.store(true, Ordering::Relaxed);
    for burner in burners {
        burner.join().unwrap();
    }
    for h in hostile {
        h.await.unwrap();
    }
    eprintln!("handshake storm: {WELL_BEHAVED} well-behaved opens: {outcomes:?}");
    let count = |o: &Outcome| outcomes.get(o).copied().unwrap_or(0);
    let unanswered: BTreeMap<_, _> = outcomes
        .iter()
        .filter(|(o, _)| matches!(o, Outcome::Unanswered(_)))
        .collect();
    assert!(
        unanswered.is_empty(),
        "unanswered: {unanswered:?} of {outcomes:?}"
    );
    assert!(count(&Outcome::Upgraded) > 0, "{outcomes:?}");

    // Exact accounting: every session ended, and every well-behaved upgrade was one.
    let upgraded = count(&Outcome::Upgraded);
    let settled = wait_load(&addr.to_string(), Duration::from_secs(30), |v| {
        v["active"] == 0 && v["started"] == v["ended"] && v["started"].as_u64() >= Some(upgraded)
    })
    .await;
    eprintln!(
        "handshake storm: the agent started {} ended {} refused {} ({:?})",
        settled["started"], settled["ended"], settled["refused"], settled["ended_by_reason"]
    );
}
