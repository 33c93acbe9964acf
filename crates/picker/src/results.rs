//! `Results`: every figure of one run, the machine it ran on, and what was concluded; the
//! schema of `results/<machine>/results.json`. Every type it holds is defined here or
//! re-exported here ([`Figure`], [`Machine`], [`Info`], …), none in the code that computes
//! them.
//!
//! The committed files under `results/` must keep loading: a test reads every one.

use crate::Mode;
pub use crate::contender::{Info, Kind};
pub use crate::figure::{Figure, Metric, Workload};
pub use crate::machine::{Machine, PerCpuSetup};

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

/// One contender's line of the ranked table.
#[derive(Clone, Debug, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct Row {
    /// 1-based rank among recommendable contenders; `None` when excluded.
    pub rank: Option<usize>,
    /// Contender name.
    pub name: String,
    /// What to import.
    pub import: String,
    /// What it is.
    pub kind: Kind,
    /// Pairs/s in the threads workload at the user's thread count (median).
    pub throughput: f64,
    /// Relative spread of that throughput.
    pub spread: f64,
    /// Throughput as a percentage of the ceiling's.
    pub pct_ceiling: f64,
    /// Throughput over `AtomicI64`'s.
    pub vs_atomic: f64,
    /// Nanoseconds per read at the user's reader pace (continuous if not measured).
    pub read_ns: Option<f64>,
    /// Smallest value any reader saw in any read-under-write run.
    pub min_read: Option<f64>,
    /// Bytes per counter at the user's thread count.
    pub bytes: Option<f64>,
    /// Why it cannot be recommended, if it cannot.
    pub excluded: Option<String>,
}

/// One of livecount's own performance targets (its maintainers' goals), judged on this run:
/// not a statement about the user's workload.
#[derive(Clone, Debug, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct Target {
    /// What livecount aims for.
    pub goal: String,
    /// What was measured.
    pub measured: String,
    /// Whether it was met (`None`: not measurable in this run).
    pub met: Option<bool>,
}

/// One run: where, what, every figure, and the conclusion; what [`measure`](crate::measure)
/// returns and `results.json` holds.
///
/// ```
/// # let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../../results/amd-epyc-2c/results.json");
/// use livecount_picker::Results;
///
/// let run: Results = serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
/// assert!(run.recommendation.contains("import `"));
/// let first = run.ranking.iter().find(|row| row.rank == Some(1)).unwrap();
/// assert!(run.recommendation.contains(&first.import));
/// ```
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
    /// Every workload, in report order.
    pub workloads: Vec<Workload>,
    /// Every figure.
    pub figures: Vec<Figure>,
    /// The ranked table.
    pub ranking: Vec<Row>,
    /// The recommendation paragraph.
    pub recommendation: String,
    /// livecount's own targets, met or not: for its maintainers, not about the workload
    /// described.
    pub targets: Vec<Target>,
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every `results.json` committed under `results/<machine>/` loads with this schema,
    /// older ones (no `PerCpu` setup, fewer workloads) included.
    #[test]
    fn committed_results_still_load() {
        let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../results");
        let mut loaded = 0;
        for entry in std::fs::read_dir(&root).unwrap().flatten() {
            let path = entry.path().join("results.json");
            if !path.is_file() {
                continue;
            }
            let text = std::fs::read_to_string(&path).unwrap();
            // The simulator's results (results/sim/…) sit one level down, in a schema of their own.
            let r: Results = serde_json::from_str(&text)
                .unwrap_or_else(|e| panic!("{} no longer loads: {e}", path.display()));
            assert_eq!(r.source, "picker", "{}", path.display());
            assert!(
                !r.figures.is_empty() && !r.ranking.is_empty(),
                "{}",
                path.display()
            );
            assert!(
                r.workloads.contains(&Workload::Threads),
                "{}",
                path.display()
            );
            // Written back, it holds every field of the file with the same value: nothing is
            // lost or renamed on the way (fields added since may be new).
            let file: serde_json::Value = serde_json::from_str(&text).unwrap();
            let written = serde_json::to_value(&r).unwrap();
            assert_within(&file, &written, &path.display().to_string());
            loaded += 1;
        }
        assert!(
            loaded >= 3,
            "only {loaded} results.json under {}",
            root.display()
        );
    }

    /// `old` is `new` but for object fields `new` adds.
    fn assert_within(old: &serde_json::Value, new: &serde_json::Value, at: &str) {
        use serde_json::Value;
        match (old, new) {
            (Value::Object(o), Value::Object(n)) => {
                for (k, v) in o {
                    let there = n.get(k).unwrap_or_else(|| panic!("{at}.{k} is gone"));
                    assert_within(v, there, &format!("{at}.{k}"));
                }
            }
            (Value::Array(o), Value::Array(n)) => {
                assert_eq!(o.len(), n.len(), "{at}");
                for (i, (o, n)) in o.iter().zip(n).enumerate() {
                    assert_within(o, n, &format!("{at}[{i}]"));
                }
            }
            _ => assert_eq!(old, new, "{at}"),
        }
    }
}
