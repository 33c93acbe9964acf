//! SVG plots (plotters): throughput vs threads per contender with the ceiling line, and the
//! range of values the reader saw against the true range.

use std::path::Path;

use plotters::prelude::*;

use crate::contender::CEILING;
use crate::figure::{Metric, Workload};
use crate::report::si;
use crate::results::Results;

type Error = Box<dyn std::error::Error>;

const COLORS: [RGBColor; 13] = [
    RGBColor(0, 0, 0),
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
    RGBColor(100, 100, 255),
    RGBColor(0, 128, 128),
];

/// Writes `throughput.svg` and `reader.svg` into `dir`.
pub(crate) fn write(results: &Results, dir: &Path) -> Result<(), Error> {
    throughput(results, &dir.join("throughput.svg"))?;
    reader(results, &dir.join("reader.svg"))
}

fn throughput(r: &Results, path: &Path) -> Result<(), Error> {
    let figs: Vec<_> = r
        .figures
        .iter()
        .filter(|f| f.workload == Workload::Threads && f.metric == Metric::PairsPerS)
        .collect();
    let xs = figs.iter().filter_map(|f| f.param.parse::<u32>().ok());
    let max_t = xs.max().unwrap_or(1).max(2);
    let (lo, hi) = figs.iter().fold((f64::MAX, 1.0f64), |(lo, hi), f| {
        (lo.min(f.median), hi.max(f.median))
    });
    let root = SVGBackend::new(path, (1000, 640)).into_drawing_area();
    root.fill(&WHITE)?;
    let mut chart = ChartBuilder::on(&root)
        .caption(
            format!("start+end pairs/s vs threads — {}", r.machine.label),
            ("sans-serif", 20),
        )
        .margin(12)
        .x_label_area_size(40)
        .y_label_area_size(80)
        .build_cartesian_2d(1u32..max_t, ((lo / 2.0).max(1.0)..hi * 2.0).log_scale())?;
    chart
        .configure_mesh()
        .x_desc("threads")
        .y_desc("pairs/s (log)")
        .y_label_formatter(&|v| si(*v))
        .draw()?;
    for (i, c) in r.contenders.iter().enumerate() {
        let mut pts: Vec<(u32, f64)> = figs
            .iter()
            .filter(|f| f.contender == c.name)
            .filter_map(|f| Some((f.param.parse().ok()?, f.median)))
            .collect();
        pts.sort_by_key(|p| p.0);
        let color = COLORS[i % COLORS.len()];
        let width = if c.name == CEILING { 3 } else { 1 };
        chart
            .draw_series(LineSeries::new(pts, color.stroke_width(width)))?
            .label(c.name.clone())
            .legend(move |(x, y)| {
                PathElement::new(vec![(x, y), (x + 16, y)], color.stroke_width(width))
            });
    }
    chart
        .configure_series_labels()
        .background_style(WHITE.mix(0.8))
        .border_style(BLACK)
        .position(SeriesLabelPosition::LowerLeft)
        .draw()?;
    root.present()?;
    Ok(())
}

fn reader(r: &Results, path: &Path) -> Result<(), Error> {
    let rw = |name: &str, metric: Metric| {
        r.figures
            .iter()
            .filter(|f| f.is(Workload::ReadUnderWrite, name, metric))
            .collect::<Vec<_>>()
    };
    let ranges: Vec<(String, f64, f64)> = r
        .contenders
        .iter()
        // The ceiling's sum is not a gauge read (its cells are summed without any order).
        .filter(|c| c.name != CEILING)
        .filter_map(|c| {
            let min = rw(&c.name, Metric::MinRead)
                .iter()
                .map(|f| f.low)
                .reduce(f64::min)?;
            let max = rw(&c.name, Metric::MaxRead)
                .iter()
                .map(|f| f.high)
                .reduce(f64::max)?;
            Some((c.name.clone(), min, max))
        })
        .collect();
    let true_max = r
        .figures
        .iter()
        .filter(|f| f.metric == Metric::TrueMax)
        .map(|f| f.high)
        .fold(0.0, f64::max);
    let lo = ranges.iter().map(|r| r.1).fold(0.0, f64::min);
    let hi = ranges.iter().map(|r| r.2).fold(true_max, f64::max);
    let pad = (hi - lo).max(1.0) * 0.08;
    let root = SVGBackend::new(path, (1000, 640)).into_drawing_area();
    root.fill(&WHITE)?;
    let n = ranges.len().max(1) as i32;
    let mut chart = ChartBuilder::on(&root)
        .caption(
            "values the reader saw under writes (bars; red = outside the truth) vs the true range 0..=true_max (dashed)",
            ("sans-serif", 18),
        )
        .margin(12)
        .x_label_area_size(150)
        .y_label_area_size(70)
        .build_cartesian_2d(-1..n, (lo - pad)..(hi + pad))?;
    let names: Vec<String> = ranges.iter().map(|r| r.0.clone()).collect();
    chart
        .configure_mesh()
        .x_labels(ranges.len() + 2)
        .x_label_formatter(&|i| names.get(*i as usize).cloned().unwrap_or_default())
        .x_label_style(
            ("sans-serif", 12)
                .into_font()
                .transform(FontTransform::Rotate90),
        )
        .y_desc("value read")
        .draw()?;
    for bound in [0.0, true_max] {
        chart.draw_series(DashedLineSeries::new(
            [(-1, bound), (n, bound)],
            6,
            4,
            RED.stroke_width(1),
        ))?;
    }
    for (i, (_, min, max)) in ranges.iter().enumerate() {
        let color = if *min < 0.0 || *max > true_max {
            RED
        } else {
            BLUE
        };
        let x = i as i32;
        chart.draw_series(LineSeries::new(
            [(x, *min), (x, *max)],
            color.stroke_width(8),
        ))?;
    }
    root.present()?;
    Ok(())
}
