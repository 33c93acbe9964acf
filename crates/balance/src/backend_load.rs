//! [`BackendLoad`]: the part of a backend's load report a client routes on, and [`LoadSignal`]:
//! which figure of it a balancer compares.

use livecount_report::{LoadReport, ServedReport};

/// The fields of a backend's load report that a client routes on: an in-memory value, made
/// from whatever carried the report. The wire formats are defined once, in
/// `livecount-report`: the `/load` JSON is a [`ServedReport`] (decoded by
/// [`HttpLoadSource`](crate::HttpLoadSource), converted with `From`), ORCA's named metrics
/// are read by `OrcaLoadSource`.
///
/// ```
/// use livecount_report::{LoadReport, ServedReport};
/// use livecount_balance::BackendLoad;
///
/// let mut report = LoadReport::empty("b1");
/// (report.sequence, report.active, report.effective_capacity, report.headroom) = (7, 30, 120.0, 90.0);
/// let load = BackendLoad::from(&ServedReport::with_age(report, 40));
/// assert_eq!((load.sequence, load.active, load.age_ms), (7, 30, 40));
/// assert_eq!(load, BackendLoad::new(7, 30, 120.0).with_age_ms(40));
/// ```
#[non_exhaustive]
#[derive(Clone, Debug, PartialEq)]
pub struct BackendLoad {
    /// Increases with every report the backend takes; a repeated one is not news.
    pub sequence: u64,
    /// Open sessions.
    pub active: u64,
    /// Sessions the backend can hold by its next report.
    pub effective_capacity: f64,
    /// `effective_capacity − active`, as the backend computed it.
    pub headroom: f64,
    /// How old the report was when it was served, in milliseconds (0 for a source that
    /// does not say).
    pub age_ms: u64,
    /// The backend is shutting down and wants no new work.
    pub draining: bool,
    /// The most sessions it admits, when it has a hard limit and its report says so.
    pub max_sessions: Option<u64>,
}

impl BackendLoad {
    /// A fresh report (age 0, not draining) with `headroom = effective_capacity − active`:
    /// for sources other than `/load` (an ORCA stream, a test).
    ///
    /// ```
    /// let load = livecount_balance::BackendLoad::new(3, 2, 8.0);
    /// assert_eq!((load.headroom, load.age_ms, load.draining), (6.0, 0, false));
    /// ```
    pub fn new(sequence: u64, active: u64, effective_capacity: f64) -> Self {
        BackendLoad {
            sequence,
            active,
            effective_capacity,
            headroom: effective_capacity - active as f64,
            age_ms: 0,
            draining: false,
            max_sessions: None,
        }
    }

    /// The same report, from a backend that admits at most `max` sessions.
    pub fn with_max_sessions(mut self, max: u64) -> Self {
        self.max_sessions = Some(max);
        self
    }

    /// The same report, `age_ms` old when served.
    pub fn with_age_ms(mut self, age_ms: u64) -> Self {
        self.age_ms = age_ms;
        self
    }

    /// The same report, from a draining backend.
    pub fn draining(mut self) -> Self {
        self.draining = true;
        self
    }
}

/// The routing fields of a report read in this process (a relay, a test): age 0.
impl From<&LoadReport> for BackendLoad {
    fn from(report: &LoadReport) -> Self {
        BackendLoad {
            sequence: report.sequence,
            active: report.active,
            effective_capacity: report.effective_capacity,
            headroom: report.headroom,
            age_ms: 0,
            draining: report.draining,
            max_sessions: report.max_sessions,
        }
    }
}

/// The routing fields of a `/load` body, with its `age_ms`.
impl From<&ServedReport> for BackendLoad {
    fn from(served: &ServedReport) -> Self {
        BackendLoad::from(&served.report).with_age_ms(served.age_ms)
    }
}

