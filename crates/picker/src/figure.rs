//! `Figure`: one measured number, and what it is of — a [`Workload`] at a parameter, for a
//! contender, in a [`Metric`] — with the typed lookups the ranking and the targets use.
//!
//! In `results.json` a workload and a metric are written as their snake-case names
//! (`"read_under_write"`, `"pairs_per_s"`), as they always were, so older files still load.

use std::fmt;

/// What a run measures, one criterion group each; in report order in [`Workload::ALL`].
#[derive(
    Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, serde::Serialize, serde::Deserialize,
)]
#[serde(rename_all = "snake_case")]
pub enum Workload {
    /// T threads on a barrier, each start+end back to back.
    Threads,
    /// Producers start sessions and hand them in batches to consumers that end them.
    Handoff,
    /// K tokio tasks each looping start → `yield_now` → end.
    Tasks,
    /// Writers in a ring while one reader reads at a given pace.
    ReadUnderWrite,
    /// One reader timing reads while many threads that each counted are parked alive.
    ReadAtThreads,
    /// `SessionTracker::start` + `end(Completed)` against the bare counter.
    Lifecycle,
    /// Waves of short-lived threads.
    Churn,
    /// Inline + heap bytes per counter after T threads each held a session.
    Memory,
}

impl Workload {
    /// Every workload, in report order.
    pub const ALL: [Workload; 8] = [
        Workload::Threads,
        Workload::Handoff,
        Workload::Tasks,
        Workload::ReadUnderWrite,
        Workload::ReadAtThreads,
        Workload::Lifecycle,
        Workload::Churn,
        Workload::Memory,
    ];

    /// The name in `results.json` and criterion's group id: `"read_under_write"`.
    pub fn name(self) -> &'static str {
        match self {
            Workload::Threads => "threads",
            Workload::Handoff => "handoff",
            Workload::Tasks => "tasks",
            Workload::ReadUnderWrite => "read_under_write",
            Workload::ReadAtThreads => "read_at_threads",
            Workload::Lifecycle => "lifecycle",
            Workload::Churn => "churn",
            Workload::Memory => "memory",
        }
    }

    /// The workload named `name` (criterion's group id), if there is one.
    pub(crate) fn from_name(name: &str) -> Option<Workload> {
        Workload::ALL.into_iter().find(|w| w.name() == name)
    }
}

impl fmt::Display for Workload {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// What a figure measures.
#[derive(
    Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, serde::Serialize, serde::Deserialize,
)]
#[serde(rename_all = "snake_case")]
pub enum Metric {
    /// Start+end pairs per second (higher is better).
    PairsPerS,
    /// Mean nanoseconds per read (lower is better).
    ReadNs,
    /// Smallest value a reader saw.
    MinRead,
    /// Largest value a reader saw.
    MaxRead,
    /// Upper bound of the true value in the read-under-write workload.
    TrueMax,
    /// Bytes per counter, inline + heap (lower is better).
    Bytes,
    /// Reads a reader performed.
    Reads,
    /// How much slower the writers ran with a reader than without, in percent.
    WriterSlowdownPct,
}

impl Metric {
    /// The name in `results.json`: `"pairs_per_s"`.
    pub fn name(self) -> &'static str {
        match self {
            Metric::PairsPerS => "pairs_per_s",
            Metric::ReadNs => "read_ns",
            Metric::MinRead => "min_read",
            Metric::MaxRead => "max_read",
            Metric::TrueMax => "true_max",
            Metric::Bytes => "bytes",
            Metric::Reads => "reads",
            Metric::WriterSlowdownPct => "writer_slowdown_pct",
        }
    }

    /// `Some(true)` if a higher value is better, `Some(false)` if a lower one is, `None` if
    /// the metric describes rather than scores (what a reader saw, how many reads).
    pub(crate) fn higher_is_better(self) -> Option<bool> {
        match self {
            Metric::PairsPerS => Some(true),
            Metric::ReadNs | Metric::Bytes => Some(false),
            _ => None,
        }
    }
}

