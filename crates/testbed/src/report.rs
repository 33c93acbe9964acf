//! `REPORT.md`, `testbed.json` and `timelines.svg` for one scenario.

use std::fmt::Write as _;
use std::path::Path;
use std::time::SystemTime;

use livecount_sim::{PolicyResult, Scenario};
use livecount_support::provenance;
use serde::Serialize;

use crate::compare::{self, Finding, Metric, Side};
use crate::plot::{self, Panel};
use crate::run::RunResult;
use crate::scaling::Scaling;

/// Everything one scenario's comparison produced.
#[derive(Debug, Serialize)]
pub struct Comparison {
    /// The scenario's name.
    pub scenario: String,
    /// The commit the run started from (`livecount_support::provenance::commit_for` its
    /// destination: bare, checked clean, for the committed results).
    pub commit: String,
    /// Real cores per scenario core.
    pub core_scale: f64,
    /// The agents' pacing and flags.
    pub chunk_gap_ms: u64,
    /// Both sides per balancer.
    pub sides: Vec<Side>,
    /// Every testbed run (the first repeat's timelines are plotted).
    pub runs: Vec<RunResult>,
    /// The simulator's first-seed run per balancer (for the timelines).
    #[serde(skip)]
    pub sim_runs: Vec<PolicyResult>,
    /// The ranking findings.
    pub ranking: Vec<Finding>,
    /// The figure findings.
    pub figures: Vec<Finding>,
}

impl Comparison {
    /// Whether every ranking claim holds (the check's verdict).
    pub fn ranking_agrees(&self) -> bool {
        self.ranking.iter().all(|f| f.agrees)
    }
}

