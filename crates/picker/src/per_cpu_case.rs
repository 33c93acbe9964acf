//! `PerCpuCase`: when the picker recommends `PerCpu` rather than the fastest counter, from
//! measured figures (livecount's own `PerCpu` targets are in [`crate::targets`]).
//!
//! `PerThread` keeps a 128-byte cell per thread index in use and its read walks every one;
//! `PerCpu` keeps one per CPU plus an overflow cell, whatever the thread count. The ranking
//! (throughput at `--threads`) stands unless one of these holds, and then `PerCpu` is
//! recommended with the reasons spelled out:
//!
//! * **`--threads` ≥ 4 × cores** ([`MANY_THREADS_PER_CORE`]). At threads ≤ cores both hold
//!   about as many cells and `PerThread`'s update (a plain store to a cell no other thread
//!   writes) is the cheaper, so the ranking decides. Threads beyond the cores add no update
//!   throughput to either counter (the cores are already busy), while `PerThread`'s memory and
//!   read work grow with each one: at 4 per core it holds and reads at least `4 × cores` cells
//!   against `PerCpu`'s `CPUs + 1` (2.7× on 2 cores, nearly 4× on large machines), and the
//!   gap only widens. A pool 2× oversubscribed is ordinary and pays little for `PerThread`;
//!   from 4× it is the thread-per-connection or large blocking pool `PerCpu` is made for.
//! * **`--max-bytes-per-counter`** below `PerThread`'s bytes at `--threads` but not below
//!   `PerCpu`'s: the ranking already excludes `PerThread` then; this says why `PerCpu` is the
//!   answer rather than whatever is next by throughput.

use crate::contender::{PER_CPU, PER_THREAD};
use crate::figure::{Figure, Metric, Workload, find};
use crate::plan::MANY_THREADS_PER_CORE;
use crate::results::{Params, Row};

/// Why `PerCpu` is the counter to import for the service described, whichever counter the
/// throughput ranking puts first.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct PerCpuCase {
    /// `--threads`.
    pub threads: usize,
    /// `--threads` and the machine's cores, when threads ≥ [`MANY_THREADS_PER_CORE`] × cores.
    pub many_threads: Option<(usize, usize)>,
    /// `--max-bytes-per-counter`, when `PerThread` exceeds it at `--threads` and `PerCpu` does not.
    pub byte_limit: Option<u64>,
    /// `PerThread`'s and `PerCpu`'s bytes per counter at `--threads`, if measured.
    pub bytes: Option<(f64, f64)>,
    /// Live threads, `PerThread`'s and `PerCpu`'s nanoseconds per read with that many alive:
    /// at `--threads` if measured there, else at the most threads measured.
    pub reads: Option<(usize, f64, f64)>,
}

impl PerCpuCase {
    /// The case for `PerCpu` in this run, if there is one and `PerCpu` qualifies (is ranked).
    pub(crate) fn detect(
        figures: &[Figure],
        rows: &[Row],
        params: &Params,
        cores: usize,
    ) -> Option<PerCpuCase> {
        rows.iter().find(|r| r.name == PER_CPU)?.rank?;
        let t = params.threads;
        let bytes_of =
            |name| find(figures, Workload::Memory, name, t, Metric::Bytes).map(|f| f.median);
        let bytes = bytes_of(PER_THREAD).zip(bytes_of(PER_CPU));
        let many_threads = (params.threads >= MANY_THREADS_PER_CORE * cores.max(1))
            .then_some((params.threads, cores));
        let byte_limit = params.max_bytes_per_counter.filter(|&max| {
            bytes.is_some_and(|(thread, cpu)| thread > max as f64 && cpu <= max as f64)
        });
        if many_threads.is_none() && byte_limit.is_none() {
            return None;
        }
        Some(PerCpuCase {
            threads: params.threads,
            many_threads,
            byte_limit,
            bytes,
            reads: reads_at(figures, params.threads),
        })
    }

