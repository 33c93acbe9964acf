//! Replaying fuzz corpora in ordinary tests: [`decode`] exactly as the fuzz targets do.

use std::any::Any;
use std::fs;
use std::io;
use std::panic::{self, AssertUnwindSafe};
use std::path::{Path, PathBuf};

use arbitrary::{Arbitrary, Unstructured};

use crate::check::program::Program;

/// Decodes fuzzer input the way `libfuzzer_sys::fuzz_target!(|p: Program| …)` (0.4.13) does:
/// inputs shorter than `Program::size_hint(0).0` are skipped (`None`), the rest go through
/// `Program::arbitrary_take_rest(Unstructured::new(bytes))`. That never fails for `Program`,
/// so every other input decodes.
///
/// ```
/// use livecount_support::check::{Op, Program, decode};
///
/// assert_eq!(decode(&[]), None); // libFuzzer skips it too
/// assert_eq!(decode(&[0]), Some(Program::new(0, vec![])));
/// let p = Program::new(3, vec![Op::Start { thread: 2 }, Op::Race { rounds: 4 }]);
/// assert_eq!(decode(&p.encode()), Some(p));
/// ```
pub fn decode(bytes: &[u8]) -> Option<Program> {
    if bytes.len() < <Program as Arbitrary<'_>>::size_hint(0).0 {
        return None;
    }
    Program::arbitrary_take_rest(Unstructured::new(bytes)).ok()
}

/// What [`replay_dir`] did.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Replayed {
    /// Files decoded and checked.
    pub checked: usize,
    /// Files libFuzzer would skip (too short to decode).
    pub skipped: usize,
}

/// Decodes every file in `dir` (sorted by name, subdirectories ignored) with [`decode`] and
/// passes each program to `check`. A panic in `check` is re-raised with the file's path in
/// front of its message. Errors if `dir` cannot be read.
///
/// ```no_run
/// use livecount::Sharded;
/// use livecount_support::check::{check_program, replay_dir};
///
/// let replayed = replay_dir("fuzz/corpus/sharded".as_ref(), check_program::<Sharded>).unwrap();
/// assert!(replayed.checked > 0);
/// ```
pub fn replay_dir(dir: &Path, mut check: impl FnMut(&Program)) -> io::Result<Replayed> {
    let mut replayed = Replayed::default();
    for path in files_in(dir)? {
        let bytes = fs::read(&path)?;
        let Some(program) = decode(&bytes) else {
            replayed.skipped += 1;
            continue;
        };
        if let Err(panic) = panic::catch_unwind(AssertUnwindSafe(|| check(&program))) {
            panic!("{}: {}", path.display(), panic_message(&*panic));
        }
        replayed.checked += 1;
    }
    Ok(replayed)
}

/// The regular files directly inside `dir`, sorted by name.
pub fn files_in(dir: &Path) -> io::Result<Vec<PathBuf>> {
    let mut files = Vec::new();
    for entry in fs::read_dir(dir)? {
        let entry = entry?;
        if entry.file_type()?.is_file() {
            files.push(entry.path());
        }
    }
    files.sort();
    Ok(files)
}

/// The message of a panic payload (`&str` or `String`), or a placeholder.
pub(crate) fn panic_message(payload: &(dyn Any + Send)) -> &str {
    payload
        .downcast_ref::<&str>()
        .copied()
        .or_else(|| payload.downcast_ref::<String>().map(String::as_str))
        .unwrap_or("(panic payload is not a string)")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::check::program::{MAX_OPS, Op};

    /// Deterministic pseudo-random bytes.
    fn bytes(seed: u64, len: usize) -> Vec<u8> {
        let mut rng = fastrand::Rng::with_seed(seed);
        (0..len).map(|_| rng.u8(..)).collect()
    }

    #[test]
    fn every_nonempty_input_decodes_to_a_normalised_program() {
        for len in 1..300 {
            for seed in 0..20 {
                let input = bytes(seed * 1000 + len as u64, len);
                let p = decode(&input).expect("decoding never fails");
                assert_eq!(p.normalized(), p);
                assert!(p.ops.len() <= MAX_OPS);
            }
        }
        for b in 0..=u8::MAX {
            assert!(decode(&[b]).is_some());
            assert!(decode(&[b; 64]).is_some());
        }
        assert_eq!(decode(&[]), None);
    }

    #[test]
    fn encode_round_trips() {
        for seed in 0..500 {
            let input = bytes(seed + 7, (seed as usize % 200) + 1);
            let p = decode(&input).unwrap();
            assert_eq!(decode(&p.encode()), Some(p.clone()), "{input:?}");
        }
        let every_variant = Program::new(
            4,
            vec![
                Op::Start { thread: 3 },
                Op::End {
                    thread: 2,
                    session: 200,
                },
                Op::Read { thread: 1 },
                Op::Burst { thread: 0, n: 16 },
                Op::Respawn { thread: 3 },
                Op::Race { rounds: 32 },
                Op::EndAtExit {
                    thread: 1,
                    session: 7,
                },
            ],
        );
        assert_eq!(decode(&every_variant.encode()), Some(every_variant));
    }

    #[test]
    fn replay_dir_names_the_failing_file() {
        let dir = std::env::temp_dir().join(format!("livecount-check-{}", std::process::id()));
        fs::create_dir_all(&dir).unwrap();
        fs::write(dir.join("a-empty"), b"").unwrap();
        fs::write(dir.join("b-ok"), Program::new(2, vec![]).encode()).unwrap();
        let bad = Program::new(2, vec![Op::Start { thread: 1 }]);
        fs::write(dir.join("c-bad"), bad.encode()).unwrap();
        let ok = replay_dir(&dir, |_| {}).unwrap();
        assert_eq!(
            ok,
            Replayed {
                checked: 2,
                skipped: 1
            }
        );
        let caught = panic::catch_unwind(|| {
            replay_dir(&dir, |p| assert!(p.ops.is_empty(), "has ops")).unwrap()
        })
        .unwrap_err();
        let message = panic_message(&*caught);
        assert!(
            message.contains("c-bad") && message.contains("has ops"),
            "{message}"
        );
        fs::remove_dir_all(&dir).unwrap();
        assert!(
            replay_dir(&dir, |_| {}).is_err(),
            "a missing dir is an error"
        );
    }
}
