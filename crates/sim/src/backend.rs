//! One simulated backend: its sessions, CPU, counters and latency.

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
    /// The last estimate, with the RIF and sample count it was made at: a probe between
    /// two changes reuses it.
    latency_cached: std::cell::Cell<(u64, usize, f32)>,
    /// The counted samples as (RIF, latency bits), ascending: a probe finds the nearest
    /// RIFs around its own instead of ranking them all.
    latency_sorted: [(u32, u32); LATENCY_SAMPLES],
    // Cold: read and written only when a session starts.
    /// The last [`LATENCY_SAMPLES`] sessions' (active sessions at their start, time to
    /// first stream in ms), oldest overwritten first, for a Prequal probe's latency at the
    /// current RIF.
    latency_ring: [(u32, f32); LATENCY_SAMPLES],
}

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

/// Recent sessions a probe's latency estimate is drawn from, and how many of those
/// nearest in RIF it takes the median of.
pub(crate) const LATENCY_SAMPLES: usize = 32;
pub(crate) const LATENCY_NEAREST: usize = 8;

/// A cache key no (RIF, sample count) pair matches: nothing cached.
const NO_LATENCY_CACHED: (u64, usize, f32) = (u64::MAX, 0, 0.0);

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
            latency_ring: [(0, 0.0); LATENCY_SAMPLES],
            latency_sorted: [(0, 0); LATENCY_SAMPLES],
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

    /// Remembers a session's time to first stream and the active sessions it started at.
    pub(crate) fn note_latency(&mut self, first_ms: f64) {
        let rif = u32::try_from(self.active()).unwrap_or(u32::MAX);
        let ms = first_ms as f32;
        let slot = self.latency_taken % LATENCY_SAMPLES;
        let mut len = self.latency_taken.min(LATENCY_SAMPLES);
        let sorted = &mut self.latency_sorted;
        if len == LATENCY_SAMPLES {
            let (r, old) = self.latency_ring[slot];
            let at = sorted
                .iter()
                .position(|&e| e == (r, old.to_bits()))
                .expect("every counted sample is in the sorted copy");
            sorted.copy_within(at + 1.., at);
            len -= 1;
        }
        let entry = (rif, ms.to_bits());
        let at = sorted[..len].partition_point(|&e| e < entry);
        sorted.copy_within(at..len, at + 1);
        sorted[at] = entry;
        self.latency_ring[slot] = (rif, ms);
        self.latency_taken += 1;
    }

    /// A Prequal probe's latency estimate at the current RIF: the median time to first
    /// stream of the [`LATENCY_NEAREST`] recent sessions whose RIF at start was nearest the
    /// current one; `None` before any session.
    pub(crate) fn latency_at_rif(&self) -> Option<f64> {
        let n = self.latency_taken.min(LATENCY_SAMPLES);
        if n == 0 {
            return None;
        }
        let rif = self.active();
        let (at_rif, at_taken, cached) = self.latency_cached.get();
        if (at_rif, at_taken) == (rif, self.latency_taken) {
            return Some(f64::from(cached));
        }
        // The samples are ranked by one word each, (distance in RIF) << 32 | latency bits:
        // latencies are ≥ 0, so their bits order as they do, and the key is a total order —
        // the selection is deterministic. (The distance fits 32 bits: both RIFs are at most
        // `max_sessions`.) The k smallest keys are among the samples within the k-th
        // smallest distance, a run of the RIF-sorted copy around `rif`: walk out from it k
        // times to the nearer side, then take in every sample tied at that distance.
        let sorted = &self.latency_sorted[..n];
        let distance = |i: usize| u64::from(sorted[i].0).abs_diff(rif);
        let k = n.min(LATENCY_NEAREST);
        let (mut lo, mut hi) = {
            let p = sorted.partition_point(|e| u64::from(e.0) < rif);
            (p, p)
        };
        let mut reach = 0;
        for _ in 0..k {
            let left = lo.checked_sub(1).map(distance);
            let right = (hi < n).then(|| distance(hi));
            match (left, right) {
                (Some(l), Some(r)) if l <= r => (lo, reach) = (lo - 1, l),
                (Some(l), None) => (lo, reach) = (lo - 1, l),
                (_, Some(r)) => (hi, reach) = (hi + 1, r),
                (None, None) => unreachable!("k ≤ n samples"),
            }
        }
        while lo > 0 && distance(lo - 1) <= reach {
            lo -= 1;
        }
        while hi < n && distance(hi) <= reach {
            hi += 1;
        }
        // The k smallest keys of that run, kept sorted by insertion.
        let mut nearest = [u64::MAX; LATENCY_NEAREST];
        for &(r, ms) in &sorted[lo..hi] {
            let distance = u64::from(r).abs_diff(rif).min(u64::from(u32::MAX));
            let key = distance << 32 | u64::from(ms);
            if key < nearest[LATENCY_NEAREST - 1] {
                let mut j = LATENCY_NEAREST - 1;
                while j > 0 && nearest[j - 1] > key {
                    nearest[j] = nearest[j - 1];
                    j -= 1;
                }
                nearest[j] = key;
            }
        }
        let mut latencies = [0u32; LATENCY_NEAREST];
        for (ms, key) in latencies.iter_mut().zip(&nearest[..k]) {
            *ms = *key as u32; // the low word
        }
        let latencies = &mut latencies[..k];
        latencies.sort_unstable();
        let median = f32::from_bits(latencies[(k - 1) / 2]);
        self.latency_cached.set((rif, self.latency_taken, median));
        Some(f64::from(median))
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

    /// The estimate by its definition, from the ring alone: rank every counted sample by
    /// (distance in RIF, latency bits), take the eight smallest, their median latency.
    fn latency_by_definition(b: &Backend) -> Option<f64> {
        let n = b.latency_taken.min(LATENCY_SAMPLES);
        if n == 0 {
            return None;
        }
        let mut ranked: Vec<(u64, u32)> = b.latency_ring[..n]
            .iter()
            .map(|&(r, ms)| (u64::from(r).abs_diff(b.active()), ms.to_bits()))
            .collect();
        ranked.sort_unstable();
        let mut nearest: Vec<u32> = ranked[..n.min(LATENCY_NEAREST)]
            .iter()
            .map(|e| e.1)
            .collect();
        nearest.sort_unstable();
        Some(f64::from(f32::from_bits(nearest[(nearest.len() - 1) / 2])))
    }

    proptest::proptest! {
        /// Sessions noted at RIFs and latencies drawn from small sets (ties in both), the
        /// ring wrapping many times, deaths in between: every estimate is the definition's.
        #[test]
        fn latency_at_rif_is_its_definition(
            ops in proptest::collection::vec((0u8..10, 0u64..12, 0u8..6), 1..300)
        ) {
            let mut b = backend();
            let cpu = Cpu::default();
            for (op, rif, ms) in ops {
                b.open = rif;
                match op {
                    0 => {
                        b.open = 0;
                        b.die(1.0, &cpu, (0.0, 0.0));
                        b.revive(2.0, &cpu, (0.0, 0.0));
                    }
                    1..=3 => {}
                    _ => b.note_latency(f64::from(ms) * 10.0),
                }
                proptest::prop_assert_eq!(b.latency_at_rif(), latency_by_definition(&b));
            }
        }
    }

    #[test]
    fn latency_at_rif_is_the_median_of_the_nearest_eight_in_rif() {
        let mut b = backend();
        assert_eq!(b.latency_at_rif(), None, "no session yet");
        // Sessions started at RIF 1..=20 with latency 10 × RIF ms.
        for rif in 1..=20u64 {
            b.open = rif;
            b.note_latency(10.0 * rif as f64);
        }
        // At RIF 20 the nearest eight are 13..=20: median (4th of 8) = 160 ms.
        assert_eq!(b.latency_at_rif(), Some(160.0));
        // At RIF 5: 1..=9 within 4, the eight nearest are 1..=9 minus the farther of 1 and
        // 9 by the latency tie-break (9 → 90 ms goes): 10..80, median 40 ms.
        b.open = 5;
        assert_eq!(b.latency_at_rif(), Some(40.0));
        // A new sample invalidates the cached answer even at the same RIF.
        for _ in 0..8 {
            b.note_latency(1000.0);
        }
        assert_eq!(b.latency_at_rif(), Some(1000.0));
        // Only the last 32 samples count.
        for _ in 0..LATENCY_SAMPLES {
            b.note_latency(7.0);
        }
        assert_eq!(b.latency_at_rif(), Some(7.0));
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
