//! The calling thread's CPU time, which the threads workload sizes and, past the core count,
//! times its runs on (see [`crate::workload`]).
#![allow(unsafe_code)]

use std::time::Duration;

/// CPU time the calling thread has used (user + system), or `None` where there is no
/// per-thread CPU clock (not Linux, or the call failed).
#[cfg(target_os = "linux")]
pub(crate) fn thread() -> Option<Duration> {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY:
    // - `ts` is a valid, writable `timespec` the call fills; it reads and writes nothing else.
    let ok = unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut ts) } == 0;
    ok.then(|| {
        Duration::new(
            ts.tv_sec.max(0) as u64,
            ts.tv_nsec.clamp(0, 999_999_999) as u32,
        )
    })
}

/// No per-thread CPU clock here.
#[cfg(not(target_os = "linux"))]
pub(crate) fn thread() -> Option<Duration> {
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Sleeping hardly advances the clock (a wall clock would advance 50 ms); spinning does.
    #[test]
    #[cfg(target_os = "linux")]
    fn counts_work_not_sleep() {
        let t0 = thread().unwrap();
        std::thread::sleep(Duration::from_millis(50));
        let slept = thread().unwrap() - t0;
        assert!(slept < Duration::from_millis(25), "{slept:?}");
        // Spin until 20 ms more of CPU time (however busy the machine, within 30 s of wall).
        let deadline = std::time::Instant::now() + Duration::from_secs(30);
        let mut x = 0u64;
        while thread().unwrap() - t0 < slept + Duration::from_millis(20) {
            assert!(
                std::time::Instant::now() < deadline,
                "spinning never used CPU time"
            );
            x = std::hint::black_box(x.wrapping_add(1));
        }
    }
}
