//! One proptest suite, instantiated for every counter by `suite!`: random programs run on
//! real threads through `livecount_support::check::check_program_with`, which compares the
//! counter with `Reference` and a model after every step and holds concurrent reads to the
//! gauge read guarantee.
//!
//! `PROPTEST_CASES` sets the cases per implementation (default
//! `livecount_tests::DEFAULT_CASES`); `--ignored` runs `HEAVY_FACTOR` times as many. Failures are saved to
//! `proptest_counters.proptest-regressions` next to this file and replayed first.

use livecount::{CpuSource, PerCpu, PerThread, Reference, Sharded, Single, Striped};
use livecount_support::check::check_program_with;
use livecount_tests::{config, program};
use proptest::prelude::*;
use proptest::test_runner::Config;

/// How many times the default cases the `#[ignore]`d heavy variants run.
const HEAVY_FACTOR: u32 = 16;

fn heavy() -> Config {
    let config = config();
    Config {
        cases: config.cases * HEAVY_FACTOR,
        ..config
    }
}

/// `suite!(name, Type)` checks `Type::default()`; `suite!(name, Type, constructor)` checks
/// the counters `constructor` builds (a non-default configuration).
macro_rules! suite {
    ($name:ident, $counter:ty) => {
        suite!($name, $counter, <$counter>::default);
    };
    ($name:ident, $counter:ty, $new:expr) => {
        mod $name {
            use super::*;

            proptest! {
                #![proptest_config(config())]

                #[test]
                fn agrees_with_reference(program in program()) {
                    check_program_with::<$counter>(&program, $new);
                }
            }

            proptest! {
                #![proptest_config(heavy())]

                #[test]
                #[ignore = "heavy: HEAVY_FACTOR times the cases; run with --ignored"]
                fn agrees_with_reference_heavy(program in program()) {
                    check_program_with::<$counter>(&program, $new);
                }
            }
        }
    };
}

suite!(single, Single);
suite!(sharded, Sharded);
suite!(striped, Striped);
suite!(per_thread, PerThread);
suite!(per_cpu, PerCpu);
// One cell: a thread on any other CPU counts on the overflow cell (two kinds of cell per read).
suite!(per_cpu_one_cell, PerCpu, || PerCpu::with_cpus(1));
// The fallback used where there is no CPU id: the thread index modulo two cells.
suite!(per_cpu_thread_index, PerCpu, || PerCpu::with_source(
    2,
    CpuSource::ThreadIndex
)
.expect("always available"));
suite!(reference, Reference);
// Every thread on one shard: all updates contend on one pair of atomics.
suite!(sharded_one_shard, Sharded, || Sharded::with_shards(1));
// Stripes capped at two: the at-the-cap path (`lock xadd` on a stripe) runs early.
suite!(striped_two_stripes, Striped, || Striped::with_max_stripes(
    2
));
