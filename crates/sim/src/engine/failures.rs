//! Backends that fail: a death ends every session on the backend (each counted out once),
//! a revival brings it back empty, and the balancer learns of either by its health check.

use super::Engine;
use crate::event_queue::Event;
use crate::session_plan::EndReason;

impl Engine<'_> {
    /// Failure `f` of the scenario strikes: its backend's process goes (if it is alive),
    /// and comes back `down_for_s` later when the failure says so.
    pub(super) fn die(&mut self, f: usize) {
        let failure = &self.sc.failures[f];
        let b = failure.backend as usize;
        if !self.backends[b].alive {
            return;
        }
        self.take_down(b, EndReason::BackendLost);
        if let Some(down) = failure.down_for_s {
            self.queue.push(self.now + down, Event::Revive(f as u32));
        }
    }

    /// Failure `f`'s backend comes back, empty.
    pub(super) fn revive(&mut self, f: usize) {
        self.bring_up(self.sc.failures[f].backend as usize);
    }

    /// The slots of the sessions open on backend `b`.
    pub(super) fn open_on(&self, b: usize) -> Vec<u32> {
        (0..self.sessions.len() as u32)
            .filter(|&id| {
                let s = &self.sessions[id as usize];
                s.open && s.backend as usize == b
            })
            .collect()
    }

    /// Backend `b`'s process goes: every session open on it ends with `reason`, and the
    /// balancer's health check notices a little later.
    pub(super) fn take_down(&mut self, b: usize, reason: EndReason) {
        for id in self.open_on(b) {
            self.end(id, reason);
        }
        self.backends[b].die(self.now, &self.sc.cpu, self.costs);
        let check = self.now + self.sc.reports.health_check_s;
        self.queue.push(check, Event::HealthCheck(b as u32));
    }

    /// Backend `b` is back, empty; the health check notices a little later.
    pub(super) fn bring_up(&mut self, b: usize) {
        self.backends[b].revive(self.now, &self.sc.cpu, self.costs);
        let check = self.now + self.sc.reports.health_check_s;
        self.queue.push(check, Event::HealthCheck(b as u32));
    }

    /// Every proxy's belief catches up with the truth: whether `b` takes new sessions
    /// (a draining backend fails its health check, as a dead one does).
    pub(super) fn health_check(&mut self, b: usize) {
        let admitting = self.backends[b].admitting();
        let mut came_up = false;
        for proxy in &mut self.proxies {
            came_up |= proxy.believe(b, admitting, self.now, &mut self.policy_rng);
        }
        if came_up {
            self.take_report(b);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::engine::tests::{drain_queue, engine, scenario};

    /// A backend taken down ends exactly its own open sessions, and the balancer believes it
    /// down only once the health check has run; brought back, it is believed up again.
    #[test]
    fn a_death_ends_its_sessions_and_the_health_check_tells_the_balancer() {
        let sc = scenario("[reports]\nhealth_check_s = 2.0");
        let mut e = engine(&sc, "round_robin");
        drain_queue(&mut e);
        for _ in 0..6 {
            e.admit();
        }
        let on_zero = e.open_on(0);
        assert_eq!(on_zero.len(), 2, "round robin over three backends");
        drain_queue(&mut e);
        e.now = 1.0;
        e.take_down(0, EndReason::BackendLost);
        assert!(e.open_on(0).is_empty());
        assert_eq!(e.open_on(1).len(), 2, "the others keep theirs");
        assert_eq!(e.collector.open(), 4, "two of six ended");
        assert!(e.proxies[0].views[0].alive, "not noticed yet");
        assert_eq!(e.queue.pop(), Some((3.0, Event::HealthCheck(0))));
        e.now = 3.0;
        e.health_check(0);
        assert!(!e.proxies[0].views[0].alive);
        e.bring_up(0);
        assert!(e.backends[0].alive);
        assert_eq!(e.queue.pop(), Some((5.0, Event::HealthCheck(0))));
        e.now = 5.0;
        e.health_check(0);
        assert!(e.proxies[0].views[0].alive);
        assert!(
            e.proxies[0].views[0].report.is_some(),
            "a backend back up reports at once"
        );
    }
}
