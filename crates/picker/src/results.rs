//! `Results`: every figure of one run, the machine it ran on, and what was concluded; the
//! schema of `results/<machine>/results.json`.

use crate::contender::Info;
use crate::machine::Machine;
use crate::plan::Mode;
use crate::rank::{Row, Target};

/// Throughput metric: start+end pairs per second (higher is better).
pub const PAIRS_PER_S: &str = "pairs_per_s";
/// Mean nanoseconds per read (lower is better).
pub const READ_NS: &str = "read_ns";
/// Smallest value a reader saw.
pub const MIN_READ: &str = "min_read";
/// Largest value a reader saw.
pub const MAX_READ: &str = "max_read";
/// Upper bound of the true value in the read-under-write workload.
pub const TRUE_MAX: &str = "true_max";
/// Bytes per counter (inline + heap).
pub const BYTES: &str = "bytes";

/// One measured number: the median over repetitions, and the spread.
#[derive(Clone, Debug, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct Figure {
    /// Workload name ([`crate::plan::WORKLOADS`]).
    pub workload: String,
    /// Contender name.
    pub contender: String,
    /// Workload parameter (threads, tasks, reader pace).
    pub param: String,
    /// What was measured ([`PAIRS_PER_S`], [`READ_NS`], …).
    pub metric: String,
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
        workload: &str,
        contender: &str,
        param: &str,
        metric: &str,
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
            workload: workload.into(),
            contender: contender.into(),
            param: param.into(),
            metric: metric.into(),
            median,
            low: sorted.first().copied().unwrap_or(f64::NAN),
            high: sorted.last().copied().unwrap_or(f64::NAN),
            samples,
        }
    }

    /// `(high - low) / median`: the relative spread of the repetitions.
    pub fn spread(&self) -> f64 {
        (self.high - self.low) / self.median.abs().max(f64::MIN_POSITIVE)
    }

    /// The key a comparison matches figures by.
    pub fn key(&self) -> String {
        format!(
            "{}/{}/{}/{}",
            self.workload, self.contender, self.param, self.metric
        )
    }
}

/// What the user described and how the run swept.
#[derive(Clone, Debug, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct Params {
    /// Sweep size.
    pub mode: Mode,
    /// The service's writer thread count (`--threads`).
    pub threads: usize,
    /// Reads per second of the service's reader (`--readers-hz`); 0 means continuous.
    pub readers_hz: u32,
    /// Largest acceptable counter size (`--max-bytes-per-counter`).
    pub max_bytes_per_counter: Option<u64>,
    /// Time budget of the sweep in seconds (picker only).
    pub budget_secs: f64,
    /// Repetitions per point (picker only; criterion decides its own samples).
    pub reps: usize,
    /// Writer threads in the read-under-write workload.
    pub rw_writers: usize,
}

impl Params {
    /// What the ranking tests describe: a quick sweep for `threads` writers, a 10 Hz
    /// reader and the given byte limit.
    #[cfg(test)]
    pub(crate) fn for_tests(threads: usize, max_bytes: Option<u64>) -> Params {
        Params {
            mode: Mode::Quick,
            threads,
            readers_hz: 10,
            max_bytes_per_counter: max_bytes,
            budget_secs: 1.0,
            reps: 3,
            rw_writers: 2,
        }
    }
}

/// One run: where, what, every figure, and the conclusion.
#[derive(Clone, Debug, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct Results {
    /// `"picker"` or `"criterion"`.
    pub source: String,
    /// Where it ran.
    pub machine: Machine,
    /// What was asked.
    pub params: Params,
    /// The command that reproduces it.
    pub command: String,
    /// Every contender.
    pub contenders: Vec<Info>,
    /// Every workload name.
    pub workloads: Vec<String>,
    /// Every figure.
    pub figures: Vec<Figure>,
    /// The ranked table.
    pub ranking: Vec<Row>,
    /// The recommendation paragraph.
    pub recommendation: String,
    /// The targets, met or not.
    pub targets: Vec<Target>,
}

/// Looks up one figure.
pub fn find<'a>(
    figures: &'a [Figure],
    workload: &str,
    contender: &str,
    param: &str,
    metric: &str,
) -> Option<&'a Figure> {
    figures.iter().find(|f| {
        f.workload == workload && f.contender == contender && f.param == param && f.metric == metric
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn median_and_spread() {
        let f = Figure::from_samples("threads", "x", "1", PAIRS_PER_S, vec![3.0, 1.0, 2.0]);
        assert_eq!((f.median, f.low, f.high), (2.0, 1.0, 3.0));
        assert_eq!(f.spread(), 1.0);
        let f = Figure::from_samples("threads", "x", "1", PAIRS_PER_S, vec![4.0, 2.0]);
        assert_eq!(f.median, 3.0);
    }
}
