//! `PerCpu`'s restartable-sequence path as types that exist on every platform: [`Sequence`]
//! (what the critical section needs, packed into the counter) and [`Section`] (one update's
//! target, unpacked). Off the rseq path (`livecount_rseq` unset by `build.rs`: not x86-64
//! Linux, or under a model checker) a `Sequence` is empty and a `Section` cannot exist, so
//! the counter's code is the same everywhere and the compiler drops the dead branch.

pub(super) use imp::{Sequence, available, cpu_id};

#[cfg(livecount_rseq)]
mod imp {
    use crossbeam_utils::CachePadded;

    use crate::cpu::rseq;
    use crate::pair::{Half, Pair};
    use crate::sync::AtomicU64;

    /// Whether glibc registered an rseq area for this process's threads.
    pub(in crate::per_cpu) fn available() -> bool {
        rseq::offset().is_some()
    }

    /// The calling thread's CPU from its rseq area (`None` on a thread without a registered
    /// area). Call only where [`available`].
    #[inline]
    pub(in crate::per_cpu) fn cpu_id() -> Option<usize> {
        // -1 (uninitialised) and -2 (registration failed) are no CPU's cell: the caller's
        // lookup misses and the update goes to the overflow cell, as before the split.
        Some(rseq::cpu_id() as usize)
    }

    /// For each half, cell 0's address (exposed: the `asm!` block takes it as a plain register
    /// value) in the low 48 bits and the number of cells above them; both words are 0 when the
    /// counter's path is not `Path::Rseq`, so an update tells the paths apart with the one
    /// load it needs anyway. The cells are one heap allocation that never moves or shrinks
    /// while the counter lives.
    ///
    /// Why packed: every load counts. The critical section's update is bound by load
    /// throughput (the thread's area, its CPU id, the cell, and this word), and with the
    /// path's tag, the rseq offset and the cell count loaded separately it ran at about half
    /// `PerThread`'s rate on a 2-core AMD EPYC VM; unpacking is two ALU operations.
    #[derive(Clone, Copy, Debug)]
    pub(in crate::per_cpu) struct Sequence {
        words: [u64; 2],
    }

    impl Sequence {
        /// Bits of a word holding the address (x86-64 user space without 5-level paging).
        const ADDRESS_BITS: u32 = 48;

        /// No critical section: the counter takes another path.
        pub(in crate::per_cpu) const NONE: Sequence = Sequence { words: [0; 2] };

        /// The words for `cells`, or `None` if they do not fit (an address above 2^48, or
        /// 2^16 cells or more): then the counter cannot take the critical section.
        pub(in crate::per_cpu) fn of(cells: &[CachePadded<Pair>]) -> Option<Sequence> {
            let count = u64::try_from(cells.len())
                .ok()
                .filter(|&n| n < 1 << (64 - Self::ADDRESS_BITS))?;
            let mut words = [0; 2];
            for (word, half) in words.iter_mut().zip([Half::Started, Half::Ended]) {
                let address = std::ptr::from_ref(cells[0].half(half)).expose_provenance() as u64;
                if address >> Self::ADDRESS_BITS != 0 {
                    return None;
                }
                *word = address | count << Self::ADDRESS_BITS;
            }
            Some(Sequence { words })
        }

        /// The critical section for `half`, or `None` for [`Self::NONE`].
        #[inline(always)]
        pub(in crate::per_cpu) fn unpack(self, half: Half) -> Option<Section> {
            let word = match half {
                Half::Started => self.words[0],
                Half::Ended => self.words[1],
            };
            (word != 0).then(|| {
                let address = word & ((1 << Self::ADDRESS_BITS) - 1);
                Section {
                    field: std::ptr::with_exposed_provenance(address as usize),
                    limit: (word >> Self::ADDRESS_BITS) << rseq::CELL_SHIFT,
                }
            })
        }
    }

    /// One update's target: cell 0's half and the byte offset past the last cell.
    #[derive(Clone, Copy, Debug)]
    pub(in crate::per_cpu) struct Section {
        pub(in crate::per_cpu) field: *const AtomicU64,
        pub(in crate::per_cpu) limit: u64,
    }

