//! [`Proxy`]: one proxy of the balancing tier, its copy of the policy and what it believes
//! of each backend.

use crate::SimRng;
use crate::policy::{BackendView, Policy};

/// One proxy of the balancing tier: its copy of the policy and what it knows.
#[derive(Debug)]
pub(super) struct Proxy {
    pub(super) policy: Box<dyn Policy>,
    pub(super) views: Vec<BackendView>,
    /// Reloads so far: a session placed before the last one is the old process's, and
    /// its end is not this one's to count.
    pub(super) epoch: u16,
}

impl Proxy {
    /// Tells the policy that `views[b]` changed.
    pub(super) fn touched(&mut self, b: usize, now: f64, rng: &mut SimRng) {
        self.policy.on_view(b, &self.views[b], now, rng);
    }

    /// This proxy learns (from a health check or a report) whether backend `b` takes new
    /// sessions; returns whether it just came up.
    pub(super) fn believe(
        &mut self,
        b: usize,
        admitting: bool,
        now: f64,
        rng: &mut SimRng,
    ) -> bool {
        let view = &mut self.views[b];
        if view.alive == admitting {
            return false;
        }
        view.alive = admitting;
        view.report = None;
        view.sent_since_report = 0;
        if admitting {
            self.policy.on_backend_up(b, now);
        }
        self.touched(b, now, rng);
        admitting
    }
}
#[cfg(test)]
mod tests {
    use super::*;
    use crate::engine::tests::scenario;

    fn proxy() -> Proxy {
        let sc = scenario("");
        let view = BackendView {
            alive: true,
            max_sessions: 10,
            report: None,
            sent_since_report: 3,
            open: 1,
        };
        Proxy {
            policy: crate::policy::by_name("least_request", &sc).unwrap(),
            views: vec![view; 2],
            epoch: 0,
        }
    }

    /// A belief changes once: the first `false` takes the backend out and forgets its report
    /// and the sessions sent since; only a `true` after that is a coming-up.
    #[test]
    fn a_backend_comes_up_once_per_going_down() {
        let (mut p, mut rng) = (proxy(), SimRng::new(1));
        assert!(!p.believe(0, true, 0.0, &mut rng), "already up");
        assert!(!p.believe(0, false, 1.0, &mut rng));
        assert!(!p.views[0].alive);
        assert_eq!(p.views[0].sent_since_report, 0);
        assert!(!p.believe(0, false, 2.0, &mut rng), "already down");
        assert!(p.believe(0, true, 3.0, &mut rng));
        assert!(p.views[0].alive && p.views[1].alive);
        assert_eq!(
            p.views[1].sent_since_report, 3,
            "the other backend is untouched"
        );
    }
}