/// Writes `REPORT.md`, `testbed.json` and `timelines.svg` into `dir`.
pub fn write(
    dir: &Path,
    scenario: &Scenario,
    scaling: &Scaling,
    c: &Comparison,
    command: &str,
) -> Result<(), String> {
    std::fs::create_dir_all(dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    let json = serde_json::to_string_pretty(c).map_err(|e| e.to_string())?;
    std::fs::write(dir.join("testbed.json"), json).map_err(|e| e.to_string())?;
    let panels: Vec<Panel<'_>> = c
        .sides
        .iter()
        .zip(&c.sim_runs)
        .map(|(side, sim)| Panel {
            title: format!(
                "{} (testbed, solid) · {} (simulator, dashed)",
                side.balancer, side.policy
            ),
            real: c
                .runs
                .iter()
                .find(|r| r.balancer == side.balancer)
                .map_or(&[][..], |r| &r.samples[..]),
            simulated: &sim.spread,
        })
        .collect();
    plot::timelines(&dir.join("timelines.svg"), &panels).map_err(|e| e.to_string())?;
    let text = markdown(scenario, scaling, c, command);
    std::fs::write(dir.join("REPORT.md"), text).map_err(|e| e.to_string())
}

fn markdown(scenario: &Scenario, scaling: &Scaling, c: &Comparison, command: &str) -> String {
    let mut out = String::new();
    let cores = provenance::cores();
    let _ = writeln!(
        out,
        "# Testbed: `{}` on real balancers beside `lbsim`\n",
        scenario.name
    );
    let _ = writeln!(out, "{}\n", scenario.description);
    let _ = writeln!(
        out,
        "Machine: {} · Rust: {} · Commit: {} · Date: {}\n",
        provenance::label(&provenance::cpu_model(), cores),
        provenance::rustc(),
        c.commit,
        provenance::iso_date(SystemTime::now()),
    );
    let _ = writeln!(out, "Reproduce: `{command}`\n");
    let _ = writeln!(out, "## Setup\n");
    let _ = writeln!(
        out,
        "{} backends (sizes {}), each a `livecount-agent` in a cgroup with a CPU quota of \
         size × {} cores ({}, CFS period 10 ms); a speaking session gets a 1 ms-of-CPU chunk \
         every {} ms (the scenario's `speaking_cost` {} of a size-1 backend); every session \
         opens with a one-chunk greeting (its time to first stream). The workload is \
         `lbsim`'s own (`livecount_sim::workload::plan`): the same arrivals, lengths, \
         speaking phases, cancellations and disconnects, {} sessions per seed.\n",
        scenario.backend_count(),
        (0..scenario.backend_count())
            .map(|i| scenario.group_of(i).size.to_string())
            .collect::<Vec<_>>()
            .join(", "),
        scaling.core_scale,
        // The hierarchy the runs' fleets used (the same for every fleet of one machine).
        c.runs
            .first()
            .map_or("no fleet started", |r| r.cgroup.quota()),
        1 + scaling.chunk_gap_ms,
        scenario.sessions.speaking_cost,
        c.runs.first().map_or(0, |r| r.measured.arrivals),
    );
    let tier = &scenario.balancer;
    if tier.proxies > 1 {
        let spread = if tier.proxy_shares.is_empty() {
            "in turn".to_owned()
        } else {
            format!(
                "by shares {} (`lbsim`'s `balancer.proxy_shares`)",
                tier.proxy_shares
                    .iter()
                    .map(|s| s.to_string())
                    .collect::<Vec<_>>()
                    .join(" : ")
            )
        };
        let _ = writeln!(
            out,
            "{} independent instances of each balancer, each its own process with its own \
             counts, in front of the same backends; the sessions are spread over them {spread}, \
             session for session as the simulator spreads them over its {} proxies.\n",
            tier.proxies, tier.proxies
        );
    }
    for r in &tier.reloads {
        let _ = writeln!(
            out,
            "Instance {} of each balancer is reloaded at {} s (HAProxy `-sf`, Envoy hot \
             restart with the same configuration): the new process counts from zero while the \
             old one serves its streams to their end, as `lbsim` models a reload.\n",
            r.proxy, r.at_s
        );
    }
    let _ = writeln!(out, "## Side by side\n");
    let _ = writeln!(
        out,
        "Testbed: mean (range) over {} run(s) per balancer; simulator: mean (range) over {} \
         seed(s). Timelines: [timelines.svg](timelines.svg).\n",
        c.sides.first().map_or(0, |s| s.measured.len()),
        c.sides.first().map_or(0, |s| s.simulated.len()),
    );
    out += &compare::table(&c.sides);
    let _ = writeln!(
        out,
        "\nThe simulator's inputs measured on the testbed (per balancer, the mean of its runs): \
         the speaking cost (the scenario asks {}; the agents' per-frame work comes on top of \
         the chunks' CPU) and the idle utilisation (the scenario's default is 0.02).\n",
        scenario.sessions.speaking_cost
    );
    for side in &c.sides {
        if let Some((cost, idle)) = side.calibration {
            let _ = writeln!(
                out,
                "- {}: speaking cost {cost:.3}, idle utilisation {idle:.3}",
                side.balancer
            );
        }
    }
    let _ = writeln!(out, "\n## Agreement\n");
    let _ = writeln!(
        out,
        "Ranking on {}: where the simulator separates two balancers (its ranges over seeds \
         do not overlap), the testbed must order them the same way. Figures: each within the \
         two sides' run-to-run ranges added, plus one resolution step per side.\n",
        Metric::RANKED.map(Metric::name).join(", "),
    );
    for f in c.ranking.iter().chain(&c.figures) {
        let mark = if f.agrees { "agrees" } else { "**disagrees**" };
        let _ = writeln!(out, "- {mark}: {}", f.what);
    }
    let _ = writeln!(out, "\n## The testbed's own checks\n");
    let _ = writeln!(
        out,
        "| balancer | seed | sessions | as planned | refused | dropped | fleet CPU (cores) | \
         idle utilisation | speaking cost measured | every backend active 0, started = ended |"
    );
    let _ = writeln!(out, "|---|---:|---:|---:|---:|---:|---:|---:|---:|---|");
    for r in &c.runs {
        let m = &r.measured;
        let _ = writeln!(
            out,
            "| {} | {} | {} | {} | {} | {} | {:.3} | {:.3} | {:.3} | {} |",
            r.balancer,
            r.seed,
            m.arrivals,
            m.ended_as_planned,
            m.rejected,
            m.dropped,
            m.fleet_cpu_cores,
            r.idle_utilisation,
            r.speaking_cost_measured,
            if m.settled { "yes" } else { "**no**" },
        );
    }
    let unplanned: Vec<&String> = c.runs.iter().flat_map(|r| &r.unplanned).collect();
    if !unplanned.is_empty() {
        let _ = writeln!(
            out,
            "\nSessions that did not end as planned (first 20 per run):\n"
        );
        for u in unplanned {
            let _ = writeln!(out, "- {u}");
        }
    }
    let _ = writeln!(out, "\n## Configurations\n");
    for r in c.runs.iter().filter(|r| r.seed == scenario.seed) {
        let _ = writeln!(out, "### {}\n\n```\n{}```\n", r.balancer, r.config);
    }
    out
}
