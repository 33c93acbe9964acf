//! `REPORT.md`: provenance, a policies × metrics table, the best policy per metric and links
//! to the plots. Also home of [`COLUMNS`], the metric definitions the terminal table shares.

use std::fmt::Write as _;

use super::RunMeta;
use super::plot::{LATENCY_SVG, SPREAD_SVG};
use super::seeds::{Verdict, verdict};
use crate::sim_result::{MetricStats, ScenarioResult, Summary};

/// How a metric's value is printed.
#[derive(Debug, Clone, Copy)]
enum Format {
    /// A whole number.
    Count,
    /// A share in `0..=1`, printed as a percentage with one decimal.
    Percent,
    /// Milliseconds: one decimal below 100 ms, none above.
    Ms,
    /// A plain number with this many decimals.
    Fixed(usize),
}

/// One metric column: its headers, how to read it from a [`Summary`], how to print it and
/// which way is better.
#[derive(Debug)]
pub(super) struct Column {
    /// Header in `REPORT.md`.
    header: &'static str,
    /// Shorter header for the terminal table.
    pub(super) short: &'static str,
    value: fn(&Summary) -> f64,
    format: Format,
    higher_is_better: bool,
}

/// Every metric shown, in table order. Lower is better for all but `assigned`.
pub(super) const COLUMNS: &[Column] = &[
    col(
        "assigned",
        "assigned",
        |s| s.assigned as f64,
        Format::Count,
        true,
    ),
    col(
        "rejected + dropped",
        "rej+drop",
        |s| (s.rejected + s.dropped) as f64,
        Format::Count,
        false,
    ),
    col(
        "overloaded assignments (%)",
        "ovl-asg%",
        |s| s.overloaded_rate,
        Format::Percent,
        false,
    ),
    col(
        "overloaded time (%)",
        "ovl-time%",
        |s| s.overloaded_time_share,
        Format::Percent,
        false,
    ),
    col(
        "mean CV",
        "cv",
        |s| s.spread_cv_mean,
        Format::Fixed(3),
        false,
    ),
    col(
        "mean max−min",
        "max-min",
        |s| s.spread_range_mean,
        Format::Fixed(1),
        false,
    ),
    col(
        "peak/mean",
        "peak/mean",
        |s| s.spread_peak_ratio_mean,
        Format::Fixed(2),
        false,
    ),
    col(
        "startup p50 (ms)",
        "start50",
        |s| s.startup_ms.p50,
        Format::Ms,
        false,
    ),
    col(
        "startup p95 (ms)",
        "start95",
        |s| s.startup_ms.p95,
        Format::Ms,
        false,
    ),
    col(
        "startup p99 (ms)",
        "start99",
        |s| s.startup_ms.p99,
        Format::Ms,
        false,
    ),
    col(
        "first stream p95 (ms)",
        "first95",
        |s| s.first_stream_ms.p95,
        Format::Ms,
        false,
    ),
    col(
        "first stream p99 (ms)",
        "first99",
        |s| s.first_stream_ms.p99,
        Format::Ms,
        false,
    ),
    col(
        "tracked err final",
        "trk-fin",
        |s| s.counter.tracked_final_error as f64,
        Format::Count,
        false,
    ),
    col(
        "tracked err max",
        "trk-max",
        |s| s.counter.tracked_max_error as f64,
        Format::Count,
        false,
    ),
    col(
        "naive err final",
        "naive-fin",
        |s| s.counter.naive_final_error as f64,
        Format::Count,
        false,
    ),
    col(
        "naive err max",
        "naive-max",
        |s| s.counter.naive_max_error as f64,
        Format::Count,
        false,
    ),
];

