//! [`PerCpu`]: one cache-padded pair per CPU, updated through the kernel's restartable
//! sequences where glibc registered them — memory and read cost bounded by CPUs, not threads.
//!
//! `source` holds the public choice ([`CpuSource`]) and the counter's `Path`; `rseq` the
//! critical section's types, which exist on every platform (empty where there is no rseq),
//! so nothing here needs a cfg but the model checkers' tests.

mod rseq;
mod source;

use std::fmt;

use crossbeam_utils::CachePadded;

use self::rseq::Sequence;
use self::source::Path;
pub use self::source::{CpuSource, SourceUnavailable};
use crate::counter::Issuer;
use crate::pair::{self, Half, Pair};
use crate::{Totals, cpu, thread_id};

/// One cache-padded [`started`, `ended`] pair per CPU: an update lands on the cell of the CPU
/// the thread runs on, so memory and read cost grow with the machine's CPUs and never with
/// its threads — the counter for thread-per-connection services and large blocking pools,
/// where [`PerThread`](crate::PerThread) would keep a cell per thread ever alive.
///
/// Where glibc registered restartable sequences (x86-64 Linux, glibc 2.35 or later: every
/// thread has an rseq area the kernel keeps its current CPU in), an update is one
/// kernel-guarded critical section that reads the CPU id and bumps that CPU's cell with a
/// plain `add`: if the thread is preempted, migrated or signalled before the add, the kernel
/// restarts the sequence, so two threads never interleave on one cell and no locked
/// instruction is needed ([`CpuSource::Rseq`]). Elsewhere the CPU id comes from
/// `sched_getcpu()` or, lacking that, the thread's reusable index, and the bump is a locked
/// add ([`CpuSource`]), since a migration between the read and the add may land it on a cell
/// another CPU is bumping too — a different cell than intended, which is still correct.
///
/// CPU ids at or above the cell count (a CPU hot-plugged after construction, a counter built
/// with fewer cells) and threads without a registered rseq area count on one shared overflow
/// cell, with a locked add; no cell is ever bumped both ways.
///
/// Reads sum every `ended` before every `started`, so [`Counter`](crate::Counter)'s gauge read guarantee
/// holds whichever cell a session's start and end landed on.
///
/// # Performance characteristics
///
/// With rseq: an update is about the cost of [`PerThread`](crate::PerThread)'s plain load and
/// store plus two stores and a load to the thread's own rseq area. Without it: a CPU-id call
/// and a `lock xadd`, several times that. Reads load `2 × (CPUs + 1)` words however many
/// threads count; memory is `128 × (CPUs + 1)` bytes, fixed at construction.
///
/// A debugger single-stepping through an update restarts the sequence at every step (each
/// step is a trap the kernel treats as preemption): step over it instead.
///
/// # Examples
///
/// ```
/// use livecount::{Counter, PerCpu};
///
/// let sessions = PerCpu::new();
/// let tokens: Vec<_> = std::thread::scope(|s| {
///     let handles: Vec<_> = (0..64).map(|_| s.spawn(|| sessions.increment())).collect();
///     handles.into_iter().map(|h| h.join().unwrap()).collect()
/// });
/// // 64 threads counted; the memory is still one cell per CPU.
/// assert_eq!(sessions.load(), 64);
/// assert_eq!(sessions.cells(), livecount::PerCpu::new().cells());
/// for token in tokens {
///     sessions.decrement(token);
/// }
/// assert_eq!(sessions.load(), 0);
/// println!("counting on {} cells via {}", sessions.cells(), sessions.cpu_source());
/// ```
pub struct PerCpu {
    cells: Box<[CachePadded<Pair>]>,
    /// CPU ids without a cell, and threads without a CPU id: locked adds only.
    overflow: CachePadded<Pair>,
    path: Path,
    /// What the critical section needs, packed so an update loads one word of the counter
    /// (empty off the rseq path).
    sequence: Sequence,
    issuer: Issuer,
}

impl fmt::Debug for PerCpu {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("PerCpu")
            .field("cells", &self.cells.len())
            .field("source", &self.path.source())
            .finish_non_exhaustive()
    }
}

