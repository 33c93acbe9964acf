//! [`Program`] and [`Op`]: what [`check_program`](crate::check::check_program) runs.
//!
//! A program is a handful of virtual threads (each a real OS thread when it runs) and a list
//! of operations, each addressed to one thread. Every field is a raw `u8` that the executor
//! reduces by modulo or clamping, so any value — from a fuzzer, a proptest strategy or a
//! hand-written test — is a valid program, and decoding arbitrary bytes never fails.

use arbitrary::{Arbitrary, Unstructured};

/// Fewest virtual threads a program runs on.
pub const MIN_THREADS: u8 = 2;
/// Most virtual threads a program runs on.
pub const MAX_THREADS: u8 = 4;
/// Most sessions one [`Op::Burst`] starts.
pub const MAX_BURST: u8 = 16;
/// Most start/end rounds each thread runs in one [`Op::Race`].
pub const MAX_RACE_ROUNDS: u8 = 32;
/// Most operations a program runs; longer programs are truncated by normalisation.
pub const MAX_OPS: usize = 256;

/// One step of a [`Program`]. Thread numbers are taken modulo the program's thread count.
///
/// ```
/// use livecount_support::check::Op;
///
/// // Thread 0 starts a session, thread 1 ends it: the token crosses threads.
/// let ops = [Op::Start { thread: 0 }, Op::End { thread: 1, session: 0 }];
/// assert_eq!(ops[1].thread(), Some(1));
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Arbitrary)]
pub enum Op {
    /// Thread `thread` starts one session; it joins the list of open sessions.
    Start {
        /// The thread that calls `increment`.
        thread: u8,
    },
    /// Thread `thread` ends the open session at index `session % open` of the list of open
    /// sessions (oldest first), whichever thread started it. Does nothing if none is open.
    End {
        /// The thread that calls `decrement`.
        thread: u8,
        /// Which open session to end, modulo the number open.
        session: u8,
    },
    /// Thread `thread` calls `load`, `totals` and `is_idle` and compares them with the model.
    Read {
        /// The reading thread.
        thread: u8,
    },
    /// Thread `thread` starts `n` sessions back to back (`n` clamped to `1..=MAX_BURST`).
    Burst {
        /// The thread that calls `increment`.
        thread: u8,
        /// How many sessions.
        n: u8,
    },
    /// Thread `thread` exits and a fresh OS thread takes its place, so the counter's
    /// per-thread state (thread indices, per-thread cells) is handed over to a new thread.
    Respawn {
        /// The thread to replace.
        thread: u8,
    },
    /// Every thread runs `rounds` start/end rounds at once (clamped to `1..=MAX_RACE_ROUNDS`),
    /// handing sessions to each other, while a reader checks every read against the gauge
    /// read guarantee. Sessions open before the race stay open throughout it.
    Race {
        /// Rounds per thread.
        rounds: u8,
    },
    /// Thread `thread` exits and, while it tears down its thread-locals, a thread-local
    /// destructor ends the open session at index `session % open` (after the counter's own
    /// per-thread registration may already be gone, as when a runtime's worker thread drops
    /// the tasks it still holds). A fresh OS thread takes its place. With no session open it
    /// is a plain [`Op::Respawn`].
    EndAtExit {
        /// The thread that exits.
        thread: u8,
        /// Which open session to end, modulo the number open.
        session: u8,
    },
}

/// Number of [`Op`] variants, in declaration order (the derived `Arbitrary` picks a variant
/// from a `u32` as `(tag * VARIANTS) >> 32`).
const VARIANTS: u64 = 7;

impl Op {
    /// The thread this operation runs on, or `None` for [`Op::Race`], which runs on all.
    pub fn thread(&self) -> Option<u8> {
        match *self {
            Op::Start { thread }
            | Op::End { thread, .. }
            | Op::Read { thread }
            | Op::Burst { thread, .. }
            | Op::Respawn { thread }
            | Op::EndAtExit { thread, .. } => Some(thread),
            Op::Race { .. } => None,
        }
    }

    /// This operation with its thread reduced modulo `threads` and its counts clamped.
    /// Idempotent: normalising twice changes nothing.
    pub fn normalized(&self, threads: u8) -> Op {
        let t = |thread: u8| thread % threads.max(1);
        match *self {
            Op::Start { thread } => Op::Start { thread: t(thread) },
            Op::End { thread, session } => Op::End {
                thread: t(thread),
                session,
            },
            Op::Read { thread } => Op::Read { thread: t(thread) },
            Op::Burst { thread, n } => Op::Burst {
                thread: t(thread),
                n: wrap_into(n, MAX_BURST),
            },
            Op::Respawn { thread } => Op::Respawn { thread: t(thread) },
            Op::Race { rounds } => Op::Race {
                rounds: wrap_into(rounds, MAX_RACE_ROUNDS),
            },
            Op::EndAtExit { thread, session } => Op::EndAtExit {
                thread: t(thread),
                session,
            },
        }
    }

    /// The variant's position in declaration order and its fields, as the derived
    /// `Arbitrary` reads them.
    fn parts(&self) -> (u64, Vec<u8>) {
        match *self {
            Op::Start { thread } => (0, vec![thread]),
            Op::End { thread, session } => (1, vec![thread, session]),
            Op::Read { thread } => (2, vec![thread]),
            Op::Burst { thread, n } => (3, vec![thread, n]),
            Op::Respawn { thread } => (4, vec![thread]),
            Op::Race { rounds } => (5, vec![rounds]),
            Op::EndAtExit { thread, session } => (6, vec![thread, session]),
        }
    }
}

