//! [`CpuSource`]: where a [`PerCpu`](crate::PerCpu) counter learns its CPU, and [`Path`], the
//! same choice as the counter's update takes it.

use std::fmt;

use super::rseq;
use crate::cpu;
use crate::sync::MODEL_CHECKED;

/// How a [`PerCpu`](crate::PerCpu) counter's updates find their cell.
///
/// [`PerCpu::new`](crate::PerCpu::new) takes the first of these the machine offers, in this
/// order; [`PerCpu::with_source`](crate::PerCpu::with_source) asks for one.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum CpuSource {
    /// A restartable sequence (x86-64 Linux, glibc 2.35+ with rseq registered): the CPU id
    /// is read from the thread's rseq area and the cell bumped with a plain `add` in one
    /// kernel-guarded critical section — no `lock`-prefixed instruction at all.
    Rseq,
    /// The CPU id read from the rseq area (same availability as [`Rseq`](Self::Rseq)), then a
    /// locked add on that CPU's cell: a migration in between lands the update on another
    /// CPU's cell, which a locked add makes harmless.
    RseqCpuId,
    /// `sched_getcpu()` (Linux, any libc), then a locked add.
    SchedGetcpu,
    /// No CPU id at all: the thread's reusable index (the lowest free one; the same as
    /// [`Sharded`](crate::Sharded)'s), modulo the cells, then a locked add. Everywhere.
    ThreadIndex,
}

impl CpuSource {
    /// Every source, fastest first: the order [`PerCpu::new`](crate::PerCpu::new) tries them
    /// in.
    pub const ALL: [CpuSource; 4] = [
        CpuSource::Rseq,
        CpuSource::RseqCpuId,
        CpuSource::SchedGetcpu,
        CpuSource::ThreadIndex,
    ];

    /// Whether this process can use the source.
    ///
    /// ```
    /// use livecount::CpuSource;
    /// assert!(CpuSource::ThreadIndex.is_available());
    /// ```
    pub fn is_available(self) -> bool {
        Path::of(self).is_some()
    }

    /// The sources this process can use, fastest first.
    ///
    /// ```
    /// use livecount::CpuSource;
    /// assert!(CpuSource::available().any(|s| s == CpuSource::ThreadIndex));
    /// ```
    pub fn available() -> impl Iterator<Item = CpuSource> {
        CpuSource::ALL
            .into_iter()
            .filter(|source| source.is_available())
    }

    /// The fastest source this process can use.
    ///
    /// ```
    /// use livecount::CpuSource;
    /// assert!(CpuSource::best().is_available());
    /// ```
    pub fn best() -> CpuSource {
        CpuSource::available()
            .next()
            .unwrap_or(CpuSource::ThreadIndex)
    }

    /// A short lower-case name, for reports.
    ///
    /// ```
    /// assert_eq!(livecount::CpuSource::SchedGetcpu.name(), "sched_getcpu");
    /// ```
    pub fn name(self) -> &'static str {
        match self {
            CpuSource::Rseq => "rseq",
            CpuSource::RseqCpuId => "rseq cpu id + lock add",
            CpuSource::SchedGetcpu => "sched_getcpu",
            CpuSource::ThreadIndex => "thread index",
        }
    }
}

impl fmt::Display for CpuSource {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// The error of [`PerCpu::with_source`](crate::PerCpu::with_source): the source cannot be
/// used in this process.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SourceUnavailable(pub CpuSource);

impl fmt::Display for SourceUnavailable {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let why = match self.0 {
            CpuSource::Rseq | CpuSource::RseqCpuId => {
                "it needs x86-64 Linux with glibc 2.35 or later and rseq registered \
                 (not disabled by GLIBC_TUNABLES=glibc.pthread.rseq=0)"
            }
            CpuSource::SchedGetcpu => "it needs Linux",
            CpuSource::ThreadIndex => "it is always available",
        };
        write!(f, "CPU source {} is not available here: {why}", self.0)
    }
}

impl std::error::Error for SourceUnavailable {}

/// How updates reach a cell, with what each needs copied in so the hot path reads only this
/// counter's own (read-only) fields.
///
/// Every variant exists on every platform; [`Path::of`] offers only those the process can
/// take (the platform layer answers `None` for the others), so no use site needs a cfg.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Path {
    /// The rseq critical section (what it needs is in the counter's `Sequence`).
    Rseq,
    /// The CPU id read from the rseq area, then a locked add.
    RseqCpuId,
    /// `sched_getcpu()`, then a locked add.
    SchedGetcpu,
    /// The thread's reusable index modulo the cells, then a locked add.
    ThreadIndex,
    /// Under the model checkers: the model's CPU variable, then a locked add.
    Model,
}

impl Path {
    /// The path for `source`, or `None` if this process cannot take it.
    pub(super) fn of(source: CpuSource) -> Option<Path> {
        match source {
            CpuSource::Rseq => rseq::available().then_some(Path::Rseq),
            CpuSource::RseqCpuId => rseq::available().then_some(Path::RseqCpuId),
            CpuSource::SchedGetcpu => cpu::sched_getcpu().map(|_| Path::SchedGetcpu),
            CpuSource::ThreadIndex => Some(Path::ThreadIndex),
        }
    }

    /// The fastest path available: the model's CPU under a model checker, else the first
    /// of [`CpuSource::ALL`] this process can take.
    pub(super) fn best() -> Path {
        if MODEL_CHECKED {
            return Path::Model;
        }
        CpuSource::ALL
            .into_iter()
            .find_map(Path::of)
            .unwrap_or(Path::ThreadIndex)
    }

    /// The source this path reports as.
    pub(super) fn source(self) -> CpuSource {
        match self {
            Path::Rseq => CpuSource::Rseq,
            Path::RseqCpuId => CpuSource::RseqCpuId,
            Path::SchedGetcpu | Path::Model => CpuSource::SchedGetcpu,
            Path::ThreadIndex => CpuSource::ThreadIndex,
        }
    }
}

#[cfg(all(test, not(any(livecount_loom, livecount_shuttle))))]
mod tests {
    use super::*;

    #[test]
    fn sources_print_their_names() {
        assert_eq!(CpuSource::Rseq.to_string(), "rseq");
        assert_eq!(
            CpuSource::ThreadIndex.to_string(),
            CpuSource::ThreadIndex.name()
        );
    }

    /// The two rseq sources need the same thing, glibc's registered area.
    #[test]
    fn both_rseq_sources_are_available_together() {
        assert_eq!(
            CpuSource::Rseq.is_available(),
            CpuSource::RseqCpuId.is_available()
        );
    }

    /// A path reports the source it was made for, and the best path is an available one.
    #[test]
    fn paths_round_trip_to_their_sources() {
        for source in CpuSource::available() {
            assert_eq!(Path::of(source).map(Path::source), Some(source));
        }
        assert_eq!(Path::best().source(), CpuSource::best());
        assert_eq!(Path::of(CpuSource::ThreadIndex), Some(Path::ThreadIndex));
    }
}
