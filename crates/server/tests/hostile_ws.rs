//! The agent's WebSocket side against hostile and careless clients, on loopback with raw
//! TCP: a client that stops reading, half-sent HTTP upgrades (slowloris), and frames that
//! break RFC 6455. After each: the ending it caused, active 0, started = ended.

mod common;
#[path = "../../tower/tests/common/raw_ws.rs"]
mod raw_ws;

use std::time::Duration;

use common::{reasons, settled};
use futures_util::{SinkExt, StreamExt};
use livecount_server::{AgentConfig, RunningAgent};
use raw_ws::{close_code, frame, open_fds, raw_upgrade, text, trickle, within};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio_tungstenite::tungstenite::Message;
use tokio_tungstenite::tungstenite::protocol::frame::coding::CloseCode;

/// An agent on loopback (HTTP only), reports every 0.2 s, no pause between chunks.
async fn start(tweak: impl FnOnce(&mut AgentConfig)) -> RunningAgent {
    let mut config = AgentConfig {
        http: "127.0.0.1:0".parse().unwrap(),
        report_interval: Duration::from_millis(200),
        chunk_gap: Duration::ZERO,
        ..AgentConfig::default()
    };
    tweak(&mut config);
    RunningAgent::start(config).await.unwrap()
}

// === a client that stops reading ===

