//! [`Phase`]: what a live session is doing right now.

use std::fmt;

/// What a live session is doing: the split a capacity model needs, because a real-time agent
/// session costs little while it waits on its peer and a lot while it produces output.
///
/// A session starts [`Listening`](Phase::Listening) and moves with
/// [`Session::set_phase`](crate::Session::set_phase).
///
/// ```
/// use livecount_session::{Phase, SessionTracker};
///
/// let tracker = SessionTracker::new();
/// let mut session = tracker.start();
/// assert_eq!(session.phase(), Some(Phase::Listening));
/// session.set_phase(Phase::Generating); // the model started talking
/// let snapshot = tracker.snapshot();
/// assert_eq!((snapshot.listening, snapshot.generating), (0, 1));
/// ```
///
/// With the `serde` feature, `Serialize` / `Deserialize` as its [`as_str`](Phase::as_str) name.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
#[cfg_attr(
    feature = "serde",
    derive(serde::Serialize, serde::Deserialize),
    serde(rename_all = "lowercase")
)]
pub enum Phase {
    /// Idle: waiting on the user or peer (listening for speech, awaiting the next message).
    #[default]
    Listening,
    /// Busy: speaking, generating, running a tool call — spending CPU or GPU.
    Generating,
}

impl Phase {
    /// Both phases, `Listening` first.
    pub const ALL: [Phase; 2] = [Phase::Listening, Phase::Generating];

    /// The phase's bit in the session state word.
    #[inline]
    pub(crate) const fn bit(self) -> u64 {
        match self {
            Phase::Listening => 0,
            Phase::Generating => 1,
        }
    }

    /// The phase stored in a state word's phase bit.
    #[inline]
    pub(crate) const fn from_bit(bit: u64) -> Phase {
        if bit & 1 == 0 {
            Phase::Listening
        } else {
            Phase::Generating
        }
    }

    /// A short lower-case name, for metric labels.
    ///
    /// ```
    /// use livecount_session::Phase;
    /// assert_eq!(Phase::Generating.as_str(), "generating");
    /// ```
    pub const fn as_str(self) -> &'static str {
        match self {
            Phase::Listening => "listening",
            Phase::Generating => "generating",
        }
    }
}

impl fmt::Display for Phase {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}
