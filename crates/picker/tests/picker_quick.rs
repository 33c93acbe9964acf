//! The picker end to end, as a user runs it: `--quick` on a tiny budget writes a
//! `results.json` that parses and holds every contender and workload, plus `REPORT.md`, the
//! plots and the maintainers' `TARGETS.md`; `--compare` reads it back; bad arguments fail
//! clearly.

use std::path::PathBuf;
use std::process::Command;

use livecount_picker::Results;
use livecount_picker::internals::contender;
use livecount_picker::results::Workload;

fn picker() -> Command {
    Command::new(env!("CARGO_BIN_EXE_livecount-picker"))
}

fn temp_dir(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("livecount-picker-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    dir
}

#[test]
fn quick_run_writes_every_contender_and_workload() {
    let dir = temp_dir("quick");
    let out = picker()
        .args([
            "--quick",
            "--budget",
            "1",
            "--no-progress",
            "--label",
            "test-machine",
            "--out",
        ])
        .arg(&dir)
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        stdout.contains("import `"),
        "a recommendation names a counter: {stdout}"
    );

    let json = std::fs::read_to_string(dir.join("results.json")).unwrap();
    let results: Results = serde_json::from_str(&json).unwrap();
    assert_eq!(results.machine.label, "test-machine");
    assert!(results.machine.cores >= 1 && !results.machine.rustc.is_empty());
    for c in contender::all() {
        assert!(
            results.figures.iter().any(|f| f.contender == c.name),
            "no figure for {}",
            c.name
        );
        assert!(
            results.ranking.iter().any(|r| r.name == c.name),
            "{} not ranked",
            c.name
        );
    }
    for w in Workload::ALL {
        assert!(
            results.figures.iter().any(|f| f.workload == w),
            "no figure for workload {w}"
        );
    }
    assert!(
        results.figures.iter().all(|f| f.samples.len() >= 3),
        "every point is repeated 3 times"
    );
    assert_eq!(results.targets.len(), 11);
    // With a JDK, Java's counters are measured beside Striped; without one the run says so.
    let java = results.machine.java.as_deref().expect("the Java line");
    let long_adder = results
        .figures
        .iter()
        .any(|f| f.contender == "Java LongAdder");
    assert_eq!(long_adder, !java.starts_with("not measured"), "{java}");
    per_cpu_is_measured_as_it_is(&results);
    let report = std::fs::read_to_string(dir.join("REPORT.md")).unwrap();
    for line in [
        "Machine: ",
        "PerCpu here: CPU ids from ",
        "Java anchors (LongAdder, AtomicLong): ",
        "| read_at_threads / read_ns | 1000 |",
        "Rust: ",
        "Commit: ",
        "Reproduce: `cargo run --release -- --quick",
    ] {
        assert!(report.contains(line), "REPORT.md lacks {line:?}");
    }
    // livecount's own targets go to a maintainers' page beside the report, not into it.
    assert!(!report.contains("MET** —"), "REPORT.md judges targets");
    let targets = std::fs::read_to_string(dir.join("TARGETS.md")).unwrap();
    assert!(
        targets.starts_with("# livecount's own targets"),
        "{targets}"
    );
    assert_eq!(targets.matches("\n- **").count(), 11, "{targets}");
    for svg in ["throughput.svg", "reader.svg"] {
        assert!(
            std::fs::read_to_string(dir.join(svg))
                .unwrap()
                .starts_with("<svg")
        );
    }

    let json_path = dir.join("results.json");
    let cmp = picker()
        .arg("--compare")
        .arg(&json_path)
        .arg("--against")
        .arg(&json_path)
        .output()
        .unwrap();
    let table = String::from_utf8_lossy(&cmp.stdout);
    assert!(cmp.status.success());
    assert!(
        table.contains("threads/PerThread/1/pairs_per_s") && table.contains("| 1.00 |"),
        "{table}"
    );
    assert!(!table.contains("REGRESSION"));
    std::fs::remove_dir_all(&dir).unwrap();
}

/// The counting allocator sees `PerCpu`'s cells: the memory workload measures exactly what
/// `memory_bytes()` says, at every thread count; and its reads were timed with 1 000 threads
/// alive, next to `PerThread`'s.
fn per_cpu_is_measured_as_it_is(results: &Results) {
    let setup = results
        .machine
        .per_cpu
        .as_ref()
        .expect("a fresh run describes PerCpu");
    assert_eq!(setup.bytes, livecount::PerCpu::new().memory_bytes());
    let memory: Vec<_> = results
        .figures
        .iter()
        .filter(|f| f.workload == Workload::Memory && f.contender == "PerCpu")
        .collect();
    assert!(memory.len() >= 4, "{memory:?}");
    for f in memory {
        assert!(
            f.samples.iter().all(|&b| b == setup.bytes as f64),
            "PerCpu at {} threads: {:?} bytes, memory_bytes() {}",
            f.param,
            f.samples,
            setup.bytes
        );
    }
    for name in ["PerCpu", "PerThread"] {
        assert!(
            results
                .figures
                .iter()
                .any(|f| f.workload == Workload::ReadAtThreads
                    && f.contender == name
                    && f.param == "1000"),
            "no read at 1000 threads for {name}"
        );
    }
}

#[test]
fn bad_arguments_fail_clearly() {
    for (args, says) in [
        (
            &["--threads", "none"][..],
            "invalid value 'none' for '--threads <N>'",
        ),
        (&["--quick", "--full"][..], "cannot be used with"),
        (
            &[
                "--compare",
                "/nonexistent/old.json",
                "--against",
                "/nonexistent/new.json",
            ][..],
            "cannot read",
        ),
    ] {
        let out = picker().args(args).output().unwrap();
        assert!(!out.status.success(), "{args:?} should fail");
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(err.contains(says), "{args:?}: {err}");
    }
}
