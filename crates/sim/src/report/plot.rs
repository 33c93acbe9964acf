//! SVG plots (plotters): the fleet's spread over time (`spread.svg`) and the latency CDFs
//! (`latency.svg`), one line per policy in a fixed palette so a policy keeps its colour across
//! panels.
//!
//! Every range is padded, so empty series, single points and all-zero values draw an empty
//! but valid chart rather than panicking.

use std::error::Error as StdError;
use std::ops::Range;
use std::path::Path;

use plotters::coord::Shift;
use plotters::coord::types::RangedCoordf64;
use plotters::prelude::*;

use crate::sim_result::{CdfPoint, PolicyResult, ScenarioResult};

/// File name of the spread plot.
pub(super) const SPREAD_SVG: &str = "spread.svg";
/// File name of the latency plot.
pub(super) const LATENCY_SVG: &str = "latency.svg";

type Error = Box<dyn StdError>;
type Area<'a> = DrawingArea<SVGBackend<'a>, Shift>;
/// A chart on an SVG area whose y axis is a plain `f64` range (x: linear or log).
type Chart<'a, 'b, X> = ChartContext<'a, SVGBackend<'b>, Cartesian2d<X, RangedCoordf64>>;

/// One colour per policy, in run order (the tab10 palette, as in the benches' plots).
const COLORS: [RGBColor; 10] = [
    RGBColor(31, 119, 180),
    RGBColor(255, 127, 14),
    RGBColor(44, 160, 44),
    RGBColor(214, 39, 40),
    RGBColor(148, 103, 189),
    RGBColor(140, 86, 75),
    RGBColor(227, 119, 194),
    RGBColor(127, 127, 127),
    RGBColor(188, 189, 34),
    RGBColor(23, 190, 207),
];

/// One policy's line: its name, colour and points.
struct Line {
    name: String,
    color: RGBColor,
    points: Vec<(f64, f64)>,
}

/// Lines for every policy, picking each point with `pick`.
fn lines<T>(
    r: &ScenarioResult,
    series: impl Fn(&PolicyResult) -> &[T],
    pick: impl Fn(&T) -> (f64, f64),
) -> Vec<Line> {
    r.policies
        .iter()
        .enumerate()
        .map(|(i, p)| Line {
            name: p.policy.clone(),
            color: COLORS[i % COLORS.len()],
            points: series(p)
                .iter()
                .map(&pick)
                .filter(|(x, y)| x.is_finite() && y.is_finite())
                .collect(),
        })
        .collect()
}

/// Writes `spread.svg`: CV of active sessions over time (top) and the highest utilisation
/// over time against the target (middle), sharing the time axis; with an autoscaler, the
/// alive backends over time too (bottom).
pub(super) fn spread(r: &ScenarioResult, path: &Path) -> Result<(), Error> {
    let scaled = r.policies.iter().any(|p| p.summary.autoscale.is_some());
    let (rows, height) = if scaled { (3, 1100) } else { (2, 760) };
    let root = SVGBackend::new(path, (1000, height)).into_drawing_area();
    root.fill(&WHITE)?;
    let panels = root.split_evenly((rows, 1));
    let cv = lines(r, |p| &p.spread, |s| (s.t, s.cv));
    let util = lines(r, |p| &p.spread, |s| (s.t, s.max_utilisation));
    let time = padded(extent(cv.iter().flat_map(|l| l.points.iter().map(|p| p.0))));
    let title = format!(
        "{} — coefficient of variation of active sessions",
        r.scenario
    );
    time_panel(
        &panels[0],
        &title,
        time.clone(),
        "CV (active ÷ size)",
        &cv,
        None,
    )?;
    let title = "highest backend utilisation (dashed: target)";
    time_panel(
        &panels[1],
        title,
        time.clone(),
        "max utilisation",
        &util,
        Some(r.target_utilisation),
    )?;
    if scaled {
        let fleet = lines(r, |p| &p.spread, |s| (s.t, f64::from(s.backends)));
        let title = "alive backends (serving or draining)";
        time_panel(&panels[2], title, time, "backends", &fleet, None)?;
    }
    root.present()?;
    Ok(())
}

