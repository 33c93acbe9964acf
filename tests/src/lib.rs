//! Integration tests for livecount live under `tests/`; this library holds what they share:
//! the proptest [`Strategy`] for [`Program`]s, the proptest configuration, and the paths of
//! the fuzz corpus.
#![warn(missing_docs)]
#![forbid(unsafe_code)]

use std::path::PathBuf;

use livecount_support::check::{MAX_BURST, MAX_RACE_ROUNDS, MAX_THREADS, MIN_THREADS, Op, Program};
use proptest::prelude::*;
use proptest::test_runner::Config;

/// Proptest cases per implementation when `PROPTEST_CASES` is unset.
pub const DEFAULT_CASES: u32 = 256;

/// Most operations in a generated program.
pub const MAX_GENERATED_OPS: usize = 48;

/// The proptest configuration: `PROPTEST_CASES` if set, else [`DEFAULT_CASES`].
///
/// `Config::with_cases` (and a struct literal with `cases`) ignores `PROPTEST_CASES`, so it is
/// read here; everything else keeps proptest's defaults, including regression files next to
/// the test source.
pub fn config() -> Config {
    let cases = std::env::var("PROPTEST_CASES")
        .ok()
        .map(|v| v.parse().expect("PROPTEST_CASES must be a number"))
        .unwrap_or(DEFAULT_CASES);
    Config {
        cases,
        ..Config::default()
    }
}

/// One operation. Starts and ends dominate so that programs keep sessions open; races and
/// respawns are rarer because they cost the most.
pub fn op() -> impl Strategy<Value = Op> {
    let thread = || 0..MAX_THREADS;
    prop_oneof![
        4 => thread().prop_map(|thread| Op::Start { thread }),
        4 => (thread(), any::<u8>()).prop_map(|(thread, session)| Op::End { thread, session }),
        2 => thread().prop_map(|thread| Op::Read { thread }),
        1 => (thread(), 1..=MAX_BURST).prop_map(|(thread, n)| Op::Burst { thread, n }),
        1 => thread().prop_map(|thread| Op::Respawn { thread }),
        1 => (1..=MAX_RACE_ROUNDS).prop_map(|rounds| Op::Race { rounds }),
        1 => (thread(), any::<u8>()).prop_map(|(thread, session)| Op::EndAtExit { thread, session }),
    ]
}

/// A program of 2–4 threads and up to [`MAX_GENERATED_OPS`] operations, normalised.
pub fn program() -> impl Strategy<Value = Program> {
    (
        MIN_THREADS..=MAX_THREADS,
        proptest::collection::vec(op(), 0..=MAX_GENERATED_OPS),
    )
        .prop_map(|(threads, ops)| Program::new(threads, ops))
}

/// The fuzz targets, each with the check its `fuzz_targets/<target>.rs` makes (the counter
/// it runs programs on).
pub const FUZZ_TARGETS: [(&str, &str); 7] = [
    ("single", "check_program::<Single>"),
    ("sharded", "check_program::<Sharded>"),
    ("striped", "check_program::<Striped>"),
    ("per_thread", "check_program::<PerThread>"),
    ("per_cpu", "check_program::<PerCpu>"),
    (
        "per_cpu_one_cell",
        "check_program_with(&program, || PerCpu::with_cpus(1))",
    ),
    ("reference", "check_program::<Reference>"),
];

/// The repository's `fuzz/` directory.
pub fn fuzz_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../fuzz")
}