/// Shown after [`COLUMNS`] when the scenario has a rolling restart (older results and other
/// scenarios keep their tables).
pub(super) const RESTART_COLUMNS: &[Column] = &[
    col(
        "restart: sessions cut",
        "rr-cut",
        |s| s.restart.map_or(0.0, |r| r.cut as f64),
        Format::Count,
        false,
    ),
    col(
        "restart: reconnects",
        "rr-reconn",
        |s| s.restart.map_or(0.0, |r| r.reconnects as f64),
        Format::Count,
        false,
    ),
    col(
        "restart: refused",
        "rr-refused",
        |s| s.restart.map_or(0.0, |r| r.refused as f64),
        Format::Count,
        false,
    ),
    col(
        "restart window: overloaded assignments (%)",
        "rr-ovl-asg%",
        |s| s.restart.map_or(0.0, |r| r.window_overloaded_rate),
        Format::Percent,
        false,
    ),
];

/// The columns of `result`'s tables: [`COLUMNS`], then [`RESTART_COLUMNS`] when any
/// policy's run had a rolling restart.
pub(super) fn columns(result: &ScenarioResult) -> Vec<&'static Column> {
    let restart = result.policies.iter().any(|p| p.summary.restart.is_some());
    let extra = if restart { RESTART_COLUMNS } else { &[] };
    COLUMNS.iter().chain(extra).collect()
}

/// The column called `short`, among all there are.
pub(super) fn column(short: &str) -> Option<&'static Column> {
    COLUMNS
        .iter()
        .chain(RESTART_COLUMNS)
        .find(|c| c.short == short)
}

const fn col(
    header: &'static str,
    short: &'static str,
    value: fn(&Summary) -> f64,
    format: Format,
    higher_is_better: bool,
) -> Column {
    Column {
        header,
        short,
        value,
        format,
        higher_is_better,
    }
}

// === impl Column ===

impl Column {
    /// This metric of `summary`.
    pub(super) fn value(&self, summary: &Summary) -> f64 {
        (self.value)(summary)
    }

    /// Whether a larger value is better.
    pub(super) fn higher_is_better(&self) -> bool {
        self.higher_is_better
    }

    /// This metric of `summary`, formatted for a table cell.
    pub(super) fn cell(&self, summary: &Summary) -> String {
        self.format((self.value)(summary))
    }

    /// A mean ± half-width over seeds, each formatted like the metric.
    fn cell_stats(&self, m: &MetricStats) -> String {
        format!("{} ± {}", self.format(m.mean), self.format(m.half_width))
    }

    fn format(&self, v: f64) -> String {
        match self.format {
            Format::Count => format!("{v:.0}"),
            Format::Percent => format!("{:.1}", v * 100.0),
            Format::Ms if v.abs() >= 100.0 => format!("{v:.0}"),
            Format::Ms => format!("{v:.1}"),
            Format::Fixed(decimals) => format!("{v:.decimals$}"),
        }
    }

    /// The best value's cell and every policy showing it (ties judged at printed precision).
    fn best<'a>(&self, result: &'a ScenarioResult) -> Option<(String, Vec<&'a str>)> {
        let ordered = |a: &f64, b: &f64| {
            if self.higher_is_better {
                a.total_cmp(b)
            } else {
                b.total_cmp(a)
            }
        };
        let best = result
            .policies
            .iter()
            .map(|p| (self.value)(&p.summary))
            .filter(|v| !v.is_nan())
            .max_by(ordered)?;
        let shown = result
            .policies
            .iter()
            .find(|p| (self.value)(&p.summary) == best)?;
        let cell = self.cell(&shown.summary);
        let winners = result
            .policies
            .iter()
            .filter(|p| self.cell(&p.summary) == cell)
            .map(|p| p.policy.as_str())
            .collect();
        Some((cell, winners))
    }
}

/// The whole of `REPORT.md`.
#[must_use]
pub fn render(result: &ScenarioResult, meta: &RunMeta) -> String {
    let mut out = String::new();
    header(&mut out, result, meta);
    if result.across_seeds.is_some() {
        table_across_seeds(&mut out, result);
        best_across_seeds(&mut out, result);
    } else {
        table(&mut out, result);
        best(&mut out, result);
    }
    plots(&mut out, result);
    out
}

