//! Random programs on real threads against `livecount::Single`: see
//! `livecount_support::check::check_program`.
#![no_main]

use livecount::Single;
use livecount_support::check::{Program, check_program};

libfuzzer_sys::fuzz_target!(|program: Program| check_program::<Single>(&program));
