//! Ranking, recommendation and the targets, computed from figures alone, so the
//! picker (own repetitions) and `cargo bench` (criterion estimates) conclude the same way.

use crate::contender::{Info, Kind};
use crate::per_cpu_case::{PER_CPU, PerCpuCase};
use crate::results::{BYTES, Figure, MIN_READ, PAIRS_PER_S, Params, READ_NS, TRUE_MAX, find};
use crate::workload::Reader;

/// Peer crates (not `std` atomics) the targets compare against.
pub const PEER_CRATES: [&str; 4] = [
    "fast-counter",
    "contatori",
    "prometheus::IntGauge",
    "metrics::Gauge",
];

/// Ratios at thread counts as a report reads them: "0.62× at 1, 0.66× at 2".
pub(crate) fn ratios_at<T: std::fmt::Display>(ratios: &[(T, f64)]) -> String {
    ratios
        .iter()
        .map(|(at, ratio)| format!("{ratio:.2}× at {at}"))
        .collect::<Vec<_>>()
        .join(", ")
}

/// The `AtomicI64` baseline of the targets.
pub const ATOMIC: &str = "AtomicI64";
/// The ceiling's name.
pub const CEILING: &str = "ceiling";

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

/// The reader label to read costs at.
fn reader_param(params: &Params) -> String {
    match params.readers_hz {
        0 => Reader::Continuous.label(),
        hz => Reader::Hz(hz).label(),
    }
}

fn min_read(figures: &[Figure], name: &str) -> Option<f64> {
    figures
        .iter()
        .filter(|f| f.workload == "read_under_write" && f.contender == name && f.metric == MIN_READ)
        .map(|f| f.low)
        .reduce(f64::min)
}

/// The ranked table: recommendable contenders by throughput at the user's thread count, then
/// the excluded ones (the ceiling first) with the reason.
pub fn rank(figures: &[Figure], contenders: &[Info], params: &Params) -> Vec<Row> {
    let t = params.threads.to_string();
    let tput = |name: &str| find(figures, "threads", name, &t, PAIRS_PER_S);
    let ceiling = tput(CEILING).map_or(f64::NAN, |f| f.median);
    let atomic = tput(ATOMIC).map_or(f64::NAN, |f| f.median);
    let reader = reader_param(params);
    let mut rows: Vec<Row> = contenders
        .iter()
        .map(|c| {
            let f = tput(&c.name);
            let throughput = f.map_or(f64::NAN, |f| f.median);
            let read_ns = find(figures, "read_under_write", &c.name, &reader, READ_NS)
                .or_else(|| find(figures, "read_under_write", &c.name, "continuous", READ_NS))
                .map(|f| f.median);
            let min_read = min_read(figures, &c.name);
            let bytes = find(figures, "memory", &c.name, &t, BYTES).map(|f| f.median);
            let excluded = match c.kind {
                Kind::Ceiling => Some("not a counter: the physical limit".to_owned()),
                Kind::Oracle => Some("Mutex oracle, for tests only".to_owned()),
                _ if min_read.is_some_and(|m| m < 0.0) => Some("read below 0".to_owned()),
                _ if bytes
                    .zip(params.max_bytes_per_counter)
                    .is_some_and(|(b, max)| b > max as f64) =>
                {
                    Some("over --max-bytes-per-counter".to_owned())
                }
                _ if f.is_none() => Some("not measured".to_owned()),
                _ => None,
            };
            Row {
                rank: None,
                name: c.name.clone(),
                import: c.import.clone(),
                kind: c.kind,
                throughput,
                spread: f.map_or(f64::NAN, Figure::spread),
                pct_ceiling: 100.0 * throughput / ceiling,
                vs_atomic: throughput / atomic,
                read_ns,
                min_read,
                bytes,
                excluded,
            }
        })
        .collect();
    rows.sort_by(|a, b| {
        let class = |r: &Row| match (r.kind, &r.excluded) {
            (Kind::Ceiling, _) => 0,
            (_, None) => 1,
            _ => 2,
        };
        class(a)
            .cmp(&class(b))
            .then(b.throughput.total_cmp(&a.throughput))
    });
    for (n, row) in (1..).zip(rows.iter_mut().filter(|r| r.excluded.is_none())) {
        row.rank = Some(n);
    }
    rows
}

