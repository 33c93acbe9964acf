//! Load reports: what a backend tells the balancer (active sessions by the scenario's
//! counter, utilisation, arrivals in the window), when, and what a proxy does with one.

use super::Engine;
use crate::event_queue::Event;
use crate::policy::Report;
use crate::scenario::CounterKind;

impl Engine<'_> {
    /// Like an ORCA out-of-band stream, a backend reports when it (re)joins and then
    /// every interval, unless it is dead or its reports have gone stale.
    pub(super) fn take_report(&mut self, b: usize) {
        let r = &self.sc.reports;
        let backend = &mut self.backends[b];
        if !backend.alive || self.now >= self.stale_from[b] {
            return;
        }
        let report = Report {
            taken_at: self.now,
            active: match self.sc.counter {
                CounterKind::Tracked => backend.tracked,
                CounterKind::Naive => backend.naive,
            },
            utilisation: backend.take_utilisation(self.now),
            arrivals_in_window: backend.arrivals_in_window(self.now, r.window_s),
            window_s: r.window_s,
            utilisation_recent: backend.recent_utilisation(self.now),
        };
        // Scraped from `/metrics` by the autoscaler's pipeline, which the balancer's
        // report losses do not touch.
        self.scrape(b, report.active, report.utilisation);
        if self.report_rngs[b].chance(r.loss) {
            return;
        }
        let draining = self.backends[b].draining;
        if r.delay_s == 0.0 {
            self.deliver(b, report, draining);
            return;
        }
        let slot = self.reports.put((b as u32, report, draining));
        self.queue
            .push(self.now + r.delay_s, Event::DeliverReport(slot));
    }

    /// A report reaches every proxy. One that says the backend is draining (an ORCA or
    /// agent-check weight of 0, a `drain` state) takes it out of every proxy's candidates.
    pub(super) fn deliver(&mut self, b: usize, report: Report, draining: bool) {
        for proxy in &mut self.proxies {
            if draining {
                proxy.believe(b, false, self.now, &mut self.policy_rng);
                continue;
            }
            let view = &mut proxy.views[b];
            if !view.alive {
                continue; // a report from before a death, arriving late: ignored
            }
            view.report = Some(report);
            view.sent_since_report = 0;
            proxy.policy.on_report(b, &report, self.now);
            proxy.touched(b, self.now, &mut self.policy_rng);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::engine::tests::{drain_queue, engine, scenario};

    /// Without a delay a report reaches every proxy at once; with one, it waits in flight.
    #[test]
    fn a_report_reaches_every_proxy_after_its_delay() {
        let sc = scenario("[balancer]\nproxies = 3");
        let mut e = engine(&sc, "least_request");
        drain_queue(&mut e);
        e.now = 5.0;
        e.take_report(1);
        for p in &e.proxies {
            assert_eq!(p.views[1].report.map(|r| r.taken_at), Some(5.0));
            assert_eq!(p.views[0].report, None);
        }
        let sc = scenario("[reports]\ndelay_s = 0.5");
        let mut e = engine(&sc, "least_request");
        drain_queue(&mut e);
        e.take_report(0);
        assert_eq!(e.proxies[0].views[0].report, None);
        let (at, event) = e.queue.pop().unwrap();
        assert_eq!((at, event), (0.5, Event::DeliverReport(0)));
    }

    /// A dead backend, or one whose reports went stale, reports nothing; a report that says
    /// draining takes the backend out of every proxy's candidates.
    #[test]
    fn dead_stale_and_draining_backends() {
        let sc = scenario("[[reports.stale]]\nbackend = 0\nfrom_s = 1.0");
        let mut e = engine(&sc, "least_request");
        drain_queue(&mut e);
        e.now = 2.0;
        e.take_report(0);
        assert_eq!(e.proxies[0].views[0].report, None, "stale");
        e.backends[1].alive = false;
        e.take_report(1);
        assert_eq!(e.proxies[0].views[1].report, None, "dead");
        e.backends[2].draining = true;
        e.take_report(2);
        assert!(!e.proxies[0].views[2].alive, "draining");
    }
}
