//! `Machine`: what a result was measured on (CPU, cores, toolchain, commit, date).

use std::process::Command;
use std::time::{SystemTime, UNIX_EPOCH};

/// The `Machine / Rust / Commit` lines of a result.
#[derive(Clone, Debug, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct Machine {
    /// Directory name under `results/`: CPU model and core count, slugified.
    pub label: String,
    /// `model name` from `/proc/cpuinfo`.
    pub cpu_model: String,
    /// `std::thread::available_parallelism`.
    pub cores: usize,
    /// `rustc --version`.
    pub rustc: String,
    /// `git rev-parse --short HEAD`, with `-dirty` if the workspace has uncommitted changes.
    pub commit: String,
    /// UTC date and time of the run, ISO 8601.
    pub date: String,
}

impl Machine {
    /// Describes the machine this process runs on.
    pub fn detect() -> Machine {
        let cpu_model = cpu_model();
        let cores = cores();
        Machine {
            label: label(&cpu_model, cores),
            cpu_model,
            cores,
            rustc: command("rustc", &["--version"]).unwrap_or_else(|| "unknown".into()),
            commit: commit(),
            date: iso_date(SystemTime::now()),
        }
    }
}

/// Available parallelism (at least 1).
pub fn cores() -> usize {
    std::thread::available_parallelism().map_or(1, |n| n.get())
}

fn cpu_model() -> String {
    std::fs::read_to_string("/proc/cpuinfo")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("model name"))
                .and_then(|l| l.split_once(':'))
                .map(|(_, v)| v.trim().to_owned())
        })
        .unwrap_or_else(|| std::env::consts::ARCH.to_owned())
}

/// `"AMD EPYC 9R14 96-Core Processor"`, 2 cores → `"amd-epyc-9r14-96-core-processor-2c"`.
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

fn command(program: &str, args: &[&str]) -> Option<String> {
    let out = Command::new(program).args(args).output().ok()?;
    out.status
        .success()
        .then(|| String::from_utf8_lossy(&out.stdout).trim().to_owned())
}

fn commit() -> String {
    let Some(head) = command("git", &["rev-parse", "--short", "HEAD"]) else {
        return "unknown".into();
    };
    let dirty = command("git", &["status", "--porcelain", "--untracked-files=no"])
        .is_some_and(|s| !s.is_empty());
    if dirty { format!("{head}-dirty") } else { head }
}

/// `YYYY-MM-DDTHH:MM:SSZ` (civil-from-days, Howard Hinnant's algorithm).
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

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn dates_and_labels() {
        let t = UNIX_EPOCH + Duration::from_secs(1_796_051_292);
        assert_eq!(iso_date(t), "2026-11-30T15:08:12Z");
        assert_eq!(iso_date(UNIX_EPOCH), "1970-01-01T00:00:00Z");
        assert_eq!(
            label("AMD EPYC 9R14 96-Core Processor", 2),
            "amd-epyc-9r14-96-core-processor-2c"
        );
    }
}