fn header(out: &mut String, r: &ScenarioResult, meta: &RunMeta) {
    let or_unknown = |s: &str| {
        if s.is_empty() {
            "(not recorded)".to_string()
        } else {
            s.to_string()
        }
    };
    let _ = writeln!(out, "# Load-balancer simulation — {}\n", r.scenario);
    out.push_str("<!-- Generated by livecount-sim from results.json; do not edit by hand. -->\n\n");
    if !r.description.is_empty() {
        let _ = writeln!(out, "{}\n", r.description);
    }
    let _ = writeln!(out, "Machine: {}  ", or_unknown(&meta.machine));
    let _ = writeln!(out, "Rust: {}  ", or_unknown(&meta.rust));
    let _ = writeln!(out, "Commit: {}  ", or_unknown(&meta.commit));
    let _ = writeln!(out, "Scenario file: {}\n", or_unknown(&meta.scenario_file));
    let _ = writeln!(
        out,
        "Seed {}, {} backends, arrivals for {} s, target utilisation {:.0}%.\n",
        r.seed,
        r.backends,
        r.duration_s,
        r.target_utilisation * 100.0
    );
    let _ = writeln!(
        out,
        "Reproduce:\n\n```sh\n{}\n```\n",
        or_unknown(&meta.command)
    );
}

/// The header row and the alignment row of a policies × metrics table.
fn table_head(out: &mut String, columns: &[&Column]) {
    out.push_str("| policy |");
    for c in columns {
        let _ = write!(out, " {} |", c.header);
    }
    out.push_str("\n|---|");
    out.push_str(&"---:|".repeat(columns.len()));
    out.push('\n');
}

const FOOTNOTE: &str = "\nOverloaded = above the target utilisation. CV and max−min are of active \
    sessions across alive backends, averaged over samples; counter errors are summed over \
    backends.\n\n";

const RESTART_FOOTNOTE: &str = "Rolling restart: *sessions cut* are the open sessions the \
    restart ended (`shutdown`: all of a backend's at its restart in `cut` mode, those still open \
    at the drain deadline in `drain` mode); *reconnects* are cut clients that came back \
    through the balancer with the rest of their session (placed like arrivals, so counted in \
    assigned, rejected or dropped, but not in arrivals); *refused* are arrivals and reconnects \
    sent to a backend being restarted before the balancer knew (also in rejected); the restart \
    window runs from the \
    first restart until the last backend is back, and its overloaded assignments are those \
    of the window only, to the backends taking the load (the overloaded assignments column \
    is the whole run's, fleet-wide).\n\n";

/// The footnotes under a table with `columns`.
fn footnotes(out: &mut String, columns: &[&Column]) {
    out.push_str(FOOTNOTE);
    if columns.len() > COLUMNS.len() {
        out.push_str(RESTART_FOOTNOTE);
    }
}

fn table(out: &mut String, r: &ScenarioResult) {
    out.push_str("## Results\n\n");
    let columns = columns(r);
    table_head(out, &columns);
    for p in &r.policies {
        let _ = write!(out, "| {} |", escape(&p.policy));
        for c in &columns {
            let _ = write!(out, " {} |", c.cell(&p.summary));
        }
        out.push('\n');
    }
    footnotes(out, &columns);
}

fn best(out: &mut String, r: &ScenarioResult) {
    out.push_str("## Best per metric\n\nLower is better for every metric except assigned.\n\n");
    if r.policies.is_empty() {
        out.push_str("No policies were run.\n\n");
        return;
    }
    for c in columns(r) {
        let line = match c.best(r) {
            Some((_, w)) if r.policies.len() > 1 && w.len() == r.policies.len() => {
                format!("all tied at {}", c.cell(&r.policies[0].summary))
            }
            Some((cell, w)) => format!("{} ({cell})", escape(&w.join(", "))),
            None => "no value".to_string(),
        };
        let _ = writeln!(out, "- **{}**: {line}", c.header);
    }
    out.push('\n');
}

