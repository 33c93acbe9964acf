//! Which signal and which scale-in win a metric of an autoscaled scenario, each judged
//! with the other held fixed: the signals compared within each scale-in (and the
//! scale-ins within each signal) by the same rule as every verdict — a win only where
//! the winner's 95 % interval clears the others'. A factor wins when the same value wins
//! at every level of the other; otherwise each level's outcome is listed.

use std::fmt::Write as _;

use livecount_sim::ScenarioResult;
use livecount_sim::report::{Verdict, verdict};

/// One factor of a `signal/scale_in` label: its position (0 = signal, 1 = scale-in).
#[derive(Debug, Clone, Copy)]
enum Factor {
    Signal = 0,
    ScaleIn = 1,
}

/// The `(signal, scale_in)` parts of a variant's label (`cpu/drain`); `None` for another.
fn parts(label: &str) -> Option<(&str, &str)> {
    label.split_once('/')
}

/// The table: one row per scenario and metric, the signal's and the scale-in's verdicts.
pub(crate) fn table(t: &mut String, results: &[&ScenarioResult], metrics: &[(&str, &str)]) {
    t.push_str(
        "\nBy factor: the **signal** that wins with the scale-in held fixed (at every \
         scale-in), and the **scale-in** that wins with the signal held fixed (at every \
         signal); where the levels disagree each one's outcome is listed, \"none\" where \
         no interval clears the others'.\n\n| scenario | metric | signal | scale-in |\n\
         |---|---|---|---|\n",
    );
    for r in results {
        for (metric, header) in metrics {
            let signal = cell(r, metric, Factor::Signal);
            let scale_in = cell(r, metric, Factor::ScaleIn);
            let _ = writeln!(t, "| {} | {header} | {signal} | {scale_in} |", r.scenario);
        }
    }
}

/// The verdict on `factor` for `metric`: its winner at every level of the other factor,
/// or each level's outcome.
fn cell(r: &ScenarioResult, metric: &str, factor: Factor) -> String {
    let other = 1 - factor as usize;
    let mut levels: Vec<String> = Vec::new();
    for p in &r.policies {
        let Some((s, i)) = parts(&p.policy) else {
            continue;
        };
        let level = [s, i][other].to_owned();
        if !levels.contains(&level) {
            levels.push(level);
        }
    }
    let outcomes: Vec<(String, Option<String>)> = levels
        .into_iter()
        .map(|level| {
            let winner = among(r, metric, |label| {
                parts(label).is_some_and(|(s, i)| [s, i][other] == level)
            })
            .and_then(|w| parts(&w).map(|p| [p.0, p.1][factor as usize].to_owned()));
            (level, winner)
        })
        .collect();
    let first = outcomes.first().and_then(|(_, w)| w.clone());
    if first.is_some() && outcomes.iter().all(|(_, w)| *w == first) {
        return format!("**{}**", first.unwrap_or_default());
    }
    if outcomes.iter().all(|(_, w)| w.is_none()) {
        return "none".to_owned();
    }
    let shown: Vec<String> = outcomes
        .iter()
        .map(|(level, w)| format!("{level}: {}", w.as_deref().unwrap_or("none")))
        .collect();
    shown.join(" · ")
}

/// The label that wins `metric` among the variants `keep` selects, if one does.
fn among(r: &ScenarioResult, metric: &str, keep: impl Fn(&str) -> bool) -> Option<String> {
    let mut sub = r.clone();
    sub.policies.retain(|p| keep(&p.policy));
    sub.across_seeds
        .as_mut()?
        .policies
        .retain(|p| keep(&p.policy));
    match verdict(&sub, metric)? {
        Verdict::Wins(w) => Some(w),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use livecount_sim::{MetricStats, Scenario, report, run};

    use super::*;

    /// Two signals × two scale-ins of a tiny autoscaled run over two seeds, whose
    /// `si-cut` statistics are then set by hand: (label, mean, half-width).
    fn result(cuts: &[(&str, f64, f64)]) -> ScenarioResult {
        let s = Scenario::from_toml_str(
            "description = 'x'\nduration_s = 60\n[arrivals]\nrate_per_s = 2\n\
             [sessions]\nduration = 'exponential'\nmean_s = 20\n[[backends]]\ncount = 4\n\
             [autoscaler]\nsignals = ['cpu', 'sessions']\nscale_in = ['random', 'drain']\n\
             min_replicas = 1\nmax_replicas = 4\nstartup_s = 5\ndrain_deadline_s = 10\n\
             cpu_target = 0.5\nsessions_target = 10",
            "x.toml",
        )
        .expect("valid");
        let runs = (1..=2)
            .map(|seed| {
                let mut s = s.clone();
                s.seed = seed;
                run(&s, &["p2c_sessions".to_owned()], &mut |_, _| {})
            })
            .collect();
        let mut r = report::combine(runs);
        for p in &mut r.across_seeds.as_mut().unwrap().policies {
            let &(_, mean, half_width) = cuts.iter().find(|c| c.0 == p.policy).unwrap();
            let m: &mut MetricStats = p.metrics.iter_mut().find(|m| m.metric == "si-cut").unwrap();
            (m.mean, m.half_width) = (mean, half_width);
        }
        r
    }

    #[test]
    fn a_factor_wins_only_when_it_wins_at_every_level_of_the_other() {
        // Drain clears random at both signals; cpu clears sessions under random only.
        let r = result(&[
            ("cpu/random", 10.0, 1.0),
            ("cpu/drain", 2.0, 1.0),
            ("sessions/random", 20.0, 1.0),
            ("sessions/drain", 2.5, 1.0),
        ]);
        assert_eq!(cell(&r, "si-cut", Factor::ScaleIn), "**drain**");
        assert_eq!(
            cell(&r, "si-cut", Factor::Signal),
            "random: cpu · drain: none"
        );
        // Sessions clears cpu at both scale-ins; no scale-in clears the other anywhere.
        let r = result(&[
            ("cpu/random", 10.0, 1.0),
            ("cpu/drain", 10.5, 1.0),
            ("sessions/random", 5.0, 1.0),
            ("sessions/drain", 5.5, 1.0),
        ]);
        assert_eq!(cell(&r, "si-cut", Factor::Signal), "**sessions**");
        assert_eq!(cell(&r, "si-cut", Factor::ScaleIn), "none");
    }
}
