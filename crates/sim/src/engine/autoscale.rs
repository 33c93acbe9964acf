//! The autoscaler in the run: every `sync_period_s` the HPA ([`crate::autoscaler::Hpa`])
//! reads the last scrapes and sets the replica count; a scale-up starts backends from the
//! pool, ready `startup_s` later; a scale-in cancels a backend still starting, else
//! removes a ready one by the variant's [`ScaleIn`].
//!
//! A backend coming up is a revival: empty, noticed by the balancer's health check. One
//! cut at once exits at the sync: its open sessions end `shutdown` and their clients
//! reconnect (`reconnect_share`, `reconnect_after_s` later), as after a rolling restart's
//! cut; one drained admits no new session (its reports say so, its health check fails,
//! and a proxy that sends it one before it knows is refused), its sessions end on their
//! own, and it exits when empty or at its deadline, cutting the rest. A drain's deadline
//! event is acted on only for the drain that scheduled it: a slot drained, reused and
//! drained again ignores the first drain's deadline.

use super::Engine;
use super::scaler::Slot;
use crate::autoscaler::ScaleIn;
use crate::event_queue::Event;
use crate::session_plan::EndReason;

/// Two instants are the same event's when this close (they are computed the same way).
const SAME_INSTANT_S: f64 = 1e-9;

