//! [`Agent`]: the state every transport shares — settings, the session tracker, the load
//! board and admission — and the one session loop they all run.
//!
//! The transports live beside it: [`websocket`](crate::websocket) (HTTP, WebSocket
//! sessions, `/load`, `/metrics`), [`grpc_agent`](crate::grpc_agent) (gRPC sessions and
//! ORCA), and [`RunningAgent`](crate::RunningAgent) starts and stops them.

use std::sync::Arc;

use livecount_report::{LoadBoard, LoadReport, PrequalEstimator};
use livecount_session::{EndReason, SessionTracker};
use tokio::sync::{OwnedSemaphorePermit, Semaphore, mpsc, watch};

use crate::AgentConfig;
use crate::conversation::{Incoming, Limits, Outgoing, converse};
use crate::first_chunk_clock::FirstChunkClock;

/// Shared state of a running agent.
#[derive(Debug)]
pub struct Agent {
    /// Settings.
    pub config: AgentConfig,
    /// The session tracker every connection registers with.
    pub tracker: SessionTracker,
    /// The published load reports; its draining flag is the agent's one shutdown signal.
    /// Each carries a Prequal probe from [`prequal`](Agent::prequal).
    pub board: Arc<LoadBoard>,
    /// Every session's time to first chunk at the RIF of its `speak`
    /// ([`FirstChunkClock`]), for `/prequal`.
    pub prequal: Arc<PrequalEstimator>,
    admission: Arc<Semaphore>,
}

impl Agent {
    /// The agent's state for `config`: a fresh tracker, a load board capped at
    /// `max_sessions` with a Prequal estimator, and that many admission permits.
    pub(crate) fn new(config: AgentConfig) -> Self {
        let prequal = Arc::new(PrequalEstimator::new());
        let board = LoadBoard::builder(&config.name, config.capacity)
            .max_sessions(config.max_sessions)
            .cores(config.cores)
            .prequal(Arc::clone(&prequal))
            .build();
        let permits = config.max_sessions.min(Semaphore::MAX_PERMITS as u64) as usize;
        Agent {
            admission: Arc::new(Semaphore::new(permits)),
            tracker: SessionTracker::new(),
            board: Arc::new(board),
            prequal,
            config,
        }
    }

    /// The clock one session's time to first chunk is recorded with.
    pub(crate) fn first_chunk_clock(&self) -> FirstChunkClock {
        FirstChunkClock::new(Arc::clone(&self.prequal), self.tracker.clone())
    }

    pub(crate) fn limits(&self) -> Limits {
        Limits {
            max_session: self.config.max_session,
            idle_timeout: self.config.idle_timeout,
            write_timeout: self.config.write_timeout,
            work: self.config.work,
            chunk_gap: self.config.chunk_gap,
            end_when_writer_gone: true,
        }
    }

    /// Publishes a report now (the publisher does this every interval).
    pub fn publish(&self) -> Arc<LoadReport> {
        self.board.publish(self.tracker.snapshot())
    }

    /// Admission: a permit per session, refused at `max_sessions` or while draining.
    pub(crate) fn admit(&self) -> Result<OwnedSemaphorePermit, Refusal> {
        if self.board.is_draining() {
            self.board.note_rejected();
            return Err(Refusal::Draining);
        }
        Arc::clone(&self.admission)
            .try_acquire_owned()
            .map_err(|_| {
                self.board.note_rejected();
                Refusal::AtCapacity {
                    max: self.config.max_sessions,
                }
            })
    }

    /// Becomes `true` when shutdown begins (the board starts draining).
    pub(crate) fn shutdown_signal(&self) -> watch::Receiver<bool> {
        self.board.draining_signal()
    }

    /// Begins shutdown: the board drains (agent-check says `drain`, ORCA streams end,
    /// admission refuses) and every transport's shutdown signal fires.
    pub(crate) fn begin_shutdown(&self) {
        self.board.set_draining(self.tracker.snapshot());
    }

    /// Runs one session over any transport: registers it, converses, ends it once, and
    /// releases `slot` (its admission permit) with the end, before the close frame.
    pub async fn run_session<S>(
        &self,
        slot: OwnedSemaphorePermit,
        incoming: S,
        out: mpsc::Sender<Outgoing>,
    ) -> EndReason
    where
        S: futures_util::Stream<Item = Incoming> + Unpin,
    {
        let session = self.tracker.start();
        converse(
            session,
            Some(slot),
            incoming,
            out,
            self.limits(),
            self.shutdown_signal(),
            Some(self.first_chunk_clock()),
        )
        .await
    }
}

/// Why a session was refused before it started.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Refusal {
    /// Shutdown has begun.
    Draining,
    /// `max` sessions are open already.
    AtCapacity { max: u64 },
}

impl Refusal {
    /// The text of the HTTP 503 (and of the gRPC status).
    pub(crate) fn message(self) -> String {
        match self {
            Refusal::Draining => "draining: the server is shutting down\n".into(),
            Refusal::AtCapacity { max } => format!("at capacity: {max} sessions (max_sessions)\n"),
        }
    }
}