/// The one-paragraph recommendation for the workload described by `params`: the fastest
/// qualifying counter, or `PerCpu` with its reasons when `per_cpu` makes a case for it.
pub fn recommend(rows: &[Row], params: &Params, per_cpu: Option<&PerCpuCase>) -> String {
    let reader = match params.readers_hz {
        0 => "a reader polling continuously".to_owned(),
        hz => format!("a reader polling at {hz} Hz"),
    };
    let limit = params.max_bytes_per_counter.map_or(String::new(), |b| {
        format!(" and at most {b} bytes per counter")
    });
    let ranked: Vec<&Row> = rows.iter().filter(|r| r.rank.is_some()).collect();
    let Some(&fastest) = ranked.first() else {
        return format!(
            "No contender qualifies for {} writer threads with {reader}{limit}: every one was excluded \
             (see the table). Relax --max-bytes-per-counter or check the measurements.",
            params.threads
        );
    };
    let chosen = per_cpu.and_then(|case| Some((case, *ranked.iter().find(|r| r.name == PER_CPU)?)));
    let (best, why) = match chosen {
        Some((case, row)) => (row, format!("{}. It", case.why())),
        None => (fastest, "it".to_owned()),
    };
    let read = best.read_ns.map_or(String::new(), |ns| {
        let hz = if params.readers_hz == 0 {
            1e9 / ns.max(1e-3)
        } else {
            f64::from(params.readers_hz)
        };
        format!(
            " A read costs {ns:.0} ns, {:.4}% of one core at that pace.",
            (hz * ns / 1e7).min(100.0)
        )
    });
    let bytes = best.bytes.map_or(String::new(), |b| {
        format!(
            " It takes {b:.0} bytes per counter at {} threads.",
            params.threads
        )
    });
    let runner = if best.name != fastest.name {
        format!(
            " Throughput alone ranks `{}` first: `{}` did {:.0}% of its pairs/s.",
            fastest.import,
            best.name,
            100.0 * best.throughput / fastest.throughput
        )
    } else {
        ranked.get(1).map_or(String::new(), |r| {
            format!(
                " Runner-up: `{}` at {:.0}% of that throughput.",
                r.import,
                100.0 * r.throughput / best.throughput
            )
        })
    };
    let unsafe_reads: Vec<&str> = rows
        .iter()
        .filter(|r| r.excluded.as_deref() == Some("read below 0"))
        .map(|r| r.name.as_str())
        .collect();
    let negative = if unsafe_reads.is_empty() {
        String::new()
    } else {
        format!(
            " Not recommended whatever their speed: {} read below 0 while sessions ended on other threads, \
             which a load balancer would take for free capacity.",
            unsafe_reads.join(", ")
        )
    };
    format!(
        "For {} writer threads starting and ending sessions with {reader}{limit}, import `{}`: {why} \
         sustained {} start+end pairs/s (±{:.0}%), {:.0}% of the ceiling and {:.1}× `AtomicI64`, and \
         no reader ever saw it below {}.{read}{bytes}{runner}{negative}",
        params.threads,
        best.import,
        si(best.throughput),
        50.0 * best.spread,
        best.pct_ceiling,
        best.vs_atomic,
        best.min_read
            .map_or("(not measured)".into(), |m| format!("{m:.0}")),
    )
}

/// `1.23 G`, `45.6 M`, `789 k`.
pub fn si(x: f64) -> String {
    match x.abs() {
        v if v >= 1e9 => format!("{:.2} G", x / 1e9),
        v if v >= 1e6 => format!("{:.1} M", x / 1e6),
        v if v >= 1e3 => format!("{:.0} k", x / 1e3),
        _ => format!("{x:.0}"),
    }
}

/// One of the targets.
#[derive(Clone, Debug, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct Target {
    /// What the issue asks.
    pub goal: String,
    /// What was measured.
    pub measured: String,
    /// Whether it was met (`None`: not measurable in this run).
    pub met: Option<bool>,
}

/// The fastest livecount counter at `workload` / `param`, named with `suffix` (`""` for the
/// bare counter, `"+session"` for it behind a session tracker), and its pairs/s.
fn best_live(
    figures: &[Figure],
    contenders: &[Info],
    workload: &str,
    param: &str,
    suffix: &str,
) -> Option<(String, f64)> {
    contenders
        .iter()
        .filter(|c| c.kind == Kind::Livecount)
        .filter_map(|c| {
            let name = format!("{}{suffix}", c.name);
            find(figures, workload, &name, param, PAIRS_PER_S).map(|f| (name, f.median))
        })
        .max_by(|a, b| a.1.total_cmp(&b.1))
}