impl fmt::Display for Metric {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// One measured number: the median over repetitions, and the spread.
#[derive(Clone, Debug, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct Figure {
    /// The workload measured.
    pub workload: Workload,
    /// Contender name.
    pub contender: String,
    /// Workload parameter (threads, tasks, reader pace), as the tables and criterion's ids
    /// write it.
    pub param: String,
    /// What was measured.
    pub metric: Metric,
    /// Median over repetitions (criterion: the median estimate).
    pub median: f64,
    /// Smallest repetition (criterion: lower confidence bound).
    pub low: f64,
    /// Largest repetition (criterion: upper confidence bound).
    pub high: f64,
    /// Every repetition (empty for criterion figures).
    pub samples: Vec<f64>,
}

impl Figure {
    /// A figure from repeated measurements (at least one).
    pub fn from_samples(
        workload: Workload,
        contender: &str,
        param: &str,
        metric: Metric,
        samples: Vec<f64>,
    ) -> Figure {
        let mut sorted = samples.clone();
        sorted.sort_by(f64::total_cmp);
        let n = sorted.len();
        let median = if n == 0 {
            f64::NAN
        } else if n % 2 == 1 {
            sorted[n / 2]
        } else {
            (sorted[n / 2 - 1] + sorted[n / 2]) / 2.0
        };
        Figure {
            workload,
            contender: contender.into(),
            param: param.into(),
            metric,
            median,
            low: sorted.first().copied().unwrap_or(f64::NAN),
            high: sorted.last().copied().unwrap_or(f64::NAN),
            samples,
        }
    }

    /// `(high - low) / median`: the relative spread of the repetitions.
    pub(crate) fn spread(&self) -> f64 {
        (self.high - self.low) / self.median.abs().max(f64::MIN_POSITIVE)
    }

    /// The key a comparison matches figures by: `workload/contender/param/metric`.
    pub(crate) fn key(&self) -> String {
        format!(
            "{}/{}/{}/{}",
            self.workload, self.contender, self.param, self.metric
        )
    }

    /// Whether this figure is `contender`'s `metric` in `workload` (at any parameter).
    pub(crate) fn is(&self, workload: Workload, contender: &str, metric: Metric) -> bool {
        self.workload == workload && self.metric == metric && self.contender == contender
    }

    /// The parameter as a thread (or task) count, if it is one.
    pub(crate) fn count(&self) -> Option<usize> {
        self.param.parse().ok()
    }
}

/// Looks up `contender`'s `metric` in `workload` at `param`: a count (`2`) or a reader
/// ([`Reader`](crate::workload::Reader)), written as [`Figure::param`] is.
pub(crate) fn find<'a>(
    figures: &'a [Figure],
    workload: Workload,
    contender: &str,
    param: impl fmt::Display,
    metric: Metric,
) -> Option<&'a Figure> {
    let param = param.to_string();
    figures
        .iter()
        .find(|f| f.is(workload, contender, metric) && f.param == param)
}

