//! `lbtestbed SCENARIO.toml`: the scenario through real agents and real balancers, beside
//! `lbsim`'s prediction. See the crate docs.

use std::path::PathBuf;
use std::process::ExitCode;

use clap::Parser;
use livecount_sim::{PolicyResult, Scenario};
use livecount_support::provenance;
use livecount_testbed::balancer::{Balancer, MAX_INSTANCES, Tools};
use livecount_testbed::compare::{self, Metric, Side};
use livecount_testbed::report::{self, Comparison};
use livecount_testbed::run::{self, Setup};
use livecount_testbed::scaling::Scaling;

/// Replay an lbsim scenario through real agents behind real balancers, beside lbsim.
#[derive(Debug, Parser)]
#[command(name = "lbtestbed", version, args_override_self = true)]
struct Args {
    /// The scenario (lbsim's TOML; see crates/sim/scenarios/testbed/)
    scenario: PathBuf,
    /// Balancers to run, in order [default: all]
    #[arg(long = "balancer", value_enum)]
    balancers: Vec<Balancer>,
    /// Independent instances of each balancer, 1..=16 (sessions spread over them as the
    /// simulator spreads them over its proxies) [default: the scenario's balancer.proxies];
    /// results go to SCENARIO_pN/
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u32).range(1..=i64::from(MAX_INSTANCES)))]
    proxies: Option<u32>,
    /// Testbed runs per balancer (seeds: the scenario's, +1, …), 1..=20
    #[arg(long, default_value = "1", value_parser = clap::value_parser!(u32).range(1..=20))]
    repeats: u32,
    /// Simulator seeds per balancer (the same first seeds), at least --repeats, ..=100
    #[arg(long, default_value = "5", value_parser = clap::value_parser!(u32).range(1..=100))]
    sim_seeds: u32,
    /// Real cores per scenario core (a size-1 backend's CPU quota), (0, 1]
    #[arg(long, default_value = "0.1")]
    core_scale: f64,
    /// Where to write REPORT.md, testbed.json, timelines.svg [default:
    /// target/testbed/SCENARIO/, or results/testbed/SCENARIO/ with --update-results]
    #[arg(long)]
    out: Option<PathBuf>,
    /// Write into results/testbed/SCENARIO/ (the committed results; from a clean commit only)
    #[arg(long)]
    update_results: bool,
    /// Exit 1 unless the ranking agrees (the agreement test)
    #[arg(long)]
    check: bool,
    /// The livecount-agent binary [default: next to this one]
    #[arg(long)]
    agent: Option<PathBuf>,
}

#[tokio::main]
async fn main() -> ExitCode {
    let args = Args::parse();
    match main_(args).await {
        Ok(true) => ExitCode::SUCCESS,
        Ok(false) => ExitCode::from(1),
        Err(e) => {
            eprintln!("lbtestbed: {e}");
            ExitCode::from(2)
        }
    }
}

