//! Rendering a [`ScenarioResult`]: `results.json`, `REPORT.md`, `spread.svg` and
//! `latency.svg` into one directory, plus a plain-text comparison table for the terminal.
//!
//! The metric columns (what is shown, how it is formatted, which way is better) are defined
//! once, in `columns`, and shared by the markdown, the terminal table, the across-seeds
//! statistics (`seeds`) and the verdicts (`verdict`), so they never disagree. Each of those
//! imports `columns`; none imports another's (the verdict's test uses `seeds::combine`).

mod columns;
mod markdown;
mod plot;
mod seeds;
mod verdict;

use std::fs;
use std::io;
use std::path::{Path, PathBuf};

use crate::sim_result::ScenarioResult;

pub use markdown::render as render_markdown;
pub use seeds::combine;
pub use verdict::{Verdict, verdict};

/// Where a run came from, printed in `REPORT.md` so a reader can reproduce it.
#[derive(Debug, Clone, Default)]
pub struct RunMeta {
    /// The command line that reproduces the run.
    pub command: String,
    /// The commit the simulator was built from.
    pub commit: String,
    /// A description of the machine (CPU model, cores).
    pub machine: String,
    /// The compiler version (`rustc -V`).
    pub rust: String,
    /// The scenario file the run read.
    pub scenario_file: String,
}

/// Writes `results.json`, `REPORT.md`, `spread.svg` and `latency.svg` into `dir`
/// (created if missing) and returns their paths in that order.
///
/// # Errors
///
/// Any I/O error creating the directory or writing a file; a plotting failure is reported as
/// an [`io::Error`] of kind [`io::ErrorKind::Other`].
pub fn write_all(result: &ScenarioResult, dir: &Path, meta: &RunMeta) -> io::Result<Vec<PathBuf>> {
    fs::create_dir_all(dir)?;
    let json_path = dir.join("results.json");
    let json = serde_json::to_string_pretty(result).map_err(io::Error::other)?;
    fs::write(&json_path, json + "\n")?;
    let md_path = dir.join("REPORT.md");
    fs::write(&md_path, markdown::render(result, meta))?;
    let spread_path = dir.join(plot::SPREAD_SVG);
    plot::spread(result, &spread_path).map_err(|e| io::Error::other(e.to_string()))?;
    let latency_path = dir.join(plot::LATENCY_SVG);
    plot::latency(result, &latency_path).map_err(|e| io::Error::other(e.to_string()))?;
    Ok(vec![json_path, md_path, spread_path, latency_path])
}

/// A plain-text table, one row per policy and one column per metric, aligned for a terminal
/// (policy names left-aligned, numbers right-aligned).
#[must_use]
pub fn comparison_table(result: &ScenarioResult) -> String {
    let columns = columns::columns(result);
    let mut header = vec!["policy".to_string()];
    header.extend(columns.iter().map(|c| c.short.to_string()));
    let mut rows = vec![header];
    rows.extend(result.policies.iter().map(|p| {
        let mut row = vec![p.policy.clone()];
        row.extend(columns.iter().map(|c| c.cell(&p.summary)));
        row
    }));
    align(&rows)
}

/// Pads every cell to its column's width: the first column left-aligned, the rest right.
fn align(rows: &[Vec<String>]) -> String {
    let cols = rows.iter().map(Vec::len).max().unwrap_or(0);
    let widths: Vec<usize> = (0..cols)
        .map(|i| {
            rows.iter()
                .filter_map(|r| r.get(i))
                .map(|c| c.chars().count())
                .max()
                .unwrap_or(0)
        })
        .collect();
    let mut out = String::new();
    for row in rows {
        let cells: Vec<String> = row
            .iter()
            .zip(&widths)
            .enumerate()
            .map(|(i, (cell, &w))| {
                if i == 0 {
                    format!("{cell:<w$}")
                } else {
                    format!("{cell:>w$}")
                }
            })
            .collect();
        out.push_str(cells.join("  ").trim_end());
        out.push('\n');
    }
    out
}

#[cfg(test)]
pub(crate) mod tests {
    use std::collections::BTreeMap;

    use super::*;
    use crate::sim_result::{
        CdfPoint, CounterAccuracy, Percentiles, PolicyResult, SpreadSample, Summary,
    };

    /// A fresh, empty directory under the system temp dir, unique to this test and process.
    pub(crate) fn scratch_dir(name: &str) -> PathBuf {
        let dir =
            std::env::temp_dir().join(format!("livecount-report-{}-{name}", std::process::id()));
        let _ = fs::remove_dir_all(&dir);
        fs::create_dir_all(&dir).unwrap();
        dir
    }

    fn summary(i: u64) -> Summary {
        let pct = |base: f64| Percentiles {
            p50: base,
            p95: base * 3.0,
            p99: base * 5.5,
            max: base * 9.0,
        };
        Summary {
            arrivals: 1000,
            assigned: 990 - i * 5,
            rejected: i * 3,
            dropped: i * 2,
            ended: BTreeMap::from([
                ("completed".to_string(), 900),
                ("cancelled".to_string(), 90 - i * 5),
            ]),
            overloaded_assignments: 10 * i,
            overloaded_rate: 0.01 * i as f64,
            overloaded_time_share: 0.02 * i as f64,
            spread_range_mean: 4.5 + i as f64,
            spread_range_max: 9 + i,
            spread_cv_mean: 0.1 + 0.05 * i as f64,
            spread_peak_ratio_mean: 1.1 + 0.1 * i as f64,
            peak_utilisation: 0.9 + 0.05 * i as f64,
            startup_ms: pct(20.0 + 10.0 * i as f64),
            first_stream_ms: pct(150.0 + 40.0 * i as f64),
            counter: CounterAccuracy {
                tracked_final_error: 0,
                tracked_max_error: i,
                naive_final_error: 7 * i,
                naive_max_error: 11 * i,
            },
            restart: None,
            autoscale: None,
        }
    }

