//! Random programs on real threads against `livecount::Sharded`: see `livecount_check::check_program`.
#![no_main]

use livecount::Sharded;
use livecount_check::{Program, check_program};

libfuzzer_sys::fuzz_target!(|program: Program| check_program::<Sharded>(&program));
