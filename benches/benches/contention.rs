//! The contention suite: one criterion group per workload, one
//! `BenchmarkId::new(contender, parameter)` per point, every contender side by side. It ends
//! with the picker's ranked table and recommendation, computed from criterion's own median
//! estimates (read back from `target/criterion/**/new/estimates.json`).
//!
//!     cargo bench                 # the careful run (about 5 minutes on 2 cores)
//!     cargo bench -- --quick      # criterion's quick mode on the picker's quick plan
//!     cargo bench -- threads/     # one workload (the summary covers what ran)
//!
//! Describe your service with environment variables (criterion owns the flags):
//! `LIVECOUNT_THREADS` (default: cores), `LIVECOUNT_READERS_HZ` (default 10, 0 = continuous),
//! `LIVECOUNT_MAX_BYTES`.

use std::collections::BTreeMap;
use std::sync::Mutex;
use std::time::Duration;

use criterion::{BenchmarkGroup, BenchmarkId, Criterion, Throughput, measurement::WallTime};
// The picker's internals, shared so both front ends measure the same code; not its API.
use livecount_picker::internals::contender::{self, Contender, Live, LiveName, Tracked, Visit};
use livecount_picker::internals::plan::{self, Ctx, Plan, Point, VisitLifecycle};
use livecount_picker::internals::workload::{self, ReadStats, Reader};
use livecount_picker::internals::{self as picker, estimates, report};
use livecount_picker::results::{Figure, Machine, Metric, Params, Workload};
use livecount_picker::{CountingAlloc, Mode};

// Counts heap bytes for the memory figures only; off (one Relaxed load) otherwise.
#[global_allocator]
static ALLOC: CountingAlloc = CountingAlloc;

/// Benchmarks that ran in this process: (group, function, value).
static RAN: Mutex<Vec<(String, String, String)>> = Mutex::new(Vec::new());
/// What readers saw in every read-under-write sample, by (contender, param).
static READS: Mutex<BTreeMap<(String, String), Vec<ReadStats>>> = Mutex::new(BTreeMap::new());

struct Suite<'a, 'g> {
    group: &'a mut BenchmarkGroup<'g, WallTime>,
    ctx: &'a Ctx,
    points: Vec<Point>,
}

impl Suite<'_, '_> {
    fn bench<C: Contender>(&mut self, name: &str, point: Point) {
        let (ctx, param) = (self.ctx, point.param());
        self.group
            .throughput(Throughput::Elements(point.pairs_per_unit(ctx.writers)));
        self.group
            .bench_function(BenchmarkId::new(name, &param), |b| {
                RAN.lock().unwrap().push((
                    point.workload().name().into(),
                    name.into(),
                    param.clone(),
                ));
                b.iter_custom(|iters| {
                    let s = plan::run::<C>(ctx, point, iters);
                    if let Some(r) = s.read.filter(|r| r.reads > 0) {
                        let key = (name.to_owned(), param.clone());
                        READS.lock().unwrap().entry(key).or_default().push(r);
                    }
                    s.elapsed
                })
            });
    }
}

impl Visit for Suite<'_, '_> {
    fn visit<C: Contender>(&mut self) {
        for point in self.points.clone() {
            self.bench::<C>(C::NAME, point);
        }
    }
}

impl VisitLifecycle for Suite<'_, '_> {
    fn visit<C: LiveName>(&mut self) {
        for point in self.points.clone() {
            self.bench::<Live<C>>(C::NAME, point);
            self.bench::<Tracked<C>>(C::SESSION_NAME, point);
        }
    }
}

fn env<T: std::str::FromStr>(name: &str) -> Option<T> {
    let v = std::env::var(name).ok()?;
    match v.parse() {
        Ok(t) => Some(t),
        Err(_) => {
            eprintln!("error: {name}={v:?} is not a number");
            std::process::exit(2);
        }
    }
}

