//! The sweep: command-line [`Options`], the bounded sweep with repetitions ([`measure`]), and
//! the files it writes. `src/main.rs` is a thin wrapper so tests can drive all of it.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use clap::Parser;
use indicatif::{ProgressBar, ProgressStyle};
use livecount_support::provenance;

use crate::contender::{self, Contender, Live, LiveName, SlabFloor, Tracked, Visit};
use crate::figure::{Figure, Metric, Workload, find};
use crate::java_probe::{self, JavaCounter, JavaProbe};
use crate::machine::{self, Machine};
use crate::per_cpu_case::PerCpuCase;
use crate::plan::{self, Ctx, Mode, Plan, Point, VisitLifecycle};
use crate::rank;
use crate::recommend::recommend;
use crate::report;
use crate::results::{Params, Results};
use crate::targets::targets;
use crate::workload::{Reader, Sample};

/// The most reads per second `--readers-hz` takes.
const MAX_READERS_HZ: u32 = 1_000_000;
/// The longest budget: a day (the sweep's deadline is `Instant::now() + budget`).
const MAX_BUDGET_SECS: f64 = 86_400.0;
/// The shortest budget: 0.1 s.
const MIN_BUDGET_SECS: f64 = 0.1;

/// The picker's command line: every flag, default, range and help line (clap derive).
#[derive(Debug, Parser)]
#[command(
    name = "livecount-picker",
    bin_name = "cargo run --release --",
    about = "livecount-picker: measures every counter on this machine for the workload you \
             describe and recommends the one to import.",
    long_about = None,
    // As before clap: a repeated flag overrides the earlier one (scripts append overrides).
    args_override_self = true
)]
struct Cli {
    /// Fewer points, 20 s budget
    #[arg(long, conflicts_with = "full")]
    quick: bool,
    /// Every point, 5 repetitions, 300 s budget
    #[arg(long)]
    full: bool,
    /// Time budget of the sweep, 0.1..=86400 [default: 60; --quick 20, --full 300]
    #[arg(long, value_name = "SECONDS", allow_negative_numbers = true, value_parser = budget_secs)]
    budget: Option<f64>,
    /// Repetitions per point, 3..=1000 [default: 3; --full 5]
    #[arg(long, value_name = "N", allow_negative_numbers = true,
          value_parser = clap::value_parser!(u16).range(3..=1000))]
    reps: Option<u16>,
    /// Writer threads of your service, 1..=4096 [default: the machine's cores]
    #[arg(long, value_name = "N", allow_negative_numbers = true,
          value_parser = clap::value_parser!(u16).range(1..=4096))]
    threads: Option<u16>,
    /// How often your service reads the count: 1..=1000000 per second, or `continuous`
    #[arg(long, value_name = "HZ|continuous", default_value = "10",
          allow_negative_numbers = true, value_parser = readers_hz)]
    readers_hz: u32,
    /// Exclude counters larger than B bytes at --threads threads (B ≥ 1)
    #[arg(long = "max-bytes-per-counter", value_name = "B", allow_negative_numbers = true,
          value_parser = clap::value_parser!(u64).range(1..))]
    max_bytes: Option<u64>,
    /// Where to write results [default: target/livecount-picker/MACHINE-LABEL]
    #[arg(long, value_name = "DIR", conflicts_with = "update_results")]
    out: Option<PathBuf>,
    /// Write the committed reference, results/MACHINE-LABEL, instead of under target/ (from a
    /// clean commit only)
    #[arg(long)]
    update_results: bool,
    /// Machine label [default: CPU model and cores]
    #[arg(long, value_name = "NAME")]
    label: Option<String>,
    /// After the run, print the new/old ratio per figure
    #[arg(long, value_name = "OLD.json")]
    compare: Option<PathBuf>,
    /// With --compare: compare two files, do not measure
    #[arg(long, value_name = "NEW.json", requires = "compare")]
    against: Option<PathBuf>,
    /// No progress bar
    #[arg(long = "no-progress", action = clap::ArgAction::SetFalse)]
    progress: bool,
    /// Only the side-by-side table: Striped, Sharded, Single and Java's LongAdder and
    /// AtomicLong at 1, 2, 4, 8 threads, interleaved (writes anchors.md)
    #[arg(long, conflicts_with_all = ["quick", "full", "compare"])]
    anchors: bool,
    /// Do not measure Java's LongAdder and AtomicLong beside Striped, even with a JDK present
    #[arg(long = "no-java", action = clap::ArgAction::SetFalse)]
    java: bool,
    /// `cargo bench` passes `--bench` to every target; accepted and ignored.
    #[arg(long, hide = true)]
    bench: bool,
}