/// What a `sharded-slab` tracker could do at best (the lifecycle workload's slab floor), as a
/// clause for the tracked target: "" when the run has no floor figures.
fn slab_floor(figures: &[Figure], atomic_1: f64, atomic_2: f64) -> String {
    const FLOOR: &str = "PerThread+sharded-slab floor";
    let at = |t: &str| find(figures, "lifecycle", FLOOR, t, PAIRS_PER_S).map(|f| f.median);
    match (at("1"), at("2")) {
        (Some(f1), Some(f2)) => format!(
            " (the sharded-slab floor — insert + remove + the PerThread pair, nothing else: \
             {:.1} ns = {:.1}× at 1 thread, {:.2}× at 2)",
            1e9 / f1,
            atomic_1 / f1,
            f2 / atomic_2
        ),
        _ => String::new(),
    }
}

/// Evaluates the targets on `figures`, measured on a machine with `cores` cores.
pub fn targets(figures: &[Figure], contenders: &[Info], cores: usize) -> Vec<Target> {
    let at = |name: &str, t: &str| find(figures, "threads", name, t, PAIRS_PER_S).map(|f| f.median);
    let mut out = Vec::new();
    // 1. Two threads.
    let two = best_live(figures, contenders, "threads", "2", "");
    let peer = PEER_CRATES
        .iter()
        .filter_map(|p| at(p, "2").map(|v| (*p, v)))
        .max_by(|a, b| a.1.total_cmp(&b.1));
    out.push(match (two.clone(), at(ATOMIC, "2"), peer, at(CEILING, "2")) {
        (Some((name, v)), Some(a), Some((pname, p)), Some(c)) => Target {
            goal:
                "2 threads: best livecount ≥ 8× AtomicI64, ≥ 2× best peer crate, ≥ 50% of ceiling"
                    .into(),
            measured: format!(
                "{name}: {}/s = {:.1}× AtomicI64, {:.2}× {pname}, {:.0}% of ceiling",
                si(v),
                v / a,
                v / p,
                100.0 * v / c
            ),
            met: Some(v / a >= 8.0 && v / p >= 2.0 && v / c >= 0.5),
        },
        _ => missing("2 threads: best livecount ≥ 8× AtomicI64, ≥ 2× best peer, ≥ 50% of ceiling"),
    });
    // 2. One thread: cost ratio.
    out.push(
        match (
            best_live(figures, contenders, "threads", "1", ""),
            at(ATOMIC, "1"),
        ) {
            (Some((name, v)), Some(a)) => Target {
                goal: "1 thread: best livecount start+end costs ≤ 0.6× AtomicI64's".into(),
                measured: format!(
                    "{name}: {:.2} ns vs {:.2} ns = {:.2}×",
                    1e9 / v,
                    1e9 / a,
                    a / v
                ),
                met: Some(a / v <= 0.6),
            },
            _ => missing("1 thread: best livecount ≤ 0.6× AtomicI64"),
        },
    );
    // 3. Never below zero.
    let mins: Vec<(String, f64)> = contenders
        .iter()
        .filter(|c| matches!(c.kind, Kind::Livecount | Kind::Oracle))
        .filter_map(|c| min_read(figures, &c.name).map(|m| (c.name.clone(), m)))
        .collect();
    let true_max = figures
        .iter()
        .filter(|f| f.metric == TRUE_MAX)
        .map(|f| f.high)
        .reduce(f64::max);
    out.push(if mins.is_empty() {
        missing("no livecount counter reads below 0 under writes")
    } else {
        Target {
            goal: "read under write: no livecount counter ever reads below 0".into(),
            measured: format!(
                "min reads {} (true range 0..={})",
                mins.iter()
                    .map(|(n, m)| format!("{n} {m:.0}"))
                    .collect::<Vec<_>>()
                    .join(", "),
                true_max.map_or("?".into(), |t| format!("{t:.0}"))
            ),
            met: Some(mins.iter().all(|(_, m)| *m >= 0.0)),
        }
    });
    // 4. The tracked pair against the single atomic line.
    let best_tracked = |t: &str| best_live(figures, contenders, "lifecycle", t, "+session");
    const TRACKED: &str = "tracked session start + end(Completed) (registry, phases, reasons): \
                           ≤ 2× the AtomicI64 pair's cost at 1 thread, ≥ 2× its throughput at 2";
    out.push(
        match (
            best_tracked("1"),
            at(ATOMIC, "1"),
            best_tracked("2"),
            at(ATOMIC, "2"),
        ) {
            (Some((n1, v1)), Some(a1), Some((n2, v2)), Some(a2)) => Target {
                goal: TRACKED.into(),
                measured: format!(
                    "1 thread: {n1} {:.1} ns vs {:.1} ns = {:.1}×; 2 threads: {n2} {}/s = {:.2}× AtomicI64{}",
                    1e9 / v1,
                    1e9 / a1,
                    a1 / v1,
                    si(v2),
                    v2 / a2,
                    slab_floor(figures, a1, a2)
                ),
                met: Some(a1 / v1 <= 2.0 && v2 / a2 >= 2.0),
            },
            _ => missing(TRACKED),
        },
    );
    // 5. Close to the ceiling.
    const CEILING_GOAL: &str = "2 threads: best livecount ≥ 80% of the ceiling";
    out.push(match (two, at(CEILING, "2")) {
        (Some((name, v)), Some(c)) => Target {
            goal: CEILING_GOAL.into(),
            measured: format!("{name}: {:.0}% of the ceiling ({}/s)", 100.0 * v / c, si(c)),
            met: Some(v / c >= 0.8),
        },
        _ => missing(CEILING_GOAL),
    });
    // 6. Striped keeps up with Sharded past the core count.
    const STRIPED_GOAL: &str = "Striped ≥ Sharded at every thread count";
    let pairs: Vec<(String, f64)> = figures
        .iter()
        .filter(|f| f.workload == "threads" && f.contender == "Sharded" && f.metric == PAIRS_PER_S)
        .filter_map(|sharded| {
            let striped = at("Striped", &sharded.param)?;
            Some((sharded.param.clone(), striped / sharded.median))
        })
        .collect();
    out.push(if pairs.is_empty() {
        missing(STRIPED_GOAL)
    } else {
        Target {
            goal: STRIPED_GOAL.into(),
            measured: format!("Striped ÷ Sharded: {}", ratios_at(&pairs)),
            met: Some(pairs.iter().all(|(_, r)| *r >= 1.0)),
        }
    });
    // 7–9. PerCpu against PerThread.
    out.extend(crate::per_cpu_case::targets(figures, cores));
    out
}

