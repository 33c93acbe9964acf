//! [`Cap`]: the exact limit on a capped tracker's live sessions.
//!
//! A capped tracker admits a session before it starts it, by one compare-and-swap on the
//! admitted count, and gives the admission back in the end that wins (the same exactly-once
//! step that decrements the counter). The count is exact, not an estimate: it never exceeds
//! the maximum, not even for an instant, however many threads start at once. That costs one
//! cache line written by every start and end, which is why only a capped tracker has it: an
//! uncapped tracker's start and end touch no shared line at all.

use crossbeam_utils::CachePadded;

use crate::sync::{AtomicU64, Ordering};

/// The admitted count of a capped tracker and its maximum.
#[derive(Debug)]
pub(crate) struct Cap {
    max: u64,
    /// Live sessions admitted: taken by [`admit`](Cap::admit), given back by
    /// [`release`](Cap::release). Its own line: every start and end of the tracker writes it.
    admitted: CachePadded<AtomicU64>,
}

impl Cap {
    pub(crate) fn new(max: u64) -> Self {
        Cap {
            max,
            admitted: CachePadded::new(AtomicU64::new(0)),
        }
    }

    /// The maximum.
    pub(crate) fn max(&self) -> u64 {
        self.max
    }

    /// Takes one admission; `false` (and nothing taken) at the maximum.
    #[inline]
    pub(crate) fn admit(&self) -> bool {
        // Relaxed: a first guess for the CAS, which checks it.
        let mut admitted = self.admitted.load(Ordering::Relaxed);
        loop {
            if admitted >= self.max {
                return false;
            }
            // Acquire on success: pairs with the Release in `release`, so the start this
            // admission leads to comes after the end that freed its room (a session that
            // took a freed place is never counted before the one that left it).
            match self.admitted.compare_exchange_weak(
                admitted,
                admitted + 1,
                Ordering::Acquire,
                Ordering::Relaxed,
            ) {
                Ok(_) => return true,
                Err(now) => admitted = now,
            }
        }
    }

    /// Gives one admission back: the session that held it has ended (or never started).
    #[inline]
    pub(crate) fn release(&self) {
        // Release: pairs with the Acquire in `admit` (see there).
        let before = self.admitted.fetch_sub(1, Ordering::Release);
        debug_assert!(before > 0, "an admission released twice");
    }

    /// Live sessions admitted now: exact (every admission and release is one atomic step on
    /// this word).
    pub(crate) fn admitted(&self) -> u64 {
        // Relaxed: a reading of one word; it orders nothing else.
        self.admitted.load(Ordering::Relaxed)
    }
}

#[cfg(all(test, not(livecount_loom)))]
mod tests {
    use super::*;

    #[test]
    fn admits_up_to_the_maximum_and_again_after_a_release() {
        let cap = Cap::new(2);
        assert!(cap.admit() && cap.admit());
        assert!(!cap.admit(), "a third admission under a cap of 2");
        assert_eq!(cap.admitted(), 2);
        cap.release();
        assert_eq!(cap.admitted(), 1);
        assert!(cap.admit());
        assert!(!cap.admit());
        assert_eq!((cap.max(), cap.admitted()), (2, 2));
    }

    #[test]
    fn a_cap_of_zero_admits_nobody() {
        let cap = Cap::new(0);
        assert!(!cap.admit());
        assert_eq!(cap.admitted(), 0);
    }

    #[test]
    fn racing_admissions_never_pass_the_maximum() {
        let cap = std::sync::Arc::new(Cap::new(10));
        let admitted: usize = (0..8)
            .map(|_| {
                let cap = std::sync::Arc::clone(&cap);
                std::thread::spawn(move || (0..100).filter(|_| cap.admit()).count())
            })
            .collect::<Vec<_>>()
            .into_iter()
            .map(|t| t.join().unwrap())
            .sum();
        assert_eq!((admitted, cap.admitted()), (10, 10));
    }
}
