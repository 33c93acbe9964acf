//! What a session frame costs the agent, and how much of it is the session tracker.
//!
//! ```sh
//! cargo run --release -p livecount-server --example frame_cost
//! ```
//!
//! 1. Tracker only: `Session::touch` (every frame) and a `Listening → Generating →
//!    Listening` phase round trip (every utterance), in a loop on one thread.
//! 2. Whole frame: one WebSocket client on loopback pipelines N `idle` frames and then one
//!    `speak` of 1 chunk, and waits for `done`: wall time ÷ N is the per-frame cost of
//!    parsing, the conversation loop and the tracker, with the client on the same machine.

use std::hint::black_box;
use std::time::{Duration, Instant};

use futures_util::{SinkExt, StreamExt};
use livecount_server::{AgentConfig, RunningAgent};
use livecount_session::{Phase, SessionTracker};
use tokio_tungstenite::tungstenite::Message;

fn tracker_costs() -> (f64, f64) {
    let tracker: SessionTracker = SessionTracker::new();
    let mut session = tracker.start();
    let n = 2_000_000u32;
    let t = Instant::now();
    for _ in 0..n {
        black_box(&session).touch();
    }
    let touch = t.elapsed().as_nanos() as f64 / f64::from(n);
    let t = Instant::now();
    for _ in 0..n / 2 {
        black_box(session.set_phase(Phase::Generating));
        black_box(session.set_phase(Phase::Listening));
    }
    let phase = t.elapsed().as_nanos() as f64 / f64::from(n);
    (touch, phase)
}

async fn frame_cost(frames: u32) -> Duration {
    let args: Vec<String> = ["--http", "127.0.0.1:0", "--max-frame-bytes", "65536"]
        .iter()
        .map(|s| s.to_string())
        .collect();
    let agent = RunningAgent::start(AgentConfig::from_args(&args).unwrap())
        .await
        .unwrap();
    let url = format!("ws://{}/session", agent.http);
    let (mut ws, _) = tokio_tungstenite::connect_async(&url).await.unwrap();
    let t = Instant::now();
    for _ in 0..frames {
        ws.feed(Message::text(r#"{"type":"idle"}"#)).await.unwrap();
    }
    ws.send(Message::text(r#"{"type":"speak","chunks":1}"#))
        .await
        .unwrap();
    while let Some(Ok(m)) = ws.next().await {
        if m.to_text().unwrap_or("").contains("done") {
            break;
        }
    }
    let elapsed = t.elapsed();
    drop(ws);
    agent.shutdown().await;
    elapsed
}

fn main() {
    let (touch, phase) = tracker_costs();
    println!("tracker: touch {touch:.1} ns/frame, phase change {phase:.1} ns (one way)");
    let rt = tokio::runtime::Runtime::new().unwrap();
    let frames = 200_000;
    let _ = rt.block_on(frame_cost(10_000)); // warm-up
    let elapsed = rt.block_on(frame_cost(frames));
    let per_frame = elapsed.as_nanos() as f64 / f64::from(frames);
    println!(
        "whole frame over loopback WebSocket (client on the same machine): {per_frame:.0} ns/frame \
         ({frames} frames in {:.2} s); tracker share {:.1}%",
        elapsed.as_secs_f64(),
        100.0 * touch / per_frame
    );
}
