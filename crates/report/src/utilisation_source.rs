//! Where utilisation comes from: [`ProcessCpu`] (this process's CPU time ÷ cores) or any
//! other [`UtilisationSource`].

use std::fmt;
use std::time::{Duration, Instant};

/// Gives the utilisation since the previous sample, in [0, 1], or `None` when it cannot be
/// measured (the report then says `utilisation_measured: false` instead of a silent 0).
pub trait UtilisationSource: Send + fmt::Debug {
    /// Utilisation since the previous call (the first call may return `None` or a
    /// figure since an earlier baseline).
    fn sample(&mut self) -> Option<f64>;
}

/// This process's CPU time (user + system, every thread) per wall-clock second, divided by
/// the cores it is measured against. From `getrusage(RUSAGE_SELF)` on Unix (no `/proc`
/// parsing, no assumed clock-tick rate); elsewhere it measures nothing and says so.
///
/// ```
/// use livecount_report::{ProcessCpu, UtilisationSource};
///
/// let mut cpu = ProcessCpu::new(2.0);
/// let _ = cpu.sample(); // the baseline
/// let u = cpu.sample();
/// # #[cfg(unix)]
/// assert!(u.is_some_and(|u| (0.0..=1.0).contains(&u)));
/// ```
#[derive(Debug)]
pub struct ProcessCpu {
    cores: f64,
    last: Option<(Instant, Duration)>,
}

impl ProcessCpu {
    /// Measures against `cores` (non-finite or ≤ 0 is taken as 1).
    pub fn new(cores: f64) -> Self {
        let cores = if cores.is_finite() && cores > 0.0 {
            cores
        } else {
            1.0
        };
        let mut meter = ProcessCpu { cores, last: None };
        meter.sample();
        meter
    }

    /// The cores utilisation is measured against.
    pub fn cores(&self) -> f64 {
        self.cores
    }
}

impl UtilisationSource for ProcessCpu {
    fn sample(&mut self) -> Option<f64> {
        let now = Instant::now();
        let cpu = process_cpu_time()?;
        let u = self.last.map_or(0.0, |last| {
            utilisation_between(last, (now, cpu), self.cores)
        });
        self.last = Some((now, cpu));
        Some(u)
    }
}

/// CPU time used between two (instant, process CPU time) readings per wall-clock second,
/// divided by `cores`, in [0, 1]; 0 when no wall-clock time passed (or the clock went back).
fn utilisation_between(
    (t0, cpu0): (Instant, Duration),
    (t1, cpu1): (Instant, Duration),
    cores: f64,
) -> f64 {
    if t1 <= t0 {
        return 0.0;
    }
    let u = cpu1.saturating_sub(cpu0).as_secs_f64() / (t1 - t0).as_secs_f64() / cores;
    u.clamp(0.0, 1.0)
}

/// CPU time of this process (user + system, all threads); `None` off Unix, where it is not
/// measured.
pub fn process_cpu_time() -> Option<Duration> {
    #[cfg(unix)]
    {
        let mut usage = std::mem::MaybeUninit::<libc::rusage>::zeroed();
        // SAFETY:
        // - `usage` points to writable memory the size of a `rusage`;
        // - `getrusage` writes it fully when it returns 0, and we read it only then.
        #[allow(unsafe_code)]
        let usage = unsafe {
            if libc::getrusage(libc::RUSAGE_SELF, usage.as_mut_ptr()) != 0 {
                return None;
            }
            usage.assume_init()
        };
        let time = |t: libc::timeval| -> Option<Duration> {
            Some(Duration::new(
                u64::try_from(t.tv_sec).ok()?,
                u32::try_from(t.tv_usec).ok()?.checked_mul(1000)?,
            ))
        };
        Some(time(usage.ru_utime)? + time(usage.ru_stime)?)
    }
    #[cfg(not(unix))]
    None
}

/// A source that returns whatever was last [`set`](ManualUtilisationHandle::set): for a service
/// that knows its utilisation better than process CPU does (GPU share, queue depth).
///
/// ```
/// use livecount_report::{ManualUtilisation, UtilisationSource};
///
/// let (mut source, handle) = ManualUtilisation::new();
/// assert_eq!(source.sample(), None);
/// handle.set(0.25);
/// assert_eq!(source.sample(), Some(0.25));
/// ```
#[derive(Debug)]
pub struct ManualUtilisation {
    value: std::sync::Arc<std::sync::atomic::AtomicU64>,
}

/// Sets the value a [`ManualUtilisation`] reports.
#[derive(Debug, Clone)]
pub struct ManualUtilisationHandle {
    value: std::sync::Arc<std::sync::atomic::AtomicU64>,
}

/// No value yet: an f64 NaN bit pattern.
const UNSET: u64 = f64::NAN.to_bits();

