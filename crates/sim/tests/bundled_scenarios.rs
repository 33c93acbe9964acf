//! The bundled scenarios: each loads with a one-line description, and the scale check.

mod common;

use common::{bundled, scenarios_dir};
use livecount_sim::{Scenario, run};

#[test]
fn every_bundled_scenario_loads_with_a_one_line_description() {
    let files = bundled();
    assert!(files.len() >= 9, "{files:?}");
    for f in &files {
        let s = Scenario::load(f).unwrap_or_else(|e| panic!("{e}"));
        let stem = f.file_stem().and_then(|x| x.to_str()).expect("utf-8 name");
        assert_eq!(s.name, stem);
        let d = s.description.trim();
        assert!(!d.is_empty(), "{}: empty description", f.display());
        assert!(
            !d.contains('\n'),
            "{}: description spans lines",
            f.display()
        );
    }
}

#[test]
#[ignore = "heavy: 1 000 backends, ~1 M sessions; run with --release --run-ignored"]
fn scale_1000_backends_million_sessions() {
    if cfg!(debug_assertions) {
        eprintln!("scale_1000 runs in release only (cargo nextest run --release)");
        return;
    }
    let s = Scenario::load(scenarios_dir().join("scale_1000.toml")).expect("loads");
    let r = run(&s, &["hybrid_p2c".to_owned()], &mut |_, _| {});
    let p = &r.policies[0];
    let m = &p.summary;
    // Performance is measured, not asserted.
    eprintln!(
        "hybrid_p2c: {} arrivals, {} events in {:.2} s",
        m.arrivals, p.events, p.wall_s
    );
    assert!(
        (990_000..=1_010_000).contains(&m.arrivals),
        "arrivals {}",
        m.arrivals
    );
    assert_eq!(m.arrivals, m.assigned + m.rejected + m.dropped);
    assert_eq!(m.ended.values().sum::<u64>(), m.assigned);
    assert_eq!(m.counter.tracked_final_error, 0);
    assert_eq!(m.counter.tracked_max_error, 0);
}
