//! Random programs on real threads against `livecount::Reference`: see `livecount_check::check_program`.
#![no_main]

use livecount::Reference;
use livecount_check::{Program, check_program};

libfuzzer_sys::fuzz_target!(|program: Program| check_program::<Reference>(&program));
