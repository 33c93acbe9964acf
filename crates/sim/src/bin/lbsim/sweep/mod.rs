//! `lbsim sweep`: where session-awareness starts to pay. Each scenario family is scaled
//! over a range of concurrencies, its fleet growing with it (`family`); at each point the
//! same seeds run the session-aware, the plain and Envoy's least-request policies, and the
//! best of each camp are compared seed by seed (`contrast`). Writes `sweep.json`,
//! `points.csv`, `REPORT.md` and `sweep.svg`.
//!
//! The JSON is not called `results.json`: `lbsim summary` reads every
//! `results/sim/*/results.json` as one scenario's result.

mod contrast;
mod family;
mod markdown;
mod plot;
mod sweep_result;

use std::fs;
use std::path::{Path, PathBuf};
use std::time::Instant;

use livecount_sim::ScenarioResult;
use livecount_support::provenance;

use crate::cli::SweepOptions;
use contrast::Metric;
use family::Family;
use sweep_result::{BASELINES, FamilyResult, Point, SweepResult};

/// Runs the sweep `o` asks for, prints the answers and writes the results.
pub(crate) fn run(o: &SweepOptions) -> Result<(), String> {
    let families = o
        .scenarios
        .iter()
        .map(|a| Family::load(a))
        .collect::<Result<Vec<_>, _>>()?;
    // Before the runs: committed results come from a clean commit, the one stamped on them.
    let commit = if o.write {
        provenance::commit_for(&o.out).map_err(|e| e.to_string())?
    } else {
        provenance::commit()
    };
    let jobs = crate::jobs(o.jobs);
    let started = Instant::now();
    let mut results = Vec::new();
    for family in &families {
        results.push(sweep_family(family, o, jobs)?);
    }
    let cpu = provenance::cpu_model();
    let cores = provenance::cores();
    let sweep = SweepResult {
        command: command(o),
        commit,
        machine: format!("{cpu}, {cores} CPUs"),
        label: provenance::label(&cpu, cores),
        rust: provenance::rustc(),
        seeds: o.seeds,
        jobs,
        wall_s: started.elapsed().as_secs_f64(),
        families: results,
    };
    print_answers(&sweep);
    if o.write {
        for f in write_all(&sweep, &o.out)
            .map_err(|e| format!("{}: cannot write results: {e}", o.out.display()))?
        {
            println!("wrote {}", f.display());
        }
    }
    Ok(())
}

/// Every point of one family.
fn sweep_family(family: &Family, o: &SweepOptions, jobs: usize) -> Result<FamilyResult, String> {
    let mut concurrencies = o.concurrency.clone();
    concurrencies.sort_unstable();
    concurrencies.dedup();
    let policies = sweep_result::policies();
    let mut points = Vec::new();
    let mut description = String::new();
    for c in concurrencies {
        let scenario = family.at(c, duration_cap(&o.duration_caps, c))?;
        description.clone_from(&scenario.description);
        let seeds: Vec<u64> = (0..u64::from(o.seeds))
            .map(|k| scenario.seed.wrapping_add(k))
            .collect();
        let t = Instant::now();
        let mut runs = crate::run_seeds(&scenario, &policies, &seeds, jobs, o.progress);
        let wall = t.elapsed().as_secs_f64();
        runs.iter_mut().for_each(strip);
        let point = Point::new(c, &scenario, &runs, wall);
        println!(
            "{} at {c}: {} backends ({} cores), {:.0} sessions, {:.0} s, {} seeds in {wall:.1} s",
            family.name,
            point.backends,
            point.cores,
            point.target_concurrent,
            point.duration_s,
            seeds.len()
        );
        points.push(point);
    }
    Ok(FamilyResult::new(family, description, points))
}

/// The cap on the arrival window at `concurrency`: the one with the largest threshold at or
/// below it, if any.
fn duration_cap(caps: &[(u32, f64)], concurrency: u32) -> Option<f64> {
    caps.iter()
        .filter(|(from, _)| *from <= concurrency)
        .max_by_key(|(from, _)| *from)
        .map(|&(_, secs)| secs)
}

/// A run without its time series and CDFs (the sweep keeps only the summaries).
fn strip(r: &mut ScenarioResult) {
    for p in &mut r.policies {
        p.spread = Vec::new();
        p.startup_cdf = Vec::new();
        p.first_stream_cdf = Vec::new();
    }
}

