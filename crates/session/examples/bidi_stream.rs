//! Four bidirectional streams served at once, each ended a different way, racing:
//!
//! * `steady`   sends three frames and closes: Completed;
//! * `chatty`   never stops talking: the server's 300 ms deadline ends it, TimedOut;
//! * `impatient` gives up and its caller aborts the handler task: Cancelled;
//! * `vanished` goes silent without closing (a peer gone without a FIN): the idle watchdog
//!   ends it, Disconnected.
//!
//! Each handler flips the session to `Generating` while it "speaks" its reply, so the
//! snapshot printed at the end shows phases too.
//!
//!     cargo run -p livecount-session --example bidi_stream

use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Duration;

use futures_core::Stream;
use livecount_session::{EndReason, Phase, SessionTracker, Window};
use tokio::sync::mpsc;
use tokio::time::sleep;

/// Client-to-server frames as a `Stream`.
struct Frames(mpsc::Receiver<String>);

impl Stream for Frames {
    type Item = String;
    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<String>> {
        self.0.poll_recv(cx)
    }
}

const DEADLINE: Duration = Duration::from_millis(300);
const IDLE: Duration = Duration::from_millis(100);

/// The server side of one stream: reply to every frame; a deadline, an idle watchdog.
async fn serve(
    tracker: SessionTracker,
    frames: mpsc::Receiver<String>,
    replies: mpsc::Sender<String>,
) {
    let stream = tracker.track_stream(Frames(frames), DEADLINE);
    let session = stream.handle();
    let mut stream = std::pin::pin!(stream);
    loop {
        let next = std::future::poll_fn(|cx| stream.as_mut().poll_next(cx));
        match tokio::time::timeout(IDLE, next).await {
            Ok(Some(frame)) => {
                stream.as_mut().set_phase(Phase::Generating); // speaking
                let _ = replies.send(format!("echo {frame}")).await;
                stream.as_mut().set_phase(Phase::Listening);
            }
            Ok(None) => break, // closed by the client (Completed) or the deadline (TimedOut)
            Err(_idle) => {
                session.end(EndReason::Disconnected); // races the deadline; one wins
                break;
            }
        }
    }
    println!("session {} ended: {:?}", session.id(), session.reason());
}

/// A client: sends `frames` frames `gap` apart, then keeps the stream open for `linger`.
async fn client(
    tx: mpsc::Sender<String>,
    mut rx: mpsc::Receiver<String>,
    frames: usize,
    gap: Duration,
    linger: Duration,
) {
    tokio::spawn(async move { while rx.recv().await.is_some() {} });
    for i in 0..frames {
        if tx.send(format!("frame {i}")).await.is_err() {
            return;
        }
        sleep(gap).await;
    }
    sleep(linger).await;
}

#[tokio::main]
async fn main() {
    let tracker = SessionTracker::new();
    let before = tracker.snapshot();

    let mut handlers = Vec::new();
    let mut clients = Vec::new();
    for (name, frames, gap, linger) in [
        ("steady", 3, Duration::from_millis(10), Duration::ZERO),
        (
            "chatty",
            usize::MAX,
            Duration::from_millis(20),
            Duration::ZERO,
        ),
        ("impatient", 1, Duration::ZERO, Duration::from_secs(10)),
        ("vanished", 1, Duration::ZERO, Duration::from_secs(1)),
    ] {
        let (to_server, from_client) = mpsc::channel(8);
        let (to_client, from_server) = mpsc::channel(8);
        let handler = tokio::spawn(serve(tracker.clone(), from_client, to_client));
        println!("{name}: stream started");
        clients.push(tokio::spawn(client(
            to_server,
            from_server,
            frames,
            gap,
            linger,
        )));
        handlers.push((name, handler));
    }

    sleep(Duration::from_millis(30)).await;
    let snapshot = tracker.snapshot();
    println!(
        "mid-flight: {} active ({} listening, {} generating)",
        snapshot.active, snapshot.listening, snapshot.generating
    );
    // The impatient client cancels: its handler task is aborted, the session ends Cancelled.
    handlers[2].1.abort();

    for (name, handler) in handlers {
        let outcome = handler.await;
        println!(
            "{name}: handler {}",
            if outcome.is_ok() {
                "returned"
            } else {
                "aborted"
            }
        );
    }
    for client in clients {
        client.abort();
    }

    let s = tracker.snapshot();
    println!(
        "started {}, ended {}, active {}",
        s.started, s.ended, s.active
    );
    for (reason, n) in s.ended_by_reason.iter().filter(|(_, n)| *n > 0) {
        println!("  {reason}: {n}");
    }
    if let Some(w) = Window::between(&before, &s) {
        println!(
            "window {:?}: {:.1} arrivals/s, {:.1} ends/s, mean active {:.1}",
            w.length, w.arrivals_per_sec, w.ends_per_sec, w.mean_active
        );
    }
    assert_eq!((s.started, s.ended, s.active), (4, 4, 0));
}
