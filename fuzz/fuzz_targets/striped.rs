//! Random programs on real threads against `livecount::Striped`: see `livecount_check::check_program`.
#![no_main]

use livecount::Striped;
use livecount_check::{Program, check_program};

libfuzzer_sys::fuzz_target!(|program: Program| check_program::<Striped>(&program));