fn main() {
    let cores = picker::cores();
    let quick = std::env::args().any(|a| a == "--quick");
    let threads = env("LIVECOUNT_THREADS").unwrap_or(cores).max(1);
    let readers_hz: u32 = env("LIVECOUNT_READERS_HZ").unwrap_or(10);
    let reader = if readers_hz == 0 {
        Reader::Continuous
    } else {
        Reader::Hz(readers_hz)
    };
    let mode = if quick { Mode::Quick } else { Mode::Default };
    let plan = Plan::new(mode, cores, threads, reader);
    let ctx = Ctx::new(cores, plan.writers);

    let mut c = Criterion::default()
        .warm_up_time(Duration::from_millis(300))
        .measurement_time(Duration::from_secs(1))
        .sample_size(10)
        .configure_from_args();
    // Memory and read-at-threads are measured by the summary, outside criterion: one is not
    // timed, the other times reads with a thousand threads parked, set up once per contender.
    for w in Workload::ALL
        .into_iter()
        .filter(|w| !matches!(w, Workload::Memory | Workload::ReadAtThreads))
    {
        let mut group = c.benchmark_group(w.name());
        let mut suite = Suite {
            group: &mut group,
            ctx: &ctx,
            points: plan.points(w),
        };
        if w == Workload::Lifecycle {
            plan::for_each_lifecycle(&mut suite);
        } else {
            contender::for_each(&mut suite);
        }
        group.finish();
    }
    c.final_summary();
    summary(
        &plan,
        Params {
            mode,
            threads,
            readers_hz,
            max_bytes_per_counter: env("LIVECOUNT_MAX_BYTES"),
            budget_secs: 0.0,
            reps: 0,
            rw_writers: plan.writers,
        },
    );
}

/// Reads criterion's estimates for what ran, adds the readers' extremes and the memory
/// figures, and prints the picker's table and recommendation.
fn summary(plan: &Plan, params: Params) {
    let exe = std::env::current_exe().unwrap_or_default();
    let dir = estimates::criterion_dir(&exe);
    let ran = RAN.lock().unwrap().clone();
    let mut figures = estimates::figures(&dir, &ran);
    if figures.is_empty() {
        println!(
            "\nNo criterion estimates for this run under {} (--test or --list?): no ranking.",
            dir.display()
        );
        return;
    }
    for ((name, param), reads) in READS.lock().unwrap().iter() {
        let fig = |metric: Metric, f: fn(&ReadStats) -> f64| {
            Figure::from_samples(
                Workload::ReadUnderWrite,
                name,
                param,
                metric,
                reads.iter().map(f).collect(),
            )
        };
        figures.push(fig(Metric::ReadNs, |r| r.ns_per_read));
        figures.push(fig(Metric::MinRead, |r| r.min as f64));
        figures.push(fig(Metric::MaxRead, |r| r.max as f64));
        figures.push(fig(Metric::TrueMax, |r| r.true_max as f64));
    }
    struct Memory<'a>(&'a [usize], Vec<Figure>);
    impl Visit for Memory<'_> {
        fn visit<C: Contender>(&mut self) {
            for &t in self.0 {
                let v: Vec<f64> = (0..3)
                    .filter_map(|_| workload::memory::<C>(t))
                    .map(|b| b as f64)
                    .collect();
                self.1.push(Figure::from_samples(
                    Workload::Memory,
                    C::NAME,
                    &t.to_string(),
                    Metric::Bytes,
                    v,
                ));
            }
        }
    }
    let mut memory = Memory(&plan.memory, Vec::new());
    contender::for_each(&mut memory);
    figures.extend(memory.1);
    struct Reads<'a>(&'a [usize], Vec<Figure>);
    impl Visit for Reads<'_> {
        fn visit<C: Contender>(&mut self) {
            for &t in self.0 {
                let window = Duration::from_millis(50);
                match workload::read_at_threads(&C::new(t), t, window, 3) {
                    Ok(ns) => self.1.push(Figure::from_samples(
                        Workload::ReadAtThreads,
                        C::NAME,
                        &t.to_string(),
                        Metric::ReadNs,
                        ns,
                    )),
                    Err(e) => eprintln!(
                        "{} {} at {t} skipped: {e}",
                        Workload::ReadAtThreads,
                        C::NAME
                    ),
                }
            }
        }
    }
    let mut reads = Reads(&plan.read_threads, Vec::new());
    contender::for_each(&mut reads);
    figures.extend(reads.1);
    let command = format!(
        "LIVECOUNT_THREADS={} LIVECOUNT_READERS_HZ={} cargo bench{}",
        params.threads,
        params.readers_hz,
        if params.mode == Mode::Quick {
            " -- --quick"
        } else {
            ""
        }
    );
    let r = picker::conclude(
        "criterion",
        Machine::detect(),
        params,
        command,
        contender::all(),
        figures,
    );
    println!(
        "\n=== Ranking from criterion's median estimates ({} threads) ===\n\n{}\n{}\n{}\n\n{}:\n{}\n{}",
        r.params.threads,
        report::table(&r.ranking, r.params.threads),
        report::per_cpu_note(&r.machine),
        r.recommendation,
        report::TARGETS_HEADING,
        report::TARGETS_NOTE,
        report::targets(&r)
    );
}
