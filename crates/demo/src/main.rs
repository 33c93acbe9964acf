//! `livecount-demo`: every livecount counter and two `AtomicI64` peers under the same
//! start+end hammering, side by side, with what a concurrent reader saw.

mod args;
mod gauge;
mod run;

use std::num::NonZeroUsize;
use std::process::ExitCode;
use std::time::Duration;

use livecount::{PerThread, Sharded, Single, Striped};

use crate::args::{Args, ArgsError};
use crate::gauge::{Gauge, Live, Padded, Plain};
use crate::run::Measurement;

/// The name of the peer every ratio is taken against.
const BASELINE: &str = "AtomicI64";

/// Hammers each contender in turn and prints one table.
///
/// **What is measured.** For each contender (`Single`, `Sharded`, `Striped`, `PerThread`, a bare
/// `std::sync::atomic::AtomicI64` and one in crossbeam's `CachePadded`), `--threads` worker
/// threads (default: twice the available parallelism) and one reader thread meet on a
/// `std::sync::Barrier`; the window is timed from that barrier until every worker has stopped
/// (a second barrier), `--seconds` later (default 1.0), so only the time all threads overlap
/// counts. Each worker does start+end pairs (`std::hint::black_box` on every token): per round
/// it starts 64 sessions, ends 32 of them itself (keeping its 8 newest open) and hands the
/// other 32 to the next worker through a `std::sync::mpsc` channel, which ends
/// them — so half the sessions end on another thread than they started on, as streams do when
/// a task migrates or a disconnect is detected elsewhere. The channel is std's lock-free
/// unbounded one, so a worker never waits for a descheduled neighbour (that would time the OS
/// scheduler rather than the counter); the `elsewhere` column shows the share of ends that
/// really crossed threads inside the window, where only ends count as pairs. Every contender
/// runs the same generic code through one small adapter trait, so the hand-off costs the same
/// for all of them and the differences
/// are the counters'.
///
/// The reader loads the value continuously and records the smallest and largest it saw, as a
/// signed number: the livecount counters cannot read below zero by construction; a single
/// `AtomicI64` cannot either (every end follows its own start in the one location's order), but
/// a sharded signed counter could, and the column is there to show it honestly. The maximum is
/// the other side: `Sharded`, `Striped` and `PerThread` read every cell's `ended`, then every
/// `started`, so a read that is slow (or descheduled between the passes, likely when threads
/// outnumber cores) also counts every session that started meanwhile: within their guarantee,
/// but far above `Single`'s and the peers' maxima, which are instantaneous values. After each
/// run every session has ended and the
/// value must be zero; the demo fails if it is not.
///
/// Columns: million start+end pairs per second (all workers together), nanoseconds per pair
/// per thread (window × threads ÷ pairs), throughput relative to the bare `AtomicI64`, the
/// share of sessions that ended on another thread, the reader's min / max and the reads it
/// performed. Numbers are ballpark: this is a demo on a
/// machine that may be busy; `results/` holds the criterion measurements.
fn main() -> ExitCode {
    let cpus = std::thread::available_parallelism().unwrap_or(NonZeroUsize::MIN);
    let args = match Args::parse(std::env::args().skip(1), cpus) {
        Ok(args) => args,
        Err(ArgsError::Help) => {
            println!("{}", ArgsError::Help);
            return ExitCode::SUCCESS;
        }
        Err(err) => {
            eprintln!("{err}");
            return ExitCode::from(2);
        }
    };
    println!(
        "livecount-demo: {} worker threads + 1 reader on {} CPUs, {:.2} s per contender; \
         half the sessions end on a neighbouring thread",
        args.threads, cpus, args.seconds
    );
    let rows = run_all(&args);
    print_table(&rows, args.threads);
    if let Some(bad) = rows.iter().find(|r| r.measured.final_value != 0) {
        eprintln!(
            "livecount-demo: {} reads {} after every session ended (expected 0)",
            bad.name, bad.measured.final_value
        );
        return ExitCode::FAILURE;
    }
    ExitCode::SUCCESS
}

/// One contender's result.
#[derive(Debug)]
struct Row {
    name: &'static str,
    measured: Measurement,
}

impl Row {
    fn mpairs_per_sec(&self) -> f64 {
        self.measured.tally.pairs as f64 / self.measured.elapsed.as_secs_f64() / 1e6
    }

    fn ns_per_pair_per_thread(&self, threads: usize) -> f64 {
        self.measured.elapsed.as_nanos() as f64 * threads as f64 / self.measured.tally.pairs as f64
    }
}

fn run_all(args: &Args) -> Vec<Row> {
    vec![
        run("Single", &Live(Single::new()), args),
        run("Sharded", &Live(Sharded::new()), args),
        run("Striped", &Live(Striped::new()), args),
        run("PerThread", &Live(PerThread::new()), args),
        run(BASELINE, &Plain::default(), args),
        run("CachePadded<AtomicI64>", &Padded::default(), args),
    ]
}

fn run(name: &'static str, gauge: &impl Gauge, args: &Args) -> Row {
    let window = Duration::from_secs_f64(args.seconds);
    let measured = run::measure(gauge, args.threads, window);
    Row { name, measured }
}

fn print_table(rows: &[Row], threads: usize) {
    let baseline = rows
        .iter()
        .find(|r| r.name == BASELINE)
        .map_or(f64::NAN, Row::mpairs_per_sec);
    println!(
        "\n{:<22} {:>7} {:>9} {:>14} {:>12} {:>9} {:>10} {:>10} {:>11}",
        "contender",
        "threads",
        "Mpairs/s",
        "ns/pair/thread",
        "vs AtomicI64",
        "elsewhere",
        "reader min",
        "reader max",
        "reads"
    );
    for row in rows {
        let m = &row.measured;
        println!(
            "{:<22} {:>7} {:>9.2} {:>14.1} {:>11.2}x {:>8.1}% {:>10} {:>10} {:>11}",
            row.name,
            threads,
            row.mpairs_per_sec(),
            row.ns_per_pair_per_thread(threads),
            row.mpairs_per_sec() / baseline,
            100.0 * m.tally.remote as f64 / m.tally.pairs.max(1) as f64,
            m.min,
            m.max,
            m.reads
        );
    }
    println!(
        "\nSingle and the AtomicI64 peers are linearizable: their max was open at one instant. \
         Sharded, Striped and PerThread may over-estimate by the sessions started during a read \
         (never under-estimate), so theirs can be far higher."
    );
    if let Some(best) = rows
        .iter()
        .max_by(|a, b| a.mpairs_per_sec().total_cmp(&b.mpairs_per_sec()))
    {
        println!(
            "fastest: {} at {:.2} M pairs/s ({:.2}x {BASELINE})",
            best.name,
            best.mpairs_per_sec(),
            best.mpairs_per_sec() / baseline
        );
    }
}
