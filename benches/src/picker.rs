//! The picker: command-line options, the bounded sweep with repetitions, and the files it
//! writes. `src/main.rs` is a thin wrapper so tests can drive all of it.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use indicatif::{ProgressBar, ProgressStyle};

use crate::contender::{self, Contender, Live, LiveName, Tracked, Visit};
use crate::machine::{self, Machine};
use crate::plan::{self, Ctx, Mode, Plan, Point, VisitLifecycle};
use crate::rank;
use crate::report;
use crate::results::{self, Figure, Params, Results};
use crate::workload::{Reader, Sample};

/// Usage text for `--help` and argument errors.
pub const USAGE: &str = "\
livecount-picker: measures every counter on this machine for the workload you describe and
recommends the one to import.

USAGE: cargo run --release -- [OPTIONS]

OPTIONS:
  --quick                     fewer points, 20 s budget
  --full                      every point, 5 repetitions, 300 s budget
  --budget SECONDS            time budget of the sweep (default 60)
  --reps N                    repetitions per point, at least 3 (default 3, --full 5)
  --threads N                 writer threads of your service (default: cores)
  --readers-hz HZ|continuous  how often your service reads the count (default 10)
  --max-bytes-per-counter B   exclude counters larger than B bytes at --threads threads
  --out DIR                   where to write results (default results/<machine-label>)
  --label NAME                machine label (default: CPU model and cores)
  --compare OLD.json          after the run, print new/old ratio per figure
  --against NEW.json          with --compare: compare two files, do not measure
  --no-progress               no progress bar
  -h, --help                  this text
";

/// Parsed command line.
#[derive(Clone, Debug, PartialEq)]
pub struct Options {
    /// Sweep size.
    pub mode: Mode,
    /// Time budget.
    pub budget: Duration,
    /// Repetitions per point.
    pub reps: usize,
    /// Writer threads of the described service.
    pub threads: usize,
    /// Reader pace; 0 is continuous.
    pub readers_hz: u32,
    /// Byte limit per counter.
    pub max_bytes: Option<u64>,
    /// Output directory (`None`: `results/<label>`).
    pub out: Option<PathBuf>,
    /// Machine label override.
    pub label: Option<String>,
    /// Old results to compare with.
    pub compare: Option<PathBuf>,
    /// New results to compare instead of measuring.
    pub against: Option<PathBuf>,
    /// Show a progress bar.
    pub progress: bool,
    /// Print usage and exit.
    pub help: bool,
}

fn value<T: std::str::FromStr>(flag: &str, v: Option<String>, what: &str) -> Result<T, String> {
    let v = v.ok_or_else(|| format!("{flag} needs a value ({what})"))?;
    v.parse()
        .map_err(|_| format!("{flag} {v:?}: expected {what}"))
}

impl Options {
    /// Parses arguments (without the program name).
    pub fn parse(args: impl IntoIterator<Item = String>) -> Result<Options, String> {
        let mut args = args.into_iter();
        let (mut quick, mut full) = (false, false);
        let (mut budget, mut reps) = (None::<f64>, None::<usize>);
        let mut o = Options {
            mode: Mode::Default,
            budget: Duration::ZERO,
            reps: 3,
            threads: machine::cores(),
            readers_hz: 10,
            max_bytes: None,
            out: None,
            label: None,
            compare: None,
            against: None,
            progress: true,
            help: false,
        };
        while let Some(a) = args.next() {
            match a.as_str() {
                "--quick" => quick = true,
                "--full" => full = true,
                "--budget" => budget = Some(value(&a, args.next(), "seconds, e.g. 30")?),
                "--reps" => reps = Some(value(&a, args.next(), "a whole number ≥ 3")?),
                "--threads" => o.threads = value(&a, args.next(), "a whole number ≥ 1")?,
                "--readers-hz" => {
                    o.readers_hz = match args.next().as_deref() {
                        Some("continuous") => 0,
                        v => value(
                            &a,
                            v.map(str::to_owned),
                            "reads per second ≥ 1, or `continuous`",
                        )?,
                    }
                }
                "--max-bytes-per-counter" => o.max_bytes = Some(value(&a, args.next(), "bytes")?),
                "--out" => o.out = Some(value(&a, args.next(), "a directory")?),
                "--label" => o.label = Some(value(&a, args.next(), "a name")?),
                "--compare" => o.compare = Some(value(&a, args.next(), "a results.json")?),
                "--against" => o.against = Some(value(&a, args.next(), "a results.json")?),
                "--no-progress" => o.progress = false,
                "-h" | "--help" => o.help = true,
                // `cargo bench` passes `--bench` to every target; accept it quietly.
                "--bench" => {}
                other => return Err(format!("unknown argument {other:?}")),
            }
        }
        if quick && full {
            return Err("--quick and --full exclude each other".into());
        }
        o.mode = if quick {
            Mode::Quick
        } else if full {
            Mode::Full
        } else {
            Mode::Default
        };
        let default_budget = match o.mode {
            Mode::Quick => 20.0,
            Mode::Default => 60.0,
            Mode::Full => 300.0,
        };
        let budget = budget.unwrap_or(default_budget);
        if !(budget.is_finite() && budget > 0.0) {
            return Err(format!(
                "--budget {budget}: expected a positive number of seconds"
            ));
        }
        o.budget = Duration::from_secs_f64(budget);
        o.reps = reps.unwrap_or(if o.mode == Mode::Full { 5 } else { 3 });
        if o.reps < 3 {
            return Err(format!(
                "--reps {}: every point is repeated at least 3 times",
                o.reps
            ));
        }
        if o.threads == 0 || o.threads > 4096 {
            return Err(format!("--threads {}: expected 1..=4096", o.threads));
        }
        if o.against.is_some() && o.compare.is_none() {
            return Err("--against needs --compare OLD.json".into());
        }
        Ok(o)
    }

