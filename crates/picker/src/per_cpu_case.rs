//! `PerCpuCase`: when the picker recommends `PerCpu` rather than the fastest counter, and the
//! issue's three `PerCpu` targets — all from measured figures.
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
//!   from 4× it is the thread-per-connection or large blocking pool the issue is about.
//! * **`--max-bytes-per-counter`** below `PerThread`'s bytes at `--threads` but not below
//!   `PerCpu`'s: the ranking already excludes `PerThread` then; this says why `PerCpu` is the
//!   answer rather than whatever is next by throughput.

use crate::plan::{MANY_THREADS_PER_CORE, MEMORY_THREADS, READ_THREADS};
use crate::rank::{Row, Target, missing, ratios_at};
use crate::results::{BYTES, Figure, PAIRS_PER_S, Params, READ_NS, find};

/// `PerCpu`'s contender name.
pub const PER_CPU: &str = "PerCpu";
/// `PerThread`'s contender name.
pub const PER_THREAD: &str = "PerThread";
/// The workload that times reads with many threads alive.
pub const READ_AT_THREADS: &str = "read_at_threads";
/// At threads ≤ cores, `PerCpu`'s throughput may be at most this many times below `PerThread`'s.
pub const NEAR_FACTOR: f64 = 1.5;
/// With [`READ_THREADS`] threads alive, a `PerCpu` read must be at least this many times
/// cheaper than a `PerThread` read.
pub const CHEAPER_FACTOR: f64 = 10.0;

