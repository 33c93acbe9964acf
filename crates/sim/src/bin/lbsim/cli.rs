//! `lbsim`'s command line (clap derive): every subcommand, flag, default and help line.

use std::path::PathBuf;

use clap::builder::PossibleValuesParser;
use clap::{ArgAction, Args, Parser, Subcommand};
use livecount_sim::policy;

/// Run load-balancing scenarios through routing policies and write the results.
#[derive(Debug, Parser)]
#[command(
    name = "lbsim",
    after_help = "SCENARIO is a .toml path or a bundled scenario name (see `lbsim list`)."
)]
pub(crate) struct Cli {
    #[command(subcommand)]
    pub(crate) command: Command,
}

#[derive(Debug, Subcommand)]
pub(crate) enum Command {
    /// Run a scenario through routing policies; results go to results/sim/SCENARIO/
    Run(RunOptions),
    /// Validate scenario files
    Check {
        /// Scenarios to validate
        #[arg(value_name = "SCENARIO", required = true)]
        scenarios: Vec<String>,
    },
    /// The bundled scenarios
    List,
    /// A markdown table of who wins what, from every results/sim/*/results.json
    Summary {
        /// Directory holding one results directory per scenario
        #[arg(long, value_name = "DIR", default_value = "results/sim")]
        dir: PathBuf,
        /// Write the table here as well as to standard output
        #[arg(long, value_name = "FILE")]
        out: Option<PathBuf>,
    },
    /// The policy names
    Policies,
    /// Session-aware against plain policies over fleet sizes; results go to results/sim/sweep/
    Sweep(SweepOptions),
}

/// Options of `lbsim run`.
#[derive(Debug, Clone, Args)]
// As before clap: a repeated flag overrides the earlier one (`--policy` accumulates).
#[command(args_override_self = true)]
pub(crate) struct RunOptions {
    /// A .toml path or a bundled scenario name
    #[arg(value_name = "SCENARIO")]
    pub(crate) scenario: String,
    /// Policies to compare, repeatable and comma-separated [default: the scenario's, else all]
    #[arg(
        long = "policy",
        value_name = "NAME[,NAME...]",
        value_delimiter = ',',
        value_parser = PossibleValuesParser::new(policy::NAMES)
    )]
    pub(crate) policies: Vec<String>,
    /// Seed, overriding the scenario's: a whole number 0..=18446744073709551615
    #[arg(long, value_name = "N", allow_negative_numbers = true)]
    pub(crate) seed: Option<u64>,
    /// Runs with seeds SEED, SEED+1, …: the report gives each metric's mean and 95 % interval
    #[arg(long, value_name = "N", default_value_t = 20,
          value_parser = clap::value_parser!(u32).range(1..=1000))]
    pub(crate) seeds: u32,
    /// Seeds run at once [default: the machine's available parallelism]
    #[arg(long, value_name = "J", value_parser = clap::value_parser!(u32).range(1..=256))]
    pub(crate) jobs: Option<u32>,
    /// Where to write the results [default: results/sim/SCENARIO]
    #[arg(long, value_name = "DIR")]
    pub(crate) out: Option<PathBuf>,
    /// Print the comparison only, write no files
    #[arg(long = "no-write", action = ArgAction::SetFalse)]
    pub(crate) write: bool,
    /// No progress bar
    #[arg(long = "no-progress", action = ArgAction::SetFalse)]
    pub(crate) progress: bool,
}

/// Options of `lbsim sweep`.
#[derive(Debug, Clone, Args)]
#[command(args_override_self = true)]
pub(crate) struct SweepOptions {
    /// Scenario families to scale (each needs `arrivals.target_concurrent`, no per-backend
    /// events); .toml paths or bundled names
    #[arg(
        value_name = "SCENARIO",
        default_values_t = DEFAULT_FAMILIES.map(String::from)
    )]
    pub(crate) scenarios: Vec<String>,
    /// Concurrent sessions at each point (the fleet scales with them)
    #[arg(
        long,
        value_name = "N[,N...]",
        value_delimiter = ',',
        default_values_t = DEFAULT_CONCURRENCY,
        value_parser = clap::value_parser!(u32).range(1..=10_000_000)
    )]
    pub(crate) concurrency: Vec<u32>,
    /// Seeds per point: each scenario's seed and the ones after it
    #[arg(long, value_name = "N", default_value_t = 20,
          value_parser = clap::value_parser!(u32).range(2..=1000))]
    pub(crate) seeds: u32,
    /// Seeds run at once [default: the machine's available parallelism]
    #[arg(long, value_name = "J", value_parser = clap::value_parser!(u32).range(1..=256))]
    pub(crate) jobs: Option<u32>,
    /// Cap on each run's arrival window, seconds, from this many concurrent sessions on
    /// (`SESSIONS=SECONDS`; repeatable) [default: none, every point runs its scenario's]
    #[arg(long = "duration-from", value_name = "SESSIONS=SECONDS", value_parser = duration_cap)]
    pub(crate) duration_caps: Vec<(u32, f64)>,
    /// Where to write the results
    #[arg(long, value_name = "DIR", default_value = "results/sim/sweep")]
    pub(crate) out: PathBuf,
    /// Print the tables only, write no files
    #[arg(long = "no-write", action = ArgAction::SetFalse)]
    pub(crate) write: bool,
    /// No progress bar
    #[arg(long = "no-progress", action = ArgAction::SetFalse)]
    pub(crate) progress: bool,
}

