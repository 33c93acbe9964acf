//! The made-up runs the unit tests of the ranking, the recommendation and the targets judge:
//! figures chosen so every expected number can be worked out by hand.

use crate::contender::{ATOMIC, CEILING, Info, Kind, PER_CPU, PER_THREAD};
use crate::figure::{Figure, Metric, Workload};
use crate::results::Params;

/// A contender named `name` of `kind`, imported as `crate::{name}`.
pub(crate) fn info(name: &str, kind: Kind) -> Info {
    Info {
        name: name.into(),
        import: format!("crate::{name}"),
        kind,
    }
}

/// The livecount counter `name`, imported as `livecount::{name}`.
pub(crate) fn live(name: &str) -> Info {
    Info {
        name: name.into(),
        import: format!("livecount::{name}"),
        kind: Kind::Livecount,
    }
}

/// Three identical repetitions of `v`.
pub(crate) fn fig(workload: Workload, name: &str, param: &str, metric: Metric, v: f64) -> Figure {
    Figure::from_samples(workload, name, param, metric, vec![v, v, v])
}

/// A quick sweep for `threads` writers, a 10 Hz reader and the given byte limit.
pub(crate) fn params(threads: usize, max_bytes: Option<u64>) -> Params {
    Params::for_tests(threads, max_bytes)
}

/// ceiling 400, Fast (livecount) 300, Big (livecount, huge) 350, Neg (peer) 500 but reads
/// below 0, AtomicI64 30, oracle 10; every figure a target needs at 1 and 2 threads.
pub(crate) fn ranking_world() -> (Vec<Info>, Vec<Figure>) {
    let contenders = vec![
        info(CEILING, Kind::Ceiling),
        info("Fast", Kind::Livecount),
        info("Big", Kind::Livecount),
        info("Neg", Kind::Peer),
        info(ATOMIC, Kind::Peer),
        info("fast-counter", Kind::Peer),
        info("Oracle", Kind::Oracle),
    ];
    let tput = [
        (CEILING, 400.0),
        ("Fast", 300.0),
        ("Big", 350.0),
        ("Neg", 500.0),
        (ATOMIC, 30.0),
        ("fast-counter", 100.0),
        ("Oracle", 10.0),
    ];
    let mut figures = Vec::new();
    for (name, v) in tput {
        for t in ["1", "2"] {
            figures.push(fig(Workload::Threads, name, t, Metric::PairsPerS, v));
            let bytes = if name == "Big" { 1e6 } else { 64.0 };
            figures.push(fig(Workload::Memory, name, t, Metric::Bytes, bytes));
        }
        let min = if name == "Neg" { -7.0 } else { 0.0 };
        let rw = Workload::ReadUnderWrite;
        figures.push(fig(rw, name, "10Hz", Metric::MinRead, min));
        figures.push(fig(rw, name, "10Hz", Metric::ReadNs, 50.0));
        figures.push(fig(rw, name, "10Hz", Metric::TrueMax, 384.0));
    }
    for t in ["1", "2"] {
        let lc = Workload::Lifecycle;
        figures.push(fig(lc, "Fast", t, Metric::PairsPerS, 300.0));
        figures.push(fig(lc, "Fast+session", t, Metric::PairsPerS, 100.0));
    }
    figures.push(fig(
        Workload::Threads,
        "Sharded",
        "1",
        Metric::PairsPerS,
        60.0,
    ));
    figures.push(fig(
        Workload::Threads,
        "Striped",
        "1",
        Metric::PairsPerS,
        61.0,
    ));
    (contenders, figures)
}

/// PerThread 300/s, PerCpu 240/s, Sharded 100/s at every thread count; PerThread 128 B
/// per thread + 512, PerCpu and Sharded 512 B flat; reads with 1 000 threads alive:
/// PerThread 4 000 ns, PerCpu 10 ns.
pub(crate) fn per_cpu_world() -> (Vec<Info>, Vec<Figure>) {
    let contenders = vec![live(PER_THREAD), live(PER_CPU), live("Sharded")];
    let mut figures = Vec::new();
    for t in [1, 2, 7, 8, 16, 256] {
        let p = t.to_string();
        for (name, tput) in [(PER_THREAD, 300.0), (PER_CPU, 240.0), ("Sharded", 100.0)] {
            figures.push(fig(Workload::Threads, name, &p, Metric::PairsPerS, tput));
            let bytes = if name == PER_THREAD {
                512.0 + 128.0 * t as f64
            } else {
                512.0
            };
            figures.push(fig(Workload::Memory, name, &p, Metric::Bytes, bytes));
        }
    }
    let rat = Workload::ReadAtThreads;
    figures.push(fig(rat, PER_THREAD, "1000", Metric::ReadNs, 4000.0));
    figures.push(fig(rat, PER_CPU, "1000", Metric::ReadNs, 10.0));
    (contenders, figures)
}
