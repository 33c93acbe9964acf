//! Rendering: the ranked table, `REPORT.md`, livecount's targets (`TARGETS.md`, for its
//! maintainers), and the `--compare` ratios.

use std::fmt::Write as _;

use crate::figure::{Figure, Metric, Workload};
use crate::machine::Machine;
use crate::results::{Results, Row};

/// `1.23 G`, `45.6 M`, `789 k`.
pub(crate) fn si(x: f64) -> String {
    match x.abs() {
        v if v >= 1e9 => format!("{:.2} G", x / 1e9),
        v if v >= 1e6 => format!("{:.1} M", x / 1e6),
        v if v >= 1e3 => format!("{:.0} k", x / 1e3),
        _ => format!("{x:.0}"),
    }
}

/// Ratios at thread counts as a report reads them: "0.62× at 1, 0.66× at 2".
pub(crate) fn ratios_at<T: std::fmt::Display>(ratios: &[(T, f64)]) -> String {
    ratios
        .iter()
        .map(|(at, ratio)| format!("{ratio:.2}× at {at}"))
        .collect::<Vec<_>>()
        .join(", ")
}

/// The ranked table as Markdown (it reads fine in a terminal too).
pub fn table(rows: &[Row], threads: usize) -> String {
    let mut s = format!(
        "| # | counter | pairs/s @ {threads} threads | spread | % of ceiling | × AtomicI64 | read ns | min read | bytes | note |\n\
         |---|---|---:|---:|---:|---:|---:|---:|---:|---|\n"
    );
    for r in rows {
        let opt = |v: Option<f64>, p: usize| v.map_or("-".to_owned(), |v| format!("{v:.p$}"));
        let _ = writeln!(
            s,
            "| {} | {} | {} | ±{:.0}% | {:.0}% | {:.1}× | {} | {} | {} | {} |",
            r.rank.map_or("-".into(), |n| n.to_string()),
            r.name,
            si(r.throughput),
            50.0 * r.spread,
            r.pct_ceiling,
            r.vs_atomic,
            opt(r.read_ns, 0),
            opt(r.min_read, 0),
            opt(r.bytes, 0),
            r.excluded.as_deref().unwrap_or(""),
        );
    }
    s
}

/// How `PerCpu` counted on the machine, which its figures depend on: one line, or `""` for
/// results from before it existed.
pub fn per_cpu_note(m: &Machine) -> String {
    m.per_cpu.as_ref().map_or(String::new(), |p| {
        format!(
            "PerCpu here: CPU ids from {} (`livecount::CpuSource`), {} per-CPU cells + 1 overflow \
             = {} bytes per counter; its figures depend on both.",
            p.source, p.cells, p.bytes
        )
    })
}

/// Which JVM the Java anchors ran on, or why they did not: one line, or `""` for results from
/// before the probe.
pub(crate) fn java_note(m: &Machine) -> String {
    m.java.as_ref().map_or(String::new(), |java| {
        format!("Java anchors (LongAdder, AtomicLong): {java}.")
    })
}

/// The heading livecount's own targets go under, in the terminal and in `TARGETS.md`.
pub const TARGETS_HEADING: &str = "livecount's own targets (for its maintainers)";

/// What the targets are, in one line under [`TARGETS_HEADING`].
pub const TARGETS_NOTE: &str = "What livecount aims for on any machine, judged on this run; \
     not about the workload described (the recommendation above is).";

/// livecount's own targets as a Markdown list.
pub fn targets(results: &Results) -> String {
    let mut s = String::new();
    for t in &results.targets {
        let mark = match t.met {
            Some(true) => "MET",
            Some(false) => "NOT MET",
            None => "NOT MEASURED",
        };
        let _ = writeln!(s, "- **{mark}** — {}: {}", t.goal, t.measured);
    }
    s
}

/// Every figure of one workload as a Markdown table: contenders down, parameters across.
fn workload_table(
    figures: &[Figure],
    workload: Workload,
    metric: Metric,
    fmt: impl Fn(f64) -> String,
) -> String {
    let mine: Vec<&Figure> = figures
        .iter()
        .filter(|f| f.workload == workload && f.metric == metric)
        .collect();
    let mut params: Vec<&str> = Vec::new();
    let mut names: Vec<&str> = Vec::new();
    for f in &mine {
        if !params.contains(&f.param.as_str()) {
            params.push(&f.param);
        }
        if !names.contains(&f.contender.as_str()) {
            names.push(&f.contender);
        }
    }
    if mine.is_empty() {
        return String::new();
    }
    let mut s = format!(
        "| {workload} / {metric} | {} |\n|---|{}\n",
        params.join(" | "),
        "---:|".repeat(params.len())
    );
    for n in names {
        let cells: Vec<String> = params
            .iter()
            .map(|p| {
                mine.iter()
                    .find(|f| f.contender == n && f.param == *p)
                    .map_or("-".into(), |f| {
                        // Extremes are reported as the worst repetition, not a median.
                        if metric == Metric::MinRead {
                            fmt(f.low)
                        } else if matches!(metric, Metric::MaxRead | Metric::TrueMax) {
                            fmt(f.high)
                        } else if f.median != 0.0 && (f.samples.len() > 1 || f.low != f.high) {
                            format!("{} (±{:.0}%)", fmt(f.median), 50.0 * f.spread())
                        } else {
                            fmt(f.median)
                        }
                    })
            })
            .collect();
        let _ = writeln!(s, "| {n} | {} |", cells.join(" | "));
    }
    s.push('\n');
    s
}

