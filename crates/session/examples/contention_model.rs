//! The contention audit's MODEL of throughput beyond this machine (docs/verification.md): this
//! machine's cost of moving a contended cache line, each workload's start+end pairs per
//! second on 1 and 2 threads measured side by side, and the audit's shared writes per pair
//! (`scripts/audit.sh --report` writes them to `results/contention-audit/audit.tsv`)
//! combined into a prediction for 16, 64 and 128 cores, checked against the 2-thread run.
//!
//!     cargo run --release -p livecount-session --example contention_model -- results/contention-audit/audit.tsv
//!
//! Prints markdown. A run is `ITERATIONS` pairs per thread from a barrier, timed by each
//! thread, divided by the slowest thread's time; each run also records the cores it got (its
//! threads' CPU time over its wall time). Each workload runs `REPS` times on 1 and on 2
//! threads, all interleaved: the 1-thread figure is the fastest run, the 2-thread one the run
//! whose threads ran at once the most. A shared VM is noisy: ballpark. Run it without `nice`
//! where other work shares the machine, or the two threads seldom run at once.
//!
//! The model, per workload at N cores (N threads, one per core):
//!
//! ```text
//! X(N) = min( N / (t1 + τ·tx) ,  1 / (h·tx) )
//! ```
//!
//! * `t1`: seconds per pair on 1 thread (measured here);
//! * `tx`: seconds per write to a line two cores write in turn (measured here: two threads
//!   `fetch_add` one line, total time over total writes);
//! * `τ`: transfers per pair, from the audit at N threads: the writes to shared lines times
//!   the chance the previous write was another thread's, if the sharers run at once;
//! * `h`: writes per pair to the busiest shared line (the audit's `hottest`): a line takes
//!   one write at a time, so it caps the whole workload at `1 / (h·tx)`.
//!
//! No term for memory bandwidth, the interconnect's distance (a line moving across a large
//! chip or between sockets costs several times `tx` measured between two vCPUs), or
//! frequency: for a design that shares lines the model is an upper bound.

use std::collections::HashMap;
use std::hint::black_box;
use std::sync::Barrier;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use crossbeam_utils::CachePadded;
use livecount::{Counter, PerCpu, PerThread, Sharded, Single, Striped};
use livecount_session::{EndReason, SessionTracker};

/// Pairs per thread in one run.
const ITERATIONS: u64 = 2_000_000;
/// Runs per figure (the best is kept).
const REPS: usize = 7;
/// Shared-line runs per round: the line-transfer cost is the median of those whose threads
/// ran at once at least half the time.
const SHARED_SAMPLES: usize = 3;
/// The core counts the model predicts.
const CORES: [usize; 3] = [16, 64, 128];

/// One timed run: operations per second over the slowest thread's time, and the cores the
/// run got (the threads' CPU time over that wall time: below the thread count when the
/// machine's other work took turns with them).
#[derive(Clone, Copy, Debug, Default)]
struct Run {
    rate: f64,
    cores: f64,
}

/// Runs `op` `ITERATIONS` times on each of `threads` threads released together.
fn run(threads: usize, op: &(dyn Fn(usize) + Sync)) -> Run {
    let barrier = Barrier::new(threads);
    let times: Vec<(Duration, Option<Duration>)> = std::thread::scope(|s| {
        let workers: Vec<_> = (0..threads)
            .map(|i| {
                let barrier = &barrier;
                s.spawn(move || {
                    op(i); // warm: register the thread with the counter and the table
                    barrier.wait();
                    let (start, cpu) = (Instant::now(), thread_cpu_time());
                    for _ in 0..ITERATIONS {
                        op(i);
                    }
                    let cpu = cpu.zip(thread_cpu_time()).map(|(a, b)| b.saturating_sub(a));
                    (start.elapsed(), cpu)
                })
            })
            .collect();
        workers.into_iter().map(|w| w.join().unwrap()).collect()
    });
    let wall = times.iter().map(|t| t.0).max().unwrap_or(Duration::MAX);
    let cpu: Option<Duration> = times.iter().map(|t| t.1).sum();
    Run {
        rate: (threads as u64 * ITERATIONS) as f64 / wall.as_secs_f64(),
        cores: cpu.map_or(threads as f64, |cpu| {
            (cpu.as_secs_f64() / wall.as_secs_f64()).min(threads as f64)
        }),
    }
}