impl PerCpu {
    /// A counter with a cell for every CPU the machine has configured (not only those this
    /// process may use now), through the fastest [`CpuSource`] available.
    ///
    /// ```
    /// use livecount::PerCpu;
    /// let sessions = PerCpu::new();
    /// assert!(sessions.cells() >= std::thread::available_parallelism().unwrap().get());
    /// ```
    pub fn new() -> Self {
        PerCpu::with_cpus(cpu::possible())
    }

    /// A counter with `cells` per-CPU cells (at least 1) through the fastest source; CPUs
    /// with ids at or above `cells` share the overflow cell.
    ///
    /// ```
    /// use livecount::{Counter, PerCpu};
    /// let sessions = PerCpu::with_cpus(1);
    /// let token = sessions.increment();
    /// assert_eq!((sessions.cells(), sessions.load()), (1, 1));
    /// sessions.decrement(token);
    /// ```
    pub fn with_cpus(cells: usize) -> Self {
        PerCpu::build(cells, Path::best())
    }

    /// A counter with `cells` cells (at least 1) through `source`, or why it cannot be used.
    ///
    /// ```
    /// use livecount::{Counter, CpuSource, PerCpu};
    /// let sessions = PerCpu::with_source(4, CpuSource::ThreadIndex).unwrap();
    /// assert_eq!(sessions.cpu_source(), CpuSource::ThreadIndex);
    /// # let token = sessions.increment();
    /// # sessions.decrement(token);
    /// ```
    pub fn with_source(cells: usize, source: CpuSource) -> Result<Self, SourceUnavailable> {
        let path = Path::of(source).ok_or(SourceUnavailable(source))?;
        Ok(PerCpu::build(cells, path))
    }

    fn build(cells: usize, path: Path) -> Self {
        let cells: Box<[CachePadded<Pair>]> = (0..cells.max(1))
            .map(|_| CachePadded::new(Pair::new()))
            .collect();
        let (path, sequence) = match path {
            Path::Rseq => match Sequence::of(&cells) {
                Some(sequence) => (path, sequence),
                // Cells the packed word cannot describe: the same CPU ids, locked adds.
                None => (Path::RseqCpuId, Sequence::NONE),
            },
            _ => (path, Sequence::NONE),
        };
        PerCpu {
            cells,
            overflow: CachePadded::new(Pair::new()),
            path,
            sequence,
            issuer: Issuer::new(),
        }
    }

    /// The number of per-CPU cells (the overflow cell not included).
    pub fn cells(&self) -> usize {
        self.cells.len()
    }

    /// Where this counter's updates learn their CPU.
    pub fn cpu_source(&self) -> CpuSource {
        self.path.source()
    }

    /// The bytes this counter occupies: its cells, the overflow cell and itself. Independent
    /// of how many threads count.
    ///
    /// ```
    /// let sessions = livecount::PerCpu::with_cpus(8);
    /// assert!(sessions.memory_bytes() >= 9 * 128);
    /// ```
    pub fn memory_bytes(&self) -> usize {
        size_of::<PerCpu>() + self.cells.len() * size_of::<CachePadded<Pair>>()
    }

    /// A cell for CPU (or thread index) `cpu`, shared with other writers: locked adds only.
    #[inline]
    fn shared(&self, cpu: Option<usize>) -> &Pair {
        match cpu.and_then(|cpu| self.cells.get(cpu)) {
            Some(cell) => cell,
            None => &self.overflow,
        }
    }

