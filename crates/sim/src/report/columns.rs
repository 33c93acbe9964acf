//! The metric columns every table and statistic shares: [`COLUMNS`] (and
//! [`RESTART_COLUMNS`] for a rolling restart), each with its headers, how to read it from a
//! [`Summary`], how to print it and which way is better. A leaf of `report`: the markdown,
//! the terminal table, the across-seeds statistics and the verdicts all read from here.

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
    pub(super) header: &'static str,
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

/// Shown after [`COLUMNS`] when the scenario has an autoscaler.
pub(super) const AUTOSCALE_COLUMNS: &[Column] = &[
    col(
        "scale-in: sessions cut",
        "si-cut",
        |s| s.autoscale.map_or(0.0, |a| a.cut as f64),
        Format::Count,
        false,
    ),
    col(
        "backend-seconds",
        "backend-s",
        |s| s.autoscale.map_or(0.0, |a| a.backend_seconds),
        Format::Count,
        false,
    ),
    col(
        "peak backends",
        "peak-bk",
        |s| s.autoscale.map_or(0.0, |a| f64::from(a.peak_backends)),
        Format::Count,
        false,
    ),
];

/// The columns of `result`'s tables: [`COLUMNS`], then [`RESTART_COLUMNS`] when any
/// policy's run had a rolling restart, then [`AUTOSCALE_COLUMNS`] when any had an
/// autoscaler.
pub(super) fn columns(result: &ScenarioResult) -> Vec<&'static Column> {
    let any = |f: fn(&crate::Summary) -> bool| result.policies.iter().any(|p| f(&p.summary));
    let restart = if any(|s| s.restart.is_some()) {
        RESTART_COLUMNS
    } else {
        &[]
    };
    let scaled = if any(|s| s.autoscale.is_some()) {
        AUTOSCALE_COLUMNS
    } else {
        &[]
    };
    COLUMNS.iter().chain(restart).chain(scaled).collect()
}

/// Whether `columns` holds any of `group`'s.
pub(super) fn holds(columns: &[&Column], group: &[Column]) -> bool {
    columns
        .iter()
        .any(|c| group.iter().any(|g| g.short == c.short))
}

/// The column called `short`, among all there are.
pub(super) fn column(short: &str) -> Option<&'static Column> {
    COLUMNS
        .iter()
        .chain(RESTART_COLUMNS)
        .chain(AUTOSCALE_COLUMNS)
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
    pub(super) fn cell_stats(&self, m: &MetricStats) -> String {
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
    pub(super) fn best<'a>(&self, result: &'a ScenarioResult) -> Option<(String, Vec<&'a str>)> {
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
