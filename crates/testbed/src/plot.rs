//! The timelines: active sessions per backend over time on the testbed (solid, one line
//! per backend), beside the simulator's fleet (dashed: the most and fewest on any
//! backend), one panel per balancer.

use std::path::Path;

use livecount_sim::SpreadSample;
use plotters::prelude::*;

use crate::timeline::Sample;

/// What one panel shows.
#[derive(Debug)]
pub struct Panel<'a> {
    /// The balancer.
    pub title: String,
    /// The testbed's polls (the first repeat).
    pub real: &'a [Sample],
    /// The simulator's samples (the same seed).
    pub simulated: &'a [SpreadSample],
}

const COLORS: [RGBColor; 6] = [
    RGBColor(31, 119, 180),
    RGBColor(255, 127, 14),
    RGBColor(44, 160, 44),
    RGBColor(214, 39, 40),
    RGBColor(148, 103, 189),
    RGBColor(140, 86, 75),
];

/// Writes the panels to `path` as SVG.
pub fn timelines(path: &Path, panels: &[Panel<'_>]) -> Result<(), Box<dyn std::error::Error>> {
    let root = SVGBackend::new(path, (1000, 260 * panels.len().max(1) as u32)).into_drawing_area();
    root.fill(&WHITE)?;
    for (panel, area) in panels
        .iter()
        .zip(root.split_evenly((panels.len().max(1), 1)))
    {
        draw(panel, &area)?;
    }
    root.present()?;
    Ok(())
}

fn draw(
    panel: &Panel<'_>,
    area: &DrawingArea<SVGBackend<'_>, plotters::coord::Shift>,
) -> Result<(), Box<dyn std::error::Error>> {
    let real: Vec<&Sample> = panel.real.iter().filter(|s| s.t >= 0.0).collect();
    let t_max = real
        .last()
        .map_or(1.0, |s| s.t)
        .max(panel.simulated.last().map_or(1.0, |s| s.t));
    let y_real = real
        .iter()
        .flat_map(|s| s.backends.iter().flatten().map(|p| p.active))
        .max()
        .unwrap_or(0);
    let y_sim = panel.simulated.iter().map(|s| s.max).max().unwrap_or(0);
    let y_max = (y_real.max(y_sim) as f64 * 1.1).max(1.0);
    let mut chart = ChartBuilder::on(area)
        .caption(&panel.title, ("sans-serif", 16))
        .margin(8)
        .x_label_area_size(28)
        .y_label_area_size(40)
        .build_cartesian_2d(0.0..t_max, 0.0..y_max)?;
    chart
        .configure_mesh()
        .x_desc("seconds")
        .y_desc("active sessions")
        .draw()?;
    let backends = real.first().map_or(0, |s| s.backends.len());
    for b in 0..backends {
        let color = COLORS[b % COLORS.len()];
        let points = real
            .iter()
            .filter_map(|s| s.backends[b].map(|p| (s.t, p.active as f64)));
        chart
            .draw_series(LineSeries::new(points, color.stroke_width(1)))?
            .label(format!("testbed b{}", b + 1))
            .legend(move |(x, y)| PathElement::new([(x, y), (x + 16, y)], color));
    }
    let black = RGBColor(60, 60, 60);
    for (name, pick) in [
        (
            "simulator: most on a backend",
            (|s: &SpreadSample| s.max as f64) as fn(&SpreadSample) -> f64,
        ),
        ("simulator: fewest", |s: &SpreadSample| s.min as f64),
    ] {
        let points: Vec<(f64, f64)> = panel.simulated.iter().map(|s| (s.t, pick(s))).collect();
        chart
            .draw_series(DashedLineSeries::new(points, 4, 4, black.stroke_width(1)))?
            .label(name)
            .legend(move |(x, y)| PathElement::new([(x, y), (x + 16, y)], black));
    }
    chart
        .configure_series_labels()
        .background_style(WHITE.mix(0.8))
        .border_style(BLACK)
        .position(SeriesLabelPosition::UpperRight)
        .draw()?;
    Ok(())
}
