//! The agent on loopback, driven by a real WebSocket client: every ending path, bad input,
//! floods and shutdown, with the counters checked exact afterwards.

mod common;

use std::time::Duration;

use common::{agent, reasons, settled};
use futures_util::{SinkExt, StreamExt};
use livecount_server::RunningAgent;
use livecount_server::load_driver::fetch_load;
use tokio::io::AsyncReadExt;
use tokio::net::TcpStream;
use tokio_tungstenite::tungstenite::Message;
use tokio_tungstenite::tungstenite::protocol::frame::coding::CloseCode;

type Ws = tokio_tungstenite::WebSocketStream<tokio_tungstenite::MaybeTlsStream<TcpStream>>;

async fn connect(a: &RunningAgent) -> Ws {
    tokio_tungstenite::connect_async(format!("ws://{}/session", a.http))
        .await
        .unwrap()
        .0
}

async fn send(ws: &mut Ws, text: &str) {
    ws.send(Message::text(text)).await.unwrap();
}

/// Next text frame, or the close frame's code.
async fn recv(ws: &mut Ws) -> Result<String, Option<CloseCode>> {
    loop {
        match tokio::time::timeout(Duration::from_secs(5), ws.next())
            .await
            .expect("a frame within 5 s")
        {
            Some(Ok(Message::Text(t))) => return Ok(t.to_string()),
            Some(Ok(Message::Close(f))) => return Err(f.map(|f| f.code)),
            Some(Ok(_)) => {}
            _ => return Err(None),
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn speak_interrupt_and_bye_end_completed_once() {
    let a = agent(&[]).await;
    let mut ws = connect(&a).await;
    send(&mut ws, r#"{"type":"speak","chunks":3}"#).await;
    for seq in 0..3 {
        assert_eq!(
            recv(&mut ws).await.unwrap(),
            format!(r#"{{"type":"chunk","seq":{seq}}}"#)
        );
    }
    assert_eq!(
        recv(&mut ws).await.unwrap(),
        r#"{"type":"done","chunks":3}"#
    );
    send(&mut ws, r#"{"type":"speak","chunks":10000}"#).await;
    assert!(recv(&mut ws).await.unwrap().contains("chunk"));
    assert_eq!(a.agent.tracker().snapshot().generating, 1);
    send(&mut ws, r#"{"type":"interrupt"}"#).await;
    loop {
        let f = recv(&mut ws).await.unwrap();
        if f.contains("interrupted") {
            break;
        }
    }
    assert_eq!(
        a.agent.tracker().snapshot().generating,
        0,
        "barge-in keeps the session, listening"
    );
    send(&mut ws, r#"{"type":"bye"}"#).await;
    assert_eq!(recv(&mut ws).await, Err(Some(CloseCode::Normal)));
    assert_eq!(settled(&a).await, reasons(&[("completed", 1)]));
    a.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn killed_connections_end_disconnected_and_counts_return_to_zero() {
    let a = agent(&[]).await;
    let mut kept = connect(&a).await;
    for _ in 0..5 {
        let mut ws = connect(&a).await;
        send(&mut ws, r#"{"type":"speak","chunks":10000}"#).await;
        recv(&mut ws).await.unwrap();
        drop(ws); // no close frame
    }
    let mut closer = connect(&a).await;
    closer.close(None).await.unwrap();
    send(&mut kept, r#"{"type":"idle"}"#).await;
    send(&mut kept, r#"{"type":"bye"}"#).await;
    assert_eq!(recv(&mut kept).await, Err(Some(CloseCode::Normal)));
    assert_eq!(
        settled(&a).await,
        reasons(&[("completed", 2), ("disconnected", 5)])
    );
    let last = a.shutdown().await;
    assert_eq!((last.started, last.ended, last.active), (7, 7, 0));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_input_gets_an_error_or_close_code_and_others_keep_going() {
    let a = agent(&["--max-frame-bytes", "1024", "--idle-timeout-secs", "1"]).await;
    let mut good = connect(&a).await;

    let mut garbage = connect(&a).await;
    send(&mut garbage, "hello").await;
    assert!(recv(&mut garbage).await.unwrap().contains("not a frame"));
    assert_eq!(recv(&mut garbage).await, Err(Some(CloseCode::Invalid)));

    let mut range = connect(&a).await;
    send(&mut range, r#"{"type":"speak","chunks":0}"#).await;
    assert!(recv(&mut range).await.unwrap().contains("out of range"));

    let mut binary = connect(&a).await;
    binary.send(Message::binary(vec![1, 2, 3])).await.unwrap();
    assert!(recv(&mut binary).await.unwrap().contains("binary"));

    let mut huge = connect(&a).await;
    let _ = huge.send(Message::text("x".repeat(4096))).await;
    assert!(matches!(
        recv(&mut huge).await,
        Err(Some(CloseCode::Size)) | Err(None)
    ));

    // `good` keeps working next to all that.
    send(&mut good, r#"{"type":"speak","chunks":1}"#).await;
    assert!(recv(&mut good).await.unwrap().contains("chunk"));
    send(&mut good, r#"{"type":"bye"}"#).await;
    let _ = recv(&mut good).await;

    let mut silent = connect(&a).await;
    assert_eq!(
        recv(&mut silent).await,
        Err(Some(CloseCode::Policy)),
        "idle timeout"
    );
    let ended = settled(&a).await;
    assert_eq!(ended.get("failed"), Some(&4), "{ended:?}");
    assert_eq!(ended.get("disconnected"), Some(&1), "idle: {ended:?}");
    assert_eq!(ended.get("completed"), Some(&1), "{ended:?}");
    a.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_flood_above_max_sessions_is_refused_with_503() {
    let a = agent(&["--max-sessions", "3"]).await;
    let mut held = Vec::new();
    for _ in 0..3 {
        held.push(connect(&a).await);
    }
    for _ in 0..5 {
        let err = tokio_tungstenite::connect_async(format!("ws://{}/session", a.http))
            .await
            .unwrap_err();
        assert!(err.to_string().contains("503"), "{err}");
    }
    for ws in &mut held {
        send(ws, r#"{"type":"speak","chunks":1}"#).await;
        assert!(recv(ws).await.unwrap().contains("chunk"));
    }
    let report = a.agent.publish();
    assert_eq!((report.active, report.refused), (3, 5));
    drop(held);
    assert_eq!(settled(&a).await, reasons(&[("disconnected", 3)]));
    a.shutdown().await;
}

async fn agent_check(a: &RunningAgent) -> String {
    let mut conn = TcpStream::connect(a.agent_check.unwrap()).await.unwrap();
    let mut reply = String::new();
    conn.read_to_string(&mut reply).await.unwrap();
    reply
}

/// The status line's code of `GET path` on the agent's HTTP port.
async fn status_of(a: std::net::SocketAddr, path: &str) -> u16 {
    use tokio::io::AsyncWriteExt;
    let mut conn = TcpStream::connect(a).await.unwrap();
    let request = format!("GET {path} HTTP/1.0\r\nHost: x\r\n\r\n");
    conn.write_all(request.as_bytes()).await.unwrap();
    let mut reply = String::new();
    conn.read_to_string(&mut reply).await.unwrap();
    reply.split(' ').nth(1).unwrap().parse().unwrap()
}

/// SIGTERM's drain on the agent: four sessions open; `/ready` turns 503 and agent-check
/// says `drain`; two sessions say bye during the drain and end `Completed`; a new client
/// is refused 503 with `Retry-After`, counted refused; the two still open at the deadline
/// close 1012 and end `Shutdown`; every session once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_drain_lets_sessions_finish_refuses_new_ones_and_ends_the_rest_1012() {
    let a = agent(&["--drain-secs", "1.5"]).await;
    assert!(
        agent_check(&a).await.starts_with("up "),
        "agent-check before the drain"
    );
    assert_eq!(status_of(a.http, "/ready").await, 200);
    let mut open = Vec::new();
    for _ in 0..4 {
        open.push(connect(&a).await);
    }
    let (http, check) = (a.http, a.agent_check.unwrap());
    let tracker = a.agent.tracker().clone();
    let began = std::time::Instant::now();
    let stopping = tokio::spawn(a.drain(std::future::pending()));
    while status_of(http, "/ready").await != 503 {
        assert!(
            began.elapsed() < Duration::from_secs(1),
            "/ready never said draining"
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    let mut conn = TcpStream::connect(check).await.unwrap();
    let mut reply = String::new();
    conn.read_to_string(&mut reply).await.unwrap();
    assert_eq!(reply, "drain\n", "agent-check while draining");
    for ws in &mut open[..2] {
        send(ws, r#"{"type":"bye"}"#).await;
        assert_eq!(recv(ws).await, Err(Some(CloseCode::Normal)));
    }
    match tokio_tungstenite::connect_async(format!("ws://{http}/session")).await {
        Err(tokio_tungstenite::tungstenite::Error::Http(response)) => {
            assert_eq!(response.status(), 503);
            assert!(response.headers().contains_key("retry-after"));
        }
        other => panic!("a client during the drain is refused: {other:?}"),
    }
    for ws in &mut open[2..] {
        assert_eq!(recv(ws).await, Err(Some(CloseCode::Restart)));
    }
    assert!(
        began.elapsed() >= Duration::from_millis(1500),
        "not before the deadline"
    );
    let (last, drained) = stopping.await.unwrap().unwrap();
    assert_eq!(
        (drained.open_at_start, drained.cut, drained.hurried),
        (4, 2, false)
    );
    assert!(last.draining);
    assert_eq!(last.agent_reply(), "drain\n");
    assert_eq!(
        (last.active, last.started, last.ended, last.refused),
        (0, 4, 4, 1)
    );
    assert_eq!(last.ended_by_reason.get("shutdown"), Some(&2));
    assert_eq!(last.ended_by_reason.get("completed"), Some(&2));
    assert_eq!(tracker.snapshot().active, 0);
}

/// A second signal during the drain (`hurry`) ends it at once, and still each session once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_second_signal_ends_the_drain_early_and_each_session_once() {
    let a = agent(&["--drain-secs", "600"]).await;
    let mut open = vec![connect(&a).await, connect(&a).await];
    let began = std::time::Instant::now();
    let hurry = tokio::time::sleep(Duration::from_millis(300));
    let (last, drained) = a.drain(hurry).await.unwrap();
    assert!(drained.hurried && began.elapsed() < Duration::from_secs(60));
    assert_eq!((drained.open_at_start, drained.cut), (2, 2));
    for ws in &mut open {
        assert_eq!(recv(ws).await, Err(Some(CloseCode::Restart)));
    }
    assert_eq!((last.active, last.started, last.ended), (0, 2, 2));
    assert_eq!(last.ended_by_reason.get("shutdown"), Some(&2));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_maximum_session_length_ends_it_timed_out() {
    let a = agent(&["--max-session-secs", "0.3"]).await;
    let mut ws = connect(&a).await;
    send(&mut ws, r#"{"type":"speak","chunks":10000}"#).await;
    loop {
        match recv(&mut ws).await {
            Ok(frame) => assert!(frame.contains("chunk"), "{frame}"),
            Err(code) => {
                assert_eq!(
                    code,
                    Some(CloseCode::Normal),
                    "close 1000, max session length"
                );
                break;
            }
        }
    }
    assert_eq!(settled(&a).await, reasons(&[("timed_out", 1)]));
    a.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn load_and_metrics_come_from_one_snapshot() {
    let a = agent(&["--metrics", "127.0.0.1:0"]).await;
    let mut ws = connect(&a).await;
    send(&mut ws, r#"{"type":"speak","chunks":10000}"#).await;
    recv(&mut ws).await.unwrap();
    let report = a.agent.publish();
    let load = fetch_load(&a.http.to_string()).await.unwrap();
    let scrape = fetch_load(&a.metrics.unwrap().to_string()).await.unwrap();
    assert_eq!(
        scrape["active"], 1,
        "the separate scrape address serves the same report"
    );
    assert!(load["sequence"].as_u64().unwrap() >= report.sequence);
    assert_eq!(load["active"], 1);
    assert_eq!(load["generating"], 1);
    assert!(load["age_ms"].as_u64().is_some());
    let mut conn = TcpStream::connect(a.http).await.unwrap();
    tokio::io::AsyncWriteExt::write_all(&mut conn, b"GET /metrics HTTP/1.0\r\n\r\n")
        .await
        .unwrap();
    let mut text = String::new();
    conn.read_to_string(&mut text).await.unwrap();
    assert!(text.contains("livecount_active_sessions 1\n"), "{text}");
    assert!(
        text.contains("livecount_sessions{state=\"generating\"} 1\n"),
        "{text}"
    );
    drop(ws);
    settled(&a).await;
    a.shutdown().await;
}