/// One time-series panel; `target`, if any, is drawn as a dashed horizontal line.
fn time_panel(
    area: &Area<'_>,
    title: &str,
    time: Range<f64>,
    y_desc: &str,
    lines: &[Line],
    target: Option<f64>,
) -> Result<(), Error> {
    let y_max = lines
        .iter()
        .flat_map(|l| l.points.iter().map(|p| p.1))
        .chain(target)
        .fold(0.0, f64::max);
    let mut chart = ChartBuilder::on(area)
        .caption(title, ("sans-serif", 18))
        .margin(10)
        .x_label_area_size(36)
        .y_label_area_size(60)
        .build_cartesian_2d(time.clone(), 0.0..upper(y_max))?;
    chart
        .configure_mesh()
        .x_desc("simulated time (s)")
        .y_desc(y_desc)
        .draw()?;
    if let Some(t) = target.filter(|t| t.is_finite()) {
        let dashed = DashedLineSeries::new(
            [(time.start, t), (time.end, t)],
            8,
            5,
            BLACK.stroke_width(1),
        );
        chart
            .draw_series(dashed)?
            .label(format!("target {t:.2}"))
            .legend(|(x, y)| PathElement::new(vec![(x, y), (x + 16, y)], BLACK.stroke_width(1)));
    }
    draw_lines(&mut chart, lines)?;
    legend(&mut chart, SeriesLabelPosition::UpperRight)
}

/// Writes `latency.svg`: startup latency CDF (left) and time-to-first-stream CDF (right),
/// log-scale milliseconds against quantile.
pub(super) fn latency(r: &ScenarioResult, path: &Path) -> Result<(), Error> {
    let root = SVGBackend::new(path, (1200, 520)).into_drawing_area();
    root.fill(&WHITE)?;
    let panels = root.split_evenly((1, 2));
    let startup = lines(r, |p| &p.startup_cdf, cdf_point);
    let first = lines(r, |p| &p.first_stream_cdf, cdf_point);
    cdf_panel(
        &panels[0],
        &format!("{} — startup latency CDF", r.scenario),
        &startup,
    )?;
    cdf_panel(&panels[1], "time to first stream CDF", &first)?;
    root.present()?;
    Ok(())
}

fn cdf_point(c: &CdfPoint) -> (f64, f64) {
    (c.ms, c.q)
}

/// One CDF panel with a log-scale x axis spanning whole decades; zero (or negative)
/// latencies are drawn at the axis' left edge.
fn cdf_panel(area: &Area<'_>, title: &str, lines: &[Line]) -> Result<(), Error> {
    let ms = decades(lines.iter().flat_map(|l| l.points.iter().map(|p| p.0)));
    let clamped: Vec<Line> = lines
        .iter()
        .map(|l| Line {
            name: l.name.clone(),
            color: l.color,
            points: l
                .points
                .iter()
                .map(|&(x, q)| (x.max(ms.start), q))
                .collect(),
        })
        .collect();
    let mut chart = ChartBuilder::on(area)
        .caption(title, ("sans-serif", 18))
        .margin(10)
        .x_label_area_size(36)
        .y_label_area_size(50)
        .build_cartesian_2d(ms.log_scale(), 0.0..1.02)?;
    chart
        .configure_mesh()
        .x_desc("milliseconds (log)")
        .y_desc("quantile")
        .x_label_formatter(&|v| format_ms(*v))
        .draw()?;
    draw_lines(&mut chart, &clamped)?;
    legend(&mut chart, SeriesLabelPosition::LowerRight)
}

/// Draws each line with its legend entry; a lone point becomes a dot so it stays visible.
fn draw_lines<X>(chart: &mut Chart<'_, '_, X>, lines: &[Line]) -> Result<(), Error>
where
    X: Ranged<ValueType = f64>,
{
    for line in lines {
        let color = line.color;
        let style = color.stroke_width(2);
        chart
            .draw_series(LineSeries::new(line.points.iter().copied(), style))?
            .label(line.name.clone())
            .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 16, y)], style));
        if let [only] = line.points.as_slice() {
            chart.draw_series(std::iter::once(Circle::new(*only, 3, color.filled())))?;
        }
    }
    Ok(())
}

/// Draws the legend box at `at`.
fn legend<'a, 'b: 'a, X>(chart: &mut Chart<'a, 'b, X>, at: SeriesLabelPosition) -> Result<(), Error>
where
    X: Ranged<ValueType = f64>,
{
    chart
        .configure_series_labels()
        .background_style(WHITE.mix(0.85))
        .border_style(BLACK)
        .position(at)
        .draw()?;
    Ok(())
}

/// Smallest and largest finite value, if any.
fn extent(values: impl Iterator<Item = f64>) -> Option<(f64, f64)> {
    values
        .filter(|v| v.is_finite())
        .fold(None, |acc, v| match acc {
            None => Some((v, v)),
            Some((lo, hi)) => Some((lo.min(v), hi.max(v))),
        })
}