fn table_across_seeds(out: &mut String, r: &ScenarioResult) {
    let Some(stats) = &r.across_seeds else {
        return;
    };
    let n = stats.seeds.len();
    let _ = writeln!(
        out,
        "## Results over {n} seeds\n\nEach cell: mean ± half-width of the 95 % interval \
         (Student's t, {} degrees of freedom) over seeds {}.\n",
        n.saturating_sub(1),
        seed_list(&stats.seeds)
    );
    let columns = columns(r);
    table_head(out, &columns);
    for p in &stats.policies {
        let _ = write!(out, "| {} |", escape(&p.policy));
        for c in &columns {
            // By name: results written before a column existed lack its statistics.
            let cell = p
                .metrics
                .iter()
                .find(|m| m.metric == c.short)
                .map_or_else(|| "–".to_owned(), |m| c.cell_stats(m));
            let _ = write!(out, " {cell} |");
        }
        out.push('\n');
    }
    footnotes(out, &columns);
}

/// `1, 2, …, 20` as `1–20` when consecutive.
fn seed_list(seeds: &[u64]) -> String {
    let consecutive = seeds.windows(2).all(|w| w[1] == w[0].wrapping_add(1));
    match (seeds.first(), seeds.last()) {
        (Some(a), Some(b)) if consecutive && seeds.len() > 2 => format!("{a}–{b}"),
        _ => seeds
            .iter()
            .map(u64::to_string)
            .collect::<Vec<_>>()
            .join(", "),
    }
}

fn best_across_seeds(out: &mut String, r: &ScenarioResult) {
    out.push_str(
        "## Best per metric\n\nLower is better for every metric except assigned. A policy wins \
         only when its 95 % interval clears every other policy's; otherwise the policies \
         whose intervals overlap the best mean's are listed, best first, and nothing is claimed.\n\n",
    );
    for c in columns(r) {
        let line = match verdict(r, c.short) {
            Some(Verdict::Wins(p)) => format!("**{}**", escape(&p)),
            Some(Verdict::Overlap(ps)) => format!("no clear winner: {}", escape(&ps.join(", "))),
            Some(Verdict::AllTied) => "all tied".to_string(),
            None => "no value".to_string(),
        };
        let _ = writeln!(out, "- **{}**: {line}", c.header);
    }
    out.push('\n');
}

fn plots(out: &mut String, r: &ScenarioResult) {
    out.push_str("## Plots\n\n");
    if r.across_seeds.is_some() {
        let _ = writeln!(out, "Of the first seed's run ({}).\n", r.seed);
    }
    let _ = writeln!(
        out,
        "Fleet spread over time (CV of active sessions; highest utilisation):\n"
    );
    let _ = writeln!(out, "![spread]({SPREAD_SVG})\n");
    let _ = writeln!(out, "Latency CDFs (startup; time to first stream):\n");
    let _ = writeln!(out, "![latency]({LATENCY_SVG})");
}