    fn reader(&self) -> Reader {
        if self.readers_hz == 0 {
            Reader::Continuous
        } else {
            Reader::Hz(self.readers_hz)
        }
    }
}

/// Runs the picker with `opts`; returns what to print, or an error message.
pub fn main_with(opts: &Options) -> Result<String, String> {
    if opts.help {
        return Ok(USAGE.to_owned());
    }
    if let (Some(old), Some(new)) = (&opts.compare, &opts.against) {
        let (old, new) = (load(old)?, load(new)?);
        return Ok(report::compare_table(&report::compare(
            &old.figures,
            &new.figures,
        )));
    }
    let old = opts.compare.as_deref().map(load).transpose()?;
    let results = measure(opts);
    let dir = opts
        .out
        .clone()
        .unwrap_or_else(|| default_out(&results.machine.label));
    write(&results, &dir)?;
    let dir = std::fs::canonicalize(&dir).unwrap_or(dir);
    let mut out = format!(
        "{}\n{}\n\nTargets:\n{}\nWrote {}\n",
        report::table(&results.ranking, results.params.threads),
        results.recommendation,
        report::targets(&results),
        dir.display()
    );
    if let Some(old) = old {
        out += &format!(
            "\nCompared with {}:\n{}",
            opts.compare.as_ref().expect("loaded above").display(),
            report::compare_table(&report::compare(&old.figures, &results.figures))
        );
    }
    Ok(out)
}

/// `results/<label>` in the workspace.
fn default_out(label: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("..")
        .join("results")
        .join(label)
}

/// Reads a `results.json`.
pub fn load(path: &Path) -> Result<Results, String> {
    let text = std::fs::read_to_string(path)
        .map_err(|e| format!("cannot read {}: {e}", path.display()))?;
    serde_json::from_str(&text)
        .map_err(|e| format!("{} is not a livecount results.json: {e}", path.display()))
}

/// Writes `results.json`, `REPORT.md` and the SVG plots into `dir`.
pub fn write(results: &Results, dir: &Path) -> Result<(), String> {
    let err = |e: &dyn std::fmt::Display| format!("cannot write to {}: {e}", dir.display());
    std::fs::create_dir_all(dir).map_err(|e| err(&e))?;
    let json = serde_json::to_string_pretty(results).map_err(|e| err(&e))?;
    std::fs::write(dir.join("results.json"), json + "\n").map_err(|e| err(&e))?;
    std::fs::write(dir.join("REPORT.md"), report::markdown(results)).map_err(|e| err(&e))?;
    crate::plot::write(results, dir).map_err(|e| err(&e))
}