/// The lowest value `contender`'s `metric` took in `workload` at any parameter and in any
/// repetition (the smallest value a reader ever saw, say).
pub(crate) fn lowest(
    figures: &[Figure],
    workload: Workload,
    contender: &str,
    metric: Metric,
) -> Option<f64> {
    figures
        .iter()
        .filter(|f| f.is(workload, contender, metric))
        .map(|f| f.low)
        .reduce(f64::min)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::workload::Reader;

    fn fig(workload: Workload, name: &str, param: &str, metric: Metric, v: f64) -> Figure {
        Figure::from_samples(workload, name, param, metric, vec![v - 1.0, v, v + 1.0])
    }

    #[test]
    fn median_and_spread() {
        let f = Figure::from_samples(
            Workload::Threads,
            "x",
            "1",
            Metric::PairsPerS,
            vec![3.0, 1.0, 2.0],
        );
        assert_eq!((f.median, f.low, f.high), (2.0, 1.0, 3.0));
        assert_eq!(f.spread(), 1.0);
        let f = Figure::from_samples(
            Workload::Threads,
            "x",
            "1",
            Metric::PairsPerS,
            vec![4.0, 2.0],
        );
        assert_eq!(f.median, 3.0);
        assert_eq!(f.key(), "threads/x/1/pairs_per_s");
    }

    /// A lookup matches workload, contender, parameter and metric, each typed: a count or a
    /// reader for the parameter, never a string that could name the wrong one.
    #[test]
    fn find_matches_every_part_of_the_key() {
        let figures = [
            fig(Workload::Threads, "A", "2", Metric::PairsPerS, 10.0),
            fig(Workload::Threads, "A", "2", Metric::ReadNs, 20.0),
            fig(Workload::Threads, "A", "1", Metric::PairsPerS, 30.0),
            fig(Workload::Lifecycle, "A", "2", Metric::PairsPerS, 40.0),
            fig(Workload::Threads, "B", "2", Metric::PairsPerS, 50.0),
            fig(Workload::ReadUnderWrite, "A", "10Hz", Metric::ReadNs, 60.0),
            fig(
                Workload::ReadUnderWrite,
                "A",
                "continuous",
                Metric::ReadNs,
                70.0,
            ),
        ];
        let median = |w, name, param: &dyn fmt::Display, m| {
            find(&figures, w, name, param, m).map(|f| f.median)
        };
        let (t, rw) = (Workload::Threads, Workload::ReadUnderWrite);
        assert_eq!(median(t, "A", &2, Metric::PairsPerS), Some(10.0));
        assert_eq!(median(t, "A", &2usize, Metric::ReadNs), Some(20.0));
        assert_eq!(median(t, "A", &1, Metric::PairsPerS), Some(30.0));
        assert_eq!(
            median(Workload::Lifecycle, "A", &2, Metric::PairsPerS),
            Some(40.0)
        );
        assert_eq!(median(t, "B", &2, Metric::PairsPerS), Some(50.0));
        assert_eq!(median(rw, "A", &Reader::Hz(10), Metric::ReadNs), Some(60.0));
        assert_eq!(
            median(rw, "A", &Reader::Continuous, Metric::ReadNs),
            Some(70.0)
        );
        assert_eq!(
            median(t, "A", &3, Metric::PairsPerS),
            None,
            "no such parameter"
        );
        assert_eq!(
            median(t, "C", &2, Metric::PairsPerS),
            None,
            "no such contender"
        );
        assert_eq!(median(t, "B", &2, Metric::Bytes), None, "no such metric");
        assert_eq!(median(Workload::Memory, "A", &2, Metric::PairsPerS), None);
        assert_eq!(median(rw, "A", &Reader::None, Metric::ReadNs), None);
    }

    #[test]
    fn lowest_takes_the_worst_repetition_of_any_parameter() {
        let figures = [
            fig(Workload::ReadUnderWrite, "A", "10Hz", Metric::MinRead, 5.0),
            fig(
                Workload::ReadUnderWrite,
                "A",
                "continuous",
                Metric::MinRead,
                2.0,
            ),
            fig(
                Workload::ReadUnderWrite,
                "A",
                "continuous",
                Metric::MaxRead,
                -9.0,
            ),
            fig(Workload::ReadUnderWrite, "B", "10Hz", Metric::MinRead, -5.0),
        ];
        let low = |name| lowest(&figures, Workload::ReadUnderWrite, name, Metric::MinRead);
        assert_eq!(low("A"), Some(1.0));
        assert_eq!(low("B"), Some(-6.0));
        assert_eq!(low("C"), None);
    }

    /// Names round-trip, and serde writes exactly the names older `results.json` files hold.
    #[test]
    fn names_are_the_schema() {
        for w in Workload::ALL {
            assert_eq!(Workload::from_name(w.name()), Some(w));
            assert_eq!(serde_json::to_string(&w).unwrap(), format!("\"{w}\""));
        }
        assert_eq!(Workload::from_name("threads "), None);
        let metrics = [
            Metric::PairsPerS,
            Metric::ReadNs,
            Metric::MinRead,
            Metric::MaxRead,
            Metric::TrueMax,
            Metric::Bytes,
            Metric::Reads,
            Metric::WriterSlowdownPct,
        ];
        for m in metrics {
            assert_eq!(serde_json::to_string(&m).unwrap(), format!("\"{m}\""));
            let back: Metric = serde_json::from_str(&format!("\"{}\"", m.name())).unwrap();
            assert_eq!(back, m);
        }
        assert_eq!(Metric::PairsPerS.higher_is_better(), Some(true));
        assert_eq!(Metric::Bytes.higher_is_better(), Some(false));
        assert_eq!(Metric::MinRead.higher_is_better(), None);
        assert!(serde_json::from_str::<Metric>("\"pairs\"").is_err());
    }
}