/// The calling thread's CPU time.
#[cfg(target_os = "linux")]
fn thread_cpu_time() -> Option<Duration> {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `ts` is a valid, writable `timespec`; the call writes nothing else.
    let ok = unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut ts) } == 0;
    ok.then(|| Duration::new(ts.tv_sec as u64, ts.tv_nsec as u32))
}

/// No per-thread CPU clock here: runs are taken to get a core per thread.
#[cfg(not(target_os = "linux"))]
fn thread_cpu_time() -> Option<Duration> {
    None
}

fn pair<C: Counter>(counter: &C) {
    let token = black_box(counter.increment());
    counter.decrement(token);
}

/// A start+end pair of one workload, run by thread `i`.
type Op = Box<dyn Fn(usize) + Sync>;

/// The workloads: the audit's name for each, and a start+end pair of it.
fn workloads() -> Vec<(&'static str, Op)> {
    let single = Single::new();
    let sharded = Sharded::new();
    let striped = Striped::new();
    let per_thread = PerThread::new();
    let per_cpu = PerCpu::new();
    let tracker = SessionTracker::new();
    vec![
        ("Single", Box::new(move |_| pair(&single))),
        ("Sharded", Box::new(move |_| pair(&sharded))),
        ("Striped", Box::new(move |_| pair(&striped))),
        ("PerThread", Box::new(move |_| pair(&per_thread))),
        ("PerCpu", Box::new(move |_| pair(&per_cpu))),
        (
            "SessionTracker (PerThread)",
            Box::new(move |_| {
                black_box(tracker.start()).end(EndReason::Completed);
            }),
        ),
    ]
}

/// The line-transfer measurement: one thread `fetch_add`ing its own line, and two threads
/// each on its own line.
fn own_line_runs() -> [Run; 2] {
    let own = [
        CachePadded::new(AtomicU64::new(0)),
        CachePadded::new(AtomicU64::new(0)),
    ];
    // Relaxed: only the line's movement is measured; nothing is published.
    let on_own = |i: usize| {
        own[i].fetch_add(1, Ordering::Relaxed);
    };
    [run(1, &on_own), run(2, &on_own)]
}

/// Two threads `fetch_add`ing one shared line.
fn shared_line_run() -> Run {
    let shared = CachePadded::new(AtomicU64::new(0));
    // Relaxed: as in `own_line_runs`.
    run(2, &|_| {
        shared.fetch_add(1, Ordering::Relaxed);
    })
}

/// Keeps the faster of two runs.
fn keep_best(best: &mut Run, new: Run) {
    if new.rate > best.rate {
        *best = new;
    }
}

/// Keeps the run whose threads ran at once the most (the fastest among equals): the fastest
/// 2-thread run of a workload that shares a line is the one whose threads overlapped least,
/// which says little about sharing.
fn keep_most_overlap(kept: &mut Run, new: Run) {
    let key = |r: &Run| ((r.cores * 20.0).round() as u64, r.rate);
    if key(&new) > key(kept) {
        *kept = new;
    }
}

/// The machine's load average over the last minute (`/proc/loadavg`), if it has one.
fn load_average() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .ok()
        .and_then(|s| s.split_whitespace().next().map(str::to_owned))
        .unwrap_or_else(|| "unknown".to_owned())
}

/// The audit's figures for one workload at one thread count: (τ, h) per pair.
type AuditRows = HashMap<(String, usize), (f64, f64)>;

