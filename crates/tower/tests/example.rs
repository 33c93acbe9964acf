//! Runs `examples/service.rs` itself (included, not rebuilt through `cargo run`) on
//! loopback: the layer counts HTTP requests until their bodies end (a client leaving a
//! stream cancels it), the WebSocket route counts sockets, and graceful shutdown ends the
//! tick stream, the server stops, and the sockets still open end with 1012.

mod common;
#[path = "../examples/service.rs"]
mod service;

use std::net::SocketAddr;
use std::time::Duration;

use common::settle;
use futures_util::{SinkExt, StreamExt};
use livecount_session::{EndReason, SessionTracker};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio_tungstenite::tungstenite::{self, protocol::frame::coding::CloseCode};
use tokio_util::sync::CancellationToken;

const WAIT: Duration = Duration::from_secs(10);

async fn get(addr: SocketAddr, path: &str) -> TcpStream {
    let mut stream = tokio::time::timeout(WAIT, TcpStream::connect(addr))
        .await
        .unwrap()
        .unwrap();
    let request = format!("GET {path} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n\r\n");
    stream.write_all(request.as_bytes()).await.unwrap();
    stream
}

/// Reads until `needle` has arrived; returns what was read.
async fn read_until(stream: &mut TcpStream, needle: &str) -> String {
    let mut seen = Vec::new();
    let read = tokio::time::timeout(WAIT, async {
        let mut buf = [0u8; 1024];
        while !String::from_utf8_lossy(&seen).contains(needle) {
            let n = stream.read(&mut buf).await.unwrap();
            assert!(
                n > 0,
                "closed before {needle:?}: {}",
                String::from_utf8_lossy(&seen)
            );
            seen.extend_from_slice(&buf[..n]);
        }
    });
    read.await.expect("the response in time");
    String::from_utf8(seen).unwrap()
}

fn ended(tracker: &SessionTracker, reason: EndReason) -> u64 {
    tracker.snapshot().ended_by(reason)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_example_service_counts_http_and_websocket_sessions() {
    let (tracker, shutdown) = (SessionTracker::new(), CancellationToken::new());
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let server = tokio::spawn(service::serve(listener, tracker.clone(), shutdown.clone()));

    // A short response: counted, and completed once its body has gone out.
    let mut hello = get(addr, "/hello").await;
    read_until(&mut hello, "hello\n").await;
    settle(
        || ended(&tracker, EndReason::Completed) == 1,
        "/hello completed",
    )
    .await;

    // A stream the client leaves after two ticks: cancelled, not completed.
    let mut ticks = get(addr, "/ticks").await;
    read_until(&mut ticks, "tick 1\n").await;
    assert_eq!(tracker.active(), 1, "the stream is counted while it runs");
    drop(ticks);
    settle(
        || ended(&tracker, EndReason::Cancelled) == 1,
        "/ticks cancelled",
    )
    .await;

    // A socket, and a second stream, both open at shutdown.
    let url = format!("ws://{addr}/ws");
    let (mut socket, _) = tokio::time::timeout(WAIT, tokio_tungstenite::connect_async(url))
        .await
        .unwrap()
        .unwrap();
    socket
        .send(tungstenite::Message::text("echo?"))
        .await
        .unwrap();
    let echoed = tokio::time::timeout(WAIT, socket.next())
        .await
        .unwrap()
        .unwrap()
        .unwrap();
    assert_eq!(echoed, tungstenite::Message::text("echo?"));
    let mut ticks = get(addr, "/ticks").await;
    read_until(&mut ticks, "tick 0\n").await;
    assert_eq!(tracker.active(), 2);

    shutdown.cancel();
    match tokio::time::timeout(WAIT, socket.next()).await.unwrap() {
        Some(Ok(tungstenite::Message::Close(Some(frame)))) => {
            assert_eq!(frame.code, CloseCode::Restart)
        }
        other => panic!("expected a 1012 close, got {other:?}"),
    }
    let stopped = tokio::time::timeout(WAIT, server).await;
    stopped
        .expect("graceful shutdown finishes in time")
        .unwrap()
        .unwrap();

    let s = tracker.snapshot();
    assert_eq!((s.started, s.ended, s.active), (4, 4, 0), "{s:?}");
    assert_eq!(
        s.ended_by(EndReason::Completed),
        2,
        "/hello and the stream ended at shutdown"
    );
    assert_eq!(s.ended_by(EndReason::Cancelled), 1);
    assert_eq!(s.ended_by(EndReason::Shutdown), 1);
}
