//! A session's life on its backend: accepted (costs, latencies, its end and first phase
//! change scheduled), changing phase (idle / speaking), and ended exactly once.

use super::{Engine, Live};
use crate::SimRng;
use crate::event_queue::Event;
use crate::session_plan::{EndReason, SessionPlan};

impl Engine<'_> {
    /// Whether the session an event was scheduled for still holds slot `id` and is open
    /// (it may have ended early, and the slot gone to another).
    pub(super) fn is_open(&self, id: u32, generation: u32) -> bool {
        let s = &self.sessions[id as usize];
        s.generation == generation && s.open
    }

    /// Backend `b` takes the session proxy `p` placed there: a flaky backend may cut it
    /// early, it counts on the backend, both counters and the proxy's view, its latencies are
    /// drawn, and its end and first phase change are scheduled.
    pub(super) fn accept(&mut self, p: usize, b: usize, mut plan: SessionPlan, mut rng: SimRng) {
        let flaky = self.backends[b].disconnect_share;
        if flaky > 0.0 && !plan.short && plan.reason != EndReason::Disconnected {
            // Drawn only on a flaky backend: a policy that avoids it changes these
            // sessions' fate, which is the point.
            let (cut, at) = (rng.chance(flaky), rng.uniform());
            if cut {
                plan.length = (plan.length * at).max(1e-6);
                plan.reason = EndReason::Disconnected;
            }
        }
        let (id, generation) = match self.free_sessions.pop() {
            Some(id) => (id, self.sessions[id as usize].generation.wrapping_add(1)),
            None => (self.sessions.len() as u32, 0),
        };
        let (now, wave) = (self.now, self.waves > 0);
        let backend = &mut self.backends[b];
        let overloaded = backend.utilisation > self.sc.capacity.target;
        backend.note_arrival(now);
        backend.open += 1;
        backend.tracked += 1;
        backend.naive += 1;
        let weight = plan.weight as f32;
        backend.weight += f64::from(weight);
        if plan.short {
            backend.speaking += f64::from(weight);
        }
        backend.refresh(now, &self.sc.cpu, self.costs, wave);
        let (startup, first) = backend.latencies(&self.sc.latency, &mut rng);
        backend.note_latency(now, first);
        self.collector.assigned(overloaded, startup, first);
        let proxy = &mut self.proxies[p];
        proxy.views[b].sent_since_report += 1;
        proxy.views[b].open += 1;
        proxy.touched(b, now, &mut self.policy_rng);
        if self.observes_latency {
            let deaths = self.backends[b].deaths;
            let slot = self
                .first_streams
                .put((p as u32, b as u32, first as f32, deaths));
            self.queue
                .push(now + first / 1000.0, Event::FirstStream(slot));
        }
        let end_at = now + plan.length;
        self.queue.push(end_at, Event::End(id, generation));
        let s = &self.sc.sessions;
        if !plan.short && s.speaking_mean_s > 0.0 {
            let next = now + rng.exponential(s.idle_mean_s);
            if next < end_at {
                self.queue.push(next, Event::Phase(id, generation));
            }
        }
        let live = Live {
            generation,
            backend: b as u32,
            proxy: p as u16,
            epoch: self.proxies[p].epoch,
            weight,
            open: true,
            short: plan.short,
            speaking: plan.short,
            end_at,
            reason: plan.reason,
            rng,
        };
        match self.sessions.get_mut(id as usize) {
            Some(slot) => *slot = live,
            None => self.sessions.push(live),
        }
    }

    /// Ends a session exactly once: out of its backend's count, both counters and its
    /// proxy's open streams; its slot goes back for reuse.
    pub(super) fn end(&mut self, id: u32, reason: EndReason) {
        let s = &mut self.sessions[id as usize];
        assert!(s.open, "session {id} ended twice");
        s.open = false;
        let (b, speaking) = (s.backend as usize, s.speaking);
        let (p, epoch, weight) = (s.proxy as usize, s.epoch, f64::from(s.weight));
        let backend = &mut self.backends[b];
        backend.open -= 1;
        backend.tracked -= 1;
        if reason.is_clean() {
            backend.naive -= 1;
        }
        backend.weight -= weight;
        if speaking {
            backend.speaking -= weight;
        }
        backend.refresh(self.now, &self.sc.cpu, self.costs, self.waves > 0);
        self.collector.ended(reason);
        let proxy = &mut self.proxies[p];
        // A stream the proxy's process before its last reload placed: that process served
        // it to its end, and the new one never counted it.
        if proxy.epoch == epoch {
            proxy.views[b].open -= 1;
            proxy.touched(b, self.now, &mut self.policy_rng);
        }
        self.free_sessions.push(id);
    }

    /// Session `id` switches between idle and speaking: its backend's load follows, and
    /// the next switch is scheduled if it comes before the session's end.
    pub(super) fn phase(&mut self, id: u32) {
        let (now, wave) = (self.now, self.waves > 0);
        let sc = self.sc;
        let s = &mut self.sessions[id as usize];
        debug_assert!(s.open, "a phase change of a closed session");
        s.speaking = !s.speaking;
        let mean = if s.speaking {
            sc.sessions.speaking_mean_s
        } else {
            sc.sessions.idle_mean_s
        };
        let next = now + s.rng.exponential(mean);
        let (b, speaking, end_at, weight, generation) = (
            s.backend as usize,
            s.speaking,
            s.end_at,
            f64::from(s.weight),
            s.generation,
        );
        let backend = &mut self.backends[b];
        if speaking {
            backend.speaking += weight;
        } else {
            backend.speaking -= weight;
        }
        backend.refresh(now, &sc.cpu, self.costs, wave);
        if next < end_at {
            self.queue.push(next, Event::Phase(id, generation));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::engine::tests::{drain_queue, engine, scenario};

    /// An accepted session counts on its backend, both counters and its proxy's view; its
    /// end takes it out of all of them, and its slot is reused with a new generation, so an
    /// event for the old occupant is recognised as stale.
    #[test]
    fn accept_and_end_balance_and_slots_are_reused() {
        let sc = scenario("");
        let mut e = engine(&sc, "least_request");
        drain_queue(&mut e);
        let mut rng = SimRng::new(7);
        let plan = SessionPlan::draw(&sc, &mut rng);
        e.accept(0, 1, plan, rng);
        assert_eq!((e.backends[1].open, e.backends[1].tracked), (1, 1));
        assert_eq!(e.proxies[0].views[1].open, 1);
        assert!(e.is_open(0, 0));
        e.end(0, EndReason::Completed);
        assert_eq!((e.backends[1].open, e.backends[1].tracked), (0, 0));
        assert_eq!(e.proxies[0].views[1].open, 0);
        assert!(!e.is_open(0, 0));
        let mut rng = SimRng::new(8);
        let plan = SessionPlan::draw(&sc, &mut rng);
        e.accept(0, 2, plan, rng);
        assert_eq!(e.sessions.len(), 1, "the slot was reused");
        assert!(e.is_open(0, 1) && !e.is_open(0, 0));
    }

    /// A clean end leaves the naive counter right; a disconnect (no close frame) leaves a
    /// ghost on it, never on the tracked one.
    #[test]
    fn a_disconnect_leaves_a_ghost_only_on_the_naive_counter() {
        let sc = scenario("");
        let mut e = engine(&sc, "least_request");
        drain_queue(&mut e);
        let mut rng = SimRng::new(3);
        let plan = SessionPlan::draw(&sc, &mut rng);
        e.accept(0, 0, plan, rng);
        e.end(0, EndReason::Disconnected);
        assert_eq!((e.backends[0].tracked, e.backends[0].naive), (0, 1));
    }

    #[test]
    #[should_panic(expected = "ended twice")]
    fn ending_twice_is_a_bug() {
        let sc = scenario("");
        let mut e = engine(&sc, "least_request");
        drain_queue(&mut e);
        let mut rng = SimRng::new(3);
        let plan = SessionPlan::draw(&sc, &mut rng);
        e.accept(0, 0, plan, rng);
        e.end(0, EndReason::Completed);
        e.end(0, EndReason::Completed);
    }
}