impl ManualUtilisation {
    /// A source and the handle that feeds it; it reports `None` until the first `set`.
    pub fn new() -> (Self, ManualUtilisationHandle) {
        let value = std::sync::Arc::new(std::sync::atomic::AtomicU64::new(UNSET));
        let handle = ManualUtilisationHandle {
            value: std::sync::Arc::clone(&value),
        };
        (ManualUtilisation { value }, handle)
    }
}

impl ManualUtilisationHandle {
    /// The utilisation to report from now on, clamped to [0, 1]; NaN clears it.
    pub fn set(&self, utilisation: f64) {
        let v = if utilisation.is_nan() {
            f64::NAN
        } else {
            utilisation.clamp(0.0, 1.0)
        };
        // Relaxed: a single value with no other data published alongside it.
        self.value
            .store(v.to_bits(), std::sync::atomic::Ordering::Relaxed);
    }
}

impl UtilisationSource for ManualUtilisation {
    fn sample(&mut self) -> Option<f64> {
        // Relaxed: see `set`.
        let v = f64::from_bits(self.value.load(std::sync::atomic::Ordering::Relaxed));
        (!v.is_nan()).then_some(v)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// CPU seconds per wall second per core, clamped into [0, 1]; nothing without elapsed time.
    #[test]
    fn utilisation_is_cpu_time_per_wall_time_per_core() {
        let t0 = Instant::now();
        let t1 = t0 + Duration::from_secs(2);
        let at = |t, cpu_ms| (t, Duration::from_millis(cpu_ms));
        // 2 CPU seconds over 2 wall seconds: one core of four.
        assert_eq!(utilisation_between(at(t0, 1_000), at(t1, 3_000), 4.0), 0.25);
        assert_eq!(utilisation_between(at(t0, 1_000), at(t1, 3_000), 1.0), 1.0);
        assert_eq!(utilisation_between(at(t0, 1_000), at(t1, 2_000), 2.0), 0.25);
        // Four cores' worth against two: clamped to saturated.
        assert_eq!(utilisation_between(at(t0, 0), at(t1, 8_000), 2.0), 1.0);
        // CPU time that went back (it cannot, but a source may lie): nothing, not negative.
        assert_eq!(utilisation_between(at(t0, 3_000), at(t1, 1_000), 1.0), 0.0);
        // No wall time between the readings, or a clock that went back: 0, not ∞ or NaN.
        assert_eq!(utilisation_between(at(t0, 0), at(t0, 1_000), 1.0), 0.0);
        assert_eq!(utilisation_between(at(t1, 0), at(t0, 1_000), 1.0), 0.0);
    }

    #[cfg(unix)]
    #[test]
    fn process_cpu_time_grows_with_work_and_utilisation_follows_it() {
        let mut cpu = ProcessCpu::new(1.0);
        let start = Instant::now();
        let before = process_cpu_time().unwrap();
        // Spin until the kernel has charged 50 ms of CPU to us (bounded: 5 s of wall time,
        // a 1 % share of a core; well inside the mutation tester's 20 s timeout, so a clock
        // that never moves fails here), however loaded the machine is.
        let mut x = 0u64;
        let after = loop {
            for _ in 0..10_000 {
                x = std::hint::black_box(x.wrapping_mul(31).wrapping_add(7));
            }
            let now = process_cpu_time().unwrap();
            if now - before >= Duration::from_millis(50) {
                break now;
            }
            assert!(
                start.elapsed() < Duration::from_secs(5),
                "no CPU time charged"
            );
        };
        let wall = start.elapsed();
        let u = cpu.sample().unwrap();
        // What the meter reports is the CPU charged per wall second against one core; this
        // thread alone was charged at least `after - before` within a little over `wall`.
        let charged = (after - before).as_secs_f64() / (wall.as_secs_f64() + 0.05);
        assert!(u > 0.0 && u <= 1.0, "utilisation {u}");
        assert!(
            u >= charged.min(1.0) * 0.5,
            "utilisation {u} for {charged} charged"
        );
        // Against 1000 cores the same work is nearly nothing.
        let mut many = ProcessCpu::new(1000.0);
        std::thread::sleep(Duration::from_millis(20));
        assert!(many.sample().unwrap() < 0.01);
        assert_eq!(many.cores(), 1000.0);
        assert_eq!(ProcessCpu::new(f64::NAN).cores(), 1.0);
        assert_eq!(ProcessCpu::new(-2.0).cores(), 1.0);
    }

    #[test]
    fn manual_utilisation_clamps_and_clears() {
        let (mut source, handle) = ManualUtilisation::new();
        handle.set(7.0);
        assert_eq!(source.sample(), Some(1.0));
        handle.set(-1.0);
        assert_eq!(source.sample(), Some(0.0));
        handle.set(f64::NAN);
        assert_eq!(source.sample(), None);
    }
}
