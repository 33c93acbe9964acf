//! `lbsim`: run load-balancing scenarios through routing policies and write the results.
//!
//! ```text
//! lbsim run SCENARIO [--policy NAME[,NAME…]]… [--seed N] [--seeds N] [--jobs J]
//!                     [--out DIR] [--no-write] [--no-progress]
//! lbsim check SCENARIO…      validate scenario files
//! lbsim list                 the bundled scenarios
//! lbsim policies             the policy names
//! lbsim summary [--dir DIR] [--out FILE]   who wins what, over every results directory
//! lbsim sweep [SCENARIO…] [--concurrency N[,N…]] [--seeds N] [--jobs J] [--out DIR]
//!                     session-aware against plain policies over fleet sizes (`sweep`)
//! ```
//!
//! `run` runs seeds SEED, SEED + 1, … (20 unless `--seeds` says otherwise) in parallel and
//! reports each metric's mean and 95 % interval; the plots show the first seed's run.
//!
//! SCENARIO is a path, or the name of a bundled scenario (`crates/sim/scenarios/NAME.toml`).
//! Results go to `results/sim/<scenario>/` unless `--out` says otherwise. Writing into the
//! checkout's `results/` (`run`, and `summary --out`) needs a clean tree: `lbsim` refuses
//! before it starts, naming the changed files (`livecount_support::provenance::commit_for`),
//! and stamps the commit it ran from.

use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::Mutex;
use std::sync::atomic::{AtomicUsize, Ordering};

use clap::Parser;
use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use livecount_sim::report::{self, RunMeta};
use livecount_sim::{Scenario, ScenarioResult, policy, run};
use livecount_support::provenance;

mod cli;
mod factors;
mod summary;
mod sweep;

use cli::{Cli, Command, RunOptions};

fn main() -> ExitCode {
    let result = match Cli::parse().command {
        Command::Run(o) => run_cmd(&o),
        Command::Check { scenarios } => check(&scenarios),
        Command::List => list(),
        Command::Summary { dir, out } => summary::write(&dir, out.as_deref()),
        Command::Sweep(o) => sweep::run(&o),
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
pub(crate) fn resolve(arg: &str) -> PathBuf {
    let path = PathBuf::from(arg);
    if path.exists() || arg.ends_with(".toml") {
        return path;
    }
    bundled_dir().join(format!("{arg}.toml"))
}

pub(crate) fn load(arg: &str) -> Result<Scenario, String> {
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
    let dir = o
        .out
        .clone()
        .unwrap_or_else(|| Path::new("results/sim").join(&scenario.name));
    // Before the runs: committed results come from a clean commit, the one stamped on them.
    let commit = if o.write {
        provenance::commit_for(&dir).map_err(|e| e.to_string())?
    } else {
        String::new()
    };
    if let Some(seed) = o.seed {
        scenario.seed = seed;
    }
    let policies: Vec<String> = match (&o.policies, &scenario.policies) {
        (cli, _) if !cli.is_empty() => cli.clone(),
        (_, file) if !file.is_empty() => file.clone(),
        _ => policy::NAMES.iter().map(|s| s.to_string()).collect(),
    };
    println!("{}: {}", scenario.name, scenario.description);
    let seeds: Vec<u64> = (0..u64::from(o.seeds))
        .map(|k| scenario.seed.wrapping_add(k))
        .collect();
    let result = run_with_progress(&scenario, &policies, &seeds, jobs(o.jobs), o.progress);
    println!("{}", report::comparison_table(&result));
    println!("(seed {}; wall time of one run on one core)", result.seed);
    for p in &result.policies {
        let rate = p.events as f64 / p.wall_s.max(1e-9);
        println!(
            "{:<18} {:>11} events in {:>6.2} s = {:>5.1} M events/s",
            p.policy,
            p.events,
            p.wall_s,
            rate / 1e6
        );
    }
    if o.write {
        let meta = meta(&path, o, commit);
        let files = report::write_all(&result, &dir, &meta)
            .map_err(|e| format!("{}: cannot write results: {e}", dir.display()))?;
        for f in files {
            println!("wrote {}", f.display());
        }
    }
    Ok(())
}

/// Seeds run at once: as asked, else the machine's available parallelism.
pub(crate) fn jobs(asked: Option<u32>) -> usize {
    asked.map_or_else(
        || std::thread::available_parallelism().map_or(1, usize::from),
        |j| j as usize,
    )
}

/// Runs every seed (`jobs` at a time), then merges them: the first seed's run with every
/// metric's mean and interval over all of them.
fn run_with_progress(
    scenario: &Scenario,
    policies: &[String],
    seeds: &[u64],
    jobs: usize,
    show: bool,
) -> ScenarioResult {
    let runs = run_seeds(scenario, policies, seeds, jobs, show);
    if runs.len() == 1 {
        runs.into_iter().next().expect("one run")
    } else {
        report::combine(runs)
    }
}

/// Runs every seed (`jobs` at a time, a progress bar if `show`): one result per seed, in
/// the order of `seeds`.
pub(crate) fn run_seeds(
    scenario: &Scenario,
    policies: &[String],
    seeds: &[u64],
    jobs: usize,
    show: bool,
) -> Vec<ScenarioResult> {
    // With an autoscaler every policy runs once per variant.
    let variants = scenario
        .autoscaler
        .as_ref()
        .map_or(1, |a| a.variants().len());
    let per_seed = policies.len() * variants;
    let bar = ProgressBar::new((seeds.len() * per_seed) as u64);
    if show {
        bar.set_style(
            ProgressStyle::with_template(
                "{bar:40} {pos:>5}/{len} policy runs over {msg} seeds [{elapsed_precise}]",
            )
            .expect("a valid template"),
        );
        bar.set_message(seeds.len().to_string());
    } else {
        bar.set_draw_target(ProgressDrawTarget::hidden());
    }
    let next = AtomicUsize::new(0);
    let runs: Mutex<Vec<Option<ScenarioResult>>> = Mutex::new(vec![None; seeds.len()]);
    std::thread::scope(|s| {
        for _ in 0..jobs.clamp(1, seeds.len()) {
            s.spawn(|| {
                loop {
                    let k = next.fetch_add(1, Ordering::Relaxed);
                    let Some(&seed) = seeds.get(k) else {
                        break;
                    };
                    let mut sc = scenario.clone();
                    sc.seed = seed;
                    // A drain past the horizon reports 1.0 more than once: count each
                    // policy's end once.
                    let mut done = vec![false; per_seed];
                    let r = run(&sc, policies, &mut |i, fraction| {
                        if fraction >= 1.0 && !std::mem::replace(&mut done[i], true) {
                            bar.inc(1);
                        }
                    });
                    runs.lock().expect("no run panicked holding the lock")[k] = Some(r);
                }
            });
        }
    });
    bar.finish_and_clear();
    runs.into_inner()
        .expect("no run panicked holding the lock")
        .into_iter()
        .map(|r| r.expect("every seed ran"))
        .collect()
}

fn meta(path: &Path, o: &RunOptions, commit: String) -> RunMeta {
    let mut command = format!("cargo run --release -p livecount-sim -- run {}", o.scenario);
    if let Some(seed) = o.seed {
        command += &format!(" --seed {seed}");
    }
    command += &format!(" --seeds {}", o.seeds);
    if !o.policies.is_empty() {
        command += &format!(" --policy {}", o.policies.join(","));
    }
    RunMeta {
        command,
        commit,
        machine: format!("{}, {} CPUs", provenance::cpu_model(), provenance::cores()),
        rust: provenance::rustc(),
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