/// Reads `audit.tsv` (same-thread rows), mapping the audit's counter names to this
/// program's: `Sharded (N shards)` with N the thread count (`Sharded::new()` gives a machine
/// of N cores 2N shards, so N threads fit), `PerCpu (sched_getcpu)` with the CPU as
/// writer (threads taking turns on one CPU move no line).
fn read_audit(path: &str) -> AuditRows {
    let text = std::fs::read_to_string(path)
        .unwrap_or_else(|e| panic!("{path}: {e} (run scripts/audit.sh --report first)"));
    let mut lines = text.lines();
    let header: Vec<&str> = lines.next().unwrap_or_default().split('\t').collect();
    let column = |name: &str| {
        header
            .iter()
            .position(|h| *h == name)
            .unwrap_or_else(|| panic!("{path}: no column {name:?} in {header:?}"))
    };
    let (workload, counter, threads, pairs) = (
        column("workload"),
        column("counter"),
        column("threads"),
        column("pairs"),
    );
    let (expected, hottest, cross) = (
        column("expected_transfers"),
        column("hottest"),
        column("cross_cpu_writes"),
    );
    let mut rows = AuditRows::new();
    for line in lines {
        let f: Vec<&str> = line.split('\t').collect();
        let number = |i: usize| -> f64 {
            f[i].parse()
                .unwrap_or_else(|_| panic!("{path}: {:?} is not a number in {line:?}", f[i]))
        };
        if f[workload] != "same thread" {
            continue;
        }
        let n = number(threads) as usize;
        let name = match f[counter] {
            "PerCpu (sched_getcpu)" => "PerCpu".to_owned(),
            c if c == format!("Sharded ({n} shards)") => "Sharded".to_owned(),
            c if c.starts_with("Sharded") => continue,
            c => c.to_owned(),
        };
        let per_pair = |x: f64| x / number(pairs);
        let figures = if name == "PerCpu" {
            (per_pair(number(cross)), 0.0)
        } else {
            (per_pair(number(expected)), per_pair(number(hottest)))
        };
        rows.insert((name, n), figures);
    }
    rows
}

/// The thread counts the audit table shows (`audit.tsv` has every count audited).
const TABLE_THREADS: [&str; 2] = ["8", "64"];

/// Prints the audit's rows at [`TABLE_THREADS`], per million start+end pairs.
fn print_audit_table(path: &str) {
    let text = std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{path}: {e}"));
    let mut lines = text.lines();
    let header: Vec<&str> = lines.next().unwrap_or_default().split('\t').collect();
    let rows: Vec<HashMap<&str, &str>> = lines
        .map(|line| header.iter().copied().zip(line.split('\t')).collect())
        .collect();
    println!("## Audit: writes per million start+end pairs (128-byte blocks, writer = thread)\n");
    println!(
        "| counter | workload | threads | writes per pair | to shared lines | shared lines | \
         most writers | to the busiest line | expected transfers | observed transfers | \
         cross-CPU writes | migrations |"
    );
    println!("|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|");
    for row in rows
        .iter()
        .filter(|r| TABLE_THREADS.contains(&r["threads"]))
    {
        let number = |k: &str| -> f64 {
            row[k]
                .parse()
                .unwrap_or_else(|_| panic!("{path}: {k} = {:?} is not a number", row[k]))
        };
        let per_million = |k: &str| format!("{:.0}", number(k) * 1e6 / number("pairs"));
        println!(
            "| {} | {} | {} | {:.2} | {} | {} | {} | {} | {} | {} | {} | {} |",
            row["counter"],
            row["workload"],
            row["threads"],
            number("writes") / number("pairs"),
            per_million("shared_writes"),
            row["shared_blocks"],
            row["max_writers"],
            per_million("hottest"),
            per_million("expected_transfers"),
            per_million("observed_transfers"),
            // Only `PerCpu` claims anything of a line's CPUs (a thread that moves between
            // CPUs writes its own line from both, which moves nothing between threads).
            if row["counter"].starts_with("PerCpu") {
                per_million("cross_cpu_writes")
            } else {
                "–".to_owned()
            },
            row["migrations"],
        );
    }
    println!();
}

/// The model's pairs per second at `n` cores.
fn model(t1: f64, tx: f64, (tau, h): (f64, f64), n: usize) -> f64 {
    let threads = n as f64 / (t1 + tau * tx);
    if h > 0.0 {
        threads.min(1.0 / (h * tx))
    } else {
        threads
    }
}

fn millions(x: f64) -> String {
    format!("{:.1} M", x / 1e6)
}

