//! Replays the committed fuzz corpus (and any crash artifacts) through the same checker the
//! fuzz targets run, on stable, as an ordinary test. A missing or empty corpus is a failure,
//! so this test cannot pass by checking nothing.

use std::path::Path;

use livecount::{Counter, PerCpu, PerThread, Reference, Sharded, Single, Striped};
use livecount_support::check::{Program, check_program_with, files_in, replay_dir};
use livecount_tests::{FUZZ_TARGETS, fuzz_dir};

/// Replays `fuzz/corpus/<target>/` (must hold at least one decodable input) and
/// `fuzz/artifacts/<target>/` (optional) through `check_program::<C>`.
fn replay<C: Counter + Default + 'static>(target: &str) {
    replay_with(target, C::default);
}

/// [`replay`] on counters made by `new`.
fn replay_with<C: Counter + 'static>(target: &str, new: impl Fn() -> C + Copy) {
    let check = |program: &Program| check_program_with(program, new);
    let corpus = fuzz_dir().join("corpus").join(target);
    let replayed = replay_dir(&corpus, check).unwrap_or_else(|e| {
        panic!(
            "cannot read the corpus {}: {e} (fuzz/run.sh builds one)",
            corpus.display()
        )
    });
    assert!(
        replayed.checked > 0,
        "the corpus {} has no decodable input ({replayed:?})",
        corpus.display()
    );
    let artifacts = fuzz_dir().join("artifacts").join(target);
    if artifacts.is_dir() {
        replay_dir(&artifacts, check).expect("read the artifacts");
    }
}

#[test]
fn single() {
    replay::<Single>("single");
}

#[test]
fn sharded() {
    replay::<Sharded>("sharded");
}

#[test]
fn striped() {
    replay::<Striped>("striped");
}

#[test]
fn per_thread() {
    replay::<PerThread>("per_thread");
}

#[test]
fn per_cpu() {
    replay::<PerCpu>("per_cpu");
}

#[test]
fn per_cpu_one_cell() {
    replay_with("per_cpu_one_cell", || PerCpu::with_cpus(1));
}

#[test]
fn reference() {
    replay::<Reference>("reference");
}

/// The replay above assumes `fuzz_targets/<target>.rs` makes the check named in
/// `FUZZ_TARGETS`; make sure it does, and that no target is left without a replay.
#[test]
fn every_fuzz_target_is_replayed_with_its_own_counter() {
    let targets = files_in(&fuzz_dir().join("fuzz_targets")).expect("read fuzz/fuzz_targets");
    let names: Vec<_> = targets
        .iter()
        .map(|path| path.file_stem().unwrap().to_string_lossy().into_owned())
        .collect();
    let mut expected: Vec<_> = FUZZ_TARGETS.iter().map(|(t, _)| t.to_string()).collect();
    expected.sort();
    assert_eq!(names, expected, "fuzz targets and replays differ");
    for (target, call) in FUZZ_TARGETS {
        let path = fuzz_dir().join("fuzz_targets").join(format!("{target}.rs"));
        let source = std::fs::read_to_string(&path).unwrap();
        assert!(
            source.contains(call),
            "{} does not call {call}",
            Path::new(&path).display()
        );
    }
}
