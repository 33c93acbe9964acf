//! What a session will do, drawn from its own random stream when it arrives.

use crate::scenario::DurationDist;
use crate::{Scenario, SimRng};

/// How a session ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum EndReason {
    /// Ran its course and closed cleanly.
    Completed,
    /// Hit the server's maximum session length.
    TimedOut,
    /// The client cancelled it (a clean close).
    Cancelled,
    /// The connection was cut: no close frame.
    Disconnected,
    /// Its backend died.
    BackendLost,
    /// Its backend ended it to restart: at once (`cut`), or at the drain deadline.
    Shutdown,
}

impl EndReason {
    pub(crate) const ALL: [EndReason; 6] = [
        Self::Completed,
        Self::TimedOut,
        Self::Cancelled,
        Self::Disconnected,
        Self::BackendLost,
        Self::Shutdown,
    ];

    pub(crate) fn name(self) -> &'static str {
        match self {
            Self::Completed => "completed",
            Self::TimedOut => "timed_out",
            Self::Cancelled => "cancelled",
            Self::Disconnected => "disconnected",
            Self::BackendLost => "backend_lost",
            Self::Shutdown => "shutdown",
        }
    }

    /// Whether a naive counter (decrement on a clean close only) sees this end. A
    /// shutdown is the server's own close (and its process, counter and all, exits next).
    pub(crate) fn is_clean(self) -> bool {
        matches!(
            self,
            Self::Completed | Self::TimedOut | Self::Cancelled | Self::Shutdown
        )
    }
}

/// A session's fate, fixed at arrival so every policy replays the same workload.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) struct SessionPlan {
    /// A short, request-like session (always costs the speaking cost).
    pub(crate) short: bool,
    /// Seconds from start to end.
    pub(crate) length: f64,
    /// How it ends (unless its backend dies first).
    pub(crate) reason: EndReason,
    /// Its costs' multiplier (1 unless `sessions.cost_sigma` spreads them).
    pub(crate) weight: f64,
}

impl SessionPlan {
    pub(crate) fn draw(scenario: &Scenario, rng: &mut SimRng) -> Self {
        let s = &scenario.sessions;
        // Drawn first, and only when asked for, so scenarios without it replay as before.
        let weight = if s.cost_sigma > 0.0 {
            rng.lognormal(1.0, s.cost_sigma)
        } else {
            1.0
        };
        if rng.chance(s.short_share) {
            return Self {
                short: true,
                length: s.short_s,
                reason: EndReason::Completed,
                weight,
            };
        }
        let natural = match s.duration {
            DurationDist::Fixed => s.mean_s,
            DurationDist::Exponential => rng.exponential(s.mean_s),
            DurationDist::Lognormal => rng.lognormal(s.mean_s, s.sigma),
            DurationDist::Pareto => rng.pareto(s.mean_s, s.alpha),
        };
        let (mut length, mut reason) = if natural > s.max_s {
            (s.max_s, EndReason::TimedOut)
        } else {
            (natural, EndReason::Completed)
        };
        let fate = rng.uniform();
        let cut = rng.uniform();
        if fate < s.cancel_share {
            (length, reason) = (length * cut, EndReason::Cancelled);
        } else if fate < s.cancel_share + s.disconnect_share {
            (length, reason) = (length * cut, EndReason::Disconnected);
        }
        Self {
            short: false,
            length: length.max(1e-6),
            reason,
            weight,
        }
    }
}
