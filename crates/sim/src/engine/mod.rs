//! The discrete-event loop: one workload, one policy, one run.
//!
//! This file holds the [`Engine`] itself: its state, its start, the loop and the event
//! dispatch, arrivals and routing; `runs` the public entry points. The rest is in rooms,
//! each an `impl Engine` block with its own tests: `sessions` (accept, phase changes, the
//! exactly-once end), `probes` (probe replies and their batches), `reports` (load reports
//! taken and delivered), `failures` (deaths, revivals, health checks), `restart` (the
//! rolling restart and reconnecting clients), `autoscale` (the HPA's syncs, starts and
//! scale-ins), `fetch_ahead` (memory hints); and three small types, `proxy::Proxy`,
//! `in_flight::InFlight` and `scaler::Scaler` (the autoscaler's state). The rooms use the
//! engine's state; the engine names none of them but the types it holds, so none imports
//! a sibling but `probes` (the prefetch hint) and `autoscale` (the scaler's slots).

use crate::SimRng;
use crate::arrivals::ArrivalProcess;
use crate::autoscaler::Variant;
use crate::backend::Backend;
use crate::event_queue::{Event, EventQueue};
use crate::metrics::Collector;
use crate::policy::{self, BackendView, Probe, Report};
use crate::scenario::Scenario;
use crate::session_plan::{EndReason, SessionPlan};

mod autoscale;
mod failures;
mod fetch_ahead;
mod in_flight;
mod probes;
mod proxy;
mod reports;
mod restart;
mod runs;
mod scaler;
mod sessions;

use self::in_flight::InFlight;
use self::probes::ProbeBatch;
use self::proxy::Proxy;
use self::scaler::Scaler;

pub use self::runs::{run, run_policy, run_variant};

/// Events between two progress callbacks.
const PROGRESS_EVERY: u64 = 1 << 16;

/// Stream numbers for [`SimRng::derive`]: the workload's streams do not depend on the
/// policy, so every policy replays the same arrivals, sessions, report losses and offsets.
pub(crate) const STREAM_SESSIONS: u64 = 1 << 40;
const STREAM_REPORTS: u64 = 2 << 40;
const STREAM_POLICY: u64 = 3 << 40;
const STREAM_OFFSETS: u64 = 4 << 40;
const STREAM_PROBES: u64 = 5 << 40;
const STREAM_SCALE_IN: u64 = 6 << 40;

/// A session the fleet accepted, in a slot reused once it ends. One cache line: at scale
/// every event is a miss on this table, and a slot straddling two lines costs two.
#[derive(Debug)]
#[repr(align(64))]
struct Live {
    /// Bumped at each reuse of the slot: events carry it, so one scheduled for an earlier
    /// occupant is ignored.
    generation: u32,
    backend: u32,
    /// The proxy that sent it, and that proxy's reload count then.
    proxy: u16,
    epoch: u16,
    /// Its costs' multiplier (the plan's, rounded once to `f32`: added and taken away
    /// as the same value).
    weight: f32,
    open: bool,
    /// The plan's: request-like, always speaking.
    short: bool,
    speaking: bool,
    end_at: f64,
    /// How it ends (unless its backend dies first).
    reason: EndReason,
    rng: SimRng,
}

const _: () = assert!(
    std::mem::size_of::<Live>() == 64,
    "a session is one cache line"
);

#[derive(Debug)]
struct Engine<'a> {
    sc: &'a Scenario,
    /// The policy's name (a reloaded proxy builds a fresh one).
    policy_name: String,
    costs: (f64, f64),
    queue: EventQueue,
    backends: Vec<Backend>,
    proxies: Vec<Proxy>,
    sessions: Vec<Live>,
    policy_rng: SimRng,
    probe_rng: SimRng,
    observes_latency: bool,
    probes: InFlight<ProbeBatch>,
    /// (proxy, backend, ms, the backend's deaths when sent).
    first_streams: InFlight<(u32, u32, f32, u32)>,
    /// Slots of ended sessions, for reuse: the table holds the open sessions, not every
    /// session ever (millions at scale, and cache misses on every event).
    free_sessions: Vec<u32>,
    probe_targets: Vec<usize>,
    arrivals: ArrivalProcess,
    report_rngs: Vec<SimRng>,
    stale_from: Vec<f64>,
    /// (backend, report, whether it says the backend is draining).
    reports: InFlight<(u32, Report, bool)>,
    /// Clients cut by a rolling restart or a scale-in, on their way back.
    reconnects: InFlight<restart::Reconnect>,
    /// The autoscaler, when the scenario has one.
    scaler: Option<Scaler>,
    collector: Collector,
    now: f64,
    waves: u32,
    next_arrival_id: u64,
    background_done: bool,
    bursts_done: bool,
    samples_done: bool,
    events: u64,
}

