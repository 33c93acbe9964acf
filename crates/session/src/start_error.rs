//! [`StartError`]: why [`SessionTracker::try_start`](crate::SessionTracker::try_start) could
//! not start a session.

use std::fmt;

/// Why a session could not be started. No session was counted (a refusal at the cap or
/// while draining is counted as one).
///
/// ```
/// use livecount_session::{SessionTracker, StartError};
///
/// let tracker = SessionTracker::new();
/// match tracker.try_start() {
///     Ok(session) => drop(session),
///     Err(StartError::Full) => eprintln!("over two billion live sessions"),
///     Err(StartError::AtCapacity { max }) => eprintln!("{max} sessions: refuse"),
///     Err(e) => eprintln!("{e}"),
/// }
/// assert_eq!(
///     StartError::Full.to_string(),
///     "session table full: 2147483616 slots in use"
/// );
/// assert_eq!(StartError::AtCapacity { max: 50 }.to_string(), "at capacity: 50 live sessions");
/// assert_eq!(StartError::Draining.to_string(), "draining: the server is shutting down");
/// ```
#[non_exhaustive]
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum StartError {
    /// Every slot of the session table is in use: 2 147 483 616 live sessions (or leaked
    /// guards) at once. Nothing else limits a tracker: not threads, not tracker count.
    Full,
    /// The tracker is capped ([`SessionTracker::with_max_sessions`](crate::SessionTracker::with_max_sessions))
    /// and `max` sessions are live: the service should refuse the client (HTTP 503, gRPC
    /// `RESOURCE_EXHAUSTED`). The refusal is counted in
    /// [`Snapshot::refused`](crate::Snapshot::refused).
    AtCapacity {
        /// The tracker's cap.
        max: u64,
    },
    /// The tracker drains ([`SessionTracker::begin_drain`](crate::SessionTracker::begin_drain)):
    /// the service should send the client elsewhere (HTTP 503 with `Retry-After`, gRPC
    /// `UNAVAILABLE`). Counted in [`Snapshot::refused`](crate::Snapshot::refused).
    Draining,
}

impl fmt::Display for StartError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            StartError::Full => f.write_str("session table full: 2147483616 slots in use"),
            StartError::AtCapacity { max } => write!(f, "at capacity: {max} live sessions"),
            StartError::Draining => f.write_str("draining: the server is shutting down"),
        }
    }
}

impl std::error::Error for StartError {}