/// Escapes the characters that would break a markdown table cell.
fn escape(s: &str) -> String {
    s.replace('|', "\\|").replace('\n', " ")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::report::tests::{fake_result, meta};

    #[test]
    fn report_has_provenance_table_best_and_plots() {
        let md = render(&fake_result(), &meta());
        assert!(md.starts_with("# Load-balancer simulation — steady-mixed\n"));
        assert!(
            md.contains("Machine: Test machine (2 cores)  \nRust: rustc 1.95.0  \nCommit: abc1234")
        );
        assert!(md.contains("```sh\ncargo run --release -p livecount-sim"));
        assert!(md.contains("| policy | assigned | rejected + dropped |"));
        assert!(md.contains("![spread](spread.svg)") && md.contains("![latency](latency.svg)"));
    }

    #[test]
    fn rows_are_formatted() {
        let md = render(&fake_result(), &meta());
        // round-robin: 985 assigned, 5 refused, 1.0% / 2.0% overloaded, cv 0.150, startup p50 30 ms.
        let row = md
            .lines()
            .find(|l| l.starts_with("| round-robin |"))
            .unwrap();
        assert!(
            row.starts_with(
                "| round-robin | 985 | 5 | 1.0 | 2.0 | 0.150 | 5.5 | 1.20 | 30.0 | 90.0 |"
            ),
            "{row}"
        );
        // first stream p95 = 190 × 3 = 570 ms: no decimals above 100 ms.
        assert!(row.contains("| 570 |"), "{row}");
    }

    #[test]
    fn best_lines_pick_direction_and_ties() {
        let md = render(&fake_result(), &meta());
        assert!(md.contains("- **assigned**: least-conn (990)"), "{md}");
        assert!(
            md.contains("- **startup p99 (ms)**: least-conn (110)"),
            "{md}"
        );
        assert!(
            md.contains("- **tracked err final**: all tied at 0"),
            "{md}"
        );
    }

    #[test]
    fn across_seeds_the_table_shows_intervals_and_claims_only_clear_wins() {
        let runs: Vec<ScenarioResult> = (0..3)
            .map(|k| {
                let mut r = fake_result();
                r.seed = 42 + k;
                // least-conn's startup p99 moves with the seed; the others' do not.
                r.policies[0].summary.startup_ms.p99 += 10.0 * k as f64;
                r
            })
            .collect();
        let md = render(&crate::report::combine(runs), &meta());
        assert!(md.contains("## Results over 3 seeds"), "{md}");
        assert!(md.contains("over seeds 42–44."), "{md}");
        // 110, 120, 130: mean 120, half-width 4.303 × 10 ÷ √3 = 24.8.
        let row = md
            .lines()
            .find(|l| l.starts_with("| least-conn |"))
            .unwrap();
        assert!(row.contains("| 120 ± 24.8 |"), "{row}");
        assert!(md.contains("- **tracked err final**: all tied"), "{md}");
        assert!(md.contains("Of the first seed's run (42)."), "{md}");
        assert!(!md.contains("## Results\n"), "no single-seed table: {md}");
    }

    #[test]
    fn restart_columns_appear_only_with_a_rolling_restart() {
        let plain = render(&fake_result(), &meta());
        assert!(!plain.contains("restart: sessions cut"), "{plain}");
        let mut r = fake_result();
        for (i, p) in r.policies.iter_mut().enumerate() {
            p.summary.restart = Some(crate::RestartSummary {
                cut: 40 + i as u64,
                reconnects: 38,
                refused: 2,
                window_assigned: 200,
                window_overloaded: 10,
                window_overloaded_rate: 0.05,
                window_s: 300.0,
            });
        }
        let md = render(&r, &meta());
        assert!(
            md.contains("| restart: sessions cut | restart: reconnects | restart: refused | restart window: overloaded assignments (%) |"),
            "{md}"
        );
        let row = md
            .lines()
            .find(|l| l.starts_with("| round-robin |"))
            .unwrap();
        assert!(row.ends_with("| 41 | 38 | 2 | 5.0 |"), "{row}");
        assert!(
            md.contains("- **restart: sessions cut**: least-conn (40)"),
            "{md}"
        );
        let merged = crate::report::combine(vec![r.clone(), r]);
        let stats = &merged.across_seeds.as_ref().unwrap().policies[0].metrics;
        assert_eq!(stats.last().unwrap().metric, "rr-ovl-asg%");
        assert_eq!(
            crate::report::verdict(&merged, "rr-cut"),
            Some(crate::report::Verdict::Wins("least-conn".into()))
        );
    }

    #[test]
    fn results_written_before_the_restart_fields_still_parse() {
        let mut json = serde_json::to_value(fake_result()).unwrap();
        for p in json["policies"].as_array_mut().unwrap() {
            let summary = p["summary"].as_object_mut().unwrap();
            assert!(summary.remove("restart").is_none(), "absent when None");
        }
        let back: ScenarioResult = serde_json::from_value(json).unwrap();
        assert_eq!(back.policies[0].summary.restart, None);
        // A restart summary from before reconnects were modelled reads as none.
        let old = r#"{"cut": 5, "refused": 1, "window_s": 10.0, "window_assigned": 20,
            "window_overloaded": 2, "window_overloaded_rate": 0.1}"#;
        let r: crate::RestartSummary = serde_json::from_str(old).unwrap();
        assert_eq!((r.cut, r.reconnects), (5, 0));
    }

    #[test]
    fn pipes_in_names_are_escaped() {
        let mut r = fake_result();
        r.policies[0].policy = "a|b".to_string();
        assert!(render(&r, &meta()).contains("| a\\|b |"));
    }
}