/// Runs the sweep and concludes.
pub fn measure(opts: &Options) -> Results {
    let cores = machine::cores();
    let plan = Plan::new(opts.mode, cores, opts.threads, opts.reader());
    let contenders = contender::all();
    let lifecycle_runs = 2 * 4 * plan.lifecycle.len();
    let timed_points: usize = plan::WORKLOADS
        .iter()
        .filter(|w| !matches!(**w, "lifecycle" | "memory"))
        .map(|w| plan.points(w).len() * contenders.len())
        .sum::<usize>()
        + lifecycle_runs;
    let memory_points = plan.memory.len() * contenders.len();
    let pb = if opts.progress {
        ProgressBar::new((timed_points + memory_points) as u64)
    } else {
        ProgressBar::hidden()
    };
    pb.set_style(
        ProgressStyle::with_template("{elapsed_precise} [{bar:30}] {pos}/{len} {msg}")
            .expect("a valid template")
            .progress_chars("=> "),
    );
    let mut s = Sweeper {
        ctx: Ctx::new(cores, plan.writers),
        plan: &plan,
        // The budget covers setup too (spawning 100 000 tasks, 256-thread memory runs): each
        // point gets an equal share of what is left, so slow setups shrink the rest.
        deadline: Instant::now() + opts.budget.mul_f64(0.95),
        remaining: timed_points + memory_points,
        reps: opts.reps,
        figures: Vec::new(),
        pb: &pb,
        workload: "",
    };
    for w in plan::WORKLOADS {
        s.workload = w;
        if w == "lifecycle" {
            plan::for_each_lifecycle(&mut s);
        } else {
            contender::for_each(&mut s);
        }
    }
    pb.finish_and_clear();
    let params = Params {
        mode: opts.mode,
        threads: opts.threads,
        readers_hz: opts.readers_hz,
        max_bytes_per_counter: opts.max_bytes,
        budget_secs: opts.budget.as_secs_f64(),
        reps: opts.reps,
        rw_writers: plan.writers,
    };
    let mut machine = Machine::detect();
    if let Some(label) = &opts.label {
        machine.label = label.clone();
    }
    conclude(
        "picker",
        machine,
        params,
        command_line(opts),
        contenders,
        s.figures,
    )
}

/// Ranks, recommends and checks targets: shared with the criterion suite.
pub fn conclude(
    source: &str,
    machine: Machine,
    params: Params,
    command: String,
    contenders: Vec<contender::Info>,
    figures: Vec<Figure>,
) -> Results {
    let ranking = rank::rank(&figures, &contenders, &params);
    let recommendation = rank::recommend(&ranking, &params);
    let targets = rank::targets(&figures, &contenders);
    Results {
        source: source.into(),
        machine,
        params,
        command,
        contenders,
        workloads: plan::WORKLOADS.iter().map(|w| (*w).to_owned()).collect(),
        figures,
        ranking,
        recommendation,
        targets,
    }
}

fn command_line(o: &Options) -> String {
    let mut s = String::from("cargo run --release --");
    match o.mode {
        Mode::Quick => s += " --quick",
        Mode::Full => s += " --full",
        Mode::Default => {}
    }
    s += &format!(
        " --budget {} --reps {} --threads {}",
        o.budget.as_secs_f64(),
        o.reps,
        o.threads
    );
    s += &match o.readers_hz {
        0 => " --readers-hz continuous".to_owned(),
        hz => format!(" --readers-hz {hz}"),
    };
    if let Some(b) = o.max_bytes {
        s += &format!(" --max-bytes-per-counter {b}");
    }
    s
}

/// Walks contenders and points, measuring each with repetitions.
struct Sweeper<'a> {
    ctx: Ctx,
    plan: &'a Plan,
    deadline: Instant,
    remaining: usize,
    reps: usize,
    figures: Vec<Figure>,
    pb: &'a ProgressBar,
    workload: &'static str,
}