impl<'a> Engine<'a> {
    /// An engine for policy `name`, with the scenario's first autoscaler variant if any.
    #[cfg(test)]
    fn new(sc: &'a Scenario, name: &str) -> Self {
        Self::with_variant(sc, name, runs::default_variant(sc))
    }

    fn with_variant(sc: &'a Scenario, name: &str, variant: Option<Variant>) -> Self {
        let n = sc.backend_count();
        let backends: Vec<Backend> = (0..n).map(|i| Backend::new(sc.group_of(i))).collect();
        let views: Vec<BackendView> = backends
            .iter()
            .map(|b| BackendView {
                alive: true,
                max_sessions: b.max_sessions,
                report: None,
                sent_since_report: 0,
                open: 0,
            })
            .collect();
        let proxies: Vec<Proxy> = (0..sc.balancer.proxies)
            .map(|_| Proxy {
                policy: policy::by_name(name, sc)
                    .unwrap_or_else(|| panic!("unknown policy {name:?}")),
                views: views.clone(),
                epoch: 0,
            })
            .collect();
        let observes_latency = proxies[0].policy.observes_latency();
        let mut stale_from = vec![f64::INFINITY; n];
        for s in &sc.reports.stale {
            let f = &mut stale_from[s.backend as usize];
            *f = f.min(s.from_s);
        }
        let mut e = Self {
            sc,
            policy_name: name.to_owned(),
            costs: (sc.sessions.idle_cost, sc.sessions.speaking_cost),
            queue: EventQueue::default(),
            backends,
            proxies,
            sessions: Vec::new(),
            policy_rng: SimRng::derive(sc.seed, STREAM_POLICY),
            probe_rng: SimRng::derive(sc.seed, STREAM_PROBES),
            observes_latency,
            probes: InFlight::new(),
            first_streams: InFlight::new(),
            free_sessions: Vec::new(),
            probe_targets: Vec::new(),
            arrivals: ArrivalProcess::new(sc),
            report_rngs: (0..n as u64)
                .map(|i| SimRng::derive(sc.seed, STREAM_REPORTS + i))
                .collect(),
            stale_from,
            reports: InFlight::new(),
            reconnects: InFlight::new(),
            scaler: variant.map(|v| {
                let a = sc
                    .autoscaler
                    .as_ref()
                    .expect("an autoscaler variant needs the scenario's [autoscaler]");
                Scaler::new(sc, a, v, SimRng::derive(sc.seed, STREAM_SCALE_IN))
            }),
            collector: Collector::new(sc.rolling_restart.is_some()),
            now: 0.0,
            waves: 0,
            next_arrival_id: 0,
            background_done: false,
            bursts_done: true,
            samples_done: false,
            events: 0,
        };
        e.autoscale_start();
        e.schedule_start();
        e
    }

    fn schedule_start(&mut self) {
        let sc = self.sc;
        let mut offsets = SimRng::derive(sc.seed, STREAM_OFFSETS);
        for proxy in &mut self.proxies {
            for i in 0..self.backends.len() {
                proxy.policy.on_backend_up(i, 0.0);
                proxy.touched(i, 0.0, &mut self.policy_rng);
            }
        }
        for i in 0..self.backends.len() {
            self.queue.push(0.0, Event::FirstReport(i as u32));
            let first = offsets.uniform() * sc.reports.interval_s;
            self.queue.push(first, Event::TakeReport(i as u32));
        }
        match self.arrivals.next_after(0.0) {
            Some(t) => self.queue.push(t, Event::Arrival),
            None => self.background_done = true,
        }
        if let Some((every, _)) = self.arrivals.bursts()
            && every < self.arrivals.horizon()
        {
            self.bursts_done = false;
            self.queue.push(every, Event::Burst);
        }
        self.queue
            .push(sc.sample_interval().min(sc.duration_s), Event::Sample);
        for (i, f) in sc.failures.iter().enumerate() {
            self.queue.push(f.at_s, Event::Die(i as u32));
        }
        for w in &sc.waves {
            self.queue.push(w.at_s, Event::WaveStart);
            self.queue.push(w.at_s + w.for_s, Event::WaveEnd);
        }
        if let Some(r) = &sc.rolling_restart {
            self.queue.push(r.start_s, Event::Restart(0));
        }
        for (i, r) in sc.balancer.reloads.iter().enumerate() {
            self.queue.push(r.at_s, Event::Reload(i as u32));
        }
    }

