//! `livecount-agent drive`: opens long-lived WebSocket sessions through a target address
//! (a load balancer or one agent), speaks and listens in a pattern, interrupts some
//! responses, kills some connections abruptly, and prints per-backend session counts
//! read from the backends' `/load` over time.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use clap::Parser;
use futures_util::{SinkExt, StreamExt};
use serde::Serialize;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio_tungstenite::tungstenite::Message;

use crate::flag_values::{MAX_SECS, seconds, share};

/// The most sessions one drive opens.
const MAX_SESSIONS: u32 = 100_000;
/// The most response chunks one utterance asks for.
const MAX_CHUNKS: u32 = 10_000;
/// How long one session may take to connect and upgrade before it counts as refused.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);

/// What to drive: `livecount-agent drive`'s flags, each default, range and help line here.
///
/// Values are checked as they are parsed (an error names its flag, exit code 2). The CLI
/// exits 1 when no session at all could be opened (the target is down, refuses every
/// upgrade, or does not answer within 10 s per connection); the summary is printed first.
#[derive(Debug, Clone, Parser)]
#[command(
    name = "drive",
    bin_name = "livecount-agent drive",
    about = "Open sessions through a balancer or agent, print the outcome as JSON; \
             exit 1 if not one session opened",
    long_about = None,
    // As before clap: a repeated flag overrides the earlier one (scripts append overrides).
    args_override_self = true
)]
pub struct DriveConfig {
    /// `HOST:PORT` of the balancer or agent: sessions open at ws://HOST:PORT/session
    #[arg(long, value_name = "HOST:PORT")]
    pub target: String,
    /// Sessions to open, 1..=100000
    #[arg(long, value_name = "N", default_value = "30", allow_negative_numbers = true,
          value_parser = clap::value_parser!(u32).range(1..=i64::from(MAX_SESSIONS)))]
    pub sessions: u32,
    /// Spread the openings over S seconds, 0..=604800 (a week)
    #[arg(long = "ramp-secs", value_name = "S", default_value = "1",
          allow_negative_numbers = true, value_parser = seconds(0.0, MAX_SECS))]
    pub ramp: Duration,
    /// How long each session lives, seconds, 0..=604800 (a week)
    #[arg(long = "hold-secs", value_name = "S", default_value = "10",
          allow_negative_numbers = true, value_parser = seconds(0.0, MAX_SECS))]
    pub hold: Duration,
    /// Mean pause between utterances, seconds, 0..=604800 (a week)
    #[arg(long = "speak-every-secs", value_name = "S", default_value = "1",
          allow_negative_numbers = true, value_parser = seconds(0.0, MAX_SECS))]
    pub speak_every: Duration,
    /// Response chunks per utterance, 1..=10000
    #[arg(long, value_name = "N", default_value = "5", allow_negative_numbers = true,
          value_parser = clap::value_parser!(u32).range(1..=i64::from(MAX_CHUNKS)))]
    pub chunks: u32,
    /// Share of utterances interrupted (barge-in), 0..=1
    #[arg(long, value_name = "F", default_value = "0.1", allow_negative_numbers = true,
          value_parser = share)]
    pub interrupt_share: f64,
    /// Share of sessions killed without a close frame, 0..=1
    #[arg(long, value_name = "F", default_value = "0.2", allow_negative_numbers = true,
          value_parser = share)]
    pub kill_share: f64,
    /// Backends (HOST:PORT,...) whose /load to print every second
    #[arg(long, value_name = "HOST:PORT,...", value_delimiter = ',')]
    pub observe: Vec<String>,
    /// Seed of the traffic pattern, a whole number 0..=18446744073709551615
    #[arg(
        long,
        value_name = "N",
        default_value = "1",
        allow_negative_numbers = true
    )]
    pub seed: u64,
}

