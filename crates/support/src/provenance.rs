//! Where a committed result came from, so a report can say it: the CPU and its cores, the
//! toolchain, the commit (marked `-dirty` when tracked files outside `results/` differ from
//! it) and the date; and the one check every writer of committed results makes first,
//! [`commit_for`]: results come from a clean commit.
//! The picker (`livecount-picker`), the simulator's `lbsim`, `lbtestbed` and the end-to-end
//! balancer tests stamp their reports with it; `scripts/provenance.py` is its twin for the
//! scripts (the mutation report, the contention audit) and must agree with it.
//!
//! ```
//! let cpu = livecount_support::provenance::cpu_model();
//! assert!(!cpu.is_empty());
//! assert!(livecount_support::provenance::cores() >= 1);
//! assert!(livecount_support::provenance::label(&cpu, 2).ends_with("-2c"));
//! ```

use std::fmt;
use std::path::{Component, Path, PathBuf};
use std::process::Command;
use std::time::{SystemTime, UNIX_EPOCH};

/// Available parallelism (at least 1).
pub fn cores() -> usize {
    std::thread::available_parallelism().map_or(1, |n| n.get())
}

/// `model name` from `/proc/cpuinfo`, or the architecture where there is none.
pub fn cpu_model() -> String {
    std::fs::read_to_string("/proc/cpuinfo")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("model name"))
                .and_then(|l| l.split_once(':'))
                .map(|(_, v)| v.trim().to_owned())
        })
        .filter(|m| !m.is_empty())
        .unwrap_or_else(|| std::env::consts::ARCH.to_owned())
}

/// A directory name for a machine: `"AMD EPYC 9R14 96-Core Processor"`, 2 cores →
/// `"amd-epyc-9r14-96-core-processor-2c"`.
///
/// ```
/// assert_eq!(
///     livecount_support::provenance::label("AMD EPYC 9R14 96-Core Processor", 2),
///     "amd-epyc-9r14-96-core-processor-2c"
/// );
/// ```
pub fn label(cpu_model: &str, cores: usize) -> String {
    let mut slug = String::new();
    for ch in cpu_model.chars() {
        if ch.is_ascii_alphanumeric() {
            slug.push(ch.to_ascii_lowercase());
        } else if !slug.is_empty() && !slug.ends_with('-') {
            slug.push('-');
        }
    }
    format!("{}-{cores}c", slug.trim_end_matches('-'))
}

/// `rustc --version`, or `"unknown"`.
pub fn rustc() -> String {
    command("rustc", &["--version"], None).unwrap_or_else(|| "unknown".into())
}

/// The checkout's short commit, `-dirty` if tracked files outside the top-level `results/`
/// differ from it (regenerating committed results over themselves is not a change to the
/// code that made them); `"unknown"` outside a git checkout (or without git).
pub fn commit() -> String {
    commit_in(None)
}

/// [`commit`] of the checkout containing `dir`.
pub fn commit_in(dir: Option<&Path>) -> String {
    let Some(head) = command("git", &["rev-parse", "--short", "HEAD"], dir) else {
        return "unknown".into();
    };
    let dirty = changed_files(dir).is_none_or(|files| !files.is_empty());
    if dirty { format!("{head}-dirty") } else { head }
}

/// The commit to stamp on results written to `dest`, once the check every writer of
/// committed results makes before it starts has passed: results come from a clean commit.
///
/// Where `dest` lies in the top-level `results/` of a git checkout, that checkout must be
/// clean as [`commit`] counts it: no tracked file outside `results/` differs from `HEAD`,
/// staged or not. Untracked files do not count (the code a writer runs is tracked), nor do
/// committed results being rewritten (a writer regenerates its own and the next one must
/// still run). Then the answer is the bare commit; otherwise a [`DirtyTree`] naming the
/// changed files. Anywhere else (`target/`, a scratch directory) nothing is refused and the
/// answer is [`commit`], `-dirty` and all.
///
/// Call it before the work and stamp what it returns: a run that takes an hour was built
/// from the tree as it was when it started, whatever happens to the checkout meanwhile.
///
/// ```
/// use livecount_support::provenance;
///
/// // Outside any checkout's results/, nothing is refused.
/// let scratch = std::env::temp_dir().join("livecount-doc-scratch");
/// let commit = provenance::commit_for(&scratch)?;
/// assert!(!commit.is_empty());
/// # Ok::<(), provenance::DirtyTree>(())
/// ```
pub fn commit_for(dest: &Path) -> Result<String, DirtyTree> {
    let Some(top) = results_checkout(dest) else {
        return Ok(commit());
    };
    let files = changed_files(Some(&top));
    let head = command("git", &["rev-parse", "--short", "HEAD"], Some(&top));
    match (files, head) {
        (Some(files), Some(head)) if files.is_empty() => Ok(head),
        (files, _) => Err(DirtyTree {
            dest: dest.to_path_buf(),
            top,
            files: files.unwrap_or_default(),
        }),
    }
}

