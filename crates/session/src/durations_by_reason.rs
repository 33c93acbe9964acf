//! [`DurationsByReason`]: a [`DurationHistogram`] per [`EndReason`].

use std::fmt;

use crate::duration_histogram::DurationHistogram;
use crate::reason::{ByReason, EndReason};

/// The durations of ended sessions, one [`DurationHistogram`] per [`EndReason`], as a
/// [`Snapshot`](crate::Snapshot) reports them. A tracker's histogram of a reason counts
/// exactly the sessions its `ended_by_reason` counts for it: they are one reading (see
/// [`Snapshot::durations`](crate::Snapshot::durations)).
///
/// ```
/// use livecount_session::{EndReason, SessionTracker};
///
/// let tracker = SessionTracker::new();
/// tracker.start().end(EndReason::Completed);
/// drop(tracker.start());
/// let s = tracker.snapshot();
/// assert_eq!(s.durations.get(EndReason::Completed).count(), 1);
/// assert_eq!(s.durations.total().count(), 2);
/// assert_eq!(s.durations.counts(), s.ended_by_reason);
/// ```
///
/// With the `serde` feature, `Serialize` / `Deserialize` as a map from reason name to
/// histogram (a reason missing on input has none).
#[derive(Clone, Copy, Default, PartialEq, Eq, Hash)]
#[cfg_attr(
    feature = "serde",
    derive(serde::Serialize, serde::Deserialize),
    serde(
        from = "std::collections::BTreeMap<EndReason, DurationHistogram>",
        into = "std::collections::BTreeMap<EndReason, DurationHistogram>"
    )
)]
pub struct DurationsByReason {
    histograms: [DurationHistogram; EndReason::COUNT],
}

impl DurationsByReason {
    pub(crate) fn from_histograms(histograms: [DurationHistogram; EndReason::COUNT]) -> Self {
        DurationsByReason { histograms }
    }

    /// The durations of the sessions ended for `reason`.
    pub fn get(&self, reason: EndReason) -> DurationHistogram {
        self.histograms[reason.index()]
    }

    /// Every reason with its histogram, in [`EndReason::ALL`] order.
    pub fn iter(&self) -> impl Iterator<Item = (EndReason, DurationHistogram)> + '_ {
        EndReason::ALL.iter().map(|&r| (r, self.get(r)))
    }

    /// The durations of every ended session, whatever its reason.
    pub fn total(&self) -> DurationHistogram {
        let mut total = DurationHistogram::default();
        for h in &self.histograms {
            total.merge(h);
        }
        total
    }

    /// Each reason's count of sessions.
    pub fn counts(&self) -> ByReason {
        ByReason::from_counts(std::array::from_fn(|i| self.histograms[i].count()))
    }
}

#[cfg(feature = "serde")]
impl From<DurationsByReason> for std::collections::BTreeMap<EndReason, DurationHistogram> {
    fn from(durations: DurationsByReason) -> Self {
        durations.iter().collect()
    }
}

#[cfg(feature = "serde")]
impl From<std::collections::BTreeMap<EndReason, DurationHistogram>> for DurationsByReason {
    fn from(map: std::collections::BTreeMap<EndReason, DurationHistogram>) -> Self {
        let mut histograms = [DurationHistogram::default(); EndReason::COUNT];
        for (reason, h) in map {
            histograms[reason.index()] = h;
        }
        DurationsByReason { histograms }
    }
}

impl fmt::Debug for DurationsByReason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // Only the reasons with sessions: eight histograms of zeros would bury the rest.
        f.debug_map()
            .entries(
                self.iter()
                    .filter(|(_, h)| h.count() > 0)
                    .map(|(reason, h)| (reason.as_str(), h)),
            )
            .finish()
    }
}
