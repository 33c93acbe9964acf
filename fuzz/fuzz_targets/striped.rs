//! Random programs on real threads against `livecount::Striped`: see
//! `livecount_support::check::check_program`.
#![no_main]

use livecount::Striped;
use livecount_support::check::{Program, check_program};

libfuzzer_sys::fuzz_target!(|program: Program| check_program::<Striped>(&program));