async fn main_(args: Args) -> Result<bool, String> {
    let mut scenario = Scenario::load(&args.scenario).map_err(|e| e.to_string())?;
    if let Some(n) = args.proxies {
        let shares = scenario.balancer.proxy_shares.len();
        if shares != 0 && shares != n as usize {
            return Err(format!(
                "--proxies {n}: the scenario's balancer.proxy_shares names {shares} proxies"
            ));
        }
        scenario.balancer.proxies = n;
        scenario.name = format!("{}_p{n}", scenario.name);
    }
    if args.sim_seeds < args.repeats {
        return Err(format!(
            "--sim-seeds {} is below --repeats {}: the simulator runs at least the testbed's seeds",
            args.sim_seeds, args.repeats
        ));
    }
    let (scaling, _) = Scaling::new(&scenario, args.core_scale)?;
    let workspace = run::workspace();
    let dir = args.out.clone().unwrap_or_else(|| {
        let root = if args.update_results {
            "results"
        } else {
            "target"
        };
        workspace.join(root).join("testbed").join(&scenario.name)
    });
    // Before the runs: committed results come from a clean commit, the one stamped on them.
    let commit = provenance::commit_for(&dir).map_err(|e| e.to_string())?;
    let agent = args
        .agent
        .clone()
        .or_else(run::find_agent)
        .ok_or("livecount-agent not found next to lbtestbed: build it (cargo build --release -p livecount-server) or pass --agent")?;
    let setup = Setup {
        agent,
        tools: Tools::find(&workspace),
        core_scale: args.core_scale,
        scratch: std::env::temp_dir().join(format!("lbtestbed-{}", std::process::id())),
    };
    let balancers = if args.balancers.is_empty() {
        Balancer::ALL.to_vec()
    } else {
        args.balancers.clone()
    };
    let mut comparison = Comparison {
        scenario: scenario.name.clone(),
        commit,
        core_scale: args.core_scale,
        chunk_gap_ms: scaling.chunk_gap_ms,
        sides: Vec::new(),
        runs: Vec::new(),
        sim_runs: Vec::new(),
        ranking: Vec::new(),
        figures: Vec::new(),
    };
    for &b in &balancers {
        let (policy, _) = b.sim_policy();
        let mut side = Side {
            balancer: b.name().into(),
            policy: policy.into(),
            measured: Vec::new(),
            simulated: Vec::new(),
            calibration: None,
        };
        for r in 0..args.repeats {
            let seeded = with_seed(&scenario, scenario.seed + u64::from(r));
            eprintln!("lbtestbed: {} seed {} …", b.name(), seeded.seed);
            let result = run::run(&seeded, b, &setup).await?;
            eprintln!(
                "lbtestbed: {} seed {}: {} sessions, overloaded {:.1} %, first stream p99 {:.0} ms, settled {}",
                b.name(),
                seeded.seed,
                result.measured.arrivals,
                result.measured.overloaded_rate * 100.0,
                result.measured.first_stream_ms.p99,
                result.measured.settled
            );
            side.measured.push(result.measured.clone());
            comparison.runs.push(result);
        }
        // The model is given what the testbed's agents really cost: the speaking cost and
        // the idle utilisation measured in this balancer's runs (the scenario's are the
        // pacing's target; per-frame overhead adds to them). Everything else is the
        // scenario's.
        let calibrated = calibrate(
            &scenario,
            &comparison.runs[comparison.runs.len() - args.repeats as usize..],
        );
        side.calibration = Some((
            calibrated.sessions.speaking_cost,
            calibrated.backends[0].base_utilisation,
        ));
        for s in 0..args.sim_seeds {
            let seeded = with_seed(&calibrated, scenario.seed + u64::from(s));
            let result: PolicyResult = livecount_sim::run_policy(&seeded, policy, &mut |_| {});
            side.simulated.push(result.summary.clone());
            if s == 0 {
                comparison.sim_runs.push(result);
            }
        }
        comparison.sides.push(side);
    }
    let _ = std::fs::remove_dir_all(&setup.scratch);
    for m in Metric::RANKED {
        comparison
            .ranking
            .extend(compare::ranking(&comparison.sides, m));
    }
    comparison.figures = compare::figures(&comparison.sides, &Metric::ALL);
    let command = command_line(&args);
    report::write(&dir, &scenario, &scaling, &comparison, &command)?;
    println!("{}", compare::table(&comparison.sides));
    for f in comparison.ranking.iter().chain(&comparison.figures) {
        println!(
            "{} {}",
            if f.agrees { "agrees:   " } else { "DISAGREES:" },
            f.what
        );
    }
    let settled = comparison.runs.iter().all(|r| r.measured.settled);
    if !settled {
        eprintln!("lbtestbed: a backend did not end at active 0 with started = ended");
    }
    println!("report: {}", dir.join("REPORT.md").display());
    Ok(!args.check || (comparison.ranking_agrees() && settled))
}

/// `scenario` with the speaking cost and idle utilisation measured in `runs` (their means).
fn calibrate(scenario: &Scenario, runs: &[run::RunResult]) -> Scenario {
    let n = runs.len().max(1) as f64;
    let mut s = scenario.clone();
    s.sessions.speaking_cost = runs.iter().map(|r| r.speaking_cost_measured).sum::<f64>() / n;
    let idle = runs.iter().map(|r| r.idle_utilisation).sum::<f64>() / n;
    for g in &mut s.backends {
        g.base_utilisation = idle;
    }
    s
}

/// `scenario` with another seed.
fn with_seed(scenario: &Scenario, seed: u64) -> Scenario {
    let mut s = scenario.clone();
    s.seed = seed;
    s
}

/// The command that reproduces this run, for the report.
fn command_line(args: &Args) -> String {
    let mut c = format!("target/release/lbtestbed {}", args.scenario.display());
    for b in &args.balancers {
        c += &format!(
            " --balancer {}",
            clap::ValueEnum::to_possible_value(b)
                .map_or(String::new(), |v| v.get_name().to_owned())
        );
    }
    if let Some(n) = args.proxies {
        c += &format!(" --proxies {n}");
    }
    c += &format!(
        " --repeats {} --sim-seeds {} --core-scale {}",
        args.repeats, args.sim_seeds, args.core_scale
    );
    if let Some(out) = &args.out {
        c += &format!(" --out {}", out.display());
    }
    if args.update_results {
        c += " --update-results";
    }
    c
}
