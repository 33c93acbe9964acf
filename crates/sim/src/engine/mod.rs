//! The discrete-event loop: one workload, one policy, one run.

use std::time::Instant;

use crate::SimRng;
use crate::arrivals::ArrivalProcess;
use crate::backend::Backend;
use crate::event_queue::{Event, EventQueue};
use crate::metrics::Collector;
use crate::policy::{self, BackendView, Policy, Probe, Report};
use crate::scenario::{CounterKind, Scenario};
use crate::session_plan::{EndReason, SessionPlan};
use crate::sim_result::{PolicyResult, ScenarioResult};

mod restart;

/// Events between two progress callbacks.
const PROGRESS_EVERY: u64 = 1 << 16;

/// How many events ahead the loop asks memory for a session's slot, and (half as far, by
/// when the slot has arrived) for its backend and view: far enough to cover a miss to
/// memory, near enough that what was fetched is still in cache when its event runs.
const FETCH_AHEAD: usize = 16;

/// Asks the CPU to bring the cache lines from `first` on (`lines` of 64 bytes) towards the
/// core. Only a hint: it changes no value, and on other targets it is nothing.
#[inline(always)]
#[allow(unsafe_code)]
fn prefetch<T>(first: &T, lines: usize) {
    #[cfg(target_arch = "x86_64")]
    {
        use std::arch::x86_64::{_MM_HINT_T0, _mm_prefetch};
        let p: *const i8 = (first as *const T).cast();
        for line in 0..lines {
            // SAFETY: `_mm_prefetch` needs SSE, which every x86-64 CPU has (it is in the
            // target's baseline). PREFETCHT0 reads nothing into the program and cannot
            // fault, whatever the address: a line past the object (`wrapping_add`, no
            // dereference) is at worst a wasted fetch.
            unsafe { _mm_prefetch::<_MM_HINT_T0>(p.wrapping_add(line * 64)) };
        }
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = (first, lines);
}

/// Stream numbers for [`SimRng::derive`]: the workload's streams do not depend on the
/// policy, so every policy replays the same arrivals, sessions, report losses and offsets.
const STREAM_SESSIONS: u64 = 1 << 40;
const STREAM_REPORTS: u64 = 2 << 40;
const STREAM_POLICY: u64 = 3 << 40;
const STREAM_OFFSETS: u64 = 4 << 40;
const STREAM_PROBES: u64 = 5 << 40;

/// Runs `scenario` through each policy in `policies` (names from [`policy::NAMES`]).
///
/// `progress(policy_index, fraction_of_arrival_horizon)` is called now and then.
///
/// ```
/// use livecount_sim::{Scenario, run};
///
/// let scenario = Scenario::from_toml_str(
///     "description = 'x'\nduration_s = 60\n[arrivals]\nrate_per_s = 2\n\
///      [sessions]\nduration = 'exponential'\nmean_s = 20\n[[backends]]\ncount = 3",
///     "inline.toml",
/// )?;
/// let result = run(&scenario, &["random".into(), "p2c_sessions".into()], &mut |_, _| {});
/// let s = &result.policies[1].summary;
/// assert_eq!(s.arrivals, s.assigned + s.rejected + s.dropped);
/// assert_eq!(s.ended.values().sum::<u64>(), s.assigned);
/// # Ok::<(), livecount_sim::ScenarioError>(())
/// ```
///
/// # Panics
///
/// On an unknown policy name (validate names with [`policy::by_name`] first).
pub fn run(
    scenario: &Scenario,
    policies: &[String],
    progress: &mut dyn FnMut(usize, f64),
) -> ScenarioResult {
    let results = policies
        .iter()
        .enumerate()
        .map(|(i, name)| run_policy(scenario, name, &mut |f| progress(i, f)))
        .collect();
    ScenarioResult {
        scenario: scenario.name.clone(),
        description: scenario.description.clone(),
        seed: scenario.seed,
        backends: scenario.backend_count(),
        duration_s: scenario.duration_s,
        target_utilisation: scenario.capacity.target,
        policies: results,
        across_seeds: None,
    }
}

/// Runs `scenario` through the policy called `name` (one copy per proxy).
///
/// # Panics
///
/// On an unknown policy name.
pub fn run_policy(scenario: &Scenario, name: &str, progress: &mut dyn FnMut(f64)) -> PolicyResult {
    let started = Instant::now();
    let mut engine = Engine::new(scenario, name);
    engine.run(progress);
    let name = engine.proxies[0].policy.name().to_owned();
    let events = engine.events;
    let (summary, spread, startup_cdf, first_stream_cdf) = engine.finish();
    PolicyResult {
        policy: name,
        summary,
        spread,
        startup_cdf,
        first_stream_cdf,
        events,
        wall_s: started.elapsed().as_secs_f64(),
    }
}

/// A session the fleet accepted, in a slot reused once it ends. One cache line: at scale
/// every event is a miss on this table, and a slot straddling two lines costs two.
#[derive(Debug)]
#[repr(align(64))]
struct Live {
    /// Bumped at each reuse of the slot: events carry it, so one scheduled for an earlier
    /// occupant is ignored.
    generation: u32,
    backend: u32,
    /// The proxy that sent it.
    proxy: u32,
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

/// One proxy of the balancing tier: its copy of the policy and what it knows.
#[derive(Debug)]
struct Proxy {
    policy: Box<dyn Policy>,
    views: Vec<BackendView>,
}

impl Proxy {
    /// Tells the policy that `views[b]` changed.
    fn touched(&mut self, b: usize, now: f64, rng: &mut SimRng) {
        self.policy.on_view(b, &self.views[b], now, rng);
    }

    /// This proxy learns (from a health check or a report) whether backend `b` takes new
    /// sessions; returns whether it just came up.
    fn believe(&mut self, b: usize, admitting: bool, now: f64, rng: &mut SimRng) -> bool {
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

/// Messages on their way to a proxy, in slots reused once delivered.
#[derive(Debug)]
struct InFlight<T> {
    slots: Vec<T>,
    free: Vec<u32>,
}

impl<T: Clone> InFlight<T> {
    fn new() -> Self {
        Self {
            slots: Vec::new(),
            free: Vec::new(),
        }
    }

    fn put(&mut self, item: T) -> u32 {
        match self.free.pop() {
            Some(slot) => {
                self.slots[slot as usize] = item;
                slot
            }
            None => {
                self.slots.push(item);
                (self.slots.len() - 1) as u32
            }
        }
    }

    fn take(&mut self, slot: u32) -> T {
        self.free.push(slot);
        self.slots[slot as usize].clone()
    }

    /// Messages put and not yet taken.
    fn pending(&self) -> usize {
        self.slots.len() - self.free.len()
    }
}

/// The probe replies of one query (they share a round trip, so one event delivers them,
/// in the order sent: exactly as one event each would, since nothing can come between).
#[derive(Debug, Clone, Copy)]
struct ProbeBatch {
    proxy: u32,
    len: u8,
    replies: [(u32, Probe); PROBE_BATCH],
}

const PROBE_BATCH: usize = 4;

const _: () = assert!(
    std::mem::size_of::<Live>() == 64,
    "a session is one cache line"
);

#[derive(Debug)]
struct Engine<'a> {
    sc: &'a Scenario,
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
    /// Clients cut by a rolling restart, on their way back.
    reconnects: InFlight<restart::Reconnect>,
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
    fn new(sc: &'a Scenario, name: &str) -> Self {
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
            collector: Collector::new(sc.rolling_restart.is_some()),
            now: 0.0,
            waves: 0,
            next_arrival_id: 0,
            background_done: false,
            bursts_done: true,
            samples_done: false,
            events: 0,
        };
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
        }
    }

    /// At scale the session table, the backends and the views outgrow the cache, and
    /// every event would wait on memory for its session and then its backend. The next
    /// events are known, so their lines are asked for early: the session slot of the event
    /// [`FETCH_AHEAD`] places on, and the backend and view of the one half as far (whose
    /// slot was asked for earlier). Changes no state.
    fn fetch_ahead(&self) {
        if let Some(Event::End(id, _) | Event::Phase(id, _)) = self.queue.ahead(FETCH_AHEAD)
            && let Some(s) = self.sessions.get(*id as usize)
        {
            prefetch(s, 1);
        }
        let backend = match self.queue.ahead(FETCH_AHEAD / 2) {
            Some(Event::End(id, _) | Event::Phase(id, _)) => self
                .sessions
                .get(*id as usize)
                .map(|s| (s.backend, s.proxy)),
            Some(Event::TakeReport(b)) => Some((*b, 0)),
            _ => None,
        };
        if let Some((b, p)) = backend {
            if let Some(backend) = self.backends.get(b as usize) {
                prefetch(backend, Backend::HOT_LINES);
            }
            if let Some(view) = self
                .proxies
                .get(p as usize)
                .and_then(|p| p.views.get(b as usize))
            {
                prefetch(view, std::mem::size_of::<BackendView>().div_ceil(64));
            }
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

    /// Whether the session an event was scheduled for still holds slot `id` and is open
    /// (it may have ended early, and the slot gone to another).
    fn is_open(&self, id: u32, generation: u32) -> bool {
        let s = &self.sessions[id as usize];
        s.generation == generation && s.open
    }

    /// One arrival: plan it, ask its proxy's policy, and assign, reject or drop it.
    fn admit(&mut self) {
        let id = self.next_arrival_id;
        self.next_arrival_id += 1;
        let mut rng = SimRng::derive(self.sc.seed, STREAM_SESSIONS + id);
        let plan = SessionPlan::draw(self.sc, &mut rng);
        self.collector.summary.arrivals += 1;
        let p = (id % self.proxies.len() as u64) as usize;
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

    /// The backends proxy `p`'s policy probes after a pick, into `probe_targets`; their
    /// lines are asked for now, to be read once the session is placed.
    fn choose_probes(&mut self, p: usize) {
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
    fn probe_reply(&self, b: usize) -> Option<Probe> {
        let backend = &self.backends[b];
        backend.alive.then(|| Probe {
            taken_at: self.now,
            rif: backend.active(),
            latency_ms: backend.latency_at_rif(),
        })
    }

    /// Sends the replies to the probes of `probe_targets`: each describes its backend at
    /// the pick and arrives a round trip later, unless lost (a dead backend answers
    /// nothing). `chosen` is the picked backend's reply from before its new session, when
    /// it was probed: the only backend placing the session changed.
    fn send_probes(&mut self, p: usize, chosen: Option<(usize, Option<Probe>)>) {
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

    fn accept(&mut self, p: usize, b: usize, mut plan: SessionPlan, mut rng: SimRng) {
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
        backend.note_latency(first);
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
            proxy: p as u32,
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
    fn end(&mut self, id: u32, reason: EndReason) {
        let s = &mut self.sessions[id as usize];
        assert!(s.open, "session {id} ended twice");
        s.open = false;
        let (b, speaking) = (s.backend as usize, s.speaking);
        let (p, weight) = (s.proxy as usize, f64::from(s.weight));
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
        proxy.views[b].open -= 1;
        proxy.touched(b, self.now, &mut self.policy_rng);
        self.free_sessions.push(id);
    }

    fn phase(&mut self, id: u32) {
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

    /// Like an ORCA out-of-band stream, a backend reports when it (re)joins and then
    /// every interval, unless it is dead or its reports have gone stale.
    fn take_report(&mut self, b: usize) {
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
    fn deliver(&mut self, b: usize, report: Report, draining: bool) {
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

    fn die(&mut self, f: usize) {
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

    fn revive(&mut self, f: usize) {
        self.bring_up(self.sc.failures[f].backend as usize);
    }

    /// The slots of the sessions open on backend `b`.
    fn open_on(&self, b: usize) -> Vec<u32> {
        (0..self.sessions.len() as u32)
            .filter(|&id| {
                let s = &self.sessions[id as usize];
                s.open && s.backend as usize == b
            })
            .collect()
    }

    /// Backend `b`'s process goes: every session open on it ends with `reason`, and the
    /// balancer's health check notices a little later.
    fn take_down(&mut self, b: usize, reason: EndReason) {
        for id in self.open_on(b) {
            self.end(id, reason);
        }
        self.backends[b].die(self.now, &self.sc.cpu, self.costs);
        let check = self.now + self.sc.reports.health_check_s;
        self.queue.push(check, Event::HealthCheck(b as u32));
    }

    /// Backend `b` is back, empty; the health check notices a little later.
    fn bring_up(&mut self, b: usize) {
        self.backends[b].revive(self.now, &self.sc.cpu, self.costs);
        let check = self.now + self.sc.reports.health_check_s;
        self.queue.push(check, Event::HealthCheck(b as u32));
    }

    /// Every proxy's belief catches up with the truth: whether `b` takes new sessions
    /// (a draining backend fails its health check, as a dead one does).
    fn health_check(&mut self, b: usize) {
        let admitting = self.backends[b].admitting();
        let mut came_up = false;
        for proxy in &mut self.proxies {
            came_up |= proxy.believe(b, admitting, self.now, &mut self.policy_rng);
        }
        if came_up {
            self.take_report(b);
        }
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
        self.collector.finish(&self.backends)
    }
}
