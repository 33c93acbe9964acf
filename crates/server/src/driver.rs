//! `livecount-agent drive`: opens long-lived WebSocket sessions through a target address
//! (a load balancer or one agent), speaks and listens in a pattern, interrupts some
//! responses, kills some connections abruptly, and prints per-backend session counts
//! read from the backends' `/load` over time.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use futures_util::{SinkExt, StreamExt};
use serde::Serialize;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio_tungstenite::tungstenite::Message;

/// Usage text of `livecount-agent drive`.
pub const DRIVE_USAGE: &str = "livecount-agent drive --target HOST:PORT [options]
  --target HOST:PORT       where to open sessions (ws://HOST:PORT/session)
  --sessions N             sessions to hold open (default 30)
  --ramp-secs S            spread the openings over S seconds (default 1)
  --hold-secs S            how long each session lives (default 10)
  --speak-every-secs S     mean pause between utterances (default 1)
  --chunks N               response chunks per utterance (default 5)
  --interrupt-share F      share of utterances interrupted (barge-in) (default 0.1)
  --kill-share F           share of sessions killed without a close frame (default 0.2)
  --observe HOST:PORT,...  backends whose /load to print every second
  --seed N                 randomness (default 1)";

/// What to drive.
#[derive(Debug, Clone)]
pub struct DriveConfig {
    /// `HOST:PORT` of the balancer or agent.
    pub target: String,
    /// Sessions to open.
    pub sessions: u32,
    /// Openings are spread over this.
    pub ramp: Duration,
    /// Each session's life.
    pub hold: Duration,
    /// Mean pause between utterances.
    pub speak_every: Duration,
    /// Chunks per utterance.
    pub chunks: u32,
    /// Share of utterances interrupted.
    pub interrupt_share: f64,
    /// Share of sessions killed abruptly.
    pub kill_share: f64,
    /// Backends' HTTP addresses to poll `/load` on.
    pub observe: Vec<String>,
    /// Seed.
    pub seed: u64,
}

impl DriveConfig {
    /// Parses `drive` options.
    pub fn from_args(args: &[String]) -> Result<Self, String> {
        let mut c = DriveConfig {
            target: String::new(),
            sessions: 30,
            ramp: Duration::from_secs(1),
            hold: Duration::from_secs(10),
            speak_every: Duration::from_secs(1),
            chunks: 5,
            interrupt_share: 0.1,
            kill_share: 0.2,
            observe: Vec::new(),
            seed: 1,
        };
        let mut it = args.iter();
        while let Some(flag) = it.next() {
            let v = it
                .next()
                .ok_or_else(|| format!("{flag} needs a value\n{DRIVE_USAGE}"))?;
            let num = |what: &str| {
                v.parse::<f64>()
                    .map_err(|_| format!("{flag} {v:?}: expected {what}"))
            };
            let secs = |x: f64| {
                Duration::try_from_secs_f64(x)
                    .map_err(|_| format!("{flag} {v:?}: expected seconds ≥ 0"))
            };
            match flag.as_str() {
                "--target" => c.target = v.clone(),
                "--sessions" => c.sessions = num("a whole number")? as u32,
                "--ramp-secs" => c.ramp = secs(num("seconds")?)?,
                "--hold-secs" => c.hold = secs(num("seconds")?)?,
                "--speak-every-secs" => c.speak_every = secs(num("seconds")?)?,
                "--chunks" => c.chunks = num("a whole number")?.clamp(1.0, 10_000.0) as u32,
                "--interrupt-share" => c.interrupt_share = num("a share 0..=1")?.clamp(0.0, 1.0),
                "--kill-share" => c.kill_share = num("a share 0..=1")?.clamp(0.0, 1.0),
                "--observe" => {
                    c.observe = v
                        .split(',')
                        .filter(|s| !s.is_empty())
                        .map(String::from)
                        .collect()
                }
                "--seed" => c.seed = num("a whole number")? as u64,
                _ => return Err(format!("unknown option {flag}\n{DRIVE_USAGE}")),
            }
        }
        if c.target.is_empty() {
            return Err(format!("drive needs --target\n{DRIVE_USAGE}"));
        }
        Ok(c)
    }
}

/// What happened to the driven sessions.
#[derive(Debug, Default, Clone, Serialize, PartialEq, Eq)]
pub struct DriveSummary {
    /// WebSocket sessions opened.
    pub opened: u64,
    /// Refused (HTTP 503 or connection errors) before opening.
    pub refused: u64,
    /// Ended by the client with `bye` and a close frame.
    pub closed: u64,
    /// Killed: the TCP connection dropped without a close frame.
    pub killed: u64,
    /// Utterances answered to the end.
    pub responses: u64,
    /// Utterances interrupted.
    pub interrupts: u64,
    /// Sessions the server ended first (close frame from the server).
    pub ended_by_server: u64,
}

#[derive(Debug, Default)]
struct Tally {
    opened: AtomicU64,
    refused: AtomicU64,
    closed: AtomicU64,
    killed: AtomicU64,
    responses: AtomicU64,
    interrupts: AtomicU64,
    ended_by_server: AtomicU64,
}

/// xorshift64*: small, seedable, good enough for a traffic pattern.
fn next(state: &mut u64) -> f64 {
    *state ^= *state >> 12;
    *state ^= *state << 25;
    *state ^= *state >> 27;
    (state.wrapping_mul(0x2545_F491_4F6C_DD1D) >> 11) as f64 / (1u64 << 53) as f64
}

/// Runs the drive and returns its summary (also printed by the CLI).
pub async fn drive(config: DriveConfig) -> DriveSummary {
    let tally = Arc::new(Tally::default());
    let config = Arc::new(config);
    let observer =
        (!config.observe.is_empty()).then(|| tokio::spawn(observe(config.observe.clone())));
    let mut clients = Vec::new();
    for i in 0..config.sessions {
        let delay = config
            .ramp
            .mul_f64(f64::from(i) / f64::from(config.sessions.max(1)));
        let (config, tally) = (Arc::clone(&config), Arc::clone(&tally));
        clients.push(tokio::spawn(async move {
            tokio::time::sleep(delay).await;
            client(&config, u64::from(i), &tally).await;
        }));
    }
    for c in clients {
        let _ = c.await;
    }
    if let Some(o) = observer {
        tokio::time::sleep(Duration::from_millis(1500)).await;
        o.abort();
    }
    let get = |a: &AtomicU64| a.load(Ordering::Relaxed);
    DriveSummary {
        opened: get(&tally.opened),
        refused: get(&tally.refused),
        closed: get(&tally.closed),
        killed: get(&tally.killed),
        responses: get(&tally.responses),
        interrupts: get(&tally.interrupts),
        ended_by_server: get(&tally.ended_by_server),
    }
}

async fn client(config: &DriveConfig, i: u64, tally: &Tally) {
    let mut rng = config.seed.wrapping_mul(0x9E37_79B9_7F4A_7C15)
        ^ (i + 1).wrapping_mul(0xD605_BBB5_8C8A_BBB9)
        | 1;
    let url = format!("ws://{}/session", config.target);
    let Ok((mut ws, _)) = tokio_tungstenite::connect_async(&url).await else {
        tally.refused.fetch_add(1, Ordering::Relaxed);
        return;
    };
    tally.opened.fetch_add(1, Ordering::Relaxed);
    let kill = next(&mut rng) < config.kill_share;
    let end = tokio::time::Instant::now() + config.hold;
    loop {
        let pause = config.speak_every.mul_f64(-(1.0 - next(&mut rng)).ln());
        if tokio::time::Instant::now() + pause >= end {
            tokio::time::sleep_until(end).await;
            break;
        }
        tokio::time::sleep(pause).await;
        let speak = format!(r#"{{"type":"speak","chunks":{}}}"#, config.chunks);
        if ws.send(Message::text(speak)).await.is_err() {
            tally.ended_by_server.fetch_add(1, Ordering::Relaxed);
            return;
        }
        let interrupt = next(&mut rng) < config.interrupt_share;
        let mut chunks = 0;
        while let Some(Ok(msg)) = ws.next().await {
            match msg {
                Message::Text(t) if t.contains("\"chunk\"") => {
                    chunks += 1;
                    if interrupt && chunks == 1 {
                        let _ = ws.send(Message::text(r#"{"type":"interrupt"}"#)).await;
                    }
                }
                Message::Text(t) if t.contains("\"done\"") => {
                    tally.responses.fetch_add(1, Ordering::Relaxed);
                    break;
                }
                Message::Text(t) if t.contains("\"interrupted\"") => {
                    tally.interrupts.fetch_add(1, Ordering::Relaxed);
                    break;
                }
                Message::Close(_) => {
                    tally.ended_by_server.fetch_add(1, Ordering::Relaxed);
                    return;
                }
                _ => {}
            }
        }
    }
    if kill {
        drop(ws); // no close frame: the server sees the TCP connection go
        tally.killed.fetch_add(1, Ordering::Relaxed);
    } else {
        let _ = ws.send(Message::text(r#"{"type":"bye"}"#)).await;
        while let Some(Ok(msg)) = ws.next().await {
            if msg.is_close() {
                break;
            }
        }
        tally.closed.fetch_add(1, Ordering::Relaxed);
    }
}

/// `GET /load` on `addr` with a bare HTTP/1.0 request (no client library needed).
pub async fn fetch_load(addr: &str) -> Option<serde_json::Value> {
    let mut conn = tokio::time::timeout(Duration::from_secs(2), TcpStream::connect(addr))
        .await
        .ok()?
        .ok()?;
    conn.write_all(b"GET /load HTTP/1.0\r\nHost: x\r\n\r\n")
        .await
        .ok()?;
    let mut buf = Vec::new();
    tokio::time::timeout(Duration::from_secs(2), conn.read_to_end(&mut buf))
        .await
        .ok()?
        .ok()?;
    let text = String::from_utf8_lossy(&buf);
    serde_json::from_str(text.split("\r\n\r\n").nth(1)?).ok()
}

async fn observe(backends: Vec<String>) {
    let started = tokio::time::Instant::now();
    let mut tick = tokio::time::interval(Duration::from_secs(1));
    loop {
        tick.tick().await;
        let mut line = format!("t={:>3}s", started.elapsed().as_secs());
        for b in &backends {
            match fetch_load(b).await {
                Some(v) => {
                    line += &format!(
                        "  {}: {:>3} open ({} gen, w {}%, u {:.2})",
                        v["name"].as_str().unwrap_or(b),
                        v["active"],
                        v["generating"],
                        v["weight_percent"],
                        v["utilisation"].as_f64().unwrap_or(0.0),
                    )
                }
                None => line += &format!("  {b}: down"),
            }
        }
        println!("{line}");
    }
}
