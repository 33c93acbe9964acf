//! Range checks for scenario files: every number's allowed range, named in the error.

use crate::ScenarioError;
use crate::autoscaler::{ScaleIn, ScalingRulesConfig, Signal};
use crate::policy;
use crate::scenario::{Pattern, RestartMode, Scenario};

/// Largest fleet and longest run accepted (keeps a typo from eating the machine).
const MAX_BACKENDS: usize = 100_000;
const MAX_DURATION_S: f64 = 30.0 * 86_400.0;
/// Most proxies in the balancing tier (each holds a view of every backend).
const MAX_PROXIES: u32 = 1024;
/// Most proxy reloads in one run (a session records its proxy's reload count in 16 bits).
const MAX_RELOADS: usize = 1000;

struct Checker<'a> {
    file: &'a str,
}

impl Checker<'_> {
    fn fail(&self, key: &str, value: impl ToString, allowed: &str) -> ScenarioError {
        ScenarioError::Invalid {
            file: self.file.to_owned(),
            key: key.to_owned(),
            value: value.to_string(),
            allowed: allowed.to_owned(),
        }
    }

    /// `lo < v <= hi` (or `lo <= v` when `closed_lo`), finite.
    fn range(
        &self,
        key: &str,
        v: f64,
        lo: f64,
        hi: f64,
        closed_lo: bool,
    ) -> Result<(), ScenarioError> {
        let above = if closed_lo { v >= lo } else { v > lo };
        if v.is_finite() && above && v <= hi {
            return Ok(());
        }
        let open = if closed_lo { "[" } else { "(" };
        Err(self.fail(key, v, &format!("{open}{lo}, {hi}]")))
    }

    fn positive(&self, key: &str, v: f64, hi: f64) -> Result<(), ScenarioError> {
        self.range(key, v, 0.0, hi, false)
    }

    fn non_negative(&self, key: &str, v: f64, hi: f64) -> Result<(), ScenarioError> {
        self.range(key, v, 0.0, hi, true)
    }

    fn share(&self, key: &str, v: f64) -> Result<(), ScenarioError> {
        self.range(key, v, 0.0, 1.0, true)
    }

    /// A key that only makes sense with another pattern.
    fn unused(&self, key: &str, present: bool, pattern: &str) -> Result<(), ScenarioError> {
        if present {
            return Err(self.fail(key, "(set)", &format!("only with pattern = \"{pattern}\"")));
        }
        Ok(())
    }
}

/// A list that is not empty and names nothing twice.
fn distinct<T: PartialEq + Copy>(
    c: &Checker<'_>,
    key: &str,
    items: &[T],
    name: fn(T) -> &'static str,
) -> Result<(), ScenarioError> {
    let names: Vec<&str> = items.iter().map(|&t| name(t)).collect();
    if names.is_empty() {
        return Err(c.fail(key, "[]", "at least one"));
    }
    if let Some((i, n)) = names
        .iter()
        .enumerate()
        .find(|(i, n)| names[..*i].contains(n))
    {
        return Err(c.fail(
            &format!("{key}[{i}]"),
            format!("\"{n}\""),
            "each value once",
        ));
    }
    Ok(())
}

/// An HPA `behavior` direction: the API server's ranges (stabilization [0, 3600] s, a
/// policy's value > 0 and period (0, 1800] s, at least one policy).
fn validate_rules(c: &Checker<'_>, key: &str, r: &ScalingRulesConfig) -> Result<(), ScenarioError> {
    if let Some(s) = r.stabilization_s {
        c.non_negative(&format!("{key}.stabilization_s"), s, 3600.0)?;
    }
    let Some(policies) = &r.policies else {
        return Ok(());
    };
    if policies.is_empty() {
        return Err(c.fail(&format!("{key}.policies"), "[]", "at least one policy"));
    }
    for (i, p) in policies.iter().enumerate() {
        c.positive(
            &format!("{key}.policies[{i}].value"),
            f64::from(p.value),
            1e9,
        )?;
        c.positive(&format!("{key}.policies[{i}].period_s"), p.period_s, 1800.0)?;
    }
    Ok(())
}

impl Scenario {
    pub(crate) fn validate(&self, file: &str) -> Result<(), ScenarioError> {
        let c = Checker { file };
        c.positive("duration_s", self.duration_s, MAX_DURATION_S)?;
        if let Some(s) = self.sample_interval_s {
            c.positive("sample_interval_s", s, MAX_DURATION_S)?;
        }
        for p in &self.policies {
            if !policy::NAMES.contains(&p.as_str()) {
                return Err(c.fail("policies", format!("\"{p}\""), &policy::NAMES.join(", ")));
            }
        }
        self.validate_arrivals(&c)?;
        self.validate_sessions(&c)?;
        self.validate_fleet(&c)?;
        self.validate_reports(&c)?;
        self.validate_rolling_restart(&c)?;
        self.validate_autoscaler(&c)
    }

