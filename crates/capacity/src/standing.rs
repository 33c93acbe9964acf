//! [`Standing`]: a backend as a balancer running the hybrid model sees it between two of
//! its reports, and the power-of-two-choices rule on it ([`Standing::prefer`]).

/// A backend's capacity by the hybrid model and the sessions a balancer believes it has:
/// what a session-aware balancer compares when it places a new session.
///
/// The capacity is the reported sessions plus the model's headroom, capped at the backend's
/// hard limit; the sessions are the reported ones plus those this balancer has sent there
/// since that report (a burst between two reports must not all land on one backend). The
/// simulator's `hybrid_p2c` policy evaluates the headroom itself, from the raw reports; an
/// endpoint picker takes the headroom the backend computed with the same model. Both choose
/// with [`prefer`](Standing::prefer).
///
/// ```
/// use livecount_capacity::Standing;
///
/// // 30 reported, 10 of headroom, a hard limit of 100, 4 sent since the report.
/// let b = Standing::new(30, 10.0, 100.0, 4);
/// assert_eq!((b.capacity, b.estimated_active), (40.0, 34));
/// assert_eq!(b.fill(), 0.85);
/// assert_eq!(b.room(), 6.0);
/// ```
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Standing {
    /// Sessions it can hold by its next report: reported + headroom, at most its hard
    /// limit; finite and ≥ 0.
    pub capacity: f64,
    /// Sessions it has as far as the balancer knows: reported + sent since the report.
    pub estimated_active: u64,
}

impl Standing {
    /// The standing of a backend that reported `reported_active` sessions and `headroom`
    /// (the model's weight), with a hard limit of `max_sessions` (`f64::INFINITY` for none),
    /// to which this balancer has sent `sent_since_report` sessions since. A headroom that
    /// is negative or not a number counts as 0; a limit that is not a number, as none.
    pub fn new(
        reported_active: u64,
        headroom: f64,
        max_sessions: f64,
        sent_since_report: u64,
    ) -> Self {
        let headroom = if headroom.is_finite() {
            headroom.max(0.0)
        } else {
            0.0
        };
        let capacity = (reported_active as f64 + headroom).min(max_sessions);
        Standing {
            // `min` with a NaN limit keeps the left side; a negative limit means none left.
            capacity: capacity.max(0.0),
            estimated_active: reported_active.saturating_add(sent_since_report),
        }
    }

    /// The share of its capacity in use: estimated sessions ÷ capacity, lower is better;
    /// no capacity at all reads as full (`f64::INFINITY`).
    ///
    /// ```
    /// use livecount_capacity::Standing;
    /// assert_eq!(Standing::new(0, 0.0, 100.0, 0).fill(), f64::INFINITY);
    /// assert_eq!(Standing::new(5, 5.0, 100.0, 0).fill(), 0.5);
    /// ```
    pub fn fill(&self) -> f64 {
        if self.capacity > 0.0 {
            self.estimated_active as f64 / self.capacity
        } else {
            f64::INFINITY
        }
    }

    /// Capacity minus the estimated sessions: the sessions that may still be sent there by
    /// the model (negative when it is over).
    pub fn room(&self) -> f64 {
        self.capacity - self.estimated_active as f64
    }

    /// Power of two choices: whether `b` is the better of `a` and `b` for a new session.
    /// The smaller share of capacity in use wins; on a tie (both full, say) the one with
    /// fewer estimated sessions; on a full tie, `a` (the first drawn).
    ///
    /// ```
    /// use livecount_capacity::Standing;
    ///
    /// let big = Standing::new(40, 60.0, 200.0, 0); // 40 of 100: 0.4
    /// let small = Standing::new(10, 10.0, 50.0, 0); // 10 of 20: 0.5
    /// assert!(Standing::prefer(&small, &big)); // the bigger one, though it has more
    /// assert!(!Standing::prefer(&big, &small));
    /// // Both without capacity: the one with fewer sessions.
    /// let (full_a, full_b) = (Standing::new(9, 0.0, 9.0, 0), Standing::new(3, 0.0, 3.0, 0));
    /// assert!(Standing::prefer(&full_a, &full_b));
    /// ```
    pub fn prefer(a: &Standing, b: &Standing) -> bool {
        let (fa, fb) = (a.fill(), b.fill());
        if fa == fb {
            b.estimated_active < a.estimated_active
        } else {
            fb < fa
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn capacity_is_reported_plus_headroom_capped_at_the_limit() {
        assert_eq!(Standing::new(30, 10.0, 35.0, 0).capacity, 35.0);
        assert_eq!(Standing::new(30, 10.0, f64::INFINITY, 0).capacity, 40.0);
        assert_eq!(Standing::new(30, -5.0, 100.0, 0).capacity, 30.0);
        assert_eq!(Standing::new(30, f64::NAN, 100.0, 0).capacity, 30.0);
        assert_eq!(Standing::new(30, f64::INFINITY, 100.0, 0).capacity, 30.0);
        assert_eq!(Standing::new(30, 10.0, f64::NAN, 0).capacity, 40.0);
        assert_eq!(Standing::new(30, 10.0, -1.0, 0).capacity, 0.0);
        assert_eq!(
            Standing::new(u64::MAX, 0.0, 1.0, 5).estimated_active,
            u64::MAX
        );
    }

    #[test]
    fn sent_since_the_report_counts_against_the_room() {
        let before = Standing::new(10, 10.0, 100.0, 0);
        let after = Standing::new(10, 10.0, 100.0, 6);
        assert_eq!((before.room(), after.room()), (10.0, 4.0));
        assert!(Standing::prefer(&after, &before));
        assert!(!Standing::prefer(&before, &after));
    }

    #[test]
    fn a_full_tie_keeps_the_first() {
        let a = Standing::new(3, 3.0, 100.0, 0);
        assert!(!Standing::prefer(&a, &a));
    }
}
