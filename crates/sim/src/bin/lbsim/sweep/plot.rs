//! `sweep.svg` (plotters, as the scenario reports' plots): one panel per family and metric,
//! the paired difference baseline − session-aware with its 95 % interval against
//! concurrency on a log axis, against the best plain policy and against Envoy's least
//! request, and a dashed zero line.

use std::error::Error as StdError;
use std::path::Path;

use plotters::coord::Shift;
use plotters::prelude::*;

use super::contrast::Metric;
use super::markdown::extent;
use super::sweep_result::{BASELINES, FamilyResult, SweepResult};

type Error = Box<dyn StdError>;
type Area<'a> = DrawingArea<SVGBackend<'a>, Shift>;

/// One colour per baseline (tab10's first two, as the scenario plots).
const COLORS: [RGBColor; 2] = [RGBColor(31, 119, 180), RGBColor(255, 127, 14)];

/// Legend labels, in `BASELINES` order.
const LABELS: [&str; 2] = [
    "best plain − best session-aware",
    "Envoy least request − best session-aware",
];

/// Writes the plot to `path`.
pub(crate) fn write(s: &SweepResult, path: &Path) -> Result<(), Error> {
    let rows = s.families.len().max(1);
    let root = SVGBackend::new(path, (1200, 320 * rows as u32)).into_drawing_area();
    root.fill(&WHITE)?;
    let panels = root.split_evenly((rows, Metric::ALL.len()));
    for (i, f) in s.families.iter().enumerate() {
        for (j, metric) in Metric::ALL.into_iter().enumerate() {
            panel(&panels[i * Metric::ALL.len() + j], f, metric)?;
        }
    }
    root.present()?;
    Ok(())
}

/// (concurrency, mean, half-width) of each point against baseline `b`, in display units.
fn series(f: &FamilyResult, metric: Metric, b: usize) -> Vec<(f64, f64, f64)> {
    let scale = match metric {
        Metric::Overloaded => 100.0,
        Metric::FirstStreamP99 => 1.0,
    };
    f.points
        .iter()
        .filter_map(|p| {
            let d = &p.contrast(metric, BASELINES[b].0)?.difference;
            let v = (
                f64::from(p.concurrency),
                d.mean * scale,
                d.half_width * scale,
            );
            (v.1.is_finite() && v.2.is_finite()).then_some(v)
        })
        .collect()
}

fn panel(area: &Area<'_>, f: &FamilyResult, metric: Metric) -> Result<(), Error> {
    let all: Vec<Vec<(f64, f64, f64)>> =
        (0..BASELINES.len()).map(|b| series(f, metric, b)).collect();
    let (lo, hi) = all
        .iter()
        .flatten()
        .fold((0.0f64, 0.0f64), |(lo, hi), &(_, m, h)| {
            (lo.min(m - h), hi.max(m + h))
        });
    let pad = ((hi - lo) * 0.08).max(1e-6);
    let (first, last) = extent(f);
    let x = (f64::from(first.max(1)) / 1.5)..(f64::from(last.max(1)) * 1.5);
    let unit = match metric {
        Metric::Overloaded => "percentage points",
        Metric::FirstStreamP99 => "ms",
    };
    let mut chart = ChartBuilder::on(area)
        .caption(
            format!("{} — {}", f.scenario, metric.header()),
            ("sans-serif", 16),
        )
        .margin(10)
        .x_label_area_size(36)
        .y_label_area_size(64)
        .build_cartesian_2d(x.clone().log_scale(), (lo - pad)..(hi + pad))?;
    chart
        .configure_mesh()
        .x_desc("concurrent sessions (log)")
        .y_desc(format!("difference ({unit})"))
        .x_label_formatter(&|v| format!("{v:.0}"))
        .draw()?;
    chart.draw_series(DashedLineSeries::new(
        [(x.start, 0.0), (x.end, 0.0)],
        8,
        5,
        BLACK.stroke_width(1),
    ))?;
    for (b, points) in all.iter().enumerate() {
        let color = COLORS[b];
        // The two baselines side by side: a small offset on the log axis.
        let shift = if b == 0 { 0.96 } else { 1.04 };
        let style = color.stroke_width(2);
        chart
            .draw_series(LineSeries::new(
                points.iter().map(|&(c, m, _)| (c * shift, m)),
                style,
            ))?
            .label(LABELS[b])
            .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 16, y)], style));
        for &(c, m, h) in points {
            let c = c * shift;
            chart.draw_series(std::iter::once(PathElement::new(
                vec![(c, m - h), (c, m + h)],
                color.stroke_width(1),
            )))?;
            chart.draw_series(std::iter::once(Circle::new((c, m), 3, color.filled())))?;
        }
    }
    chart
        .configure_series_labels()
        .background_style(WHITE.mix(0.85))
        .border_style(BLACK)
        .position(SeriesLabelPosition::UpperLeft)
        .draw()?;
    Ok(())
}