fn budget_secs(text: &str) -> Result<f64, String> {
    match text.trim().parse::<f64>() {
        Ok(s) if (MIN_BUDGET_SECS..=MAX_BUDGET_SECS).contains(&s) => Ok(s),
        Ok(s) if s.is_finite() => Err(format!(
            "{} s is out of range (allowed {MIN_BUDGET_SECS}..={MAX_BUDGET_SECS} s)",
            text.trim()
        )),
        _ => Err("expected a finite number of seconds".into()),
    }
}

/// Reads per second, `continuous` as 0.
fn readers_hz(text: &str) -> Result<u32, String> {
    if text == "continuous" {
        return Ok(0);
    }
    match text.parse::<u32>() {
        Ok(hz) if (1..=MAX_READERS_HZ).contains(&hz) => Ok(hz),
        _ => Err(format!(
            "expected reads per second 1..={MAX_READERS_HZ}, or `continuous`"
        )),
    }
}

/// What to measure and where to write it: the binary's command line, parsed.
///
/// ```
/// use livecount_picker::{Mode, Options};
///
/// let opts = Options::parse(["--full", "--threads", "64"].map(String::from))?;
/// assert_eq!((opts.mode, opts.threads, opts.reps), (Mode::Full, 64, 5));
/// assert!(Options::parse(["--threads", "0"].map(String::from)).is_err());
/// # Ok::<(), clap::Error>(())
/// ```
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
    /// Output directory (`None`: `target/livecount-picker/<label>`, or `results/<label>`
    /// with `update_results`).
    pub out: Option<PathBuf>,
    /// Write the committed reference under `results/`.
    pub update_results: bool,
    /// Machine label override.
    pub label: Option<String>,
    /// Old results to compare with.
    pub compare: Option<PathBuf>,
    /// New results to compare instead of measuring.
    pub against: Option<PathBuf>,
    /// Show a progress bar.
    pub progress: bool,
    /// Measure Java's counters beside `Striped` when a JDK is present.
    pub java: bool,
    /// Measure only `--anchors`' side-by-side table (`Striped` beside Java's `LongAdder`):
    /// for livecount's maintainers.
    pub anchors: bool,
}

impl Options {
    /// Parses arguments (without the program name). `--help` and every bad value are
    /// [`clap::Error`]s (print with `exit()`: help exits 0, a usage error 2 naming its flag).
    pub fn parse(args: impl IntoIterator<Item = String>) -> Result<Options, clap::Error> {
        let argv = std::iter::once("livecount-picker".to_owned()).chain(args);
        let cli = Cli::try_parse_from(argv)?;
        let mode = match (cli.quick, cli.full) {
            (true, _) => Mode::Quick,
            (_, true) => Mode::Full,
            _ => Mode::Default,
        };
        let default_budget = match mode {
            Mode::Quick => 20.0,
            Mode::Default => 60.0,
            Mode::Full => 300.0,
        };
        let default_reps = if mode == Mode::Full { 5 } else { 3 };
        Ok(Options {
            mode,
            budget: Duration::from_secs_f64(cli.budget.unwrap_or(default_budget)),
            reps: cli.reps.map_or(default_reps, usize::from),
            threads: cli.threads.map_or_else(machine::cores, usize::from),
            readers_hz: cli.readers_hz,
            max_bytes: cli.max_bytes,
            out: cli.out,
            update_results: cli.update_results,
            label: cli.label,
            compare: cli.compare,
            against: cli.against,
            progress: cli.progress,
            java: cli.java,
            anchors: cli.anchors,
        })
    }

    fn reader(&self) -> Reader {
        if self.readers_hz == 0 {
            Reader::Continuous
        } else {
            Reader::Hz(self.readers_hz)
        }
    }
}

