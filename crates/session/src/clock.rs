//! `CoarseClock`: the instants the crate reads itself (a session's start, `touch()`, a phase
//! change), at scheduler-tick precision for a fraction of `Instant::now()`'s cost.
//!
//! On 64-bit Linux `Instant::now()` is `clock_gettime(CLOCK_MONOTONIC)`: a vDSO call that
//! reads the TSC. `CLOCK_MONOTONIC_COARSE` is the same clock as of the last timer tick: a
//! few loads from the vDSO page (5.7 ns a call on one thread of a 2-core Xeon VM:
//! `results/session-durations/REPORT.md` in the repository), with the tick as its resolution
//! (`clock_getres`, typically 1–4 ms).
//! Elsewhere the clock is `Instant::now()`.
//!
//! # Precision
//!
//! `CLOCK_MONOTONIC_COARSE` is `CLOCK_MONOTONIC` (the clock behind `Instant` on Linux) as of
//! the kernel's last timekeeping update, so a coarse reading is never above a fine one taken
//! after it. A coarse reading is turned into an [`Instant`] through an anchor pair read at
//! construction: `Instant::now()` first, a *fine* `CLOCK_MONOTONIC` reading second. Reading 0
//! is that instant and stands for the fine reading (which is no earlier), so an instant from
//! [`now`](CoarseClock::now) is **never later** than `Instant::now()` at the same moment —
//! however late the kernel's update runs — and as early as the coarse clock lags: a tick or
//! two normally, more when a loaded virtual machine delays the timer interrupt. (An earlier
//! version anchored on a coarse reading shifted back by one tick; a delayed tick at
//! construction then put every later reading in the future, which a test caught on a busy
//! CI machine.) Every reaping decision therefore errs the same way: a session looks idle at
//! most a few ms longer than it was, far below any useful reaping limit, and a session
//! started before a `reap(Duration::ZERO)` is always found idle.

use std::time::{Duration, Instant};

/// A per-tracker coarse monotonic clock; see the module docs. Readings are nanoseconds since
/// a base instant, so a session stores a `u64` and the hot path does no `Instant` arithmetic.
#[derive(Debug)]
pub(crate) struct CoarseClock {
    /// Reading 0: the construction instant.
    base: Instant,
    /// A fine `CLOCK_MONOTONIC` reading taken just after `base`, when the coarse clock is
    /// used: the raw value reading 0 stands for.
    #[cfg(all(target_os = "linux", target_pointer_width = "64"))]
    coarse_at_base: Option<u64>,
}

impl CoarseClock {
    pub(crate) fn new() -> Self {
        #[cfg(all(target_os = "linux", target_pointer_width = "64"))]
        if linux::resolution().is_some() {
            let base = Instant::now();
            // Read after `base`, on the same clock: `fine` is no earlier than `base`, and any
            // later coarse reading `c` is no later than a fine one, so
            // `base + (c - fine) <= Instant::now()` whenever `c` is read.
            if let Some(fine) = linux::fine_nanos() {
                return CoarseClock {
                    base,
                    coarse_at_base: Some(fine),
                };
            }
        }
        CoarseClock {
            base: Instant::now(),
            #[cfg(all(target_os = "linux", target_pointer_width = "64"))]
            coarse_at_base: None,
        }
    }

    /// Now, as nanoseconds since the base: never late, as early as the coarse clock lags.
    #[inline]
    pub(crate) fn now_nanos(&self) -> u64 {
        #[cfg(all(target_os = "linux", target_pointer_width = "64"))]
        if let Some(at_base) = self.coarse_at_base
            && let Some(nanos) = linux::coarse_nanos()
        {
            // The coarse clock is monotone, so it never reads below its reading at the base.
            return nanos.saturating_sub(at_base);
        }
        self.nanos_of(Instant::now())
    }

    /// The current instant: never late, as early as the coarse clock lags (module docs).
    #[cfg(test)]
    fn now(&self) -> Instant {
        self.instant(self.now_nanos())
    }

    /// The instant of a reading.
    pub(crate) fn instant(&self, nanos: u64) -> Instant {
        self.base + Duration::from_nanos(nanos)
    }

    /// `instant` as a reading (0 for instants before the base).
    pub(crate) fn nanos_of(&self, instant: Instant) -> u64 {
        u64::try_from(instant.saturating_duration_since(self.base).as_nanos()).unwrap_or(u64::MAX)
    }
}

#[cfg(all(target_os = "linux", target_pointer_width = "64"))]
mod linux {
    /// A `timespec` as nanoseconds; `None` if negative or past `u64`.
    pub(super) fn nanos(ts: &libc::timespec) -> Option<u64> {
        let secs = u64::try_from(ts.tv_sec).ok()?;
        let nanos = u64::try_from(ts.tv_nsec).ok()?;
        secs.checked_mul(1_000_000_000)?.checked_add(nanos)
    }

    /// The coarse clock now, in nanoseconds; `None` if the kernel refuses.
    #[inline]
    pub(super) fn coarse_nanos() -> Option<u64> {
        read(libc::CLOCK_MONOTONIC_COARSE)
    }

    /// `CLOCK_MONOTONIC` now (the clock `Instant` reads), in nanoseconds.
    pub(super) fn fine_nanos() -> Option<u64> {
        read(libc::CLOCK_MONOTONIC)
    }

