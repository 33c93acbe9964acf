//! [`SessionId`]: a session's slot and generation, the key the registry finds it by.

use std::fmt;

/// A session's id: its slot in the tracker's table and the slot's generation, so that an id
/// kept after its session ended never finds a newer session in the same slot (until the
/// slot's 32-bit generation wraps: four billion reuses of that one slot).
///
/// ```
/// use livecount_session::SessionTracker;
///
/// let tracker = SessionTracker::new();
/// let a = tracker.start();
/// let b = tracker.start();
/// assert_ne!(a.id(), b.id());
/// println!("session {}", a.id()); // Display: the raw id
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct SessionId(pub(crate) u64);

impl SessionId {
    /// The raw id: the generation in the high 32 bits, the slot index in the low 32.
    ///
    /// ```
    /// # let tracker = livecount_session::SessionTracker::new();
    /// let session = tracker.start();
    /// let raw: u64 = session.id().as_u64();
    /// assert_ne!(raw >> 32, 0); // generation 0 names no session
    /// ```
    pub fn as_u64(self) -> u64 {
        self.0
    }
}

impl fmt::Display for SessionId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(&self.0, f)
    }
}
