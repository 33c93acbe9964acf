//! The ranked table, computed from figures alone, so the picker (own repetitions) and
//! `cargo bench` (criterion estimates) rank the same way; [`crate::recommend`] turns it into
//! advice.

use crate::contender::{ATOMIC, CEILING, Info, Kind};
use crate::figure::{Figure, Metric, Workload, find, lowest};
use crate::results::{Params, Row};
use crate::workload::Reader;

/// The reader to read costs at.
fn reader(params: &Params) -> Reader {
    match params.readers_hz {
        0 => Reader::Continuous,
        hz => Reader::Hz(hz),
    }
}

/// The smallest value any reader saw `name` at, in any read-under-write run.
pub(crate) fn min_read(figures: &[Figure], name: &str) -> Option<f64> {
    lowest(figures, Workload::ReadUnderWrite, name, Metric::MinRead)
}

/// The ranked table: recommendable contenders by throughput at the user's thread count, then
/// the excluded ones (the ceiling first) with the reason.
pub(crate) fn rank(figures: &[Figure], contenders: &[Info], params: &Params) -> Vec<Row> {
    let t = params.threads;
    let tput = |name: &str| find(figures, Workload::Threads, name, t, Metric::PairsPerS);
    let ceiling = tput(CEILING).map_or(f64::NAN, |f| f.median);
    let atomic = tput(ATOMIC).map_or(f64::NAN, |f| f.median);
    let reader = reader(params);
    let read_ns =
        |name: &str, at: Reader| find(figures, Workload::ReadUnderWrite, name, at, Metric::ReadNs);
    let mut rows: Vec<Row> = contenders
        .iter()
        .map(|c| {
            let f = tput(&c.name);
            let throughput = f.map_or(f64::NAN, |f| f.median);
            let read_ns = read_ns(&c.name, reader)
                .or_else(|| read_ns(&c.name, Reader::Continuous))
                .map(|f| f.median);
            let min_read = min_read(figures, &c.name);
            let bytes =
                find(figures, Workload::Memory, &c.name, t, Metric::Bytes).map(|f| f.median);
            let excluded = match c.kind {
                Kind::Ceiling => Some("not a counter: the physical limit".to_owned()),
                Kind::Oracle => Some("Mutex oracle, for tests only".to_owned()),
                Kind::Foreign => Some("another language's, for comparison".to_owned()),
                _ if min_read.is_some_and(|m| m < 0.0) => Some("read below 0".to_owned()),
                _ if bytes
                    .zip(params.max_bytes_per_counter)
                    .is_some_and(|(b, max)| b > max as f64) =>
                {
                    Some("over --max-bytes-per-counter".to_owned())
                }
                _ if f.is_none() => Some("not measured".to_owned()),
                _ => None,
            };
            Row {
                rank: None,
                name: c.name.clone(),
                import: c.import.clone(),
                kind: c.kind,
                throughput,
                spread: f.map_or(f64::NAN, Figure::spread),
                pct_ceiling: 100.0 * throughput / ceiling,
                vs_atomic: throughput / atomic,
                read_ns,
                min_read,
                bytes,
                excluded,
            }
        })
        .collect();
    rows.sort_by(|a, b| {
        let class = |r: &Row| match (r.kind, &r.excluded) {
            (Kind::Ceiling, _) => 0,
            (_, None) => 1,
            _ => 2,
        };
        class(a)
            .cmp(&class(b))
            .then(b.throughput.total_cmp(&a.throughput))
    });
    for (n, row) in (1..).zip(rows.iter_mut().filter(|r| r.excluded.is_none())) {
        row.rank = Some(n);
    }
    rows
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::test_support::{params, ranking_world as world};

    #[test]
    fn ranking_excludes_ceiling_oracle_negative_reads_and_oversized() {
        let (contenders, figures) = world();
        let rows = rank(&figures, &contenders, &params(2, Some(4096)));
        let order: Vec<(&str, Option<usize>)> =
            rows.iter().map(|r| (r.name.as_str(), r.rank)).collect();
        assert_eq!(
            order,
            [
                (CEILING, None),
                ("Fast", Some(1)),
                ("fast-counter", Some(2)),
                (ATOMIC, Some(3)),
                ("Neg", None),
                ("Big", None),
                ("Oracle", None),
            ]
        );
        assert_eq!(rows[4].excluded.as_deref(), Some("read below 0"));
        assert_eq!(
            rows[5].excluded.as_deref(),
            Some("over --max-bytes-per-counter")
        );
        assert_eq!(rows[1].pct_ceiling, 75.0);
        assert_eq!(rows[1].vs_atomic, 10.0);
        // Without a byte limit the bigger, faster counter wins.
        let rows = rank(&figures, &contenders, &params(2, None));
        assert_eq!(rows[1].name, "Big");
    }
}
