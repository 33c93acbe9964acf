//! `Args`: the command line, parsed by hand (two flags do not need a parser crate).

use std::fmt;
use std::num::NonZeroUsize;

/// The one-line synopsis, also shown after a mistake.
const SYNOPSIS: &str = "usage: livecount-demo [--threads N] [--seconds S]";

/// The `--help` text.
pub(crate) const USAGE: &str = "\
usage: livecount-demo [--threads N] [--seconds S]

Hammers every livecount counter and two AtomicI64 peers with start+end pairs from N worker
threads (half the sessions end on a neighbouring thread) while one reader thread reads
continuously, and prints throughput and what the reader saw.

options:
  --threads N   worker threads per contender, at least 2 (default: 2 x available parallelism)
  --seconds S   measured seconds per contender, fractional allowed (default: 1.0)
  -h, --help    print this help";

/// What to run.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) struct Args {
    pub(crate) threads: usize,
    pub(crate) seconds: f64,
}

/// Why the command line was not run.
#[derive(Debug, PartialEq)]
pub(crate) enum ArgsError {
    /// `--help` was asked for: print the usage and exit successfully.
    Help,
    /// A mistake, described for the user.
    Invalid(String),
}

impl fmt::Display for ArgsError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ArgsError::Help => f.write_str(USAGE),
            ArgsError::Invalid(why) => {
                write!(f, "livecount-demo: {why}\n{SYNOPSIS} (--help for details)")
            }
        }
    }
}

impl Args {
    /// Parses `args` (without the program name); `cpus` sets the default thread count.
    pub(crate) fn parse(
        args: impl IntoIterator<Item = String>,
        cpus: NonZeroUsize,
    ) -> Result<Args, ArgsError> {
        let mut parsed = Args {
            threads: 2 * cpus.get(),
            seconds: 1.0,
        };
        let mut args = args.into_iter();
        while let Some(arg) = args.next() {
            let (flag, inline) = match arg.split_once('=') {
                Some((flag, value)) => (flag.to_owned(), Some(value.to_owned())),
                None => (arg, None),
            };
            if flag == "-h" || flag == "--help" {
                return Err(ArgsError::Help);
            }
            let mut value = || {
                inline
                    .clone()
                    .or_else(|| args.next())
                    .ok_or_else(|| invalid(format!("{flag} needs a value")))
            };
            match flag.as_str() {
                "--threads" => parsed.threads = parse_threads(&value()?)?,
                "--seconds" => parsed.seconds = parse_seconds(&value()?)?,
                _ => return Err(invalid(format!("unknown argument `{flag}`"))),
            }
        }
        Ok(parsed)
    }
}

fn invalid(why: String) -> ArgsError {
    ArgsError::Invalid(why)
}

fn parse_threads(value: &str) -> Result<usize, ArgsError> {
    match value.parse::<usize>() {
        Ok(n) if (2..=4096).contains(&n) => Ok(n),
        _ => Err(invalid(format!(
            "--threads takes a whole number from 2 (sessions end on a neighbour) to 4096, not `{value}`"
        ))),
    }
}

fn parse_seconds(value: &str) -> Result<f64, ArgsError> {
    match value.parse::<f64>() {
        Ok(s) if s.is_finite() && s > 0.0 && s <= 3600.0 => Ok(s),
        _ => Err(invalid(format!(
            "--seconds takes a number of seconds above 0 and at most 3600, not `{value}`"
        ))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(args: &[&str]) -> Result<Args, ArgsError> {
        let cpus = NonZeroUsize::new(3).unwrap();
        Args::parse(args.iter().map(|s| s.to_string()), cpus)
    }

    #[test]
    fn defaults_to_twice_the_cpus_for_one_second() {
        let args = parse(&[]).unwrap();
        assert_eq!((args.threads, args.seconds), (6, 1.0));
    }

    #[test]
    fn takes_values_split_or_joined() {
        let args = parse(&["--threads", "8", "--seconds=0.25"]).unwrap();
        assert_eq!((args.threads, args.seconds), (8, 0.25));
    }

    #[test]
    fn help_wins() {
        assert_eq!(parse(&["--threads", "2", "-h"]), Err(ArgsError::Help));
    }

    #[test]
    fn rejects_bad_input_with_a_reason() {
        for (args, needle) in [
            (&["--threads", "1"][..], "--threads takes"),
            (&["--threads", "many"], "--threads takes"),
            (&["--seconds", "-1"], "--seconds takes"),
            (&["--seconds", "NaN"], "--seconds takes"),
            (&["--seconds"], "--seconds needs a value"),
            (&["--fast"], "unknown argument `--fast`"),
        ] {
            match parse(args) {
                Err(ArgsError::Invalid(why)) => assert!(why.contains(needle), "{why}"),
                other => panic!("{args:?} gave {other:?}"),
            }
        }
    }
}
