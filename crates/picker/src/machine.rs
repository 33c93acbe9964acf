//! `Machine`: what a result was measured on (CPU, cores, toolchain, commit, date).

use std::time::SystemTime;

use livecount_support::provenance;

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
    /// `git rev-parse --short HEAD`, with `-dirty` if tracked files have uncommitted changes.
    pub commit: String,
    /// UTC date and time of the run, ISO 8601.
    pub date: String,
    /// How `livecount::PerCpu` counts here, which its figures depend on (`None` in results
    /// from before it existed).
    #[serde(default)]
    pub per_cpu: Option<PerCpuSetup>,
    /// The JVM whose `LongAdder` and `AtomicLong` were measured beside `Striped` (`java
    /// -version`'s first line), or why none was (`None` in results from before the probe).
    #[serde(default)]
    pub java: Option<String>,
}

/// What `livecount::PerCpu::new()` chose on this machine.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct PerCpuSetup {
    /// Where its updates learn their CPU: `livecount::CpuSource::name`.
    pub source: String,
    /// Per-CPU cells (configured CPUs), besides the overflow cell.
    pub cells: usize,
    /// `PerCpu::memory_bytes()`: the size the memory workload should measure.
    pub bytes: usize,
}

impl PerCpuSetup {
    /// What a fresh `PerCpu` chose in this process.
    pub(crate) fn detect() -> PerCpuSetup {
        let counter = livecount::PerCpu::new();
        PerCpuSetup {
            source: counter.cpu_source().name().to_owned(),
            cells: counter.cells(),
            bytes: counter.memory_bytes(),
        }
    }
}

impl Machine {
    /// Describes the machine this process runs on (through `livecount_support::provenance`,
    /// which `lbsim` shares).
    pub fn detect() -> Machine {
        let cpu_model = provenance::cpu_model();
        let cores = cores();
        Machine {
            label: provenance::label(&cpu_model, cores),
            cpu_model,
            cores,
            rustc: provenance::rustc(),
            commit: provenance::commit(),
            date: provenance::iso_date(SystemTime::now()),
            per_cpu: Some(PerCpuSetup::detect()),
            java: None,
        }
    }
}

/// Available parallelism (at least 1).
pub fn cores() -> usize {
    provenance::cores()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The detected machine is self-consistent: its label is its model's and cores', and the
    /// date is an ISO 8601 instant (the helpers themselves are tested in livecount-support).
    #[test]
    fn a_detected_machine_describes_itself() {
        let m = Machine::detect();
        assert_eq!(m.label, provenance::label(&m.cpu_model, m.cores));
        assert!(m.cores >= 1);
        assert!(
            m.rustc.starts_with("rustc ") || m.rustc == "unknown",
            "{}",
            m.rustc
        );
        assert_eq!(m.date.len(), "2026-11-30T15:08:12Z".len(), "{}", m.date);
        assert!(m.date.ends_with('Z'));
        let per_cpu = m.per_cpu.expect("detected");
        assert!(per_cpu.cells >= m.cores, "{per_cpu:?}");
        assert!(per_cpu.bytes >= 128 * (per_cpu.cells + 1), "{per_cpu:?}");
    }
}
