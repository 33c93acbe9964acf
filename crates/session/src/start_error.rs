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
///     Err(StartError::ThreadLimit) => eprintln!("too many threads hold sessions"),
///     Err(e) => eprintln!("{e}"),
/// }
/// assert_eq!(
///     StartError::ThreadLimit.to_string(),
///     "session registry: more than 4096 threads use it at once"
/// );
/// ```
#[non_exhaustive]
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum StartError {
    /// The calling thread is past the registry's thread limit: `sharded-slab` (the registry)
    /// gives each thread using it a process-wide index below [`MAX_THREADS`], reused only
    /// once a thread exits, so a 4097th thread alive at once gets none.
    ///
    /// Once more threads than that have been alive at once, `sharded-slab` also recycles the
    /// indices past its limit: a few later threads (as many as were past it) may get this
    /// error with few threads alive. Ending a session needs no index below the limit.
    ///
    /// [`MAX_THREADS`]: StartError::MAX_THREADS
    ThreadLimit,
    /// The calling thread's share of the registry has no free slot (billions of live
    /// sessions on one thread).
    Full,
}

impl StartError {
    /// How many threads may hold registry indices at once: `sharded-slab`'s
    /// `DefaultConfig::MAX_THREADS`, shared by every `sharded-slab` user in the process.
    pub const MAX_THREADS: usize =
        <sharded_slab::DefaultConfig as sharded_slab::Config>::MAX_THREADS;
}

impl fmt::Display for StartError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            StartError::ThreadLimit => write!(
                f,
                "session registry: more than {} threads use it at once",
                StartError::MAX_THREADS
            ),
            StartError::Full => f.write_str("session registry: no free slot on this thread"),
        }
    }
}

impl std::error::Error for StartError {}