    #[inline]
    fn read(clock: libc::clockid_t) -> Option<u64> {
        let mut ts = libc::timespec {
            tv_sec: 0,
            tv_nsec: 0,
        };
        // SAFETY:
        // - `clock_gettime` (libc, served by the vDSO) writes one `timespec` through the
        //   pointer, which is valid and writable for the duration of the call.
        #[allow(unsafe_code)]
        let rc = unsafe { libc::clock_gettime(clock, &mut ts) };
        if rc == 0 { nanos(&ts) } else { None }
    }

    /// The coarse clock's tick; `None` if the kernel has no such clock or it is no coarser
    /// than a microsecond (then it saves nothing worth its imprecision).
    pub(super) fn resolution() -> Option<u64> {
        let mut ts = libc::timespec {
            tv_sec: 0,
            tv_nsec: 0,
        };
        // SAFETY:
        // - `clock_getres` writes one `timespec` through the pointer, which is valid and
        //   writable for the duration of the call.
        #[allow(unsafe_code)]
        let rc = unsafe { libc::clock_getres(libc::CLOCK_MONOTONIC_COARSE, &mut ts) };
        let tick = if rc == 0 { nanos(&ts)? } else { return None };
        // Coarser than a second would be a broken clock; finer than 1 µs, not coarse at all.
        (1_000..=1_000_000_000).contains(&tick).then_some(tick)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The clock moves with time: readings 100 ms apart are about 100 ms apart (the later
    /// one lags by a tick or two, plus generous slack for a delayed timer interrupt on a busy
    /// machine), and still never late.
    #[test]
    fn advances_with_the_time() {
        let clock = CoarseClock::new();
        let first = clock.now_nanos();
        std::thread::sleep(Duration::from_millis(100));
        let second = clock.now_nanos();
        let after = Instant::now();
        let moved = Duration::from_nanos(second - first);
        assert!(
            moved >= Duration::from_millis(50),
            "moved {moved:?} in 100 ms"
        );
        assert!(clock.instant(second) <= after, "a reading from the future");
    }

    /// Right after construction (the moment the old coarse anchor could be a delayed tick
    /// behind), readings are never late; many fresh clocks make a late anchor likely to show.
    #[test]
    fn a_fresh_clock_is_never_late() {
        for _ in 0..2_000 {
            let clock = CoarseClock::new();
            let reading = clock.now();
            assert!(
                reading <= Instant::now(),
                "a fresh clock read from the future"
            );
        }
    }

    /// Instants and readings convert both ways, and instants before the base read as 0.
    #[test]
    fn readings_and_instants_round_trip() {
        let clock = CoarseClock::new();
        let t = clock.instant(0) + Duration::from_millis(5);
        assert_eq!(clock.nanos_of(t), 5_000_000);
        assert_eq!(clock.instant(clock.nanos_of(t)), t);
        assert_eq!(
            clock.nanos_of(clock.instant(0) - Duration::from_millis(1)),
            0
        );
    }

    /// On 64-bit Linux the clock is the coarse one (not the `Instant::now()` fallback): its
    /// tick is between 1 µs and 1 s, and back-to-back readings repeat within a tick.
    #[cfg(all(target_os = "linux", target_pointer_width = "64"))]
    #[test]
    fn is_the_coarse_clock_on_linux() {
        let tick = linux::resolution().expect("CLOCK_MONOTONIC_COARSE has a tick");
        assert!((1_000..=1_000_000_000).contains(&tick), "tick {tick} ns");
        let clock = CoarseClock::new();
        assert!(
            clock.coarse_at_base.is_some(),
            "fell back to Instant::now()"
        );
        let readings: Vec<u64> = (0..1_000).map(|_| clock.now_nanos()).collect();
        assert!(
            readings.windows(2).any(|w| w[0] == w[1]),
            "no two back-to-back readings within one tick agree: not a coarse clock"
        );
        let a = linux::coarse_nanos().expect("the coarse clock reads");
        std::thread::sleep(Duration::from_millis(100));
        let b = linux::coarse_nanos().expect("the coarse clock reads");
        assert!(
            b - a >= 50_000_000,
            "coarse clock moved {} ns in 100 ms",
            b - a
        );
        let fine = linux::fine_nanos().expect("the fine clock reads");
        let coarse = linux::coarse_nanos().expect("the coarse clock reads");
        assert!(
            coarse <= linux::fine_nanos().expect("the fine clock reads"),
            "the coarse clock ran ahead of the fine one"
        );
        assert!(
            fine.abs_diff(coarse) < 1_000_000_000,
            "the coarse and fine clocks are not the same clock: {fine} vs {coarse}"
        );
    }

    #[cfg(all(target_os = "linux", target_pointer_width = "64"))]
    #[test]
    fn timespecs_convert_to_nanoseconds() {
        let ts = |tv_sec, tv_nsec| libc::timespec { tv_sec, tv_nsec };
        assert_eq!(linux::nanos(&ts(1, 5)), Some(1_000_000_005));
        assert_eq!(linux::nanos(&ts(0, 0)), Some(0));
        assert_eq!(linux::nanos(&ts(-1, 0)), None);
        assert_eq!(linux::nanos(&ts(0, -1)), None);
        assert_eq!(linux::nanos(&ts(i64::MAX, 0)), None);
    }

    #[test]
    fn never_late_and_at_most_a_few_ticks_early() {
        let clock = CoarseClock::new();
        for _ in 0..10_000 {
            let before = Instant::now();
            let coarse = clock.now();
            let after = Instant::now();
            assert!(coarse <= after, "coarse instant from the future");
            // 2 ticks of at most 4 ms, plus scheduling slack on a busy machine.
            assert!(before.saturating_duration_since(coarse) < Duration::from_millis(50));
        }
    }
}
