//! `Plan`: which points of which workloads a run measures, and [`run`], which measures one
//! point for one contender. The criterion suite and the picker walk the same plan.

// Items here are public only through the hidden `internals` module (the criterion suite's
// access): their links to this crate's private items are for `--document-private-items`.
#![allow(rustdoc::private_intra_doc_links)]

use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::contender::{Contender, LiveName};
use crate::figure::Workload;
use crate::workload::{self, BATCH, Reader, Sample};

/// Pairs each churn thread does before it exits.
pub(crate) const CHURN_PAIRS: u64 = 1_000;

/// Thread counts of the memory workload in every sweep (the user's is added).
pub(crate) const MEMORY_THREADS: [usize; 4] = [1, 2, 16, 256];

/// Live threads of the read-at-threads workload in every sweep: a thread-per-connection
/// service or a large blocking pool, where a counter with a cell per thread walks 1 000 cells.
pub(crate) const READ_THREADS: usize = 1_000;

/// Threads far past any core count this runs on: the default sweep measures the threads
/// workload here too, where `PerCpu` (one cell per CPU) is meant to beat `PerThread` (one per
/// thread).
pub(crate) const MANY_THREADS: usize = 64;

/// Threads per core from which a service counts as having many more threads than cores: the
/// plan then also measures reads at its thread count, and the picker recommends `PerCpu`
/// (see [`crate::per_cpu_case`] for why 4).
pub(crate) const MANY_THREADS_PER_CORE: usize = 4;

/// How much to sweep.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub enum Mode {
    /// Fewer points (the user's thread count, 1, 2 and 2×cores), shorter budget.
    Quick,
    /// The default sweep.
    Default,
    /// Every point, more repetitions, longer budget.
    Full,
}

/// One point of one workload.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Point {
    /// [`workload::threads`] with this many threads.
    Threads(usize),
    /// [`workload::handoff`] with this many producer/consumer pairs.
    Handoff(usize),
    /// [`workload::tasks`] with this many tasks.
    Tasks(usize),
    /// [`workload::read_under_write`] with this reader.
    ReadUnderWrite(Reader),
    /// The threads workload on a bare counter or a session tracker, this many threads.
    Lifecycle(usize),
    /// The tasks workload on a bare counter or a session tracker, this many tasks.
    LifecycleTasks(usize),
    /// The handoff workload (ends on another thread) on a bare counter or a session
    /// tracker, this many producer/consumer pairs.
    LifecycleHandoff(usize),
    /// [`workload::churn`] with this many concurrent threads.
    Churn(usize),
}

impl Point {
    /// The workload (its name is the criterion group's).
    pub fn workload(self) -> Workload {
        match self {
            Point::Threads(_) => Workload::Threads,
            Point::Handoff(_) => Workload::Handoff,
            Point::Tasks(_) => Workload::Tasks,
            Point::ReadUnderWrite(_) => Workload::ReadUnderWrite,
            Point::Lifecycle(_) | Point::LifecycleTasks(_) | Point::LifecycleHandoff(_) => {
                Workload::Lifecycle
            }
            Point::Churn(_) => Workload::Churn,
        }
    }

    /// The parameter (criterion value string).
    pub fn param(self) -> String {
        match self {
            Point::Threads(n) | Point::Handoff(n) | Point::Tasks(n) => n.to_string(),
            Point::Lifecycle(n) | Point::Churn(n) => n.to_string(),
            Point::LifecycleTasks(n) => format!("{n} tasks"),
            Point::LifecycleHandoff(n) => format!("handoff {n}"),
            Point::ReadUnderWrite(r) => r.label(),
        }
    }

    /// Start+end pairs one unit of work (one criterion iteration) does.
    pub fn pairs_per_unit(self, writers: usize) -> u64 {
        match self {
            Point::Threads(n) | Point::Lifecycle(n) => n as u64,
            Point::Handoff(n) | Point::LifecycleHandoff(n) => (n * BATCH) as u64,
            Point::Tasks(n) | Point::LifecycleTasks(n) => n as u64,
            Point::ReadUnderWrite(_) => (writers * BATCH) as u64,
            Point::Churn(n) => n as u64 * CHURN_PAIRS,
        }
    }

    /// How many writers a contender must give cells to (the ceiling's cell count).
    pub(crate) fn writers(self, writers: usize) -> usize {
        match self {
            Point::Threads(n) | Point::Lifecycle(n) | Point::Churn(n) => n,
            Point::Handoff(n) | Point::LifecycleHandoff(n) => 2 * n,
            Point::Tasks(n) | Point::LifecycleTasks(n) => n,
            Point::ReadUnderWrite(_) => writers,
        }
    }
}