/// Runs the picker with `opts` as its binary does: measures, writes the results directory and
/// returns what to print (or, with `compare` and `against`, only compares two files); an error
/// message if a file cannot be read or written, or, before measuring, if the results would go
/// into the checkout's `results/` from a dirty tree (`livecount_support::provenance::commit_for`).
///
/// ```
/// # let json = concat!(env!("CARGO_MANIFEST_DIR"), "/../../results/amd-epyc-2c/results.json");
/// use livecount_picker::Options;
///
/// // A run compared with itself: every ratio is 1.
/// let opts = Options::parse(["--compare", json, "--against", json].map(String::from)).unwrap();
/// let table = livecount_picker::run(&opts)?;
/// assert!(table.contains("threads/PerThread/1/pairs_per_s") && table.contains("| 1.00 |"));
/// # Ok::<(), String>(())
/// ```
pub fn run(opts: &Options) -> Result<String, String> {
    if let (Some(old), Some(new)) = (&opts.compare, &opts.against) {
        let (old, new) = (load(old)?, load(new)?);
        return Ok(report::compare_table(&report::compare(
            &old.figures,
            &new.figures,
        )));
    }
    let label = opts
        .label
        .clone()
        .unwrap_or_else(|| provenance::label(&provenance::cpu_model(), machine::cores()));
    let dir = opts
        .out
        .clone()
        .unwrap_or_else(|| default_out(&label, opts.update_results));
    // Before measuring: committed results come from a clean commit, the one stamped on them.
    let commit = provenance::commit_for(&dir).map_err(|e| e.to_string())?;
    if opts.anchors {
        let machine = Machine {
            label,
            commit,
            ..Machine::detect()
        };
        return crate::anchors::main_with(opts.budget, opts.reps, &machine, &dir);
    }
    let old = opts.compare.as_deref().map(load).transpose()?;
    let mut results = measure(opts);
    results.machine.commit = commit;
    write(&results, &dir)?;
    let dir = std::fs::canonicalize(&dir).unwrap_or(dir);
    let mut out = format!(
        "{}\n{}\n{}\n{}\n\n{}:\n{}\n{}\nWrote {}\n",
        report::table(&results.ranking, results.params.threads),
        report::per_cpu_note(&results.machine),
        report::java_note(&results.machine),
        results.recommendation,
        report::TARGETS_HEADING,
        report::TARGETS_NOTE,
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

/// `target/livecount-picker/<label>` in the workspace, so running the picker leaves the
/// checkout clean; `results/<label>` (the committed reference) when asked to update it.
fn default_out(label: &str, update_results: bool) -> PathBuf {
    let workspace = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    if update_results {
        workspace.join("results").join(label)
    } else {
        workspace
            .join("target")
            .join("livecount-picker")
            .join(label)
    }
}

/// Reads a `results.json`.
pub(crate) fn load(path: &Path) -> Result<Results, String> {
    let text = std::fs::read_to_string(path)
        .map_err(|e| format!("cannot read {}: {e}", path.display()))?;
    serde_json::from_str(&text)
        .map_err(|e| format!("{} is not a livecount results.json: {e}", path.display()))
}

/// Writes `results.json`, `REPORT.md`, the SVG plots and, beside them for livecount's
/// maintainers, `TARGETS.md` into `dir`.
pub(crate) fn write(results: &Results, dir: &Path) -> Result<(), String> {
    let err = |e: &dyn std::fmt::Display| format!("cannot write to {}: {e}", dir.display());
    std::fs::create_dir_all(dir).map_err(|e| err(&e))?;
    let json = serde_json::to_string_pretty(results).map_err(|e| err(&e))?;
    std::fs::write(dir.join("results.json"), json + "\n").map_err(|e| err(&e))?;
    std::fs::write(dir.join("REPORT.md"), report::markdown(results)).map_err(|e| err(&e))?;
    let targets = report::targets_markdown(results);
    std::fs::write(dir.join("TARGETS.md"), targets).map_err(|e| err(&e))?;
    crate::plot::write(results, dir).map_err(|e| err(&e))
}

/// Runs the sweep `opts` describe (within its budget) and concludes: the ranked table, the
/// recommendation and every figure, without writing or printing anything (see the crate
/// docs' example).
pub fn measure(opts: &Options) -> Results {
    let cores = machine::cores();
    let plan = Plan::new(opts.mode, cores, opts.threads, opts.reader());
    let mut contenders = contender::all();
    let (java, java_note) = java_probe::start_or_say_why(opts.java);
    // Bare and tracked, for each counter; plus the slab floor on threads.
    let lifecycle_runs = 2 * plan::lifecycle_counters() * plan.points(Workload::Lifecycle).len()
        + plan.lifecycle.len();
    // Lifecycle is counted above; memory and read-at-threads have no timed points.
    let timed_points: usize = Workload::ALL
        .into_iter()
        .filter(|&w| w != Workload::Lifecycle)
        .map(|w| plan.points(w).len() * contenders.len())
        .sum::<usize>()
        + lifecycle_runs
        + java
            .as_ref()
            .map_or(0, |_| JavaCounter::ALL.len() * plan.threads.len());
    // Memory and read-at-threads: one point per thread count and contender.
    let counted_points = (plan.memory.len() + plan.read_threads.len()) * contenders.len();
    let pb = if opts.progress {
        ProgressBar::new((timed_points + counted_points) as u64)
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
        remaining: timed_points + counted_points,
        reps: opts.reps,
        figures: Vec::new(),
        pb: &pb,
        workload: Workload::Threads,
        java,
    };
    for w in Workload::ALL {
        s.workload = w;
        if w == Workload::Lifecycle {
            plan::for_each_lifecycle(&mut s);
        } else {
            contender::for_each(&mut s);
        }
        if w == Workload::Threads {
            s.java_threads();
        }
    }
    let java_measured = s
        .figures
        .iter()
        .any(|f| f.contender == java_probe::LONG_ADDER);
    if java_measured {
        contenders.extend(JavaCounter::ALL.map(JavaCounter::info));
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
    machine.java = Some(java_note);
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

/// Ranks, recommends and judges livecount's own targets: shared with the criterion suite.
pub fn conclude(
    source: &str,
    machine: Machine,
    params: Params,
    command: String,
    contenders: Vec<contender::Info>,
    figures: Vec<Figure>,
) -> Results {
    let ranking = rank::rank(&figures, &contenders, &params);
    let per_cpu = PerCpuCase::detect(&figures, &ranking, &params, machine.cores);
    let recommendation = recommend(&ranking, &params, per_cpu.as_ref());
    let targets = targets(&figures, &contenders);
    Results {
        source: source.into(),
        machine,
        params,
        command,
        contenders,
        workloads: Workload::ALL.to_vec(),
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
    workload: Workload,
    /// The Java anchors' JVM, while it answers.
    java: Option<JavaProbe>,
}

impl Sweeper<'_> {
    /// This point's share of the budget left.
    fn share(&self) -> Duration {
        self.deadline.saturating_duration_since(Instant::now()) / self.remaining.max(1) as u32
    }

    /// [`plan::samples`] of `point` for `C`, in this point's share of the budget.
    fn samples<C: Contender>(&self, point: Point) -> Vec<Sample> {
        let run =
            |units| Ok::<_, std::convert::Infallible>(plan::run::<C>(&self.ctx, point, units));
        let Ok(samples) = plan::samples(self.share(), self.reps, run);
        samples
    }

    fn record(&mut self, name: &str, point: Point, samples: &[Sample]) {
        let (w, p) = (point.workload(), point.param());
        let fig = |metric: Metric, f: &dyn Fn(&Sample) -> Option<f64>| {
            let v: Vec<f64> = samples.iter().filter_map(f).collect();
            (!v.is_empty()).then(|| Figure::from_samples(w, name, &p, metric, v))
        };
        let figs = [
            fig(Metric::PairsPerS, &|s| Some(s.throughput())),
            fig(Metric::ReadNs, &|s| {
                s.read.filter(|r| r.reads > 0).map(|r| r.ns_per_read)
            }),
            fig(Metric::MinRead, &|s| {
                s.read.filter(|r| r.reads > 0).map(|r| r.min as f64)
            }),
            fig(Metric::MaxRead, &|s| {
                s.read.filter(|r| r.reads > 0).map(|r| r.max as f64)
            }),
            fig(Metric::TrueMax, &|s| s.read.map(|r| r.true_max as f64)),
            fig(Metric::Reads, &|s| s.read.map(|r| r.reads as f64)),
        ];
        self.figures.extend(figs.into_iter().flatten());
        self.done_point();
    }

    fn slowdown(&mut self, name: &str) {
        let rw = Workload::ReadUnderWrite;
        let base = find(&self.figures, rw, name, Reader::None, Metric::PairsPerS).map(|f| f.median);
        let Some(base) = base else { return };
        let slow: Vec<Figure> = self
            .figures
            .iter()
            .filter(|f| f.is(rw, name, Metric::PairsPerS) && f.param != Reader::None.label())
            .map(|f| {
                let pct = |v: f64| 100.0 * (1.0 - v / base);
                let mut s: Vec<f64> = f.samples.iter().map(|v| pct(*v)).collect();
                s.sort_by(f64::total_cmp);
                Figure::from_samples(rw, name, &f.param, Metric::WriterSlowdownPct, s)
            })
            .collect();
        self.figures.extend(slow);
    }
}

impl Sweeper<'_> {
    /// Java's counters on every threads point, sized and repeated as livecount's are. A probe
    /// that stops answering is dropped with a message, and the sweep goes on without it.
    fn java_threads(&mut self) {
        let Some(mut probe) = self.java.take() else {
            return;
        };
        'points: for point in self.plan.points(Workload::Threads) {
            let Point::Threads(t) = point else { continue };
            for counter in JavaCounter::ALL {
                self.pb
                    .set_message(format!("threads {} {t}", counter.name()));
                match plan::samples(self.share(), self.reps, |u| probe.run(counter, t, u)) {
                    Ok(samples) => self.record(counter.name(), point, &samples),
                    Err(e) => {
                        self.pb.println(format!("Java anchors stopped: {e}"));
                        break 'points;
                    }
                }
            }
        }
        self.java = Some(probe);
    }

    fn done_point(&mut self) {
        self.remaining = self.remaining.saturating_sub(1);
        self.pb.inc(1);
    }
}

impl Sweeper<'_> {
    /// The memory workload: `reps` measurements at each thread count, untimed.
    fn memory<C: Contender>(&mut self) {
        for &t in &self.plan.memory.clone() {
            self.pb.set_message(format!("memory {} {t}", C::NAME));
            let v: Vec<f64> = (0..self.reps)
                .filter_map(|_| crate::workload::memory::<C>(t))
                .map(|b| b as f64)
                .collect();
            if !v.is_empty() {
                let p = t.to_string();
                let f = Figure::from_samples(Workload::Memory, C::NAME, &p, Metric::Bytes, v);
                self.figures.push(f);
            }
            self.done_point();
        }
    }

    /// The read-at-threads workload: the threads are spawned once per point, and the point's
    /// share of the budget is split between a pilot and `reps` timed windows of reads.
    fn read_at_threads<C: Contender>(&mut self) {
        for &t in &self.plan.read_threads.clone() {
            self.pb
                .set_message(format!("{} {} {t}", Workload::ReadAtThreads, C::NAME));
            let window = self.share() / (self.reps as u32 + 1);
            let c = C::new(t);
            match crate::workload::read_at_threads(&c, t, window, self.reps) {
                Ok(ns) => {
                    let p = t.to_string();
                    let rat = Workload::ReadAtThreads;
                    let f = Figure::from_samples(rat, C::NAME, &p, Metric::ReadNs, ns);
                    self.figures.push(f);
                }
                Err(e) => self.pb.println(format!(
                    "{} {} at {t} threads skipped: {e}",
                    Workload::ReadAtThreads,
                    C::NAME
                )),
            }
            self.done_point();
        }
    }
}

impl Visit for Sweeper<'_> {
    fn visit<C: Contender>(&mut self) {
        match self.workload {
            Workload::Memory => return self.memory::<C>(),
            Workload::ReadAtThreads => return self.read_at_threads::<C>(),
            _ => {}
        }
        for point in self.plan.points(self.workload) {
            self.pb
                .set_message(format!("{} {} {}", self.workload, C::NAME, point.param()));
            let samples = self.samples::<C>(point);
            self.record(C::NAME, point, &samples);
        }
        if self.workload == Workload::ReadUnderWrite {
            self.slowdown(C::NAME);
        }
    }
}

