//! The arrival process: Poisson at a rate that may follow a pattern over time.

use crate::scenario::{Arrivals, Pattern};
use crate::{Scenario, SimRng};

/// Generates arrival instants in `[0, horizon)`, by thinning a Poisson process at the
/// pattern's peak rate (Lewis & Shedler), so any rate shape is exact.
#[derive(Debug)]
pub(crate) struct ArrivalProcess {
    arrivals: Arrivals,
    rate: f64,
    peak: f64,
    horizon: f64,
    rng: SimRng,
}

impl ArrivalProcess {
    pub(crate) fn new(scenario: &Scenario) -> Self {
        let rate = scenario.base_rate();
        let a = scenario.arrivals.clone();
        let peak = match a.pattern {
            Pattern::FlashCrowd => rate * a.factor.unwrap_or(1.0),
            _ => rate,
        };
        Self {
            arrivals: a,
            rate,
            peak,
            horizon: scenario.duration_s,
            rng: SimRng::derive(scenario.seed, 0xA11),
        }
    }

    /// Rate at time `t`.
    pub(crate) fn rate_at(&self, t: f64) -> f64 {
        let a = &self.arrivals;
        match a.pattern {
            Pattern::Poisson | Pattern::Bursts => self.rate,
            Pattern::Diurnal => {
                let min = a.min_factor.unwrap_or(0.2);
                let period = a.period_s.unwrap_or(1.0);
                let phase = (1.0 - (std::f64::consts::TAU * t / period).cos()) / 2.0;
                self.rate * (min + (1.0 - min) * phase)
            }
            Pattern::FlashCrowd => {
                let (at, len) = (a.at_s.unwrap_or(0.0), a.for_s.unwrap_or(0.0));
                if (at..at + len).contains(&t) {
                    self.peak
                } else {
                    self.rate
                }
            }
        }
    }

    /// The first arrival after `now`, if before the horizon.
    pub(crate) fn next_after(&mut self, now: f64) -> Option<f64> {
        if self.peak <= 0.0 {
            return None;
        }
        let mut t = now;
        loop {
            t += self.rng.exponential(1.0 / self.peak);
            if t >= self.horizon {
                return None;
            }
            if self.rng.uniform() * self.peak < self.rate_at(t) {
                return Some(t);
            }
        }
    }

    /// Instants of the bursts, with the number of sessions in each.
    pub(crate) fn bursts(&self) -> Option<(f64, u32)> {
        match (
            self.arrivals.pattern,
            self.arrivals.burst_every_s,
            self.arrivals.burst_size,
        ) {
            (Pattern::Bursts, Some(every), Some(size)) => Some((every, size)),
            _ => None,
        }
    }

    pub(crate) fn horizon(&self) -> f64 {
        self.horizon
    }
}