/// `n` mapped into `1..=max` so that values already in range are unchanged.
fn wrap_into(n: u8, max: u8) -> u8 {
    (n.max(1) - 1) % max + 1
}

/// Virtual threads and the operations they run; see [`check_program`](crate::check::check_program).
///
/// Build one with [`Program::new`] (which normalises it), decode one from fuzzer bytes with
/// [`decode`](crate::check::decode), or generate them with the proptest strategy in the
/// `livecount-tests` crate.
///
/// ```
/// use livecount_support::check::{Op, Program};
///
/// let program = Program::new(7, vec![Op::Burst { thread: 9, n: 40 }]);
/// assert_eq!(program.threads, 3); // 7 is mapped into 2..=4
/// assert_eq!(program.ops, [Op::Burst { thread: 0, n: 8 }]);
/// ```
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Program {
    /// Number of virtual threads, `MIN_THREADS..=MAX_THREADS` once normalised.
    pub threads: u8,
    /// The operations, run one at a time in order (each waits for the previous one).
    pub ops: Vec<Op>,
}

impl Program {
    /// A normalised program: `threads` mapped into `MIN_THREADS..=MAX_THREADS`, every
    /// operation normalised and the list truncated to `MAX_OPS`.
    pub fn new(threads: u8, ops: Vec<Op>) -> Program {
        let span = MAX_THREADS - MIN_THREADS + 1;
        let threads = if (MIN_THREADS..=MAX_THREADS).contains(&threads) {
            threads
        } else {
            MIN_THREADS + threads % span
        };
        let ops = ops
            .iter()
            .take(MAX_OPS)
            .map(|op| op.normalized(threads))
            .collect();
        Program { threads, ops }
    }

    /// This program, normalised as by [`Program::new`].
    pub fn normalized(&self) -> Program {
        Program::new(self.threads, self.ops.clone())
    }

    /// The bytes that [`decode`](crate::check::decode) (and so a libFuzzer target taking a
    /// `Program`) turns back into this program, once normalised. Use it to seed a corpus.
    ///
    /// ```
    /// use livecount_support::check::{Op, Program, decode};
    ///
    /// let program = Program::new(2, vec![Op::Start { thread: 0 }, Op::End { thread: 1, session: 0 }]);
    /// assert_eq!(decode(&program.encode()), Some(program));
    /// ```
    pub fn encode(&self) -> Vec<u8> {
        let program = self.normalized();
        let mut bytes = vec![program.threads];
        for op in &program.ops {
            let (variant, fields) = op.parts();
            // Vec::arbitrary_take_rest reads a `bool` (low bit of a byte) before each element.
            bytes.push(1);
            // The smallest tag for which `(tag * VARIANTS) >> 32 == variant`.
            let tag = (variant << 32).div_ceil(VARIANTS) as u32;
            bytes.extend_from_slice(&tag.to_le_bytes());
            bytes.extend_from_slice(&fields);
        }
        bytes
    }
}

impl<'a> Arbitrary<'a> for Program {
    fn arbitrary(u: &mut Unstructured<'a>) -> arbitrary::Result<Self> {
        let threads = u8::arbitrary(u)?;
        let ops = Vec::<Op>::arbitrary(u)?;
        Ok(Program::new(threads, ops))
    }

    fn arbitrary_take_rest(mut u: Unstructured<'a>) -> arbitrary::Result<Self> {
        let threads = u8::arbitrary(&mut u)?;
        let ops = Vec::<Op>::arbitrary_take_rest(u)?;
        Ok(Program::new(threads, ops))
    }

    fn size_hint(depth: usize) -> (usize, Option<usize>) {
        arbitrary::size_hint::and(
            <u8 as Arbitrary<'a>>::size_hint(depth),
            <Vec<Op> as Arbitrary<'a>>::size_hint(depth),
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn normalisation_is_idempotent_and_in_range() {
        for threads in 0..=u8::MAX {
            for raw in [0, 1, 2, 15, 16, 17, 31, 32, 33, 200, 255] {
                let ops = vec![
                    Op::Start { thread: raw },
                    Op::End {
                        thread: raw,
                        session: raw,
                    },
                    Op::Burst {
                        thread: raw,
                        n: raw,
                    },
                    Op::Race { rounds: raw },
                ];
                let p = Program::new(threads, ops);
                assert!((MIN_THREADS..=MAX_THREADS).contains(&p.threads));
                assert_eq!(p.normalized(), p);
                for op in &p.ops {
                    assert!(op.thread().is_none_or(|t| t < p.threads));
                    match *op {
                        Op::Burst { n, .. } => assert!((1..=MAX_BURST).contains(&n)),
                        Op::Race { rounds } => assert!((1..=MAX_RACE_ROUNDS).contains(&rounds)),
                        _ => {}
                    }
                }
            }
        }
    }

    #[test]
    fn long_programs_are_truncated() {
        let p = Program::new(2, vec![Op::Read { thread: 0 }; MAX_OPS + 10]);
        assert_eq!(p.ops.len(), MAX_OPS);
    }

    #[test]
    fn in_range_counts_are_kept() {
        assert_eq!(wrap_into(1, 16), 1);
        assert_eq!(wrap_into(16, 16), 16);
        assert_eq!(wrap_into(17, 16), 1);
        assert_eq!(wrap_into(0, 16), 1);
    }
}
