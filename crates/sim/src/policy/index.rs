//! Indexes that let a policy pick in O(log n) instead of scanning every backend: the
//! lowest score with random tie-breaking, weighted sampling, and a set to draw from.
//!
//! Each is kept current from [`super::Policy::on_view`], which the engine calls after
//! every change of a view.

use std::cmp::Ordering;
use std::collections::BTreeSet;

use crate::SimRng;

/// An `f64` ordered by [`f64::total_cmp`] (scores are finite; this only makes them `Ord`).
#[derive(Debug, Clone, Copy, PartialEq)]
struct Key(f64);

impl Eq for Key {}
impl PartialOrd for Key {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}
impl Ord for Key {
    fn cmp(&self, other: &Self) -> Ordering {
        self.0.total_cmp(&other.0)
    }
}

/// Backends by score, lowest first. Each entry carries a tie-breaker drawn uniformly when
/// its score was set, so among backends tied on the lowest score each is equally likely to
/// come first: no tie favours low indices.
#[derive(Debug)]
pub(crate) struct MinIndex {
    set: BTreeSet<(Key, u64, u32)>,
    entry: Vec<Option<(Key, u64)>>,
}

impl MinIndex {
    pub(crate) fn new(backends: usize) -> Self {
        Self {
            set: BTreeSet::new(),
            entry: vec![None; backends],
        }
    }

    /// Sets backend `i`'s score (`None` = not a candidate). An unchanged score keeps its
    /// tie-breaker (and costs no draw).
    pub(crate) fn set(&mut self, i: usize, score: Option<f64>, rng: &mut SimRng) {
        let old = self.entry[i];
        if old.map(|(k, _)| k) == score.map(Key) {
            return;
        }
        if let Some((k, t)) = old {
            self.set.remove(&(k, t, i as u32));
        }
        self.entry[i] = score.map(|s| {
            let t = rng.next_u64();
            self.set.insert((Key(s), t, i as u32));
            (Key(s), t)
        });
    }

    /// The candidate with the lowest score.
    pub(crate) fn min(&self) -> Option<usize> {
        self.set.first().map(|&(_, _, i)| i as usize)
    }
}

/// Weighted sampling over backends by a Fenwick tree of weights: O(log n) to change a
/// weight or draw.
#[derive(Debug)]
pub(crate) struct WeightTree {
    tree: Vec<f64>,
    weight: Vec<f64>,
}

impl WeightTree {
    pub(crate) fn new(backends: usize) -> Self {
        Self {
            tree: vec![0.0; backends + 1],
            weight: vec![0.0; backends],
        }
    }

    /// Sets backend `i`'s weight (≥ 0, finite).
    pub(crate) fn set(&mut self, i: usize, w: f64) {
        debug_assert!(w >= 0.0 && w.is_finite(), "weight {w}");
        let delta = w - self.weight[i];
        if delta == 0.0 {
            return;
        }
        self.weight[i] = w;
        let mut k = i + 1;
        while k < self.tree.len() {
            self.tree[k] += delta;
            k += k & k.wrapping_neg();
        }
    }

    /// Sets every weight at once, `weight(i)` for backend `i` (each ≥ 0, finite), in O(n):
    /// also clears the rounding that many [`WeightTree::set`] calls leave in the sums.
    pub(crate) fn rebuild(&mut self, mut weight: impl FnMut(usize) -> f64) {
        let n = self.weight.len();
        for i in 0..n {
            let w = weight(i);
            debug_assert!(w >= 0.0 && w.is_finite(), "weight {w}");
            self.weight[i] = w;
            self.tree[i + 1] = w;
        }
        for k in 1..=n {
            let parent = k + (k & k.wrapping_neg());
            if parent <= n {
                self.tree[parent] += self.tree[k];
            }
        }
    }

    /// Backend `i`'s weight.
    pub(crate) fn weight(&self, i: usize) -> f64 {
        self.weight[i]
    }

    /// The sum of every weight.
    pub(crate) fn total(&self) -> f64 {
        let mut k = self.weight.len();
        let mut sum = 0.0;
        while k > 0 {
            sum += self.tree[k];
            k &= k - 1;
        }
        sum.max(0.0)
    }

    /// The backend whose share of the cumulative weight holds `u` ∈ [0, total): each is
    /// chosen with probability weight ÷ total. `None` when every weight is 0.
    pub(crate) fn find(&self, mut u: f64) -> Option<usize> {
        let n = self.weight.len();
        let mut pos = 0;
        let mut step = n.next_power_of_two();
        while step > 0 {
            let next = pos + step;
            if next <= n && self.tree[next] <= u {
                pos = next;
                u -= self.tree[next];
            }
            step >>= 1;
        }
        // `pos` backends lie wholly below u; the next one holds it, unless rounding
        // carried u past the end or onto a zero weight: then the nearest positive below.
        if pos < n && self.weight[pos] > 0.0 {
            return Some(pos);
        }
        (0..pos.min(n)).rev().find(|&i| self.weight[i] > 0.0)
    }
}

/// A set of backends with O(1) insert, remove and uniform draw.
#[derive(Debug)]
pub(crate) struct DrawSet {
    members: Vec<u32>,
    at: Vec<u32>,
}

const ABSENT: u32 = u32::MAX;

impl DrawSet {
    pub(crate) fn new(backends: usize) -> Self {
        Self {
            members: Vec::with_capacity(backends),
            at: vec![ABSENT; backends],
        }
    }