/// `REPORT.md`: generated from `results.json`, never edited by hand.
pub(crate) fn markdown(r: &Results) -> String {
    let m = &r.machine;
    let p = &r.params;
    let mut s = String::new();
    let _ = writeln!(s, "# livecount contention results — {}\n", m.label);
    let _ = writeln!(
        s,
        "<!-- Generated by livecount-picker from results.json; do not edit by hand. -->\n"
    );
    let _ = writeln!(s, "Machine: {} ({} cores)  ", m.cpu_model, m.cores);
    let _ = writeln!(s, "Rust: {}  ", m.rustc);
    let _ = writeln!(s, "Commit: {}  ", m.commit);
    let _ = writeln!(s, "Date: {}  ", m.date);
    if m.per_cpu.is_some() {
        let _ = writeln!(s, "{}  ", per_cpu_note(m));
    }
    if m.java.is_some() {
        let _ = writeln!(s, "{}  ", java_note(m));
    }
    let _ = writeln!(s, "Source: {}\n", r.source);
    let _ = writeln!(s, "Reproduce: `{}`\n", r.command);
    let _ = writeln!(
        s,
        "Workload described: {} writer threads, reader at {}, max bytes per counter {}. Sweep: {:?}, \
         budget {:.0} s, {} repetitions per point (median and ±half-spread shown), {} writers in \
         read-under-write. Numbers are ballpark: a shared VM is noisy.\n",
        p.threads,
        if p.readers_hz == 0 {
            "continuous".to_owned()
        } else {
            format!("{} Hz", p.readers_hz)
        },
        p.max_bytes_per_counter
            .map_or("unlimited".into(), |b| b.to_string()),
        p.mode,
        p.budget_secs,
        p.reps,
        p.rw_writers,
    );
    let _ = writeln!(
        s,
        "## Ranking\n\n{}\n{}\n",
        table(&r.ranking, p.threads),
        r.recommendation
    );
    let _ = writeln!(
        s,
        "## Plots\n\n![throughput vs threads](throughput.svg)\n\n![reader min/max](reader.svg)\n"
    );
    let _ = writeln!(s, "## Every figure\n");
    let pairs = |v: f64| si(v);
    let plain = |v: f64| format!("{v:.0}");
    for &w in &r.workloads {
        s += &workload_table(&r.figures, w, Metric::PairsPerS, pairs);
    }
    for metric in [
        Metric::ReadNs,
        Metric::MinRead,
        Metric::MaxRead,
        Metric::TrueMax,
        Metric::WriterSlowdownPct,
    ] {
        s += &workload_table(&r.figures, Workload::ReadUnderWrite, metric, plain);
    }
    let rat = Workload::ReadAtThreads;
    s += &workload_table(&r.figures, rat, Metric::ReadNs, |v| format!("{v:.1}"));
    s += &workload_table(&r.figures, Workload::Memory, Metric::Bytes, plain);
    let _ = writeln!(
        s,
        "Workloads: **threads** — T threads on a barrier, each start+end back to back; **handoff** — \
         producers start sessions and send them in batches of 64 over a bounded channel to consumers that \
         end them; **tasks** — K tokio tasks each looping start → yield_now → end; **read_under_write** — \
         writers in a ring hand half their sessions to a neighbour while one reader reads at the given pace; \
         min/max are what it saw, the true value is always within 0..=true_max; **read_at_threads** — \
         T threads (64 KiB stacks) each start a session and park alive while one thread times \
         back-to-back reads, ns per read; **lifecycle** — \
         `SessionTracker::start` + `end(Completed)` vs the bare counter; **churn** — waves of short-lived \
         threads ({} pairs each); **memory** — inline + heap bytes after T threads each held a session.",
        crate::plan::CHURN_PAIRS
    );
    s
}