/// Why [`commit_for`] refused: committed results would have come from a tree that is not a
/// commit.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DirtyTree {
    dest: PathBuf,
    top: PathBuf,
    files: Vec<String>,
}

impl DirtyTree {
    /// The changed tracked files, as `git status --porcelain` lists them (`" M crates/x.rs"`);
    /// empty if git could not say.
    pub fn files(&self) -> &[String] {
        &self.files
    }
}

impl fmt::Display for DirtyTree {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        const SHOWN: usize = 10;
        write!(
            f,
            "refusing to write {}: it is in the committed results of {}, ",
            self.dest.display(),
            self.top.display()
        )?;
        if self.files.is_empty() {
            write!(f, "and git could not say whether that checkout is clean")?;
        } else {
            write!(f, "whose tracked files outside results/ differ from HEAD:")?;
            for file in self.files.iter().take(SHOWN) {
                write!(f, "\n    {file}")?;
            }
            if self.files.len() > SHOWN {
                write!(f, "\n    … and {} more", self.files.len() - SHOWN)?;
            }
        }
        write!(
            f,
            "\nResults come from a clean commit: commit these changes (or set them aside) and \
             run again, or write the results outside results/"
        )
    }
}

impl std::error::Error for DirtyTree {}

/// The tracked files outside the top-level `results/` that differ from `HEAD`, in the
/// checkout containing `dir` (`None` if git cannot say). `--no-optional-locks`: a status
/// taken while others work in the same checkout must not hold its index lock.
fn changed_files(dir: Option<&Path>) -> Option<Vec<String>> {
    let status = command_raw(
        "git",
        &[
            "--no-optional-locks",
            "status",
            "--porcelain",
            "--untracked-files=no",
            "--",
            ":(top,exclude)results",
        ],
        dir,
    )?;
    Some(status.lines().map(str::to_owned).collect())
}

/// The top directory of the checkout whose top-level `results/` holds `dest` (which need
/// not exist yet), if one does.
fn results_checkout(dest: &Path) -> Option<PathBuf> {
    let dest = std::path::absolute(dest).ok()?;
    let mut existing = dest.as_path();
    while !existing.is_dir() {
        existing = existing.parent()?;
    }
    let mut real = existing.canonicalize().ok()?;
    for part in dest.strip_prefix(existing).ok()?.components() {
        match part {
            Component::ParentDir => {
                real.pop();
            }
            Component::Normal(name) => real.push(name),
            _ => {}
        }
    }
    let top = command("git", &["rev-parse", "--show-toplevel"], Some(existing))?;
    let top = Path::new(&top).canonicalize().ok()?;
    real.starts_with(top.join("results")).then_some(top)
}

/// `YYYY-MM-DDTHH:MM:SSZ` (civil-from-days, Howard Hinnant's algorithm).
///
/// ```
/// use std::time::{Duration, UNIX_EPOCH};
/// let t = UNIX_EPOCH + Duration::from_secs(1_796_051_292);
/// assert_eq!(livecount_support::provenance::iso_date(t), "2026-11-30T15:08:12Z");
/// ```
pub fn iso_date(t: SystemTime) -> String {
    let secs = t.duration_since(UNIX_EPOCH).map_or(0, |d| d.as_secs()) as i64;
    let (days, rem) = (secs.div_euclid(86_400), secs.rem_euclid(86_400));
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    let y = yoe + era * 400 + i64::from(m <= 2);
    format!(
        "{y:04}-{m:02}-{d:02}T{:02}:{:02}:{:02}Z",
        rem / 3600,
        rem % 3600 / 60,
        rem % 60
    )
}

