//! One simulated backend: its sessions, CPU, counters and latency.

use livecount_capacity::{PrequalLatency, PrequalSample};

use crate::SimRng;
use crate::scenario::{BackendGroup, Cpu, Latency};

/// The truth about one backend (the balancer sees only its reports).
///
/// Laid out by use, in cache lines (`repr(C)`, checked below): what every session start,
/// end and phase change reads and writes comes first, in [`Backend::HOT_LINES`] lines the
/// engine fetches ahead of an event; what only an arrival, a report or a probe needs
/// follows. At 10 000 backends the table outgrows the cache, and a field order chosen by
/// the compiler spread the hot fields over more lines than an event has time to wait for.
#[derive(Debug)]
#[repr(C, align(64))]
pub(crate) struct Backend {
    // Line 1.
    /// Open sessions: the truth. (A death finds them by scanning the session table: deaths
    /// are rare, and a per-backend list cost a cache miss on every end.)
    pub(crate) open: u64,
    /// Sum of the cost factors of the open sessions, and of those speaking right now
    /// (short ones included): the load is a weighted count. With every factor 1 these
    /// are whole numbers, exact in `f64`.
    pub(crate) weight: f64,
    pub(crate) speaking: f64,
    /// Utilisation now, and its time integral since the last report.
    pub(crate) utilisation: f64,
    integral: f64,
    last_change: f64,
    /// How many of the [`CPU_SAMPLES`] point samples have been taken.
    cpu_taken: u64,
    pub(crate) size: f64,
    // Line 2.
    base_utilisation: f64,
    /// The last [`CPU_SAMPLES`] point samples of utilisation, taken every
    /// [`CPU_SAMPLE_S`] (LiveKit's worker load).
    cpu_samples: [f64; CPU_SAMPLES],
    /// The exactly-once counter, maintained on its own ending paths (checked against
    /// `open`).
    pub(crate) tracked: u64,
    /// The naive counter: decremented on clean closes only.
    pub(crate) naive: u64,
    // Line 3.
    pub(crate) alive: bool,
    /// Told to restart in `drain` mode: alive, serving its open sessions, admitting none.
    pub(crate) draining: bool,
    /// Deaths so far: a response scheduled before one never arrives.
    pub(crate) deaths: u32,
    pub(crate) max_sessions: u32,
    /// Extra share of long sessions cut on this backend's network path.
    pub(crate) disconnect_share: f64,
    /// Latency multiplier the CPU does not show.
    slowdown: f64,
    /// Arrival instants within the report window (oldest first).
    arrivals: std::collections::VecDeque<f64>,
    // Line 4 on: reports and probes.
    since: f64,
    /// How many sessions' latencies have been noted (the last [`LATENCY_SAMPLES`] count).
    latency_taken: usize,
    /// The last estimate, with the RIF, sample count and whole second it was made at: a
    /// probe between two changes reuses it (ages move only with the whole second).
    latency_cached: std::cell::Cell<LatencyCached>,
    // Cold: written when a session starts, read by a probe the cache cannot answer.
    /// The last [`LATENCY_SAMPLES`] sessions' samples, oldest overwritten first, for a
    /// Prequal probe's latency at the current RIF.
    latency_ring: [RingSample; LATENCY_SAMPLES],
}

/// One session's Prequal sample as a backend keeps it: the product's estimator's
/// (RIF, latency in whole µs, time stamp in whole seconds), the stamp in simulated time.
#[derive(Debug, Clone, Copy, Default)]
struct RingSample {
    /// Active sessions at its start, itself included.
    rif: u32,
    /// Time to first stream, whole microseconds (saturating: about 71 minutes).
    latency_us: u32,
    /// The whole simulated second it started in.
    at_s: u32,
}

/// `(rif, sample count, whole second, estimate ms)`: the key a cached estimate was made at.
type LatencyCached = (u64, usize, u64, Option<f64>);

