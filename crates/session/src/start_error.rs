//! [`StartError`]: why [`SessionTracker::try_start`](crate::SessionTracker::try_start) could
//! not start a session.

use std::fmt;

/// Why a session could not be started. Nothing was counted: the tracker is as it was.
///
/// ```
/// use livecount_session::{SessionTracker, StartError};
///
/// let tracker = SessionTracker::new();
/// match tracker.try_start() {
///     Ok(session) => drop(session),
///     Err(StartError::Full) => eprintln!("over two billion live sessions"),
///     Err(e) => eprintln!("{e}"),
/// }
/// assert_eq!(
///     StartError::Full.to_string(),
///     "session table full: 2147483616 slots in use"
/// );
/// ```
#[non_exhaustive]
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum StartError {
    /// Every slot of the session table is in use: 2 147 483 616 live sessions (or leaked
    /// guards) at once. Nothing else limits a tracker: not threads, not tracker count.
    Full,
}

impl fmt::Display for StartError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            StartError::Full => f.write_str("session table full: 2147483616 slots in use"),
        }
    }
}

impl std::error::Error for StartError {}
