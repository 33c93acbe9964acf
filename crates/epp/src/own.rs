//! [`OwnCount`]: the sessions one picker placed on one backend since that backend's last
//! report, counted without a lock.
//!
//! The count and the report it is relative to share one word (the report's sequence in
//! the high half, the count in the low half), so a placement is one compare-and-swap: two
//! choices at once never lose a placement made against the same report, and a placement
//! against a newer report starts the count again in the same step.

#[cfg(livecount_loom)]
use loom::sync::atomic::{AtomicU64, Ordering};
#[cfg(not(livecount_loom))]
use std::sync::atomic::{AtomicU64, Ordering};

/// The low half of the word: the count.
const COUNT: u64 = 0xFFFF_FFFF;

/// The report tag of `sequence`: its low 32 bits (a backend reporting twice a second wraps
/// them after 68 years; a wrap only makes one old count look current for one report).
fn tag(sequence: u64) -> u64 {
    sequence & COUNT
}

/// One picker's placements on one backend: since the backend's last report, and in all.
/// Two placements against report 7 read 2 for report 7; a placement against report 8 then
/// reads 0 for 7 and 1 for 8, and 3 in all (the unit tests below).
#[derive(Debug)]
pub(crate) struct OwnCount {
    /// `tag(sequence) << 32 | placed since that report`. Starts at 0: no placement, so
    /// the tag it names does not matter.
    since: AtomicU64,
    /// Every placement.
    placed: AtomicU64,
}

impl OwnCount {
    pub(crate) fn new() -> Self {
        OwnCount {
            since: AtomicU64::new(0),
            placed: AtomicU64::new(0),
        }
    }

    /// The placements counted against the report numbered `sequence`: 0 when the count
    /// is another report's (that report counted them itself, or a newer one will).
    pub(crate) fn since(&self, sequence: u64) -> u64 {
        // Relaxed: the word orders nothing else; a stale value is a count a moment old,
        // which a choice made a moment earlier would have read too.
        let word = self.since.load(Ordering::Relaxed);
        if word >> 32 == tag(sequence) {
            word & COUNT
        } else {
            0
        }
    }

    /// Counts a placement made while the backend's last report was numbered `sequence`.
    ///
    /// A count relative to another report restarts at 1. Racing the arrival of a report,
    /// a choice that read the old report can restart the count against it after one that
    /// read the new report did: the new report's count then reads 0 until its next
    /// placement. Placements made against one report are never lost, and [`placed`]
    /// counts every one.
    ///
    /// [`placed`]: OwnCount::placed
    pub(crate) fn place(&self, sequence: u64) {
        let tagged = tag(sequence) << 32;
        // Relaxed: read-modify-writes of one word follow its modification order, so no
        // increment is lost; nothing else is published through it.
        let _ = self
            .since
            .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |word| {
                Some(if word & !COUNT == tagged {
                    // Saturates: four billion placements between two reports is no fleet.
                    word + u64::from(word & COUNT < COUNT)
                } else {
                    tagged | 1
                })
            });
        self.placed.fetch_add(1, Ordering::Relaxed);
    }

    /// Every placement so far.
    pub(crate) fn placed(&self) -> u64 {
        self.placed.load(Ordering::Relaxed)
    }
}

#[cfg(all(test, not(livecount_loom)))]
mod tests {
    use super::*;

    #[test]
    fn counts_against_the_report_named_and_restarts_at_a_new_one() {
        let own = OwnCount::new();
        assert_eq!((own.since(0), own.since(1), own.placed()), (0, 0, 0));
        own.place(7);
        own.place(7);
        assert_eq!((own.since(7), own.since(6), own.since(8)), (2, 0, 0));
        own.place(8);
        assert_eq!((own.since(7), own.since(8), own.placed()), (0, 1, 3));
        // A restarted backend numbers its reports from 1 again: any other number restarts.
        own.place(1);
        assert_eq!((own.since(8), own.since(1), own.placed()), (0, 1, 4));
    }

    #[test]
    fn the_tag_is_the_low_half_of_the_sequence() {
        let own = OwnCount::new();
        own.place((5 << 32) | 9);
        assert_eq!(own.since(9), 1, "only the low 32 bits name the report");
        own.place(u64::MAX);
        assert_eq!(own.since(u64::MAX), 1);
        assert_eq!(own.since(0xFFFF_FFFF), 1);
    }

    #[test]
    fn the_count_saturates_instead_of_spilling_into_the_tag() {
        let own = OwnCount {
            since: AtomicU64::new((3 << 32) | (COUNT - 1)),
            placed: AtomicU64::new(0),
        };
        own.place(3);
        own.place(3);
        assert_eq!(own.since(3), COUNT);
        assert_eq!(own.since(4), 0, "the tag did not move");
    }
}

/// The interleavings of two and three choices: `scripts/loom.sh`.
#[cfg(all(test, livecount_loom))]
mod loom_models {
    use super::*;
    use loom::sync::Arc;
    use loom::thread;

    fn model(f: impl Fn() + Sync + Send + 'static) {
        let mut builder = loom::model::Builder::new();
        if builder.preemption_bound.is_none() {
            builder.preemption_bound = Some(3);
        }
        builder.check(f);
    }

    #[test]
    fn loom_concurrent_placements_on_one_report_are_all_counted() {
        model(|| {
            let own = Arc::new(OwnCount::new());
            let threads: Vec<_> = (0..3)
                .map(|_| {
                    let own = Arc::clone(&own);
                    thread::spawn(move || own.place(5))
                })
                .collect();
            for t in threads {
                t.join().unwrap();
            }
            assert_eq!((own.since(5), own.placed()), (3, 3));
        });
    }

    #[test]
    fn loom_a_placement_racing_a_new_report() {
        model(|| {
            let own = Arc::new(OwnCount::new());
            own.place(5);
            let old = {
                let own = Arc::clone(&own);
                thread::spawn(move || own.place(5))
            };
            let new = {
                let own = Arc::clone(&own);
                thread::spawn(move || {
                    own.place(6);
                    own.place(6);
                })
            };
            old.join().unwrap();
            new.join().unwrap();
            // Every placement is in the total; the word names one report, and its count is
            // that report's placements since the last restart: either the old choice came
            // first (6: 2) or last (5: 1, restarting over the new count).
            assert_eq!(own.placed(), 4);
            let counted = (own.since(5), own.since(6));
            assert!(
                counted == (0, 2) || counted == (1, 0) || counted == (0, 1),
                "{counted:?}"
            );
        });
    }
}
