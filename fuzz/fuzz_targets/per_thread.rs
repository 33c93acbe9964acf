//! Random programs on real threads against `livecount::PerThread`: see `livecount_check::check_program`.
#![no_main]

use livecount::PerThread;
use livecount_check::{Program, check_program};

libfuzzer_sys::fuzz_target!(|program: Program| check_program::<PerThread>(&program));