    fn spread(i: u64) -> Vec<SpreadSample> {
        (0..60)
            .map(|s| {
                let t = s as f64 * 10.0;
                let wave = ((t / 60.0) + i as f64).sin();
                SpreadSample {
                    t,
                    max: 20 + s % 7 + i,
                    min: 10 + s % 3,
                    mean: 15.0 + wave,
                    cv: 0.15 + 0.05 * i as f64 + 0.03 * wave,
                    max_utilisation: 0.7 + 0.1 * i as f64 + 0.08 * wave,
                    mean_utilisation: 0.6 + 0.05 * wave,
                    backends: 8,
                }
            })
            .collect()
    }

    fn cdf(scale: f64) -> Vec<CdfPoint> {
        (0..=100)
            .map(|k| {
                let q = k as f64 / 100.0;
                CdfPoint {
                    ms: scale * (1.0 + 8.0 * q.powi(4)),
                    q,
                }
            })
            .collect()
    }

    fn policy(name: &str, i: u64) -> PolicyResult {
        PolicyResult {
            policy: name.to_string(),
            summary: summary(i),
            spread: spread(i),
            startup_cdf: cdf(20.0 + 10.0 * i as f64),
            first_stream_cdf: cdf(150.0 + 40.0 * i as f64),
            events: 12345 + i,
            wall_s: 0.25,
        }
    }

    /// Three policies with plausible numbers and series.
    pub(crate) fn fake_result() -> ScenarioResult {
        ScenarioResult {
            scenario: "steady-mixed".to_string(),
            description: "Steady arrivals, mixed backend sizes, one backend dies at t=300 s."
                .to_string(),
            seed: 42,
            backends: 8,
            duration_s: 600.0,
            target_utilisation: 0.8,
            policies: vec![
                policy("least-conn", 0),
                policy("round-robin", 1),
                policy("p2c-tracked", 2),
            ],
            across_seeds: None,
        }
    }

    /// The same scenario with every series empty.
    pub(crate) fn empty_result() -> ScenarioResult {
        let mut r = fake_result();
        for p in &mut r.policies {
            p.spread.clear();
            p.startup_cdf.clear();
            p.first_stream_cdf.clear();
        }
        r
    }

    pub(crate) fn meta() -> RunMeta {
        RunMeta {
            command: "cargo run --release -p livecount-sim -- scenarios/steady.toml".to_string(),
            commit: "abc1234".to_string(),
            machine: "Test machine (2 cores)".to_string(),
            rust: "rustc 1.95.0".to_string(),
            scenario_file: "scenarios/steady.toml".to_string(),
        }
    }

    #[test]
    fn write_all_writes_four_files() {
        let dir = scratch_dir("write-all");
        let paths = write_all(&fake_result(), &dir, &meta()).unwrap();
        let names: Vec<_> = paths
            .iter()
            .map(|p| p.file_name().unwrap().to_str().unwrap())
            .collect();
        assert_eq!(
            names,
            ["results.json", "REPORT.md", "spread.svg", "latency.svg"]
        );
        for p in &paths {
            assert!(p.is_file(), "{} missing", p.display());
        }
        let md = fs::read_to_string(dir.join("REPORT.md")).unwrap();
        for p in &fake_result().policies {
            assert!(md.contains(&p.policy), "REPORT.md lacks {}", p.policy);
        }
        assert!(md.contains("| policy | assigned |"), "{md}");
        for svg in ["spread.svg", "latency.svg"] {
            assert!(
                fs::read_to_string(dir.join(svg))
                    .unwrap()
                    .starts_with("<svg")
            );
        }
        fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn json_round_trips() {
        let dir = scratch_dir("json");
        let result = fake_result();
        write_all(&result, &dir, &meta()).unwrap();
        let text = fs::read_to_string(dir.join("results.json")).unwrap();
        let back: ScenarioResult = serde_json::from_str(&text).unwrap();
        // Exact f64 equality needs serde_json's `float_roundtrip` feature: without it parsing
        // may land one ulp off (e.g. 15.971937901363313 reads back as ...312).
        assert!(
            back == result,
            "results.json did not round-trip; is serde_json's float_roundtrip feature on?"
        );
        fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn empty_series_and_no_policies_do_not_panic() {
        let dir = scratch_dir("empty");
        write_all(&empty_result(), &dir, &meta()).unwrap();
        let mut none = fake_result();
        none.policies.clear();
        write_all(&none, &dir, &RunMeta::default()).unwrap();
        assert_eq!(comparison_table(&none).lines().count(), 1);
        fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn comparison_table_is_aligned() {
        let table = comparison_table(&fake_result());
        let lines: Vec<&str> = table.lines().collect();
        assert_eq!(lines.len(), 4);
        assert!(lines[0].starts_with("policy"));
        assert!(lines[2].starts_with("round-robin"));
        let width = lines[0].chars().count();
        assert!(lines.iter().all(|l| l.chars().count() == width), "{table}");
    }
}
