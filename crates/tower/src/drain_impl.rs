//! [`drain`]: the drain of a deploy or a scale-in, from the first signal to the deadline.

use std::future::Future;
use std::time::Duration;

use livecount::Counter;
use livecount_report::LoadBoard;
use livecount_session::{EndReason, SessionTracker};
use tokio::time::Instant;

/// How often [`drain`] looks whether every session has ended.
const POLL: Duration = Duration::from_millis(10);

/// What a [`drain`] did.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Drained {
    /// Sessions open when the drain began.
    pub open_at_start: u64,
    /// Sessions still open at the deadline (or when hurried), ended
    /// [`Shutdown`](EndReason::Shutdown) by the drain: the calls it cut.
    pub cut: usize,
    /// Whether `hurry` ended the wait before the deadline (a second SIGTERM, say).
    pub hurried: bool,
    /// How long the drain waited for sessions to end on their own.
    pub waited: Duration,
}

/// Drains a server's sessions, so a deploy or a scale-in cuts no call that ends in time:
///
/// 1. the tracker refuses every new session from now on
///    ([`SessionTracker::begin_drain`]: WebSocket upgrades get `503` with `Retry-After`,
///    [`SessionLayer`](crate::SessionLayer) requests `UNAVAILABLE` or `503`), counted
///    refused, never as sessions;
/// 2. the board publishes a draining report at once ([`LoadBoard::publish`] of the draining
///    tracker's snapshot): HAProxy's
///    agent-check reads `drain`, ORCA streams end, `/load` and `/metrics` say `draining`,
///    `/ready` answers `503` and [`health_service`](livecount_report::health_service)
///    `NOT_SERVING`;
/// 3. the open sessions go on, until every one has ended on its own, `deadline` has passed,
///    or `hurry` resolves (a second signal: the operator wants out now);
/// 4. the sessions still open are ended [`Shutdown`](EndReason::Shutdown) (WebSockets close
///    1012 "service restart", gRPC streams end `UNAVAILABLE`: reconnect, elsewhere), and a
///    last report is published.
///
/// Each session ends exactly once, whichever of its own end and the cut comes first. Give
/// the WebSocket handlers their "wrap up" signal by cancelling the
/// [`WebSocketSessions`](crate::WebSocketSessions) token *before* calling this; stop the
/// servers (their graceful shutdown) only *after* it returns, so that `/ready`, `/load`,
/// agent-check and the refusals are served throughout the drain.
///
/// ```
/// # #[tokio::main(flavor = "current_thread", start_paused = true)]
/// # async fn main() {
/// use std::sync::Arc;
/// use std::time::Duration;
/// use livecount_capacity::CapacityConfig;
/// use livecount_report::LoadBoard;
/// use livecount_session::{EndReason, SessionTracker, StartError};
/// use livecount_tower::drain;
///
/// let tracker = SessionTracker::new();
/// let board = Arc::new(LoadBoard::new("b1", CapacityConfig::builder().build().unwrap()));
/// let (short, long) = (tracker.start(), tracker.start());
/// tokio::spawn(async move {
///     tokio::time::sleep(Duration::from_secs(3)).await;
///     short.end(EndReason::Completed); // ends on its own, before the deadline
/// });
/// let drained = drain(&tracker, &board, Duration::from_secs(10), std::future::pending()).await;
/// assert_eq!((drained.open_at_start, drained.cut, drained.hurried), (2, 1, false));
/// assert_eq!(long.reason(), Some(EndReason::Shutdown)); // cut at the deadline
/// assert_eq!(tracker.try_start().unwrap_err(), StartError::Draining);
/// let s = tracker.snapshot();
/// assert_eq!((s.active, s.started, s.ended), (0, 2, 2));
/// assert!(board.latest().draining);
/// # }
/// ```
pub async fn drain<C, M>(
    tracker: &SessionTracker<C, M>,
    board: &LoadBoard,
    deadline: Duration,
    hurry: impl Future<Output = ()>,
) -> Drained
where
    C: Counter,
    M: Send + Sync + 'static,
{
    let began = Instant::now();
    tracker.begin_drain();
    let open_at_start = board.publish(tracker.snapshot()).active; // says draining at once
    let until = began + deadline.min(Duration::from_secs(365 * 24 * 3600));
    tokio::pin!(hurry);
    let hurried = loop {
        if open(tracker) == 0 {
            break false;
        }
        tokio::select! {
            () = tokio::time::sleep(POLL) => {}
            () = tokio::time::sleep_until(until) => break false,
            () = &mut hurry => break true,
        }
    };
    let waited = began.elapsed();
    let cut = tracker.end_all(EndReason::Shutdown);
    board.publish(tracker.snapshot());
    Drained {
        open_at_start,
        cut,
        hurried,
        waited,
    }
}

/// Sessions still open: exact on a capped tracker (its admissions), else the counter's read.
fn open<C: Counter, M: Send + Sync + 'static>(tracker: &SessionTracker<C, M>) -> u64 {
    tracker.admitted().unwrap_or_else(|| tracker.active())
}