/// The families `lbsim sweep` scales by default: backends that differ, backends that do not
/// (steady and daily load), and sixteen proxies.
pub(crate) const DEFAULT_FAMILIES: [&str; 4] = [
    "heterogeneous_fleet",
    "long_vs_short",
    "diurnal",
    "multi_proxy",
];

/// The concurrencies `lbsim sweep` runs by default.
pub(crate) const DEFAULT_CONCURRENCY: [u32; 6] = [100, 300, 1_000, 3_000, 10_000, 20_000];

/// `SESSIONS=SECONDS`, both positive.
fn duration_cap(s: &str) -> Result<(u32, f64), String> {
    let (n, secs) = s
        .split_once('=')
        .ok_or_else(|| format!("{s:?}: want SESSIONS=SECONDS"))?;
    let n: u32 = n.parse().map_err(|e| format!("{n:?}: {e}"))?;
    let secs: f64 = secs.parse().map_err(|e| format!("{secs:?}: {e}"))?;
    if n == 0 || !(secs.is_finite() && secs > 0.0) {
        return Err(format!("{s:?}: both must be positive"));
    }
    Ok((n, secs))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(s: &str) -> Result<Command, clap::Error> {
        Cli::try_parse_from(std::iter::once("lbsim").chain(s.split_whitespace())).map(|c| c.command)
    }

    #[test]
    fn run_takes_a_scenario_and_its_flags() {
        let Command::Run(o) =
            parse("run s --policy random,hybrid_p2c --policy round_robin --seed 7 --no-write")
                .unwrap()
        else {
            panic!("run parses as Run");
        };
        assert_eq!(o.scenario, "s");
        assert_eq!(o.policies, ["random", "hybrid_p2c", "round_robin"]);
        assert_eq!((o.seed, o.out), (Some(7), None));
        assert_eq!((o.seeds, o.jobs), (20, None), "20 seeds by default");
        assert_eq!((o.write, o.progress), (false, true));
        let Command::Run(o) = parse("run s").unwrap() else {
            panic!("run parses as Run");
        };
        assert_eq!((o.seed, o.write, o.progress), (None, true, true));
        let Command::Run(o) = parse("run s --seed 1 --seed 2").unwrap() else {
            panic!("run parses as Run");
        };
        assert_eq!(o.seed, Some(2), "the last one wins");
        assert!(o.policies.is_empty());
    }

    #[test]
    fn bad_values_and_words_are_named() {
        for (bad, names) in [
            ("run s --seed -1", "'--seed "),
            ("run s --seed 1.5", "'--seed "),
            ("run s --seed 18446744073709551616", "'--seed "),
            ("run s --seeds 0", "'--seeds "),
            ("run s --seeds 1001", "'--seeds "),
            ("run s --jobs 0", "'--jobs "),
            ("run s --policy nope", "'--policy "),
            ("run s --out", "'--out "),
            ("run s stray", "'stray'"),
            ("run s --bogus", "'--bogus'"),
            ("run", "<SCENARIO>"),
            ("check", "<SCENARIO>"),
            ("fly", "'fly'"),
        ] {
            let e = parse(bad).unwrap_err();
            assert_eq!(e.exit_code(), 2, "{bad}: a usage error");
            let e = e.to_string();
            assert!(e.contains(names), "{bad}: {e}");
        }
    }

    #[test]
    fn sweep_has_defaults_and_takes_caps() {
        let Command::Sweep(o) = parse("sweep").unwrap() else {
            panic!("sweep parses as Sweep");
        };
        assert_eq!(o.scenarios, DEFAULT_FAMILIES);
        assert_eq!(o.concurrency, DEFAULT_CONCURRENCY);
        assert_eq!((o.seeds, o.write), (20, true));
        assert!(o.duration_caps.is_empty());
        let Command::Sweep(o) =
            parse("sweep diurnal --concurrency 10,20 --duration-from 10000=600 --no-write")
                .unwrap()
        else {
            panic!("sweep parses as Sweep");
        };
        assert_eq!(
            (o.scenarios, o.concurrency),
            (vec!["diurnal".into()], vec![10, 20])
        );
        assert_eq!((o.duration_caps, o.write), (vec![(10_000, 600.0)], false));
        for bad in [
            "sweep --concurrency 0",
            "sweep --seeds 1",
            "sweep --duration-from 100",
            "sweep --duration-from 100=-1",
        ] {
            assert_eq!(parse(bad).unwrap_err().exit_code(), 2, "{bad}");
        }
    }

    #[test]
    fn help_is_help() {
        for args in ["--help", "run --help", "check --help"] {
            let e = parse(args).unwrap_err();
            assert_eq!(e.kind(), clap::error::ErrorKind::DisplayHelp, "{args}");
            assert_eq!(e.exit_code(), 0, "{args}");
        }
    }
}
