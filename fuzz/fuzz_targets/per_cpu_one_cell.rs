//! Random programs on real threads against a `livecount::PerCpu` with one per-CPU cell, so
//! threads on every other CPU count on its overflow cell: see
//! `livecount_support::check::check_program`.
#![no_main]

use livecount::PerCpu;
use livecount_support::check::{Program, check_program_with};

libfuzzer_sys::fuzz_target!(|program: Program| {
    check_program_with(&program, || PerCpu::with_cpus(1))
});