    fn validate_autoscaler(&self, c: &Checker<'_>) -> Result<(), ScenarioError> {
        let Some(a) = &self.autoscaler else {
            return Ok(());
        };
        if self.rolling_restart.is_some() || !self.failures.is_empty() {
            return Err(c.fail(
                "autoscaler",
                "(set, with [rolling_restart] or [[failures]])",
                "an autoscaler alone: it owns which backends are up",
            ));
        }
        let pool = self.backend_count();
        let count = |key: &str, v: u32, lo: u32, hi: usize| {
            if v >= lo && v as usize <= hi {
                Ok(())
            } else {
                Err(c.fail(key, v, &format!("[{lo}, {hi}]")))
            }
        };
        count("autoscaler.min_replicas", a.min_replicas, 1, pool)?;
        let bound = "[min_replicas, the [[backends]] pool's count]";
        if a.max_replicas < a.min_replicas || a.max_replicas as usize > pool {
            return Err(c.fail(
                "autoscaler.max_replicas",
                a.max_replicas,
                &format!("{bound} = [{}, {pool}]", a.min_replicas),
            ));
        }
        count(
            "autoscaler.initial_replicas",
            a.initial(),
            a.min_replicas,
            a.max_replicas as usize,
        )?;
        c.non_negative("autoscaler.startup_s", a.startup_s, MAX_DURATION_S)?;
        c.positive("autoscaler.sync_period_s", a.sync_period_s, 3600.0)?;
        c.range("autoscaler.tolerance", a.tolerance, 0.0, 0.99, true)?;
        c.share("autoscaler.reconnect_share", a.reconnect_share)?;
        c.non_negative(
            "autoscaler.reconnect_after_s",
            a.reconnect_after_s,
            MAX_DURATION_S,
        )?;
        distinct(c, "autoscaler.signals", &a.signals, Signal::name)?;
        distinct(c, "autoscaler.scale_in", &a.scale_in, ScaleIn::name)?;
        for signal in [Signal::Cpu, Signal::Sessions, Signal::Capacity] {
            let key = format!("autoscaler.{}_target", signal.name());
            match (a.signals.contains(&signal), a.target(signal)) {
                (true, Some(t)) if signal == Signal::Sessions => c.positive(&key, t, 1e9)?,
                (true, Some(t)) => c.range(&key, t, 0.0, 1.0, false)?,
                (true, None) => c.positive(&key, f64::NAN, 1e9)?,
                (false, Some(_)) => {
                    let only = format!("only with \"{}\" in autoscaler.signals", signal.name());
                    return Err(c.fail(&key, "(set)", &only));
                }
                (false, None) => {}
            }
        }
        if a.share_includes_draining && !a.signals.contains(&Signal::Capacity) {
            return Err(c.fail(
                "autoscaler.share_includes_draining",
                "true",
                "only with \"capacity\" in autoscaler.signals",
            ));
        }
        match (a.scale_in.contains(&ScaleIn::Drain), a.drain_deadline_s) {
            (true, d) => c.positive(
                "autoscaler.drain_deadline_s",
                d.unwrap_or(f64::NAN),
                MAX_DURATION_S,
            )?,
            (false, Some(_)) => {
                return Err(c.fail(
                    "autoscaler.drain_deadline_s",
                    "(set)",
                    "only with \"drain\" in autoscaler.scale_in",
                ));
            }
            (false, None) => {}
        }
        validate_rules(c, "autoscaler.scale_up", &a.scale_up)?;
        validate_rules(c, "autoscaler.scale_down", &a.scale_down)
    }

    fn validate_rolling_restart(&self, c: &Checker<'_>) -> Result<(), ScenarioError> {
        let Some(r) = &self.rolling_restart else {
            return Ok(());
        };
        c.non_negative("rolling_restart.start_s", r.start_s, MAX_DURATION_S)?;
        c.positive("rolling_restart.restart_s", r.restart_s, MAX_DURATION_S)?;
        c.non_negative("rolling_restart.gap_s", r.gap_s, MAX_DURATION_S)?;
        c.share("rolling_restart.reconnect_share", r.reconnect_share)?;
        c.non_negative(
            "rolling_restart.reconnect_after_s",
            r.reconnect_after_s,
            MAX_DURATION_S,
        )?;
        match r.mode {
            RestartMode::Drain => c.positive(
                "rolling_restart.drain_deadline_s",
                r.drain_deadline_s.unwrap_or(f64::NAN),
                MAX_DURATION_S,
            )?,
            RestartMode::Cut if r.drain_deadline_s.is_some() => {
                return Err(c.fail(
                    "rolling_restart.drain_deadline_s",
                    "(set)",
                    "only with mode = \"drain\"",
                ));
            }
            RestartMode::Cut => {}
        }
        if !self.failures.is_empty() {
            return Err(c.fail(
                "rolling_restart",
                "(set, with [[failures]])",
                "a rolling restart or [[failures]], not both",
            ));
        }
        let end = r.latest_end(self.backend_count());
        if end > self.duration_s {
            return Err(c.fail(
                "rolling_restart",
                format!("ending as late as {end} s"),
                &format!(
                    "start_s + backends × (drain_deadline_s + restart_s) + (backends − 1) × \
                     gap_s ≤ duration_s = {}",
                    self.duration_s
                ),
            ));
        }
        Ok(())
    }

