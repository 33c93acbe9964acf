//! [`Agent`]: the agent as an application on one `livecount_service::Backend` — the handle
//! built from its flags, which owns the sessions, the signals and the drain — and what is
//! the agent's own beside it: its settings, its protocol's pacing and the Prequal clock.
//!
//! The transports live beside it: [`http_router`](crate::http_router) (the protocol over
//! the Backend's WebSocket sessions) and [`grpc_agent`](crate::grpc_agent) (the protocol as
//! a tonic service the Backend's gRPC server counts); [`RunningAgent`](crate::RunningAgent)
//! hands them to `Backend::serve`. Admission, limits, endings, the signals and the drain's
//! order are the library's, the same path a service of your own imports.

use std::sync::Arc;

use livecount_report::{LoadBoard, LoadReport, PrequalEstimator};
use livecount_service::Backend;
use livecount_session::SessionTracker;

use crate::AgentConfig;
use crate::conversation::Pace;
use crate::first_chunk_clock::FirstChunkClock;
use crate::grpc_agent::{CONVERSE_PATH, DROP_GRACE};

/// Shared state of a running agent.
#[derive(Debug)]
pub struct Agent {
    /// Settings.
    pub config: AgentConfig,
    /// The handle every transport mounts: the session tracker (capped at
    /// `--max-sessions`, the admission of WebSocket and gRPC alike), the load board read
    /// from it, the limits and the drain.
    pub backend: Backend,
    /// Every session's time to first chunk at the RIF of its `speak`
    /// ([`FirstChunkClock`]), in every report's Prequal probe.
    pub prequal: Arc<PrequalEstimator>,
}

impl Agent {
    /// The agent's state for `config`: a [`Backend`] under its flags, with a Prequal
    /// estimator on its board.
    pub(crate) fn new(config: AgentConfig) -> Self {
        let prequal = Arc::new(PrequalEstimator::new());
        Agent {
            backend: backend(&config, Arc::clone(&prequal)),
            prequal,
            config,
        }
    }

    /// The session tracker (the Backend's).
    pub fn tracker(&self) -> &SessionTracker {
        self.backend.tracker()
    }

    /// The load board (the Backend's): its reports say `drain` to the balancers once the
    /// drain began.
    pub fn board(&self) -> &Arc<LoadBoard> {
        self.backend.board()
    }

    /// The clock one session's time to first chunk is recorded with.
    pub(crate) fn first_chunk_clock(&self) -> FirstChunkClock {
        FirstChunkClock::new(Arc::clone(&self.prequal), self.tracker().clone())
    }

    /// What a response costs and how it is paced.
    pub(crate) fn pace(&self) -> Pace {
        Pace {
            work: self.config.work,
            chunk_gap: self.config.chunk_gap,
        }
    }

    /// Publishes a report now (the publisher does this every interval).
    pub fn publish(&self) -> Arc<LoadReport> {
        self.backend.publish()
    }
}

/// The Backend `config` describes; every flag that bounds a session, a connection or a
/// signal is one of its settings:
///
/// | flag | setting |
/// |---|---|
/// | `--name`, `--max-sessions`, `--target`, `--safety-scaler`, `--report-secs`, `--cores` | `builder(name)`, `max_sessions`, `capacity`, `cores` |
/// | `--max-session-secs`, `--write-timeout-secs` | `max_session`, `write_timeout` (WebSocket and gRPC) |
/// | `--idle-timeout-secs` | `idle_timeout` (gRPC) and `websocket_idle_timeout` |
/// | `--max-frame-bytes` | `max_message_bytes` (WebSocket; gRPC's is the service's own) |
/// | `--header-read-timeout-secs`, `--max-pending-connections` | `header_read_timeout`, `max_pending_connections` |
/// | `--inband-orca` | `inband_orca` |
/// | `--drain-secs` | `drain_deadline` |
///
/// Only `Converse` calls are sessions. The agent keeps no first-frame timeout (its idle
/// timeout ends a silent session), and leaves a dropped response to the conversation for
/// [`DROP_GRACE`] so that a dead connection counts `Disconnected`, not `Cancelled`.
fn backend(config: &AgentConfig, prequal: Arc<PrequalEstimator>) -> Backend {
    Backend::builder(&config.name)
        .max_sessions(config.max_sessions)
        .capacity(config.capacity)
        .cores(config.cores)
        .prequal(prequal)
        .drain_deadline(config.drain)
        .count_grpc(|path| path == CONVERSE_PATH)
        .first_frame_timeout(None)
        .max_session(config.max_session)
        .write_timeout(config.write_timeout)
        .idle_timeout(config.idle_timeout)
        .websocket_idle_timeout(config.idle_timeout)
        .max_message_bytes(config.max_frame_bytes)
        .leave_drops_to_service(DROP_GRACE)
        .header_read_timeout(config.header_read_timeout)
        .max_pending_connections(config.max_pending_connections)
        .inband_orca(config.inband_http, config.inband_grpc)
        .build()
}