    /// Puts `i` in the set or takes it out.
    pub(crate) fn set(&mut self, i: usize, member: bool) {
        match (self.at[i] != ABSENT, member) {
            (false, true) => {
                self.at[i] = self.members.len() as u32;
                self.members.push(i as u32);
            }
            (true, false) => {
                let pos = self.at[i] as usize;
                self.members.swap_remove(pos);
                if let Some(&moved) = self.members.get(pos) {
                    self.at[moved as usize] = pos as u32;
                }
                self.at[i] = ABSENT;
            }
            _ => {}
        }
    }

    pub(crate) fn len(&self) -> usize {
        self.members.len()
    }

    /// A uniformly random member.
    pub(crate) fn draw(&self, rng: &mut SimRng) -> Option<usize> {
        if self.members.is_empty() {
            return None;
        }
        Some(self.members[rng.below(self.members.len())] as usize)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn min_index_breaks_ties_uniformly_and_follows_updates() {
        let mut rng = SimRng::new(3);
        let mut firsts = [0usize; 3];
        for _ in 0..3000 {
            let mut m = MinIndex::new(4);
            m.set(3, Some(5.0), &mut rng);
            for i in 0..3 {
                m.set(i, Some(1.0), &mut rng);
            }
            firsts[m.min().unwrap()] += 1;
        }
        assert!(
            firsts.iter().all(|&c| (850..1150).contains(&c)),
            "{firsts:?}"
        );
        let mut m = MinIndex::new(3);
        m.set(0, Some(2.0), &mut rng);
        m.set(1, Some(1.0), &mut rng);
        assert_eq!(m.min(), Some(1));
        m.set(1, Some(3.0), &mut rng);
        assert_eq!(m.min(), Some(0));
        m.set(0, None, &mut rng);
        assert_eq!(m.min(), Some(1));
        m.set(1, None, &mut rng);
        assert_eq!(m.min(), None);
        m.set(2, Some(-4.0), &mut rng);
        assert_eq!(m.min(), Some(2));
    }

    #[test]
    fn weight_tree_draws_in_proportion_and_skips_zeros() {
        let mut t = WeightTree::new(5);
        for (i, w) in [(0, 1.0), (2, 3.0), (4, 6.0)] {
            t.set(i, w);
        }
        assert_eq!(t.total(), 10.0);
        assert_eq!(t.find(0.0), Some(0));
        assert_eq!(t.find(0.999), Some(0));
        assert_eq!(t.find(1.0), Some(2));
        assert_eq!(t.find(3.999), Some(2));
        assert_eq!(t.find(4.0), Some(4));
        assert_eq!(t.find(9.999), Some(4));
        assert_eq!(t.find(10.5), Some(4), "past the end: the last positive");
        t.set(4, 0.0);
        assert_eq!(t.total(), 4.0);
        assert_eq!(t.find(4.5), Some(2));
        t.set(0, 0.0);
        t.set(2, 0.0);
        assert_eq!((t.total(), t.find(0.0)), (0.0, None));
    }

    proptest::proptest! {
        /// A rebuilt tree has every prefix sum of a tree filled by `set`, and its draws.
        #[test]
        fn weight_tree_rebuilt_matches_one_set_per_weight(
            weights in proptest::collection::vec(
                proptest::prop_oneof![proptest::strategy::Just(0.0), 0.0..100.0f64],
                1..70,
            ),
            before in proptest::collection::vec(0.0..100.0f64, 70),
            u in 0.0..1.0f64,
        ) {
            let n = weights.len();
            let (mut set, mut rebuilt) = (WeightTree::new(n), WeightTree::new(n));
            for (i, &w) in weights.iter().enumerate() {
                set.set(i, w);
                rebuilt.set(i, before[i]); // what the rebuild must replace
            }
            rebuilt.rebuild(|i| weights[i]);
            for (i, &w) in weights.iter().enumerate() {
                proptest::prop_assert_eq!(rebuilt.weight(i), w);
            }
            let total = set.total();
            proptest::prop_assert!((rebuilt.total() - total).abs() <= 1e-9 * total.max(1.0));
            for k in 0..=n {
                let (a, b) = (set.tree[k], rebuilt.tree[k]);
                proptest::prop_assert!((a - b).abs() <= 1e-9 * a.abs().max(1.0), "{k}: {a} {b}");
            }
            let u = u * total;
            if weights.iter().all(|&w| w == 0.0) {
                proptest::prop_assert_eq!(rebuilt.find(u), None);
            } else {
                let i = rebuilt.find(u).expect("a positive weight");
                let below: f64 = weights[..i].iter().sum();
                proptest::prop_assert!(weights[i] > 0.0);
                proptest::prop_assert!(below <= u + 1e-9 && u < below + weights[i] + 1e-9);
            }
        }
    }

    #[test]
    fn draw_set_inserts_removes_and_draws_members_only() {
        let mut s = DrawSet::new(6);
        let mut rng = SimRng::new(1);
        assert_eq!(s.draw(&mut rng), None);
        for i in [1, 3, 5] {
            s.set(i, true);
        }
        s.set(3, true);
        assert_eq!(s.len(), 3);
        s.set(1, false);
        s.set(1, false);
        assert_eq!(s.len(), 2);
        let mut seen = [0; 6];
        for _ in 0..200 {
            seen[s.draw(&mut rng).unwrap()] += 1;
        }
        assert_eq!((seen[0], seen[1], seen[2], seen[4]), (0, 0, 0, 0));
        assert!(seen[3] > 60 && seen[5] > 60, "{seen:?}");
    }
}
