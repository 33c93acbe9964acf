//! `--anchors`: `Striped` side by side with what it is judged against — `Sharded`, `Single`
//! and Java 17's `LongAdder` and `AtomicLong` — in the threads workload at 1, 2, 4 and 8
//! threads, in one run, as one table of medians and the ratios its targets name.
//!
//! Side by side means interleaved: every contender is sized once per thread count (a pilot,
//! as in the sweep), then the repetitions go round the contenders in turn. And every run is
//! timed by the cores' busy time (the threads' CPU time in their loops over `min(threads,
//! cores)`, [`Sample::busy`]), at every thread count: on a machine shared with other work a
//! thread's window also holds the other work's turns on its core (single-thread windows here
//! varied 3× from one minute to the next while their CPU time did not), and the ratios are
//! the result.
//! `scripts/longadder.sh` installs a JDK and runs this.

use std::fmt::Write as _;
use std::path::Path;
use std::time::{Duration, Instant};

use livecount::{Sharded, Single, Striped};

use crate::contender::{Contender, Live};
use crate::java_probe::{JavaCounter, JavaProbe};
use crate::machine::Machine;
use crate::plan::{self, Ctx, Point};
use crate::workload::Sample;

/// The thread counts of the table.
pub(crate) const THREADS: [usize; 4] = [1, 2, 4, 8];

/// The shortest run, whatever the budget left.
const MIN_RUN: Duration = Duration::from_millis(20);

/// One row of the table: a contender and how to run it.
enum Runner {
    Rust(&'static str, fn(&Ctx, Point, u64) -> Sample),
    Java(JavaCounter),
}

impl Runner {
    fn name(&self) -> &'static str {
        match self {
            Runner::Rust(name, _) => name,
            Runner::Java(counter) => counter.name(),
        }
    }
}

/// What the table was measured from: the medians per contender and thread count.
#[derive(Clone, Debug, Default, PartialEq)]
pub(crate) struct Anchors {
    /// `(contender, median pairs/s at each of` [`THREADS`]`)`, in table order.
    pub rows: Vec<(String, Vec<f64>)>,
    /// The JVM, or why none ran.
    pub java: String,
}

fn rust<C: Contender>() -> Runner {
    Runner::Rust(C::NAME, |ctx, point, units| {
        plan::run::<C>(ctx, point, units)
    })
}

/// Measures the table in about `budget`, `reps` repetitions per cell.
pub(crate) fn measure(budget: Duration, reps: usize) -> Result<Anchors, String> {
    let cores = crate::machine::cores();
    let ctx = Ctx::new(cores, cores.max(2));
    // A JDK that cannot run the probe fails the table loudly (it is what the table is for);
    // no JDK at all leaves the Rust rows, saying so.
    let (mut java, note) = match JavaProbe::start() {
        Ok(Some(probe)) => {
            let version = probe.version.clone();
            (Some(probe), version)
        }
        Ok(None) => (
            None,
            "no `java` on PATH: scripts/longadder.sh installs one".into(),
        ),
        Err(e) => return Err(e),
    };
    let mut runners = vec![
        rust::<Live<Striped>>(),
        rust::<Live<Sharded>>(),
        rust::<Live<Single>>(),
    ];
    if java.is_some() {
        runners.extend(JavaCounter::ALL.map(Runner::Java));
    }
    let deadline = Instant::now() + budget;
    let mut medians = vec![Vec::new(); runners.len()];
    for (i, &t) in THREADS.iter().enumerate() {
        // An equal share of what is left for each thread count still to measure.
        let left = deadline.saturating_duration_since(Instant::now());
        let per_run = left / (THREADS.len() - i) as u32 / (runners.len() * (reps + 1)) as u32;
        // A floor, so an overrun budget still measures counting, not thread start-up.
        let per_run = per_run.max(MIN_RUN);
        let mut run = |r: &Runner, units: u64| match r {
            Runner::Rust(_, f) => Ok(f(&ctx, Point::Threads(t), units)),
            Runner::Java(counter) => java
                .as_mut()
                .expect("Java runners only with a probe")
                .run(*counter, t, units),
        };
        let mut units = Vec::new();
        for r in &runners {
            let (u, pilot, _) = plan::size(per_run, |u| run(r, u))?;
            units.push(plan::scaled(u, &pilot, per_run));
        }
        let mut samples = vec![Vec::new(); runners.len()];
        for _ in 0..reps {
            for (k, r) in runners.iter().enumerate() {
                samples[k].push(run(r, units[k])?.busy_throughput());
            }
        }
        for (k, s) in samples.iter_mut().enumerate() {
            s.sort_by(f64::total_cmp);
            medians[k].push(s[s.len() / 2]);
        }
    }
    Ok(Anchors {
        rows: runners
            .iter()
            .map(|r| r.name().to_owned())
            .zip(medians)
            .collect(),
        java: note,
    })
}

