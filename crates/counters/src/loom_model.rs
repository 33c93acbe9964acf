//! The one way this workspace's loom models run (only under `--cfg livecount_loom`): the
//! counters' own models and `livecount-session`'s call [`bounded`].

/// Runs `f` under loom with a preemption bound of `default_bound` unless
/// `LOOM_MAX_PREEMPTIONS` says otherwise, and 10 000 branches unless `LOOM_MAX_BRANCHES` does
/// (a read walks every cell twice; loom's default of 1 000 is too tight for that).
/// `max_duration` / `max_permutations` are deliberately never set: hitting them ends the
/// exploration early and still reports a pass.
pub fn bounded(default_bound: usize, f: impl Fn() + Sync + Send + 'static) {
    let mut builder = loom::model::Builder::new();
    if builder.preemption_bound.is_none() {
        builder.preemption_bound = Some(default_bound);
    }
    if std::env::var_os("LOOM_MAX_BRANCHES").is_none() {
        builder.max_branches = 10_000;
    }
    builder.check(f);
}