impl VisitLifecycle for Sweeper<'_> {
    fn visit<C: LiveName>(&mut self) {
        for point in self.plan.points(Workload::Lifecycle) {
            self.pb
                .set_message(format!("lifecycle {} {}", C::NAME, point.param()));
            let bare = self.samples::<Live<C>>(point);
            self.record(C::NAME, point, &bare);
            let tracked = self.samples::<Tracked<C>>(point);
            self.record(C::SESSION_NAME, point, &tracked);
            if C::NAME == "PerThread" && matches!(point, Point::Lifecycle(_)) {
                let floor = self.samples::<SlabFloor>(point);
                self.record(SlabFloor::NAME, point, &floor);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(s: &str) -> Result<Options, String> {
        Options::parse(s.split_whitespace().map(str::to_owned)).map_err(|e| e.to_string())
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
        let full = parse("--full --bench").unwrap();
        assert_eq!((full.reps, full.budget), (5, Duration::from_secs(300)));
        let o = parse("").unwrap();
        assert_eq!((o.mode, o.reps, o.readers_hz), (Mode::Default, 3, 10));
        assert_eq!(
            (o.budget, o.threads),
            (Duration::from_secs(60), machine::cores())
        );
        assert!(o.progress && !parse("--no-progress").unwrap().progress);
        assert!(!o.update_results && parse("--update-results").unwrap().update_results);
        assert!(
            parse("--update-results --out x").is_err(),
            "two destinations"
        );
        let label = "some-machine";
        assert!(default_out(label, false).ends_with("target/livecount-picker/some-machine"));
        assert!(default_out(label, true).ends_with("results/some-machine"));
        assert_eq!(
            parse("--threads 2 --threads 3").unwrap().threads,
            3,
            "the last one wins"
        );
        for (bad, says) in [
            ("--threads", "'--threads "),
            ("--threads zero", "'--threads "),
            ("--threads 0", "1..=4096"),
            ("--threads 4097", "'--threads "),
            ("--threads -1", "'--threads "),
            ("--quick --full", "cannot be used with"),
            ("--reps 2", "'--reps "),
            ("--reps 1e9", "'--reps "),
            ("--budget -1", "'--budget "),
            ("--budget 0", "'--budget "),
            ("--budget 1e19", "'--budget "),
            ("--budget NaN", "'--budget "),
            ("--readers-hz fast", "continuous"),
            ("--readers-hz 0", "'--readers-hz "),
            ("--readers-hz 1e7", "'--readers-hz "),
            ("--max-bytes-per-counter 0", "'--max-bytes-per-counter "),
            ("--frobnicate", "'--frobnicate'"),
            ("stray", "'stray'"),
            ("--against x.json", "--compare"),
        ] {
            let err = parse(bad).unwrap_err();
            assert!(err.contains(says), "{bad}: {err}");
        }
    }

    /// `--update-results` (or `--out` into `results/`) from a dirty tree is refused before
    /// anything is measured, naming the changed file; a scratch repository stands in for the
    /// checkout.
    #[test]
    fn a_dirty_tree_is_refused_before_measuring() {
        let repo =
            std::env::temp_dir().join(format!("livecount-picker-dirty-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&repo);
        std::fs::create_dir_all(repo.join("results")).unwrap();
        let git = |args: &[&str]| {
            let out = std::process::Command::new("git")
                .args(["-c", "user.name=t", "-c", "user.email=t@t"])
                .args(["-c", "commit.gpgsign=false"])
                .args(args)
                .current_dir(&repo)
                .output()
                .unwrap();
            assert!(out.status.success(), "git {args:?}: {out:?}");
        };
        git(&["init", "-q"]);
        std::fs::write(repo.join("f"), "1").unwrap();
        git(&["add", "f"]);
        git(&["commit", "-qm", "one"]);
        std::fs::write(repo.join("f"), "2").unwrap();
        for mode in ["--quick", "--anchors"] {
            let out = repo.join("results/machine");
            let opts = parse(&format!("{mode} --out {}", out.display())).unwrap();
            let started = Instant::now();
            let err = run(&opts).unwrap_err();
            assert!(
                err.contains("refusing to write") && err.contains(" M f"),
                "{err}"
            );
            assert!(started.elapsed() < Duration::from_secs(5), "refused first");
            assert!(!out.exists());
        }
        let _ = std::fs::remove_dir_all(&repo);
    }

    #[test]
    fn help_is_help() {
        let e = Options::parse(["--help".to_owned()]).unwrap_err();
        assert_eq!(
            (e.kind(), e.exit_code()),
            (clap::error::ErrorKind::DisplayHelp, 0)
        );
        let e = Options::parse(["--threads".to_owned(), "0".to_owned()]).unwrap_err();
        assert_eq!(e.exit_code(), 2, "a usage error");
    }
}
