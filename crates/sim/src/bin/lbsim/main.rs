//! `lbsim`: run load-balancing scenarios through routing policies and write the results.
//!
//! ```text
//! lbsim run SCENARIO [--policy NAME[,NAME…]]… [--seed N] [--out DIR] [--no-write] [--no-progress]
//! lbsim check SCENARIO…      validate scenario files
//! lbsim list                 the bundled scenarios
//! lbsim policies             the policy names
//! ```
//!
//! SCENARIO is a path, or the name of a bundled scenario (`crates/sim/scenarios/NAME.toml`).
//! Results go to `results/sim/<scenario>/` unless `--out` says otherwise.

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use clap::Parser;
use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use livecount_sim::report::{self, RunMeta};
use livecount_sim::{Scenario, ScenarioResult, policy, run};

mod cli;

use cli::{Cli, Command, RunOptions};

fn main() -> ExitCode {
    let result = match Cli::parse().command {
        Command::Run(o) => run_cmd(&o),
        Command::Check { scenarios } => check(&scenarios),
        Command::List => list(),
        Command::Policies => {
            policy::NAMES.iter().for_each(|n| println!("{n}"));
            Ok(())
        }
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("lbsim: {e}");
            ExitCode::FAILURE
        }
    }
}

fn check(scenarios: &[String]) -> Result<(), String> {
    for a in scenarios {
        let s = load(a)?;
        println!(
            "{}: ok ({} backends, {})",
            a,
            s.backend_count(),
            s.description
        );
    }
    Ok(())
}

fn bundled_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("scenarios")
}

/// A path as given, else a bundled scenario of that name.
fn resolve(arg: &str) -> PathBuf {
    let path = PathBuf::from(arg);
    if path.exists() || arg.ends_with(".toml") {
        return path;
    }
    bundled_dir().join(format!("{arg}.toml"))
}

fn load(arg: &str) -> Result<Scenario, String> {
    Scenario::load(resolve(arg)).map_err(|e| e.to_string())
}

fn list() -> Result<(), String> {
    let dir = bundled_dir();
    let mut files: Vec<PathBuf> = std::fs::read_dir(&dir)
        .map_err(|e| format!("{}: {e}", dir.display()))?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|x| x == "toml"))
        .collect();
    files.sort();
    for f in files {
        let s = Scenario::load(&f).map_err(|e| e.to_string())?;
        println!("{:<24} {}", s.name, s.description);
    }
    Ok(())
}

fn run_cmd(o: &RunOptions) -> Result<(), String> {
    let path = resolve(&o.scenario);
    let mut scenario = Scenario::load(&path).map_err(|e| e.to_string())?;
    if let Some(seed) = o.seed {
        scenario.seed = seed;
    }
    let policies: Vec<String> = match (&o.policies, &scenario.policies) {
        (cli, _) if !cli.is_empty() => cli.clone(),
        (_, file) if !file.is_empty() => file.clone(),
        _ => policy::NAMES.iter().map(|s| s.to_string()).collect(),
    };
    println!("{}: {}", scenario.name, scenario.description);
    let result = run_with_progress(&scenario, &policies, o.progress);
    println!("{}", report::comparison_table(&result));
    for p in &result.policies {
        let rate = p.events as f64 / p.wall_s.max(1e-9);
        println!(
            "{:<16} {:>10} events in {:>6.2} s = {:>5.1} M events/s",
            p.policy,
            p.events,
            p.wall_s,
            rate / 1e6
        );
    }
    if o.write {
        let dir = o
            .out
            .clone()
            .unwrap_or_else(|| Path::new("results/sim").join(&scenario.name));
        let meta = meta(&path, o);
        let files = report::write_all(&result, &dir, &meta)
            .map_err(|e| format!("{}: cannot write results: {e}", dir.display()))?;
        for f in files {
            println!("wrote {}", f.display());
        }
    }
    Ok(())
}

fn run_with_progress(scenario: &Scenario, policies: &[String], show: bool) -> ScenarioResult {
    const STEPS: u64 = 1000;
    let bar = ProgressBar::new(STEPS * policies.len() as u64);
    if show {
        bar.set_style(
            ProgressStyle::with_template("{bar:40} {pos:>4}/{len} {msg} [{elapsed_precise}]")
                .expect("a valid template"),
        );
    } else {
        bar.set_draw_target(ProgressDrawTarget::hidden());
    }
    let result = run(scenario, policies, &mut |i, fraction| {
        bar.set_message(policies[i].clone());
        bar.set_position(i as u64 * STEPS + (fraction * STEPS as f64) as u64);
    });
    bar.finish_and_clear();
    result
}

fn meta(path: &Path, o: &RunOptions) -> RunMeta {
    let mut command = format!("cargo run --release -p livecount-sim -- run {}", o.scenario);
    if let Some(seed) = o.seed {
        command += &format!(" --seed {seed}");
    }
    if !o.policies.is_empty() {
        command += &format!(" --policy {}", o.policies.join(","));
    }
    RunMeta {
        command,
        commit: livecount_provenance::commit(),
        machine: format!(
            "{}, {} CPUs",
            livecount_provenance::cpu_model(),
            livecount_provenance::cores()
        ),
        rust: livecount_provenance::rustc(),
        scenario_file: relative(path).display().to_string(),
    }
}

/// `path` relative to the current directory when it lies below it (reports stay portable).
fn relative(path: &Path) -> PathBuf {
    std::env::current_dir()
        .ok()
        .and_then(|cwd| path.strip_prefix(cwd).ok().map(Path::to_path_buf))
        .unwrap_or_else(|| path.to_path_buf())
}
