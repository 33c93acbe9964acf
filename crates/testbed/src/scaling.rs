//! From a simulator scenario to real agents: each backend's CPU quota, the chunk pacing
//! that makes a speaking session cost what the scenario says, and the agent flags.
//!
//! A scenario's costs are in cores of a size-1 backend. The testbed gives a size-1 backend
//! `core_scale` real cores (a cgroup quota), so a speaking session must burn
//! `speaking_cost × core_scale` real cores: it gets chunks of `WORK_MS` of CPU each,
//! `chunk_gap_ms` apart, with `WORK_MS ÷ (WORK_MS + chunk_gap_ms)` equal to that share.

use livecount_sim::Scenario;

/// CPU per response chunk, milliseconds (the agent's `--work-ms`).
pub const WORK_MS: u64 = 1;

/// The agents' maximum session length is the scenario's plus this.
pub const MAX_SESSION_SLACK_S: f64 = 2.0;

/// What the testbed does not replay: backend-side events, and more proxies than it starts
/// instances of a balancer.
fn unsupported(s: &Scenario) -> Option<&'static str> {
    if !s.failures.is_empty() {
        Some("failures")
    } else if s.rolling_restart.is_some() {
        Some("rolling_restart")
    } else if !s.waves.is_empty() {
        Some("waves")
    } else if !s.reports.stale.is_empty() {
        Some("reports.stale")
    } else if s.reports.loss > 0.0 {
        Some("reports.loss")
    } else if s.balancer.proxies > crate::balancer::MAX_INSTANCES {
        Some("balancer.proxies above 16 (instances of one balancer)")
    } else if s.sessions.cost_sigma > 0.0 {
        Some("sessions.cost_sigma")
    } else if s.sessions.idle_cost > 0.0 {
        Some("sessions.idle_cost above 0 (a listening agent burns next to nothing)")
    } else if s
        .backends
        .iter()
        .any(|b| b.disconnect_share > 0.0 || b.slowdown != 1.0)
    {
        Some("backends' disconnect_share or slowdown")
    } else {
        None
    }
}

/// One agent's size.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct AgentShape {
    /// Its scenario size (cores of a size-1 backend).
    pub size: f64,
    /// Real cores: its cgroup quota and `--cores`.
    pub cores: f64,
    /// `--max-sessions`.
    pub max_sessions: u64,
}

/// The agents' common flags and the pacing of speech.
#[derive(Debug, Clone, PartialEq)]
pub struct Scaling {
    /// Real cores per scenario core.
    pub core_scale: f64,
    /// `--chunk-gap-ms`.
    pub chunk_gap_ms: u64,
    /// `--report-secs`: the scenario's report interval (and window).
    pub report_secs: f64,
    /// `--target`.
    pub target: f64,
    /// `--safety-scaler`.
    pub safety_scaler: f64,
    /// `--max-session-secs`: the scenario's `sessions.max_s`.
    pub max_session_s: f64,
}

impl Scaling {
    /// The scaling of `scenario` at `core_scale` real cores per scenario core, and one
    /// shape per backend; an error names what the testbed cannot replay.
    ///
    /// ```
    /// use livecount_sim::Scenario;
    /// use livecount_testbed::scaling::Scaling;
    ///
    /// let sc = Scenario::from_toml_str(
    ///     "description = 'x'\nduration_s = 60\n[arrivals]\nrate_per_s = 1\n\
    ///      [sessions]\nduration = 'fixed'\nmean_s = 20\nidle_cost = 0\nspeaking_cost = 0.1\n\
    ///      [reports]\ninterval_s = 0.5\nwindow_s = 0.5\n\
    ///      [[backends]]\ncount = 2\nsize = 2",
    ///     "x.toml",
    /// )?;
    /// let (scaling, shapes) = Scaling::new(&sc, 0.1).unwrap();
    /// // A speaking session burns 0.1 × 0.1 = 1 % of a core: 1 ms of CPU every 100 ms.
    /// assert_eq!(scaling.chunk_gap_ms, 99);
    /// assert_eq!(shapes.len(), 2);
    /// assert!((shapes[0].cores - 0.2).abs() < 1e-12);
    /// # Ok::<(), livecount_sim::ScenarioError>(())
    /// ```
    pub fn new(scenario: &Scenario, core_scale: f64) -> Result<(Scaling, Vec<AgentShape>), String> {
        if let Some(what) = unsupported(scenario) {
            return Err(format!("the testbed does not replay {what}"));
        }
        if !(core_scale > 0.0 && core_scale <= 1.0) {
            return Err(format!("core scale {core_scale} is not in (0, 1]"));
        }
        let r = &scenario.reports;
        if (r.interval_s - r.window_s).abs() > 1e-9 {
            return Err(format!(
                "reports.interval_s ({}) ≠ reports.window_s ({}): an agent's report interval \
                 is its window",
                r.interval_s, r.window_s
            ));
        }
        let speaking = scenario.sessions.speaking_cost * core_scale;
        let period_ms = WORK_MS as f64 / speaking;
        let gap = period_ms - WORK_MS as f64;
        if !(1.0..=60_000.0).contains(&gap) || (gap - gap.round()).abs() > 1e-6 {
            return Err(format!(
                "speaking_cost {} at core scale {core_scale} needs a chunk every {period_ms} ms \
                 for {WORK_MS} ms of CPU: choose values giving a whole gap of 1..=60000 ms",
                scenario.sessions.speaking_cost
            ));
        }
        let shapes = (0..scenario.backend_count())
            .map(|i| {
                let g = scenario.group_of(i);
                AgentShape {
                    size: g.size,
                    cores: g.size * core_scale,
                    max_sessions: u64::from(g.max_sessions),
                }
            })
            .collect();
        let scaling = Scaling {
            core_scale,
            chunk_gap_ms: gap.round() as u64,
            report_secs: r.interval_s,
            target: scenario.capacity.target,
            safety_scaler: scenario.capacity.safety_scaler,
            max_session_s: scenario.sessions.max_s,
        };
        Ok((scaling, shapes))
    }

    /// Seconds between the starts of two chunks.
    pub fn chunk_period_s(&self) -> f64 {
        (WORK_MS + self.chunk_gap_ms) as f64 / 1000.0
    }

    /// Chunks that fill a speaking phase of `seconds` (at least one).
    pub fn chunks_for(&self, seconds: f64) -> u32 {
        (seconds / self.chunk_period_s())
            .round()
            .clamp(1.0, 10_000.0) as u32
    }

    /// Every agent's flags but its name, addresses, cores and slot count.
    pub fn agent_args(&self) -> Vec<String> {
        let mut args = vec![
            ("--work-ms", WORK_MS.to_string()),
            ("--chunk-gap-ms", self.chunk_gap_ms.to_string()),
            ("--report-secs", self.report_secs.to_string()),
            ("--target", self.target.to_string()),
            ("--safety-scaler", self.safety_scaler.to_string()),
            // Two seconds past the plan's longest: a session planned just under the limit
            // whose last phase streams late under throttling is not cut; one planned past
            // it (`TimedOut`) is ended by the agent, 2 s later than the model ends it.
            (
                "--max-session-secs",
                (self.max_session_s + MAX_SESSION_SLACK_S).to_string(),
            ),
            // Listening phases are silent: the replayer's planned ends, not the agent's
            // idle timeout, end a session.
            (
                "--idle-timeout-secs",
                (self.max_session_s + 60.0).to_string(),
            ),
        ];
        args.push(("--drain-secs", "0".into()));
        args.into_iter()
            .flat_map(|(k, v)| [k.to_owned(), v])
            .collect()
    }
}