const _: () = {
    assert!(std::mem::offset_of!(Backend, base_utilisation) == 64);
    assert!(std::mem::offset_of!(Backend, alive) == 128);
    assert!(std::mem::offset_of!(Backend, since) == 192);
};

/// `raw`ᵉˣᵖᵒⁿᵉⁿᵗ: by multiplication for a whole exponent up to 16 (the default is 4, and
/// `powf` was a tenth of a run at scale), by `powf` otherwise.
fn overhead_curve(raw: f64, exponent: f64) -> f64 {
    if exponent.fract() == 0.0 && (0.0..=16.0).contains(&exponent) {
        raw.powi(exponent as i32)
    } else {
        raw.powf(exponent)
    }
}

/// LiveKit agents: the worker's load is the mean of 5 CPU samples taken every 0.5 s.
pub(crate) const CPU_SAMPLES: usize = 5;
pub(crate) const CPU_SAMPLE_S: f64 = 0.5;

/// Recent sessions a probe's latency estimate is drawn from: as many as the product's
/// `PrequalEstimator` holds.
pub(crate) const LATENCY_SAMPLES: usize = PrequalLatency::SAMPLES;

/// A cache key no (RIF, sample count, second) matches: nothing cached.
const NO_LATENCY_CACHED: LatencyCached = (u64::MAX, 0, 0, None);

impl Backend {
    /// The cache lines a session's start, end or phase change touches (the first three).
    pub(crate) const HOT_LINES: usize = 3;
    /// The cache lines a probe reply reads: all but the latency ring.
    pub(crate) const PROBE_LINES: usize = std::mem::offset_of!(Backend, latency_ring).div_ceil(64);

    pub(crate) fn new(group: &BackendGroup) -> Self {
        let mut b = Self {
            size: group.size,
            max_sessions: group.max_sessions,
            base_utilisation: group.base_utilisation,
            disconnect_share: group.disconnect_share,
            alive: true,
            draining: false,
            deaths: 0,
            open: 0,
            weight: 0.0,
            speaking: 0.0,
            slowdown: group.slowdown,
            tracked: 0,
            naive: 0,
            utilisation: 0.0,
            integral: 0.0,
            since: 0.0,
            last_change: 0.0,
            arrivals: Default::default(),
            cpu_samples: [0.0; CPU_SAMPLES],
            cpu_taken: 0,
            latency_ring: [RingSample::default(); LATENCY_SAMPLES],
            latency_taken: 0,
            latency_cached: std::cell::Cell::new(NO_LATENCY_CACHED),
        };
        b.utilisation = b.base_utilisation;
        b
    }

    pub(crate) fn active(&self) -> u64 {
        self.open
    }

    /// Whether it takes new sessions: alive and not draining.
    pub(crate) fn admitting(&self) -> bool {
        self.alive && !self.draining
    }

    /// Recomputes utilisation after a change at `now`, integrating the old value first.
    pub(crate) fn refresh(&mut self, now: f64, cpu: &Cpu, costs: (f64, f64), wave: bool) {
        self.sample_cpu_to(now);
        self.integral += self.utilisation * (now - self.last_change).max(0.0);
        self.last_change = now;
        if !self.alive {
            self.utilisation = 0.0;
            return;
        }
        if self.open == 0 {
            // No rounding residue survives an empty backend.
            (self.weight, self.speaking) = (0.0, 0.0);
        }
        let all = self.weight;
        let speaking = if wave { all } else { self.speaking.min(all) };
        let (idle_cost, speaking_cost) = costs;
        let load = (all - speaking).max(0.0) * idle_cost + speaking * speaking_cost;
        let raw = self.base_utilisation + load / self.size;
        self.utilisation = (raw + cpu.overhead * overhead_curve(raw, cpu.exponent)).min(1.0);
    }