impl DriveConfig {
    /// Parses `drive` flags (without `drive` itself); errors name the flag.
    ///
    /// ```
    /// use livecount_server::load_driver::DriveConfig;
    ///
    /// let args = ["--target", "127.0.0.1:8080", "--sessions", "-5"].map(String::from);
    /// let error = DriveConfig::from_args(&args).unwrap_err();
    /// assert!(error.to_string().contains("--sessions"));
    /// ```
    pub fn from_args(args: &[String]) -> Result<Self, clap::Error> {
        let argv = std::iter::once("drive").chain(args.iter().map(String::as_str));
        Self::try_parse_from(argv)
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

/// Runs the drive and returns its summary (also printed by the CLI).
pub async fn drive(config: DriveConfig) -> DriveSummary {
    let tally = Arc::new(Tally::default());
    let config = Arc::new(config);
    let backends: Vec<String> = config
        .observe
        .iter()
        .filter(|b| !b.is_empty())
        .cloned()
        .collect();
    let observer = (!backends.is_empty()).then(|| tokio::spawn(observe(backends)));
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
    // One seeded stream per client: the same seed replays the same traffic.
    let mut rng =
        fastrand::Rng::with_seed(config.seed ^ (i + 1).wrapping_mul(0xD605_BBB5_8C8A_BBB9));
    let url = format!("ws://{}/session", config.target);
    let connect = tokio::time::timeout(CONNECT_TIMEOUT, tokio_tungstenite::connect_async(&url));
    let Ok(Ok((mut ws, _))) = connect.await else {
        tally.refused.fetch_add(1, Ordering::Relaxed);
        return;
    };
    tally.opened.fetch_add(1, Ordering::Relaxed);
    let kill = rng.f64() < config.kill_share;
    let end = tokio::time::Instant::now() + config.hold;
    loop {
        let pause = config.speak_every.mul_f64(-(1.0 - rng.f64()).ln());
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
        let interrupt = rng.f64() < config.interrupt_share;
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

/// `GET /load` on `addr` (a `host:port`) with `livecount_balance::HttpLoadSource`, the one
/// `/load` client: the whole report as JSON, or `None` if it could not be had within 2 s.
pub async fn fetch_load(addr: &str) -> Option<serde_json::Value> {
    let addr = tokio::net::lookup_host(addr).await.ok()?.next()?;
    let source = livecount_balance::HttpLoadSource::new(addr, Duration::from_secs(2));
    serde_json::to_value(source.fetch_report().await.ok()?).ok()
}

/// `GET path` on `addr` with a bare HTTP/1.0 request: the status and the body, or `None`
/// if the server did not connect, answer or finish within 2 s each.
pub async fn http_get(addr: &str, path: &str) -> Option<(u16, String)> {
    let mut conn = tokio::time::timeout(Duration::from_secs(2), TcpStream::connect(addr))
        .await
        .ok()?
        .ok()?;
    let request = format!("GET {path} HTTP/1.0\r\nHost: {addr}\r\n\r\n");
    tokio::time::timeout(Duration::from_secs(2), conn.write_all(request.as_bytes()))
        .await
        .ok()?
        .ok()?;
    let mut buf = Vec::new();
    tokio::time::timeout(Duration::from_secs(2), conn.read_to_end(&mut buf))
        .await
        .ok()?
        .ok()?;
    let text = String::from_utf8_lossy(&buf);
    let (head, body) = text.split_once("\r\n\r\n")?;
    let status = head.split(' ').nth(1)?.parse().ok()?;
    Some((status, body.to_owned()))
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

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(s: &str) -> Result<DriveConfig, clap::Error> {
        let args: Vec<String> = s.split_whitespace().map(String::from).collect();
        DriveConfig::from_args(&args)
    }

    #[test]
    fn parses_flags_with_their_defaults() {
        let c =
            parse("--target 127.0.0.1:9 --observe a:1,b:2 --seed 18446744073709551615").unwrap();
        assert_eq!(c.target, "127.0.0.1:9");
        assert_eq!(c.observe, ["a:1", "b:2"]);
        assert_eq!(c.seed, u64::MAX);
        assert_eq!((c.sessions, c.chunks), (30, 5));
        assert_eq!(
            (c.ramp, c.hold),
            (Duration::from_secs(1), Duration::from_secs(10))
        );
        assert_eq!(c.speak_every, Duration::from_secs(1));
        assert_eq!((c.interrupt_share, c.kill_share), (0.1, 0.2));
        let c = parse("--target a:1 --sessions 3 --target b:2 --sessions 4").unwrap();
        assert_eq!(
            (c.target.as_str(), c.sessions),
            ("b:2", 4),
            "the last one wins"
        );
    }

    /// Values that used to be clamped, wrapped or allocated until abort are refused by name.
    #[test]
    fn out_of_range_values_name_their_flag() {
        for bad in [
            "--sessions -5",
            "--sessions 0",
            "--sessions 1e12",
            "--sessions 100001",
            "--chunks 0",
            "--chunks 10001",
            "--kill-share 5",
            "--kill-share -0.1",
            "--interrupt-share NaN",
            "--seed -1",
            "--seed 1.5",
            "--ramp-secs 1e19",
            "--hold-secs -1",
            "--speak-every-secs inf",
        ] {
            let flag = bad.split_whitespace().next().unwrap();
            let e = parse(&format!("--target 127.0.0.1:9 {bad}"))
                .unwrap_err()
                .to_string();
            assert!(e.contains(&format!("'{flag} ")), "{bad}: {e}");
        }
        let e = parse("--sessions 3").unwrap_err().to_string();
        assert!(e.contains("--target"), "{e}");
        let e = parse("--target 127.0.0.1:9 stray").unwrap_err().to_string();
        assert!(e.contains("'stray'"), "{e}");
    }
}