    impl Section {
        /// Runs the critical section: adds 1 to the calling CPU's cell's half, or returns
        /// `false` (adding nothing) on a thread without an area or a CPU without a cell.
        ///
        /// # Safety
        ///
        /// - `self` was unpacked from a [`Sequence::of`] some cells that are still alive and
        ///   unmoved, and that nothing writes except through this function;
        /// - [`available`] is true (the calling thread's rseq area is glibc's).
        #[inline(always)]
        #[allow(unsafe_code)]
        pub(in crate::per_cpu) unsafe fn add(self) -> bool {
            // SAFETY: the caller's contract is `add_on_this_cpu`'s: `area()` is this
            // thread's area since `available()`, and `field`/`limit` describe live cells of
            // `1 << CELL_SHIFT` bytes (asserted below) written by nothing else.
            unsafe { rseq::add_on_this_cpu(rseq::area(), self.field, self.limit) }
        }
    }

    // A cell's stride is what the rseq sequence shifts the CPU id by.
    const _: () = assert!(size_of::<CachePadded<Pair>>() == 1 << rseq::CELL_SHIFT);
}

#[cfg(not(livecount_rseq))]
// Not mutated (cargo-mutants reads `mutants::skip`; no build sets `cfg(mutants)`):
// compiled only where rseq is not (not x86-64 Linux with glibc 2.35+), so never here.
#[cfg_attr(mutants, mutants::skip)]
mod imp {
    use crossbeam_utils::CachePadded;

    use crate::pair::{Half, Pair};

    /// No restartable sequences on this platform (or a model checker's CPU instead).
    pub(in crate::per_cpu) fn available() -> bool {
        false
    }

    /// Never called: the rseq sources are unavailable here.
    #[inline]
    pub(in crate::per_cpu) fn cpu_id() -> Option<usize> {
        None
    }

    /// Always empty: no counter takes the critical section here.
    #[derive(Clone, Copy, Debug)]
    pub(in crate::per_cpu) struct Sequence;

    impl Sequence {
        /// The only sequence there is.
        pub(in crate::per_cpu) const NONE: Sequence = Sequence;

        /// Never a sequence: the counter takes another path.
        pub(in crate::per_cpu) fn of(_cells: &[CachePadded<Pair>]) -> Option<Sequence> {
            None
        }

        /// Never a section.
        #[inline(always)]
        pub(in crate::per_cpu) fn unpack(self, _half: Half) -> Option<Section> {
            None
        }
    }

    /// Uninhabited: there is no critical section to run.
    #[derive(Clone, Copy, Debug)]
    pub(in crate::per_cpu) enum Section {}

    impl Section {
        /// Unreachable (no `Section` exists).
        ///
        /// # Safety
        ///
        /// None needed; `unsafe` to match the rseq platforms' signature.
        #[inline(always)]
        #[allow(unsafe_code)]
        pub(in crate::per_cpu) unsafe fn add(self) -> bool {
            match self {}
        }
    }
}

#[cfg(all(test, livecount_rseq))]
mod tests {
    use crossbeam_utils::CachePadded;

    use super::*;
    use crate::pair::{Half, Pair};

    /// The packed word gives back cell 0's half and the cells' length in bytes, and a counter
    /// off the rseq path has none.
    #[test]
    fn the_sequence_word_unpacks_to_cell_zero_and_the_length() {
        let cells: Box<[CachePadded<Pair>]> =
            (0..3).map(|_| CachePadded::new(Pair::new())).collect();
        let sequence = Sequence::of(&cells).expect("a heap address below 2^48");
        for half in [Half::Started, Half::Ended] {
            let section = sequence.unpack(half).unwrap();
            assert!(std::ptr::eq(section.field, cells[0].half(half)));
            assert_eq!(section.limit, 3 * 128);
        }
        assert!(Sequence::NONE.unpack(Half::Started).is_none());
        let too_many: Box<[CachePadded<Pair>]> = (0..1 << 16)
            .map(|_| CachePadded::new(Pair::new()))
            .collect();
        assert!(Sequence::of(&too_many).is_none());
    }
}