    /// Takes the point samples of utilisation due in `(last_change, now]`: the value held
    /// since the last change (at most the last [`CPU_SAMPLES`] of them matter).
    fn sample_cpu_to(&mut self, now: f64) {
        let due = (now / CPU_SAMPLE_S).floor() as u64 + 1; // samples at 0, 0.5 s, … ≤ now
        let missing = due.saturating_sub(self.cpu_taken);
        for _ in 0..missing.min(CPU_SAMPLES as u64) {
            self.cpu_samples[(self.cpu_taken % CPU_SAMPLES as u64) as usize] = self.utilisation;
            self.cpu_taken += 1;
        }
        self.cpu_taken = self.cpu_taken.max(due);
    }

    /// The mean of the last [`CPU_SAMPLES`] point samples up to `now` (fewer at the start).
    pub(crate) fn recent_utilisation(&mut self, now: f64) -> f64 {
        self.sample_cpu_to(now);
        let n = self.cpu_taken.min(CPU_SAMPLES as u64) as usize;
        if n == 0 {
            return self.utilisation;
        }
        self.cpu_samples[..n].iter().sum::<f64>() / n as f64
    }

    /// Remembers a session that started at `now` with its time to first stream and the
    /// active sessions it started at (itself included), as the product's estimator
    /// records one: RIF, whole microseconds, whole seconds.
    pub(crate) fn note_latency(&mut self, now: f64, first_ms: f64) {
        let slot = self.latency_taken % LATENCY_SAMPLES;
        self.latency_ring[slot] = RingSample {
            rif: u32::try_from(self.active()).unwrap_or(u32::MAX),
            // `as` saturates (and reads NaN as 0); µs are truncated, as the product does.
            latency_us: (first_ms * 1000.0) as u32,
            at_s: now as u32,
        };
        self.latency_taken += 1;
    }

    /// A Prequal probe's latency estimate at the current RIF at `now`, in ms: the product
    /// estimator's ([`PrequalLatency::estimate`] over the last [`LATENCY_SAMPLES`] sessions,
    /// fresh for its default window in simulated seconds); `None` when no fresh sample is
    /// near the current RIF.
    pub(crate) fn latency_at_rif(&self, now: f64) -> Option<f64> {
        let n = self.latency_taken.min(LATENCY_SAMPLES);
        if n == 0 {
            return None;
        }
        let (rif, second) = (self.active(), now as u64);
        let (at_rif, at_taken, at_second, cached) = self.latency_cached.get();
        if (at_rif, at_taken, at_second) == (rif, self.latency_taken, second) {
            return cached;
        }
        let mut samples = [PrequalSample {
            rif: 0,
            latency_us: 0,
            age_s: 0,
        }; LATENCY_SAMPLES];
        for (sample, kept) in samples.iter_mut().zip(&self.latency_ring[..n]) {
            *sample = PrequalSample {
                rif: u64::from(kept.rif),
                latency_us: u64::from(kept.latency_us),
                age_s: second.saturating_sub(u64::from(kept.at_s)),
            };
        }
        let estimate =
            PrequalLatency::estimate(rif, &mut samples[..n], PrequalLatency::DEFAULT_MAX_AGE_S);
        let ms = estimate.median_us.map(|us| us / 1000.0);
        self.latency_cached
            .set((rif, self.latency_taken, second, ms));
        ms
    }

    /// Mean utilisation since the previous report; starts the next interval.
    pub(crate) fn take_utilisation(&mut self, now: f64) -> f64 {
        self.integral += self.utilisation * (now - self.last_change).max(0.0);
        self.last_change = now;
        let span = now - self.since;
        let mean = if span > 0.0 {
            self.integral / span
        } else {
            self.utilisation
        };
        self.integral = 0.0;
        self.since = now;
        mean.clamp(0.0, 1.0)
    }

    pub(crate) fn note_arrival(&mut self, now: f64) {
        self.arrivals.push_back(now);
    }

    /// Arrivals in `(now − window, now]`.
    pub(crate) fn arrivals_in_window(&mut self, now: f64, window: f64) -> u64 {
        while self.arrivals.front().is_some_and(|&t| t <= now - window) {
            self.arrivals.pop_front();
        }
        self.arrivals.len() as u64
    }