/// A target this run has no figures for.
pub(crate) fn missing(goal: &str) -> Target {
    Target {
        goal: goal.into(),
        measured: "not measured in this run".into(),
        met: None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn info(name: &str, kind: Kind) -> Info {
        Info {
            name: name.into(),
            import: format!("crate::{name}"),
            kind,
        }
    }

    fn fig(workload: &str, name: &str, param: &str, metric: &str, v: f64) -> Figure {
        Figure::from_samples(workload, name, param, metric, vec![v, v, v])
    }

    fn params(max_bytes: Option<u64>) -> Params {
        Params::for_tests(2, max_bytes)
    }

    /// ceiling 400, Fast (livecount) 300, Big (livecount, huge) 350, Neg (peer) 500 but reads
    /// below 0, AtomicI64 30, oracle 10; every figure a target needs at 1 and 2 threads.
    fn world() -> (Vec<Info>, Vec<Figure>) {
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
                figures.push(fig("threads", name, t, PAIRS_PER_S, v));
                figures.push(fig(
                    "memory",
                    name,
                    t,
                    BYTES,
                    if name == "Big" { 1e6 } else { 64.0 },
                ));
            }
            let min = if name == "Neg" { -7.0 } else { 0.0 };
            figures.push(fig("read_under_write", name, "10Hz", MIN_READ, min));
            figures.push(fig("read_under_write", name, "10Hz", READ_NS, 50.0));
            figures.push(fig("read_under_write", name, "10Hz", TRUE_MAX, 384.0));
        }
        for t in ["1", "2"] {
            figures.push(fig("lifecycle", "Fast", t, PAIRS_PER_S, 300.0));
            figures.push(fig("lifecycle", "Fast+session", t, PAIRS_PER_S, 100.0));
        }
        figures.push(fig("threads", "Sharded", "1", PAIRS_PER_S, 60.0));
        figures.push(fig("threads", "Striped", "1", PAIRS_PER_S, 61.0));
        (contenders, figures)
    }

    #[test]
    fn ranking_excludes_ceiling_oracle_negative_reads_and_oversized() {
        let (contenders, figures) = world();
        let rows = rank(&figures, &contenders, &params(Some(4096)));
        let order: Vec<(&str, Option<usize>)> =
            rows.iter().map(|r| (r.name.as_str(), r.rank)).collect();
        assert_eq!(
            order,
            [
                (CEILING, None),
                ("Fast", Some(1)),
                ("fast-counter", Some(2)),
                (ATOMIC, Some(3)),
                ("Neg", None),
                ("Big", None),
                ("Oracle", None),
            ]
        );
        assert_eq!(rows[4].excluded.as_deref(), Some("read below 0"));
        assert_eq!(
            rows[5].excluded.as_deref(),
            Some("over --max-bytes-per-counter")
        );
        assert_eq!(rows[1].pct_ceiling, 75.0);
        assert_eq!(rows[1].vs_atomic, 10.0);
        // Without a byte limit the bigger, faster counter wins.
        let rows = rank(&figures, &contenders, &params(None));
        assert_eq!(rows[1].name, "Big");
    }

    #[test]
    fn recommendation_names_the_import_and_the_reasons() {
        let (contenders, figures) = world();
        let p = params(Some(4096));
        let text = recommend(&rank(&figures, &contenders, &p), &p, None);
        assert!(text.contains("import `crate::Fast`"), "{text}");
        assert!(
            text.contains("75% of the ceiling") && text.contains("10.0× `AtomicI64`"),
            "{text}"
        );
        assert!(text.contains("Runner-up: `crate::fast-counter`"), "{text}");
        assert!(text.contains("Neg read below 0"), "{text}");
        let none = recommend(&rank(&figures, &contenders[..1], &p), &p, None);
        assert!(none.starts_with("No contender qualifies"), "{none}");
    }

    #[test]
    fn targets_are_judged_from_figures() {
        let (contenders, figures) = world();
        let t = targets(&figures, &contenders, 2);
        // Big: 350/30 = 11.7× AtomicI64, 3.5× fast-counter, 87.5% of ceiling.
        assert_eq!(t[0].met, Some(true), "{:?}", t[0]);
        // 30/350 = 0.09 ≤ 0.6.
        assert_eq!(t[1].met, Some(true), "{:?}", t[1]);
        assert_eq!(t[2].met, Some(true), "{:?}", t[2]);
        // Tracked 100/s against AtomicI64's 30/s: 0.3× its cost, 3.3× its throughput at 2.
        assert_eq!(t[3].met, Some(true), "{:?}", t[3]);
        // Big 350 of the ceiling's 400: 87.5 %.
        assert_eq!(t[4].met, Some(true), "{:?}", t[4]);
        assert_eq!(t[5].met, Some(true), "{:?}", t[5]);
        assert!(t[5].measured.contains("1.02× at 1"), "{}", t[5].measured);
        let mut worse = figures.clone();
        worse.retain(|f| f.contender != "Fast+session" && f.contender != "Striped");
        worse.push(fig("lifecycle", "Fast+session", "1", PAIRS_PER_S, 10.0));
        worse.push(fig("lifecycle", "Fast+session", "2", PAIRS_PER_S, 100.0));
        worse.push(fig("threads", "Striped", "1", PAIRS_PER_S, 30.0));
        worse.retain(|f| !(f.contender == "Fast" && f.metric == MIN_READ));
        worse.push(fig("read_under_write", "Fast", "10Hz", MIN_READ, -1.0));
        worse.retain(|f| f.contender != "Big");
        let t = targets(&worse, &contenders, 2);
        assert_eq!(
            (t[2].met, t[3].met, t[4].met, t[5].met),
            (Some(false), Some(false), Some(false), Some(false))
        );
        // 1e9/10 = 100 ns against 1e9/30 = 33.3 ns: 3.0× the cost.
        assert!(t[3].measured.contains("= 3.0×"), "{}", t[3].measured);
        // Fast 300 of 400: 75 %.
        assert!(t[4].measured.contains("75%"), "{}", t[4].measured);
        assert_eq!(targets(&[], &contenders, 2)[0].met, None);
    }
}