/// A range covering `extent` that is never empty: `0..1` with no data, ±1 around one value.
fn padded(extent: Option<(f64, f64)>) -> Range<f64> {
    match extent {
        None => 0.0..1.0,
        Some((lo, hi)) if hi - lo <= f64::EPSILON * hi.abs().max(1.0) => (lo - 1.0)..(hi + 1.0),
        Some((lo, hi)) => lo..hi,
    }
}

/// Top of a `0..` value axis: a third above `max` (headroom for the legend in the upper
/// right), or 1 when nothing is above zero.
fn upper(max: f64) -> f64 {
    if max.is_finite() && max > 0.0 {
        max * 1.35
    } else {
        1.0
    }
}

/// Whole powers of ten covering the positive values (at least one decade; 1..1000 ms with
/// none), so a log axis always has labelled ticks.
fn decades(values: impl Iterator<Item = f64>) -> Range<f64> {
    let Some((lo, hi)) = extent(values.filter(|v| *v > 0.0)) else {
        return 1.0..1000.0;
    };
    let lo = 10f64.powf(lo.log10().floor());
    let hi = 10f64.powf(hi.log10().ceil()).max(lo * 10.0);
    lo..hi
}

/// An axis label: integers as such, sub-millisecond values with the digits they need.
fn format_ms(v: f64) -> String {
    if v >= 1.0 {
        format!("{v:.0}")
    } else {
        format!("{v}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::report::tests::{empty_result, fake_result, scratch_dir};
    use crate::sim_result::SpreadSample;

    fn render(r: &ScenarioResult, name: &str) -> (String, String) {
        let dir = scratch_dir(name);
        spread(r, &dir.join(SPREAD_SVG)).unwrap();
        latency(r, &dir.join(LATENCY_SVG)).unwrap();
        let read = |f: &str| std::fs::read_to_string(dir.join(f)).unwrap();
        let svgs = (read(SPREAD_SVG), read(LATENCY_SVG));
        std::fs::remove_dir_all(&dir).unwrap();
        svgs
    }

    #[test]
    fn svgs_name_every_policy() {
        let (spread, latency) = render(&fake_result(), "names");
        assert!(spread.starts_with("<svg") && latency.starts_with("<svg"));
        for p in &fake_result().policies {
            assert!(
                spread.contains(&p.policy) && latency.contains(&p.policy),
                "{}",
                p.policy
            );
        }
        assert!(spread.contains("target 0.80"));
    }

    #[test]
    fn the_fleet_panel_only_with_an_autoscaler() {
        let mut r = fake_result();
        let (plain, _) = render(&r, "fleet-plain");
        assert!(!plain.contains("alive backends"));
        r.policies[0].summary.autoscale = Some(crate::AutoscaleSummary::default());
        let (scaled, _) = render(&r, "fleet-scaled");
        assert!(scaled.contains("alive backends"), "no fleet panel");
    }

    #[test]
    fn empty_series_render() {
        let (spread, latency) = render(&empty_result(), "empty-series");
        assert!(spread.starts_with("<svg") && latency.starts_with("<svg"));
    }

    #[test]
    fn single_points_and_zeros_render() {
        let mut r = fake_result();
        let zero = SpreadSample {
            t: 0.0,
            max: 0,
            min: 0,
            mean: 0.0,
            cv: 0.0,
            max_utilisation: 0.0,
            mean_utilisation: 0.0,
            backends: 0,
        };
        for p in &mut r.policies {
            p.spread = vec![zero.clone()];
            p.startup_cdf = vec![CdfPoint { ms: 0.0, q: 1.0 }];
            p.first_stream_cdf = vec![CdfPoint { ms: 0.0, q: 0.0 }, CdfPoint { ms: 0.0, q: 1.0 }];
        }
        r.target_utilisation = 0.0;
        let (spread, latency) = render(&r, "zeros");
        assert!(spread.starts_with("<svg") && latency.starts_with("<svg"));
    }

    #[test]
    fn ranges_are_never_empty() {
        assert_eq!(padded(None), 0.0..1.0);
        assert_eq!(padded(Some((5.0, 5.0))), 4.0..6.0);
        assert_eq!(decades([0.0].into_iter()), 1.0..1000.0);
        assert_eq!(decades([20.0, 180.0].into_iter()), 10.0..1000.0);
        assert_eq!(decades([100.0].into_iter()), 100.0..1000.0);
        assert_eq!(decades([0.3, 7.0].into_iter()), 0.1..10.0);
        assert_eq!(upper(0.0), 1.0);
    }
}