    /// The rseq critical section inline (it is the hot path); every other source out of line,
    /// since a `lock xadd` and a CPU-id call dwarf a call.
    #[inline(always)]
    fn bump(&self, half: Half) {
        // Cell 0's `half`: the sequence adds `cpu << CELL_SHIFT` bytes to reach cell `cpu`.
        if let Some(section) = self.sequence.unpack(half) {
            // SAFETY:
            // - a non-empty sequence means `Path::Rseq`, taken only where `rseq::available()`
            //   (`Path::of`), so the thread's area is glibc's registered one;
            // - the section is cell 0's `half` in `self.cells`, a heap allocation `self` owns
            //   and never moves or resizes, and its limit is their length in bytes: cells
            //   `0..len` are `CachePadded<Pair>` of exactly `1 << CELL_SHIFT` bytes (asserted
            //   in `rseq`), so for `cpu << CELL_SHIFT < limit` the address is cell `cpu`'s
            //   `half`, an `AtomicU64` owned by `self`, which outlives the call;
            // - a counter's path never changes, so with `Path::Rseq` nothing else writes
            //   these cells: other CPUs only load them (reads), and updates the sequence
            //   cannot take go to `overflow`.
            //
            // Ordering: on x86-64 every store has release semantics and the block is a
            // compiler barrier (it may write memory), so an end's add is ordered after
            // everything before it — the `Release` the other counters' ends use, which the
            // read's `Acquire` of `ended` pairs with.
            #[allow(unsafe_code)]
            let added = unsafe { section.add() };
            if !added {
                self.bump_overflow(half);
            }
            return;
        }
        self.bump_located(half);
    }

    /// An update the critical section could not place: no rseq area on this thread, or a CPU
    /// without a cell.
    #[cold]
    #[inline(never)]
    fn bump_overflow(&self, half: Half) {
        self.overflow.add(half);
    }

    /// The sources other than the critical section: find a CPU (or thread) id, then a locked
    /// add on its cell, or on the overflow cell if it has none.
    #[inline(never)]
    fn bump_located(&self, half: Half) {
        let at = match self.path {
            Path::Rseq => None,
            Path::RseqCpuId => rseq::cpu_id(),
            Path::SchedGetcpu => cpu::sched_getcpu(),
            Path::ThreadIndex => thread_id::current().map(|index| index % self.cells.len()),
            Path::Model => cpu::model_cpu(),
        };
        self.shared(at).add(half);
    }

    fn read(&self) -> Totals {
        pair::read(|f| {
            f(&self.overflow);
            self.cells.iter().for_each(|cell| f(cell));
        })
    }
}

impl Default for PerCpu {
    fn default() -> Self {
        PerCpu::new()
    }
}

pair::counter!(PerCpu);

/// The model checkers' CPU variable reaches the counter: a migration moves the next update
/// to the next CPU's cell (run by `scripts/loom.sh` with the other models).
#[cfg(all(test, livecount_loom))]
mod loom_tests {
    use super::*;
    use crate::Counter;

    #[test]
    fn a_migration_moves_the_next_update_to_the_next_cpus_cell() {
        crate::loom_model::bounded(2, || {
            let counter = PerCpu::with_cpus(4);
            let cpu = thread_id::current().unwrap();
            let first = counter.increment();
            cpu::model::migrate();
            let second = counter.increment();
            assert_eq!(counter.cells[cpu].started(), 1);
            assert_eq!(counter.cells[cpu + 1].started(), 1);
            assert_eq!(counter.overflow.started(), 0);
            counter.decrement(first);
            counter.decrement(second);
        });
    }
}

#[cfg(all(test, not(any(livecount_loom, livecount_shuttle))))]
mod tests {
    use super::*;
    use crate::{Counter, Token};

    fn count_on(counter: &PerCpu, threads: usize, pairs: u64) {
        std::thread::scope(|s| {
            for _ in 0..threads {
                s.spawn(|| {
                    for _ in 0..pairs {
                        let token = counter.increment();
                        counter.decrement(token);
                    }
                });
            }
        });
    }

    /// Every source this machine has counts exactly, with more threads than cells.
    #[test]
    fn every_available_source_counts_every_session_once() {
        for source in CpuSource::available() {
            let counter = PerCpu::with_source(2, source).unwrap();
            count_on(&counter, 6, 20_000);
            let open = counter.increment();
            let expected = Totals {
                started: 6 * 20_000 + 1,
                ended: 6 * 20_000,
            };
            assert_eq!(counter.totals(), Some(expected), "{source}");
            assert_eq!(counter.load(), 1, "{source}");
            counter.decrement(open);
        }
    }

    /// With one cell, a thread on any other CPU counts on the overflow cell, and the read
    /// still counts it.
    #[test]
    fn cpus_without_a_cell_count_on_the_overflow_cell() {
        for source in CpuSource::available() {
            let counter = PerCpu::with_source(1, source).unwrap();
            count_on(&counter, 4, 5_000);
            assert_eq!(counter.totals().unwrap().started, 20_000, "{source}");
            assert_eq!(counter.load(), 0);
        }
    }

