//! Prequal's hot-cold lexicographic rule over a pool of asynchronous probes.

use super::{BackendView, Policy, Probe, two_choices};
use crate::SimRng;

/// Google's Prequal (Wydrowski et al., "Load is not what you should balance", NSDI 2024),
/// its selection rule HCL with asynchronous probing:
///
/// * each query sends 3 probes (`r_probe`) to random backends; a reply carries the
///   backend's requests in flight (RIF — here its active sessions) and its latency at that
///   RIF (the product's `PrequalEstimator` selection), and joins a pool of at most 16 (the
///   oldest leaves when it is full);
/// * probes older than 1 s are discarded, and each query removes one more,
///   alternately the oldest and the worst;
/// * a probe is *hot* when its RIF is above the `q_rif` quantile of the pool's RIFs; the
///   pick is the cold probe with the lowest latency (the lower RIF on a tie; a reply with
///   no latency — no fresh session near the backend's RIF — counts as 0 ms, as prequal-rs
///   reads the product's `0` header). The paper falls back to the lowest RIF when every
///   probe is hot, which cannot happen here: the quantile is taken over the pool itself,
///   so the probe holding it is cold. With fewer than 2 probes the pick is uniformly
///   random;
/// * the picked probe is reused with its RIF incremented by this send.
///
/// The paper sets `q_rif` = 2^−0.25 ≈ 0.84; prequal-rs defaults to 0.6, having seen 0.84
/// herd at high load. Prequal ignores reports, slot counts and CPU.
#[derive(Debug)]
pub struct PrequalHcl {
    name: &'static str,
    q_rif: f64,
    pool: Vec<Pooled>,
    remove_oldest_next: bool,
    rifs: Vec<u64>,
}

/// A probe in the pool.
#[derive(Debug, Clone, Copy)]
struct Pooled {
    backend: u32,
    rif: u64,
    latency_ms: f64,
    taken_at: f64,
}

/// Probes sent per query (the paper's r_probe).
pub(crate) const PROBES_PER_QUERY: usize = 3;
/// Largest pool.
pub(crate) const POOL: usize = 16;
/// Oldest probe kept, seconds.
pub(crate) const MAX_AGE_S: f64 = 1.0;

impl PrequalHcl {
    /// The policy reported as `name`, hot above the `q_rif` quantile.
    pub fn new(name: &'static str, q_rif: f64) -> Self {
        Self {
            name,
            q_rif,
            pool: Vec::with_capacity(POOL + 1),
            remove_oldest_next: true,
            rifs: Vec::with_capacity(POOL),
        }
    }

    /// The `q_rif` quantile (nearest rank) of the pool's RIFs.
    fn hot_above(&mut self) -> u64 {
        self.rifs.clear();
        self.rifs.extend(self.pool.iter().map(|p| p.rif));
        let n = self.rifs.len();
        let rank = ((self.q_rif * n as f64).ceil() as usize).clamp(1, n);
        // The value whose run in sorted order covers `rank`: fewer than `rank` lie below
        // it and at least `rank` at or below it. Counted, not sorted — at most 16 values,
        // and the counts run without a branch on the data, where a sort of RIFs that
        // differ every pick mispredicted its way through a tenth of a run at scale.
        let rifs = &self.rifs;
        *rifs
            .iter()
            .find(|&&v| {
                let below = rifs.iter().filter(|&&x| x < v).count();
                let at_or_below = rifs.iter().filter(|&&x| x <= v).count();
                below < rank && rank <= at_or_below
            })
            .expect("some value holds every rank of 1..=n")
    }

    /// The pool index HCL picks: the fastest cold probe (`hot_above` is a pool RIF, so
    /// at least its probe is cold).
    fn best(&self, hot_above: u64) -> usize {
        (0..self.pool.len())
            .filter(|&i| self.pool[i].rif <= hot_above)
            .min_by(|&a, &b| {
                let (pa, pb) = (&self.pool[a], &self.pool[b]);
                pa.latency_ms
                    .total_cmp(&pb.latency_ms)
                    .then(pa.rif.cmp(&pb.rif))
            })
            .expect("the probe at the quantile is cold")
    }

    /// The probe HCL would pick last: the hottest if any is hot, else the slowest.
    fn worst(&self, hot_above: u64) -> usize {
        let hottest = (0..self.pool.len())
            .filter(|&i| self.pool[i].rif > hot_above)
            .max_by_key(|&i| self.pool[i].rif);
        hottest.unwrap_or_else(|| {
            (0..self.pool.len())
                .max_by(|&a, &b| self.pool[a].latency_ms.total_cmp(&self.pool[b].latency_ms))
                .expect("a non-empty pool")
        })
    }

    fn oldest(&self) -> usize {
        (0..self.pool.len())
            .min_by(|&a, &b| self.pool[a].taken_at.total_cmp(&self.pool[b].taken_at))
            .expect("a non-empty pool")
    }
}

impl Policy for PrequalHcl {
    fn name(&self) -> &'static str {
        self.name
    }

    fn pick(&mut self, now: f64, backends: &[BackendView], rng: &mut SimRng) -> Option<usize> {
        self.pool
            .retain(|p| now - p.taken_at <= MAX_AGE_S && backends[p.backend as usize].alive);
        if self.pool.len() < 2 {
            return two_choices(backends, rng).map(|(a, _)| a);
        }
        let hot_above = self.hot_above();
        let chosen = self.best(hot_above);
        let backend = self.pool[chosen].backend as usize;
        self.pool[chosen].rif += 1;
        let gone = if self.remove_oldest_next {
            self.oldest()
        } else {
            self.worst(hot_above)
        };
        self.remove_oldest_next = !self.remove_oldest_next;
        self.pool.swap_remove(gone);
        Some(backend)
    }

    fn probe(
        &mut self,
        _now: f64,
        backends: &[BackendView],
        rng: &mut SimRng,
        out: &mut Vec<usize>,
    ) {
        for _ in 0..PROBES_PER_QUERY {
            let b = rng.below(backends.len());
            if backends[b].alive {
                out.push(b);
            }
        }
    }

    fn on_probe(&mut self, backend: usize, probe: &Probe, _now: f64) {
        if self.pool.len() >= POOL {
            let oldest = self.oldest();
            self.pool.swap_remove(oldest);
        }
        self.pool.push(Pooled {
            backend: backend as u32,
            rif: probe.rif,
            latency_ms: probe.latency_ms.unwrap_or(0.0),
            taken_at: probe.taken_at,
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    proptest::proptest! {
        /// The counted quantile is the nearest-rank quantile of the sorted RIFs.
        #[test]
        fn hot_above_is_the_nearest_rank_quantile(
            rifs in proptest::collection::vec(0u64..6, 1..=POOL),
            q in 0.01..=1.0f64,
        ) {
            let mut p = PrequalHcl::new("test", q);
            for (i, &rif) in rifs.iter().enumerate() {
                let probe = Probe { taken_at: 0.0, rif, latency_ms: Some(i as f64) };
                p.on_probe(i, &probe, 0.0);
            }
            let mut sorted = rifs.clone();
            sorted.sort_unstable();
            let rank = ((q * rifs.len() as f64).ceil() as usize).clamp(1, rifs.len());
            proptest::prop_assert_eq!(p.hot_above(), sorted[rank - 1]);
        }
    }
}