    /// Startup latency and time to first stream (ms) for a session starting now:
    /// exponential with mean `base × slowdown ÷ (1 − ρ)`, ρ = utilisation capped at 0.98
    /// (M/M/1).
    pub(crate) fn latencies(&self, latency: &Latency, rng: &mut SimRng) -> (f64, f64) {
        let slowdown = self.slowdown / (1.0 - self.utilisation.min(0.98));
        let startup = rng.exponential(latency.startup_ms * slowdown);
        let first = startup + rng.exponential(latency.first_stream_ms * slowdown);
        (startup, first)
    }

    /// The backend dies, after the engine has ended each of its sessions: the process
    /// goes, and with it any ghosts in its naive counter.
    pub(crate) fn die(&mut self, now: f64, cpu: &Cpu, costs: (f64, f64)) {
        debug_assert!(self.open == 0 && self.tracked == 0);
        self.alive = false;
        self.draining = false;
        self.deaths += 1;
        (self.weight, self.speaking) = (0.0, 0.0);
        self.naive = 0;
        // The new process has no latency history; the count restarts, so the cached answer,
        // keyed by it, must go too.
        self.latency_taken = 0;
        self.latency_cached.set(NO_LATENCY_CACHED);
        self.arrivals.clear();
        self.refresh(now, cpu, costs, false);
    }

