//! A scenario family: one bundled (or given) scenario scaled to any concurrency, its fleet
//! growing with it so that every point carries the same sessions per core as the original.

use livecount_sim::Scenario;

/// A scenario and the density it runs at, ready to be scaled.
#[derive(Debug, Clone)]
pub(crate) struct Family {
    /// The scenario's name.
    pub(crate) name: String,
    /// The file it was read from, as given.
    pub(crate) file: String,
    base: Scenario,
    /// `arrivals.target_concurrent` of the original.
    base_concurrency: f64,
}

impl Family {
    /// Loads `arg` (a path or a bundled name) as a family.
    ///
    /// # Errors
    ///
    /// An unreadable or invalid scenario, or one the sweep cannot scale: without
    /// `arrivals.target_concurrent`, or with events tied to backend numbers (failures,
    /// stale reports, a rolling restart) or an autoscaler that owns the fleet.
    pub(crate) fn load(arg: &str) -> Result<Self, String> {
        let base = crate::load(arg)?;
        let path = crate::resolve(arg);
        // A bundled scenario by its repository path: the results name no machine's checkout.
        let file = match path.strip_prefix(crate::bundled_dir()) {
            Ok(name) => std::path::Path::new("crates/sim/scenarios").join(name),
            Err(_) => path,
        };
        let file = file.display().to_string();
        Self::new(base, file)
    }

    /// `base` as a family (see [`Family::load`]).
    pub(crate) fn new(base: Scenario, file: String) -> Result<Self, String> {
        let refuse = |why: &str| Err(format!("{file}: cannot scale a scenario {why}"));
        let Some(base_concurrency) = base.arrivals.target_concurrent else {
            return refuse("without arrivals.target_concurrent");
        };
        if !base.failures.is_empty() || !base.reports.stale.is_empty() {
            return refuse("whose failures or stale reports name backends");
        }
        if base.rolling_restart.is_some() || base.autoscaler.is_some() {
            return refuse("with a rolling restart or an autoscaler");
        }
        Ok(Self {
            name: base.name.clone(),
            file,
            base,
            base_concurrency,
        })
    }

    /// Concurrent sessions per core (per unit of backend size) of the original.
    pub(crate) fn per_core(&self) -> f64 {
        self.base_concurrency / cores(&self.base)
    }

    /// The proxies in front of the fleet (not scaled).
    pub(crate) fn proxies(&self) -> u32 {
        self.base.balancer.proxies
    }

    /// The family at about `concurrency` sessions: every backend group's count scaled by
    /// `concurrency ÷` the original's and rounded (a group rounding to none is left out;
    /// at least one backend stays), then `target_concurrent` set to the original's
    /// sessions per core times the cores that gives, so the load per core is the
    /// original's exactly. The arrival window is capped at `duration_cap`, if given.
    ///
    /// # Errors
    ///
    /// A fleet or a concurrency past the simulator's limits.
    pub(crate) fn at(
        &self,
        concurrency: u32,
        duration_cap: Option<f64>,
    ) -> Result<Scenario, String> {
        let factor = f64::from(concurrency) / self.base_concurrency;
        let mut s = self.base.clone();
        for g in &mut s.backends {
            g.count = (f64::from(g.count) * factor).round() as u32;
        }
        s.backends.retain(|g| g.count > 0);
        if s.backends.is_empty() {
            let mut one = self.base.backends[0].clone();
            one.count = 1;
            s.backends.push(one);
        }
        if s.backend_count() > MAX_BACKENDS {
            return Err(format!(
                "{} at {concurrency}: {} backends, more than the simulator's {MAX_BACKENDS}",
                self.name,
                s.backend_count()
            ));
        }
        let target = self.per_core() * cores(&s);
        if !(target > 0.0 && target <= MAX_CONCURRENT) {
            return Err(format!("{} at {concurrency}: {target} sessions", self.name));
        }
        s.arrivals.target_concurrent = Some(target);
        if let Some(cap) = duration_cap {
            s.duration_s = s.duration_s.min(cap);
        }
        s.name = format!("{}@{concurrency}", self.name);
        Ok(s)
    }
}

/// The scenario validator's limits (`validate.rs`): the scaled scenario is never parsed
/// again, so the scaling keeps within them itself.
const MAX_BACKENDS: usize = 100_000;
const MAX_CONCURRENT: f64 = 1e8;

/// Total cores: Σ count × size.
pub(crate) fn cores(s: &Scenario) -> f64 {
    s.backends.iter().map(|g| f64::from(g.count) * g.size).sum()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn family(text: &str) -> Result<Family, String> {
        let s = Scenario::from_toml_str(text, "inline.toml").map_err(|e| e.to_string())?;
        Family::new(s, "inline.toml".to_owned())
    }

    const MIXED: &str = "description = 'x'\nduration_s = 1800\n[arrivals]\n\
        target_concurrent = 600\n[sessions]\nduration = 'exponential'\nmean_s = 60\n\
        [[backends]]\ncount = 4\nsize = 1.0\n[[backends]]\ncount = 4\nsize = 2.0\n\
        [[backends]]\ncount = 2\nsize = 4.0";

    #[test]
    fn the_fleet_scales_and_the_load_per_core_stays() {
        let f = family(MIXED).unwrap();
        assert_eq!(f.per_core(), 30.0);
        // 300: half of everything.
        let s = f.at(300, None).unwrap();
        let counts: Vec<u32> = s.backends.iter().map(|g| g.count).collect();
        assert_eq!(counts, [2, 2, 1]);
        assert_eq!(s.arrivals.target_concurrent, Some(300.0));
        assert_eq!((s.name.as_str(), s.duration_s), ("@300", 1800.0));
        // 100: the 4-core group rounds away; 3 cores hold 90 sessions.
        let s = f.at(100, Some(600.0)).unwrap();
        let sizes: Vec<(u32, f64)> = s.backends.iter().map(|g| (g.count, g.size)).collect();
        assert_eq!(sizes, [(1, 1.0), (1, 2.0)]);
        assert_eq!(
            (s.arrivals.target_concurrent, s.duration_s),
            (Some(90.0), 600.0)
        );
        // 10: nothing rounds up; one backend stays.
        let s = f.at(10, None).unwrap();
        assert_eq!(
            (s.backend_count(), s.arrivals.target_concurrent),
            (1, Some(30.0))
        );
        assert!(f.at(10_000_000, None).is_err(), "past the fleet limit");
    }

    #[test]
    fn unscalable_scenarios_are_refused() {
        let rate = MIXED.replace("target_concurrent = 600", "rate_per_s = 10");
        assert!(family(&rate).unwrap_err().contains("target_concurrent"));
        let failing = format!("{MIXED}\n[[failures]]\nbackend = 3\nat_s = 10");
        assert!(family(&failing).unwrap_err().contains("name backends"));
    }
}
