//! Reading criterion's own estimates back (`<criterion dir>/<group>/…/new/{benchmark,estimates}.json`)
//! so `cargo bench` ends with the same ranked table as the picker, computed from them.

use std::path::{Path, PathBuf};

use crate::figure::{Figure, Metric, Workload};

#[derive(serde::Deserialize)]
struct Benchmark {
    group_id: String,
    function_id: Option<String>,
    value_str: Option<String>,
    throughput: Option<Throughput>,
}

#[derive(serde::Deserialize)]
enum Throughput {
    Elements(u64),
    #[serde(other)]
    Other,
}

#[derive(serde::Deserialize)]
struct Estimates {
    median: Estimate,
}

#[derive(serde::Deserialize)]
struct Estimate {
    confidence_interval: Interval,
    point_estimate: f64,
}

#[derive(serde::Deserialize)]
struct Interval {
    lower_bound: f64,
    upper_bound: f64,
}

/// Where criterion writes: `$CRITERION_HOME`, else `$CARGO_TARGET_DIR/criterion`, else the
/// `criterion` directory of the target directory holding `exe` (`target/<profile>/deps/…`).
pub fn criterion_dir(exe: &Path) -> PathBuf {
    if let Some(home) = std::env::var_os("CRITERION_HOME") {
        return home.into();
    }
    if let Some(target) = std::env::var_os("CARGO_TARGET_DIR") {
        return PathBuf::from(target).join("criterion");
    }
    exe.ancestors().nth(3).map_or_else(
        || PathBuf::from("target/criterion"),
        |t| t.join("criterion"),
    )
}

/// A throughput [`Figure`] (median, confidence interval) for every `(group, function, value)`
/// in `wanted` that criterion has estimates for under `dir`. Figures are in pairs/s:
/// criterion's estimates are nanoseconds per iteration, and each benchmark declared the pairs
/// one iteration does as its `Throughput::Elements`.
pub fn figures(dir: &Path, wanted: &[(String, String, String)]) -> Vec<Figure> {
    let mut out = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        let Ok(entries) = std::fs::read_dir(&d) else {
            continue;
        };
        for e in entries.flatten() {
            let p = e.path();
            if p.is_dir() {
                stack.push(p);
            } else if p.file_name().is_some_and(|n| n == "benchmark.json")
                && p.parent().is_some_and(|n| n.ends_with("new"))
                && let Some(f) = figure(&p, wanted)
            {
                out.push(f);
            }
        }
    }
    out
}

fn figure(bench_json: &Path, wanted: &[(String, String, String)]) -> Option<Figure> {
    let b: Benchmark = serde_json::from_str(&std::fs::read_to_string(bench_json).ok()?).ok()?;
    let (function, value) = (b.function_id?, b.value_str?);
    if !wanted
        .iter()
        .any(|(g, f, v)| *g == b.group_id && *f == function && *v == value)
    {
        return None;
    }
    let Some(Throughput::Elements(n)) = b.throughput else {
        return None;
    };
    let est: Estimates = serde_json::from_str(
        &std::fs::read_to_string(bench_json.with_file_name("estimates.json")).ok()?,
    )
    .ok()?;
    let per_s = |ns: f64| n as f64 * 1e9 / ns;
    let m = est.median;
    Some(Figure {
        workload: Workload::from_name(&b.group_id)?,
        contender: function,
        param: value,
        metric: Metric::PairsPerS,
        median: per_s(m.point_estimate),
        low: per_s(m.confidence_interval.upper_bound),
        high: per_s(m.confidence_interval.lower_bound),
        samples: Vec::new(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_criterion_layout() {
        let dir = std::env::temp_dir().join(format!("livecount-est-{}", std::process::id()));
        let new = dir.join("threads/CachePadded_AtomicI64_/2/new");
        std::fs::create_dir_all(&new).unwrap();
        std::fs::write(
            new.join("benchmark.json"),
            r#"{"group_id":"threads","function_id":"CachePadded<AtomicI64>","value_str":"2","throughput":{"Elements":2},"full_id":"x","directory_name":"x","title":"x"}"#,
        )
        .unwrap();
        let est = r#"{"confidence_interval":{"confidence_level":0.95,"lower_bound":1.0,"upper_bound":4.0},"point_estimate":2.0,"standard_error":0.1}"#;
        std::fs::write(
            new.join("estimates.json"),
            format!(r#"{{"mean":{est},"median":{est},"median_abs_dev":{est},"slope":null,"std_dev":{est}}}"#),
        )
        .unwrap();
        let wanted = [(
            "threads".into(),
            "CachePadded<AtomicI64>".into(),
            "2".into(),
        )];
        let figs = figures(&dir, &wanted);
        std::fs::remove_dir_all(&dir).unwrap();
        assert_eq!(figs.len(), 1);
        assert_eq!(
            (figs[0].median, figs[0].low, figs[0].high),
            (1e9, 0.5e9, 2e9)
        );
        assert!(figures(Path::new("/nonexistent"), &wanted).is_empty());
    }
}