    #[test]
    fn an_unavailable_source_says_why() {
        let error = SourceUnavailable(CpuSource::Rseq).to_string();
        assert!(error.contains("glibc.pthread.rseq=0"), "{error}");
        assert!(CpuSource::best().is_available());
        assert_eq!(CpuSource::best(), PerCpu::new().cpu_source());
    }

    /// With a cell for every CPU, the critical section places every update: nothing lands on
    /// the overflow cell (a wrong area address or a broken CPU read would send everything
    /// there, still exact, and only slow).
    #[cfg(livecount_rseq)]
    #[test]
    fn the_critical_section_places_every_update_on_a_cpu_cell() {
        let Ok(counter) = PerCpu::with_source(cpu::possible(), CpuSource::Rseq) else {
            eprintln!("NOTE: no rseq here; the critical section is not taken");
            return;
        };
        count_on(&counter, 2, 10_000);
        let overflow = Totals {
            started: counter.overflow.started(),
            ended: counter.overflow.ended(),
        };
        assert_eq!(overflow, Totals::default());
        let on_cells: u64 = counter.cells.iter().map(|cell| cell.started()).sum();
        assert_eq!(on_cells, 20_000);
    }

    /// Cells the packed word cannot describe take `Path::RseqCpuId`: the rseq area's CPU id,
    /// then a locked add. Pinned to each CPU in turn, a thread counts on that CPU's cell (not,
    /// say, always on cell 0, which would count exactly but put every CPU on one line).
    #[cfg(livecount_rseq)]
    #[test]
    fn the_rseq_cpu_id_path_counts_on_the_pinned_cpus_cell() {
        if !CpuSource::Rseq.is_available() {
            eprintln!("NOTE: no rseq here; the CPU id path is not taken");
            return;
        }
        let counter = PerCpu::build(cpu::possible(), Path::RseqCpuId);
        crate::cpu::tests::on_each_cpu(|cpu| {
            let token = counter.increment();
            assert_eq!(counter.cells[cpu].started(), 1, "CPU {cpu}");
            counter.decrement(token);
        });
        assert_eq!(counter.overflow.started(), 0);
    }

    /// A counter off the rseq path has no critical section to take.
    #[test]
    fn a_counter_off_the_rseq_path_has_no_sequence() {
        let counter = PerCpu::with_source(2, CpuSource::ThreadIndex).unwrap();
        assert!(counter.sequence.unpack(Half::Ended).is_none());
    }

    #[test]
    fn memory_is_one_cell_per_cpu_plus_overflow() {
        let bytes = PerCpu::with_cpus(16).memory_bytes();
        assert_eq!(
            bytes,
            size_of::<PerCpu>() + 16 * size_of::<CachePadded<Pair>>()
        );
        assert_eq!(PerCpu::with_cpus(16).cells(), 16);
        assert_eq!(PerCpu::with_cpus(0).cells(), 1);
    }

    /// Without a CPU id, a thread counts on the cell of its index modulo the cells (not on
    /// cell 0, nor on the overflow cell). Two threads alive at once hold different indices,
    /// so at least one is not 0.
    #[test]
    fn the_thread_index_source_counts_on_the_cell_of_the_index() {
        let counter = PerCpu::with_source(1_000, CpuSource::ThreadIndex).unwrap();
        // Both threads register before either counts, so their indices differ.
        let registered = std::sync::Barrier::new(2);
        let landed: Vec<(usize, Token<PerCpu>)> = std::thread::scope(|s| {
            let handles: Vec<_> = (0..2)
                .map(|_| {
                    s.spawn(|| {
                        let index = thread_id::current().unwrap();
                        registered.wait();
                        (index, counter.increment())
                    })
                })
                .collect();
            handles.into_iter().map(|h| h.join().unwrap()).collect()
        });
        for (index, _) in &landed {
            assert_eq!(
                counter.cells[index % 1_000].started(),
                1,
                "thread index {index}"
            );
        }
        assert_eq!(counter.overflow.started(), 0);
        landed
            .into_iter()
            .for_each(|(_, token)| counter.decrement(token));
    }
}