fn command(o: &SweepOptions) -> String {
    let list = |v: Vec<String>| v.join(",");
    let mut c = format!(
        "cargo run --release -p livecount-sim -- sweep {} --concurrency {} --seeds {}",
        o.scenarios.join(" "),
        list(o.concurrency.iter().map(u32::to_string).collect()),
        o.seeds
    );
    for (from, secs) in &o.duration_caps {
        c += &format!(" --duration-from {from}={secs}");
    }
    c
}

fn print_answers(s: &SweepResult) {
    for f in &s.families {
        let (lo, hi) = markdown::extent(f);
        for metric in Metric::ALL {
            for (baseline, _) in BASELINES {
                if let Some(a) = f.answer(metric, baseline) {
                    println!(
                        "{}: {} — session-aware beats {baseline} {}",
                        f.scenario,
                        metric.header(),
                        a.phrase(lo, hi)
                    );
                }
            }
        }
    }
}

/// Writes `sweep.json`, `points.csv`, `REPORT.md` and `sweep.svg` into `dir`.
fn write_all(s: &SweepResult, dir: &Path) -> std::io::Result<Vec<PathBuf>> {
    fs::create_dir_all(dir)?;
    let json = dir.join("sweep.json");
    fs::write(
        &json,
        serde_json::to_string_pretty(s).map_err(std::io::Error::other)? + "\n",
    )?;
    let csv = dir.join("points.csv");
    fs::write(&csv, markdown::csv(s))?;
    let md = dir.join("REPORT.md");
    fs::write(&md, markdown::render(s))?;
    let svg = dir.join(markdown::PLOT_SVG);
    plot::write(s, &svg).map_err(|e| std::io::Error::other(e.to_string()))?;
    Ok(vec![json, csv, md, svg])
}

#[cfg(test)]
mod tests {
    use clap::Parser;

    use super::*;
    use crate::cli::{Cli, Command};

    #[test]
    fn caps_apply_from_their_threshold() {
        let caps = [(1_000, 900.0), (10_000, 600.0)];
        assert_eq!(duration_cap(&caps, 300), None);
        assert_eq!(duration_cap(&caps, 3_000), Some(900.0));
        assert_eq!(duration_cap(&caps, 20_000), Some(600.0));
    }

    /// A tiny sweep end to end: two small points of a one-minute scenario over three seeds,
    /// every file written and read back.
    #[test]
    fn a_tiny_sweep_writes_every_file() {
        let dir = std::env::temp_dir().join(format!("livecount-sweep-{}", std::process::id()));
        let _ = fs::remove_dir_all(&dir);
        let file = dir.join("tiny.toml");
        fs::create_dir_all(&dir).unwrap();
        fs::write(
            &file,
            "description = 'tiny'\nduration_s = 60\n[arrivals]\ntarget_concurrent = 40\n\
             [sessions]\nduration = 'exponential'\nmean_s = 20\nspeaking_cost = 0.06\n\
             [[backends]]\ncount = 1\nsize = 1.0\n[[backends]]\ncount = 1\nsize = 2.0",
        )
        .unwrap();
        let out = dir.join("out");
        let args = [
            "lbsim",
            "sweep",
            file.to_str().unwrap(),
            "--concurrency",
            "40,80",
            "--seeds",
            "3",
            "--no-progress",
            "--out",
            out.to_str().unwrap(),
        ];
        let Command::Sweep(o) = Cli::try_parse_from(args).unwrap().command else {
            panic!("sweep parses as Sweep");
        };
        run(&o).unwrap();
        let text = fs::read_to_string(out.join("sweep.json")).unwrap();
        let s: SweepResult = serde_json::from_str(&text).unwrap();
        let f = &s.families[0];
        assert_eq!(
            f.points.iter().map(|p| p.backends).collect::<Vec<_>>(),
            [2, 4]
        );
        assert_eq!(
            f.points[1].contrasts.len(),
            4,
            "two metrics × two baselines"
        );
        assert_eq!(f.answers.len(), 4);
        let md = fs::read_to_string(out.join("REPORT.md")).unwrap();
        assert!(
            md.contains("## The answer") && md.contains("| 80 | 4 (6) |"),
            "{md}"
        );
        assert!(
            fs::read_to_string(out.join("sweep.svg"))
                .unwrap()
                .starts_with("<svg")
        );
        let csv = fs::read_to_string(out.join("points.csv")).unwrap();
        assert_eq!(csv.lines().count(), 1 + 2 * 4, "{csv}");
        fs::remove_dir_all(&dir).unwrap();
    }
}