fn main() {
    let path = std::env::args()
        .nth(1)
        .unwrap_or_else(|| "results/contention-audit/audit.tsv".to_owned());
    let audit = read_audit(&path);
    print_audit_table(&path);
    let workloads = workloads();
    let load_before = load_average();
    let mut best: HashMap<(&str, usize), Run> = HashMap::new();
    let (mut own1, mut own2, mut shared2) = (Run::default(), Run::default(), Run::default());
    let mut shared_runs = Vec::new();
    for _ in 0..REPS {
        let [one, two] = own_line_runs();
        keep_best(&mut own1, one);
        keep_best(&mut own2, two);
        for _ in 0..SHARED_SAMPLES {
            let shared = shared_line_run();
            keep_most_overlap(&mut shared2, shared);
            shared_runs.push(shared);
        }
        for (name, op) in &workloads {
            keep_best(best.entry((name, 1)).or_default(), run(1, op.as_ref()));
            keep_most_overlap(best.entry((name, 2)).or_default(), run(2, op.as_ref()));
        }
    }
    println!(
        "## Line transfer (best of {REPS}; load average {load_before} before, {} after)\n",
        load_average()
    );
    println!("| `fetch_add` | writes/s | ns per write | cores the run got |\n|---|---:|---:|---:|");
    let row = |what: &str, r: Run, per: f64| {
        println!(
            "| {what} | {} | {:.2} | {:.2} |",
            millions(r.rate),
            per * 1e9 / r.rate,
            r.cores
        );
    };
    row("1 thread, its own line", own1, 1.0);
    row("2 threads, each its own line", own2, 2.0);
    row("2 threads, one shared line", shared2, 1.0);
    // A run on 2 threads that got `c` cores had both threads running at once `c - 1` of the
    // time and one alone the rest (work-conserving). Alone, a thread writes at the 1-thread
    // own-line rate; the shared line's rate while both ran is what is left. The fastest
    // shared-line run is the one whose threads overlapped least, so each run gives its own
    // figure and the median of those that overlapped at least half the time is kept.
    let mut txs: Vec<f64> = shared_runs
        .iter()
        .filter(|r| r.cores - 1.0 >= 0.5)
        .map(|r| (r.cores - 1.0) / (r.rate - (2.0 - r.cores) * own1.rate))
        .filter(|tx| tx.is_finite() && *tx > 0.0)
        .collect();
    txs.sort_by(f64::total_cmp);
    let Some(&tx) = txs.get(txs.len() / 2) else {
        println!(
            "\ntx is not measurable from this run: in no shared-line run did the two threads \
             run at once half the time. Rerun on a quieter machine."
        );
        return;
    };
    println!(
        "\nA write to a line two cores write in turn took tx = {:.2} ns (the median of {} of \
         {} shared-line runs whose threads ran at once at least half the time: {}).\n",
        tx * 1e9,
        txs.len(),
        shared_runs.len(),
        txs.iter()
            .map(|t| format!("{:.2}", t * 1e9))
            .collect::<Vec<_>>()
            .join(", ")
    );
    println!(
        "## MODEL: start+end pairs per second at N cores (N threads), checked against the runs\n"
    );
    println!(
        "The check: a 2-thread run that got c cores ran both threads at once c − 1 of the time, \
         so the model's figure for it is (2 − c) × model 1 + (c − 1) × model 2.\n"
    );
    print!(
        "| workload | measured 1 | model 1 | measured 2 (cores) | model for that run | model ÷ measured |"
    );
    CORES.iter().for_each(|n| print!(" model {n} |"));
    print!("\n|---|---:|---:|---:|---:|---:|");
    CORES.iter().for_each(|_| print!("---:|"));
    println!();
    for (name, _) in &workloads {
        let (m1, m2) = (best[&(*name, 1)], best[&(*name, 2)]);
        let t1 = 1.0 / m1.rate;
        let at = |n: usize| {
            audit
                .get(&(name.to_string(), n))
                .map(|&figures| model(t1, tx, figures, n))
        };
        let show = |x: Option<f64>| x.map_or_else(|| "no audit".to_owned(), millions);
        let both = (m2.cores - 1.0).clamp(0.0, 1.0);
        let blend = at(1)
            .zip(at(2))
            .map(|(x1, x2)| (1.0 - both) * x1 + both * x2);
        print!(
            "| {name} | {} | {} | {} ({:.2}) | {} | {} |",
            millions(m1.rate),
            show(at(1)),
            millions(m2.rate),
            m2.cores,
            show(blend),
            blend.map_or_else(|| "–".to_owned(), |p| format!("{:.2}", p / m2.rate))
        );
        CORES.iter().for_each(|&n| print!(" {} |", show(at(n))));
        println!();
    }
}
