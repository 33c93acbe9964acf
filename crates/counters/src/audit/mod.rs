//! The contention audit (`--cfg livecount_audit` only): which threads write which cache
//! lines, recorded by the crates' shared-memory shims.
//!
//! Under the cfg, `crate::sync` (and `livecount-session`'s `sync`) hand out this module's
//! atomics instead of `std`'s: every `std` atomic type under its own name, each write recorded
//! first (address, thread, CPU, source line; see `recorder`). Outside the cfg this module does
//! not exist and the shims re-export `std`'s atomics themselves, so a normal build's hot path
//! is the same machine code as before the audit existed.
//!
//! [`run`] puts a workload on N threads started together and returns the [`Audit`]; its
//! [`summary`](Audit::summary) counts the writes to lines that more than one thread writes,
//! which on a machine with a core per thread are the writes that may have to fetch the line
//! from another core's cache. A design whose hot path writes only lines its thread owns
//! shows none, however few cores the audit ran on: the audit predicts contention from who
//! writes what, not from timing.
//!
//! # Which line size
//!
//! Writes are recorded per 64-byte line (x86-64's line) and summed per 128-byte block for
//! the audit's verdicts: Intel's L2 spatial prefetcher fetches each line together with the
//! other half of its 128-byte-aligned pair (Intel 64 and IA-32 Architectures Optimization
//! Reference Manual, "Data Prefetching"), so two threads writing the two halves of one pair
//! slow each other down too. That is why `crossbeam_utils::CachePadded`, which every cell
//! here uses, pads to 128 bytes on x86-64; the audit checks the same unit the padding
//! promises.
//!
//! Not seen: writes that do not go through the shims — `PerCpu`'s restartable-sequence add
//! (an `asm!` block; the audit runs `PerCpu` through its `sched_getcpu` source instead, whose
//! cells are the same), `std` atomics a crate uses directly (the debug-build token issuer),
//! and other crates' atomics (`crossbeam-queue`'s pool in the session table, `atomic-waker`).

mod atomic;
mod recorder;
mod summary;

use std::sync::Barrier;

pub use atomic::{
    AtomicBool, AtomicI32, AtomicI64, AtomicIsize, AtomicPtr, AtomicU8, AtomicU16, AtomicU32,
    AtomicU64, AtomicUsize,
};
pub use recorder::{LINE_BYTES, Recording, flush, record};
pub use summary::{Audit, SharedGroup, Summary, Writer};

/// Runs `work(i)` on `threads` threads (`i` in `0..threads`) released together by a barrier,
/// and returns what they wrote. Each thread flushes its records when done and waits for the
/// others before it exits: the threads are the N threads of a machine running them at once,
/// so none hands its thread index (and with it its cells) to a later one, as a thread that
/// exits early would on a machine with fewer cores.
pub fn run(threads: usize, work: impl Fn(usize) + Sync) -> Audit {
    let recording = Recording::start();
    let (start, end) = (Barrier::new(threads), Barrier::new(threads));
    std::thread::scope(|s| {
        let handles: Vec<_> = (0..threads)
            .map(|i| {
                let (start, end, work) = (&start, &end, &work);
                s.spawn(move || {
                    start.wait();
                    work(i);
                    flush();
                    end.wait();
                })
            })
            .collect();
        for handle in handles {
            handle.join().expect("an audited thread panicked");
        }
    });
    Audit::new(recording.finish())
}

/// The block size the audit's verdicts use: 128 bytes (see [Which line size](self#which-line-size)).
pub const BLOCK_BYTES: usize = 128;

/// The header of [`row`]'s lines (tab-separated).
pub const COLUMNS: &str = "workload\tcounter\tthreads\tpairs\twrites\tshared_writes\tshared_blocks\tmax_writers\thottest\texpected_transfers\tobserved_transfers\tcross_cpu_writes\tmigrations";

/// One tab-separated line of [`COLUMNS`] for an audit of `pairs` start+end pairs, at
/// [`BLOCK_BYTES`] with threads as writers (and the CPU-as-writer foreign writes).
pub fn row(workload: &str, counter: &str, threads: usize, pairs: u64, audit: &Audit) -> String {
    let s = audit.summary(BLOCK_BYTES, Writer::Thread);
    let cpu = audit.summary(BLOCK_BYTES, Writer::Cpu);
    format!(
        "{workload}\t{counter}\t{threads}\t{pairs}\t{}\t{}\t{}\t{}\t{}\t{:.1}\t{}\t{}\t{}",
        s.writes,
        s.shared_writes,
        s.shared_blocks,
        s.max_writers,
        s.hottest,
        s.expected_transfers,
        s.observed_transfers,
        cpu.foreign_writes,
        s.migrations
    )
}

/// Prints `audit`'s [`row`] and its named shared lines, and, where the environment names a
/// directory in `LIVECOUNT_AUDIT_DIR`, appends them to `audit.tsv` and `shared-lines.md` there
/// (the report's inputs: `scripts/audit.sh --report`).
pub fn emit(workload: &str, counter: &str, threads: usize, pairs: u64, audit: &Audit) {
    use std::io::Write as _;
    let line = row(workload, counter, threads, pairs, audit);
    println!("{line}");
    let mut groups = format!("\n### {counter}, {workload}, {threads} threads\n\n");
    groups.push_str(
        "| written at | blocks | writes per pair | most writers |\n|---|---:|---:|---:|\n",
    );
    for g in audit.shared_groups(BLOCK_BYTES) {
        groups.push_str(&format!(
            "| {} | {} | {:.4} | {} |\n",
            g.sites.join(", "),
            g.blocks,
            g.writes as f64 / pairs as f64,
            g.max_writers
        ));
    }
    let Some(dir) = std::env::var_os("LIVECOUNT_AUDIT_DIR") else {
        return;
    };
    let dir = std::path::Path::new(&dir);
    // A file's first writer gives it its header.
    let append = |name: &str, header: &str, text: &str| {
        let path = dir.join(name);
        let text = if path.exists() {
            text.to_owned()
        } else {
            format!("{header}{text}")
        };
        let mut file = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&path)
            .unwrap_or_else(|e| panic!("cannot append to {}: {e}", path.display()));
        file.write_all(text.as_bytes())
            .unwrap_or_else(|e| panic!("cannot write {}: {e}", path.display()));
    };
    append("audit.tsv", &format!("{COLUMNS}\n"), &format!("{line}\n"));
    let title = "# Shared lines, named by the source lines that write them\n\nWritten by \
                 `scripts/audit.sh --report`: every 128-byte block that more than one thread \
                 wrote, grouped by the source lines that wrote it; writes per start+end pair.\n";
    append("shared-lines.md", title, &groups);
}

/// The thread counts to audit: `LIVECOUNT_AUDIT_THREADS` (comma-separated) or 8 and 64.
pub fn thread_counts() -> Vec<usize> {
    match std::env::var("LIVECOUNT_AUDIT_THREADS") {
        Ok(list) => list
            .split(',')
            .map(|n| {
                n.trim()
                    .parse()
                    .ok()
                    .filter(|&n: &usize| n > 0)
                    .unwrap_or_else(|| {
                        panic!("LIVECOUNT_AUDIT_THREADS: {n:?} is not a thread count")
                    })
            })
            .collect(),
        Err(_) => vec![8, 64],
    }
}