impl Engine<'_> {
    fn autoscaler(&self) -> &crate::autoscaler::Autoscaler {
        self.sc
            .autoscaler
            .as_ref()
            .expect("an autoscaler event without an autoscaler")
    }

    /// At the start: the slots past `initial_replicas` have no backend; the first sync is
    /// one period in.
    pub(super) fn autoscale_start(&mut self) {
        let Some(scaler) = &self.scaler else {
            return;
        };
        let off: Vec<usize> = (0..self.backends.len())
            .filter(|&b| scaler.slots[b] == Slot::Off)
            .collect();
        for b in off {
            self.backends[b].die(0.0, &self.sc.cpu, self.costs);
            for proxy in &mut self.proxies {
                proxy.views[b].alive = false;
            }
        }
        let period = self.autoscaler().sync_period_s;
        if period < self.sc.duration_s {
            self.queue.push(period, Event::AutoscaleSync);
        }
    }

    /// One sync of the controller: the proposal from the scrapes, stabilized and
    /// rate-limited, applied at once.
    pub(super) fn autoscale_sync(&mut self) {
        let (period, tolerance) = {
            let a = self.autoscaler();
            (a.sync_period_s, a.tolerance)
        };
        let next = self.now + period;
        if next < self.sc.duration_s {
            self.queue.push(next, Event::AutoscaleSync);
        }
        let signal = self
            .scaler
            .as_ref()
            .expect("a sync needs a scaler")
            .variant
            .signal;
        let target = self
            .autoscaler()
            .target(signal)
            .expect("validated: every signal compared has a target");
        let now = self.now;
        let scaler = self.scaler.as_mut().expect("checked above");
        let current = scaler.replicas();
        let proposed = scaler.proposal(current, target, tolerance);
        let desired = scaler.hpa.sync(now, current, proposed);
        if desired > current {
            scaler.summary.scale_ups += 1;
            self.scale_up(desired - current);
        } else if desired < current {
            scaler.summary.scale_downs += 1;
            self.scale_down(current - desired);
        }
    }

    /// Starts `n` backends on free slots (lowest index first); each is ready `startup_s`
    /// from now. A pool with no free slot (every one up or draining) starts fewer.
    fn scale_up(&mut self, n: u32) {
        let startup = self.autoscaler().startup_s;
        let now = self.now;
        let scaler = self.scaler.as_mut().expect("scaling needs a scaler");
        let free: Vec<usize> = (0..scaler.slots.len())
            .filter(|&b| scaler.slots[b] == Slot::Off)
            .take(n as usize)
            .collect();
        for b in free {
            let ready_at = now + startup;
            scaler.set(b, Slot::Starting { ready_at }, now);
            self.queue.push(ready_at, Event::Ready(b as u32));
        }
    }

    /// Removes `n` replicas: starting ones first (newest first), then ready ones by the
    /// variant.
    fn scale_down(&mut self, n: u32) {
        let now = self.now;
        for _ in 0..n {
            let scaler = self.scaler.as_mut().expect("scaling needs a scaler");
            if let Some(b) = scaler.newest_starting() {
                scaler.set(b, Slot::Off, now);
                continue;
            }
            let open: Vec<u64> = self.backends.iter().map(|b| b.open).collect();
            let scaler = self.scaler.as_mut().expect("checked above");
            let Some(b) = scaler.victim(&open) else {
                return;
            };
            if scaler.variant.scale_in == ScaleIn::Drain {
                self.begin_drain(b);
            } else {
                self.scaled_in_exit(b);
            }
        }
    }

    /// Backend `b` starts draining: it admits no more; exits when empty or at the deadline.
    fn begin_drain(&mut self, b: usize) {
        let deadline = self
            .autoscaler()
            .drain_deadline_s
            .expect("validated: drain has a deadline");
        let (now, at) = (self.now, self.now + deadline);
        let scaler = self.scaler.as_mut().expect("draining needs a scaler");
        scaler.set(
            b,
            Slot::Draining {
                since: now,
                deadline: at,
            },
            now,
        );
        self.backends[b].draining = true;
        self.queue.push(at, Event::DrainDeadline(b as u32));
        let check = now + self.sc.reports.health_check_s;
        self.queue.push(check, Event::HealthCheck(b as u32));
        self.drained(b);
    }

    /// Backend `b`'s process exits (cut at once, emptied, or at its drain's deadline): its
    /// open sessions end `shutdown`, their clients reconnect; its slot is free.
    pub(super) fn scaled_in_exit(&mut self, b: usize) {
        let open = self.open_on(b);
        for &id in &open {
            self.schedule_reconnect(id);
        }
        let now = self.now;
        let scaler = self.scaler.as_mut().expect("a scale-in needs a scaler");
        scaler.summary.cut += open.len() as u64;
        if let Slot::Draining { since, .. } = scaler.slots[b]
            && !open.is_empty()
        {
            let waited = now - since;
            let s = &mut scaler.summary.shortest_drain_before_cut_s;
            *s = Some(s.map_or(waited, |w| w.min(waited)));
        }
        scaler.set(b, Slot::Off, now);
        scaler.forget(b, now);
        self.take_down(b, EndReason::Shutdown);
    }

    /// A drain deadline of backend `b`: acted on only if `b` is still in the drain that
    /// set it.
    pub(super) fn scaled_drain_deadline(&mut self, b: usize) {
        let scaler = self.scaler.as_ref().expect("a deadline needs a scaler");
        if let Slot::Draining { deadline, .. } = scaler.slots[b]
            && (deadline - self.now).abs() < SAME_INSTANT_S
        {
            self.scaled_in_exit(b);
        }
    }

    /// A started backend is ready, unless its start was cancelled (or the slot restarted).
    pub(super) fn backend_ready(&mut self, b: usize) {
        let now = self.now;
        let scaler = self.scaler.as_mut().expect("a start needs a scaler");
        match scaler.slots[b] {
            Slot::Starting { ready_at } if (ready_at - now).abs() < SAME_INSTANT_S => {
                scaler.set(b, Slot::Ready, now);
                scaler.forget(b, now);
                self.bring_up(b);
            }
            _ => {}
        }
    }

    /// A report backend `b` publishes is also what the metrics pipeline scrapes.
    pub(super) fn scrape(&mut self, b: usize, active: u64, utilisation: f64) {
        if let Some(scaler) = &mut self.scaler {
            scaler.scrape(b, self.now, active, utilisation);
        }
    }
}

#[cfg(test)]
#[path = "autoscale_tests.rs"]
mod tests;
