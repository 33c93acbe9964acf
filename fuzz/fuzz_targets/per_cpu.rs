//! Random programs on real threads against `livecount::PerCpu` (rseq where glibc registered
//! it): see `livecount_support::check::check_program`.
#![no_main]

use livecount::PerCpu;
use livecount_support::check::{Program, check_program};

libfuzzer_sys::fuzz_target!(|program: Program| check_program::<PerCpu>(&program));