/// `TARGETS.md`, written beside `REPORT.md`: livecount's own targets judged on the run, a page
/// for its maintainers. The targets themselves are defined once, in [`crate::targets`]; this
/// only prints the verdicts `results.json` holds.
pub(crate) fn targets_markdown(r: &Results) -> String {
    let m = &r.machine;
    let mut s = String::new();
    let _ = writeln!(s, "# {TARGETS_HEADING} — {}\n", m.label);
    let _ = writeln!(
        s,
        "<!-- Generated by livecount-picker from results.json; do not edit by hand. -->\n"
    );
    let _ = writeln!(
        s,
        "A page for livecount's maintainers, not a result: what livecount aims for on any \
         machine, judged on the run in [REPORT.md](REPORT.md). The targets say nothing about \
         the workload that run describes (its recommendation does); they are defined in \
         `crates/picker/src/targets.rs`.\n"
    );
    let _ = writeln!(s, "Machine: {} ({} cores)  ", m.cpu_model, m.cores);
    let _ = writeln!(s, "Commit: {}  ", m.commit);
    let _ = writeln!(s, "Reproduce: `{}`\n", r.command);
    s += &targets(r);
    s
}

/// One line of a comparison.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct Change {
    /// The figure's key (workload/contender/param/metric).
    pub key: String,
    /// What the figure measures, which says which direction is better.
    pub metric: Metric,
    /// The old median.
    pub old: f64,
    /// The new median.
    pub new: f64,
}

impl Change {
    /// `new / old`.
    pub(crate) fn ratio(&self) -> f64 {
        self.new / self.old
    }

    /// Whether the change is a regression of more than `tolerance` (0.1 = 10%), given the
    /// metric's direction (throughput: higher is better; costs and bytes: lower is better).
    pub(crate) fn regressed(&self, tolerance: f64) -> bool {
        match self.metric.higher_is_better() {
            Some(true) => self.ratio() < 1.0 - tolerance,
            Some(false) => self.ratio() > 1.0 + tolerance,
            None => false,
        }
    }
}

/// Every figure present in both runs, with its ratio.
pub(crate) fn compare(old: &[Figure], new: &[Figure]) -> Vec<Change> {
    new.iter()
        .filter_map(|n| {
            let key = n.key();
            old.iter().find(|o| o.key() == key).map(|o| Change {
                key,
                metric: n.metric,
                old: o.median,
                new: n.median,
            })
        })
        .collect()
}

/// The comparison as a table, regressions (beyond 10%) marked.
pub(crate) fn compare_table(changes: &[Change]) -> String {
    let mut s = String::from("| figure | old | new | new/old | |\n|---|---:|---:|---:|---|\n");
    for c in changes {
        let _ = writeln!(
            s,
            "| {} | {} | {} | {:.2} | {} |",
            c.key,
            si(c.old),
            si(c.new),
            c.ratio(),
            if c.regressed(0.1) { "REGRESSION" } else { "" }
        );
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A committed run, read back as the picker writes it.
    fn committed() -> Results {
        let json = concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../../results/amd-epyc-2c/results.json"
        );
        crate::sweep::load(std::path::Path::new(json)).unwrap()
    }

    #[test]
    fn report_leaves_the_targets_to_their_own_page() {
        let r = committed();
        assert!(!r.targets.is_empty());
        let report = markdown(&r);
        assert!(report.contains("## Ranking") && report.contains(&r.recommendation));
        for maintainers in [TARGETS_HEADING, TARGETS_NOTE, "MET** —"] {
            assert!(
                !report.contains(maintainers),
                "REPORT.md holds {maintainers:?}"
            );
        }

        let page = targets_markdown(&r);
        let heading = format!("# {TARGETS_HEADING} — {}\n", r.machine.label);
        assert!(page.starts_with(&heading), "{page}");
        assert!(page.contains("Generated by livecount-picker"));
        assert!(page.contains("[REPORT.md](REPORT.md)"));
        assert!(page.contains(&format!("Commit: {}", r.machine.commit)));
        assert!(page.ends_with(&targets(&r)), "every verdict, last: {page}");
        assert_eq!(page.matches("\n- **").count(), r.targets.len());
    }

    fn fig(contender: &str, metric: Metric, v: f64) -> Figure {
        Figure::from_samples(Workload::Threads, contender, "2", metric, vec![v])
    }

    #[test]
    fn compare_matches_by_key_and_knows_directions() {
        let old = vec![
            fig("a", Metric::PairsPerS, 100.0),
            fig("a", Metric::ReadNs, 10.0),
            fig("gone", Metric::PairsPerS, 1.0),
        ];
        let new = vec![
            fig("a", Metric::PairsPerS, 50.0),
            fig("a", Metric::ReadNs, 5.0),
            fig("fresh", Metric::PairsPerS, 1.0),
        ];
        let changes = compare(&old, &new);
        assert_eq!(changes.len(), 2);
        assert_eq!(changes[0].ratio(), 0.5);
        assert!(
            changes[0].regressed(0.1),
            "half the throughput is a regression"
        );
        assert!(
            !changes[1].regressed(0.1),
            "half the read cost is an improvement"
        );
        let table = compare_table(&changes);
        assert!(table.contains("threads/a/2/pairs_per_s") && table.contains("REGRESSION"));
    }
}
