//! Probing (Prequal-style policies): after a pick the policy names backends to probe; each
//! answers what it holds at that moment, a round trip later, unless the reply is lost. The
//! replies of one query travel together in a [`ProbeBatch`].

use super::Engine;
use super::fetch_ahead::prefetch;
use crate::backend::Backend;
use crate::event_queue::Event;
use crate::policy::Probe;

/// The probe replies of one query (they share a round trip, so one event delivers them,
/// in the order sent: exactly as one event each would, since nothing can come between).
#[derive(Debug, Clone, Copy)]
pub(super) struct ProbeBatch {
    pub(super) proxy: u32,
    pub(super) len: u8,
    pub(super) replies: [(u32, Probe); PROBE_BATCH],
}

const PROBE_BATCH: usize = 4;

impl Engine<'_> {
    /// The backends proxy `p`'s policy probes after a pick, into `probe_targets`; their
    /// lines are asked for now, to be read once the session is placed.
    pub(super) fn choose_probes(&mut self, p: usize) {
        let proxy = &mut self.proxies[p];
        self.probe_targets.clear();
        proxy.policy.probe(
            self.now,
            &proxy.views,
            &mut self.policy_rng,
            &mut self.probe_targets,
        );
        for &b in &self.probe_targets {
            if let Some(backend) = self.backends.get(b) {
                prefetch(backend, Backend::PROBE_LINES);
            }
        }
    }

    /// What backend `b` answers a probe with now; `None` when it is dead.
    pub(super) fn probe_reply(&self, b: usize) -> Option<Probe> {
        let backend = &self.backends[b];
        backend.alive.then(|| Probe {
            taken_at: self.now,
            rif: backend.active(),
            latency_ms: backend.latency_at_rif(self.now),
        })
    }

    /// Sends the replies to the probes of `probe_targets`: each describes its backend at
    /// the pick and arrives a round trip later, unless lost (a dead backend answers
    /// nothing). `chosen` is the picked backend's reply from before its new session, when
    /// it was probed: the only backend placing the session changed.
    pub(super) fn send_probes(&mut self, p: usize, chosen: Option<(usize, Option<Probe>)>) {
        let balancer = &self.sc.balancer;
        let empty = Probe {
            taken_at: 0.0,
            rif: 0,
            latency_ms: None,
        };
        let mut batch = ProbeBatch {
            proxy: p as u32,
            len: 0,
            replies: [(0, empty); PROBE_BATCH],
        };
        for &b in &self.probe_targets {
            let reply = match chosen {
                Some((c, before)) if c == b => before,
                _ => self.probe_reply(b),
            };
            let Some(probe) = reply else {
                continue;
            };
            if self.probe_rng.chance(balancer.probe_loss) {
                continue;
            }
            batch.replies[usize::from(batch.len)] = (b as u32, probe);
            batch.len += 1;
            if usize::from(batch.len) == PROBE_BATCH {
                let slot = self.probes.put(batch);
                self.queue
                    .push(self.now + balancer.probe_delay_s, Event::ProbeReply(slot));
                batch.len = 0;
            }
        }
        if batch.len > 0 {
            let slot = self.probes.put(batch);
            self.queue
                .push(self.now + balancer.probe_delay_s, Event::ProbeReply(slot));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::engine::tests::{drain_queue, engine, scenario};

    /// Six probed backends: one batch of four and one of two, a round trip from now, in the
    /// order probed; the picked backend answers as it was before its new session.
    #[test]
    fn replies_travel_in_batches_of_four_after_the_delay() {
        let sc = scenario("[[backends]]\ncount = 7\n[balancer]\nprobe_delay_s = 0.25");
        let mut e = engine(&sc, "least_request");
        drain_queue(&mut e);
        e.now = 10.0;
        e.probe_targets = vec![0, 1, 2, 3, 4, 5];
        let before = Probe {
            taken_at: 1.0,
            rif: 42,
            latency_ms: None,
        };
        e.send_probes(0, Some((2, Some(before))));
        let (mut batches, mut lens) = (Vec::new(), Vec::new());
        while let Some((at, event)) = e.queue.pop() {
            let Event::ProbeReply(slot) = event else {
                panic!("unexpected {event:?}");
            };
            assert_eq!(at, 10.25);
            let batch = e.probes.take(slot);
            lens.push(batch.len);
            batches.extend(batch.replies[..usize::from(batch.len)].iter().copied());
        }
        assert_eq!(lens, [4, 2]);
        let order: Vec<u32> = batches.iter().map(|(b, _)| *b).collect();
        assert_eq!(order, [0, 1, 2, 3, 4, 5]);
        assert_eq!(
            batches[2].1.rif, 42,
            "the picked backend's reply from before"
        );
        assert_eq!(batches[0].1.taken_at, 10.0);
    }

    /// A dead backend answers nothing.
    #[test]
    fn a_dead_backend_sends_no_reply() {
        let sc = scenario("");
        let mut e = engine(&sc, "least_request");
        drain_queue(&mut e);
        assert!(e.probe_reply(1).is_some());
        e.backends[1].alive = false;
        assert!(e.probe_reply(1).is_none());
        e.probe_targets = vec![1];
        e.send_probes(0, None);
        assert!(e.queue.pop().is_none(), "no batch for no reply");
    }
}