/// A client that keeps asking for long responses (so it is never idle) and never reads
/// a byte of them, on a small receive window. Its task ends `true` when a write fails:
/// the server let go of the socket (within 10 s, else `false`).
async fn stop_reading(a: &RunningAgent) -> tokio::task::JoinHandle<bool> {
    let mut conn = raw_upgrade(a.http, "/session", Some(4096)).await;
    tokio::spawn(async move {
        for _ in 0..200 {
            let speak = text(r#"{"type":"speak","chunks":10000}"#);
            if conn.write_all(&speak).await.is_err() {
                return true;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        false
    })
}

/// Waits (≤ 5 s) until `n` sessions have started: an upgrade answered is not yet one.
async fn started(a: &RunningAgent, n: u64) {
    for _ in 0..500 {
        if a.agent.tracker().snapshot().started >= n {
            return;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    panic!(
        "{n} sessions never started: {:?}",
        a.agent.tracker().snapshot()
    );
}

/// `/load`'s `active`, once a report at least as new as now is published (≤ 2 s).
async fn load_active(a: &RunningAgent) -> u64 {
    let now = a.agent.publish().sequence;
    for _ in 0..20 {
        let load = livecount_server::load_driver::fetch_load(&a.http.to_string())
            .await
            .unwrap();
        if load["sequence"].as_u64() >= Some(now) {
            return load["active"].as_u64().unwrap();
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    panic!("/load never caught up with report {now}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_client_that_stops_reading_ends_disconnected_and_frees_its_slot() {
    let a = start(|c| {
        c.max_sessions = 1;
        c.idle_timeout = Duration::from_secs(2);
        c.write_timeout = Duration::from_millis(500);
    })
    .await;
    let client = stop_reading(&a).await;
    started(&a, 1).await;
    // It speaks every 50 ms, so the idle timeout never fires: only the write timeout can
    // end it. `settled` waits at most 5 s.
    assert_eq!(settled(&a).await, reasons(&[("disconnected", 1)]));
    assert_eq!(load_active(&a).await, 0, "/load agrees");

    // The slot is free: with max_sessions 1, a new session is admitted and served.
    let (mut ws, _) = within(
        5,
        tokio_tungstenite::connect_async(format!("ws://{}/session", a.http)),
    )
    .await
    .expect("admitted: the stalled session's slot was released");
    ws.send(Message::text(r#"{"type":"speak","chunks":2}"#))
        .await
        .unwrap();
    let mut frames = Vec::new();
    while let Some(Ok(msg)) = within(5, ws.next()).await {
        match msg {
            Message::Text(t) if t.contains("done") => {
                ws.send(Message::text(r#"{"type":"bye"}"#)).await.unwrap();
            }
            Message::Text(t) => frames.push(t.to_string()),
            Message::Close(f) => {
                assert_eq!(f.map(|f| f.code), Some(CloseCode::Normal));
                break;
            }
            _ => {}
        }
    }
    assert_eq!(frames.len(), 2, "{frames:?}");
    // And the socket is closed, not only the count: the writer task is bounded too.
    assert!(
        within(15, client).await.unwrap(),
        "the server kept the socket"
    );
    assert_eq!(
        settled(&a).await,
        reasons(&[("completed", 1), ("disconnected", 1)])
    );
    a.shutdown().await;
}

// === protocol violations ===

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn protocol_violations_close_with_their_rfc_6455_code_and_count_failed() {
    let a = start(|c| c.max_frame_bytes = 1024).await;
    let ping_126 = frame(true, 0, 0x9, &[b'p'; 126], true);
    let cases: Vec<(&str, Vec<u8>, u16)> = vec![
        (
            "invalid UTF-8",
            frame(true, 0, 0x1, &[b'{', 0xff, 0xfe], true),
            1007,
        ),
        (
            "overlong UTF-8",
            frame(true, 0, 0x1, &[0xc0, 0xaf], true),
            1007,
        ),
        (
            "invalid UTF-8 across fragments",
            [
                frame(false, 0, 0x1, b"ab", true),
                frame(true, 0, 0x0, &[0xed, 0xa0, 0x80], true),
            ]
            .concat(),
            1007,
        ),
        (
            "unmasked client frame",
            frame(true, 0, 0x1, b"{}", false),
            1002,
        ),
        (
            "reserved data opcode",
            frame(true, 0, 0x3, b"x", true),
            1002,
        ),
        (
            "reserved control opcode",
            frame(true, 0, 0xb, b"", true),
            1002,
        ),
        ("RSV1 set", frame(true, 0b100, 0x1, b"{}", true), 1002),
        ("RSV3 set", frame(true, 0b001, 0x1, b"{}", true), 1002),
        ("fragmented ping", frame(false, 0, 0x9, b"p", true), 1002),
        (
            "continuation without start",
            frame(true, 0, 0x0, b"x", true),
            1002,
        ),
        ("126-byte ping", ping_126, 1002),
        ("text above the limit", text(&"x".repeat(2000)), 1009),
    ];
    let n = cases.len() as u64;
    for (what, bytes, expected) in cases {
        let mut conn = raw_upgrade(a.http, "/session", None).await;
        trickle(&mut conn, &bytes).await;
        assert_eq!(close_code(&mut conn).await, Some(expected), "{what}");
    }
    assert_eq!(settled(&a).await, reasons(&[("failed", n)]));
    let last = a.shutdown().await;
    assert_eq!((last.active, last.started, last.ended), (0, n, n));
}

// === slowloris ===

/// One session from upgrade to close: `speak` → chunks → `done` → `bye` → 1000.
async fn full_session(a: &RunningAgent) {
    let url = format!("ws://{}/session", a.http);
    let (mut ws, _) = within(5, tokio_tungstenite::connect_async(url))
        .await
        .unwrap();
    ws.send(Message::text(r#"{"type":"speak","chunks":3}"#))
        .await
        .unwrap();
    let mut chunks = 0;
    loop {
        match within(5, ws.next()).await {
            Some(Ok(Message::Text(t))) if t.contains("done") => break,
            Some(Ok(Message::Text(t))) if t.contains("chunk") => chunks += 1,
            other => panic!("expected a chunk or done, got {other:?}"),
        }
    }
    assert_eq!(chunks, 3);
    ws.send(Message::text(r#"{"type":"bye"}"#)).await.unwrap();
    match within(5, ws.next()).await {
        Some(Ok(Message::Close(f))) => assert_eq!(f.map(|f| f.code), Some(CloseCode::Normal)),
        other => panic!("expected the close frame, got {other:?}"),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn half_sent_upgrades_are_closed_in_time_bounded_and_do_not_block_a_fresh_session() {
    const ATTACKERS: usize = 300;
    const MAX_PENDING: usize = 64;
    let header_timeout = Duration::from_secs(1);
    let a = start(|c| {
        c.header_read_timeout = header_timeout;
        c.max_pending_connections = Some(MAX_PENDING);
    })
    .await;
    let baseline = open_fds();
    let mut held = Vec::with_capacity(ATTACKERS);
    let mut most = baseline;
    for _ in 0..ATTACKERS {
        let mut conn = within(5, TcpStream::connect(a.http)).await.unwrap();
        conn.write_all(b"GET /session HTTP/1.1\r\nHost: x\r\n")
            .await
            .unwrap();
        held.push(conn);
        most = most.max(open_fds());
    }
    let attack_sent = tokio::time::Instant::now();
    // While they hold their half requests, a real client is served.
    full_session(&a).await;
    most = most.max(open_fds());
    // Our 300 client ends, plus at most MAX_PENDING server ends (and a few for the
    // runtime and the fresh session); unbounded it would be 300 + 300.
    let bound = baseline + ATTACKERS + MAX_PENDING + 16;
    assert!(most <= bound, "{most} descriptors open, bound {bound}");

    // Every one is closed by the server (EOF or reset) within the header timeout + slack.
    let deadline = attack_sent + header_timeout + Duration::from_secs(4);
    for (i, conn) in held.iter_mut().enumerate() {
        let mut buf = [0u8; 512];
        loop {
            match tokio::time::timeout_at(deadline, conn.read(&mut buf)).await {
                Ok(Ok(0) | Err(_)) => break,
                Ok(Ok(_)) => {} // a response (e.g. 408) before the close is fine
                Err(_) => panic!("connection {i} still open after the header timeout"),
            }
        }
    }
    drop(held);
    assert_eq!(settled(&a).await, reasons(&[("completed", 1)]));
    a.shutdown().await;
}