/// What a run sweeps.
#[derive(Clone, Debug, PartialEq)]
pub struct Plan {
    /// The thread count the user described (`--threads`); always in `threads`.
    pub user_threads: usize,
    /// The reader the user described (`--readers-hz`); always in `readers`.
    pub user_reader: Reader,
    /// threads workload.
    pub threads: Vec<usize>,
    /// handoff workload: producer/consumer pairs.
    pub handoff: Vec<usize>,
    /// tasks workload: task counts.
    pub tasks: Vec<usize>,
    /// read-under-write: readers (always with `Reader::None` first, the baseline).
    pub readers: Vec<Reader>,
    /// read-under-write: writer threads.
    pub writers: usize,
    /// lifecycle workload: thread counts.
    pub lifecycle: Vec<usize>,
    /// churn workload: concurrent thread counts.
    pub churn: Vec<usize>,
    /// memory workload: thread counts.
    pub memory: Vec<usize>,
    /// read-at-threads workload: live thread counts.
    pub read_threads: Vec<usize>,
}

impl Plan {
    /// The plan for `mode` on a machine with `cores` cores, for a service with `user_threads`
    /// threads read by `user_reader`.
    pub fn new(mode: Mode, cores: usize, user_threads: usize, user_reader: Reader) -> Plan {
        let mut threads: Vec<usize> = match mode {
            Mode::Quick => vec![1, 2, 2 * cores],
            Mode::Default => std::iter::successors(Some(1), |t| Some(t * 2))
                .take_while(|&t| t <= 2 * cores)
                .chain([4 * cores, MANY_THREADS])
                .collect(),
            Mode::Full => std::iter::successors(Some(1), |t| Some(t * 2))
                .take_while(|&t| t <= 4 * cores)
                .chain([2 * cores, 4 * cores, MANY_THREADS])
                .collect(),
        };
        threads.push(user_threads);
        let mut readers = match mode {
            Mode::Quick => vec![Reader::None, Reader::Continuous],
            _ => vec![
                Reader::None,
                Reader::Hz(1),
                Reader::Hz(1000),
                Reader::Continuous,
            ],
        };
        readers.push(user_reader);
        let mut read_threads = vec![READ_THREADS];
        if mode == Mode::Full {
            read_threads.push(256);
        }
        if user_threads >= MANY_THREADS_PER_CORE * cores {
            read_threads.push(user_threads);
        }
        Plan {
            user_threads,
            user_reader,
            threads: sorted(threads),
            handoff: sorted(if mode == Mode::Quick {
                vec![1]
            } else {
                vec![1, cores]
            }),
            tasks: if mode == Mode::Quick {
                vec![100, 10_000]
            } else {
                vec![100, 10_000, 100_000]
            },
            readers: dedup(readers),
            writers: cores.max(2),
            lifecycle: sorted(vec![1, 2, user_threads.min(2 * cores)]),
            churn: sorted(vec![cores.max(2)]),
            memory: sorted(MEMORY_THREADS.into_iter().chain([user_threads]).collect()),
            read_threads: sorted(read_threads),
        }
    }

    /// Every timed point of `workload` (only livecount counters run the lifecycle points:
    /// the session tracker is built on them); none for memory and read-at-threads, which
    /// are not timed per unit of work.
    pub fn points(&self, workload: Workload) -> Vec<Point> {
        match workload {
            Workload::Threads => self.threads.iter().map(|&t| Point::Threads(t)).collect(),
            Workload::Handoff => self.handoff.iter().map(|&t| Point::Handoff(t)).collect(),
            Workload::Tasks => self.tasks.iter().map(|&t| Point::Tasks(t)).collect(),
            Workload::ReadUnderWrite => self
                .readers
                .iter()
                .map(|&r| Point::ReadUnderWrite(r))
                .collect(),
            Workload::Lifecycle => self
                .lifecycle
                .iter()
                .map(|&t| Point::Lifecycle(t))
                .chain(self.tasks.iter().map(|&k| Point::LifecycleTasks(k)))
                .chain(self.handoff.iter().map(|&p| Point::LifecycleHandoff(p)))
                .collect(),
            Workload::Churn => self.churn.iter().map(|&t| Point::Churn(t)).collect(),
            Workload::ReadAtThreads | Workload::Memory => Vec::new(),
        }
    }
}

fn sorted(mut v: Vec<usize>) -> Vec<usize> {
    v.sort_unstable();
    v.dedup();
    v
}

fn dedup(v: Vec<Reader>) -> Vec<Reader> {
    let mut out = Vec::new();
    for r in v {
        if !out.contains(&r) {
            out.push(r);
        }
    }
    out
}

/// Shared state for runs: the tokio runtime of the tasks workload.
#[derive(Debug)]
pub struct Ctx {
    /// Multi-threaded, one worker per core.
    pub rt: tokio::runtime::Runtime,
    /// read-under-write writer count.
    pub writers: usize,
}

impl Ctx {
    /// A context with a runtime of `cores` workers.
    pub fn new(cores: usize, writers: usize) -> Ctx {
        let rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(cores)
            .build()
            .expect("a tokio runtime");
        Ctx { rt, writers }
    }
}