/// Which figure of a backend's report a balancer routes on: the signal a
/// [`LoadFeed`](crate::LoadFeed) reads out of each [`BackendLoad`] (lower is less loaded). A
/// draining backend reads as infinitely loaded under every signal.
///
/// ```
/// use livecount_balance::{BackendLoad, LoadSignal};
///
/// let report = BackendLoad::new(1, 30, 120.0);
/// assert_eq!(LoadSignal::Active.of(&report), 30.0);
/// assert_eq!(LoadSignal::Occupancy.of(&report), 0.25); // 1 − 90 / 120
/// assert_eq!(LoadSignal::ActiveWithRoom.of(&report), 30.0);
/// assert_eq!(LoadSignal::Occupancy.of(&report.draining()), f64::INFINITY);
/// assert_eq!(LoadSignal::ActiveWithRoom.of(&BackendLoad::new(2, 30, 30.5)), f64::INFINITY);
/// ```
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum LoadSignal {
    /// Open sessions: right when every backend has the same capacity.
    Active,
    /// `1 − headroom ÷ effective_capacity`, the share of capacity in use (above 1 when over
    /// capacity; infinite with no capacity): right across backends of different sizes.
    #[default]
    Occupancy,
    /// Open sessions while the backend has room for at least one more (headroom ≥ 1),
    /// infinite otherwise: for power-of-two-choices over backends of one size whose
    /// headroom is an estimate per report interval (livecount's is). p2c on
    /// [`Occupancy`](LoadSignal::Occupancy) settles where the occupancies are equal, so two
    /// equal backends split by their headroom *estimates* (which two equal agents can put far
    /// apart), and an idle hot backend reads 0, the best, whenever it has any headroom at
    /// all; comparing open sessions among backends with room does neither.
    ActiveWithRoom,
}

impl LoadSignal {
    /// This signal's value in `report`: finite and non-negative, or `f64::INFINITY`
    /// (draining, no capacity, or a value that is not a number).
    pub fn of(self, report: &BackendLoad) -> f64 {
        if report.draining {
            return f64::INFINITY;
        }
        let value = match self {
            LoadSignal::Active => report.active as f64,
            LoadSignal::Occupancy if report.effective_capacity > 0.0 => {
                1.0 - report.headroom / report.effective_capacity
            }
            LoadSignal::Occupancy => f64::INFINITY,
            LoadSignal::ActiveWithRoom if report.headroom >= 1.0 => report.active as f64,
            LoadSignal::ActiveWithRoom => f64::INFINITY,
        };
        // Checked before `max`, which would turn a NaN into 0: free capacity.
        if value.is_finite() {
            value.max(0.0)
        } else {
            f64::INFINITY
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn occupancy_is_never_nan_nor_negative() {
        let zero = BackendLoad::new(1, 0, 0.0);
        assert_eq!(LoadSignal::Occupancy.of(&zero), f64::INFINITY);
        let nan = BackendLoad {
            headroom: f64::NAN,
            ..BackendLoad::new(1, 0, 10.0)
        };
        assert_eq!(LoadSignal::Occupancy.of(&nan), f64::INFINITY);
        let odd = BackendLoad {
            headroom: 50.0,
            ..BackendLoad::new(1, 0, 10.0)
        };
        assert_eq!(LoadSignal::Occupancy.of(&odd), 0.0);
        let over = BackendLoad::new(1, 15, 10.0);
        assert_eq!(LoadSignal::Occupancy.of(&over), 1.5);
        // A negative capacity (a garbled report) is no capacity, not a finite occupancy.
        let negative = BackendLoad {
            headroom: 1.0,
            ..BackendLoad::new(1, 0, -5.0)
        };
        assert_eq!(LoadSignal::Occupancy.of(&negative), f64::INFINITY);
    }

    /// Every routing field comes from its own field of the report (distinct values, so a
    /// field read from the wrong place shows), the headroom as the backend computed it.
    #[test]
    fn a_served_report_converts_field_by_field() {
        let mut report = LoadReport::empty("b1");
        (report.sequence, report.active) = (9, 4);
        (report.effective_capacity, report.headroom) = (12.0, 7.5);
        report.draining = true;
        report.max_sessions = Some(20);
        let load = BackendLoad::from(&ServedReport::with_age(report.clone(), 40));
        let expected = BackendLoad {
            headroom: 7.5,
            ..BackendLoad::new(9, 4, 12.0)
                .with_age_ms(40)
                .draining()
                .with_max_sessions(20)
        };
        assert_eq!(load, expected);
        assert_eq!(BackendLoad::from(&report), expected.with_age_ms(0));
    }

    #[test]
    fn active_with_room_needs_a_whole_session_of_headroom() {
        let room = |active, headroom: f64| BackendLoad {
            headroom,
            ..BackendLoad::new(1, active, active as f64 + headroom)
        };
        assert_eq!(LoadSignal::ActiveWithRoom.of(&room(7, 1.0)), 7.0);
        assert_eq!(LoadSignal::ActiveWithRoom.of(&room(0, 250.0)), 0.0);
        assert_eq!(LoadSignal::ActiveWithRoom.of(&room(0, 0.99)), f64::INFINITY);
        assert_eq!(
            LoadSignal::ActiveWithRoom.of(&room(3, f64::NAN)),
            f64::INFINITY
        );
        assert_eq!(
            LoadSignal::ActiveWithRoom.of(&room(3, 9.0).draining()),
            f64::INFINITY
        );
    }
}