impl Sweeper<'_> {
    /// This point's share of the budget left.
    fn share(&self) -> Duration {
        self.deadline.saturating_duration_since(Instant::now()) / self.remaining.max(1) as u32
    }

    /// A pilot grows the unit count until a run takes an eighth of this point's per-run time,
    /// then `reps` runs of the unit count scaled to fill the point's share (minus the setup
    /// each run costs outside its timed window) are measured.
    fn samples<C: Contender>(&self, point: Point) -> Vec<Sample> {
        let share = self.share();
        let begun = Instant::now();
        let per_run = share / (self.reps as u32 + 1);
        let mut units = 1u64;
        let (pilot, setup) = loop {
            let t = Instant::now();
            let s = plan::run::<C>(&self.ctx, point, units);
            let wall = t.elapsed();
            if s.elapsed >= per_run / 8 || units >= 1 << 40 {
                break (s, wall.saturating_sub(s.elapsed));
            }
            units *= 8;
        };
        let left = share.saturating_sub(begun.elapsed()) / self.reps as u32;
        let target = left.saturating_sub(setup).max(Duration::from_micros(500));
        let scale = target.as_secs_f64() / pilot.elapsed.as_secs_f64().max(1e-9);
        let units = ((units as f64 * scale) as u64).max(1);
        (0..self.reps)
            .map(|_| plan::run::<C>(&self.ctx, point, units))
            .collect()
    }

    fn record(&mut self, name: &str, point: Point, samples: &[Sample]) {
        let (w, p) = (point.workload(), point.param());
        let fig = |metric: &str, f: &dyn Fn(&Sample) -> Option<f64>| {
            let v: Vec<f64> = samples.iter().filter_map(f).collect();
            (!v.is_empty()).then(|| Figure::from_samples(w, name, &p, metric, v))
        };
        let figs = [
            fig(results::PAIRS_PER_S, &|s| Some(s.throughput())),
            fig(results::READ_NS, &|s| {
                s.read.filter(|r| r.reads > 0).map(|r| r.ns_per_read)
            }),
            fig(results::MIN_READ, &|s| {
                s.read.filter(|r| r.reads > 0).map(|r| r.min as f64)
            }),
            fig(results::MAX_READ, &|s| {
                s.read.filter(|r| r.reads > 0).map(|r| r.max as f64)
            }),
            fig(results::TRUE_MAX, &|s| s.read.map(|r| r.true_max as f64)),
            fig("reads", &|s| s.read.map(|r| r.reads as f64)),
        ];
        self.figures.extend(figs.into_iter().flatten());
        self.done_point();
    }

    fn slowdown(&mut self, name: &str) {
        let base = results::find(
            &self.figures,
            "read_under_write",
            name,
            "none",
            results::PAIRS_PER_S,
        )
        .map(|f| f.median);
        let Some(base) = base else { return };
        let slow: Vec<Figure> = self
            .figures
            .iter()
            .filter(|f| {
                f.workload == "read_under_write"
                    && f.contender == name
                    && f.metric == results::PAIRS_PER_S
                    && f.param != "none"
            })
            .map(|f| {
                let pct = |v: f64| 100.0 * (1.0 - v / base);
                let mut s: Vec<f64> = f.samples.iter().map(|v| pct(*v)).collect();
                s.sort_by(f64::total_cmp);
                Figure::from_samples("read_under_write", name, &f.param, "writer_slowdown_pct", s)
            })
            .collect();
        self.figures.extend(slow);
    }
}

impl Sweeper<'_> {
    fn done_point(&mut self) {
        self.remaining = self.remaining.saturating_sub(1);
        self.pb.inc(1);
    }
}

impl Visit for Sweeper<'_> {
    fn visit<C: Contender>(&mut self) {
        if self.workload == "memory" {
            for &t in &self.plan.memory.clone() {
                self.pb.set_message(format!("memory {} {t}", C::NAME));
                let v: Vec<f64> = (0..self.reps)
                    .filter_map(|_| crate::workload::memory::<C>(t))
                    .map(|b| b as f64)
                    .collect();
                if !v.is_empty() {
                    self.figures.push(Figure::from_samples(
                        "memory",
                        C::NAME,
                        &t.to_string(),
                        results::BYTES,
                        v,
                    ));
                }
                self.done_point();
            }
            return;
        }
        for point in self.plan.points(self.workload) {
            self.pb
                .set_message(format!("{} {} {}", self.workload, C::NAME, point.param()));
            let samples = self.samples::<C>(point);
            self.record(C::NAME, point, &samples);
        }
        if self.workload == "read_under_write" {
            self.slowdown(C::NAME);
        }
    }
}

impl VisitLifecycle for Sweeper<'_> {
    fn visit<C: LiveName>(&mut self) {
        for point in self.plan.points("lifecycle") {
            self.pb
                .set_message(format!("lifecycle {} {}", C::NAME, point.param()));
            let bare = self.samples::<Live<C>>(point);
            self.record(C::NAME, point, &bare);
            let tracked = self.samples::<Tracked<C>>(point);
            self.record(C::SESSION_NAME, point, &tracked);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(s: &str) -> Result<Options, String> {
        Options::parse(s.split_whitespace().map(str::to_owned))
    }

    #[test]
    fn arguments() {
        let o = parse("--quick --threads 8 --readers-hz continuous --max-bytes-per-counter 4096")
            .unwrap();
        assert_eq!(
            (o.mode, o.threads, o.readers_hz, o.max_bytes),
            (Mode::Quick, 8, 0, Some(4096))
        );
        assert_eq!(o.budget, Duration::from_secs(20));
        assert_eq!(parse("--full").unwrap().reps, 5);
        for (bad, says) in [
            ("--threads", "needs a value"),
            ("--threads zero", "expected a whole number"),
            ("--threads 0", "1..=4096"),
            ("--quick --full", "exclude each other"),
            ("--reps 2", "at least 3"),
            ("--budget -1", "positive"),
            ("--readers-hz fast", "continuous"),
            ("--frobnicate", "unknown argument"),
            ("--against x.json", "needs --compare"),
        ] {
            let err = parse(bad).unwrap_err();
            assert!(err.contains(says), "{bad}: {err}");
        }
    }
}