/// Measures `units` units of `point` on a fresh `C` (see [`Point::pairs_per_unit`]).
pub fn run<C: Contender>(ctx: &Ctx, point: Point, units: u64) -> Sample {
    let units = units.max(1);
    let c = Arc::new(C::new(point.writers(ctx.writers)));
    let sample = match point {
        Point::Threads(t) | Point::Lifecycle(t) => workload::threads(&*c, t, units),
        Point::Handoff(p) | Point::LifecycleHandoff(p) => {
            workload::handoff(&*c, p, units * BATCH as u64)
        }
        Point::Tasks(k) | Point::LifecycleTasks(k) => workload::tasks(&ctx.rt, &c, k, units),
        Point::ReadUnderWrite(r) => workload::read_under_write(&*c, ctx.writers, units, r),
        Point::Churn(t) => workload::churn(&*c, t, units, CHURN_PAIRS),
    };
    // Every session of the sample has ended: a contender still counting some lost or
    // doubled an update, and no figure of it means anything.
    let left = c.read();
    assert_eq!(
        left,
        0,
        "{} reads {left} after every session of {point:?} ended: a lost or doubled update",
        C::NAME
    );
    sample
}

/// `reps` samples of one point whose runs fill `share` between them: [`size`] the runs to
/// `share / (reps + 1)` each (the pilot takes the extra share), then measure `reps` of them.
/// `run(units)` measures one run.
pub(crate) fn samples<E>(
    share: Duration,
    reps: usize,
    mut run: impl FnMut(u64) -> Result<Sample, E>,
) -> Result<Vec<Sample>, E> {
    let begun = Instant::now();
    let reps = reps.max(1);
    let (units, pilot, setup) = size(share / (reps as u32 + 1), &mut run)?;
    let left = share.saturating_sub(begun.elapsed()) / reps as u32;
    let target = left.saturating_sub(setup).max(Duration::from_micros(500));
    let units = scaled(units, &pilot, target);
    (0..reps).map(|_| run(units)).collect()
}

/// A pilot: grows the unit count eightfold until a run's time takes an eighth of `per_run`;
/// returns that count, its sample and the setup the run cost outside its timed part.
///
/// Past the core count the threads workload's time is the cores' busy time, not its window
/// (see [`workload`]): there a run of a few pairs per thread is all barrier wake-ups, and a
/// pilot on the window would stop at it and time them.
pub(crate) fn size<E>(
    per_run: Duration,
    mut run: impl FnMut(u64) -> Result<Sample, E>,
) -> Result<(u64, Sample, Duration), E> {
    let mut units = 1u64;
    loop {
        let t = Instant::now();
        let s = run(units)?;
        let wall = t.elapsed();
        if s.elapsed >= per_run / 8 || units >= 1 << 40 {
            return Ok((units, s, wall.saturating_sub(s.elapsed)));
        }
        units *= 8;
    }
}

/// The unit count whose work takes about `target`, from a pilot of `units` units.
pub(crate) fn scaled(units: u64, pilot: &Sample, target: Duration) -> u64 {
    let scale = target.as_secs_f64() / pilot.elapsed.as_secs_f64().max(1e-9);
    ((units as f64 * scale) as u64).max(1)
}

/// Something done once per livecount counter in the lifecycle workload, with the bare
/// counter and the same counter behind a session tracker.
pub trait VisitLifecycle {
    /// Called once per production livecount counter.
    fn visit<C: LiveName>(&mut self);
}

/// Visits every production livecount counter for the lifecycle workload.
pub fn for_each_lifecycle(v: &mut impl VisitLifecycle) {
    v.visit::<livecount::PerThread>();
    v.visit::<livecount::PerCpu>();
    v.visit::<livecount::Sharded>();
    v.visit::<livecount::Striped>();
    v.visit::<livecount::Single>();
}

/// How many counters [`for_each_lifecycle`] visits.
pub(crate) fn lifecycle_counters() -> usize {
    struct Count(usize);
    impl VisitLifecycle for Count {
        fn visit<C: LiveName>(&mut self) {
            self.0 += 1;
        }
    }
    let mut count = Count(0);
    for_each_lifecycle(&mut count);
    count.0
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Reads are timed at 1 000 threads always, at the user's count too once it is many per
    /// core; memory at 1, 2, 16, 256 and the user's count.
    #[test]
    fn many_threads_add_a_read_point() {
        let plan = Plan::new(Mode::Quick, 2, 2, Reader::Hz(10));
        assert_eq!(plan.read_threads, [READ_THREADS]);
        assert_eq!(plan.memory, [1, 2, 16, 256]);
        let plan = Plan::new(Mode::Quick, 2, 7, Reader::Hz(10));
        assert_eq!(plan.read_threads, [READ_THREADS]);
        let plan = Plan::new(Mode::Quick, 2, 8, Reader::Hz(10));
        assert_eq!(plan.read_threads, [8, READ_THREADS]);
        assert_eq!(plan.memory, [1, 2, 8, 16, 256]);
        let plan = Plan::new(Mode::Full, 2, 4096, Reader::Hz(10));
        assert_eq!(plan.read_threads, [256, READ_THREADS, 4096]);
        assert_eq!(lifecycle_counters(), 5);
    }
}