    fn validate_arrivals(&self, c: &Checker<'_>) -> Result<(), ScenarioError> {
        let a = &self.arrivals;
        match (a.rate_per_s, a.target_concurrent) {
            (Some(r), None) => c.positive("arrivals.rate_per_s", r, 1e7)?,
            (None, Some(n)) => c.positive("arrivals.target_concurrent", n, 1e8)?,
            (Some(_), Some(_)) => {
                return Err(c.fail(
                    "arrivals",
                    "both rate_per_s and target_concurrent",
                    "exactly one of them",
                ));
            }
            (None, None) => {
                return Err(c.fail("arrivals", "(neither)", "rate_per_s or target_concurrent"));
            }
        }
        let is = |p: Pattern| a.pattern == p;
        if is(Pattern::Bursts) {
            c.positive(
                "arrivals.burst_every_s",
                a.burst_every_s.unwrap_or(f64::NAN),
                MAX_DURATION_S,
            )?;
            c.positive(
                "arrivals.burst_size",
                a.burst_size.map_or(f64::NAN, f64::from),
                1e7,
            )?;
        } else {
            c.unused(
                "arrivals.burst_every_s",
                a.burst_every_s.is_some(),
                "bursts",
            )?;
            c.unused("arrivals.burst_size", a.burst_size.is_some(), "bursts")?;
        }
        if is(Pattern::Diurnal) {
            c.positive(
                "arrivals.period_s",
                a.period_s.unwrap_or(f64::NAN),
                MAX_DURATION_S,
            )?;
            c.share("arrivals.min_factor", a.min_factor.unwrap_or(0.2))?;
        } else {
            c.unused("arrivals.period_s", a.period_s.is_some(), "diurnal")?;
            c.unused("arrivals.min_factor", a.min_factor.is_some(), "diurnal")?;
        }
        if is(Pattern::FlashCrowd) {
            c.non_negative("arrivals.at_s", a.at_s.unwrap_or(f64::NAN), MAX_DURATION_S)?;
            c.positive(
                "arrivals.for_s",
                a.for_s.unwrap_or(f64::NAN),
                MAX_DURATION_S,
            )?;
            c.range(
                "arrivals.factor",
                a.factor.unwrap_or(f64::NAN),
                1.0,
                1e4,
                true,
            )?;
        } else {
            c.unused("arrivals.at_s", a.at_s.is_some(), "flash_crowd")?;
            c.unused("arrivals.for_s", a.for_s.is_some(), "flash_crowd")?;
            c.unused("arrivals.factor", a.factor.is_some(), "flash_crowd")?;
        }
        Ok(())
    }

    fn validate_sessions(&self, c: &Checker<'_>) -> Result<(), ScenarioError> {
        let s = &self.sessions;
        c.positive("sessions.mean_s", s.mean_s, MAX_DURATION_S)?;
        c.range("sessions.sigma", s.sigma, 0.0, 5.0, false)?;
        c.range("sessions.alpha", s.alpha, 1.0, 100.0, false)?;
        c.positive("sessions.max_s", s.max_s, MAX_DURATION_S)?;
        c.share("sessions.short_share", s.short_share)?;
        c.positive("sessions.short_s", s.short_s, 3600.0)?;
        c.positive("sessions.idle_mean_s", s.idle_mean_s, MAX_DURATION_S)?;
        c.non_negative(
            "sessions.speaking_mean_s",
            s.speaking_mean_s,
            MAX_DURATION_S,
        )?;
        c.non_negative("sessions.idle_cost", s.idle_cost, 64.0)?;
        c.non_negative("sessions.speaking_cost", s.speaking_cost, 64.0)?;
        c.share("sessions.cancel_share", s.cancel_share)?;
        c.share("sessions.disconnect_share", s.disconnect_share)?;
        c.non_negative("sessions.cost_sigma", s.cost_sigma, 3.0)?;
        if s.cancel_share + s.disconnect_share > 1.0 {
            let sum = s.cancel_share + s.disconnect_share;
            return Err(c.fail(
                "sessions.cancel_share + sessions.disconnect_share",
                sum,
                "[0, 1]",
            ));
        }
        Ok(())
    }

