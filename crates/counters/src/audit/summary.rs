//! What a recording shows: per block of memory (a 64-byte line, or the 128-byte pair the
//! adjacent-line prefetcher fetches together), who wrote it and how often, summed up as the
//! figures the contention audit reports.

use std::collections::{BTreeMap, BTreeSet, HashMap};
#[cfg(test)]
use std::panic::Location;

use super::recorder::{LINE_BYTES, Records};

/// Who counts as a distinct writer of a block.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Writer {
    /// Each thread: what a machine with a core per thread would see.
    Thread,
    /// Each CPU the writes ran on: what this machine saw (threads that take turns on one CPU
    /// do not move a line between caches).
    Cpu,
}

/// Everything one recording saw, per 64-byte line.
#[derive(Debug, Default)]
pub struct Audit {
    lines: HashMap<usize, Block>,
    transfers: u64,
    migrations: u64,
}

/// One line's (or block's) writes, by thread, by CPU and by source line.
#[derive(Clone, Debug, Default)]
struct Block {
    by_thread: Vec<(u32, u64)>,
    by_cpu: Vec<(u32, u64)>,
    by_site: Vec<((&'static str, u32), u64)>,
    writes: u64,
}

/// Adds `n` to `key`'s count in a short list (a few dozen keys at most).
fn add<K: PartialEq>(list: &mut Vec<(K, u64)>, key: K, n: u64) {
    match list.iter_mut().find(|(k, _)| *k == key) {
        Some((_, count)) => *count += n,
        None => list.push((key, n)),
    }
}

impl Block {
    fn merge(&mut self, other: &Block) {
        for &(k, n) in &other.by_thread {
            add(&mut self.by_thread, k, n);
        }
        for &(k, n) in &other.by_cpu {
            add(&mut self.by_cpu, k, n);
        }
        for &(k, n) in &other.by_site {
            add(&mut self.by_site, k, n);
        }
        self.writes += other.writes;
    }

    fn writers(&self, writer: Writer) -> &[(u32, u64)] {
        match writer {
            Writer::Thread => &self.by_thread,
            Writer::Cpu => &self.by_cpu,
        }
    }

    fn shared(&self) -> bool {
        self.by_thread.len() > 1
    }
}

/// The figures of one recording at one block size and writer identity (counts, not rates).
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Summary {
    /// Every recorded write.
    pub writes: u64,
    /// Writes to blocks that more than one writer wrote.
    pub shared_writes: u64,
    /// Blocks that more than one writer wrote.
    pub shared_blocks: u64,
    /// The most writers any block had.
    pub max_writers: u64,
    /// The writes to the most-written shared block (the bottleneck line).
    pub hottest: u64,
    /// The transfers the shared blocks would take if their writers ran at once on their own
    /// cores and interleaved at random, write by write: each block's writes times the chance
    /// that the previous write was another writer's (1 − Σ share²).
    pub expected_transfers: f64,
    /// Writes by a writer other than the block's main one (its most frequent writer).
    pub foreign_writes: u64,
    /// Transfers observed on this machine (64-byte lines, writer = thread): writes to a line
    /// whose previous write was another thread's.
    pub observed_transfers: u64,
    /// Times a writing thread's CPU changed between two of its writes.
    pub migrations: u64,
}

/// Shared blocks written by one set of source lines, for naming them.
#[derive(Clone, Debug, PartialEq)]
pub struct SharedGroup {
    /// The source lines that wrote these blocks (`file:line`), most writes first.
    pub sites: Vec<String>,
    /// How many blocks.
    pub blocks: u64,
    /// Their writes.
    pub writes: u64,
    /// The most writers one of them had.
    pub max_writers: u64,
}

impl Audit {
    pub(super) fn new(records: Vec<Records>) -> Audit {
        let mut audit = Audit::default();
        for part in records {
            for ((line, site), n) in part.writes {
                let block = audit.lines.entry(line).or_default();
                add(&mut block.by_thread, part.thread, n);
                add(&mut block.by_site, (site.file(), site.line()), n);
                block.writes += n;
            }
            for ((line, cpu), n) in part.cpus {
                add(&mut audit.lines.entry(line).or_default().by_cpu, cpu, n);
            }
            audit.transfers += part.transfers.values().sum::<u64>();
            audit.migrations += part.migrations;
        }
        audit
    }

    /// The recorded writes grouped into blocks of `block_bytes` (a multiple of 64).
    fn blocks(&self, block_bytes: usize) -> HashMap<usize, Block> {
        assert!(
            block_bytes >= LINE_BYTES && block_bytes.is_multiple_of(LINE_BYTES),
            "a block is a whole number of {LINE_BYTES}-byte lines, not {block_bytes} bytes"
        );
        let mut blocks: HashMap<usize, Block> = HashMap::new();
        for (line, data) in &self.lines {
            blocks
                .entry(line / (block_bytes / LINE_BYTES))
                .or_default()
                .merge(data);
        }
        blocks
    }

    /// The figures at `block_bytes`, with `writer` as the identity that makes a block shared.
    pub fn summary(&self, block_bytes: usize, writer: Writer) -> Summary {
        let mut s = Summary {
            observed_transfers: self.transfers,
            migrations: self.migrations,
            ..Summary::default()
        };
        for block in self.blocks(block_bytes).values() {
            let writers = block.writers(writer);
            s.writes += block.writes;
            let main = writers.iter().map(|&(_, n)| n).max().unwrap_or(0);
            s.foreign_writes += block.writes - main;
            if writers.len() < 2 {
                continue;
            }
            s.shared_writes += block.writes;
            s.shared_blocks += 1;
            s.max_writers = s.max_writers.max(writers.len() as u64);
            s.hottest = s.hottest.max(block.writes);
            let total = block.writes as f64;
            let same: f64 = writers
                .iter()
                .map(|&(_, n)| (n as f64 / total).powi(2))
                .sum();
            s.expected_transfers += total * (1.0 - same);
        }
        s
    }

    /// Writes to shared blocks (more than one thread) by source file.
    pub fn shared_writes_by_file(&self, block_bytes: usize) -> BTreeMap<&'static str, u64> {
        let mut by_file = BTreeMap::new();
        for block in self.blocks(block_bytes).values().filter(|b| b.shared()) {
            for &((file, _), n) in &block.by_site {
                *by_file.entry(file).or_default() += n;
            }
        }
        by_file
    }

    /// The shared blocks (writer = thread) grouped by the source lines that write them: a
    /// name for each kind of shared line. Most writes first.
    pub fn shared_groups(&self, block_bytes: usize) -> Vec<SharedGroup> {
        let mut groups: BTreeMap<BTreeSet<(&'static str, u32)>, SharedGroup> = BTreeMap::new();
        for block in self.blocks(block_bytes).values().filter(|b| b.shared()) {
            let sites: BTreeSet<_> = block.by_site.iter().map(|&(site, _)| site).collect();
            let group = groups.entry(sites).or_insert_with(|| SharedGroup {
                sites: Vec::new(),
                blocks: 0,
                writes: 0,
                max_writers: 0,
            });
            if group.sites.is_empty() {
                let mut sites = block.by_site.clone();
                sites.sort_by_key(|&(_, n)| std::cmp::Reverse(n));
                group.sites = sites
                    .into_iter()
                    .map(|((file, line), _)| format!("{}:{line}", short(file)))
                    .collect();
            }
            group.blocks += 1;
            group.writes += block.writes;
            group.max_writers = group.max_writers.max(block.by_thread.len() as u64);
        }
        let mut groups: Vec<_> = groups.into_values().collect();
        groups.sort_by_key(|g| std::cmp::Reverse(g.writes));
        groups
    }
}

/// `crates/session/src/slots.rs` → `session/src/slots.rs`.
fn short(file: &str) -> &str {
    file.strip_prefix("crates/").unwrap_or(file)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A thread's records: `(line, cpu, writes)`, all from one source line.
    fn thread(thread: u32, writes: &[(usize, u32, u64)]) -> Records {
        let mut records = Records {
            thread,
            ..Records::default()
        };
        for &(line, cpu, n) in writes {
            *records
                .writes
                .entry((line, Location::caller()))
                .or_default() += n;
            *records.cpus.entry((line, cpu)).or_default() += n;
        }
        records
    }

    #[test]
    fn a_line_two_threads_write_is_shared_and_its_neighbour_is_shared_at_128_bytes() {
        // Lines 10 and 11 form one 128-byte block; line 12 is alone.
        let a = Audit::new(vec![
            thread(1, &[(10, 0, 30), (12, 0, 100)]),
            thread(2, &[(10, 1, 10)]),
            thread(3, &[(11, 1, 5)]),
        ]);
        let at64 = a.summary(64, Writer::Thread);
        assert_eq!(
            (at64.writes, at64.shared_writes, at64.shared_blocks),
            (145, 40, 1)
        );
        assert_eq!(
            (at64.hottest, at64.max_writers, at64.foreign_writes),
            (40, 2, 10)
        );
        // 40 writes, shares 3/4 and 1/4: 40 × (1 − 9/16 − 1/16) = 15.
        assert!((at64.expected_transfers - 15.0).abs() < 1e-9);
        let at128 = a.summary(128, Writer::Thread);
        assert_eq!((at128.shared_writes, at128.max_writers), (45, 3));
        // By CPU, line 10 is written from CPUs 0 and 1; line 12 by CPU 0 alone.
        let cpu = a.summary(64, Writer::Cpu);
        assert_eq!((cpu.shared_writes, cpu.foreign_writes), (40, 10));
        let groups = a.shared_groups(128);
        assert_eq!(
            (groups.len(), groups[0].blocks, groups[0].writes),
            (1, 1, 45)
        );
        assert!(groups[0].sites[0].starts_with("counters/src/audit/summary.rs:"));
    }

    #[test]
    fn a_block_size_that_is_not_whole_lines_is_refused() {
        let refused = std::panic::catch_unwind(|| Audit::default().summary(96, Writer::Thread));
        assert!(refused.is_err());
    }
}