    /// The scenario's `i`th reload: its proxy starts over (a fresh policy, no reports, no
    /// streams of its own) while the streams it placed stay open on the backends.
    fn reload(&mut self, i: usize) {
        let (p, now) = (self.sc.balancer.reloads[i].proxy as usize, self.now);
        let proxy = &mut self.proxies[p];
        proxy.epoch = proxy.epoch.wrapping_add(1);
        proxy.policy = policy::by_name(&self.policy_name, self.sc)
            .unwrap_or_else(|| panic!("unknown policy {:?}", self.policy_name));
        for view in &mut proxy.views {
            view.open = 0;
            view.sent_since_report = 0;
            view.report = None;
        }
        for b in 0..proxy.views.len() {
            if proxy.views[b].alive {
                proxy.policy.on_backend_up(b, now);
            }
            proxy.touched(b, now, &mut self.policy_rng);
        }
    }

    fn done(&self) -> bool {
        self.background_done
            && self.bursts_done
            && self.samples_done
            && self.collector.open() == 0
            && self.reconnects.pending() == 0
    }

    fn run(&mut self, progress: &mut dyn FnMut(f64)) {
        while !self.done() {
            let Some((at, event)) = self.queue.pop() else {
                break;
            };
            debug_assert!(at >= self.now, "time ran backwards: {at} < {}", self.now);
            self.now = at;
            self.events += 1;
            if self.events.is_multiple_of(PROGRESS_EVERY) {
                progress((self.now / self.sc.duration_s).min(1.0));
            }
            self.fetch_ahead();
            self.handle(event);
        }
        progress(1.0);
    }

    fn handle(&mut self, event: Event) {
        match event {
            Event::Arrival => {
                match self.arrivals.next_after(self.now) {
                    Some(t) => self.queue.push(t, Event::Arrival),
                    None => self.background_done = true,
                }
                self.admit();
            }
            Event::Burst => self.burst(),
            Event::End(id, generation) => {
                if self.is_open(id, generation) {
                    let s = &self.sessions[id as usize];
                    let (reason, b) = (s.reason, s.backend as usize);
                    self.end(id, reason);
                    if self.backends[b].draining {
                        self.drained(b);
                    }
                }
            }
            Event::Phase(id, generation) => {
                if self.is_open(id, generation) {
                    self.phase(id);
                }
            }
            Event::TakeReport(b) => {
                let next = self.now + self.sc.reports.interval_s;
                self.queue.push(next, Event::TakeReport(b));
                self.take_report(b as usize);
            }
            Event::FirstReport(b) => self.take_report(b as usize),
            Event::DeliverReport(slot) => {
                let (b, report, draining) = self.reports.take(slot);
                self.deliver(b as usize, report, draining);
            }
            Event::ProbeReply(slot) => {
                let batch = self.probes.take(slot);
                let proxy = &mut self.proxies[batch.proxy as usize];
                for (b, probe) in &batch.replies[..usize::from(batch.len)] {
                    if proxy.views[*b as usize].alive {
                        proxy.policy.on_probe(*b as usize, probe, self.now);
                    }
                }
            }
            Event::FirstStream(slot) => {
                let (p, b, ms, deaths) = self.first_streams.take(slot);
                // A response due after its backend died never arrives.
                if self.backends[b as usize].deaths == deaths {
                    self.proxies[p as usize]
                        .policy
                        .on_latency(b as usize, f64::from(ms), self.now);
                }
            }
            Event::Sample => {
                self.collector
                    .sample(self.now, &self.backends, self.sc.capacity.target);
                let next = self.now + self.sc.sample_interval();
                if next <= self.sc.duration_s + 1e-9 {
                    self.queue.push(next, Event::Sample);
                } else {
                    self.samples_done = true;
                }
            }
            Event::Die(f) => self.die(f as usize),
            Event::Revive(f) => self.revive(f as usize),
            Event::HealthCheck(b) => self.health_check(b as usize),
            Event::WaveStart => self.set_waves(self.waves + 1),
            Event::WaveEnd => self.set_waves(self.waves - 1),
            Event::Restart(b) => self.restart(b as usize),
            Event::DrainDeadline(b) => self.drain_deadline(b as usize),
            Event::Restarted(b) => self.restarted(b as usize),
            Event::Reconnect(slot) => self.reconnect(slot),
            Event::AutoscaleSync => self.autoscale_sync(),
            Event::Ready(b) => self.backend_ready(b as usize),
            Event::Reload(i) => self.reload(i as usize),
        }
    }