/// Why `PerCpu` is the counter to import for the service described, whichever counter the
/// throughput ranking puts first.
#[derive(Clone, Debug, PartialEq)]
pub struct PerCpuCase {
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
    pub fn detect(
        figures: &[Figure],
        rows: &[Row],
        params: &Params,
        cores: usize,
    ) -> Option<PerCpuCase> {
        rows.iter().find(|r| r.name == PER_CPU)?.rank?;
        let t = params.threads.to_string();
        let bytes_of = |name| find(figures, "memory", name, &t, BYTES).map(|f| f.median);
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
    pub fn why(&self) -> String {
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
fn read_pairs(figures: &[Figure]) -> Vec<(usize, f64, f64)> {
    let mut pairs: Vec<_> = figures
        .iter()
        .filter(|f| f.workload == READ_AT_THREADS && f.contender == PER_THREAD)
        .filter(|f| f.metric == READ_NS)
        .filter_map(|thread| {
            let cpu = find(figures, READ_AT_THREADS, PER_CPU, &thread.param, READ_NS)?;
            Some((thread.param.parse().ok()?, thread.median, cpu.median))
        })
        .collect();
    pairs.sort_by_key(|p| p.0);
    pairs
}

/// The issue's `PerCpu` targets: throughput near `PerThread`'s at threads ≤ `cores`, far
/// cheaper reads with [`READ_THREADS`] threads alive, memory independent of the thread count.
pub fn targets(figures: &[Figure], cores: usize) -> Vec<Target> {
    vec![near(figures, cores), cheaper(figures), flat(figures)]
}

fn near(figures: &[Figure], cores: usize) -> Target {
    let goal = format!(
        "threads ≤ cores: PerCpu's throughput within {NEAR_FACTOR}× of PerThread's (≥ PerThread ÷ {NEAR_FACTOR})"
    );
    let mut ratios: Vec<(usize, f64)> = figures
        .iter()
        .filter(|f| f.workload == "threads" && f.contender == PER_THREAD)
        .filter(|f| f.metric == PAIRS_PER_S)
        .filter_map(|thread| {
            let n: usize = thread.param.parse().ok().filter(|&n| n <= cores)?;
            let cpu = find(figures, "threads", PER_CPU, &thread.param, PAIRS_PER_S)?;
            Some((n, cpu.median / thread.median))
        })
        .collect();
    ratios.sort_by_key(|r| r.0);
    if ratios.is_empty() {
        return missing(&goal);
    }
    Target {
        measured: format!("PerCpu ÷ PerThread: {}", ratios_at(&ratios)),
        met: Some(ratios.iter().all(|(_, r)| *r >= 1.0 / NEAR_FACTOR)),
        goal,
    }
}

fn cheaper(figures: &[Figure]) -> Target {
    let goal = format!(
        "≥ {READ_THREADS} threads alive: a PerCpu read ≥ {CHEAPER_FACTOR}× cheaper than a PerThread read"
    );
    let pairs: Vec<_> = read_pairs(figures)
        .into_iter()
        .filter(|p| p.0 >= READ_THREADS)
        .collect();
    if pairs.is_empty() {
        return missing(&goal);
    }
    Target {
        measured: pairs
            .iter()
            .map(|(n, thread, cpu)| {
                format!(
                    "{n} threads: PerThread {thread:.0} ns, PerCpu {cpu:.1} ns per read = {:.0}× cheaper",
                    thread / cpu
                )
            })
            .collect::<Vec<_>>()
            .join("; "),
        met: Some(pairs.iter().all(|(_, thread, cpu)| thread / cpu >= CHEAPER_FACTOR)),
        goal,
    }
}

fn flat(figures: &[Figure]) -> Target {
    let counts = MEMORY_THREADS.map(|t| t.to_string()).join(", ");
    let goal = format!("PerCpu's memory identical at {counts} threads");
    let at = |name: &str| -> Option<Vec<&Figure>> {
        MEMORY_THREADS
            .iter()
            .map(|t| find(figures, "memory", name, &t.to_string(), BYTES))
            .collect()
    };
    let Some(cpu) = at(PER_CPU) else {
        return missing(&goal);
    };
    let list = |figs: &[&Figure]| {
        figs.iter()
            .map(|f| format!("{:.0}", f.median))
            .collect::<Vec<_>>()
            .join(", ")
    };
    let contrast = at(PER_THREAD).map_or(String::new(), |thread| {
        format!(" (PerThread: {})", list(&thread))
    });
    // Identical means every repetition at every thread count, not only the medians.
    let first = cpu[0].low;
    Target {
        measured: format!("PerCpu: {} bytes{contrast}", list(&cpu)),
        met: Some(cpu.iter().all(|f| f.low == first && f.high == first)),
        goal,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::contender::{Info, Kind};
    use crate::rank::{rank, recommend};

    const CORES: usize = 2;

    fn info(name: &str) -> Info {
        Info {
            name: name.into(),
            import: format!("livecount::{name}"),
            kind: Kind::Livecount,
        }
    }

    fn fig(workload: &str, name: &str, param: &str, metric: &str, v: f64) -> Figure {
        Figure::from_samples(workload, name, param, metric, vec![v, v, v])
    }

    fn params(threads: usize, max_bytes: Option<u64>) -> Params {
        Params::for_tests(threads, max_bytes)
    }

    /// PerThread 300/s, PerCpu 240/s, Sharded 100/s at every thread count; PerThread 128 B
    /// per thread + 512, PerCpu and Sharded 512 B flat; reads with 1 000 threads alive:
    /// PerThread 4 000 ns, PerCpu 10 ns.
    fn world() -> (Vec<Info>, Vec<Figure>) {
        let contenders = vec![info(PER_THREAD), info(PER_CPU), info("Sharded")];
        let mut figures = Vec::new();
        for t in [1, 2, 7, 8, 16, 256] {
            let p = t.to_string();
            for (name, tput) in [(PER_THREAD, 300.0), (PER_CPU, 240.0), ("Sharded", 100.0)] {
                figures.push(fig("threads", name, &p, PAIRS_PER_S, tput));
                let bytes = if name == PER_THREAD {
                    512.0 + 128.0 * t as f64
                } else {
                    512.0
                };
                figures.push(fig("memory", name, &p, BYTES, bytes));
            }
        }
        figures.push(fig(READ_AT_THREADS, PER_THREAD, "1000", READ_NS, 4000.0));
        figures.push(fig(READ_AT_THREADS, PER_CPU, "1000", READ_NS, 10.0));
        (contenders, figures)
    }

    fn advice(figures: &[Figure], contenders: &[Info], p: &Params) -> String {
        let rows = rank(figures, contenders, p);
        let case = PerCpuCase::detect(figures, &rows, p, CORES);
        recommend(&rows, p, case.as_ref())
    }

    #[test]
    fn at_threads_up_to_a_few_per_core_the_ranking_stands() {
        let (contenders, figures) = world();
        for threads in [1, 2, 7] {
            let p = params(threads, None);
            let rows = rank(&figures, &contenders, &p);
            assert_eq!(PerCpuCase::detect(&figures, &rows, &p, CORES), None);
            let text = advice(&figures, &contenders, &p);
            assert!(text.contains("import `livecount::PerThread`"), "{text}");
            assert!(text.contains("Runner-up: `livecount::PerCpu`"), "{text}");
        }
    }

    #[test]
    fn from_four_threads_per_core_per_cpu_is_recommended_and_why() {
        let (contenders, figures) = world();
        let p = params(8, None);
        let rows = rank(&figures, &contenders, &p);
        let case = PerCpuCase::detect(&figures, &rows, &p, CORES).expect("8 threads on 2 cores");
        assert_eq!(case.many_threads, Some((8, 2)));
        assert_eq!(case.byte_limit, None);
        assert_eq!(case.bytes, Some((1536.0, 512.0)));
        assert_eq!(case.reads, Some((1000, 4000.0, 10.0)));
        let text = recommend(&rows, &p, Some(&case));
        for says in [
            "import `livecount::PerCpu`: 8 threads are 4× this machine's 2 cores",
            "1536 bytes per counter at 8 threads",
            "512 bytes at any thread count",
            "4000 ns with 1000 threads alive, against 10 ns for `PerCpu`",
            "Throughput alone ranks `livecount::PerThread` first: `PerCpu` did 80% of its",
        ] {
            assert!(text.contains(says), "{says:?} not in {text}");
        }
        // The table's order is still the throughput's.
        assert_eq!(rows[0].name, PER_THREAD);
        let p = params(256, None);
        assert!(advice(&figures, &contenders, &p).contains("256 threads are 128×"));
    }

    #[test]
    fn a_byte_limit_per_thread_exceeds_recommends_per_cpu() {
        let (contenders, figures) = world();
        // PerThread at 2 threads: 768 B; PerCpu 512 B.
        let p = params(2, Some(600));
        let rows = rank(&figures, &contenders, &p);
        let case = PerCpuCase::detect(&figures, &rows, &p, CORES).expect("over the limit");
        assert_eq!((case.many_threads, case.byte_limit), (None, Some(600)));
        let text = recommend(&rows, &p, Some(&case));
        assert!(
            text.contains("import `livecount::PerCpu`: `PerThread` takes 768 bytes"),
            "{text}"
        );
        assert!(text.contains("over --max-bytes-per-counter 600"), "{text}");
        // A limit both fit leaves the ranking alone; one neither fits excludes PerCpu too.
        for max in [768, 100] {
            let p = params(2, Some(max));
            let rows = rank(&figures, &contenders, &p);
            assert_eq!(
                PerCpuCase::detect(&figures, &rows, &p, CORES),
                None,
                "{max}"
            );
        }
    }

    #[test]
    fn an_excluded_per_cpu_is_never_recommended() {
        let (contenders, mut figures) = world();
        figures.retain(|f| !(f.contender == PER_CPU && f.workload == "threads"));
        let p = params(16, None);
        let rows = rank(&figures, &contenders, &p);
        assert_eq!(PerCpuCase::detect(&figures, &rows, &p, CORES), None);
        assert!(advice(&figures, &contenders, &p).contains("import `livecount::PerThread`"));
    }

    #[test]
    fn targets_are_judged_from_figures() {
        let (_, figures) = world();
        let t = targets(&figures, CORES);
        assert_eq!(t.len(), 3);
        // 240 / 300 = 0.8 ≥ 1 / 1.5, at 1 and 2 threads only.
        assert_eq!(t[0].met, Some(true), "{:?}", t[0]);
        assert_eq!(t[0].measured, "PerCpu ÷ PerThread: 0.80× at 1, 0.80× at 2");
        assert_eq!(t[1].met, Some(true), "{:?}", t[1]);
        assert!(
            t[1].measured.contains("= 400× cheaper"),
            "{}",
            t[1].measured
        );
        assert_eq!(t[2].met, Some(true), "{:?}", t[2]);
        assert!(
            t[2].measured
                .starts_with("PerCpu: 512, 512, 512, 512 bytes (PerThread: 640, 768")
        );

        let mut worse = figures.clone();
        let slower =
            |f: &mut Figure, v: f64| *f = fig(&f.workload, &f.contender, &f.param, &f.metric, v);
        for f in &mut worse {
            match (f.workload.as_str(), f.contender.as_str(), f.param.as_str()) {
                ("threads", PER_CPU, "2") => slower(f, 199.0),
                (READ_AT_THREADS, PER_CPU, _) => slower(f, 401.0),
                ("memory", PER_CPU, "256") => slower(f, 640.0),
                _ => {}
            }
        }
        let t = targets(&worse, CORES);
        assert_eq!(
            (t[0].met, t[1].met, t[2].met),
            (Some(false), Some(false), Some(false))
        );
        // One repetition off is not identical either.
        let mut noisy = figures.clone();
        noisy.retain(|f| !(f.workload == "memory" && f.contender == PER_CPU && f.param == "16"));
        noisy.push(Figure::from_samples(
            "memory",
            PER_CPU,
            "16",
            BYTES,
            vec![512.0, 512.0, 640.0],
        ));
        assert_eq!(targets(&noisy, CORES)[2].met, Some(false));
        assert!(targets(&[], CORES).iter().all(|t| t.met.is_none()));
    }
}
