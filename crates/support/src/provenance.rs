//! Where a committed result came from, so a report can say it: the CPU and its cores, the
//! toolchain, the commit (marked `-dirty` when tracked files outside `results/` differ from
//! it) and the date.
//! The picker (`livecount-picker`) and the simulator's `lbsim` both stamp their reports
//! with it.
//!
//! ```
//! let cpu = livecount_support::provenance::cpu_model();
//! assert!(!cpu.is_empty());
//! assert!(livecount_support::provenance::cores() >= 1);
//! assert!(livecount_support::provenance::label(&cpu, 2).ends_with("-2c"));
//! ```

use std::path::Path;
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
    let dirty = command(
        "git",
        &[
            "status",
            "--porcelain",
            "--untracked-files=no",
            "--",
            ":(top,exclude)results",
        ],
        dir,
    )
    .is_some_and(|s| !s.is_empty());
    if dirty { format!("{head}-dirty") } else { head }
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
    let mut cmd = Command::new(program);
    cmd.args(args);
    if let Some(dir) = dir {
        cmd.current_dir(dir);
    }
    let out = cmd.output().ok()?;
    out.status
        .success()
        .then(|| String::from_utf8_lossy(&out.stdout).trim().to_owned())
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

    /// A scratch repository: clean, then dirty once a tracked file changes, and `unknown`
    /// outside any checkout.
    #[test]
    fn commits_say_when_the_tree_is_dirty() {
        let dir = std::env::temp_dir().join(format!("livecount-provenance-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        let git = |args: &[&str]| {
            let ok = Command::new("git")
                .args([
                    "-c",
                    "user.name=t",
                    "-c",
                    "user.email=t@t",
                    "-c",
                    "commit.gpgsign=false",
                ])
                .args(args)
                .current_dir(&dir)
                .output()
                .expect("git runs")
                .status
                .success();
            assert!(ok, "git {args:?}");
        };
        git(&["init", "-q"]);
        std::fs::write(dir.join("f"), "1").unwrap();
        std::fs::create_dir_all(dir.join("results")).unwrap();
        std::fs::write(dir.join("results/r"), "1").unwrap();
        git(&["add", "f", "results/r"]);
        git(&["commit", "-qm", "one"]);
        let clean = commit_in(Some(&dir));
        assert!(
            !clean.is_empty() && !clean.ends_with("-dirty") && clean != "unknown",
            "{clean}"
        );
        std::fs::write(dir.join("f"), "2").unwrap();
        assert_eq!(commit_in(Some(&dir)), format!("{clean}-dirty"));
        // Untracked files do not count, nor do committed results being rewritten.
        std::fs::write(dir.join("f"), "1").unwrap();
        std::fs::write(dir.join("new"), "x").unwrap();
        std::fs::write(dir.join("results/r"), "2").unwrap();
        assert_eq!(commit_in(Some(&dir)), clean);
        // From a subdirectory too (the exclusion is relative to the top).
        std::fs::create_dir_all(dir.join("sub")).unwrap();
        assert_eq!(commit_in(Some(&dir.join("sub"))), clean);
        let _ = std::fs::remove_dir_all(&dir);
        let outside = std::env::temp_dir().join(format!("livecount-no-git-{}", std::process::id()));
        std::fs::create_dir_all(&outside).unwrap();
        // GIT_CEILING_DIRECTORIES would be needed if temp lived inside a checkout; it does not.
        assert_eq!(commit_in(Some(&outside)), "unknown");
        let _ = std::fs::remove_dir_all(&outside);
    }
}