    fn burst(&mut self) {
        let (every, size) = self
            .arrivals
            .bursts()
            .expect("bursts scheduled without a pattern");
        for _ in 0..size {
            self.admit();
        }
        let next = self.now + every;
        if next < self.arrivals.horizon() {
            self.queue.push(next, Event::Burst);
        } else {
            self.bursts_done = true;
        }
    }

    /// One arrival: plan it, ask its proxy's policy, and assign, reject or drop it.
    fn admit(&mut self) {
        let id = self.next_arrival_id;
        self.next_arrival_id += 1;
        let mut rng = SimRng::derive(self.sc.seed, STREAM_SESSIONS + id);
        let plan = SessionPlan::draw(self.sc, &mut rng);
        self.collector.summary.arrivals += 1;
        let p = self.sc.balancer.proxy_of(id);
        self.route(p, plan, rng);
    }

    /// A session (an arrival, or a client reconnecting) reaches proxy `p`: its policy
    /// picks, and the session is assigned, rejected or dropped.
    fn route(&mut self, p: usize, plan: SessionPlan, rng: SimRng) {
        let now = self.now;
        let proxy = &mut self.proxies[p];
        let choice = proxy.policy.pick(now, &proxy.views, &mut self.policy_rng);
        self.choose_probes(p);
        let chosen = self.place(p, choice, plan, rng);
        self.send_probes(p, chosen);
    }

    /// Assigns, rejects or drops a session proxy `p`'s policy sent to `choice`. When it is
    /// assigned to a backend the policy also probes, returns that backend's probe reply as
    /// it was before the session arrived (the probes went out with the pick).
    fn place(
        &mut self,
        p: usize,
        choice: Option<usize>,
        plan: SessionPlan,
        rng: SimRng,
    ) -> Option<(usize, Option<Probe>)> {
        let now = self.now;
        let Some(b) = choice else {
            self.collector.summary.dropped += 1;
            return None;
        };
        let proxy = &mut self.proxies[p];
        assert!(
            proxy.views.get(b).is_some_and(|v| v.alive),
            "policy {} picked backend {b}, which the balancer believes dead or does not exist",
            proxy.policy.name()
        );
        let backend = &self.backends[b];
        if !backend.admitting() {
            // Connection refused (dead, or draining: its listener is closed): this proxy's
            // passive health check marks it down.
            self.collector.summary.rejected += 1;
            self.collector.restart_refused();
            proxy.views[b].alive = false;
            proxy.touched(b, now, &mut self.policy_rng);
            return None;
        }
        if backend.active() >= u64::from(backend.max_sessions) {
            self.collector.summary.rejected += 1;
            return None;
        }
        let before = self
            .probe_targets
            .contains(&b)
            .then(|| (b, self.probe_reply(b)));
        self.accept(p, b, plan, rng);
        before
    }

    fn set_waves(&mut self, waves: u32) {
        self.waves = waves;
        for backend in &mut self.backends {
            backend.refresh(self.now, &self.sc.cpu, self.costs, waves > 0);
        }
    }