fn command(program: &str, args: &[&str], dir: Option<&Path>) -> Option<String> {
    command_raw(program, args, dir).map(|out| out.trim().to_owned())
}

/// `program`'s standard output as it printed it, if it ran and succeeded.
fn command_raw(program: &str, args: &[&str], dir: Option<&Path>) -> Option<String> {
    let mut cmd = Command::new(program);
    cmd.args(args);
    if let Some(dir) = dir {
        cmd.current_dir(dir);
    }
    let out = cmd.output().ok()?;
    out.status
        .success()
        .then(|| String::from_utf8_lossy(&out.stdout).into_owned())
}

/// A scratch git repository for tests of the writers' clean-tree rule: under the temp
/// directory (inside no checkout), with `results/` and the given files committed; removed on
/// drop.
#[derive(Debug)]
pub struct ScratchRepo(PathBuf);

impl ScratchRepo {
    /// Creates `livecount-<name>-<pid>` in the temp directory and commits `files`
    /// (path, text) in it.
    ///
    /// # Panics
    ///
    /// If the directory cannot be written or git fails.
    pub fn new(name: &str, files: &[(&str, &str)]) -> ScratchRepo {
        let dir = std::env::temp_dir().join(format!("livecount-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(dir.join("results")).expect("create the scratch repository");
        let repo = ScratchRepo(dir);
        repo.git(&["init", "-q"]);
        for (file, text) in files {
            repo.write(file, text);
            repo.git(&["add", file]);
        }
        repo.git(&["commit", "-qm", "one"]);
        repo
    }

    /// The repository's directory.
    pub fn path(&self) -> &Path {
        &self.0
    }

    /// Runs `git args…` in the repository and returns its standard output, trimmed.
    ///
    /// # Panics
    ///
    /// If git fails.
    pub fn git(&self, args: &[&str]) -> String {
        let out = Command::new("git")
            .args(["-c", "user.name=t", "-c", "user.email=t@t"])
            .args(["-c", "commit.gpgsign=false"])
            .args(args)
            .current_dir(&self.0)
            .output()
            .expect("git runs");
        assert!(out.status.success(), "git {args:?}: {out:?}");
        String::from_utf8_lossy(&out.stdout).trim().to_owned()
    }

    /// Writes `text` to `file` in the repository.
    ///
    /// # Panics
    ///
    /// If it cannot be written.
    pub fn write(&self, file: &str, text: &str) {
        std::fs::write(self.0.join(file), text).expect("write into the scratch repository");
    }
}

impl Drop for ScratchRepo {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn dates() {
        assert_eq!(iso_date(UNIX_EPOCH), "1970-01-01T00:00:00Z");
        let leap = UNIX_EPOCH + Duration::from_secs(951_782_400); // 2000-02-29
        assert_eq!(iso_date(leap), "2000-02-29T00:00:00Z");
        let t = UNIX_EPOCH + Duration::from_secs(1_796_051_292);
        assert_eq!(iso_date(t), "2026-11-30T15:08:12Z");
    }

    #[test]
    fn labels_slugify_the_model() {
        assert_eq!(
            label("Intel(R) Xeon(R) Processor", 2),
            "intel-r-xeon-r-processor-2c"
        );
        assert_eq!(label("  --x86_64--  ", 16), "x86-64-16c");
    }

    /// Clean, then dirty once a tracked file changes, and `unknown` outside any checkout.
    #[test]
    fn commits_say_when_the_tree_is_dirty() {
        let repo = ScratchRepo::new("commit", &[("f", "1"), ("results/r", "1")]);
        let dir = repo.path();
        let clean = commit_in(Some(dir));
        assert!(
            !clean.is_empty() && !clean.ends_with("-dirty") && clean != "unknown",
            "{clean}"
        );
        repo.write("f", "2");
        assert_eq!(commit_in(Some(dir)), format!("{clean}-dirty"));
        // Untracked files do not count, nor do committed results being rewritten.
        repo.write("f", "1");
        repo.write("new", "x");
        repo.write("results/r", "2");
        assert_eq!(commit_in(Some(dir)), clean);
        // From a subdirectory too (the exclusion is relative to the top).
        std::fs::create_dir_all(dir.join("sub")).unwrap();
        assert_eq!(commit_in(Some(&dir.join("sub"))), clean);
        let outside = std::env::temp_dir().join(format!("livecount-no-git-{}", std::process::id()));
        std::fs::create_dir_all(&outside).unwrap();
        // GIT_CEILING_DIRECTORIES would be needed if temp lived inside a checkout; it does not.
        assert_eq!(commit_in(Some(&outside)), "unknown");
        let _ = std::fs::remove_dir_all(&outside);
    }

    /// Writing into `results/` needs a clean tree: a modified or staged tracked file refuses,
    /// naming it; untracked files and rewritten results do not; outside `results/` nothing
    /// is refused.
    #[test]
    fn results_come_from_a_clean_tree() {
        let repo = ScratchRepo::new("clean", &[("f", "1"), ("results/r", "1")]);
        let dir = repo.path();
        let head = commit_in(Some(dir));
        // Not yet existing, below `results/`, a file in it, and `results/` itself.
        let dests = [
            dir.join("results/sim/new/deeper"),
            dir.join("results/r"),
            dir.join("results"),
            dir.join("sub/../results/x"),
        ];
        for dest in &dests {
            assert_eq!(commit_for(dest), Ok(head.clone()), "{}", dest.display());
        }
        // Untracked files anywhere and results being rewritten leave it clean.
        repo.write("new", "x");
        repo.write("results/untracked", "x");
        repo.write("results/r", "2");
        assert_eq!(commit_for(&dests[0]), Ok(head.clone()));

        repo.write("f", "2");
        for dest in &dests {
            let refused = commit_for(dest).expect_err("a modified tracked file is dirty");
            assert_eq!(refused.files(), [" M f"]);
            let message = refused.to_string();
            assert!(message.contains("refusing to write"), "{message}");
            assert!(message.contains("\n     M f\n"), "{message}");
            assert!(message.contains("commit these changes"), "{message}");
        }
        // Outside results/ nothing is refused (the stamp is this process's checkout's).
        for dest in [
            dir.join("target/x"),
            dir.join("resultsx"),
            dir.to_path_buf(),
        ] {
            assert!(commit_for(&dest).is_ok(), "{}", dest.display());
        }
        // Staged counts too.
        repo.git(&["add", "f"]);
        let refused = commit_for(&dests[0]).expect_err("a staged change is dirty");
        assert_eq!(refused.files(), ["M  f"]);
        repo.git(&["commit", "-qm", "two"]);
        let head = commit_in(Some(dir));
        assert_eq!(commit_for(&dests[0]), Ok(head));
    }

    /// `scripts/provenance.py`, the scripts' copy of [`commit_for`], answers as it does on
    /// the same trees: the same commit, or the same refusal word for word.
    #[test]
    fn the_scripts_twin_agrees() {
        let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../scripts/provenance.py");
        let twin = |dest: &Path| {
            let out = Command::new("python3")
                .arg(&script)
                .arg(dest)
                .output()
                .expect("python3 runs scripts/provenance.py");
            let text = |b: &[u8]| String::from_utf8_lossy(b).trim_end().to_owned();
            if out.status.success() {
                Ok(text(&out.stdout))
            } else {
                Err(text(&out.stderr))
            }
        };
        let repo = ScratchRepo::new("twin", &[("f", "1"), ("results/r", "1")]);
        let dir = repo.path();
        let dests = [
            dir.join("results/sim/new"),
            dir.join("results/r"),
            dir.join("sub/../results/x"),
        ];
        let agree = |state: &str| {
            for dest in &dests {
                let ours = commit_for(dest).map_err(|e| e.to_string());
                assert_eq!(twin(dest), ours, "{state}: {}", dest.display());
            }
            // Outside results/ neither refuses (each stamps its own process's checkout).
            assert!(twin(&dir.join("target/x")).is_ok(), "{state}");
        };
        agree("clean");
        repo.write("new", "x");
        repo.write("results/r", "2");
        agree("untracked and rewritten results");
        repo.write("f", "2");
        agree("modified");
        repo.git(&["add", "f"]);
        agree("staged");
    }
}
