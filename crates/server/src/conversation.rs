//! One session's life, independent of the transport: frames in, frames out, and exactly
//! one ending — whichever of bye, close, disconnect, deadline, idle timeout, bad input or
//! shutdown comes first.

use std::sync::Arc;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::{Duration, Instant};

use futures_util::{Stream, StreamExt};
use livecount_session::{EndReason, Phase, Session};
use tokio::sync::{mpsc, watch};
use tokio::task::JoinHandle;

use crate::protocol::{ClientFrame, ServerFrame};

/// What the transport delivered.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Incoming {
    /// A valid frame.
    Frame(ClientFrame),
    /// A frame that could not be understood; the text says why.
    Malformed(String),
    /// A message above the size limit.
    TooLarge,
    /// The client closed the stream cleanly (close frame, end of the gRPC stream).
    Closed,
    /// The transport failed: reset, EOF without a close, protocol error.
    Lost,
}

/// What to send.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Outgoing {
    /// A protocol frame.
    Frame(ServerFrame),
    /// Close the stream with a WebSocket close code (gRPC maps it to a status).
    Close {
        /// RFC 6455 close code: 1000 normal, 1001 going away, 1007 invalid data,
        /// 1008 policy (idle), 1009 too big.
        code: u16,
        /// Human-readable reason.
        reason: &'static str,
    },
}

/// Limits and costs a conversation runs under.
#[derive(Debug, Clone, Copy)]
pub struct Limits {
    /// Longest session.
    pub max_session: Duration,
    /// Longest silence from the client.
    pub idle_timeout: Duration,
    /// CPU burned per chunk.
    pub work: Duration,
    /// Pause between chunks.
    pub chunk_gap: Duration,
}

/// The response being streamed.
#[derive(Debug)]
struct Response {
    id: u64,
    task: JoinHandle<()>,
    sent: Arc<AtomicU32>,
}

/// Burns CPU for `d` (a busy loop: this is the "model inference" of a speaking session).
pub fn burn(d: Duration) {
    let until = Instant::now() + d;
    let mut x = 0u64;
    while Instant::now() < until {
        x = std::hint::black_box(x.wrapping_mul(6364136223846793005).wrapping_add(1));
    }
}

fn spawn_response(
    id: u64,
    chunks: u32,
    limits: Limits,
    out: mpsc::Sender<Outgoing>,
    done: mpsc::UnboundedSender<u64>,
) -> Response {
    let sent = Arc::new(AtomicU32::new(0));
    let counter = Arc::clone(&sent);
    let task = tokio::spawn(async move {
        for seq in 0..chunks {
            if !limits.work.is_zero() {
                let work = limits.work;
                let _ = tokio::task::spawn_blocking(move || burn(work)).await;
            }
            if out
                .send(Outgoing::Frame(ServerFrame::Chunk { seq }))
                .await
                .is_err()
            {
                return;
            }
            counter.store(seq + 1, Ordering::Release);
            tokio::time::sleep(limits.chunk_gap).await;
        }
        let _ = out
            .send(Outgoing::Frame(ServerFrame::Done { chunks }))
            .await;
        let _ = done.send(id);
    });
    Response { id, task, sent }
}

/// Runs one session to its end and returns the reason it ended with (the first ending
/// wins: a session ended elsewhere, e.g. by `end_all`, reports that reason).
pub async fn converse<S>(
    mut session: Session,
    mut incoming: S,
    out: mpsc::Sender<Outgoing>,
    limits: Limits,
    mut shutdown: watch::Receiver<bool>,
) -> EndReason
where
    S: Stream<Item = Incoming> + Unpin,
{
    let deadline = tokio::time::Instant::now() + limits.max_session;
    let mut idle = tokio::time::Instant::now() + limits.idle_timeout;
    let (done_tx, mut done_rx) = mpsc::unbounded_channel();
    let mut response: Option<Response> = None;
    let mut next_id = 0u64;
    let (reason, close) = loop {
        if *shutdown.borrow() {
            break (EndReason::Shutdown, Some((1001, "server shutting down")));
        }
        tokio::select! {
            msg = incoming.next() => {
                idle = tokio::time::Instant::now() + limits.idle_timeout;
                session.touch();
                match msg {
                    Some(Incoming::Frame(ClientFrame::Speak { chunks })) => {
                        if let Some(r) = response.take() {
                            r.task.abort();
                        }
                        next_id += 1;
                        session.set_phase(Phase::Generating);
                        response = Some(spawn_response(next_id, chunks, limits, out.clone(), done_tx.clone()));
                    }
                    Some(Incoming::Frame(ClientFrame::Interrupt)) => {
                        let sent = response.take().map_or(0, |r| {
                            r.task.abort();
                            r.sent.load(Ordering::Acquire)
                        });
                        session.set_phase(Phase::Listening);
                        let _ = out.send(Outgoing::Frame(ServerFrame::Interrupted { sent })).await;
                    }
                    Some(Incoming::Frame(ClientFrame::Idle)) => {}
                    Some(Incoming::Frame(ClientFrame::Bye)) => break (EndReason::Completed, Some((1000, "bye"))),
                    Some(Incoming::Malformed(message)) => {
                        let _ = out.send(Outgoing::Frame(ServerFrame::Error { message })).await;
                        break (EndReason::Failed, Some((1007, "invalid frame")));
                    }
                    Some(Incoming::TooLarge) => break (EndReason::Failed, Some((1009, "message too big"))),
                    Some(Incoming::Closed) => break (EndReason::Completed, None),
                    Some(Incoming::Lost) | None => break (EndReason::Disconnected, None),
                }
            }
            Some(id) = done_rx.recv() => {
                if response.as_ref().is_some_and(|r| r.id == id) {
                    response = None;
                    session.set_phase(Phase::Listening);
                }
            }
            () = tokio::time::sleep_until(deadline) => break (EndReason::TimedOut, Some((1000, "max session length"))),
            () = tokio::time::sleep_until(idle) => break (EndReason::Reaped, Some((1008, "idle timeout"))),
            changed = shutdown.changed() => {
                if changed.is_err() {
                    // The agent is gone without saying so: end as a shutdown would.
                    break (EndReason::Shutdown, Some((1001, "server shutting down")));
                }
            }
        }
    };
    if let Some(r) = response.take() {
        r.task.abort();
    }
    session.end(reason);
    if let Some((code, reason)) = close {
        let _ = out.send(Outgoing::Close { code, reason }).await;
    }
    session.reason().unwrap_or(reason)
}