/// `--anchors`: measures the table in about `budget` with `reps` repetitions per cell,
/// writes it to `dir/anchors.md` and returns it to print.
pub(crate) fn main_with(
    budget: Duration,
    reps: usize,
    machine: &Machine,
    dir: &Path,
) -> Result<String, String> {
    let table = measure(budget, reps)?;
    let command = format!(
        "cargo run --release -- --anchors --budget {} --reps {reps}",
        budget.as_secs_f64()
    );
    let md = table.markdown(machine, &command);
    let file = dir.join("anchors.md");
    std::fs::create_dir_all(dir)
        .and_then(|()| std::fs::write(&file, &md))
        .map_err(|e| format!("cannot write to {}: {e}", dir.display()))?;
    Ok(format!("{md}\nWrote {}\n", file.display()))
}

impl Anchors {
    fn row(&self, name: &str) -> Option<&[f64]> {
        self.rows
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, v)| v.as_slice())
    }

    /// `Striped` ÷ `rival` at each thread count, if both were measured.
    pub(crate) fn ratios(&self, rival: &str) -> Option<Vec<f64>> {
        let (striped, rival) = (self.row("Striped")?, self.row(rival)?);
        Some(striped.iter().zip(rival).map(|(s, r)| s / r).collect())
    }

    /// The table as Markdown, with the machine and the command that reproduces it.
    pub(crate) fn markdown(&self, machine: &Machine, command: &str) -> String {
        let mut s = String::new();
        let _ = writeln!(s, "# Striped and its anchors — {}\n", machine.label);
        let _ = writeln!(
            s,
            "Machine: {} ({} cores)  ",
            machine.cpu_model, machine.cores
        );
        let _ = writeln!(s, "Rust: {}  ", machine.rustc);
        let _ = writeln!(s, "Java: {}  ", self.java);
        let _ = writeln!(s, "Commit: {}  ", machine.commit);
        let _ = writeln!(s, "Date: {}  ", machine.date);
        let _ = writeln!(s, "Reproduce: `{command}`\n");
        let _ = writeln!(
            s,
            "The threads workload (threads started on a barrier, each doing start+end pairs \
             back to back; Java: increment + decrement), every contender sized once per \
             thread count and the repetitions interleaved; medians, in pairs per second of \
             the cores' busy time (the threads' CPU time in their loops over min(threads, \
             cores)), so other processes' turns on the cores drop out. Absolute figures move \
             with the machine; the ratios are the result.\n"
        );
        let head: Vec<String> = THREADS.iter().map(|t| format!("{t} thr")).collect();
        let _ = writeln!(s, "| pairs/s | {} |", head.join(" | "));
        let _ = writeln!(s, "|---|{}", "---:|".repeat(THREADS.len()));
        for (name, v) in &self.rows {
            let cells: Vec<String> = v.iter().map(|x| crate::report::si(*x)).collect();
            let _ = writeln!(s, "| {name} | {} |", cells.join(" | "));
        }
        for rival in [crate::java_probe::LONG_ADDER, "Sharded", "Single"] {
            if let Some(r) = self.ratios(rival) {
                let cells: Vec<String> = r.iter().map(|x| format!("{x:.2}×")).collect();
                let _ = writeln!(s, "| **Striped ÷ {rival}** | {} |", cells.join(" | "));
            }
        }
        s
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ratios_and_table() {
        let anchors = Anchors {
            rows: vec![
                ("Striped".into(), vec![100.0, 200.0, 200.0, 200.0]),
                ("Sharded".into(), vec![100.0, 100.0, 400.0, 200.0]),
            ],
            java: "none".into(),
        };
        assert_eq!(anchors.ratios("Sharded"), Some(vec![1.0, 2.0, 0.5, 1.0]));
        assert_eq!(anchors.ratios("Java LongAdder"), None);
        let md = anchors.markdown(&Machine::detect(), "cmd");
        assert!(
            md.contains("| **Striped ÷ Sharded** | 1.00× | 2.00× | 0.50× | 1.00× |"),
            "{md}"
        );
        assert!(!md.contains("LongAdder"), "{md}");
    }
}
