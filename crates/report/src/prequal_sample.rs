//! [`Sample`]: one (RIF, latency, time stamp) sample of a
//! [`PrequalEstimator`](crate::PrequalEstimator), packed into the one `u64` a slot holds.
//!
//! | bits | field |
//! | --- | --- |
//! | 63 | present (an empty slot is 0) |
//! | 43..=62 | RIF, ≤ 2²⁰ − 1 |
//! | 16..=42 | latency in microseconds, ≤ 2²⁷ − 1 |
//! | 0..=15 | seconds since the estimator's origin, modulo 2¹⁶ |

/// The presence bit: an empty slot is 0.
const PRESENT: u64 = 1 << 63;
/// RIF: bits 43..=62.
const RIF_SHIFT: u32 = 43;
const RIF_BITS: u32 = 20;
/// Latency in microseconds: bits 16..=42.
const LATENCY_SHIFT: u32 = 16;
const LATENCY_BITS: u32 = 27;
/// Seconds since the origin, modulo 2¹⁶: bits 0..=15.
pub(crate) const STAMP_MASK: u64 = 0xFFFF;
/// A stamp less than this far behind `now` (modulo 2¹⁶) is in the past; further is a
/// stamp from a writer whose clock read came after the reader's, so it is fresh.
const PAST_HALF: u16 = 1 << 15;
/// The largest RIF a sample holds.
pub(crate) const MAX_RIF: u64 = (1 << RIF_BITS) - 1;
/// The longest latency a sample holds, in microseconds.
pub(crate) const MAX_LATENCY_US: u64 = (1 << LATENCY_BITS) - 1;

/// One sample, as packed into a slot's word.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Sample {
    /// ≤ `MAX_RIF`.
    pub(crate) rif: u64,
    /// ≤ `MAX_LATENCY_US`.
    pub(crate) latency_us: u64,
    /// Seconds since the origin, modulo 2¹⁶.
    pub(crate) stamp: u16,
}

impl Sample {
    pub(crate) fn pack(self) -> u64 {
        PRESENT
            | (self.rif << RIF_SHIFT)
            | (self.latency_us << LATENCY_SHIFT)
            | u64::from(self.stamp)
    }

    /// The sample in `word`; `None` for an empty slot.
    pub(crate) fn unpack(word: u64) -> Option<Self> {
        (word & PRESENT != 0).then_some(Sample {
            rif: (word >> RIF_SHIFT) & MAX_RIF,
            latency_us: (word >> LATENCY_SHIFT) & MAX_LATENCY_US,
            stamp: (word & STAMP_MASK) as u16,
        })
    }

    /// Older than `max_age` seconds at `now`. A stamp ahead of `now` (a writer read the
    /// clock after the reader did) is fresh.
    pub(crate) fn expired(self, now: u16, max_age: u16) -> bool {
        let age = now.wrapping_sub(self.stamp);
        age > max_age && age < PAST_HALF
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fields_never_bleed_into_each_other() {
        for sample in [
            Sample {
                rif: MAX_RIF,
                latency_us: 0,
                stamp: 0,
            },
            Sample {
                rif: 0,
                latency_us: MAX_LATENCY_US,
                stamp: 0,
            },
            Sample {
                rif: 0,
                latency_us: 0,
                stamp: u16::MAX,
            },
            Sample {
                rif: 0,
                latency_us: 0,
                stamp: 0,
            },
            Sample {
                rif: MAX_RIF,
                latency_us: MAX_LATENCY_US,
                stamp: u16::MAX,
            },
        ] {
            assert_eq!(Sample::unpack(sample.pack()), Some(sample));
        }
        assert_eq!(Sample::unpack(0), None);
        assert_eq!(
            Sample::unpack(u64::MAX >> 1),
            None,
            "no presence bit, no sample"
        );
    }

    #[test]
    fn a_stamp_expires_past_max_age_and_one_ahead_is_fresh() {
        let at = |stamp| Sample {
            rif: 1,
            latency_us: 1,
            stamp,
        };
        assert!(!at(100).expired(160, 60), "exactly max_age old");
        assert!(at(100).expired(161, 60));
        assert!(!at(100).expired(100, 60));
        assert!(!at(101).expired(100, 60), "ahead of the reader's clock");
        assert!(!at(u16::MAX).expired(3, 60), "60 s old across the wrap");
        assert!(at(u16::MAX).expired(61, 60), "62 s old across the wrap");
        // Exactly half the circle behind is the past (expired); past half, the future.
        assert!(at(0).expired(PAST_HALF - 1, 60));
        assert!(!at(0).expired(PAST_HALF, 60));
    }
}
