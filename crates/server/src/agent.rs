//! [`Agent`]: the state every transport shares — settings, the session tracker (capped at
//! `--max-sessions`), the load board and the shutdown signal — and how each transport's
//! library type is configured from the agent's flags.
//!
//! The transports live beside it: [`http_router`](crate::http_router) (HTTP, WebSocket
//! sessions through `livecount_tower::WebSocketSessions`, `/load`, `/metrics`),
//! [`grpc_agent`](crate::grpc_agent) (gRPC sessions under `livecount_tower::SessionLayer`,
//! and ORCA), and [`RunningAgent`](crate::RunningAgent) starts and stops them. Admission,
//! the limits every session runs under and the endings they cause are the libraries'; what
//! is the agent's own is its protocol ([`conversation`](crate::conversation)).

use std::future::Future;
use std::sync::Arc;

use livecount_report::inband::InbandOrca;
use livecount_report::{LoadBoard, LoadReport, PrequalEstimator};
use livecount_session::SessionTracker;
use livecount_tower::{Drained, InbandOrcaLayer, WebSocketSessions};
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
    /// Cancelled when the drain begins (SIGTERM): WebSocket upgrades are refused from then
    /// on, and the open sockets' handlers see it. The tracker's own drain refuses gRPC calls
    /// too (see [`RunningAgent::shutdown`](crate::RunningAgent::shutdown)).
    pub shutdown: CancellationToken,
    /// Cancelled when the drain is over: the servers stop accepting and finish.
    pub(crate) stop: CancellationToken,
    /// The board's reports as in-band ORCA, encoded once per report for HTTP and gRPC.
    inband: Arc<InbandOrca>,
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
        let board = Arc::new(board);
        Agent {
            tracker: SessionTracker::with_max_sessions(config.max_sessions),
            inband: Arc::new(InbandOrca::new(Arc::clone(&board))),
            board,
            prequal,
            shutdown: CancellationToken::new(),
            stop: CancellationToken::new(),
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

    /// In-band ORCA on every response, in the forms `--inband-orca` chose (a form that is
    /// off attaches nothing).
    pub(crate) fn inband_orca(&self) -> InbandOrcaLayer {
        InbandOrcaLayer::from_source(Arc::clone(&self.inband))
            .http_format(self.config.inband_http)
            .grpc_format(self.config.inband_grpc)
    }

    /// Publishes a report now (the publisher does this every interval).
    pub fn publish(&self) -> Arc<LoadReport> {
        self.board.publish(self.tracker.snapshot())
    }

    /// The drain, from the signal to its deadline (`--drain-secs`), or until `hurry`
    /// resolves: new sessions refused with their retry hint, every signal says draining,
    /// the open sessions finish, the rest end `Shutdown` (WebSocket 1012, gRPC
    /// `UNAVAILABLE`); see [`livecount_tower::drain`].
    pub(crate) async fn drain(&self, hurry: impl Future<Output = ()>) -> Drained {
        self.shutdown.cancel();
        livecount_tower::drain(&self.tracker, &self.board, self.config.drain, hurry).await
    }
}
