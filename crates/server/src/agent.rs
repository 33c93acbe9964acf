//! [`Agent`]: the state every transport shares — settings, the session tracker (capped at
//! `--max-sessions`), the load board and the shutdown signal — and how each transport's
//! library type is configured from the agent's flags.
//!
//! The transports live beside it: [`websocket`](crate::websocket) (HTTP, WebSocket
//! sessions through `livecount_tower::WebSocketSessions`, `/load`, `/metrics`),
//! [`grpc_agent`](crate::grpc_agent) (gRPC sessions under `livecount_tower::SessionLayer`,
//! and ORCA), and [`RunningAgent`](crate::RunningAgent) starts and stops them. Admission,
//! the limits every session runs under and the endings they cause are the libraries'; what
//! is the agent's own is its protocol ([`conversation`](crate::conversation)).

use std::sync::Arc;

use livecount_report::{LoadBoard, LoadReport, PrequalEstimator};
use livecount_session::{EndReason, SessionTracker};
use livecount_tower::WebSocketSessions;
use tokio::sync::watch;
use tokio_util::sync::CancellationToken;

use crate::AgentConfig;
use crate::conversation::Pace;
use crate::first_chunk_clock::FirstChunkClock;

/// Shared state of a running agent.
#[derive(Debug)]
pub struct Agent {
    /// Settings.
    pub config: AgentConfig,
    /// The session tracker every connection registers with, capped at `max_sessions`: its
    /// exact cap is the agent's admission, for WebSocket and gRPC alike.
    pub tracker: SessionTracker,
    /// The published load reports; its draining flag says `drain` to the balancers.
    /// Each carries a Prequal probe from [`prequal`](Agent::prequal).
    pub board: Arc<LoadBoard>,
    /// Every session's time to first chunk at the RIF of its `speak`
    /// ([`FirstChunkClock`]), for `/prequal`.
    pub prequal: Arc<PrequalEstimator>,
    /// Cancelled when shutdown begins: WebSocket upgrades are refused from then on and
    /// gRPC calls are not counted (both answered "draining").
    pub shutdown: CancellationToken,
}

impl Agent {
    /// The agent's state for `config`: a tracker capped at `max_sessions`, a load board
    /// capped the same with a Prequal estimator.
    pub(crate) fn new(config: AgentConfig) -> Self {
        let prequal = Arc::new(PrequalEstimator::new());
        let board = LoadBoard::builder(&config.name, config.capacity)
            .max_sessions(config.max_sessions)
            .cores(config.cores)
            .prequal(Arc::clone(&prequal))
            .build();
        Agent {
            tracker: SessionTracker::with_max_sessions(config.max_sessions),
            board: Arc::new(board),
            prequal,
            shutdown: CancellationToken::new(),
            config,
        }
    }

    /// The clock one session's time to first chunk is recorded with.
    pub(crate) fn first_chunk_clock(&self) -> FirstChunkClock {
        FirstChunkClock::new(Arc::clone(&self.prequal), self.tracker.clone())
    }

    /// What a response costs and how it is paced.
    pub(crate) fn pace(&self) -> Pace {
        Pace {
            work: self.config.work,
            chunk_gap: self.config.chunk_gap,
        }
    }

    /// WebSocket sessions on the agent's tracker, under its flags: `--max-session-secs`,
    /// `--idle-timeout-secs`, `--write-timeout-secs`, `--max-frame-bytes`; shut down with
    /// the agent.
    pub(crate) fn websocket_sessions(&self) -> WebSocketSessions {
        WebSocketSessions::new(self.tracker.clone(), self.shutdown.clone())
            .max_session(self.config.max_session)
            .idle_timeout(self.config.idle_timeout)
            .write_timeout(self.config.write_timeout)
            .max_message_bytes(self.config.max_frame_bytes)
    }

    /// Publishes a report now (the publisher does this every interval).
    pub fn publish(&self) -> Arc<LoadReport> {
        self.board.publish(self.tracker.snapshot())
    }

    /// Becomes `true` when shutdown begins (the board starts draining).
    pub(crate) fn shutdown_signal(&self) -> watch::Receiver<bool> {
        self.board.draining_signal()
    }

    /// Begins shutdown: the board drains (agent-check says `drain`, ORCA streams end), new
    /// sessions are refused, and every open one ends `Shutdown` (WebSocket close 1001, gRPC
    /// `UNAVAILABLE`).
    pub(crate) fn begin_shutdown(&self) {
        self.shutdown.cancel();
        self.board.set_draining(self.tracker.snapshot());
        self.tracker.end_all(EndReason::Shutdown);
    }
}