    fn validate_fleet(&self, c: &Checker<'_>) -> Result<(), ScenarioError> {
        if self.backends.is_empty() {
            return Err(c.fail("backends", "[]", "at least one [[backends]] group"));
        }
        let n = self.backend_count();
        if n == 0 || n > MAX_BACKENDS {
            return Err(c.fail(
                "backends[].count (total)",
                n,
                &format!("[1, {MAX_BACKENDS}]"),
            ));
        }
        for (i, g) in self.backends.iter().enumerate() {
            c.positive(&format!("backends[{i}].size"), g.size, 1024.0)?;
            c.positive(
                &format!("backends[{i}].max_sessions"),
                f64::from(g.max_sessions),
                1e9,
            )?;
            c.range(
                &format!("backends[{i}].base_utilisation"),
                g.base_utilisation,
                0.0,
                1.0,
                true,
            )?;
            c.share(
                &format!("backends[{i}].disconnect_share"),
                g.disconnect_share,
            )?;
            c.range(
                &format!("backends[{i}].slowdown"),
                g.slowdown,
                1.0,
                1000.0,
                true,
            )?;
        }
        let backend = |key: &str, b: u32| {
            if (b as usize) < n {
                Ok(())
            } else {
                Err(c.fail(key, b, &format!("a backend index in [0, {}]", n - 1)))
            }
        };
        for (i, f) in self.failures.iter().enumerate() {
            backend(&format!("failures[{i}].backend"), f.backend)?;
            c.non_negative(&format!("failures[{i}].at_s"), f.at_s, MAX_DURATION_S)?;
            if let Some(d) = f.down_for_s {
                c.positive(&format!("failures[{i}].down_for_s"), d, MAX_DURATION_S)?;
            }
        }
        for (i, w) in self.waves.iter().enumerate() {
            c.non_negative(&format!("waves[{i}].at_s"), w.at_s, MAX_DURATION_S)?;
            c.positive(&format!("waves[{i}].for_s"), w.for_s, MAX_DURATION_S)?;
        }
        for (i, s) in self.reports.stale.iter().enumerate() {
            backend(&format!("reports.stale[{i}].backend"), s.backend)?;
            c.non_negative(
                &format!("reports.stale[{i}].from_s"),
                s.from_s,
                MAX_DURATION_S,
            )?;
        }
        c.non_negative("cpu.overhead", self.cpu.overhead, 10.0)?;
        c.range("cpu.exponent", self.cpu.exponent, 1.0, 16.0, true)?;
        c.non_negative("latency.startup_ms", self.latency.startup_ms, 1e6)?;
        c.non_negative("latency.first_stream_ms", self.latency.first_stream_ms, 1e6)
    }

    fn validate_reports(&self, c: &Checker<'_>) -> Result<(), ScenarioError> {
        let r = &self.reports;
        c.positive("reports.interval_s", r.interval_s, 3600.0)?;
        c.positive("reports.window_s", r.window_s, 3600.0)?;
        c.range("reports.loss", r.loss, 0.0, 1.0, true)?;
        c.non_negative("reports.delay_s", r.delay_s, 3600.0)?;
        c.positive("reports.health_check_s", r.health_check_s, 3600.0)?;
        let k = &self.capacity;
        c.range("capacity.target", k.target, 0.0, 1.0, false)?;
        c.range("capacity.safety_scaler", k.safety_scaler, 1.0, 1000.0, true)?;
        c.non_negative("capacity.slow_start_s", k.slow_start_s, 3600.0)?;
        let b = &self.balancer;
        c.range(
            "balancer.proxies",
            f64::from(b.proxies),
            1.0,
            f64::from(MAX_PROXIES),
            true,
        )?;
        if !b.proxy_shares.is_empty() {
            if b.proxy_shares.len() != b.proxies as usize {
                return Err(c.fail(
                    "balancer.proxy_shares",
                    format!("{} shares", b.proxy_shares.len()),
                    &format!("one per proxy ({})", b.proxies),
                ));
            }
            for s in &b.proxy_shares {
                c.positive("balancer.proxy_shares", *s, 1e9)?;
            }
        }
        if b.reloads.len() > MAX_RELOADS {
            return Err(c.fail(
                "balancer.reloads",
                b.reloads.len(),
                &format!("at most {MAX_RELOADS}"),
            ));
        }
        for r in &b.reloads {
            if r.proxy >= b.proxies {
                return Err(c.fail(
                    "balancer.reloads.proxy",
                    r.proxy,
                    &format!("a proxy, 0..{}", b.proxies),
                ));
            }
            c.non_negative("balancer.reloads.at_s", r.at_s, self.duration_s)?;
        }
        c.non_negative("balancer.probe_delay_s", b.probe_delay_s, 10.0)?;
        c.share("balancer.probe_loss", b.probe_loss)
    }
}