    fn finish(
        mut self,
    ) -> (
        crate::Summary,
        Vec<crate::SpreadSample>,
        Vec<crate::CdfPoint>,
        Vec<crate::CdfPoint>,
    ) {
        let s = &self.collector.summary;
        assert_eq!(
            self.collector.placements(),
            s.assigned + s.rejected + s.dropped,
            "arrivals and reconnects not conserved"
        );
        assert_eq!(
            self.collector.open(),
            0,
            "sessions left open after the drain"
        );
        for (p, proxy) in self.proxies.iter().enumerate() {
            let open: u64 = proxy.views.iter().map(|v| v.open).sum();
            assert_eq!(open, 0, "proxy {p} still counts {open} open streams");
        }
        // A restart still under way when the run ends: its window ends with the run.
        self.collector.restart_window(false, self.now);
        let reconnects = self.collector.reconnects();
        let autoscale = self.scaler.as_mut().map(|s| s.finish(reconnects));
        let mut out = self.collector.finish(&self.backends);
        out.0.autoscale = autoscale;
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A small scenario (three backends, a few arrivals a second) with `extra` TOML after it.
    pub(super) fn scenario(extra: &str) -> Scenario {
        let toml = format!(
            "description = 'unit'\nduration_s = 60\n[arrivals]\nrate_per_s = 2\n\
             [sessions]\nduration = 'exponential'\nmean_s = 20\n{}{extra}",
            if extra.contains("[[backends]]") {
                ""
            } else {
                "[[backends]]\ncount = 3\n"
            }
        );
        Scenario::from_toml_str(&toml, "unit.toml").expect("a valid scenario")
    }

    /// An engine at time 0 with its start events scheduled.
    pub(super) fn engine<'a>(sc: &'a Scenario, policy: &str) -> Engine<'a> {
        Engine::new(sc, policy)
    }

    /// Forgets every scheduled event, so a test sees only what it causes.
    pub(super) fn drain_queue(e: &mut Engine<'_>) {
        while e.queue.pop().is_some() {}
    }

    /// Arrivals reach the proxies by the scenario's shares: proxy 0 of shares 3 : 1 carries
    /// three streams in four.
    #[test]
    fn arrivals_reach_the_proxies_by_their_shares() {
        let sc = scenario(
            "[[backends]]\ncount = 3\nmax_sessions = 1000\n\
             [balancer]\nproxies = 2\nproxy_shares = [3.0, 1.0]",
        );
        let mut e = engine(&sc, "least_request");
        drain_queue(&mut e);
        for _ in 0..400 {
            e.admit();
        }
        let open: Vec<u64> = e
            .proxies
            .iter()
            .map(|p| p.views.iter().map(|v| v.open).sum())
            .collect();
        assert_eq!(
            open.iter().sum::<u64>(),
            400,
            "every arrival placed: {open:?}"
        );
        assert!((290..=310).contains(&open[0]), "{open:?}");
    }

    /// A reloaded proxy counts from zero: the streams its old process placed stay open on
    /// the backends and end there unseen by the new one, whose count is its own streams only.
    #[test]
    fn a_reloaded_proxy_counts_only_its_own_streams() {
        let sc = scenario(
            "[[backends]]\ncount = 3\nmax_sessions = 1000\n\
             [balancer]\nproxies = 2\nreloads = [{ proxy = 0, at_s = 1.0 }]",
        );
        let mut e = engine(&sc, "least_request_bias");
        drain_queue(&mut e);
        for _ in 0..40 {
            e.admit();
        }
        let counted =
            |e: &Engine<'_>, p: usize| -> u64 { e.proxies[p].views.iter().map(|v| v.open).sum() };
        assert_eq!((counted(&e, 0), counted(&e, 1)), (20, 20));
        e.reload(0);
        assert_eq!(
            (counted(&e, 0), counted(&e, 1)),
            (0, 20),
            "proxy 0 starts over"
        );
        assert_eq!(
            e.collector.open(),
            40,
            "the old process's streams stay open"
        );
        assert!(e.proxies[0].views.iter().all(|v| v.report.is_none()));
        for _ in 0..4 {
            e.admit();
        }
        assert_eq!((counted(&e, 0), counted(&e, 1)), (2, 22));
        let old = (0..40u32)
            .find(|&id| e.sessions[id as usize].proxy == 0)
            .expect("proxy 0 placed some");
        e.end(old, crate::session_plan::EndReason::Completed);
        assert_eq!(
            counted(&e, 0),
            2,
            "an old stream's end is not the new process's"
        );
        let new = (40..44u32)
            .find(|&id| e.sessions[id as usize].proxy == 0)
            .expect("proxy 0 placed some after its reload");
        e.end(new, crate::session_plan::EndReason::Completed);
        assert_eq!(counted(&e, 0), 1);
        // A whole run with reloads ends with every proxy's count at zero (`finish` checks).
        let sc = scenario(
            "[balancer]\nproxies = 2\nreloads = [{ proxy = 1, at_s = 10.0 }, { proxy = 1, at_s = 30.0 }]",
        );
        let mut e = engine(&sc, "least_request_bias");
        e.run(&mut |_| {});
        assert!(e.done());
        let _ = e.finish();
    }

    /// The loop runs a whole scenario to its drain: every arrival placed, every session
    /// ended, nothing left in flight.
    #[test]
    fn a_run_ends_drained_and_conserves_arrivals() {
        let sc = scenario("");
        let mut e = engine(&sc, "p2c_sessions");
        e.run(&mut |_| {});
        assert!(e.done());
        let s = &e.collector.summary;
        assert!(s.arrivals > 0);
        assert_eq!(s.arrivals, s.assigned + s.rejected + s.dropped);
        assert_eq!(
            e.free_sessions.len(),
            e.sessions.len(),
            "every slot free again"
        );
        let (summary, ..) = e.finish();
        assert_eq!(summary.ended.values().sum::<u64>(), summary.assigned);
    }

    /// The workload's streams do not depend on the policy: every policy sees the same
    /// arrivals.
    #[test]
    fn every_policy_sees_the_same_arrivals() {
        let sc = scenario("");
        let arrivals = |policy| {
            let mut e = engine(&sc, policy);
            e.run(&mut |_| {});
            e.collector.summary.arrivals
        };
        assert_eq!(arrivals("random"), arrivals("least_request"));
    }
}
