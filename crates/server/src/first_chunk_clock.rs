//! [`FirstChunkClock`]: each session's time to first stream, recorded with the RIF at its
//! start into the agent's [`PrequalEstimator`] for the Prequal probe (`/prequal`).
//!
//! # What is measured
//!
//! The part of a session's start the agent can measure honestly: **from the moment the
//! conversation handles the session's first `speak` to the moment that response's first
//! chunk is handed to the transport** (queued for the socket or the gRPC stream). That
//! spans scheduling the response task, the chunk's work (`--work-ms`, on the blocking
//! pool) and any wait for room in the output queue — everything that grows with the
//! agent's load. It leaves out the network and the client's silence before it speaks,
//! which the agent cannot tell from load (a session that opens and waits a minute to
//! speak is not a minute of latency).
//!
//! The RIF recorded with it is the tracker's active session count when the `speak` was
//! handled, this session included (as Prequal counts a query in flight on arrival).
//!
//! # One sample per session, at most
//!
//! Only the first response is timed. If it never reaches its first chunk — interrupted,
//! replaced by another `speak`, or the session ended first — its latency is unknown (at
//! least the time it ran, but how much more nobody saw) and the session records nothing;
//! a session that never speaks records nothing either.

use std::sync::Arc;

use livecount_report::PrequalEstimator;
use livecount_session::SessionTracker;
use tokio::time::Instant;

/// Times one session's first response to its first chunk and records it, with the RIF
/// at its `speak`, into a [`PrequalEstimator`]. Cheap to clone (two `Arc`s); each
/// conversation takes one and uses it once.
///
/// ```
/// use std::sync::Arc;
/// use livecount_report::PrequalEstimator;
/// use livecount_server::first_chunk_clock::FirstChunkClock;
/// use livecount_session::SessionTracker;
///
/// let estimator = Arc::new(PrequalEstimator::new());
/// let tracker = SessionTracker::new();
/// let clock = FirstChunkClock::new(Arc::clone(&estimator), tracker.clone());
/// # drop(clock);
/// assert_eq!(estimator.probe(0).samples, 0);
/// ```
#[derive(Debug, Clone)]
pub struct FirstChunkClock {
    estimator: Arc<PrequalEstimator>,
    tracker: SessionTracker,
}

impl FirstChunkClock {
    /// A clock recording into `estimator`, reading the RIF from `tracker`.
    pub fn new(estimator: Arc<PrequalEstimator>, tracker: SessionTracker) -> Self {
        Self { estimator, tracker }
    }

    /// Starts timing a response now: the RIF is read now.
    pub(crate) fn start(self) -> FirstChunkTimer {
        FirstChunkTimer {
            rif: self.tracker.active(),
            started: Instant::now(),
            estimator: self.estimator,
        }
    }
}

/// A running [`FirstChunkClock`]: [`stop`](FirstChunkTimer::stop) records, dropping it
/// records nothing.
#[derive(Debug)]
pub(crate) struct FirstChunkTimer {
    rif: u64,
    started: Instant,
    estimator: Arc<PrequalEstimator>,
}

impl FirstChunkTimer {
    /// The first chunk is out: records the time since [`FirstChunkClock::start`].
    pub(crate) fn stop(self) {
        self.estimator.record(self.rif, self.started.elapsed());
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    fn clock() -> (Arc<PrequalEstimator>, SessionTracker, FirstChunkClock) {
        let estimator = Arc::new(PrequalEstimator::new());
        let tracker = SessionTracker::new();
        let clock = FirstChunkClock::new(Arc::clone(&estimator), tracker.clone());
        (estimator, tracker, clock)
    }

    #[tokio::test(start_paused = true)]
    async fn stop_records_the_time_since_start_at_the_rif_read_at_start() {
        let (estimator, tracker, clock) = clock();
        let open: Vec<_> = (0..3).map(|_| tracker.start()).collect();
        let timer = clock.start();
        let _late = tracker.start(); // after the start: not this sample's RIF
        tokio::time::sleep(Duration::from_millis(250)).await;
        timer.stop();
        let probe = estimator.probe(3);
        assert_eq!((probe.samples, probe.samples_used), (1, 1));
        assert_eq!(probe.latency_ms, Some(250.0));
        assert_eq!(estimator.probe(5).latency_ms, None, "recorded at 3, not 4");
        drop(open);
    }

    #[tokio::test(start_paused = true)]
    async fn a_timer_dropped_unstopped_records_nothing() {
        let (estimator, _tracker, clock) = clock();
        drop(clock.clone().start());
        assert_eq!(estimator.probe(0).samples, 0);
        clock.start().stop();
        assert_eq!(estimator.probe(0).latency_ms, Some(0.0));
    }
}