    /// The reasons, as one sentence without its full stop.
    pub(crate) fn why(&self) -> String {
        let mut parts = Vec::new();
        if let Some((threads, cores)) = self.many_threads {
            let per_core = (10.0 * threads as f64 / cores.max(1) as f64).round() / 10.0;
            parts.push(format!(
                "{threads} threads are {per_core}× this machine's {cores} cores"
            ));
        }
        let t = self.threads;
        match (self.bytes, self.byte_limit) {
            (Some((thread, cpu)), Some(max)) => parts.push(format!(
                "`PerThread` takes {thread:.0} bytes per counter at {t} threads, over \
                 --max-bytes-per-counter {max}, while `PerCpu` takes {cpu:.0} at any thread count"
            )),
            (Some((thread, cpu)), None) => parts.push(format!(
                "`PerThread` keeps a cell per thread, {thread:.0} bytes per counter at {t} threads, \
                 while `PerCpu` keeps one per CPU, {cpu:.0} bytes at any thread count"
            )),
            _ => {}
        }
        if let Some((n, thread, cpu)) = self.reads {
            parts.push(format!(
                "a `PerThread` read walks every cell: {thread:.0} ns with {n} threads alive, \
                 against {cpu:.0} ns for `PerCpu`"
            ));
        }
        parts.join("; ")
    }
}

/// `(threads, PerThread ns, PerCpu ns)` per read at `prefer` live threads if both were measured
/// there, else at the most threads both were measured at.
fn reads_at(figures: &[Figure], prefer: usize) -> Option<(usize, f64, f64)> {
    let all = read_pairs(figures);
    all.iter()
        .find(|r| r.0 == prefer)
        .or_else(|| all.iter().max_by_key(|r| r.0))
        .copied()
}

/// Every `(threads, PerThread ns, PerCpu ns)` the read-at-threads workload measured, by threads.
pub(crate) fn read_pairs(figures: &[Figure]) -> Vec<(usize, f64, f64)> {
    let rat = Workload::ReadAtThreads;
    let mut pairs: Vec<_> = figures
        .iter()
        .filter(|f| f.is(rat, PER_THREAD, Metric::ReadNs))
        .filter_map(|thread| {
            let n = thread.count()?;
            let cpu = find(figures, rat, PER_CPU, n, Metric::ReadNs)?;
            Some((n, thread.median, cpu.median))
        })
        .collect();
    pairs.sort_by_key(|p| p.0);
    pairs
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::test_support::{params, per_cpu_world};

    const CORES: usize = 2;

    fn rows(names_ranked: &[(&str, Option<usize>)]) -> Vec<Row> {
        names_ranked
            .iter()
            .map(|&(name, rank)| Row {
                rank,
                name: name.into(),
                import: format!("livecount::{name}"),
                kind: crate::contender::Kind::Livecount,
                throughput: 1.0,
                spread: 0.0,
                pct_ceiling: 1.0,
                vs_atomic: 1.0,
                read_ns: None,
                min_read: None,
                bytes: None,
                excluded: None,
            })
            .collect()
    }

    /// The case needs `PerCpu` ranked and either many threads per core or a byte limit only
    /// `PerCpu` meets; its reads come from the user's thread count if measured there, else
    /// from the most threads measured.
    #[test]
    fn a_case_needs_a_ranked_per_cpu_and_a_reason() {
        let (_, figures) = per_cpu_world();
        let ranked = rows(&[(PER_THREAD, Some(1)), (PER_CPU, Some(2))]);
        assert_eq!(
            PerCpuCase::detect(&figures, &ranked, &params(7, None), CORES),
            None
        );
        let case = PerCpuCase::detect(&figures, &ranked, &params(8, None), CORES).unwrap();
        assert_eq!(case.many_threads, Some((8, CORES)));
        assert_eq!(case.reads, Some((1000, 4000.0, 10.0)));
        assert!(
            case.why()
                .starts_with("8 threads are 4× this machine's 2 cores"),
            "{}",
            case.why()
        );
        let excluded = rows(&[(PER_THREAD, Some(1)), (PER_CPU, None)]);
        assert_eq!(
            PerCpuCase::detect(&figures, &excluded, &params(8, None), CORES),
            None
        );
        let case = PerCpuCase::detect(&figures, &ranked, &params(2, Some(600)), CORES).unwrap();
        assert_eq!((case.many_threads, case.byte_limit), (None, Some(600)));
        assert_eq!(read_pairs(&figures), [(1000, 4000.0, 10.0)]);
    }
}