    /// Back, empty, with fresh counters.
    pub(crate) fn revive(&mut self, now: f64, cpu: &Cpu, costs: (f64, f64)) {
        self.alive = true;
        self.integral = 0.0;
        self.since = now;
        self.refresh(now, cpu, costs, false);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Scenario;

    fn backend() -> Backend {
        let s = Scenario::from_toml_str(
            "description = 'x'\nduration_s = 1\n[arrivals]\nrate_per_s = 1\n\
             [sessions]\nduration = 'fixed'\nmean_s = 1\n[[backends]]\ncount = 1\n\
             base_utilisation = 0.0",
            "b.toml",
        )
        .expect("valid");
        Backend::new(&s.backends[0])
    }

    #[test]
    fn the_overhead_curve_is_the_power_whole_or_not() {
        for raw in [0.0, 0.3, 0.75, 1.0, 1.7] {
            for e in [0.0, 1.0, 2.0, 4.0, 16.0, 0.5, 2.5, 17.0] {
                let (got, want) = (overhead_curve(raw, e), f64::powf(raw, e));
                assert!(
                    (got - want).abs() <= 1e-12 * want.max(1.0),
                    "{raw}^{e}: {got} {want}"
                );
            }
        }
    }

    /// The product's estimate over a plain history of `(rif, latency µs, second)` since the
    /// last death: the last [`LATENCY_SAMPLES`], aged in whole simulated seconds.
    fn latency_by_history(history: &[(u64, u64, u64)], rif: u64, now: f64) -> Option<f64> {
        let last = &history[history.len().saturating_sub(LATENCY_SAMPLES)..];
        let mut samples: Vec<PrequalSample> = last
            .iter()
            .map(|&(rif, latency_us, at_s)| PrequalSample {
                rif,
                latency_us,
                age_s: now as u64 - at_s,
            })
            .collect();
        PrequalLatency::estimate(rif, &mut samples, 120)
            .median_us
            .map(|us| us / 1000.0)
    }

    proptest::proptest! {
        /// Sessions noted at RIFs and latencies drawn from small sets (ties in both), the
        /// ring wrapping many times, simulated time passing (samples going stale), deaths
        /// in between: every estimate is the product's over the same history.
        #[test]
        fn latency_at_rif_is_the_products_estimate(
            ops in proptest::collection::vec((0u8..12, 0u64..12, 0u8..6), 1..400)
        ) {
            let mut b = backend();
            let cpu = Cpu::default();
            let (mut history, mut now) = (Vec::new(), 0.0f64);
            for (op, rif, ms) in ops {
                b.open = rif;
                match op {
                    0 => {
                        b.open = 0;
                        b.die(now, &cpu, (0.0, 0.0));
                        b.revive(now, &cpu, (0.0, 0.0));
                        history.clear();
                    }
                    1..=2 => {}
                    3 => now += f64::from(ms) * 13.7,
                    _ => {
                        let first_ms = f64::from(ms) * 10.0 + 0.0007;
                        b.note_latency(now, first_ms);
                        history.push((rif, (first_ms * 1000.0) as u64, now as u64));
                    }
                }
                proptest::prop_assert_eq!(
                    b.latency_at_rif(now),
                    latency_by_history(&history, rif, now)
                );
            }
        }
    }

    #[test]
    fn latency_at_rif_is_the_product_estimators() {
        let mut b = backend();
        assert_eq!(b.latency_at_rif(0.0), None, "no session yet");
        // Sessions started at RIF 1..=20 with latency 10 × RIF ms.
        for rif in 1..=20u64 {
            b.open = rif;
            b.note_latency(0.5, 10.0 * rif as f64);
        }
        // At RIF 20 the near ones are 15..=25: 15..=20, median (170 + 180) / 2.
        assert_eq!(b.latency_at_rif(1.0), Some(175.0));
        // At RIF 8 (±2): 6..=10, median 80 ms.
        b.open = 8;
        assert_eq!(b.latency_at_rif(1.0), Some(80.0));
        // Nothing near RIF 40 (±10): no estimate, though there are samples.
        b.open = 40;
        assert_eq!(b.latency_at_rif(1.0), None);
        // A new sample invalidates the cached answer even at the same RIF and second.
        b.open = 8;
        for _ in 0..16 {
            b.note_latency(1.0, 1000.0);
        }
        assert_eq!(b.latency_at_rif(1.0), Some(1000.0), "17 at distance 0");
        // Fresh for 120 whole simulated seconds: the first twenty (second 0) until 120.99 s,
        // the sixteen (second 1) until 121.99 s.
        b.open = 20;
        assert_eq!(b.latency_at_rif(120.99), Some(175.0));
        assert_eq!(b.latency_at_rif(121.0), None, "the first twenty stale");
        b.open = 8;
        assert_eq!(b.latency_at_rif(121.99), Some(1000.0));
        assert_eq!(b.latency_at_rif(122.0), None, "all stale");
        // Only the last LATENCY_SAMPLES samples count.
        for _ in 0..LATENCY_SAMPLES {
            b.note_latency(200.0, 7.0);
        }
        assert_eq!(b.latency_at_rif(200.0), Some(7.0));
    }

    #[test]
    fn recent_utilisation_is_the_mean_of_the_last_five_half_second_samples() {
        let mut b = backend();
        let cpu = Cpu::default();
        b.open = 1;
        b.weight = 1.0;
        // 0.3 cores of load from t = 0.2: the sample at 0 saw none, the one at 0.5 sees it.
        b.refresh(
            0.2,
            &Cpu {
                overhead: 0.0,
                ..cpu
            },
            (0.3, 0.3),
            false,
        );
        assert!((b.recent_utilisation(0.6) - 0.15).abs() < 1e-12);
        // At 1.2 s the load doubles: samples at 1.5, 2.0 (and later) see 0.6.
        b.refresh(
            1.2,
            &Cpu {
                overhead: 0.0,
                ..cpu
            },
            (0.6, 0.6),
            false,
        );
        // Samples by 2.0 s: 0 → 0, 0.5 and 1.0 → 0.3, 1.5 and 2.0 → 0.6: mean 0.36.
        let u = b.recent_utilisation(2.0);
        assert!((u - 0.36).abs() < 1e-12, "{u}");
        // By 3.9 s the last five (2.0 … 3.5) are all 0.6.
        assert!((b.recent_utilisation(3.9) - 0.6).abs() < 1e-12);
    }
}
