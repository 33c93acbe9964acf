//! The one-paragraph recommendation: the fastest qualifying counter of the ranked table, or
//! `PerCpu` with its reasons when [`PerCpuCase`] makes a case for it.

use crate::contender::PER_CPU;
use crate::per_cpu_case::PerCpuCase;
use crate::report::si;
use crate::results::{Params, Row};

/// The recommendation for the workload described by `params`: the fastest
/// qualifying counter, or `PerCpu` with its reasons when `per_cpu` makes a case for it.
pub(crate) fn recommend(rows: &[Row], params: &Params, per_cpu: Option<&PerCpuCase>) -> String {
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::contender::{Info, PER_THREAD};
    use crate::figure::{Figure, Workload};
    use crate::rank::rank;
    use crate::test_support::{params, per_cpu_world, ranking_world};

    const CORES: usize = 2;

    #[test]
    fn recommendation_names_the_import_and_the_reasons() {
        let (contenders, figures) = ranking_world();
        let p = params(2, Some(4096));
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

    fn advice(figures: &[Figure], contenders: &[Info], p: &Params) -> String {
        let rows = rank(figures, contenders, p);
        let case = PerCpuCase::detect(figures, &rows, p, CORES);
        recommend(&rows, p, case.as_ref())
    }

    #[test]
    fn at_threads_up_to_a_few_per_core_the_ranking_stands() {
        let (contenders, figures) = per_cpu_world();
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
        let (contenders, figures) = per_cpu_world();
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
        let (contenders, figures) = per_cpu_world();
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
        let (contenders, mut figures) = per_cpu_world();
        figures.retain(|f| !(f.contender == PER_CPU && f.workload == Workload::Threads));
        let p = params(16, None);
        let rows = rank(&figures, &contenders, &p);
        assert_eq!(PerCpuCase::detect(&figures, &rows, &p, CORES), None);
        assert!(advice(&figures, &contenders, &p).contains("import `livecount::PerThread`"));
    }
}
