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
    fn help_is_help() {
        for args in ["--help", "run --help", "check --help"] {
            let e = parse(args).unwrap_err();
            assert_eq!(e.kind(), clap::error::ErrorKind::DisplayHelp, "{args}");
            assert_eq!(e.exit_code(), 0, "{args}");
        }
    }
}
